"""One game on the server as a state machine fed by validated events (sans-I/O).

A GameSession holds the authoritative engine State, the two seats (their players and
the hashes of their secret tokens), the clocks, standing offers, who is online, and
the game's event log. Every method takes the time (``now``, a ``Now``: monotonic
seconds for every duration, wall seconds for the timestamps it records) as an argument
and either raises a GameError naming the problem, changing nothing, or changes the game
and returns the events it produced (``Emitted``): what to store, then what to send.
The caller stores each event, then broadcasts it: nothing here does I/O. If storing
fails, the caller puts the game back as stored (``revert``).
"""

from __future__ import annotations

import hashlib
import itertools
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import engine
from protocol import (
    Abort,
    Claim,
    Draw,
    Ended,
    Message,
    Moved,
    Offer,
    Presence,
    Rematch,
    Resign,
    Snapshot,
    decode_server,
    encode,
)
from server.clock import FIRST_MOVE_S, GameClock, Now, TimeControl
from server.errors import (
    BadRequest,
    BadToken,
    GameOver,
    IllegalMove,
    NotAllowed,
    NotYourTurn,
    SeatTaken,
    StaleMove,
)
from server.limits import TokenBucket
from server.rows import EventRow, GameEnd, GameRecord, GameRow, MoveRow

RESULTS = {0: "1-0", 1: "0-1", None: "1/2-1/2"}


def ai_draw_answer(value: float | None) -> str:
    """An AI seat's answer to a draw offer: it accepts when its search saw nothing better
    than a draw for it (``value`` <= 0, its own point of view; no search yet: decline)."""
    return "accept" if value is not None and value <= 0.0 else "decline"


NO_RESULT = "*"
# A live game in which no human or bot seat has been online for this long is aborted.
ABANDON_S = 3600.0
# ... and sooner if neither side has moved yet (an idle game created and left, as a
# flood of them once stayed listed for the hour above), or an open game whose creator left.
ABANDON_UNSTARTED_S = 60.0
# Events kept in memory per game for `resume` (a whole gomoku game is 225 moves); older
# ones are answered with a snapshot. Below the send queue (1024 frames), so that a replay
# never looks like a client that stopped reading.
MAX_LOG = 512
FINISHED_LOG = 16  # events a finished game keeps for resume; older ones: a snapshot


GAME_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"


GAME_ID_LENGTH = 8  # 40 bits: a listed game's id, easy to type
# A private game's id is its invite, and the only key to its open seat, its moves and its
# record: 80 bits, out of reach of guessing at any rate (40 were not: at the 20,000 frames
# a second one address may send, a server with 100 private games waiting lost one in
# about a week to one address, in hours to a hundred).
PRIVATE_GAME_ID_LENGTH = 16


def new_game_id(length: int = GAME_ID_LENGTH) -> str:
    """``length`` characters from a 32-letter alphabet, five random bits each. One read
    of the system's random source (secrets.choice read it once a character: eight system
    calls at every game start)."""
    bits = int.from_bytes(secrets.token_bytes((5 * length + 7) // 8), "big")
    return "".join(GAME_ID_ALPHABET[(bits >> (5 * i)) & 31] for i in range(length))


def new_token() -> str:
    return secrets.token_urlsafe(24)


def token_hash(token: str) -> str:
    """Tokens are stored as their SHA-256: the database never holds a usable secret."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(slots=True)
class Player:
    name: str
    kind: str  # human | ai | bot
    player_id: str | None = None
    algorithm: str | None = None
    budget_ms: int | None = None

    @property
    def is_ai(self) -> bool:
        return self.kind == "ai"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.player_id is not None:
            d["player_id"] = self.player_id
        if self.algorithm is not None:
            d["algorithm"] = self.algorithm
            d["budget_ms"] = self.budget_ms
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Player:
        return cls(d["name"], d["kind"], d.get("player_id"), d.get("algorithm"), d.get("budget_ms"))


@dataclass(slots=True)
class Emitted:
    """One game event: the message everyone following the game receives (without
    ``rid``), and exactly one thing to store for it."""

    message: Message
    move: MoveRow | None = None
    end: GameEnd | None = None
    event: EventRow | None = None
    frame: bytes = b""  # the message encoded once, for the log and every follower


@dataclass(slots=True)
class EventLimits:
    """Caps on the events one seat's actions add to a game, for everyone following it and
    for its stored record (the server sets them from its settings): reconnecting or
    offering in a loop must not flood the opponent or grow the record without bound."""

    presence_burst: int = 4  # absences announced at once; then one per presence_refill_s
    presence_refill_s: float = 10.0
    restore_quiet_s: float = 5.0  # after a restore, absences wait this long to be announced
    draw_offer_plies: int = 1  # plies between two draw offers of a seat (Lichess: 20)
    rematch_offers: int = 3  # per seat and game


_SERIALS = itertools.count()


@dataclass(slots=True)
class GameSession:
    id: str
    game: engine.Game
    state: engine.State
    created_at: float
    control: TimeControl | None = None
    private: bool = False
    rematch_of: str | None = None
    seek_id: str | None = None  # the seek or quick-pairing entry it was made of
    players: list[Player | None] = field(default_factory=lambda: [None, None])
    token_hashes: list[str | None] = field(default_factory=lambda: [None, None])
    tokens: list[str | None] = field(default_factory=lambda: [None, None])  # known plain
    seq: int = 0
    status: str = "open"
    result: str | None = None
    reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    clock: GameClock | None = None
    turn_since: float = 0.0  # when the side to move's turn began (monotonic)
    online: list[bool] = field(default_factory=lambda: [True, True])
    announced: list[bool] = field(default_factory=lambda: [True, True])  # presence as told
    absences: list[TokenBucket | None] = field(default_factory=lambda: [None, None])
    quiet_until: float | None = None  # monotonic: no absence is announced before (a restore)
    draw_offered_at: list[int | None] = field(default_factory=lambda: [None, None])  # ply
    rematch_offered: list[int] = field(default_factory=lambda: [0, 0])
    limits: EventLimits = field(default_factory=EventLimits)  # set by the server
    away_since: list[float | None] = field(default_factory=lambda: [None, None])  # monotonic
    claim_at: list[float | None] = field(default_factory=lambda: [None, None])  # monotonic
    offers: dict[str, int] = field(default_factory=dict)
    last_value: list[float | None] = field(default_factory=lambda: [None, None])
    next_game: str | None = None
    # (seq, encoded frame) of every event since log_start, for resume.
    log: list[tuple[int, bytes]] = field(default_factory=list)
    log_start: int = 1
    first_move_s: float = FIRST_MOVE_S  # set by the server from its settings
    abandon_s: float = ABANDON_S  # likewise
    abandon_unstarted_s: float = ABANDON_UNSTARTED_S  # likewise
    # What is not in the store but ``revert`` needs, as of the last stored event, and its
    # seq: the last event the server saw committed (and so sent).
    stored_seq: int = 0
    stored_turn_since: float = 0.0
    stored_offers: dict[str, int] = field(default_factory=dict)
    stored_next_game: str | None = None
    stored_announced: list[bool] = field(default_factory=lambda: [True, True])
    # Monotonic: since when the game waits for its store (no request about it served).
    waiting_since: float | None = None
    # Order of creation in this process: ties of equal timestamps (a coarse or fixed
    # clock) sort the same way every run, where the random id would not.
    serial: int = field(default_factory=_SERIALS.__next__)

    @classmethod
    def new(
        cls,
        game_name: str,
        params: dict[str, int],
        now: Now,
        *,
        control: TimeControl | None = None,
        private: bool = False,
        rematch_of: str | None = None,
        game_id: str | None = None,
        seek_id: str | None = None,
    ) -> GameSession:
        try:
            game = engine.make_game(game_name, **params)
        except engine.EngineError as exc:
            raise BadRequest(str(exc)) from exc
        return cls(
            game_id or new_game_id(PRIVATE_GAME_ID_LENGTH if private else GAME_ID_LENGTH),
            game,
            game.new_initial_state(),
            now.wall,
            control=control,
            private=private,
            rematch_of=rematch_of,
            seek_id=seek_id,
        )

    # --- seats -----------------------------------------------------------------------

    def take_seat(self, seat: int, player: Player) -> str:
        """Give ``seat`` to ``player``; returns the seat's secret token."""
        if self.status != "open":
            raise SeatTaken(f"game {self.id} is {self.status}: no seat is open", self.id)
        if self.players[seat] is not None:
            raise SeatTaken(f"seat {seat} of game {self.id} is taken", self.id)
        self.players[seat] = player
        return self.issue_token(seat)

    def issue_token(self, seat: int) -> str:
        """A new secret for ``seat`` (also after a restart, when only its hash survived)."""
        token = new_token()
        self.tokens[seat] = token
        self.token_hashes[seat] = token_hash(token)
        return token

    def open_seat(self) -> int | None:
        for seat in (0, 1):
            if self.players[seat] is None:
                return seat
        return None

    def seat_of_player(self, player_id: str | None) -> int | None:
        for seat, player in enumerate(self.players):
            if player is not None and player_id is not None and player.player_id == player_id:
                return seat
        return None

    def authorize(self, token: str, player_id: str | None) -> int:
        """The seat ``token`` opens, if the requesting player holds it; else BadToken.
        A token this process issued is compared as it is; one from before a restart, of
        which only the hash is known, by its hash."""
        seat = self._token_seat(token)
        if seat is not None:
            player = self.players[seat]
            if player is not None and player.player_id is not None:
                if player.player_id == player_id:
                    return seat
        raise BadToken(f"you hold no seat with this token in game {self.id}", self.id)

    def _token_seat(self, token: str) -> int | None:
        if token.isascii():  # (compare_digest takes ASCII strings only)
            for seat, plain in enumerate(self.tokens):
                if plain is not None and secrets.compare_digest(plain, token):
                    return seat
        digest = token_hash(token)
        for seat, held in enumerate(self.token_hashes):
            if held is not None and secrets.compare_digest(held, digest):
                return seat
        return None

    @property
    def over(self) -> bool:
        """Finished or aborted: the game takes no more moves."""
        return self.status in ("finished", "aborted")

    @property
    def human_seats(self) -> list[int]:
        return [s for s, p in enumerate(self.players) if p is not None and not p.is_ai]

    # --- the event log ---------------------------------------------------------------

    def _emit(self, message: Message, **stored: Any) -> Emitted:
        frame = encode(message)
        self.log.append((getattr(message, "seq", self.seq), frame))
        # A finished game stays in memory a while (rematch, late resume) but gets no more
        # moves: it keeps only the end of its log. (A 10-minute soak held 17,320 finished
        # games, most of the server's 580 MB, in their whole logs.)
        keep = FINISHED_LOG if self.over else MAX_LOG
        if len(self.log) > keep:
            del self.log[: len(self.log) - keep]
            self.log_start = self.log[0][0]
        return Emitted(message, frame=frame, **stored)

    def events_since(self, since: int) -> list[bytes] | None:
        """Frames of the events after ``since``, or None if the log no longer has them all."""
        if since + 1 < self.log_start or since > self.seq:
            return None
        return [frame for seq, frame in self.log if seq > since]

    # --- start -----------------------------------------------------------------------

    def start(self, now: Now) -> Emitted:
        """Both seats are taken: the game goes live. The start event is a snapshot."""
        if self.open_seat() is not None:
            raise NotYourTurn(f"game {self.id} still has an open seat", self.id)
        self.status = "live"
        self.announced = list(self.online)
        self.started_at = now.wall
        self.turn_since = now.mono
        if self.control is not None:
            frozen = (self.players[0].is_ai, self.players[1].is_ai)  # type: ignore[union-attr]
            self.clock = GameClock.new(self.control, frozen)
        self.seq += 1
        snapshot = self.snapshot(now)
        data = {"kind": "started", "players": [p.to_dict() for p in self.players if p]}
        return self._emit(snapshot, event=EventRow(self.id, self.seq, "started", data, now.wall))

    # --- moves -----------------------------------------------------------------------

    def _check_live(self) -> None:
        if self.over:
            raise GameOver(f"game {self.id} is over ({self.result}, {self.reason})", self.id)
        if self.status != "live":
            raise NotYourTurn(f"game {self.id} has not started: waiting for a player", self.id)

    def play(
        self,
        seat: int,
        action: int,
        now: Now,
        *,
        ply: int | None = None,
        stats: dict[str, Any] | None = None,
    ) -> list[Emitted]:
        """Validate and apply one move; raises a GameError and changes nothing if refused."""
        self._check_live()
        played = self.state.ply()
        # A move meant for another position is stale, whoever's turn it is now (a seat's
        # move sent again with another action was not_your_turn after the reply it awaited).
        if ply is not None and ply != played:
            raise StaleMove(f"move for ply {ply}, but game {self.id} is at ply {played}", self.id)
        current = self.state.current_player()
        if seat != current:
            raise NotYourTurn(f"it is seat {current}'s turn in game {self.id}, not yours", self.id)
        try:
            self.state.apply_checked(action)
        except engine.IllegalMove as exc:
            raise IllegalMove(f"illegal move {action} in game {self.id}: {exc}", self.id) from exc
        if stats is not None and stats.get("value") is not None:
            self.last_value[seat] = float(stats["value"])
        # A move declines the other side's standing draw offer (as on Lichess).
        if self.offers.get("draw") not in (None, seat):
            del self.offers["draw"]
        terminal = self.state.is_terminal()
        clocks = None
        if self.clock is not None:
            self.clock.press(seat, now.mono)
            if played + 1 >= 2 and not terminal:
                self.clock.start(self.state.current_player(), now.mono)
            clocks = self.clock.snapshot(now.mono)
        self.turn_since = now.mono
        self.seq += 1
        to_move = engine.TERMINAL if terminal else self.state.current_player()
        moved = Moved(
            game_id=self.id,
            seq=self.seq,
            ply=played,
            seat=seat,
            action=action,
            to_move=to_move,
            at=now.wall,
            stats=stats,
            clocks=clocks,
        )
        row = MoveRow(self.id, played, self.seq, seat, action, now.wall, stats, clocks)
        if not terminal:
            return [self._emit(moved, move=row)]
        winner = self.state.winner()
        end = self._finish(RESULTS[winner], "line" if winner is not None else "draw", now)
        # The move and the end commit in one transaction (the move's row carries the end).
        return [self._emit(moved, move=row, end=end), self._ended(end, now)]

    def sent_again(self, seat: int, action: int, ply: int) -> bool:
        """``seat`` played ``action`` at ``ply`` already: a move sent again (its reply lost
        with a connection or a node, PROTOCOL.md), acknowledged again, never applied twice."""
        history = self.state.history()
        if not 0 <= ply < len(history) or history[ply] != action:
            return False
        return engine.replay(self.game, history[:ply], trusted=True).current_player() == seat

    def moved_event(self, ply: int, stored: list[MoveRow] | None = None) -> bytes | None:
        """The ``moved`` event of ``ply`` (a frame without ``rid``): from the log, else
        from the ``stored`` moves (a restored game keeps no log); None if in neither."""
        for _, frame in reversed(self.log):
            message = decode_server(frame)
            if type(message) is Moved and message.ply == ply:
                return frame
        if stored is None or len(stored) <= ply:
            return None
        move = stored[ply]
        if ply + 1 < len(stored):
            to_move = stored[ply + 1].seat
        elif self.state.is_terminal():
            to_move = engine.TERMINAL
        else:
            to_move = self.state.current_player()
        return encode(
            Moved(
                game_id=self.id,
                seq=move.seq,
                ply=ply,
                seat=move.seat,
                action=move.action,
                to_move=to_move,
                at=move.at,
                stats=move.stats,
                clocks=move.clocks,
            )
        )

    # --- endings ---------------------------------------------------------------------

    def _finish(self, result: str, reason: str, now: Now) -> GameEnd:
        if self.clock is not None:
            self.clock.stop(now.mono)
        self.status = "aborted" if result == NO_RESULT else "finished"
        self.result = result
        self.reason = reason
        self.ended_at = now.wall
        self.offers.pop("draw", None)
        self.seq += 1
        return GameEnd(result, reason, self.seq, now.wall)

    def _ended(self, end: GameEnd, now: Now) -> Emitted:
        """The `ended` event; stored with the move that caused it, or on its own."""
        message = Ended(
            game_id=self.id,
            seq=end.seq,
            result=end.result,
            reason=end.reason,
            winner=self.winner,
            clocks=None if self.clock is None else self.clock.snapshot(now.mono),
            at=now.wall,
        )
        return self._emit(message)

    def _end(self, result: str, reason: str, now: Now) -> list[Emitted]:
        end = self._finish(result, reason, now)
        emitted = self._ended(end, now)
        emitted.end = end
        return [emitted]

    @property
    def abortable(self) -> bool:
        """Open, or live with a side yet to make its first move: no result is counted yet
        (Lichess's ``Game.abortable``: ``playedTurns < 2``)."""
        return self.status == "open" or (self.status == "live" and self.state.ply() < 2)

    def resign(self, seat: int, now: Now) -> list[Emitted]:
        """Lose; while the game can still be aborted, abort it instead (Lichess's Board and
        Bot APIs do that with a resign: BotPlayer.resign)."""
        if self.over:
            raise GameOver(f"game {self.id} is already over", self.id)
        if self.abortable:
            return self._end(NO_RESULT, "abort", now)
        return self._end(RESULTS[1 - seat], "resign", now)

    def abort(self, seat: int, now: Now) -> list[Emitted]:
        if self.status == "open":
            return self._end(NO_RESULT, "abort", now)
        self._check_live()
        if not self.abortable:
            raise NotAllowed(
                f"game {self.id} can no longer be aborted: both sides have moved; resign instead",
                self.id,
            )
        return self._end(NO_RESULT, "abort", now)

    def engine_failed(self, now: Now) -> list[Emitted]:
        """No engine worker could make the AI's move: the game ends with no result."""
        self._check_live()
        return self._end(NO_RESULT, "engine_unavailable", now)

    def draw(self, seat: int, answer: str, now: Now) -> list[Emitted]:
        """Offer, accept or decline a draw; an offer meeting the other side's is agreement."""
        self._check_live()
        standing = self.offers.get("draw")
        if answer == "offer" and standing is None:
            ply = self.state.ply()
            last = self.draw_offered_at[seat]
            if last is not None and ply - last < self.limits.draw_offer_plies:
                wait = last + self.limits.draw_offer_plies - ply
                raise NotAllowed(
                    f"you offered a draw {ply - last} plies ago: you may offer again after "
                    f"{wait} more move{'s' if wait > 1 else ''}",
                    self.id,
                )
            self.draw_offered_at[seat] = ply
            self.offers["draw"] = seat
            return [self._offer("draw", seat, "offer", now)]
        if answer == "offer" and standing == seat:
            raise NotAllowed("you have already offered a draw", self.id)
        if standing is None or standing == seat:
            raise NotAllowed(f"there is no draw offer from your opponent to {answer}", self.id)
        if answer == "decline":
            del self.offers["draw"]
            return [self._offer("draw", seat, "decline", now)]
        return self._end(RESULTS[None], "agreement", now)

    def _offer(self, kind: str, seat: int, answer: str, now: Now, **extra: Any) -> Emitted:
        self.seq += 1
        message = Offer(game_id=self.id, seq=self.seq, kind=kind, seat=seat, answer=answer, **extra)  # type: ignore[arg-type]
        data = {"kind": kind, "seat": seat, "answer": answer, **extra}
        return self._emit(message, event=EventRow(self.id, self.seq, "offer", data, now.wall))

    def rematch(self, seat: int, answer: str, now: Now) -> tuple[list[Emitted], bool]:
        """A rematch offer or answer; returns its events and whether both sides now agree
        (the caller then creates the new game and calls ``rematch_started``)."""
        if not self.over:
            raise NotAllowed(f"game {self.id} is not over: no rematch yet", self.id)
        if self.open_seat() is not None:
            raise NotAllowed(
                f"game {self.id} was withdrawn before anyone joined: no opponent to rematch",
                self.id,
            )
        if self.next_game is not None:
            raise NotAllowed(f"the rematch of {self.id} is already game {self.next_game}", self.id)
        standing = self.offers.get("rematch")
        if answer == "offer" and standing is None:
            cap = self.limits.rematch_offers
            if self.rematch_offered[seat] >= cap:
                raise NotAllowed(f"at most {cap} rematch offers per game", self.id)
            self.rematch_offered[seat] += 1
            self.offers["rematch"] = seat
            return [self._offer("rematch", seat, "offer", now)], False
        if answer == "offer" and standing == seat:
            raise NotAllowed("you have already offered a rematch", self.id)
        if standing is None or standing == seat:
            raise NotAllowed(f"there is no rematch offer from your opponent to {answer}", self.id)
        if answer == "decline":
            del self.offers["rematch"]
            return [self._offer("rematch", seat, "decline", now)], False
        return [], True

    def rematch_started(self, seat: int, next_game: str, now: Now) -> Emitted:
        self.offers.pop("rematch", None)
        self.next_game = next_game
        return self._offer("rematch", seat, "accept", now, next_game=next_game)

    def claim(self, seat: int, outcome: str, now: Now) -> list[Emitted]:
        self._check_live()
        if self.abortable:  # (Lichess: no claim while the game is abortable, forceResignable)
            raise NotAllowed(
                f"game {self.id} has no result to claim before both sides have moved: "
                "abort it instead",
                self.id,
            )
        other = 1 - seat
        claim_at = self.claim_at[other]
        if self.online[other] or claim_at is None:
            raise NotAllowed("your opponent is here: nothing to claim", self.id)
        if now.mono < claim_at:
            raise NotAllowed(
                f"your opponent's seat is held for {claim_at - now.mono:.0f} s more", self.id
            )
        return self._end(RESULTS[seat] if outcome == "win" else RESULTS[None], "abandoned", now)

    # --- presence --------------------------------------------------------------------

    def set_online(self, seat: int, online: bool, now: Now, grace_s: float) -> list[Emitted]:
        """A seat's player left or came back: a presence event if it is to be announced.
        The grace runs on the monotonic clock."""
        if self.online[seat] == online:
            return []
        self.online[seat] = online
        self.away_since[seat] = None if online else now.mono
        self.claim_at[seat] = None if online else now.mono + grace_s
        if self.status != "live":
            self.announced[seat] = online
            return []
        return self._announce(seat, now)

    def _announce(self, seat: int, now: Now) -> list[Emitted]:
        """The presence event for a seat whose player's state differs from what the game
        was told. A return is announced at once; an absence only within the seat's budget
        (``limits.presence_burst``, refilled one per ``presence_refill_s``, a token bucket),
        else when the budget refills (``next_deadline``), if the player is still away then:
        a player reconnecting in a loop costs the opponent a few events, not two each time.
        ``claim_at`` always counts from the real departure; people are told it in wall time."""
        online = self.online[seat]
        if online == self.announced[seat]:
            return []
        if not online and (
            (self.quiet_until is not None and now.mono < self.quiet_until)
            or not self._absence_budget(seat, now.mono).take(now.mono)
        ):
            return []
        self.announced[seat] = online
        self.seq += 1
        held = self.claim_at[seat]
        claim_at = None if held is None else now.wall + (held - now.mono)
        message = Presence(
            game_id=self.id,
            seq=self.seq,
            seat=seat,
            online=online,
            claim_at=claim_at,
        )
        data = {"seat": seat, "online": online, "claim_at": claim_at}
        return [self._emit(message, event=EventRow(self.id, self.seq, "presence", data, now.wall))]

    def _absence_budget(self, seat: int, now: float) -> TokenBucket:
        bucket = self.absences[seat]
        if bucket is None:
            burst = self.limits.presence_burst
            rate = 1.0 / max(self.limits.presence_refill_s, 1e-3)
            bucket = self.absences[seat] = TokenBucket(rate, burst, float(burst), now)
        return bucket

    def _presence_due(self) -> float | None:
        """When an absence not yet announced can be: its seat's next token, and not before
        the quiet after a restore."""
        times = []
        for seat, bucket in enumerate(self.absences):
            if self.online[seat] == self.announced[seat]:
                continue
            at = bucket.next_token_at() if bucket is not None else 0.0
            times.append(at if self.quiet_until is None else max(at, self.quiet_until))
        return min(times) if times else None

    # --- timeouts --------------------------------------------------------------------

    def _withdrawn_at(self) -> float | None:
        """An open game whose creator left is withdrawn when the creator's grace is over,
        or ``abandon_unstarted_s`` after they left if that comes first."""
        seats = [s for s in self.human_seats if not self.online[s]]
        if not seats:
            return None
        times = [self.claim_at[seats[0]], self.away_since[seats[0]]]
        if times[1] is not None:
            times[1] += self.abandon_unstarted_s
        known = [t for t in times if t is not None]
        return min(known) if known else None

    def _abandoned_at(self) -> float | None:
        """When a live game whose human and bot seats are all away ends: ``abandon_s``
        after the last one left, ``abandon_unstarted_s`` if neither side has moved."""
        away = [self.away_since[s] for s in self.human_seats]
        if not away or any(t is None for t in away):
            return None
        wait = self.abandon_unstarted_s if self.state.ply() < 2 else self.abandon_s
        return max(t for t in away if t is not None) + wait

    def next_deadline(self) -> float | None:
        """The next moment (monotonic) a timeout may end the game (flag, no first move,
        abandoned) or a deferred presence event is due."""
        if self.status == "open":
            # A game stored with its seats all taken whose start was not (a rematch, an AI
            # game or an accepted seek whose start the store refused, or a restart in
            # between): due at once, so that it starts rather than stay open for ever, its
            # players seated and nobody able to move or join.
            return self.turn_since if self.open_seat() is None else self._withdrawn_at()
        if self.status != "live":
            return None
        times = []
        if self.clock is not None:
            mover = self.state.current_player()
            player = self.players[mover]
            if self.state.ply() < 2 and player is not None and not player.is_ai:
                times.append(self.turn_since + self.first_move_s)
            flag = self.clock.flag_at()
            if flag is not None:
                times.append(flag)
        online = self.online
        if not (online[0] and online[1]):  # (only a seat away can abandon a game)
            abandoned = self._abandoned_at()
            if abandoned is not None:
                times.append(abandoned)
        if online != self.announced:  # (only a change not yet announced can be due)
            presence = self._presence_due()
            if presence is not None:
                times.append(presence)
        return min(times) if times else None

    def timeouts(self, now: Now) -> list[Emitted]:
        """End the game if a deadline has passed at ``now`` (or start one whose seats are
        all taken: ``next_deadline``)."""
        mono = now.mono
        if self.status == "open":
            if self.open_seat() is None:  # seats taken, its start not stored: start it now
                return [self.start(now)]
            withdrawn = self._withdrawn_at()
            if withdrawn is not None and mono >= withdrawn:
                return self._end(NO_RESULT, "abort", now)
            return []
        if self.status != "live":
            return []
        if self.clock is not None:
            mover = self.state.current_player()
            player = self.players[mover]
            if (
                self.state.ply() < 2
                and player is not None
                and not player.is_ai
                and mono >= self.turn_since + self.first_move_s
            ):
                return self._end(NO_RESULT, "no_start", now)
            flag = self.clock.flag_at()
            if flag is not None and mono >= flag:
                assert self.clock.running is not None
                return self._end(RESULTS[1 - self.clock.running], "flag", now)
        abandoned = self._abandoned_at()
        if abandoned is not None and mono >= abandoned:
            return self._end(NO_RESULT, "abandoned", now)
        return self._announce(0, now) + self._announce(1, now)

    @property
    def winner(self) -> int | None:
        return {"1-0": 0, "0-1": 1}.get(self.result or "")

    # --- views -----------------------------------------------------------------------

    def to_row(self) -> GameRow:
        return GameRow(
            id=self.id,
            game=self.game.name,
            params=dict(self.game.params),
            status=self.status,
            players=[p.to_dict() if p else None for p in self.players],
            created_at=self.created_at,
            seq=self.seq,
            result=self.result,
            reason=self.reason,
            started_at=self.started_at,
            ended_at=self.ended_at,
            clock=None if self.control is None else self.control.to_dict(),
            tokens=list(self.token_hashes),
            private=self.private,
            rematch_of=self.rematch_of,
            seek_id=self.seek_id,
        )

    def summary(self) -> dict[str, Any]:
        return {
            "game_id": self.id,
            "game": self.game.name,
            "params": dict(self.game.params),
            "status": self.status,
            "players": [p.to_dict() if p else None for p in self.players],
            "ply": self.state.ply(),
            "created_at": self.created_at,
            "clock": {} if self.control is None else self.control.to_dict(),
        }

    def snapshot(self, now: Now, rid: int | None = None) -> Snapshot:
        to_move = self.state.current_player() if self.status == "live" else engine.TERMINAL
        return Snapshot(
            game_id=self.id,
            seq=self.seq,
            game=self.game.name,
            params=dict(self.game.params),
            players=[p.to_dict() if p else None for p in self.players],
            actions=self.state.history(),
            status=self.status,  # type: ignore[arg-type]
            to_move=to_move,
            result=self.result,
            reason=self.reason,
            clock={} if self.control is None else self.control.to_dict(),
            clocks=None if self.clock is None else self.clock.snapshot(now.mono),
            # Left out at the default (30 s, its absence's meaning): clients of protocol 2
            # before the field refuse it (PROTOCOL.md, Versions).
            first_move_ms=(
                None
                if self.clock is None or self.first_move_s == FIRST_MOVE_S
                else round(self.first_move_s * 1000)
            ),
            first_move_left_ms=self._first_move_left_ms(now),
            at=now.wall,
            # An open seat has no one to be online (it read online, as if taken).
            online=[self.online[s] and self.players[s] is not None for s in (0, 1)],
            offers=dict(self.offers),
            next_game=self.next_game,
            rid=rid,
        )

    def _first_move_left_ms(self, now: Now) -> int | None:
        """What the side to move has left of its first move's time at ``now``, while that
        move is due (a timed, live game before both sides moved, a human or bot to move),
        else None. None too when it is the whole time (the start): a client counts that
        from the snapshot, and clients of protocol 2 built before 2026-12-07 read the start
        of a timed game (PROTOCOL.md, Versions)."""
        if self.clock is None or self.status != "live" or self.state.ply() >= 2:
            return None
        player = self.players[self.state.current_player()]
        if player is None or player.is_ai:
            return None
        whole = round(self.first_move_s * 1000)
        left = max(0, min(whole, round((self.turn_since + self.first_move_s - now.mono) * 1000)))
        return None if left == whole else left

    # --- restore ---------------------------------------------------------------------

    @classmethod
    def restore(cls, record: GameRecord, now: Now) -> GameSession:
        """Rebuild an open or live game from the store after a restart. The downtime is
        not charged: the side to move's clock (or first-move allowance) restarts at ``now``
        with the time it had at the last committed move. Every seat starts offline."""
        row = record.row
        game = engine.make_game(row.game, **row.params)
        session = cls(
            row.id,
            game,
            game.new_initial_state(),
            row.created_at,
            control=TimeControl.parse(row.clock),
            private=row.private,
            rematch_of=row.rematch_of,
            seek_id=row.seek_id,
        )
        session.log_start = row.seq + 1
        session.stored_seq = row.seq
        session.stored_turn_since = now.mono
        session.stored_offers, session.draw_offered_at = _draw_offers(record)
        session.revert(record)
        return session

    def revert(self, record: GameRecord) -> bool:
        """Put the game back as ``record`` (what the store holds) says, in place, so that
        everyone holding this session sees it: storing an event failed, and what is in
        memory but not stored never happened. The side to move's clock runs from when its
        turn began (``stored_turn_since``); who is online is the present, not a stored
        fact, and stays as it is (what the opponent was told of it goes back: a presence
        event not stored was not sent); plain seat tokens are kept where their hash is stored.

        True if the store holds events past the last one the server saw committed (a write
        whose outcome was unknown was committed after all): nobody was sent them, and the
        event log, which cannot tell them from events never stored, starts after them."""
        row = record.row
        ahead = row.seq > self.stored_seq
        self.state = engine.replay(self.game, [m.action for m in record.moves])
        self.players = [None if p is None else Player.from_dict(p) for p in row.players]
        self.token_hashes = list(row.tokens)
        self.tokens = [
            token if token is not None and held == token_hash(token) else None
            for token, held in zip(self.tokens, self.token_hashes, strict=True)
        ]
        self.seq = row.seq
        self.status = row.status
        self.result, self.reason = row.result, row.reason
        self.started_at, self.ended_at = row.started_at, row.ended_at
        if ahead:  # (the events the store holds were made in memory: their turn's start)
            self.stored_offers, self.draw_offered_at = _draw_offers(record)
        else:
            self.turn_since = self.stored_turn_since
        self.offers = dict(self.stored_offers)
        self.next_game = self.stored_next_game
        self.announced = list(self.stored_announced)
        self.last_value = [None, None]
        for move in record.moves:
            if move.stats and move.stats.get("value") is not None:
                self.last_value[move.seat] = float(move.stats["value"])
        self.clock = None
        if self.status == "live" and self.control is not None:
            players = self.players
            frozen = (players[0] is not None and players[0].is_ai,
                      players[1] is not None and players[1].is_ai)  # fmt: skip
            self.clock = GameClock.new(self.control, frozen)
            last = record.moves[-1].clocks if record.moves else None
            if last is not None:
                self.clock.remaining = list(last)
            if self.state.ply() >= 2 and not self.state.is_terminal():
                self.clock.start(self.state.current_player(), self.turn_since)
        if ahead:
            self.log, self.log_start = [], self.seq + 1  # (a resume before it: a snapshot)
        else:  # Frames of events that were never stored leave the log (nobody was sent them).
            self.log = [(seq, frame) for seq, frame in self.log if seq <= self.seq]
            self.log_start = min(self.log_start, self.seq + 1)
        self.stored_seq = self.seq
        return ahead

    def waited(self, now: float) -> None:
        """The game waited for its store from ``waiting_since`` to ``now`` (monotonic),
        answering every move ``unavailable``: as a restart's downtime, that time is charged
        to no one. The side to move's turn (its first-move time) and clock start that much
        later; the grace of a player away still counts (the absence was real)."""
        if self.waiting_since is None:
            return
        pause = max(0.0, now - self.waiting_since)
        self.waiting_since = None
        self.turn_since += pause
        self.stored_turn_since += pause
        if self.clock is not None and self.clock.running is not None:
            self.clock.since += pause

    def stored(self, seq: int) -> None:
        """The event ``seq`` is stored, with those before it: remember it, and what
        ``revert`` goes back to that the store does not hold."""
        self.stored_seq = seq
        self.stored_turn_since = self.turn_since
        if self.offers or self.stored_offers:
            self.stored_offers = dict(self.offers)
        self.stored_next_game = self.next_game
        if self.announced != self.stored_announced:
            self.stored_announced = list(self.announced)

    def restored_presence(self, now: Now, grace_s: float, here: Iterable[int]) -> list[Emitted]:
        """After a restore, every human seat but those of ``here`` (its player connected to
        this server) is away until its player comes back, its grace counting from now. An
        absence is announced only after ``limits.restore_quiet_s``: players reconnect after
        a restart, and after a cluster node took the game over their nodes report them
        present, and neither left (a seat away before, back, is announced at once)."""
        self.quiet_until = now.mono + self.limits.restore_quiet_s
        emitted = []
        present = set(here)
        for seat in self.human_seats:
            self.online[seat] = True
            if seat in present:
                emitted += self._announce(seat, now)
            else:
                emitted += self.set_online(seat, False, now, grace_s)
        return emitted


# --- a game request sent again --------------------------------------------------------------


def event_fields(message: Message) -> dict[str, Any] | None:
    """A game event as the store keeps it in a record's ``events`` ({"seq", "kind", ...}):
    the start, offers and the end, what a game request can have made; None for the rest."""
    fields: dict[str, Any] = {"seq": getattr(message, "seq", 0)}
    if isinstance(message, Offer):
        return fields | {"kind": message.kind, "seat": message.seat, "answer": message.answer}
    if isinstance(message, Ended):
        return fields | {
            "kind": "ended",
            "result": message.result,
            "reason": message.reason,
            "at": message.at,
        }
    if isinstance(message, Snapshot) and message.status == "live":
        return fields | {"kind": "started"}
    return None


def _draw_offers(record: GameRecord) -> tuple[dict[str, int], list[int | None]]:
    """A stored game's standing draw offer ({"draw": seat}, or none) and the ply of each
    seat's last offer (the once-per-move rule), from its events and moves in seq order: an
    offer stands until declined, accepted or answered by the other side's move. A restore
    lost them: an offer made before a restart was gone after it, though a copy of the
    request sent again was answered ok, and its maker could offer again at once."""
    offers: dict[str, int] = {}
    offered_at: list[int | None] = [None, None]
    items: list[tuple[int, int, dict[str, Any] | None]] = [
        (m.seq, m.seat, None) for m in record.moves
    ]
    items += [(int(e["seq"]), -1, e) for e in record.events if e.get("type") == "offer"]
    ply = 0
    for _, seat, event in sorted(items, key=lambda item: item[0]):
        if event is None:  # a move: it declines the other side's offer (PROTOCOL.md, draw)
            if offers.get("draw") not in (None, seat):
                del offers["draw"]
            ply += 1
        elif event.get("kind") == "draw":
            if event.get("answer") == "offer":
                offers["draw"] = int(event["seat"])
                offered_at[int(event["seat"])] = ply
            else:
                offers.pop("draw", None)
    return offers, offered_at


def made_already(
    request: Message, seat: int, events: Iterable[dict[str, Any]]
) -> dict[str, Any] | None:
    """The event that ``request`` from ``seat`` made when it was first sent, among
    ``events``: the game's events after the request's ``seq`` (what its client had seen),
    oldest first; None if it made none of them (it was never applied). PROTOCOL.md,
    "A request sent again". A resign of a game that could still be aborted aborted it (an
    abort after its seq means it could: moves are never taken back)."""
    for event in events:
        kind = event.get("kind")
        reason = event.get("reason")
        if isinstance(request, Resign):
            resigned = reason == "resign" and event.get("result") == RESULTS[1 - seat]
            if kind == "ended" and (resigned or reason == "abort"):
                return event
        elif isinstance(request, Abort):
            if kind == "ended" and reason == "abort":
                return event
        elif isinstance(request, Claim):
            result = RESULTS[seat] if request.outcome == "win" else RESULTS[None]
            if kind == "ended" and reason == "abandoned" and event.get("result") == result:
                return event
        elif isinstance(request, Draw | Rematch):
            offers = "draw" if isinstance(request, Draw) else "rematch"
            if (
                kind == offers
                and event.get("seat") == seat
                and event.get("answer") == request.answer
            ):
                return event
            if request.answer == "decline":
                continue
            # An offer meeting the other side's, or an acceptance: the draw agreed, the
            # rematch started (by whichever seat accepted).
            if isinstance(request, Draw) and kind == "ended" and reason == "agreement":
                return event
            if (
                isinstance(request, Rematch)
                and kind == "rematch"
                and event.get("answer") == "accept"
            ):
                return event
    return None


def ended_event(game_id: str, event: dict[str, Any]) -> Ended:
    """The ``ended`` event of a game from its stored fields (``event_fields``)."""
    result = event["result"]
    winner = next((seat for seat, won in RESULTS.items() if won == result), None)
    return Ended(
        game_id=game_id,
        seq=event["seq"],
        result=result,
        reason=event["reason"],
        winner=winner,
        at=float(event.get("at", 0.0)),
    )

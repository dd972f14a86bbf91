"""One game on the server as a state machine fed by validated events (sans-I/O).

A GameSession holds the authoritative engine State, the two seats (their players and
the hashes of their secret tokens), the clocks, standing offers, who is online, and
the game's event log. Every method takes the time (``now``) as an argument and either
raises a GameError naming the problem, changing nothing, or changes the game and
returns the events it produced (``Emitted``): what to store, then what to send.
The caller stores each event, then broadcasts it: nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any

import engine
from protocol import Ended, Message, Moved, Offer, Presence, Snapshot, encode
from server.clock import FIRST_MOVE_S, GameClock, TimeControl
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
from server.store import EventRow, GameEnd, GameRecord, GameRow, MoveRow

RESULTS = {0: "1-0", 1: "0-1", None: "1/2-1/2"}
NO_RESULT = "*"
# A live game in which no human or bot seat has been online for this long is aborted.
ABANDON_S = 3600.0
# Events kept in memory per game for `resume` (a whole gomoku game is 225 moves); older
# ones are answered with a snapshot. Below the send queue (1024 frames), so that a replay
# never looks like a client that stopped reading.
MAX_LOG = 512
FINISHED_LOG = 16  # events a finished game keeps for resume; older ones: a snapshot


def new_game_id() -> str:
    """Eight characters from a 32-letter alphabet: 40 random bits, easy to type."""
    alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
    return "".join(secrets.choice(alphabet) for _ in range(8))


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
class GameSession:
    id: str
    game: engine.Game
    state: engine.State
    created_at: float
    control: TimeControl | None = None
    private: bool = False
    rematch_of: str | None = None
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
    turn_since: float = 0.0  # when the side to move's turn began
    online: list[bool] = field(default_factory=lambda: [True, True])
    away_since: list[float | None] = field(default_factory=lambda: [None, None])
    claim_at: list[float | None] = field(default_factory=lambda: [None, None])
    offers: dict[str, int] = field(default_factory=dict)
    last_value: list[float | None] = field(default_factory=lambda: [None, None])
    next_game: str | None = None
    # (seq, encoded frame) of every event since log_start, for resume.
    log: list[tuple[int, bytes]] = field(default_factory=list)
    log_start: int = 1
    first_move_s: float = FIRST_MOVE_S  # set by the server from its settings

    @classmethod
    def new(
        cls,
        game_name: str,
        params: dict[str, int],
        now: float,
        *,
        control: TimeControl | None = None,
        private: bool = False,
        rematch_of: str | None = None,
    ) -> GameSession:
        try:
            game = engine.make_game(game_name, **params)
        except engine.EngineError as exc:
            raise BadRequest(str(exc)) from exc
        return cls(
            new_game_id(),
            game,
            game.new_initial_state(),
            now,
            control=control,
            private=private,
            rematch_of=rematch_of,
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
        """The seat ``token`` opens, if the requesting player holds it; else BadToken."""
        digest = token_hash(token)
        for seat, held in enumerate(self.token_hashes):
            if held is not None and secrets.compare_digest(held, digest):
                player = self.players[seat]
                if player is None or player.player_id is None or player.player_id != player_id:
                    break
                return seat
        raise BadToken(f"you hold no seat with this token in game {self.id}", self.id)

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

    def start(self, now: float) -> Emitted:
        """Both seats are taken: the game goes live. The start event is a snapshot."""
        if self.open_seat() is not None:
            raise NotYourTurn(f"game {self.id} still has an open seat", self.id)
        self.status = "live"
        self.started_at = now
        self.turn_since = now
        if self.control is not None:
            frozen = (self.players[0].is_ai, self.players[1].is_ai)  # type: ignore[union-attr]
            self.clock = GameClock.new(self.control, frozen)
        self.seq += 1
        snapshot = self.snapshot(now)
        data = {"kind": "started", "players": [p.to_dict() for p in self.players if p]}
        return self._emit(snapshot, event=EventRow(self.id, self.seq, "started", data, now))

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
        now: float,
        *,
        ply: int | None = None,
        stats: dict[str, Any] | None = None,
    ) -> list[Emitted]:
        """Validate and apply one move; raises a GameError and changes nothing if refused."""
        self._check_live()
        current = self.state.current_player()
        if seat != current:
            raise NotYourTurn(f"it is seat {current}'s turn in game {self.id}, not yours", self.id)
        played = self.state.ply()
        if ply is not None and ply != played:
            raise StaleMove(f"move for ply {ply}, but game {self.id} is at ply {played}", self.id)
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
            self.clock.press(seat, now)
            if played + 1 >= 2 and not terminal:
                self.clock.start(self.state.current_player(), now)
            clocks = self.clock.snapshot(now)
        self.turn_since = now
        self.seq += 1
        to_move = engine.TERMINAL if terminal else self.state.current_player()
        moved = Moved(
            game_id=self.id,
            seq=self.seq,
            ply=played,
            seat=seat,
            action=action,
            to_move=to_move,
            at=now,
            stats=stats,
            clocks=clocks,
        )
        row = MoveRow(self.id, played, self.seq, seat, action, now, stats, clocks)
        if not terminal:
            return [self._emit(moved, move=row)]
        winner = self.state.winner()
        end = self._finish(RESULTS[winner], "line" if winner is not None else "draw", now)
        # The move and the end commit in one transaction (the move's row carries the end).
        return [self._emit(moved, move=row, end=end), self._ended(end, now)]

    # --- endings ---------------------------------------------------------------------

    def _finish(self, result: str, reason: str, now: float) -> GameEnd:
        if self.clock is not None:
            self.clock.stop(now)
        self.status = "aborted" if result == NO_RESULT else "finished"
        self.result = result
        self.reason = reason
        self.ended_at = now
        self.offers.pop("draw", None)
        self.seq += 1
        return GameEnd(result, reason, self.seq, now)

    def _ended(self, end: GameEnd, now: float) -> Emitted:
        """The `ended` event; stored with the move that caused it, or on its own."""
        message = Ended(
            game_id=self.id,
            seq=end.seq,
            result=end.result,
            reason=end.reason,
            winner=self.winner,
            clocks=None if self.clock is None else self.clock.snapshot(now),
            at=now,
        )
        return self._emit(message)

    def _end(self, result: str, reason: str, now: float) -> list[Emitted]:
        end = self._finish(result, reason, now)
        emitted = self._ended(end, now)
        emitted.end = end
        return [emitted]

    def resign(self, seat: int, now: float) -> list[Emitted]:
        if self.over:
            raise GameOver(f"game {self.id} is already over", self.id)
        if self.status == "open":
            return self._end(NO_RESULT, "abort", now)
        return self._end(RESULTS[1 - seat], "resign", now)

    def abort(self, seat: int, now: float) -> list[Emitted]:
        if self.status == "open":
            return self._end(NO_RESULT, "abort", now)
        self._check_live()
        if self.state.ply() >= 2:
            raise NotAllowed(
                f"game {self.id} can no longer be aborted: both sides have moved; resign instead",
                self.id,
            )
        return self._end(NO_RESULT, "abort", now)

    def draw(self, seat: int, answer: str, now: float) -> list[Emitted]:
        """Offer, accept or decline a draw; an offer meeting the other side's is agreement."""
        self._check_live()
        standing = self.offers.get("draw")
        if answer == "offer" and standing is None:
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

    def _offer(self, kind: str, seat: int, answer: str, now: float, **extra: Any) -> Emitted:
        self.seq += 1
        message = Offer(game_id=self.id, seq=self.seq, kind=kind, seat=seat, answer=answer, **extra)  # type: ignore[arg-type]
        data = {"kind": kind, "seat": seat, "answer": answer, **extra}
        return self._emit(message, event=EventRow(self.id, self.seq, "offer", data, now))

    def rematch(self, seat: int, answer: str, now: float) -> tuple[list[Emitted], bool]:
        """A rematch offer or answer; returns its events and whether both sides now agree
        (the caller then creates the new game and calls ``rematch_started``)."""
        if not self.over:
            raise NotAllowed(f"game {self.id} is not over: no rematch yet", self.id)
        if self.next_game is not None:
            raise NotAllowed(f"the rematch of {self.id} is already game {self.next_game}", self.id)
        standing = self.offers.get("rematch")
        if answer == "offer" and standing is None:
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

    def rematch_started(self, seat: int, next_game: str, now: float) -> Emitted:
        self.offers.pop("rematch", None)
        self.next_game = next_game
        return self._offer("rematch", seat, "accept", now, next_game=next_game)

    def claim(self, seat: int, outcome: str, now: float) -> list[Emitted]:
        self._check_live()
        other = 1 - seat
        claim_at = self.claim_at[other]
        if self.online[other] or claim_at is None:
            raise NotAllowed("your opponent is here: nothing to claim", self.id)
        if now < claim_at:
            raise NotAllowed(
                f"your opponent's seat is held for {claim_at - now:.0f} s more", self.id
            )
        return self._end(RESULTS[seat] if outcome == "win" else RESULTS[None], "abandoned", now)

    # --- presence --------------------------------------------------------------------

    def set_online(self, seat: int, online: bool, now: float, grace_s: float) -> list[Emitted]:
        """A seat's player left or came back: a presence event if anything changed."""
        if self.online[seat] == online:
            return []
        self.online[seat] = online
        self.away_since[seat] = None if online else now
        self.claim_at[seat] = None if online else now + grace_s
        if self.status != "live":
            return []
        self.seq += 1
        message = Presence(
            game_id=self.id,
            seq=self.seq,
            seat=seat,
            online=online,
            claim_at=self.claim_at[seat],
        )
        data = {"seat": seat, "online": online, "claim_at": self.claim_at[seat]}
        return [self._emit(message, event=EventRow(self.id, self.seq, "presence", data, now))]

    # --- timeouts --------------------------------------------------------------------

    def _withdrawn_at(self) -> float | None:
        """An open game whose creator left is withdrawn when the creator's grace is over."""
        seats = [s for s in self.human_seats if not self.online[s]]
        return self.claim_at[seats[0]] if seats else None

    def next_deadline(self) -> float | None:
        """The next moment a timeout may end the game (flag, no first move, abandoned)."""
        if self.status == "open":
            return self._withdrawn_at()
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
        humans = self.human_seats
        away = [self.away_since[s] for s in humans]
        if humans and all(t is not None for t in away):
            times.append(max(t for t in away if t is not None) + ABANDON_S)
        return min(times) if times else None

    def timeouts(self, now: float) -> list[Emitted]:
        """End the game if a deadline has passed at ``now``."""
        if self.status == "open":
            withdrawn = self._withdrawn_at()
            if withdrawn is not None and now >= withdrawn:
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
                and now >= self.turn_since + self.first_move_s
            ):
                return self._end(NO_RESULT, "no_start", now)
            flag = self.clock.flag_at()
            if flag is not None and now >= flag:
                assert self.clock.running is not None
                return self._end(RESULTS[1 - self.clock.running], "flag", now)
        humans = self.human_seats
        away = [self.away_since[s] for s in humans]
        if humans and all(t is not None and now >= t + ABANDON_S for t in away):
            return self._end(NO_RESULT, "abandoned", now)
        return []

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

    def snapshot(self, now: float, rid: int | None = None) -> Snapshot:
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
            clocks=None if self.clock is None else self.clock.snapshot(now),
            at=now,
            online=list(self.online),
            offers=dict(self.offers),
            next_game=self.next_game,
            rid=rid,
        )

    # --- restore ---------------------------------------------------------------------

    @classmethod
    def restore(cls, record: GameRecord, now: float) -> GameSession:
        """Rebuild an open or live game from the store after a restart. The downtime is
        not charged: the side to move's clock (or first-move allowance) restarts at ``now``
        with the time it had at the last committed move. Every seat starts offline."""
        row = record.row
        game = engine.make_game(row.game, **row.params)
        state = engine.replay(game, [m.action for m in record.moves])
        session = cls(
            row.id,
            game,
            state,
            row.created_at,
            control=TimeControl.parse(row.clock),
            private=row.private,
            rematch_of=row.rematch_of,
            players=[None if p is None else Player.from_dict(p) for p in row.players],
            token_hashes=list(row.tokens),
            seq=row.seq,
            status=row.status,
            started_at=row.started_at,
        )
        for move in record.moves:
            if move.stats and move.stats.get("value") is not None:
                session.last_value[move.seat] = float(move.stats["value"])
        session.log_start = row.seq + 1
        session.turn_since = now
        if session.status == "live" and session.control is not None:
            players = session.players
            frozen = (players[0] is not None and players[0].is_ai,
                      players[1] is not None and players[1].is_ai)  # fmt: skip
            session.clock = GameClock.new(session.control, frozen)
            last = record.moves[-1].clocks if record.moves else None
            if last is not None:
                session.clock.remaining = list(last)
            if state.ply() >= 2 and not state.is_terminal():
                session.clock.start(state.current_player(), now)
        return session

    def restored_presence(self, now: float, grace_s: float) -> list[Emitted]:
        """After a restore, every human seat is away until its player reconnects."""
        emitted = []
        for seat in self.human_seats:
            self.online[seat] = True
            emitted += self.set_online(seat, False, now, grace_s)
        return emitted

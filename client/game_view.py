"""One game as every client sees it, built from the server's events; no terminal, no I/O.

``GameModel`` is the view model the plain client, the Textual UI, the spectator and the
bot share: it replays the events of PROTOCOL.md (snapshot, moved, offer, presence, ended)
onto an engine state and keeps the board, whose turn it is, the clocks (which tick locally
from the moment each reading arrived), the offers (by the player who made them), the
result, the legal moves and the last move. The words for them (names, clocks, results,
the AI's statistics) are here too, one way each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import engine
from engine.result import PROOFS
from protocol import Ended, ErrorCode, Message, Moved, Offer, Presence, Snapshot

SYMBOLS = ("X", "O")
# The AI's time per move a player gets without asking (noughts play, the new-game dialogs).
AI_BUDGET_MS = 500

REASONS = {
    "line": "a line was completed",
    "draw": "no move left",
    "resign": "resignation",
    "flag": "out of time",
    "agreement": "draw agreed",
    "abandoned": "the game was abandoned",
    "abort": "aborted before the first moves",
    "no_start": "no first move in time",
    "engine_unavailable": "the AI's engine did not answer",
}


class GameDataError(ValueError):
    """A game the server sent that does not follow this client's rules: a game it does not
    know (a newer server's), or a move the rules refuse (a damaged record, a hostile
    server). Nothing of it is applied."""


def checked_move(state: engine.State, action: int, seat: int | None = None) -> str:
    """The name of ``action`` in ``state`` (not applied), after checking it is legal there
    and, if ``seat`` is given, that seat's turn; GameDataError naming the problem."""
    reason = state.illegal_reason(action)
    if reason is None and seat is not None and seat != state.current_player():
        reason = f"seat {seat} moved, not the side to move"
    if reason is not None:
        raise GameDataError(f"move {state.ply() + 1}: {reason}")
    return state.action_to_string(action)


def known_game(game: str, params: dict[str, int]) -> engine.Game:
    """``game`` with ``params``; GameDataError for one this client does not know (or
    parameters it does not take)."""
    try:
        return engine.make_game(game, **params)
    except (engine.EngineError, TypeError) as exc:
        raise GameDataError(str(exc)) from exc


def game_title(game: str, params: dict[str, int]) -> str:
    """'tictactoe', '5x5', 'gomoku', 'uttt' or 'm,n,k 7x6 k=4'."""
    if game == "mnk" and params:
        for name, game_type in engine.GAMES.items():
            if game_type.preset == params:
                return name  # a record from before games kept their names
        return f"m,n,k {params.get('m')}x{params.get('n')} k={params.get('k')}"
    return game


def clock_title(clock: dict[str, int]) -> str:
    """A time control as people write it: '5+3', '90s+2', '30 s/move' or 'no clock'."""
    if "move_ms" in clock:
        return f"{clock['move_ms'] / 1000:g} s/move"
    if "initial_ms" in clock:
        initial = clock["initial_ms"]
        # Whole minutes as minutes ('3+2'), anything else in seconds ('90s+2', '1s+0').
        base = f"{initial // 60000}" if initial % 60000 == 0 else f"{initial / 1000:g}s"
        return f"{base}+{clock.get('increment_ms', 0) / 1000:g}"
    return "no clock"


def format_ms(ms: float) -> str:
    """Remaining time as m:ss, with tenths under ten seconds."""
    ms = max(0.0, ms)
    if ms < 10_000:
        return f"0:{ms / 1000:04.1f}"
    seconds = int(ms // 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{seconds:02d}"
    return f"{minutes}:{seconds:02d}"


def format_clocks(clocks: list[int] | tuple[int, ...] | None) -> str:
    """Both clocks as `  [X 2:59  O 0:09.5]`, or nothing for an untimed game."""
    if not clocks:
        return ""
    return "  [" + "  ".join(f"{SYMBOLS[s]} {format_ms(ms)}" for s, ms in enumerate(clocks)) + "]"


def search_effort(stats: dict[str, Any]) -> tuple[int | None, float | None]:
    """The search's iterations and milliseconds, each None unless the stats carry it as a
    number: the server's stats are not checked on the wire, and a damaged record's or a
    hostile server's are shown without them, not formatted into a traceback."""
    iterations, elapsed = stats.get("iterations"), stats.get("elapsed_ms")
    return (
        iterations if isinstance(iterations, int) and not isinstance(iterations, bool) else None,
        elapsed if isinstance(elapsed, int | float) and not isinstance(elapsed, bool) else None,
    )


def describe_stats(stats: dict[str, Any]) -> str:
    """One line on what the AI's search did: algorithm, effort, value."""
    parts = [str(stats.get("algorithm", "ai"))]
    iterations, elapsed = search_effort(stats)
    if iterations is not None:
        parts.append(f"{iterations:,} iterations")
    if elapsed is not None:
        parts.append(f"in {elapsed:.0f} ms")
    value = ai_value(stats)
    if value is not None:
        parts.append(f"value {value}")
    return ", ".join(parts)


def ai_value(stats: dict[str, Any], *, chance: bool = True) -> str | None:
    """The AI's value of its move, for the AI: "proven win/draw/loss" once its search proved
    the result (a proven draw is not "win 50%"), else the value in [-1, 1] and, with
    ``chance``, the winning chance it stands for; None if the stats carry neither."""
    proven = stats.get("proven")
    if proven in PROOFS:
        return f"proven {proven}"
    value = stats.get("value")
    if not isinstance(value, int | float):
        return None
    return f"{value:+.2f}" + (f" (win {100 * (value + 1) / 2:.0f}%)" if chance else "")


def player_name(player: dict[str, Any] | None) -> str:
    if player is None:
        return "(open seat)"
    name = str(player.get("name", "?"))
    kind = player.get("kind")
    if kind == "bot":
        return f"{name} [bot]"
    if kind == "ai":
        return f"{name} [AI]"
    return name


def offer_sentence(who: str, kind: str, answer: str) -> str:
    """An offer event as a sentence: 'bob (O) offers a draw', 'bob (O) accepts the
    rematch', 'bob (O) declines the draw'."""
    if answer == "offer":
        return f"{who} offers a {kind}"
    return f"{who} {answer}s the {kind}"


def result_sentence(result: str | None, reason: str | None, my_seat: int | None) -> str:
    """'You win: a line was completed.', 'Draw: draw agreed.', 'O wins: out of time.'"""
    why = REASONS.get(reason or "", reason or "")
    if result == "*":
        return f"No result: {why}."
    if result == "1/2-1/2":
        return f"Draw: {why}."
    if result in ("1-0", "0-1"):
        winner = 0 if result == "1-0" else 1
        if my_seat is None:
            return f"{SYMBOLS[winner]} wins: {why}."
        return f"You {'win' if winner == my_seat else 'lose'}: {why}."
    return "The game is not over."


@dataclass
class MoveEntry:
    """One move as the move list shows it."""

    ply: int
    seat: int
    action: int
    text: str
    stats: dict[str, Any] | None = None


@dataclass
class GameModel:
    """One game as seen by this client: position, players, clocks, offers, result."""

    game_id: str
    seat: int | None = None  # our seat, None for a spectator (its token: the session core's)
    game: str = ""
    params: dict[str, int] = field(default_factory=dict)
    players: list[dict[str, Any] | None] = field(default_factory=lambda: [None, None])
    state: engine.State | None = None
    moves: list[MoveEntry] = field(default_factory=list)
    seq: int = 0
    status: str = "open"
    to_move: int = -1
    result: str | None = None
    reason: str | None = None
    clock: dict[str, int] = field(default_factory=dict)
    clocks: list[int] | None = None
    clocks_received: float = 0.0  # local time the clocks were read at
    first_move_ms: int | None = None  # a timed game's first-move time; None: 30 s, or no clock
    # What the side to move had left of its first move's time at clocks_received, as a
    # snapshot said (a watch or resume during it); None: all of it, from then.
    first_move_left_ms: int | None = None
    online: list[bool] = field(default_factory=lambda: [True, True])
    claim_at: list[float | None] = field(default_factory=lambda: [None, None])
    offers: dict[str, int] = field(default_factory=dict)
    next_game: str | None = None
    last_event: Message | None = None

    @property
    def over(self) -> bool:
        return self.result is not None

    def said_by_the_end(self, code: str) -> bool:
        """Whether a refusal with this error ``code`` says only what this game's end, once
        shown, says: a request that crossed the end (an abort while the other side accepts a
        draw) is refused because the game is over, which the end already told the user."""
        return code == ErrorCode.GAME_OVER and self.over

    @property
    def my_turn(self) -> bool:
        return (
            self.seat is not None
            and self.status == "live"
            and not self.over
            and self.state is not None
            and not self.state.is_terminal()
            and self.state.current_player() == self.seat
        )

    def last_action(self) -> int | None:
        return self.moves[-1].action if self.moves else None

    def legal_moves(self) -> list[int]:
        """The moves we may play now (none unless it is our turn)."""
        return self.state.legal_actions() if self.my_turn and self.state is not None else []

    def name(self, seat: int) -> str:
        """A seat's player as people call them: 'bob (O)', or 'O' for an open seat."""
        player = self.players[seat] if 0 <= seat < len(self.players) else None
        return f"{player['name']} ({SYMBOLS[seat]})" if player else SYMBOLS[seat]

    def opponent(self) -> dict[str, Any] | None:
        """The other seat's player (name, kind: human, bot or ai), if we hold a seat."""
        return self.players[1 - self.seat] if self.seat in (0, 1) else None

    def who(self, seat: int) -> str:
        """'You' for our own seat, else the player's name."""
        return "You" if seat == self.seat else self.name(seat)

    def has_ai(self) -> bool:
        """Whether an AI plays in this game (its panel and value only make sense then)."""
        return any((p or {}).get("kind") == "ai" for p in self.players) or any(
            entry.stats for entry in self.moves
        )

    def result_sentence(self) -> str:
        return result_sentence(self.result, self.reason, self.seat)

    @property
    def abortable(self) -> bool:
        """Before both sides have made their first move: the game counts no result yet, so
        it is aborted, not resigned or claimed (PROTOCOL.md: abort, resign, claim)."""
        return not self.over and len(self.moves) < 2

    def claim_in(self, wall_now: float) -> float | None:
        """Seconds until we may claim the game from an opponent who left (0 once its seat is
        no longer held: ``presence.claim_at``, server time), or None while no opponent is
        away (or we hold no seat, or the game is over)."""
        if self.seat not in (0, 1) or self.over:
            return None
        other = 1 - self.seat
        at = self.claim_at[other]
        if self.online[other] or at is None:
            return None
        return max(0.0, at - wall_now)

    def apply(self, event: Message, now: float) -> bool:
        """Apply one event received at local time ``now``. False when it does not follow
        the last seen ``seq`` (a gap: the caller asks for the rest with ``resume``);
        events already seen are ignored (True). GameDataError, the model unchanged, for a
        game or a move that breaks this client's rules."""
        seq = getattr(event, "seq", 0)
        if isinstance(event, Snapshot):
            self._load(event, now)
        elif seq <= self.seq:
            return True  # seen already (a resume may repeat events)
        elif self.state is None or seq != self.seq + 1:
            return False
        elif isinstance(event, Moved):
            self._moved(event, now)
        elif isinstance(event, Offer):
            self._offer(event)
        elif isinstance(event, Presence):
            self.online[event.seat] = event.online
            self.claim_at[event.seat] = None if event.online else event.claim_at
        elif isinstance(event, Ended):
            self.result, self.reason = event.result, event.reason
            self.status = "aborted" if event.result == "*" else "finished"
            self.to_move = -1
            self.offers.pop("draw", None)
            if event.clocks is not None:
                self.clocks, self.clocks_received = list(event.clocks), now
        self.seq = max(self.seq, seq)
        self.last_event = event
        return True

    def _load(self, snapshot: Snapshot, now: float) -> None:
        # Checked by the rules before anything is kept (GameDataError: nothing changes).
        state = known_game(snapshot.game, dict(snapshot.params)).new_initial_state()
        moves = []
        for ply, action in enumerate(snapshot.actions):
            text = checked_move(state, action)
            moves.append(MoveEntry(ply, state.current_player(), action, text))
            state.apply_action(action)
        self.game, self.params = snapshot.game, dict(snapshot.params)
        self.players = list(snapshot.players)
        self.moves = moves
        self.state = state
        self.seq = snapshot.seq
        self.status, self.to_move = snapshot.status, snapshot.to_move
        self.result, self.reason = snapshot.result, snapshot.reason
        self.clock = dict(snapshot.clock)
        self.clocks = list(snapshot.clocks) if snapshot.clocks is not None else None
        self.clocks_received = now
        self.first_move_ms = snapshot.first_move_ms
        self.first_move_left_ms = snapshot.first_move_left_ms
        self.online = list(snapshot.online)
        self.offers = dict(snapshot.offers)
        self.next_game = snapshot.next_game

    def _moved(self, moved: Moved, now: float) -> None:
        assert self.state is not None
        if moved.ply != self.state.ply():
            return  # cannot happen with consecutive seqs; never corrupt the position
        text = checked_move(self.state, moved.action, moved.seat)  # (GameDataError: not applied)
        self.state.apply_action(moved.action)
        self.moves.append(MoveEntry(moved.ply, moved.seat, moved.action, text, moved.stats))
        self.to_move = moved.to_move
        if self.offers.get("draw") not in (None, moved.seat):
            del self.offers["draw"]  # a move declines the other side's offer (the server's rule)
        if moved.clocks is not None:
            self.clocks, self.clocks_received = list(moved.clocks), now
        self.first_move_left_ms = None  # (a new turn: its whole time, from now)
        if self.status == "open":
            self.status = "live"

    def _offer(self, offer: Offer) -> None:
        if offer.answer == "offer":
            self.offers[offer.kind] = offer.seat
        else:
            self.offers.pop(offer.kind, None)
        if offer.next_game:
            self.next_game = offer.next_game

    def clock_ticking(self) -> bool:
        """The side to move's clock runs once both sides have moved (PROTOCOL.md, Clocks)."""
        return (
            self.clocks is not None
            and self.status == "live"
            and not self.over
            and self.to_move in (0, 1)
            and len(self.moves) >= 2
            and self.players[self.to_move] is not None
            and (self.players[self.to_move] or {}).get("kind") != "ai"
        )

    def remaining_ms(self, seat: int, now: float) -> float | None:
        """A seat's time left at local time ``now``, counted down from the last reading."""
        if self.clocks is None:
            return None
        left = float(self.clocks[seat])
        if seat == self.to_move and self.clock_ticking():
            left -= (now - self.clocks_received) * 1000
        return max(0.0, left)

    def last_stats(self) -> dict[str, Any] | None:
        """The statistics of the latest AI move, if any."""
        for entry in reversed(self.moves):
            if entry.stats:
                return entry.stats
        return None


LABEL_WORDS = {"win": "won", "draw": "drawn", "loss": "lost"}
FLIP = {"win": "loss", "loss": "win", "draw": "draw"}
RANK = {"loss": 0, "draw": 1, "win": 2}
VALUES = {1: "win", 0: "draw", -1: "loss"}


def move_verdicts(game: engine.Game, actions: list[int]) -> list[tuple[str, str] | None]:
    """For each move, (the position it leaves, for its mover: won/drawn/lost; a mark: '' for
    a move that keeps the value, '?' for one that throws a win away to a draw, '??' for one
    that turns a win or a draw into a loss). None where the engine cannot solve the board
    (perfect play, boards of up to 16 cells)."""
    before = engine.label_moves(game, actions)
    state = game.new_initial_state()
    verdicts: list[tuple[str, str] | None] = []
    for i, action in enumerate(actions):
        mover = state.current_player()
        state.apply_action(action)
        if before[i] is None:
            verdicts.append(None)
            continue
        if state.is_terminal():
            winner = state.winner()
            after = "draw" if winner is None else ("win" if winner == mover else "loss")
        else:
            if i + 1 < len(before) and before[i + 1] is not None:
                next_label = before[i + 1]
            else:  # the last move of a game that ended otherwise (resigned, out of time)
                next_label = VALUES[engine.solve(state)]
            after = FLIP[next_label]  # type: ignore[index]
        drop = RANK[before[i]] - RANK[after]  # type: ignore[index]
        mark = "??" if drop and after == "loss" else "?" if drop else ""
        verdicts.append((LABEL_WORDS[after], mark))
    return verdicts

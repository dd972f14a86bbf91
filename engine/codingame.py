"""CodinGame's referee protocol for ultimate tic-tac-toe, as a pure state machine.

The strongest ultimate tic-tac-toe bots are written for CodinGame's "Tic-Tac-Toe" bot
programming game (ultimate from its Silver league on), and their harnesses speak its
referee's protocol; this is that protocol, sans-I/O like ``engine.piskvork`` (the I/O
layer, client/commands/brain.py, runs the searches). Each turn the referee sends:

    opponentRow opponentCol       (-1 -1 on the first turn when the bot moves first)
    validActionCount
    row col                       (validActionCount lines: the bot's legal moves)

and the bot answers one line, ``row col``. Rows and columns are 0..8 on the 9x9 grid, row 0
at the top (``engine.notation.Grid``). The referee allows 1,000 ms for the bot's first
turn and 100 ms for each later one; a move spends that less a safety margin.

The bot's first move when it starts (the empty board) is ``OPENING``, without a search: the
referee's clock runs from its first input, sent as the bot starts, and a Python bot takes
about half its first turn to start (the I/O layer answers that turn before it warms up).

The referee is the authority: when its valid actions are not the legal moves of the
position the bot has followed (a missed or extra line), the bot says so on its diagnostic
stream and answers the first valid action, rather than forfeit by timeout or an illegal
move. A line that is not the referee's at all (garbage, a malformed turn: not two numbers,
a count outside 1..81, a cell off the grid) the protocol has no reply for: the bot says why
on its diagnostic stream and ends (``unreadable``; the I/O layer exits with status 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import EngineError
from engine.games import make_game
from engine.result import SearchResult
from engine.think import Log, Think
from engine.uttt import EMPTY, LINES, LINES_THROUGH, OPEN, UTTTGame, UTTTState

__all__ = ["OPENING", "CodinGameBrain", "TurnTime", "quick_move"]

MAX_LINE = 256  # a longer line is not one of the referee's
# The first move on the empty board: the centre of the centre board, the move mcts plays there
# after 15 s (about 12 million iterations; seeds 1 and 2, value +0.19 for the mover).
OPENING = 40


@dataclass(slots=True)
class TurnTime:
    """The referee's limits (ms) and the share of them a search may spend: the rest is the
    margin for the pipes, the process and Python's part of the turn."""

    first_ms: float = 1000.0
    turn_ms: float = 100.0
    SHARE = 0.7

    def budget_ms(self, first: bool) -> float:
        return (self.first_ms if first else self.turn_ms) * self.SHARE


class CodinGameBrain:
    """One game's protocol state. ``feed`` one line at a time; a ``Think`` in its answer is
    followed by ``played`` with the search's result before the next line."""

    # The referee's clock runs from its first input, sent as the bot starts: the I/O layer
    # warms up while it reads, and answers what needs no search (the opening) once warm or
    # once ``first_answer_warm_ms`` of the first turn have passed, whichever comes first.
    WARM_UP_FIRST = False
    # Of the first turn (1,000 ms on CodinGame), what the opening may wait for the warm-up
    # (0.4-0.7 s from numba's cache): answered at once, the bot met a quick opponent's reply
    # still warming, and played quick moves for its next turns (100 ms each).
    FIRST_ANSWER_WARM_SHARE = 0.6
    # A turn that comes while the warm-up runs gets a quick move in its time (``cancel``).
    QUICK_MOVE = True

    def __init__(self, time: TurnTime | None = None) -> None:
        game = make_game("uttt")
        assert isinstance(game, UTTTGame)  # the registry's uttt
        self.grid = game.grid
        self.time = time or TurnTime()
        self.state: UTTTState = game.new_initial_state()
        self.thinking: UTTTState | None = None
        self.turns = 0  # the bot's turns so far
        self.expect = "opponent"  # or "count", or "actions"
        self.count = 0
        self.valid: list[int] = []
        self.lost_track = False  # the referee's valid actions disagreed with the position
        # The protocol has no end command: the input's end ends the game, or a line that is
        # not the referee's (``unreadable``), which it has no reply for.
        self.ended = False
        self.unreadable = False
        self.games = 1

    @property
    def first_answer_warm_ms(self) -> float:
        """How long the first answer that needs no search may wait for the warm-up."""
        return self.time.first_ms * self.FIRST_ANSWER_WARM_SHARE

    def feed(self, line: str) -> list[object]:
        """The replies to one line from the referee: ``Log`` lines, a ``Think``, or a move."""
        if self.thinking is not None:
            raise EngineError("a Think is pending: call played() first")
        text = line.strip()
        if not text:
            return []
        if len(text) > MAX_LINE:
            return self._unreadable(f"a line of {len(text)} characters")
        numbers = _integers(text)
        if self.expect == "opponent":
            if numbers is None or len(numbers) != 2:
                return self._unreadable(f"expected 'opponentRow opponentCol', not {text[:40]!r}")
            return self._opponent(*numbers)
        if self.expect == "count":
            if numbers is None or len(numbers) != 1 or not 0 < numbers[0] <= 81:
                return self._unreadable(
                    f"expected the valid action count (1..81), not {text[:40]!r}"
                )
            self.count, self.valid, self.expect = numbers[0], [], "actions"
            return []
        if numbers is None or len(numbers) != 2 or not all(0 <= v < 9 for v in numbers):
            return self._unreadable(f"expected a valid action 'row col' (0..8), not {text[:40]!r}")
        self.valid.append(self.grid.action(*numbers))
        if len(self.valid) < self.count:
            return []
        self.expect = "opponent"
        return self._turn()

    def played(self, result: SearchResult) -> list[object]:
        """The bot's move from the search of the last ``Think``: its line."""
        if self.thinking is None:
            raise EngineError("played() without a pending Think")
        self.thinking = None
        if result.action not in self.valid:  # the referee's rules differ from the engine's
            self.lost_track = True
            return [Log("the search's move is not a valid action: playing the first one"),
                    self._move(self.valid[0])]  # fmt: skip
        return [Log(_summary(result)), self._move(result.action)]

    def cancel(self, reason: str = "") -> list[object]:
        """The search of the last ``Think`` failed (``reason``), or was not ready in time:
        the referee still needs a move, a quick one (``quick_move``)."""
        self.thinking = None
        return [Log(f"no search ({reason}): a quick move"), self._move(self._quick())]

    # --- helpers --------------------------------------------------------------------------------
    def _unreadable(self, reason: str) -> list[object]:
        """A line that is not the referee's: the bot cannot answer its turn, and ends."""
        self.unreadable = self.ended = True
        return [Log(f"cannot read the referee's input: {reason}")]

    def _opponent(self, row: int, col: int) -> list[object]:
        self.expect = "count"
        if (row, col) == (-1, -1):
            if self.state.ply() != 0:
                self.lost_track = True
                return [Log("-1 -1 after the first turn: following the referee's actions only")]
            return []
        if not (0 <= row < 9 and 0 <= col < 9):
            return self._unreadable(f"opponent move {row} {col} is off the board")
        if self.lost_track:
            return []
        action = self.grid.action(row, col)
        if self.state.illegal_reason(action) is not None:
            self.lost_track = True
            return [Log(f"opponent move {row} {col} is not legal here: following the referee")]
        self.state.apply_action(action)
        return []

    def _turn(self) -> list[object]:
        """The bot to move: a Think on the position, or the referee's first valid action."""
        first = self.turns == 0
        self.turns += 1
        if self.state.is_terminal():
            self.lost_track = True  # the referee plays on: its rules end games later
        if self.lost_track:
            return [self._move(self.valid[0])]
        replies: list[object] = []
        if set(self.valid) != set(self.state.legal_actions()):
            replies.append(Log("the valid actions are not this position's legal moves"))
        elif self.state.ply() == 0:
            return [Log(f"the opening move, {' '.join(map(str, self.grid.cell(OPENING)))}"),
                    self._move(OPENING)]  # fmt: skip
        self.thinking = self.state
        return [*replies, Think(self.state.clone(), self.time.budget_ms(first))]

    def _quick(self) -> int:
        """A move without a search (``quick_move``), one of the referee's valid actions."""
        return quick_move(self.state, self.valid)

    def _move(self, action: int) -> str:
        if not self.lost_track and self.state.illegal_reason(action) is not None:
            self.lost_track = True  # a valid action the engine's rules refuse
        if not self.lost_track:
            self.state.apply_action(action)
        row, col = self.grid.cell(action)
        return f"{row} {col}"


def quick_move(state: UTTTState, valid: list[int]) -> int:
    """A move of ``valid`` (the referee's actions, not empty) for ``state``'s mover without a
    search, for a turn with no time to search: one that wins the game, else a small board,
    else blocks the opponent's three in a row in the small board it plays in; among those
    (or all), one that does not send the opponent to a small board it can win at once, nor
    to a free choice of board (the one it is sent to closed); then the centre of the centre
    board, a small board's centre, the first. Pure Python over the 81 cells, no search: under
    0.3 ms here (a free choice of 70 actions). The actions ``state`` does not allow (a
    referee whose rules differ) are not weighed; if none is left, the centre rule alone
    picks among ``valid``."""
    legal = [action for action in valid if state.illegal_reason(action) is None]
    if not legal:
        return min(valid, key=lambda action: (_centre_rank(action), valid.index(action)))
    board, macro = state.board, state.macro
    mover = state.current_player()
    mine, theirs = _winning_cells(board, macro, mover), _winning_cells(board, macro, 1 - mover)
    empty = [board[small * 9 : small * 9 + 9].count(EMPTY) for small in range(9)]
    order = {action: index for index, action in reversed(list(enumerate(legal)))}

    def key(action: int) -> tuple[bool, bool, bool, bool, int, int]:
        small, cell = divmod(action, 9)
        wins_small = cell in mine[small]
        wins_game = wins_small and any(
            all(macro[other] == mover for other in line if other != small)
            for line in LINES_THROUGH[small]
        )
        closes = wins_small or empty[small] == 1
        # Where the opponent goes next (engine/uttt.py): board ``cell``, any if it is closed.
        free_choice = macro[cell] != OPEN or (cell == small and closes)
        # Sent back to this board, the opponent finds the mover's stone on ``cell``.
        threats = theirs[cell] - {cell} if cell == small else theirs[cell]
        sent_to_a_win = not free_choice and bool(threats)
        bad_send = not wins_game and (free_choice or sent_to_a_win)
        blocks = cell in theirs[small]
        return (not wins_game, not wins_small, not blocks, bad_send, _centre_rank(action),
                order[action])  # fmt: skip

    return min(legal, key=key)


def _winning_cells(board: list[int], macro: list[int], player: int) -> list[set[int]]:
    """For each small board, the empty cells where ``player`` makes three in a row (none in
    a closed board)."""
    cells: list[set[int]] = []
    for small in range(9):
        found: set[int] = set()
        if macro[small] == OPEN:
            for line in LINES:
                marks = [board[small * 9 + cell] for cell in line]
                if marks.count(player) == 2 and EMPTY in marks:
                    found.add(line[marks.index(EMPTY)])
        cells.append(found)
    return cells


def _centre_rank(action: int) -> int:
    """0 for the centre of the centre board, 1 for a small board's centre, else 2."""
    return 0 if action == OPENING else 1 if action % 9 == 4 else 2


def _integers(text: str) -> list[int] | None:
    parts = text.split()
    if not parts or len(parts) > 2 or any(len(part) > 3 for part in parts):
        return None
    try:
        return [int(part) for part in parts]
    except ValueError:
        return None


def _summary(result: SearchResult) -> str:
    proven = f" proven {result.proven}" if result.proven else ""
    return (
        f"{result.algorithm} value {result.value:+.2f}{proven} {result.iterations} "
        f"iterations in {result.elapsed_ms:.0f} ms"
    )

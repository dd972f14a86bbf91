"""Ultimate tic-tac-toe, standard rules.

Nine small 3x3 boards in a 3x3 frame, both numbered 0..8 row-major; action
``board * 9 + cell``. Playing cell c sends the opponent to small board c; if
that board is already won or full, the opponent may play in any open small
board. Three in a row wins a small board, which is then closed; three won small
boards in a row win the game; no legal move left and no line is a draw.
"""

from __future__ import annotations

import random

from engine.errors import IllegalMove
from engine.game import Game, RecordedState
from engine.notation import Grid

EMPTY = -1
OPEN, DRAWN = -1, 2  # board_winners() codes besides 0/1 (won by that player)
SYMBOLS = ("X", "O")
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
LINES_THROUGH = tuple(tuple(line for line in LINES if i in line) for i in range(9))

_rng = random.Random(0x5EED + 81)
ZOBRIST = (
    tuple(_rng.getrandbits(64) for _ in range(81)),
    tuple(_rng.getrandbits(64) for _ in range(81)),
)
ZOBRIST_FORCED = tuple(_rng.getrandbits(64) for _ in range(10))  # index forced + 1
del _rng


class UTTTGame(Game):
    name = "uttt"
    grid = Grid(9, 9, nested=True)  # cells as people name them (engine/notation.py)

    def num_distinct_actions(self) -> int:
        return 81

    def max_game_length(self) -> int:
        return 81

    def new_initial_state(self) -> UTTTState:
        return UTTTState(self)

    def __reduce__(self) -> tuple[object, ...]:
        return (UTTTGame, ())


class UTTTState(RecordedState):
    """Cells (-1 empty, 0 X, 1 O), small-board results, the board the mover is sent to."""

    def __init__(self, game: UTTTGame) -> None:
        self.game: UTTTGame = game
        self.board: list[int] = [EMPTY] * 81
        self.macro: list[int] = [OPEN] * 9
        self.forced = -1  # the small board the mover must play in, -1 = any open board
        self._begin_record()

    # --- the interface ----------------------------------------------------------
    def allowed_boards(self) -> list[int]:
        if self._over:
            return []
        if self.forced >= 0:
            return [self.forced]
        return [b for b in range(9) if self.macro[b] == OPEN]

    def board_winners(self) -> list[int]:
        return self.macro.copy()

    def legal_actions(self) -> list[int]:
        board = self.board
        return [
            b * 9 + c for b in self.allowed_boards() for c in range(9) if board[b * 9 + c] == EMPTY
        ]

    def apply_action(self, action: int) -> None:
        player = len(self._history) & 1
        board = self.board
        board[action] = player
        self._history.append(action)
        self.zobrist ^= ZOBRIST[player][action]
        b, c = divmod(action, 9)
        base = b * 9
        if any(all(board[base + i] == player for i in line) for line in LINES_THROUGH[c]):
            self.macro[b] = player
            for line in LINES_THROUGH[b]:
                if all(self.macro[i] == player for i in line):
                    self._winner, self._over = player, True
                    self._line = [
                        x * 9 + cell
                        for x in line
                        for cell in self._small_line(x, player)  # type: ignore[union-attr]
                    ]
                    self.forced = -1
                    return
        elif all(board[base + i] != EMPTY for i in range(9)):
            self.macro[b] = DRAWN
        self.forced = c if self.macro[c] == OPEN else -1
        if OPEN not in self.macro:
            self._over = True
            self.forced = -1

    def illegal_reason(self, action: int) -> str | None:
        if self._over:
            return "the game is over"
        if not 0 <= action < 81:
            return f"move {action} is out of range 0..80"
        b = action // 9
        if self.board[action] != EMPTY:
            owner = SYMBOLS[self.board[action]]
            return f"{self.action_to_string(action)} is occupied by {owner}"
        if self.macro[b] != OPEN:
            return f"{self.game.grid.board_name(b)} is closed ({self._board_status(b)})"
        if self.forced >= 0 and b != self.forced:
            return f"you must play in {self.game.grid.board_name(self.forced)}"
        return None

    def clone(self) -> UTTTState:
        other = UTTTState.__new__(UTTTState)
        other.game = self.game
        other.board = self.board.copy()
        other.macro = self.macro.copy()
        other.forced = self.forced
        self._copy_record(other)
        return other

    def position_key(self) -> int:
        return self.zobrist ^ ZOBRIST_FORCED[self.forced + 1]

    # --- text (engine/notation.py) -----------------------------------------------------
    def action_to_string(self, action: int) -> str:
        return self.game.grid.name(action)

    def parse_action(self, text: str) -> int:
        """A cell name of the 9x9 grid ("e5"), or the action number or 0-based "board,cell";
        must be legal here."""
        action = self.game.grid.parse(str(text))
        reason = self.illegal_reason(action)
        if reason is not None:
            raise IllegalMove(reason)
        return action

    def render(self) -> str:
        grid = self.game.grid
        rows = [grid.render(self.board, SYMBOLS)]
        closed = [
            f"{grid.board_name(b)}: {self._board_status(b)}"
            for b in range(9)
            if self.macro[b] != OPEN
        ]
        if closed:
            rows.append("Closed: " + "; ".join(closed))
        if not self._over:
            allowed = self.allowed_boards()
            where = grid.board_name(allowed[0]) if self.forced >= 0 else "any open board"
            rows.append(f"{SYMBOLS[self.current_player()]} plays in {where}")
        return "\n".join(rows)

    def _board_status(self, b: int) -> str:
        v = self.macro[b]
        return "drawn" if v == DRAWN else f"won by {SYMBOLS[v]}" if v >= 0 else "open"

    def _small_line(self, b: int, player: int) -> tuple[int, ...] | None:
        for line in LINES:
            if all(self.board[b * 9 + i] == player for i in line):
                return line
        return None

    # --- equality: same cells, same small board to play in ---------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UTTTState):
            return NotImplemented
        return self.board == other.board and self.forced == other.forced

    def __hash__(self) -> int:
        return hash(self.position_key())

    def __repr__(self) -> str:
        return f"<uttt state {self._history}>"

    def __getstate__(self) -> list[int]:
        return self._history

    def __setstate__(self, history: list[int]) -> None:
        self.__init__(UTTTGame())  # type: ignore[misc]
        for action in history:
            self.apply_action(action)

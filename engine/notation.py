"""How people write a cell: one notation for every board and every place a move is shown or
typed (the board's labels, the move box and prompt, the move list, replays, text exports,
the rules' messages). Pure: no engine types, only a board's shape.

As gomoku and Renju write moves (RIF notation) and chess writes squares: a column letter
counted from the left (a, b, ...) and a row number counted from the bottom (1, 2, ...); the
centre of the 15x15 board is h8, tic-tac-toe's is b2. Ultimate tic-tac-toe is written the
same way on its 9x9 grid of cells (a1..i9; e5 is the centre cell of the centre board), and
its small boards are named by where they lie ("the centre board, d4-f6").

Moves on the wire stay plain integer actions (PROTOCOL.md). Besides the notation, the move
box reads the action number and the 0-based ``row,col`` pair (uttt: ``board,cell``), the
forms of earlier versions, which no cell name can be mistaken for (a name starts with a
letter).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.errors import IllegalMove

LETTERS = "abcdefghijklmnopqrstuvwxyz"
BOARD_PLACES = (
    "top-left",
    "top",
    "top-right",
    "left",
    "centre",
    "right",
    "bottom-left",
    "bottom",
    "bottom-right",
)
_NAME = re.compile(r"([a-z])\s*(\d{1,2})")
_PAIR = re.compile(r"\(?\s*(\d+)\s*[, ]\s*(\d+)\s*\)?")


@dataclass(frozen=True, slots=True)
class Grid:
    """A board's cells as drawn: ``rows`` x ``cols``, row 0 at the top. ``nested``: uttt's
    9x9, whose actions are ``board * 9 + cell`` (boards and cells row-major in 3x3);
    otherwise an action is ``row * cols + col``."""

    rows: int
    cols: int
    nested: bool = False

    # --- where an action is drawn ---------------------------------------------------------

    def cell(self, action: int) -> tuple[int, int]:
        """(row, col) of ``action`` on the drawn grid."""
        if self.nested:
            board, cell = divmod(action, 9)
            return (board // 3) * 3 + cell // 3, (board % 3) * 3 + cell % 3
        return divmod(action, self.cols)

    def action(self, row: int, col: int) -> int:
        """The action of the cell drawn at (row, col)."""
        if self.nested:
            return ((row // 3) * 3 + col // 3) * 9 + (row % 3) * 3 + col % 3
        return row * self.cols + col

    # --- names ----------------------------------------------------------------------------

    def column_label(self, col: int) -> str:
        return LETTERS[col]

    def row_label(self, row: int) -> str:
        """Rows count from the bottom, as in gomoku, Renju and chess diagrams."""
        return str(self.rows - row)

    def name(self, action: int) -> str:
        """The cell's name: 'h8'."""
        row, col = self.cell(action)
        return self.column_label(col) + self.row_label(row)

    def board_name(self, board: int) -> str:
        """A small board of uttt by where it lies and its corner cells: 'the centre board,
        d4-f6'."""
        first = self.name(board * 9 + 6)  # its bottom-left cell
        last = self.name(board * 9 + 2)  # its top-right cell
        return f"the {BOARD_PLACES[board]} board, {first}-{last}"

    def example(self, legal: Sequence[int] = ()) -> str:
        """A cell to show as an example: the centre, or of ``legal`` (the moves one may
        play now, if any) the one nearest it."""
        row, col = self.rows // 2, self.cols // 2
        centre = self.action(row, col)
        if not legal or centre in legal:
            return self.name(centre)

        def distance(action: int) -> tuple[int, int]:
            r, c = self.cell(action)
            return max(abs(r - row), abs(c - col)), action

        return self.name(min(legal, key=distance))

    def describe(self) -> str:
        """What a cell name may be here: 'a1 to c3'."""
        first, last = self.action(self.rows - 1, 0), self.action(0, self.cols - 1)
        return f"{self.name(first)} to {self.name(last)}"

    # --- reading --------------------------------------------------------------------------

    def parse(self, text: str) -> int:
        """The action ``text`` names: a cell name ('h8', any case), the action number, or
        the 0-based ``row,col`` (uttt: ``board,cell``). IllegalMove if it names no cell of
        this board (legality is the rules' to say)."""
        t = text.strip().lower()
        cells = self.rows * self.cols
        match = _NAME.fullmatch(t)
        if match:
            col, number = LETTERS.index(match.group(1)), int(match.group(2))
            if col >= self.cols or not 1 <= number <= self.rows:
                raise IllegalMove(f"{t} is off the board: cells go from {self.describe()}")
            return self.action(self.rows - number, col)
        if t.isdigit():
            action = int(t)
            if action >= cells:
                raise IllegalMove(f"move {action} is out of range 0..{cells - 1}")
            return action
        match = _PAIR.fullmatch(t)
        if match:
            first, second = int(match.group(1)), int(match.group(2))
            if self.nested:
                if first > 8 or second > 8:
                    raise IllegalMove(f"board and cell are numbered 0..8, not {first},{second}")
                return first * 9 + second
            if first >= self.rows or second >= self.cols:
                raise IllegalMove(
                    f"{first},{second} is off the board: cells go from {self.describe()}"
                )
            return first * self.cols + second
        raise IllegalMove(
            f"cannot read {text.strip()!r} as a move: type a cell as the board labels it, "
            f"column then row (e.g. {self.example()})"
        )

    # --- drawing as text ------------------------------------------------------------------

    def render(self, board: list[int], symbols: tuple[str, ...] = ("X", "O")) -> str:
        """The board as text, labelled as the full-screen board is (column letters above, row
        numbers on the left); uttt's small boards separated by lines."""
        width = len(str(self.rows))
        letters = " ".join(
            self.column_label(c) + (" |" if self.nested and c in (2, 5) else "")
            for c in range(self.cols)
        )
        head = " " * (width + 1) + letters
        lines = [head]
        for row in range(self.rows):
            if self.nested and row in (3, 6):
                lines.append(" " * (width + 1) + "------+-------+------")
            cells = []
            for col in range(self.cols):
                value = board[self.action(row, col)]
                cells.append(symbols[value] if value >= 0 and value < len(symbols) else ".")
                if self.nested and col in (2, 5):
                    cells.append("|")
            lines.append(f"{self.row_label(row).rjust(width)} {' '.join(cells)}")
        return "\n".join(lines)

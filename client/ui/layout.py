"""How a screen with a board (the game, the replay) fits the terminal: one rule for both.

The screen is a title, then the board column (#board-column: the board, then the lines
under it) beside the side column (#side-column: players, moves), then the footer. The
board column is as wide as its board or the move box, whichever is wider; the side column
takes the rest. Narrow (``narrow``): no room for the side column, which is hidden. Short
(``compact``): no margins, one-line status and move box. Smaller still (``too-small``):
the board scrolls (#board-scroll) in what the lines under it leave, its cursor kept in view
(``BoardView.keep_in_view``), so that every cell can be seen and played and the lines under
it stay on the screen. The classes are the screen's, and client/ui/noughts.tcss says what
each changes.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from client.ui.board import BoardView

SIDE_COLUMN_MIN = 30  # the players' names and clocks
MOVE_BOX_WIDTH = 44  # noughts.tcss #move-input
TITLE_ROWS, FOOTER_ROWS = 1, 1


def board_size(screen: Screen[Any]) -> tuple[int, int]:
    """The board widget's width and height (its padding included)."""
    board = screen.query_one(BoardView)
    width = board.get_content_width(None, None) + 2  # its padding: 0 1
    return width, board.get_content_height(None, None, width)


def board_column_width(screen: Screen[Any]) -> int:
    """The board column's width beside the side column: its board or the move box, and
    its own padding (0 1)."""
    return max(board_size(screen)[0], MOVE_BOX_WIDTH) + 2


def fit_board_screen(
    screen: Screen[Any], width: int, height: int, rows_below: int, compact_rows_below: int
) -> bool:
    """Set ``screen``'s layout classes for a terminal of ``width`` x ``height``, whose board
    column has ``rows_below`` rows under the board with its margins, ``compact_rows_below``
    without; returns whether the board scrolls (``too-small``)."""
    column = board_column_width(screen)
    narrow = width < column + SIDE_COLUMN_MIN
    board_width, board_height = board_size(screen)
    # The title and the board each with a margin of one row below, the footer.
    compact = height < TITLE_ROWS + 1 + board_height + 1 + rows_below + FOOTER_ROWS
    too_small = (
        width < board_width + 2  # the column's padding
        or height < TITLE_ROWS + board_height + compact_rows_below + FOOTER_ROWS
    )
    screen.set_class(narrow, "narrow")
    screen.set_class(compact, "compact")
    screen.set_class(too_small, "too-small")
    screen.query_one("#board-column").styles.width = "1fr" if narrow else column
    if too_small:
        board = screen.query_one(BoardView)
        board.call_after_refresh(board.keep_in_view)
    return too_small

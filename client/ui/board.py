"""The board, drawn with colour: every m,n,k board and ultimate tic-tac-toe's 9x9.

``draw_board`` is pure (an engine state in, a Rich ``Text`` and a map from screen
positions to actions out); ``BoardView`` is the focusable widget around it with a
cursor moved by the arrow keys. Boards up to 9x9 get a grid; larger ones (gomoku)
a dotted field; uttt frames its small boards, marks the won ones with a large X or O
and shades the boards the side to move may play in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.containers import Container
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

import engine

X_STYLE = Style(color="#5fafff", bold=True)
O_STYLE = Style(color="#ff875f", bold=True)
PIECE_STYLES = (X_STYLE, O_STYLE)
EMPTY_STYLE = Style(color="#6c6c6c")
GRID_STYLE = Style(color="#767676")
FRAME_STYLE = Style(color="#bcbcbc", bold=True)
LABEL_STYLE = Style(color="#8a8a8a")
# The last move and the cursor are marked by more than a colour (underlined; in brackets),
# so that they stay apart where colours do not: NO_COLOR (Textual draws in greys, and these
# two backgrounds have about the same lightness), a monochrome terminal, colour blindness.
LAST_BG = Style(bgcolor="#5f5f00", underline=True)
CURSOR_BG = Style(bgcolor="#005f87")
LINE_BG = Style(bgcolor="#005f00")
PLAYABLE_BG = Style(bgcolor="#262626")
WON_BG = (Style(bgcolor="#0b2740"), Style(bgcolor="#40190b"))

# A won small board of uttt is drawn as one large symbol over its 3x3 cells.
BIG_SYMBOLS = (
    ("  ╲   ╱  ", "    ╳    ", "  ╱   ╲  "),
    ("  ╭───╮  ", "  │   │  ", "  ╰───╯  "),
)
BIG_DRAWN = ("         ", "  drawn  ", "         ")
GRID_LIMIT = 9  # boards with up to this many rows and columns get a drawn grid


def home_cell(state: engine.State, last: int | None) -> tuple[int, int]:
    """Where the cursor starts in a position: the legal cell nearest the last move (m,n,k);
    before the first move, and in uttt (where a move sends the player to another board),
    the legal cell nearest the centre of the cells one may play."""
    grid = state.game.grid
    rows, cols = grid.rows, grid.cols
    cells = [grid.cell(action) for action in state.legal_actions()]
    if not cells:
        return rows // 2, cols // 2
    target: tuple[float, float]
    if last is not None and not isinstance(state, engine.UTTTState):
        target = grid.cell(last)
    else:
        target = sum(r for r, _ in cells) / len(cells), sum(c for _, c in cells) / len(cells)
    return min(cells, key=lambda rc: ((rc[0] - target[0]) ** 2 + (rc[1] - target[1]) ** 2, rc))


@dataclass
class Drawing:
    """A drawn board: the text, and which action each character of a cell stands for."""

    text: Text
    cells: dict[tuple[int, int], int] = field(default_factory=dict)  # (y, x) -> action


def draw_board(
    state: engine.State, *, cursor: tuple[int, int] | None = None, last: int | None = None
) -> Drawing:
    """Draw ``state``; ``cursor`` (row, col) and the ``last`` move are highlighted."""
    if isinstance(state, engine.UTTTState):
        return _draw_uttt(state, cursor, last)
    assert isinstance(state, engine.MNKState)
    return _draw_mnk(state, cursor, last)


def _cell(
    state: engine.State, action: int, cursor_action: int | None, last: int | None, line: set[int]
) -> tuple[str, Style]:
    value = state.board[action]  # type: ignore[attr-defined]
    text, style = (" · ", EMPTY_STYLE) if value < 0 else (f" {'XO'[value]} ", PIECE_STYLES[value])
    if action in line:
        style += LINE_BG
    elif action == last:
        style += LAST_BG
    if action == cursor_action:
        text = f"[{text[1]}]"
        style += CURSOR_BG
    return text, style


def _draw_mnk(state: engine.MNKState, cursor: tuple[int, int] | None, last: int | None) -> Drawing:
    """Column letters above, row numbers on the left (engine/notation.py)."""
    grid = state.game.grid
    m, n = grid.rows, grid.cols
    cursor_action = grid.action(*cursor) if cursor else None
    line = set(state.winning_line() or ())
    width = len(str(m))
    drawing = Drawing(Text())
    out = drawing.text
    gridded = m <= GRID_LIMIT and n <= GRID_LIMIT
    pad = " " * (width + 1)
    step = " " if gridded else ""
    letters = pad + step + "".join(f"{grid.column_label(c):^3}" + step for c in range(n))
    out.append(letters.rstrip() + "\n", LABEL_STYLE)
    y = 1
    if gridded:
        out.append(pad + "┌" + "┬".join("───" for _ in range(n)) + "┐\n", GRID_STYLE)
        y += 1
    for r in range(m):
        label = grid.row_label(r)
        out.append(f"{label:>{width}} ", LABEL_STYLE)
        x = width + 1
        if gridded:
            out.append("│", GRID_STYLE)
            x += 1
        for c in range(n):
            action = grid.action(r, c)
            text, style = _cell(state, action, cursor_action, last, line)
            out.append(text, style)
            for dx in range(3):
                drawing.cells[(y, x + dx)] = action
            x += 3
            if gridded:
                out.append("│", GRID_STYLE)
                x += 1
        out.append("\n")
        y += 1
        if gridded:
            left, mid, right = ("├", "┼", "┤") if r < m - 1 else ("└", "┴", "┘")
            out.append(pad + left + mid.join("───" for _ in range(n)) + right + "\n", GRID_STYLE)
            y += 1
    out.rstrip()
    return drawing


def _draw_uttt(
    state: engine.UTTTState, cursor: tuple[int, int] | None, last: int | None
) -> Drawing:
    """The 9x9 grid labelled as one board (columns a-i above, rows 1-9 from the bottom on
    the left: engine/notation.py), its small boards framed."""
    grid = state.game.grid
    cursor_action = grid.action(*cursor) if cursor else None
    line = set(state.winning_line() or ())
    macro = state.board_winners()
    playable = set(state.allowed_boards())
    drawing = Drawing(Text())
    out = drawing.text
    letters = "   " + " ".join(
        "".join(f"{grid.column_label(c):^3}" for c in range(b, b + 3)) for b in (0, 3, 6)
    )
    out.append(letters.rstrip() + "\n", LABEL_STYLE)
    out.append("  " + _uttt_frame("┏", "┳", "┓") + "\n", FRAME_STYLE)
    y = 2
    for r in range(9):
        label = grid.row_label(r)
        out.append(f"{label} ", LABEL_STYLE)
        out.append("┃", FRAME_STYLE)
        x = 3
        for big_col in range(3):
            board = (r // 3) * 3 + big_col
            if macro[board] >= 0:
                # A closed small board: one large symbol (or "drawn") over its cells.
                big = BIG_SYMBOLS[macro[board]] if macro[board] in (0, 1) else BIG_DRAWN
                style = (
                    PIECE_STYLES[macro[board]] + WON_BG[macro[board]]
                    if macro[board] in (0, 1)
                    else EMPTY_STYLE
                )
                out.append(big[r % 3], style)
                for c in range(big_col * 3, big_col * 3 + 3):
                    for dx in range(3):
                        drawing.cells[(y, x + (c - big_col * 3) * 3 + dx)] = grid.action(r, c)
                x += 9
            else:
                for c in range(big_col * 3, big_col * 3 + 3):
                    action = grid.action(r, c)
                    text, style = _cell(state, action, cursor_action, last, line)
                    if board in playable and action not in line and action != last:
                        style = PLAYABLE_BG + style
                    out.append(text, style)
                    for dx in range(3):
                        drawing.cells[(y, x + dx)] = action
                    x += 3
            out.append("┃", FRAME_STYLE)
            x += 1
        out.append("\n")
        y += 1
        if r in (2, 5):
            out.append("  " + _uttt_frame("┣", "╋", "┫") + "\n", FRAME_STYLE)
            y += 1
    out.append("  " + _uttt_frame("┗", "┻", "┛"), FRAME_STYLE)
    return drawing


def _uttt_frame(left: str, middle: str, right: str) -> str:
    return left + middle.join("━" * 9 for _ in range(3)) + right


class BoardView(Widget, can_focus=True):
    """The board with a cursor: arrows move it, Enter or a click plays the cell."""

    BINDINGS = [
        Binding("up", "move_cursor(-1, 0)", "Up", show=False),
        Binding("down", "move_cursor(1, 0)", "Down", show=False),
        Binding("left", "move_cursor(0, -1)", "Left", show=False),
        Binding("right", "move_cursor(0, 1)", "Right", show=False),
        Binding("enter", "choose", "Play", show=True),
    ]

    cursor: reactive[tuple[int, int]] = reactive((0, 0))

    class Chosen(Message):
        """The player chose a cell (Enter or a click)."""

        def __init__(self, board: BoardView, action: int) -> None:
            super().__init__()
            self.board = board
            self.action = action

    def __init__(self, state: engine.State, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state
        self.last: int | None = None
        self.show_cursor = True
        self.playable = True  # False unless the viewer may move now: Enter and clicks play nothing
        self.set_reactive(BoardView.cursor, home_cell(state, None))
        self._homed: tuple[object, ...] = (state.game.grid, state.ply(), None)
        self._drawing: Drawing | None = None

    def show(self, state: engine.State, last: int | None, *, show_cursor: bool = True) -> None:
        """Draw another position (the same game); after a move the cursor goes home
        (home_cell: near the last move, or the centre of where one may play)."""
        self.state, self.last, self.show_cursor = state, last, show_cursor
        position = (state.game.grid, state.ply(), last)
        if position != self._homed:
            self._homed = position
            self.cursor = home_cell(state, last)
        self.refresh(layout=True)
        self.call_after_refresh(self.keep_in_view)

    def watch_cursor(self) -> None:
        self.call_after_refresh(self.keep_in_view)

    def keep_in_view(self) -> None:
        """Scroll the board's container, when the board does not fit it (a small terminal:
        client/ui/layout.py), to show the cell in play: the cursor's, or else the last move."""
        grid = self.state.game.grid
        action = grid.action(*self.cursor) if self.show_cursor else self.last
        if action is None or self.parent is None:
            return
        cells = [yx for yx, cell in draw_board(self.state).cells.items() if cell == action]
        if not cells:
            return
        y, x = min(cells)
        origin = self.virtual_region.offset  # in the container's scrolled space
        # 1: the left padding; the cell is 3 wide, with a column or a row of its neighbours.
        cell = Region(origin.x + 1 + x, origin.y + y, 3, 1).grow((1, 3, 1, 3))
        if isinstance(self.parent, Widget):
            self.parent.scroll_to_region(cell, animate=False)

    def render(self) -> Text:
        cursor = self.cursor if self.show_cursor and self.has_focus else None
        self._drawing = draw_board(self.state, cursor=cursor, last=self.last)
        return self._drawing.text

    def get_content_width(self, container: object, viewport: object) -> int:
        return max(len(line) for line in draw_board(self.state).text.plain.split("\n"))

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return len(draw_board(self.state).text.plain.split("\n"))

    def action_move_cursor(self, rows: int, cols: int) -> None:
        grid = self.state.game.grid
        height, width = grid.rows, grid.cols
        row, col = self.cursor
        self.cursor = ((row + rows) % height, (col + cols) % width)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.playable or action != "choose"

    def action_choose(self) -> None:
        self.post_message(self.Chosen(self, self.state.game.grid.action(*self.cursor)))

    def cursor_to(self, action: int) -> None:
        self.cursor = self.state.game.grid.cell(action)

    def on_click(self, event: events.Click) -> None:
        if self._drawing is None:
            return
        action = self._drawing.cells.get((event.y, event.x - 1))  # 1: the left padding
        if action is not None:
            self.cursor = self.state.game.grid.cell(action)
            if self.playable:
                self.post_message(self.Chosen(self, action))

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()


class BoardScroll(Container):
    """The board's container (#board-scroll), which scrolls it on a terminal too small for it
    (client/ui/layout.py). A scroll asked before the layout has given the container its size
    is clamped to nothing (a loaded machine lays out later than the board asks), so the cell
    in play is brought into view again whenever the container's size or the board's changes."""

    def on_resize(self, event: events.Resize) -> None:
        for board in self.query(BoardView):
            board.call_after_refresh(board.keep_in_view)

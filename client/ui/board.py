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
LAST_BG = Style(bgcolor="#5f5f00")
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


def grid_size(state: engine.State) -> tuple[int, int]:
    """Rows and columns of the board as drawn (uttt: 9x9)."""
    if isinstance(state, engine.UTTTState):
        return 9, 9
    assert isinstance(state, engine.MNKState)
    return state.game.m, state.game.n


def action_at(state: engine.State, row: int, col: int) -> int:
    """The action of the cell drawn at (row, col)."""
    if isinstance(state, engine.UTTTState):
        return ((row // 3) * 3 + col // 3) * 9 + (row % 3) * 3 + col % 3
    assert isinstance(state, engine.MNKState)
    return row * state.game.n + col


def cell_of(state: engine.State, action: int) -> tuple[int, int]:
    """Where an action is drawn: (row, col)."""
    if isinstance(state, engine.UTTTState):
        board, cell = divmod(action, 9)
        return (board // 3) * 3 + cell // 3, (board % 3) * 3 + cell % 3
    assert isinstance(state, engine.MNKState)
    return divmod(action, state.game.n)


def home_cell(state: engine.State, last: int | None) -> tuple[int, int]:
    """Where the cursor starts in a position: the legal cell nearest the last move (m,n,k);
    before the first move, and in uttt (where a move sends the player to another board),
    the legal cell nearest the centre of the cells one may play."""
    rows, cols = grid_size(state)
    cells = [cell_of(state, action) for action in state.legal_actions()]
    if not cells:
        return rows // 2, cols // 2
    target: tuple[float, float]
    if last is not None and not isinstance(state, engine.UTTTState):
        target = cell_of(state, last)
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
        style += CURSOR_BG
    return text, style


def _draw_mnk(state: engine.MNKState, cursor: tuple[int, int] | None, last: int | None) -> Drawing:
    m, n = state.game.m, state.game.n
    cursor_action = cursor[0] * n + cursor[1] if cursor else None
    line = set(state.winning_line() or ())
    width = len(str(m - 1))
    drawing = Drawing(Text())
    out = drawing.text
    grid = m <= GRID_LIMIT and n <= GRID_LIMIT
    pad = " " * (width + 1)
    # Column numbers, centred over their cells.
    out.append(pad + (" " if grid else ""))
    out.append("".join(f"{c:^3}" + (" " if grid else "") for c in range(n)).rstrip(), LABEL_STYLE)
    out.append("\n")
    y = 1
    if grid:
        out.append(pad + "┌" + "┬".join("───" for _ in range(n)) + "┐\n", GRID_STYLE)
        y += 1
    for r in range(m):
        out.append(f"{r:>{width}} ", LABEL_STYLE)
        x = width + 1
        if grid:
            out.append("│", GRID_STYLE)
            x += 1
        for c in range(n):
            action = r * n + c
            text, style = _cell(state, action, cursor_action, last, line)
            out.append(text, style)
            for dx in range(3):
                drawing.cells[(y, x + dx)] = action
            x += 3
            if grid:
                out.append("│", GRID_STYLE)
                x += 1
        out.append("\n")
        y += 1
        if grid:
            left, mid, right = ("├", "┼", "┤") if r < m - 1 else ("└", "┴", "┘")
            out.append(pad + left + mid.join("───" for _ in range(n)) + right + "\n", GRID_STYLE)
            y += 1
    out.rstrip()
    return drawing


def _draw_uttt(
    state: engine.UTTTState, cursor: tuple[int, int] | None, last: int | None
) -> Drawing:
    cursor_action = action_at(state, *cursor) if cursor else None
    line = set(state.winning_line() or ())
    macro = state.board_winners()
    playable = set(state.allowed_boards())
    drawing = Drawing(Text())
    out = drawing.text
    out.append(_uttt_frame("┏", "┳", "┓", 0) + "\n", FRAME_STYLE)
    y = 1
    for r in range(9):
        out.append("┃", FRAME_STYLE)
        x = 1
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
                        drawing.cells[(y, x + (c - big_col * 3) * 3 + dx)] = action_at(state, r, c)
                x += 9
            else:
                for c in range(big_col * 3, big_col * 3 + 3):
                    action = action_at(state, r, c)
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
            out.append(_uttt_frame("┣", "╋", "┫", r + 1) + "\n", FRAME_STYLE)
            y += 1
    out.append("┗" + "┻".join("━" * 9 for _ in range(3)) + "┛\n", FRAME_STYLE)
    # The notation of moves (the engine's, as the move list and the exports write them and the
    # move box reads them): B board C cell, the cells of a board numbered as below.
    out.append("B# C#: cells 0 1 2/3 4 5/6 7 8", LABEL_STYLE)
    return drawing


def _uttt_frame(left: str, middle: str, right: str, row: int) -> str:
    """A frame line above the small boards of ``row`` (0, 3, 6), each named as moves name it
    (B0..B8)."""
    return left + middle.join(f"━B{row + i}" + "━" * 6 for i in range(3)) + right


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
        self.playable = True  # False for a spectator: Enter and clicks play nothing
        self.set_reactive(BoardView.cursor, home_cell(state, None))
        self._homed: tuple[object, ...] = (grid_size(state), state.ply(), None)
        self._drawing: Drawing | None = None

    def show(self, state: engine.State, last: int | None, *, show_cursor: bool = True) -> None:
        """Draw another position (the same game); after a move the cursor goes home
        (home_cell: near the last move, or the centre of where one may play)."""
        self.state, self.last, self.show_cursor = state, last, show_cursor
        position = (grid_size(state), state.ply(), last)
        if position != self._homed:
            self._homed = position
            self.cursor = home_cell(state, last)
        self.refresh(layout=True)

    def render(self) -> Text:
        cursor = self.cursor if self.show_cursor and self.has_focus else None
        self._drawing = draw_board(self.state, cursor=cursor, last=self.last)
        return self._drawing.text

    def get_content_width(self, container: object, viewport: object) -> int:
        return max(len(line) for line in draw_board(self.state).text.plain.split("\n"))

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return len(draw_board(self.state).text.plain.split("\n"))

    def action_move_cursor(self, rows: int, cols: int) -> None:
        height, width = grid_size(self.state)
        row, col = self.cursor
        self.cursor = ((row + rows) % height, (col + cols) % width)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.playable or action != "choose"

    def action_choose(self) -> None:
        self.post_message(self.Chosen(self, action_at(self.state, *self.cursor)))

    def cursor_to(self, action: int) -> None:
        self.cursor = cell_of(self.state, action)

    def on_click(self, event: events.Click) -> None:
        if self._drawing is None:
            return
        action = self._drawing.cells.get((event.y, event.x - 1))  # 1: the left padding
        if action is not None:
            self.cursor = cell_of(self.state, action)
            if self.playable:
                self.post_message(self.Chosen(self, action))

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

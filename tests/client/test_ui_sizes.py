"""The terminal interface at the sizes terminals have (client/ui/layout.py), driven by its
pilot against a real server: 80x24, the most common, and smaller."""

from __future__ import annotations

from typing import Any

import pytest
from rich.style import Style
from textual.geometry import Region
from textual.widgets import Static

from client.ui import NoughtsApp, Start
from client.ui.board import BoardView, draw_board
from client.ui.dialogs import NewGameDialog
from client.ui.game import GameOverScreen
from client.ui.lobby import LobbyScreen
from client.ui.replay import ReplayScreen
from protocol import CreateGame
from tests.client.test_export import play_humans
from tests.client.test_ui_game_keys import app_joining, game_screen, notes
from tests.client.ui_support import UIServer, until

CLOCK = {"initial_ms": 180_000, "increment_ms": 2_000}


async def bobs(server: UIServer, game: str, **create: Any) -> tuple[Any, Any]:
    """bob's game of ``game``, O taken, X open for the app; bob's connection and seat."""
    bob = await server.connect("bob")
    return bob, await bob.request(CreateGame, game=game, opponent="human", seat=1, **create)


@pytest.mark.parametrize("game", ["tictactoe", "5x5", "uttt"])
async def test_at_80x24_the_players_and_moves_stay_beside_the_board(
    ui_server: UIServer, game: str
) -> None:
    """At 80 columns every board's column was 52 wide (gomoku's), so with the side
    column's 30 it did not fit: the players, their clocks and the moves were hidden in
    every game, though a 3x3 board is 17 columns wide. The board column now fits its own
    board (or the move box)."""
    bob, seated = await bobs(ui_server, game, clock=CLOCK)
    app = app_joining(ui_server, seated)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await game_screen(pilot, app)
            assert "narrow" not in screen.classes
            board = screen.query_one("#board").region
            players = screen.query_one("#players").region
            assert board.right <= players.x and players.right <= 80 and players.width >= 30
            assert "3:00" in str(screen.query_one("#players", Static).render())
            assert screen.query_one("#moves").region.height >= 3
    finally:
        await bob.close()


async def test_a_board_too_wide_for_the_side_column_keeps_the_clocks_in_view(
    ui_server: UIServer,
) -> None:
    """Where the side column does not fit beside the board (gomoku at 80x24), the players
    and their clocks went with it: a timed game showed no clock. They are now at the head
    of the title, on its row."""
    bob, seated = await bobs(ui_server, "gomoku", clock=CLOCK)
    app = app_joining(ui_server, seated)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await game_screen(pilot, app)
            assert "narrow" in screen.classes
            title = str(screen.query_one("#game-title", Static).render())
            assert title.startswith("▶ X ada 3:00   O bob 3:00  ·  gomoku  ·  3+2"), title
            assert screen.query_one("#move-input").region.bottom <= 23  # above the footer
    finally:
        await bob.close()


async def test_the_replay_fits_80_columns_and_drops_its_move_list_when_narrow(
    ui_server: UIServer,
) -> None:
    """The replay had no rule for a small terminal: at 80 columns its move list ran 4
    columns off the screen, at 40 all of it. It fits as the game screen does."""
    record = await play_humans(ui_server, "uttt", [40, 36, 4])
    app = NoughtsApp(ui_server.url, name="viewer", start=Start("replay", game_id=record["id"]))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay")
        screen = app.screen
        await until(pilot, lambda: screen.is_mounted, "the replay on screen")
        await pilot.pause()
        side = screen.query_one("#side-column").region
        assert side.right <= 80 and side.width >= 30
        assert screen.query_one("#board").region.right <= side.x
        await pilot.resize_terminal(40, 24)
        await pilot.pause()
        assert "narrow" in screen.classes
        assert screen.query_one("#side-column").region.area == 0
        assert screen.query_one("#replay-move").region.right <= 40


def cell_on_screen(screen: Any, action: int) -> bool:
    """Whether ``action``'s cell of the board is drawn where it can be seen: inside the
    board's scrolled container, which is inside the terminal."""
    board = screen.query_one(BoardView)
    y, x = min(yx for yx, cell in draw_board(board.state).cells.items() if cell == action)
    cell = Region(board.region.x + 1 + x, board.region.y + y, 3, 1)  # 1: the left padding
    window = screen.query_one("#board-scroll").scrollable_content_region
    return window.contains_region(cell) and screen.region.contains_region(window)


async def test_a_board_larger_than_the_terminal_scrolls_to_its_cursor(ui_server: UIServer) -> None:
    """At 40x12 the gomoku board was cut off (its rows below 10 and columns past k never
    shown), the status and the move box were below the screen, a note said to enlarge the
    terminal, and the game-over dialog (60 wide) ran off it. The board now scrolls in what
    the status and the move box leave, to its cursor wherever the arrows take it: every
    cell can be seen and played; the dialog fits."""
    bob, seated = await bobs(ui_server, "gomoku")
    app = app_joining(ui_server, seated)
    try:
        async with app.run_test(size=(40, 12)) as pilot:
            screen = await game_screen(pilot, app)
            assert "too-small" in screen.classes
            for widget in ("#game-status", "#move-input"):
                region = screen.query_one(widget).region
                assert region.height >= 1 and region.bottom <= 11 and region.right <= 40
            board = screen.query_one(BoardView)
            grid = board.state.game.grid
            # (read before its notification's few seconds are over, on a loaded machine too)
            assert any("The board scrolls to the cursor" in n for n in notes(app))
            centre = grid.action(*board.cursor)  # h8
            await until(pilot, lambda: cell_on_screen(screen, centre), "the centre in view")
            for keys, corner in ((["up", "left"] * 7, "a15"), (["down", "right"] * 14, "o1")):
                await pilot.press(*keys)
                await pilot.pause()
                assert grid.action(*board.cursor) == grid.parse(corner)
                cell = grid.parse(corner)
                await until(pilot, lambda c=cell: cell_on_screen(screen, c), corner)
            await pilot.press("enter")  # plays o1, the cell in view
            await until(pilot, lambda: len(screen.model.moves) == 1, "the move")
            assert screen.model.moves[0].text == "o1"
            await pilot.press("ctrl+x", "ctrl+x")  # abort: the game-over dialog
            await until(pilot, lambda: isinstance(app.screen, GameOverScreen), "game over")
            await pilot.pause()
            dialog = app.screen.query_one("#game-over").region
            assert dialog.right <= 40 and dialog.bottom <= 12
    finally:
        await bob.close()


async def test_the_replay_scrolls_to_the_last_move_and_dialogs_fit(ui_server: UIServer) -> None:
    """The replay at 40x12 showed the top of a uttt board and nothing under it; the new-game
    and game-over dialogs (56 and 60 wide) ran off a 40-column terminal. The replay's board
    scrolls to the move shown, its line under the board; the dialogs fit the width."""
    record = await play_humans(ui_server, "uttt", [40, 36, 4, 44, 80])  # e5 d4 b2 f4 i1
    app = NoughtsApp(ui_server.url, name="viewer", start=Start("replay", game_id=record["id"]))
    async with app.run_test(size=(40, 12)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay")
        screen = app.screen
        await until(pilot, lambda: screen.is_mounted, "the replay on screen")
        await pilot.pause()
        assert "too-small" in screen.classes
        assert cell_on_screen(screen, 80)  # i1, the last move
        move = screen.query_one("#replay-move")
        assert move.region.bottom <= 11 and "i1" in str(move.render())
        await pilot.press("home", "right")
        await pilot.pause()
        assert cell_on_screen(screen, 40)  # e5, the first
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the dialog")
        await pilot.pause()
        assert app.screen.query_one("#dialog").region.right <= 40


@pytest.mark.parametrize("game", ["tictactoe", "uttt"])
def test_the_cursor_and_the_last_move_are_told_apart_without_colours(game: str) -> None:
    """Probe: the cursor and the last move were marked by their background colours alone,
    of about the same lightness: under NO_COLOR (Textual then draws in greys), on a
    monochrome terminal or to a colour-blind player they looked alike. Now each has a mark
    of its own besides its colour: the cursor's cell in brackets, the last move underlined."""
    import engine

    moves: list[int] = []
    for _ in range(3):  # X, O, X
        moves.append(min(engine.replay((game, {}), moves).legal_actions()))
    state = engine.replay((game, {}), moves)
    empty = sorted(state.legal_actions())
    grid = state.game.grid
    cursor, other_empty = grid.cell(empty[0]), empty[1]
    drawing = draw_board(state, cursor=cursor, last=moves[2])
    text = drawing.text
    starts = [0]
    for row in text.plain.split("\n"):
        starts.append(starts[-1] + len(row) + 1)

    def marks(action: int) -> tuple[str, bool, bool, bool]:
        """What shows of ``action``'s cell once its colours are taken away."""
        cells = sorted(yx for yx, cell in drawing.cells.items() if cell == action)
        offsets = [starts[y] + x for y, x in cells]
        styles = [
            Style.combine(s.style for s in text.spans if s.start <= o < s.end) for o in offsets
        ]
        shown = "".join(text.plain[o] for o in offsets)
        return (
            shown,
            any(bool(s.underline) for s in styles),
            any(bool(s.reverse) for s in styles),
            any(bool(s.bold) for s in styles),
        )

    assert marks(empty[0]) != marks(other_empty)  # the cursor
    assert marks(moves[2]) != marks(moves[0])  # the last move, beside another of X's

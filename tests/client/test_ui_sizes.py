"""The terminal interface at the sizes terminals have (client/ui/layout.py), driven by its
pilot against a real server: 80x24, the most common, and smaller."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Static

from client.ui import NoughtsApp, Start
from client.ui.replay import ReplayScreen
from protocol import CreateGame
from tests.client.test_export import play_humans
from tests.client.test_ui_game_keys import app_joining, game_screen
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

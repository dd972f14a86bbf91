"""Issue 12's defects of the Textual client, driven by its pilot against a real server."""

from __future__ import annotations

from client.ui import NoughtsApp, Start
from client.ui.game import GameScreen
from protocol import Ended
from tests.client.test_ui_game_keys import app_joining, bobs_game, game_screen, notes
from tests.client.ui_support import UIServer, next_event, until

SIZE = (110, 36)


async def test_perfect_on_gomoku_shows_the_refusal(ui_server: UIServer) -> None:
    """Defect 1: the game hung at "thinking..." forever; the server refuses it at creation
    and the app shows why, with no game screen."""
    fields = {"game": "gomoku", "opponent": "ai", "seat": 0, "algorithm": "perfect"}
    app = NoughtsApp(ui_server.url, name="ada", start=Start("ai", fields=fields))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: any("refused" in n for n in notes(app)), "the refusal")
        refusal = next(n for n in notes(app) if "refused" in n)
        assert "perfect cannot play gomoku" in refusal and "16 cells" in refusal
        assert not isinstance(app.screen, GameScreen)


async def test_a_stray_a_or_d_does_nothing_until_pressed_again(ui_server: UIServer) -> None:
    """Defect 11: letters typed on the board fired commands (a aborted at once). Abort and
    draw take a second press, as resign does."""
    bob, seated = await bobs_game(ui_server)
    app = app_joining(ui_server, seated)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await game_screen(pilot, app)
            model = screen.model
            await pilot.press("a")
            assert ": Press a again to abort the game." in notes(app)
            await pilot.press("d")  # another key: a is forgotten, d waits for its second press
            assert ": Press d again to offer a draw." in notes(app)
            # A move after both: had either gone to the server, the game would be over.
            await pilot.press("4", "enter")
            await until(pilot, lambda: len(model.moves) == 1, "our move")
            assert not model.over and model.offers == {}
            await pilot.press("a", "a")
            ended = await next_event(bob, Ended)
            assert ended.reason == "abort"
    finally:
        await bob.close()

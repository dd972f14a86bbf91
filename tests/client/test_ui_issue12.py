"""Issue 12's defects of the Textual client, driven by its pilot against a real server."""

from __future__ import annotations

from client.ui import NoughtsApp, Start
from client.ui.game import GameScreen
from tests.client.test_ui_game_keys import notes
from tests.client.ui_support import UIServer, until

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

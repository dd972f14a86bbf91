"""Issue 12's finding and reading aids: the lobby's seek filters, by game (f) and by clock (t),
each key going through the values among the seeks, then back to all; the board's labels in
the move notation; the legal-move hint of uttt. A real server, a real app."""

from __future__ import annotations

from textual.widgets import DataTable, Label

from client.ui import NoughtsApp, Start
from protocol import Seek
from tests.client.ui_support import UIServer, open_lobby, until

SIZE = (100, 30)


async def test_the_seeks_are_filtered_by_game_and_by_clock(ui_server: UIServer) -> None:
    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    bob = await ui_server.connect("bob")
    try:
        async with app.run_test(size=SIZE) as pilot:
            lobby = await open_lobby(pilot, app)
            table = lobby.query_one("#seeks", DataTable)
            await bob.request(Seek, game="5x5")
            blitz = {"initial_ms": 180_000, "increment_ms": 2000}
            await bob.request(Seek, game="tictactoe", clock=blitz)
            await bob.request(Seek, game="tictactoe")
            await until(pilot, lambda: table.row_count == 3, "the three seeks")

            def shown() -> list[tuple[str, str]]:
                rows = (table.get_row_at(i) for i in range(table.row_count))
                return sorted((str(row[1]), str(row[2])) for row in rows)

            await pilot.press("f")  # the games in order: 5x5 first
            assert shown() == [("5x5", "no clock")]
            await pilot.press("f")
            assert shown() == [("tictactoe", "3+2"), ("tictactoe", "no clock")]
            await pilot.press("t")
            assert shown() == [("tictactoe", "3+2")]
            title = str(lobby.query_one("#seeks-title", Label).render())
            assert title.startswith("Open seeks · tictactoe, 3+2 (1 of 3")
            await pilot.press("f")  # every game again, the clock filter stays
            assert shown() == [("tictactoe", "3+2")]
            await pilot.press("t")
            assert shown() == [("5x5", "no clock"), ("tictactoe", "no clock")]
            await pilot.press("t")
            assert len(shown()) == 3
            assert str(lobby.query_one("#seeks-title", Label).render()) == "Open seeks"
    finally:
        await bob.close()


def test_every_full_screen_board_labels_its_cells_in_the_move_notation() -> None:
    """Issue 12: cell labels on the full-screen board, uttt too, in the notation the prompt,
    the move list and the exports use (m,n,k: row,col; uttt: B board C cell)."""
    import engine
    from client.ui.board import draw_board

    state = engine.make_game("tictactoe").new_initial_state()
    lines = draw_board(state).text.plain.splitlines()
    assert lines[0].split() == ["0", "1", "2"] and lines[2].split()[0] == "0"
    assert state.action_to_string(5) == "1,2"  # row 1, column 2, as labelled
    uttt = engine.make_game("uttt").new_initial_state()
    plain = draw_board(uttt).text.plain
    for board in range(9):
        assert f"━B{board}━" in plain
    assert plain.endswith("B# C#: cells 0 1 2/3 4 5/6 7 8")
    assert uttt.action_to_string(4 * 9 + 0) == "B4 C0" and uttt.parse_action("B4 C0") == 36


async def test_uttt_says_where_the_rules_send_the_player(ui_server: UIServer) -> None:
    from textual.widgets import Static

    from client.ui.game import GameScreen
    from protocol import CreateGame, Move

    bob = await ui_server.connect("bob")
    try:
        seated = await bob.request(CreateGame, game="uttt", opponent="human", seat=0)
        app = NoughtsApp(ui_server.url, name="ada", start=Start("join", game_id=seated.game_id))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            screen = app.screen
            assert isinstance(screen, GameScreen)
            await until(pilot, lambda: screen.model.status == "live", "the game started")
            # X plays the centre cell of the top-left board: O is sent to board B4.
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=4, ply=0)
            await until(pilot, lambda: screen.model.my_turn, "our turn")
            await pilot.pause()
            status = str(screen.query_one("#game-status", Static).render())
            assert status.startswith("Your move in B4: arrows + Enter, or type B4 C0"), status
    finally:
        await bob.close()

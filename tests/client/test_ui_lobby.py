"""Issue 12's finding and reading aids: the lobby's seek filters, by game (f) and by clock (t),
each key going through the values among the seeks, then back to all; the board's labels in
the move notation; the legal-move hint of uttt. A real server, a real app."""

from __future__ import annotations

from textual.widgets import DataTable, Label

from client.ui import NoughtsApp, Start
from protocol import LobbyEvent, Seek, SeekDeclined
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
    """Issue 12: cell labels on the full-screen board, uttt too, in the one notation the
    prompt, the move list, replays and the exports use (engine/notation.py): column
    letters and row numbers from the bottom; uttt's 9x9 grid labelled as one board."""
    import engine
    from client.ui.board import draw_board

    state = engine.replay(("tictactoe", {}), [5])
    lines = draw_board(state).text.plain.splitlines()
    assert lines[0].split() == ["a", "b", "c"]
    assert [line.split()[0] for line in lines[2:7:2]] == ["3", "2", "1"]
    assert lines[4].split() == ["2", "│", "·", "│", "·", "│", "X", "│"]  # c2
    assert state.action_to_string(5) == "c2" and state.parse_action("a1") == 6
    uttt = engine.replay(("uttt", {}), [40])
    plain = draw_board(uttt).text.plain.splitlines()
    assert plain[0].split() == list("abcdefghi")
    assert [line.split()[0] for line in plain[2:13] if line.split()[0].isdigit()] == list(
        "987654321"
    )
    # X's move on the centre cell of the centre board: e5, under "e", in row 5.
    row5 = next(line for line in plain if line.startswith("5 "))
    assert row5[plain[0].index("e")] == "X"
    assert uttt.action_to_string(40) == "e5" and uttt.parse_action("d6") == 36


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
            # X plays the centre cell of the top-left board (b8): O is sent to the centre.
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=4, ply=0)
            await until(pilot, lambda: screen.model.my_turn, "our turn")
            await pilot.pause()
            status = str(screen.query_one("#game-status", Static).render())
            assert status.startswith(
                "Your move in the centre board, d4-f6: arrows + Enter, or type the cell"
            ), status
            # The cell typed as labelled, in the move box (letters on the board type it).
            await pilot.press("e", "5", "enter")
            await until(pilot, lambda: len(screen.model.moves) == 2, "our move")
            assert screen.model.moves[-1].text == "e5" and screen.model.moves[-1].action == 40
    finally:
        await bob.close()


async def test_lobby_messages_while_the_screen_is_taken_down_show_nothing(
    ui_server: UIServer,
) -> None:
    """A server message can reach the lobby after its widgets are removed and before it is
    unmounted (the fresh-clone suite once failed on '#live' there): it is kept, not shown,
    and nothing raises."""
    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    async with app.run_test(size=SIZE) as pilot:
        lobby = await open_lobby(pilot, app)
        for selector in ("#seeks", "#live", "#finished", "#mine", "#lobby-status"):
            await lobby.query_one(selector).remove()
        game = {"game_id": "g1", "game": "uttt", "players": [], "ply": 1}
        lobby.lobby_message(LobbyEvent(kind="game_added", game=game))
        lobby.lobby_message(SeekDeclined(seek_id="s1", player={"name": "bob"}))
        lobby.your_games_changed()
        assert lobby.is_mounted and "g1" in lobby.live


async def test_a_refused_new_game_keeps_the_dialog_and_its_choices(ui_server: UIServer) -> None:
    """A walk's finding: a budget over the server's maximum (20000 ms; 10000 by default)
    closed the dialog with a toast, and every choice was lost. The dialog now asks the
    server itself and stays open on a refusal, saying why, to change the time and retry."""
    from textual.widgets import Input, Select

    from client.ui.dialogs import NewGameDialog
    from client.ui.game import GameScreen
    from tests.client.ui_support import press_ok

    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    async with app.run_test(size=(110, 36)) as pilot:
        await open_lobby(pilot, app)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the dialog")
        dialog = app.screen
        dialog.query_one("#game", Select).value = "5x5"
        dialog.query_one("#budget", Input).value = "20000"
        await press_ok(pilot, dialog)
        error = dialog.query_one("#dialog-error", Label)
        await until(pilot, lambda: "refused" in str(error.render()), "the refusal")
        assert "10000" in str(error.render())
        assert app.screen is dialog and dialog.query_one("#game", Select).value == "5x5"
        dialog.query_one("#budget", Input).value = "300"
        await pilot.pause(0.5)  # the button takes no press during its pressed look (0.2 s)
        await press_ok(pilot, dialog)
        await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
        assert app.screen.model.game == "5x5"  # type: ignore[attr-defined]


async def test_a_new_game_lost_with_the_connection_says_so_and_can_be_sent_again(
    ui_server: UIServer,
) -> None:
    """The new-game dialog's request lost with the connection left the dialog "Asking the
    server…" for ever, taking no second OK, and a toast said only "Offline". The dialog now
    says the request was lost with the connection and to try again once reconnected, its
    choices kept; once back online, its OK starts the game."""
    from textual.widgets import Input, Select

    from client.ui.dialogs import NewGameDialog
    from client.ui.game import GameScreen
    from tests.client.test_ui import go_offline
    from tests.client.ui_support import press_ok

    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    async with app.run_test(size=(110, 36)) as pilot:
        lobby = await open_lobby(pilot, app)
        url = await go_offline(pilot, app)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the dialog")
        dialog = app.screen
        dialog.query_one("#game", Select).value = "5x5"
        await press_ok(pilot, dialog)
        error = dialog.query_one("#dialog-error", Label)
        await until(pilot, lambda: "lost with the connection" in str(error.render()), "the loss")
        assert "try again once reconnected" in str(error.render()).lower()
        assert "lost with the connection" in str(lobby.query_one("#lobby-status").render())
        assert app.screen is dialog and dialog.query_one("#game", Select).value == "5x5"
        app.link.url = url
        await until(pilot, lambda: app.link_state[0] == "online", "the connection back")
        dialog.query_one("#budget", Input).focus()
        await pilot.press("enter")  # (an Input's Enter is the dialog's OK)
        await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
        assert app.screen.model.game == "5x5"  # type: ignore[attr-defined]


async def test_a_new_game_whose_answer_was_lost_is_not_made_twice(ui_server: UIServer) -> None:
    """The new-game dialog's "play the AI" whose answer was lost with the connection (the
    server made the game) said to try again once reconnected, and OK again made a second
    game. Now OK again finds the game the first request made among the seats the welcome
    gave back, and opens it: one request, one game."""
    from client.ui.dialogs import NewGameDialog
    from client.ui.game import GameScreen
    from tests.client.ui_support import live_games_of, press_ok
    from tests.services import PostgresLink

    relay = PostgresLink(target=("127.0.0.1", int(ui_server.url.rsplit(":", 1)[1])))
    await relay.open()
    bob = await ui_server.connect("bob")

    async def adas_games() -> list[str]:
        return await live_games_of(bob, "ada")

    app = NoughtsApp(f"ws://127.0.0.1:{relay.port}", name="ada", start=Start("lobby"))
    try:
        async with app.run_test(size=(110, 36)) as pilot:
            await open_lobby(pilot, app)
            await pilot.press("p")
            await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the dialog")
            dialog = app.screen
            relay.hold_answers()  # the server's answers no longer reach the app
            await press_ok(pilot, dialog)
            made: list[str] = []
            while not made:  # the server made it
                made = await adas_games()
                await pilot.pause(0.02)
            await relay.cut()  # its answer lost with the connection
            error = dialog.query_one("#dialog-error", Label)
            await until(
                pilot, lambda: "lost with the connection" in str(error.render()), "the loss"
            )
            await relay.restore()
            await until(pilot, lambda: app.link_state[0] == "online", "the connection back")
            await pilot.pause(0.5)  # the button takes no press during its pressed look (0.2 s)
            await press_ok(pilot, dialog)
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            assert app.screen.model.game_id == made[0]  # type: ignore[attr-defined]
            await until(pilot, lambda: app.screen.model.state is not None, "its position")  # type: ignore[attr-defined]
            assert await adas_games() == made
    finally:
        await bob.close()
        await relay.close()

"""Sessions kept between runs of the app, and "your games" in the lobby, against a real
server: a game started in one run is resumed from the lobby of the next and played on."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Static

from client.sessions import SessionStore
from client.ui import NoughtsApp, Start
from client.ui.app import ServerMessage
from client.ui.game import GameScreen
from client.ui.lobby import LobbyScreen
from protocol import CreateGame, Move, Moved, Presence, Resign, Seated
from tests.client.ui_support import UIServer, next_event, open_lobby, until

SIZE = (110, 36)


def notes(app: NoughtsApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


def mine(lobby: LobbyScreen) -> DataTable[Any]:
    return lobby.query_one("#mine", DataTable)


async def _the_centre_played(pilot: Any, app: NoughtsApp) -> Any:
    """Once the app shows its game and it is our turn, the centre of the 5x5 board played:
    the game's model."""
    await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
    model = app.screen.model
    await until(pilot, lambda: model.my_turn, "our turn")
    await pilot.press("1", "2", "enter")
    await until(pilot, lambda: len(model.moves) == 1, "our move")
    return model


async def test_a_game_started_in_one_run_is_resumed_from_the_lobby_of_the_next(
    ui_server: UIServer, tmp_path: Path
) -> None:
    sessions = SessionStore(tmp_path / "sessions.json")
    bob = await ui_server.connect("bob")
    try:
        seated = await bob.request(CreateGame, game="5x5", opponent="human", seat=1)
        game_id = seated.game_id
        # First run: ada joins bob's game as X, plays the centre, and closes the app.
        first = NoughtsApp(
            ui_server.url, name="ada", start=Start("join", game_id=game_id), sessions=sessions
        )
        async with first.run_test(size=SIZE) as pilot:
            model = await _the_centre_played(pilot, first)
            # Esc: the lobby lists it as it stands (a probe's finding: the row kept the
            # record fetched when we were seated, "0 your move", for the rest of the run).
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(first.screen, LobbyScreen), "the lobby")
            rows = mine(first.screen)
            await until(pilot, lambda: _row(rows, game_id)[2:4] == ["their move", "1"], "row")
            player_id = first.link.player_id
        saved = sessions.load(ui_server.url, "ada")
        assert saved is not None
        assert stat.S_IMODE(sessions.path.stat().st_mode) == 0o600
        gone = await next_event(bob, Presence)
        assert (gone.seat, gone.online) == (0, False)
        # While ada is away, bob answers.
        await bob.request(Move, game_id=game_id, token=seated.token, action=0, ply=1)
        # Second run: the same session; the lobby lists the game; Enter resumes it.
        second = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"), sessions=sessions)
        async with second.run_test(size=SIZE) as pilot:
            lobby = await open_lobby(pilot, second)
            assert second.link.player_id == player_id
            assert set(second.resumable) == {game_id}
            table = mine(lobby)
            await until(
                pilot, lambda: table.row_count == 1 and "…" not in _row(table, game_id), "row"
            )
            assert lobby.query_one("#mine-pane").display
            assert _row(table, game_id) == ["5x5", "X", "your move", "2", "bob"]
            assert lobby.focused is table  # Enter resumes straight away
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(second.screen, GameScreen), "the game")
            game = second.screen
            assert isinstance(game, GameScreen)
            model = game.model
            await until(pilot, lambda: model.state is not None, "the game's snapshot")
            assert model.game_id == game_id and model.seat == 0
            assert model.state is not None and model.state.history() == [12, 0]
            assert model.my_turn
            # We play on; bob sees the move.
            await pilot.press("6", "enter")
            await until(pilot, lambda: len(model.moves) == 3, "our move")
            moved = await next_event(bob, Moved)
            while moved.ply < 2:  # bob also saw the two moves before ours
                moved = await next_event(bob, Moved)
            assert (moved.seat, moved.action) == (0, 6)
            # Esc leaves the game running: it stays under Your games, their move now.
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(second.screen, LobbyScreen), "the lobby")
            assert any("goes on without you" in n for n in notes(second))
            assert not any("clock runs" in n for n in notes(second))  # it has no clock
            await until(pilot, lambda: _row(table, game_id)[2:4] == ["their move", "3"], "row")
            # Enter on it among the live games takes us back to it too: we play, not watch.
            live = lobby.query_one("#live", DataTable)
            await until(pilot, lambda: game_id in [k.value for k in live.rows], "listed live")
            live.focus()
            live.move_cursor(row=live.get_row_index(game_id))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(second.screen, GameScreen), "the game again")
            assert second.screen.model is model and game_id not in second.watching
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(second.screen, LobbyScreen), "the lobby")
            # It ends while we are in the lobby: we are told, and it leaves the list.
            await bob.request(Resign, game_id=game_id, token=seated.token)
            await until(pilot, lambda: any("You win: resignation" in n for n in notes(second)), "")
            await until(pilot, lambda: table.row_count == 0, "the game off the list")
            assert not lobby.query_one("#mine-pane").display
    finally:
        await bob.close()


def _row(table: DataTable[Any], key: str) -> list[str]:
    return [str(cell) for cell in table.get_row(key)]


async def test_a_new_name_is_a_new_player_and_a_game_against_the_ai_says_welcome_back(
    ui_server: UIServer, tmp_path: Path
) -> None:
    sessions = SessionStore(tmp_path / "sessions.json")
    bob = await ui_server.connect("bob")
    try:
        seated = await bob.request(CreateGame, game="tictactoe", opponent="human", seat=1)
        start = Start("join", game_id=seated.game_id)
        first = NoughtsApp(ui_server.url, name="ada", start=start, sessions=sessions)
        async with first.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(first.screen, GameScreen), "the game")
        # Another name on the same server: another player, none of ada's games.
        other = NoughtsApp(ui_server.url, name="eve", start=Start("lobby"), sessions=sessions)
        async with other.run_test(size=SIZE) as pilot:
            lobby = await open_lobby(pilot, other)
            assert other.resumable == {} and not lobby.query_one("#mine-pane").display
        eves = sessions.load(ui_server.url, "eve")
        assert eves is not None and eves != sessions.load(ui_server.url, "ada")
        # ada again, straight into a game against the AI: told where her game is.
        start = Start("ai", fields={"game": "tictactoe", "algorithm": "random", "budget_ms": 5})
        again = NoughtsApp(ui_server.url, name="ada", start=start, sessions=sessions)
        async with again.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(again.screen, GameScreen), "the AI game")
            await until(pilot, lambda: any("Welcome back" in n for n in notes(again)), "note")
            assert any("1 unfinished game " in n for n in notes(again))
            assert set(again.resumable) == {seated.game_id}
    finally:
        await bob.close()


async def test_a_saved_session_the_server_does_not_know_is_replaced(
    ui_server: UIServer, tmp_path: Path
) -> None:
    sessions = SessionStore(tmp_path / "sessions.json")
    sessions.save(ui_server.url, "ada", "a-session-from-another-database")
    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"), sessions=sessions)
    async with app.run_test(size=SIZE) as pilot:
        await open_lobby(pilot, app)
        assert app.link.session is not None
        assert sessions.load(ui_server.url, "ada") == app.link.session
        assert app.link.session != "a-session-from-another-database"
        title = str(app.screen.query_one("#lobby-title", Static).render())
        assert "connected to" in title


async def test_a_seat_that_arrives_as_the_app_closes_is_kept_without_a_screen(
    ui_server: UIServer,
) -> None:
    """The link's last messages can reach the app after its screens are gone (a test under
    load saw a Seated then): it is kept, and no screen is pushed onto the empty stack."""
    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    async with app.run_test(size=SIZE) as pilot:
        await open_lobby(pilot, app)
    assert not app.screen_stack
    seated = Seated(game_id="6hfrtd5v", seat=1, token="mrFUq4lqGgdq97uWQGW_tq3HwR_vsCP4")
    app.on_server_message(ServerMessage(seated))
    model = app.games["6hfrtd5v"]
    assert model.seat == 1  # its token: the session core's
    assert not app.screen_stack


async def test_join_takes_back_a_seat_of_ours_as_the_plain_clients_leaving_line_says(
    ui_server: UIServer, tmp_path: Path
) -> None:
    """A probe's finding: ``noughts play --join GAME_ID``, which the plain client names to
    take a game back, sent ``join`` for a game of ours and was told it has no open seat,
    left in the lobby. A seat of the session is taken back (resumed), as from the lobby."""
    sessions = SessionStore(tmp_path / "sessions.json")
    bob = await ui_server.connect("bob")
    try:
        seated = await bob.request(CreateGame, game="5x5", opponent="human", seat=1)
        game_id = seated.game_id
        start = Start("join", game_id=game_id)
        first = NoughtsApp(ui_server.url, name="ada", start=start, sessions=sessions)
        async with first.run_test(size=SIZE) as pilot:
            model = await _the_centre_played(pilot, first)
        await bob.request(Move, game_id=game_id, token=seated.token, action=0, ply=1)
        again = NoughtsApp(ui_server.url, name="ada", start=start, sessions=sessions)
        async with again.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: (
                    isinstance(again.screen, GameScreen)
                    or any("refused" in note for note in notes(again))
                ),
                "the game, or a refusal",
            )
            assert isinstance(again.screen, GameScreen), notes(again)
            model = again.screen.model
            await until(pilot, lambda: model.state is not None, "the game's snapshot")
            # Nor told of the one game of ours as another to find in the lobby.
            assert not any("Welcome back" in note for note in notes(again))
            assert (model.game_id, model.seat) == (game_id, 0)
            assert model.state is not None and model.state.history() == [12, 0]
            await pilot.press("6", "enter")
            await until(pilot, lambda: len(model.moves) == 3, "our move in the game taken back")
    finally:
        await bob.close()


async def test_a_name_the_server_refuses_ends_the_app_saying_why(
    ui_server: UIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A probe's finding: the app stayed in an offline lobby, with no notice and the header
    cut to "offline: the server refused" at 80 columns. As the plain client, it ends (exit
    status 1) and says the server's reason in full."""
    app = NoughtsApp(ui_server.url, name="x" * 25, start=Start("lobby"))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.return_code is not None, "the app's end")
    assert app.return_code == 1
    said = " ".join(capsys.readouterr().err.split())  # (wrapped at the console's width)
    assert "the server refused us: name refused: a name holds 2 to 20 characters, not 25" in said


async def test_the_app_on_its_own_database_takes_a_held_name_with_a_suffix(
    ui_server: UIServer, tmp_path: Path
) -> None:
    """`make play` in the interface, its session lost and the name held by that earlier
    session: on an embedded server (``rename_if_taken``, the user's own database) the app
    plays as ada-2 and says so in a notice, the session kept under the name asked for; on
    any other server the app ends, refused (test_a_name_the_server_refuses_...)."""
    earlier = await ui_server.connect("ada")  # the session whose token was lost
    sessions = SessionStore(tmp_path / "sessions.json")
    try:
        app = NoughtsApp(
            ui_server.url, name="ada", start=Start("lobby"), sessions=sessions,
            rename_if_taken=True,
        )  # fmt: skip
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.link.welcome is not None, "the welcome")
            await until(pilot, lambda: any("ada-2" in note for note in notes(app)), "the notice")
            assert app.return_code is None
            assert app.link.welcome.name == "ada-2"  # type: ignore[union-attr]
            (note,) = [note for note in notes(app) if "ada-2" in note]
            assert note.startswith("Another name: The name 'ada' belongs to an earlier session")
        assert sessions.load(ui_server.url, "ada") == app.link.session
    finally:
        await earlier.close()

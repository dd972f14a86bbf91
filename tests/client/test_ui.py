"""The Textual client driven by its pilot against a real server: keys in, screens out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from textual.widgets import DataTable

from client.game_view import GameModel
from client.ui import NoughtsApp, Start
from client.ui.board import BoardView
from client.ui.game import GameOverScreen, GameScreen
from client.ui.lobby import LobbyScreen
from client.ui.replay import ReplayScreen
from tests.client.test_cli import store_games
from tests.client.test_export import play_humans
from tests.client.ui_support import UIServer, actions, press_towards, until

SIZE = (110, 36)


async def test_a_whole_game_against_the_ai_with_the_keyboard(ui_server: UIServer) -> None:
    start = Start(
        "ai",
        fields={"game": "tictactoe", "opponent": "ai", "seat": 0, "algorithm": "alphabeta",
                "budget_ms": 20},
    )  # fmt: skip
    app = NoughtsApp(ui_server.url, name="ada", start=start)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game screen")
        screen = app.screen
        assert isinstance(screen, GameScreen)
        model = screen.model
        typed = False
        while not model.over:
            await until(pilot, lambda: model.my_turn or model.over, "our turn")
            if model.over:
                break
            assert model.state is not None
            ply = model.state.ply()
            action = model.state.legal_actions()[0]
            if not typed:
                # The first move typed as a cell number, the others with arrows and Enter.
                await pilot.press(*str(action), "enter")
                typed = True
            else:
                board = screen.query_one(BoardView)
                await press_towards(pilot, board, action)
                await pilot.press("enter")
            await until(pilot, lambda: model.state.ply() > ply or model.over, "our move")  # noqa: B023
        await until(pilot, lambda: isinstance(app.screen, GameOverScreen), "game over")
        assert model.result in ("0-1", "1/2-1/2")  # alphabeta never loses tic-tac-toe
        assert model.reason in ("line", "draw")
        assert len(model.moves) >= 5
        # Every move is in the move list, the first one typed as cell 0.
        table = screen.query_one("#moves")
        assert table.row_count == len(model.moves)
        assert model.moves[0].action == 0 and model.moves[0].seat == 0
        # The game over dialog offers the replay: p opens it at the last move.
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay")
        assert app.screen.ply == len(model.moves)


async def test_a_replay_scrubbed_forwards_and_back(ui_server: UIServer) -> None:
    # X opens in the centre, O answers on an edge (a losing move), X wins.
    actions = [4, 1, 0, 8, 6, 2, 3]
    record = await play_humans(ui_server, "tictactoe", actions)
    assert record["result"] == "1-0"
    app = NoughtsApp(ui_server.url, name="viewer", start=Start("replay", game_id=record["id"]))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay")
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await until(pilot, lambda: screen.is_mounted, "the replay on screen")
        await pilot.pause()
        board = screen.query_one(BoardView)
        assert screen.ply == 7  # opens at the end
        await pilot.press("home")
        assert screen.ply == 0 and board.state.ply() == 0
        for expected in range(1, 4):
            await pilot.press("right")
            assert screen.ply == expected and board.state.history() == actions[:expected]
            assert board.last == actions[expected - 1]
        await pilot.press("left")
        assert screen.ply == 2 and board.state.history() == actions[:2]
        await pilot.press("end")
        assert screen.ply == 7 and board.state.is_terminal()
        await pilot.press("right")  # past the end stays at the end
        assert screen.ply == 7
        # The solver's verdicts: O's edge reply (move 2) walks into a loss.
        await until(pilot, lambda: screen.verdicts is not None, "the verdicts")
        assert screen.verdicts is not None
        assert screen.verdicts[0] == ("drawn", "")
        assert screen.verdicts[1] == ("lost", "??")
        assert screen.verdicts[2] == ("won", "")
        # A click on a row of the move list goes to that move (row 0 is the start).
        table = screen.query_one("#moves")
        await pilot.click(table, offset=(2, 1 + 4))  # header line, then rows 0..
        assert screen.ply == 4 and board.state.history() == actions[:4]
        assert "Move 4 of 7" in str(screen.query_one("#replay-move").render())


async def test_the_replay_of_a_game_without_moves_does_not_call_its_board_too_large(
    ui_server: UIServer,
) -> None:
    """A probe's finding: a 3x3 game with no moves said "This board is too large for the
    perfect solver" (no verdicts at all read as none the solver could give)."""
    record = await play_humans(ui_server, "tictactoe", [])
    app = NoughtsApp(ui_server.url, name="viewer", start=Start("replay", game_id=record["id"]))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay")
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await until(pilot, lambda: screen.verdicts is not None, "the verdicts")
        note = str(screen.query_one("#verdict-note").render())
        assert "too large" not in note and "No move was played" in note, note
        assert "Position 0 of 0" in str(screen.query_one("#replay-move").render())


async def test_a_stored_game_that_does_not_replay_is_a_notification(
    ui_server: UIServer, tmp_path: Path
) -> None:
    """noughts play --replay of a game whose moves break the rules (a damaged row) or of a
    game this client does not know (a newer server's) ended the interface in a traceback;
    it now says why in a notification, and the app goes on."""
    store_games(tmp_path / "games.db", {"occupied": ("tictactoe", {}, [4, 0, 4])})
    app = NoughtsApp(ui_server.url, name="viewer", start=Start("replay", game_id="occupied"))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: bool(app._notifications), "a notification")
        assert [(n.title, n.message) for n in app._notifications] == [
            (
                "Cannot replay",
                "game occupied cannot be replayed: move 3: cell b2 is occupied by X",
            )
        ]
        assert not isinstance(app.screen, ReplayScreen) and app.is_running


async def test_the_lobby_shows_a_seek_as_it_is_posted_and_accepting_it_starts_the_game(
    ui_server: UIServer,
) -> None:
    from client.connection import ServerConnection
    from protocol import Message, Move, Seated, Seek

    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
        lobby = app.screen
        assert isinstance(lobby, LobbyScreen)
        await until(pilot, lambda: app.link_state[0] == "online", "the connection")
        await until(pilot, lambda: app.lobby_wanted, "the lobby subscription")
        seeks = lobby.query_one("#seeks", DataTable)
        assert seeks.row_count == 0
        pushed: list[Message] = []
        bob = await ServerConnection.connect(ui_server.url, name="bob", deliver=pushed.append)
        try:
            posted = await bob.request(Seek, game="5x5", color="o")
            await until(pilot, lambda: seeks.row_count == 1, "the seek in the lobby")
            row = [str(cell) for cell in seeks.get_row(posted.seek_id)]
            assert row[:4] == ["bob", "5x5", "no clock", "O"]
            # Enter on the seek accepts it: both are seated, the game screen opens.
            seeks.focus()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            game = app.screen
            assert isinstance(game, GameScreen)
            await until(pilot, lambda: game.model.my_turn, "our first move")
            assert game.model.seat == 0 and game.model.game == "5x5"  # the name it was created with
            # The accepted seek leaves the lobby with the next lobby update (coalesced per
            # tick, so it may come after the game's first events).
            await until(pilot, lambda: seeks.row_count == 0, "the accepted seek gone")
            seated = next(m for m in pushed if isinstance(m, Seated))
            await pilot.press("1", "2", "enter")  # typed: cell 12, the centre
            await until(pilot, lambda: len(game.model.moves) == 1, "our move")
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=0, ply=1)
            await until(pilot, lambda: len(game.model.moves) == 2, "bob's move on our board")
            board = game.query_one(BoardView)
            assert board.state.history() == [12, 0] and board.last == 0
        finally:
            await bob.close()


@asynccontextmanager
async def ada_against_bob(ui_server: UIServer) -> AsyncIterator[tuple[Any, Any, GameModel, Any]]:
    """ada in the app as X, bob a plain connection as O, both seated in one tictactoe game
    and ada's first move (the centre) played: (app, pilot, ada's model, bob's move)."""
    from client.connection import ServerConnection
    from protocol import CreateGame, Message, Move

    pushed: list[Message] = []
    bob = await ServerConnection.connect(ui_server.url, name="bob", deliver=pushed.append)
    try:
        seated = await bob.request(CreateGame, game="tictactoe", opponent="human", seat=1)
        app = NoughtsApp(ui_server.url, name="ada", start=Start("join", game_id=seated.game_id))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            game = app.screen
            assert isinstance(game, GameScreen)
            await until(pilot, lambda: game.model.my_turn, "our first move")
            await pilot.press("4", "enter")
            await until(pilot, lambda: len(game.model.moves) == 1, "our move")

            async def bob_moves(action: int, ply: int) -> None:
                await bob.request(
                    Move, game_id=seated.game_id, token=seated.token, action=action, ply=ply
                )

            yield app, pilot, game.model, bob_moves
    finally:
        await bob.close()


async def go_offline(pilot: Any, app: Any) -> str:
    """The network fails and the server stays unreachable; returns the url to come back to."""
    url: str = app.link.url
    app.link.url = "ws://127.0.0.1:9"
    assert app.link.status == "connected"
    app.link.drop()
    await until(pilot, lambda: app.link_state[0] == "offline", "the drop noticed")
    return url


async def test_a_dropped_connection_comes_back_with_the_seat_and_the_missed_move(
    ui_server: UIServer,
) -> None:
    async with ada_against_bob(ui_server) as (app, pilot, model, bob_moves):
        url = await go_offline(pilot, app)
        status = app.screen.query_one("#link-status")
        assert status.display and "Offline" in str(status.render())
        # Meanwhile bob moves; the server keeps our seat.
        await bob_moves(0, 1)
        assert len(model.moves) == 1
        app.link.url = url
        await until(pilot, lambda: len(model.moves) == 2, "the missed move after resume")
        assert app.link_state[0] == "online" and not status.display
        assert model.state is not None and model.state.history() == [4, 0]
        # Our seat is ours again: the next move goes through.
        await pilot.press("8", "enter")
        await until(pilot, lambda: len(model.moves) == 3, "a move after the reconnection")


async def test_a_move_cut_off_by_a_drop_leaves_the_next_moves_playable(
    ui_server: UIServer,
) -> None:
    """A probe's finding: a move in flight when the connection dropped got neither a reply
    nor a refusal, so the screen waited for one for ever and ignored every later move. The
    game's lock holds ada's move at the server while her connection drops; it is played
    there all the same, bob answers, and once back ada's next move goes through."""
    from tests.client.ui_support import ArrivalLock

    async with ada_against_bob(ui_server) as (app, pilot, model, bob_moves):
        await bob_moves(0, 1)
        await until(pilot, lambda: model.my_turn, "our second move")
        lock = ui_server.game_server._locks[model.game_id] = ArrivalLock()
        async with lock:
            await lock.arrivals.get()  # the test's own
            await pilot.press("8", "enter")
            await lock.arrivals.get()  # ada's move waits for the game
            url = await go_offline(pilot, app)
        await until(
            pilot,
            lambda: any("before the server answered" in n.message for n in app._notifications),
            "the move said cut off",
        )
        await bob_moves(1, 3)  # behind ada's move, played meanwhile
        app.link.url = url
        await until(pilot, lambda: len(model.moves) == 4, "the moves made meanwhile")
        assert model.my_turn and model.state is not None
        assert model.state.history() == [4, 0, 8, 1]
        await pilot.press("2", "enter")
        await until(pilot, lambda: len(model.moves) == 5, "a move after the reconnection")


async def test_a_resignation_made_offline_is_sent_once_the_connection_is_back(
    ui_server: UIServer,
) -> None:
    async with ada_against_bob(ui_server) as (app, pilot, model, bob_moves):
        await bob_moves(0, 1)
        await until(pilot, lambda: model.my_turn, "our second move")
        url = await go_offline(pilot, app)
        await pilot.press("ctrl+r", "ctrl+r")  # resign while offline
        await pilot.pause()
        assert not model.over
        app.link.url = url
        await until(pilot, lambda: model.over, "the resignation, sent once back online")
        assert (model.result, model.reason) == ("0-1", "resign")
        assert model.state is not None and model.state.history() == [4, 0]


async def test_watching_a_live_game_as_a_spectator(ui_server: UIServer) -> None:
    from protocol import CreateGame, JoinGame, Move

    bob, carl = await ui_server.connect("bob"), await ui_server.connect("carl")
    try:
        seated = await bob.request(CreateGame, game="uttt", opponent="human", seat=0)
        joined = await carl.request(JoinGame, game_id=seated.game_id)
        await bob.request(Move, game_id=seated.game_id, token=seated.token, action=40, ply=0)
        app = NoughtsApp(ui_server.url, name="ada", start=Start("watch", game_id=seated.game_id))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            game = app.screen
            assert isinstance(game, GameScreen)
            model = game.model
            await until(pilot, lambda: len(model.moves) == 1, "the position so far")
            await until(pilot, lambda: game.is_mounted, "the game on screen")
            await pilot.pause()
            assert model.seat is None and not game.query_one("#move-input").display
            assert "watching" in str(game.query_one("#game-title").render())
            await carl.request(Move, game_id=seated.game_id, token=joined.token, action=36, ply=1)
            await until(pilot, lambda: len(model.moves) == 2, "carl's move")
            await pilot.press("enter")  # a spectator's Enter plays nothing
            # and the footer offers no seat's action: no Play, Resign, draw or Rematch.
            footer_keys = {
                binding.action for _, binding, enabled, _ in app.active_bindings.values() if enabled
            }
            assert not footer_keys & (GameScreen.SEAT_ACTIONS | {"choose"}), footer_keys
            await pilot.press("ctrl+r", "ctrl+r", "ctrl+d")  # nothing is sent: we hold no seat
            await pilot.pause()
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=4, ply=2)
            await until(pilot, lambda: len(model.moves) == 3, "bob's move")
            assert model.state is not None and model.state.history() == [40, 36, 4]
            assert game.query_one(BoardView).last == 4
    finally:
        await bob.close()
        await carl.close()


async def test_resigning_with_the_keys_then_a_rematch_with_colours_swapped(
    ui_server: UIServer,
) -> None:
    start = Start(
        "ai",
        fields={"game": "uttt", "opponent": "ai", "seat": 0, "algorithm": "random",
                "budget_ms": 10},
    )  # fmt: skip
    app = NoughtsApp(ui_server.url, name="ada", start=start)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
        first = app.screen
        assert isinstance(first, GameScreen)
        await until(pilot, lambda: first.model.my_turn, "our turn")
        assert "resign" not in actions(app) and "abort" in actions(app)  # before both moved
        await pilot.press("enter")  # the cursor's cell
        await until(pilot, lambda: len(first.model.moves) == 2, "the AI's answer")
        await until(pilot, lambda: first.model.my_turn, "our turn again")
        assert "resign" in actions(app) and "abort" not in actions(app)
        await pilot.press("ctrl+r")  # the first press only asks
        await pilot.pause()
        assert not first.model.over
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, GameOverScreen), "game over")
        assert (first.model.result, first.model.reason) == ("0-1", "resign")
        result = str(app.screen.query_one("#result").render())
        assert "You lose: resignation." in result
        await pilot.press("m")  # rematch: the AI accepts at once
        await until(
            pilot,
            lambda: isinstance(app.screen, GameScreen) and app.screen is not first,
            "the rematch",
        )
        second = app.screen
        assert isinstance(second, GameScreen)
        assert second.model.game_id == first.model.next_game  # the server's rematch
        assert second.model.seat == 1  # colours swapped
        await until(pilot, lambda: second.model.my_turn, "our turn as O")
        assert len(second.model.moves) == 1 and second.model.game == "uttt"

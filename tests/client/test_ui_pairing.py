"""Meeting another player from the lobby's dialogs (keys s and k), against a real server.

The other side is a real websocket client (ServerConnection); the app is driven by its
pilot, keys in, screens out.
"""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Static

from client.connection import ServerConnection
from client.ui import NoughtsApp, Start
from client.ui.board import BoardView
from client.ui.dialogs import NewGameDialog
from client.ui.game import GameScreen
from client.ui.lobby import LobbyScreen
from protocol import (
    AcceptSeek,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
    Move,
    Moved,
    QuickPair,
    Seek,
    Snapshot,
)
from tests.client.ui_support import (
    UIServer,
    choose,
    next_event,
    open_lobby,
    press_ok,
    press_towards,
    type_into,
    until,
)

SIZE = (110, 36)


def status_of(lobby: LobbyScreen) -> str:
    return str(lobby.query_one("#lobby-status", Static).render())


async def test_a_seek_posted_with_s_is_accepted_by_another_client_and_both_play(
    ui_server: UIServer,
) -> None:
    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    bob = await ui_server.connect("bob")
    try:
        async with app.run_test(size=SIZE) as pilot:
            lobby = await open_lobby(pilot, app)
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the seek dialog")
            dialog = app.screen
            assert "Post a seek" in str(dialog.query_one("#dialog-title", Static).render())
            await choose(pilot, dialog, "game", "5x5")
            await choose(pilot, dialog, "colour", "o")
            await press_ok(pilot, dialog)
            await until(pilot, lambda: bool(lobby.my_seeks), "the seek posted")
            (seek_id,) = lobby.my_seeks
            seeks = lobby.query_one("#seeks", DataTable)
            await until(pilot, lambda: seeks.row_count == 1, "our seek in the lobby")
            row = [str(cell) for cell in seeks.get_row(seek_id)]
            assert row[:4] == ["ada (you)", "5x5", "no clock", "O"]
            assert "Seek posted" in status_of(lobby)
            # Enter on our own seek does not accept it: the status says what x does.
            seeks.focus()
            await pilot.press("enter")
            await until(pilot, lambda: "your own seek" in status_of(lobby), "the refusal")
            # bob sees it in his lobby as posted, and takes it.
            state = await bob.request(LobbySubscribe)
            assert isinstance(state, LobbyState)
            (seen,) = [s for s in state.seeks if s["seek_id"] == seek_id]
            assert (seen["game"], seen["color"], seen["player"]["name"]) == ("5x5", "o", "ada")
            seated = await bob.request(AcceptSeek, seek_id=seek_id)
            assert seated.seat == 0  # ada asked for O
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game screen")
            game = app.screen
            assert isinstance(game, GameScreen)
            model = game.model
            await until(pilot, lambda: model.state is not None, "the game's snapshot")
            assert model.game_id == seated.game_id and model.seat == 1
            assert model.game == "5x5"  # the name it was created with
            assert [p["name"] for p in model.players if p] == ["bob", "ada"]
            snapshot = await next_event(bob, Snapshot)
            assert snapshot.status == "live" and snapshot.game_id == seated.game_id
            # The game plays on both sides: bob's move reaches ada, ada's reaches bob.
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=12, ply=0)
            await until(pilot, lambda: model.my_turn, "our turn")
            await pilot.press("0", "enter")
            await until(pilot, lambda: len(model.moves) == 2, "our move")
            moves = [await next_event(bob, Moved), await next_event(bob, Moved)]
            assert [(m.seat, m.action) for m in moves] == [(0, 12), (1, 0)]
            # In the lobby the seek is gone, and so is the note that it waits.
            assert not lobby.my_seeks
            await until(pilot, lambda: seeks.row_count == 0, "the seek gone")
            assert "Seek posted" not in status_of(lobby)
    finally:
        await bob.close()


async def test_x_cancels_a_posted_seek_and_leaves_the_queue(ui_server: UIServer) -> None:
    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    bob = await ui_server.connect("bob")
    try:
        async with app.run_test(size=SIZE) as pilot:
            lobby = await open_lobby(pilot, app)
            await pilot.press("x")
            assert "no seek to cancel" in status_of(lobby)
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the seek dialog")
            await press_ok(pilot, app.screen)
            await until(pilot, lambda: bool(lobby.my_seeks), "the seek posted")
            (seek_id,) = lobby.my_seeks
            state = await bob.request(LobbySubscribe)
            assert [s["seek_id"] for s in state.seeks] == [seek_id]
            await pilot.press("x")
            await until(pilot, lambda: "cancelled" in status_of(lobby), "the cancellation")
            removed = await _next_lobby(bob)
            assert (removed.kind, removed.seek_id) == ("seek_removed", seek_id)
            seeks = lobby.query_one("#seeks", DataTable)  # the same tick's update, ours
            await until(pilot, lambda: seeks.row_count == 0, "our seek gone from the lobby")
            # x also takes us out of the quick-pairing queue.
            await pilot.press("k")
            await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the dialog")
            await press_ok(pilot, app.screen)
            await until(pilot, lambda: bool(lobby.queued), "in the queue")
            server_lobby = ui_server.game_server.lobby
            await until(pilot, lambda: set(server_lobby.seeks) == set(lobby.queued), "queued")
            await pilot.press("x")
            await until(pilot, lambda: "left the quick-pairing queue" in status_of(lobby), "x")
            await until(pilot, lambda: not server_lobby.seeks, "the queue empty on the server")
            assert not lobby.queued
    finally:
        await bob.close()


async def _next_lobby(connection: ServerConnection) -> LobbyEvent:
    """The next lobby_event pushed to ``connection`` (its lobby_state reply skipped)."""
    while True:
        message = await asyncio.wait_for(connection.lobby_events.get(), 30)
        if isinstance(message, LobbyEvent):
            return message


async def test_quick_pairing_with_k_pairs_the_app_with_another_client(
    ui_server: UIServer,
) -> None:
    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    bob = await ui_server.connect("bob")
    try:
        async with app.run_test(size=SIZE) as pilot:
            lobby = await open_lobby(pilot, app)
            await pilot.press("k")
            await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the dialog")
            dialog = app.screen
            assert "Quick pairing" in str(dialog.query_one("#dialog-title", Static).render())
            await choose(pilot, dialog, "game", "uttt")
            await type_into(pilot, dialog, "ai-after", "0")  # never the AI: wait for bob
            await press_ok(pilot, dialog)
            await until(pilot, lambda: bool(lobby.queued), "in the queue")
            assert "quick-pairing queue" in status_of(lobby)
            # Quick pairing is not a seek others see.
            assert lobby.query_one("#seeks", DataTable).row_count == 0
            await bob.request(QuickPair, game="uttt", ai_after_s=0)
            snapshot = await next_event(bob, Snapshot)
            bob_seat, bob_token = bob.seats[snapshot.game_id]
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game screen")
            game = app.screen
            assert isinstance(game, GameScreen)
            model = game.model
            await until(pilot, lambda: model.state is not None, "the game's snapshot")
            assert model.game_id == snapshot.game_id and model.seat == 1 - bob_seat
            assert model.game == "uttt" and model.clock == {}
            assert {p["name"] for p in model.players if p} == {"ada", "bob"}
            # One move from X, whoever it is, arrives on the other side.
            if bob_seat == 0:
                await bob.request(Move, game_id=snapshot.game_id, token=bob_token, action=40, ply=0)
                await until(pilot, lambda: len(model.moves) == 1, "bob's move")
            else:
                await until(pilot, lambda: model.my_turn, "our turn")
                await pilot.press("4", ",", "4", "enter")
                await until(pilot, lambda: len(model.moves) == 1, "our move")
            moved = await next_event(bob, Moved)
            assert (moved.seat, moved.action) == (0, 40)
            assert model.state is not None and model.state.history() == [40]
            # The lobby knows we left the queue.
            assert not lobby.queued and "queue" not in status_of(lobby)
    finally:
        await bob.close()


async def test_quick_pairing_falls_back_to_the_ai_after_the_wait(ui_server: UIServer) -> None:
    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    async with app.run_test(size=SIZE) as pilot:
        lobby = await open_lobby(pilot, app)
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the dialog")
        dialog = app.screen
        await type_into(pilot, dialog, "ai-after", "1")
        await choose(pilot, dialog, "algorithm", "random")
        await type_into(pilot, dialog, "budget", "10")
        await press_ok(pilot, dialog)
        await until(pilot, lambda: bool(lobby.queued), "in the queue")
        assert "the AI after 1 s" in status_of(lobby)
        # No one else asks: the server seats us against its AI.
        await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game screen")
        game = app.screen
        assert isinstance(game, GameScreen)
        model = game.model
        await until(pilot, lambda: model.state is not None, "the game's snapshot")
        ai = model.players[1 - (model.seat or 0)]
        assert ai is not None and ai["kind"] == "ai"
        assert (ai["algorithm"], ai["budget_ms"]) == ("random", 10)
        assert model.game == "tictactoe"
        # The AI plays: after our move (or its first), it answers.
        await until(pilot, lambda: model.my_turn, "our turn")
        played = len(model.moves)
        assert model.state is not None
        # A free cell: the AI, if it moved first, may have taken the cursor's.
        await press_towards(pilot, game.query_one(BoardView), model.state.legal_actions()[0])
        await pilot.press("enter")
        await until(pilot, lambda: len(model.moves) >= played + 2, "our move and the AI's")
        assert not lobby.queued


async def test_a_seek_from_the_command_line_waits_in_the_lobby_and_x_cancels_it(
    ui_server: UIServer,
) -> None:
    """`noughts play --seek` starts the app with the seek posted: the lobby knows it is ours."""
    start = Start("pairing", request=Seek, fields={"game": "gomoku", "color": "x"})
    app = NoughtsApp(ui_server.url, name="ada", start=start)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
        lobby = app.screen
        assert isinstance(lobby, LobbyScreen)
        await until(pilot, lambda: bool(lobby.my_seeks), "the seek posted")
        assert "Seek posted" in status_of(lobby)
        server_lobby = ui_server.game_server.lobby
        assert set(server_lobby.seeks) == lobby.my_seeks
        seeks = lobby.query_one("#seeks", DataTable)
        await until(pilot, lambda: seeks.row_count == 1, "the seek listed")  # subscribed
        assert [str(c) for c in seeks.get_row_at(0)][:2] == ["ada (you)", "gomoku"]
        await pilot.press("x")
        await until(pilot, lambda: not server_lobby.seeks, "the seek cancelled on the server")
        assert "Seek cancelled." in status_of(lobby)


async def test_the_new_game_dialog_proposes_each_games_own_ai(ui_server: UIServer) -> None:
    """The dialog proposed mcts for every game; it now follows the game picked (gomoku:
    alphabeta, tic-tac-toe: perfect), and what the player picks after that is sent."""
    from textual.widgets import Select

    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    async with app.run_test(size=SIZE) as pilot:
        await open_lobby(pilot, app)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the dialog")
        dialog = app.screen
        assert isinstance(dialog, NewGameDialog)
        algorithm = dialog.query_one("#algorithm", Select)
        assert algorithm.value == "perfect"
        await choose(pilot, dialog, "game", "gomoku")
        await until(pilot, lambda: algorithm.value == "alphabeta", "gomoku's own AI")
        await choose(pilot, dialog, "game", "uttt")
        await until(pilot, lambda: algorithm.value == "mcts", "uttt's own AI")
        await choose(pilot, dialog, "algorithm", "random")
        assert dialog.fields()["algorithm"] == "random"
        assert dialog.fields()["game"] == "uttt"

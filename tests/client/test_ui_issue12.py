"""Issue 12's defects of the Textual client, driven by its pilot against a real server."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

import engine
from client.game_view import ai_value
from client.ui import NoughtsApp, Start
from client.ui.board import BoardView, home_cell
from client.ui.dialogs import NewGameDialog
from client.ui.game import GameScreen
from client.ui.lobby import LobbyScreen
from protocol import CreateGame, Ended, JoinGame, Move
from tests.client.test_ui_game_keys import app_joining, bobs_game, game_screen, notes
from tests.client.ui_support import UIServer, next_event, open_lobby, press_ok, until

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


async def test_typed_letters_are_moves_and_commands_take_a_second_press(
    ui_server: UIServer,
) -> None:
    """Defect 11: letters typed on the board fired commands (a aborted at once). Now a cell
    is typed as labelled ("a1": letters and digits go to the move box), commands are
    control keys, and abort, draw and resign take a second press."""
    bob, seated = await bobs_game(ui_server)
    app = app_joining(ui_server, seated)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await game_screen(pilot, app)
            model = screen.model
            await pilot.press("ctrl+x")
            assert ": Press ctrl+x again to abort the game." in notes(app)
            await pilot.press("ctrl+d")  # another key: abort is forgotten
            assert ": Press ctrl+d again to offer a draw." in notes(app)
            # A move typed after both, with the letters of commands of old (a, c, d):
            # had any gone to the server, the game would be over or an offer would stand.
            await pilot.press("c", "1", "enter")
            await until(pilot, lambda: len(model.moves) == 1, "our move")
            assert model.moves[0].text == "c1" and not model.over and model.offers == {}
            await pilot.press("ctrl+x", "ctrl+x")
            ended = await next_event(bob, Ended)
            assert ended.reason == "abort"
    finally:
        await bob.close()


def test_the_cursor_starts_where_one_may_play() -> None:
    """Defect 12: the cursor started at (1,1) (gomoku: 12 keypresses from the centre; uttt:
    often on a board one may not play)."""
    gomoku = engine.make_game("gomoku").new_initial_state()
    assert home_cell(gomoku, None) == (7, 7)
    # After a move, the free cell nearest it.
    gomoku.apply_action(7 * 15 + 7)
    assert home_cell(gomoku, 7 * 15 + 7) in {(6, 7), (7, 6), (7, 8), (8, 7)}
    # uttt: X plays cell 0 of the centre board; O is sent to board 0, whose centre is (1,1).
    uttt = engine.make_game("uttt").new_initial_state()
    assert home_cell(uttt, None) == (4, 4)
    uttt.apply_action(4 * 9 + 0)
    assert home_cell(uttt, 36) == (1, 1)
    assert uttt.game.grid.action(*home_cell(uttt, 36)) in uttt.legal_actions()


async def test_the_cursor_follows_the_opponents_moves(ui_server: UIServer) -> None:
    """Defect 12: after each move the cursor waits near it, on a free cell."""
    bob = await ui_server.connect("bob")
    try:
        seated = await bob.request(CreateGame, game="gomoku", opponent="human", seat=0)
        app = app_joining(ui_server, seated)
        async with app.run_test(size=SIZE) as pilot:
            screen = await game_screen(pilot, app)
            board = screen.query_one(BoardView)
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=20, ply=0)
            await until(pilot, lambda: screen.model.my_turn, "our turn")
            assert board.cursor in {(0, 5), (1, 4), (1, 6), (2, 5)}  # next to bob's 1,5
            await pilot.press("enter")
            await until(pilot, lambda: len(screen.model.moves) == 2, "our move")
            ours = screen.model.moves[1].action
            assert board.state.game.grid.cell(ours) in {(0, 5), (1, 4), (1, 6), (2, 5)}
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=200, ply=2)
            await until(pilot, lambda: len(screen.model.moves) == 3, "bob's second move")
            await pilot.pause()
            assert board.cursor in {(12, 5), (13, 4), (13, 6), (14, 5)}  # next to 13,5
    finally:
        await bob.close()


async def test_a_small_terminal_degrades_and_says_when_too_small(ui_server: UIServer) -> None:
    """Defect 14: at 60x20 the side panel got 7 columns and on gomoku the move box was off
    the screen. Now: no side panel when narrow, no margins when short, and when even that
    does not fit, a board that scrolls and a note saying what size it needs."""
    bob = await ui_server.connect("bob")
    seated = await bob.request(CreateGame, game="gomoku", opponent="human", seat=1)
    app = app_joining(ui_server, seated)
    try:
        async with app.run_test(size=(60, 20)) as pilot:
            screen = await game_screen(pilot, app)
            await pilot.pause()
            assert {"narrow", "compact"} <= screen.classes and "too-small" not in screen.classes
            assert screen.query_one("#side-column").region.area == 0
            board = screen.query_one(BoardView).region
            move_box = screen.query_one("#move-input").region
            assert board.bottom <= 19 and move_box.bottom <= 19  # above the footer's row
            assert board.right <= 60 and move_box.height >= 1
            assert any("moves and the AI panel are hidden" in n for n in notes(app))
            assert str(screen.query_one("#game-title", Static).render()).startswith("▶ X ada")
            await pilot.resize_terminal(40, 12)
            await pilot.pause()
            # Smaller still, the board scrolls (tests/client/test_ui_sizes.py).
            assert "too-small" in screen.classes
            assert screen.query_one("#move-input").region.bottom <= 11
            assert any("it needs 52x20 to be seen whole" in n for n in notes(app))
            await pilot.resize_terminal(110, 36)
            await pilot.pause()
            assert not {"narrow", "compact", "too-small"} & screen.classes
            assert screen.query_one("#side-column").region.width >= 30
    finally:
        await bob.close()


async def test_a_proven_result_reads_proven_not_a_percentage(ui_server: UIServer) -> None:
    """Expectation: alphabeta proves 3x3 drawn from its first reply; the AI panel and the
    move list said "+0.00 (win 50% for it)" instead of "proven draw"."""
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
        await until(pilot, lambda: model.my_turn, "our turn")
        await pilot.press("4", "enter")
        await until(pilot, lambda: len(model.moves) == 2, "the AI's reply")
        assert model.moves[1].stats is not None and model.moves[1].stats["proven"] == "draw"
        await pilot.pause()
        panel = str(screen.query_one("#ai-panel", Static).render())
        assert "value  proven draw for it" in panel and "%" not in panel, panel
        table = screen.query_one("#moves", DataTable)
        assert table.get_row_at(1)[-1] == "proven draw"


def test_an_unproven_value_keeps_its_winning_chance() -> None:
    assert ai_value({"value": 0.2, "proven": None}) == "+0.20 (win 60%)"
    assert ai_value({"value": 0.2}, chance=False) == "+0.20"
    assert ai_value({"value": 1.0, "proven": "win"}) == "proven win"
    # A proof the client does not know is not shown as one; no value at all is none.
    assert ai_value({"value": -0.5, "proven": "<b>"}) == "-0.50 (win 25%)"
    assert ai_value({"algorithm": "random"}) is None


def keys_shown(screen: Screen[Any]) -> str:
    """The text of the keys panel open on ``screen``."""
    from textual.widgets._key_panel import BindingsTable

    console = Console(width=80, record=True, file=io.StringIO())
    console.print(screen.query_one(BindingsTable).render())
    return console.export_text()


async def test_question_mark_lists_every_key_of_the_screen(ui_server: UIServer) -> None:
    """Expectation: a `?` help screen listing every key; hidden keys (n, a, c, the arrows)
    were found only in the README."""
    app = NoughtsApp(ui_server.url, name="ada", start=Start("lobby"))
    async with app.run_test(size=SIZE) as pilot:
        lobby = await open_lobby(pilot, app)
        await pilot.press("question_mark")
        await until(pilot, lambda: lobby.query("HelpPanel"), "the keys panel")
        await pilot.pause()
        shown = keys_shown(lobby)
        for binding in [*LobbyScreen.BINDINGS, *NoughtsApp.BINDINGS]:
            assert isinstance(binding, Binding) and binding.description in shown, shown
        await pilot.press("question_mark")
        await until(pilot, lambda: not lobby.query("HelpPanel"), "the keys panel closed")

        # A game of ours: every key of the game and of its board, the hidden ones too.
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, NewGameDialog), "the dialog")
        await press_ok(pilot, app.screen)
        await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
        game = app.screen
        await until(pilot, lambda: board_focused(game), "the board's focus")
        await pilot.press("question_mark")
        await until(pilot, lambda: game.query("HelpPanel"), "the game's keys")
        await pilot.pause()
        shown = keys_shown(game)
        for binding in [*GameScreen.BINDINGS, *BoardView.BINDINGS]:
            assert isinstance(binding, Binding) and binding.description in shown, shown
        # Closed again: the footer offers only what the game allows now (a probe's
        # finding: it kept every key, which then did nothing, until the next move).
        await pilot.press("question_mark")
        await until(pilot, lambda: not game.query("HelpPanel"), "the game's keys closed")

        def footer() -> set[str]:
            return {key.action for key in game.query("FooterKey")}  # type: ignore[attr-defined]

        await until(pilot, lambda: "claim" not in footer(), "the footer of the game's state")
        assert not footer() & {"claim", "rematch", "decline"}, footer()


def board_focused(screen: Any) -> bool:
    """The board is composed (a screen pushed a moment ago may not be yet) and has focus."""
    boards = screen.query(BoardView)
    return bool(boards) and boards.first().has_focus


async def test_question_mark_leaves_out_the_players_keys_for_a_spectator(
    ui_server: UIServer,
) -> None:
    """The keys panel lists what works here: a spectator cannot resign, offer or claim."""
    bob, carl = await ui_server.connect("bob"), await ui_server.connect("carl")
    try:
        seated = await bob.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        await carl.request(JoinGame, game_id=seated.game_id)
        app = NoughtsApp(ui_server.url, name="ada", start=Start("watch", game_id=seated.game_id))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            game = app.screen
            await until(pilot, lambda: board_focused(game), "the board's focus")
            await pilot.press("question_mark")
            await until(pilot, lambda: game.query("HelpPanel"), "the keys panel")
            await pilot.pause()
            shown = keys_shown(game)
            for binding in GameScreen.BINDINGS:
                assert isinstance(binding, Binding)
                watching = binding.action not in GameScreen.SEAT_ACTIONS
                assert (binding.description in shown) == watching, (binding, shown)
    finally:
        await bob.close()
        await carl.close()

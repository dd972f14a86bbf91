"""The game screen's clocks and its draw, decline and claim keys, against a real server.

The other side is a real websocket client (ServerConnection). Where time matters, the
server's clock and the app's are ManualClocks the test moves by hand: what the clocks show
is checked against the server's readings (the ``clocks`` of each event), never against wall
time, and a flag or the end of a grace period comes when the test says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.message import Message as TextualMessage
from textual.notifications import Notification, Notify
from textual.widgets import Static

from client.connection import ServerConnection
from client.game_view import format_ms
from client.ui import NoughtsApp, Start
from client.ui.app import ServerMessage
from client.ui.game import GameOverScreen, GameScreen
from protocol import (
    CreateGame,
    Draw,
    Ended,
    Error,
    ErrorCode,
    Message,
    Move,
    Moved,
    Offer,
    Presence,
    Resign,
    Seated,
)
from server.pool import EnginePool
from tests.client.ui_support import (
    ManualClock,
    UIServer,
    actions,
    crossing,
    next_event,
    start_server,
    until,
)

SIZE = (110, 36)


@pytest.fixture
def server_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def clocked_server(
    tmp_path: Path, ui_pool: EnginePool, server_clock: ManualClock
) -> AsyncIterator[UIServer]:
    """A server whose time moves only with ``server_clock``."""
    async for started in start_server(tmp_path, ui_pool, clock=server_clock):
        yield started


def notes(app: NoughtsApp) -> list[str]:
    """The notifications on screen, as 'title: message'."""
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def game_over(pilot: Any, app: NoughtsApp) -> str:
    """Wait for the game-over dialog; its result line."""
    await until(pilot, lambda: isinstance(app.screen, GameOverScreen), "game over")
    await until(pilot, lambda: bool(app.screen.query("#result")), "the result drawn")
    return str(app.screen.query_one("#result", Static).render())


def status_text(screen: GameScreen) -> str:
    return str(screen.query_one("#game-status", Static).render())


def clock_lines(screen: GameScreen) -> list[str]:
    """The players panel, one line per seat (X, then O)."""
    return str(screen.query_one("#players", Static).render()).splitlines()


async def bobs_game(ui_server: UIServer, **create: Any) -> tuple[ServerConnection, Seated]:
    """bob creates a tic-tac-toe game and takes O; X is open for the app."""
    bob = await ui_server.connect("bob")
    seated = await bob.request(CreateGame, game="tictactoe", opponent="human", seat=1, **create)
    return bob, seated


def app_joining(
    ui_server: UIServer, seated: Seated, clock: ManualClock | None = None
) -> NoughtsApp:
    """ada's app, to join the game as X (with a manual local clock)."""
    start = Start("join", game_id=seated.game_id)
    return NoughtsApp(ui_server.url, name="ada", start=start, clock=clock or ManualClock(0.0))


async def game_screen(pilot: Any, app: NoughtsApp) -> GameScreen:
    """Wait for the game screen, with the game's snapshot drawn."""
    await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game screen")
    screen = app.screen
    assert isinstance(screen, GameScreen)
    await until(pilot, lambda: screen.model.state is not None, "the game's snapshot")
    await until(pilot, lambda: screen.is_mounted, "the game on screen")
    await pilot.pause()
    return screen


async def test_a_fischer_clock_shown_from_the_server_readings_then_a_loss_on_time(
    clocked_server: UIServer, server_clock: ManualClock
) -> None:
    control = {"initial_ms": 1000, "increment_ms": 0}
    bob, seated = await bobs_game(clocked_server, clock=control)
    clock = ManualClock(0.0)
    app = app_joining(clocked_server, seated, clock)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await game_screen(pilot, app)
            model = screen.model
            assert "1s+0" in str(screen.query_one("#game-title", Static).render())
            assert model.clocks == [1000, 1000]
            x_line, o_line = clock_lines(screen)
            assert "0:01.0" in x_line and "0:01.0" in o_line
            # Before both first moves no clock runs: local time passing changes nothing.
            clock.advance(5)
            await pilot.pause(0.15)  # the screen's tick (every 0.1 s) redraws the clocks
            assert "0:01.0" in clock_lines(screen)[0]
            await pilot.press("4", "enter")
            await until(pilot, lambda: len(model.moves) == 1, "our first move")
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=0, ply=1)
            ours, bobs = await next_event(bob, Moved), await next_event(bob, Moved)
            assert (ours.seat, bobs.seat) == (0, 1) and bobs.clocks is not None
            await until(pilot, lambda: len(model.moves) == 2, "bob's first move")
            # Both have moved: our clock runs, from the server's reading of bob's move.
            assert model.clocks == list(bobs.clocks) and model.clock_ticking()
            # The screen's next tick redraws the clocks: wait for it, not for a fixed time (a
            # loaded machine may run the tick late).
            await until(pilot, lambda: clock_lines(screen)[0].startswith("▶"), "X's clock on")
            x_line, o_line = clock_lines(screen)
            assert format_ms(bobs.clocks[0]) in x_line
            assert format_ms(bobs.clocks[1]) in o_line
            clock.advance(0.4)  # 400 ms of local time since that reading
            shown = format_ms(bobs.clocks[0] - 400)
            await until(pilot, lambda: shown in clock_lines(screen)[0], "X's clock 400 ms on")
            x_line, o_line = clock_lines(screen)
            assert format_ms(bobs.clocks[1]) in o_line  # bob's does not run
            # We do not move, and the server's second passes: it flags us.
            server_clock.advance(1.0)
            result = await game_over(pilot, app)
            ended = await next_event(bob, Ended)
            assert (ended.result, ended.reason, ended.winner) == ("0-1", "flag", 1)
            assert ended.clocks == (0, 1000)
            assert result == "You lose: out of time."
            assert model.clocks == list(ended.clocks)
            await pilot.press("escape")  # look at the board: the clocks as the server left them
            await until(pilot, lambda: app.screen is screen, "the board")
            await until(pilot, lambda: "0:00.0" in clock_lines(screen)[0], "X's clock at 0")
            x_line, o_line = clock_lines(screen)
            assert format_ms(ended.clocks[1]) in o_line
            assert "You lose: out of time." in status_text(screen)
    finally:
        await bob.close()


async def test_the_app_offers_a_draw_with_ctrl_d_and_the_other_accepts(ui_server: UIServer) -> None:
    bob, seated = await bobs_game(ui_server)
    app = app_joining(ui_server, seated)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await game_screen(pilot, app)
            model = screen.model
            assert "decline" not in actions(app)  # nothing to decline yet: not offered
            await pilot.press("4", "enter")
            await until(pilot, lambda: len(model.moves) == 1, "our move")
            await pilot.press("ctrl+d", "ctrl+d")
            offer = await next_event(bob, Offer)
            assert (offer.kind, offer.seat, offer.answer) == ("draw", 0, "offer")
            await until(pilot, lambda: model.offers == {"draw": 0}, "our offer standing")
            assert "You offered a draw." in status_text(screen)
            assert any("Draw offered" in n for n in notes(app))
            await bob.request(Draw, game_id=seated.game_id, token=seated.token, answer="accept")
            result = await game_over(pilot, app)
            assert (model.result, model.reason) == ("1/2-1/2", "agreement")
            assert result == "Draw: draw agreed."
    finally:
        await bob.close()


async def test_the_app_declines_a_draw_then_accepts_the_next(
    ui_server: UIServer,
) -> None:
    bob, seated = await bobs_game(ui_server)
    app = app_joining(ui_server, seated)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await game_screen(pilot, app)
            model = screen.model
            await pilot.press("4", "enter")
            await until(pilot, lambda: len(model.moves) == 1, "our move")
            await bob.request(Draw, game_id=seated.game_id, token=seated.token)
            await until(pilot, lambda: model.offers == {"draw": 1}, "bob's offer")
            assert "bob (O) offers a draw: ctrl+d twice accepts, ctrl+n declines." in status_text(
                screen
            )
            assert any("bob (O) offers a draw" in n for n in notes(app))
            await pilot.press("ctrl+n")
            await next_event(bob, Offer)  # bob's own offer, announced to him too
            declined = await next_event(bob, Offer)
            assert (declined.kind, declined.seat, declined.answer) == ("draw", 0, "decline")
            await until(pilot, lambda: "draw" not in model.offers, "the offer gone")
            assert "offers a draw" not in status_text(screen) and not model.over
            # The game goes on; bob offers again, and this time ctrl+d accepts.
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=0, ply=1)
            await until(pilot, lambda: len(model.moves) == 2, "bob's move")
            await bob.request(Draw, game_id=seated.game_id, token=seated.token)
            await until(pilot, lambda: model.offers == {"draw": 1}, "bob's second offer")
            await pilot.press("ctrl+d", "ctrl+d")
            ended = await next_event(bob, Ended)
            assert (ended.result, ended.reason) == ("1/2-1/2", "agreement")
            assert await game_over(pilot, app) == "Draw: draw agreed."
    finally:
        await bob.close()


@pytest.mark.parametrize("crossing_request", ["abort", "move"])
async def test_a_request_crossing_the_end_is_not_said_refused_after_it(
    ui_server: UIServer, crossing_request: str
) -> None:
    """A colleague's finding: ada offers a draw, then aborts (ctrl+x twice) while bob accepts
    it. The server sends the game's end, then refuses her abort ("game ... is over"): the app
    showed the game-over dialog and then a red "The server refused" that the end already said
    (the plain client drops it: tests/client/test_plain_typing.py). So with a move of hers
    crossing bob's resignation ("The server refused that move"). With the game's lock held,
    bob's request is handled first and hers crosses it every time."""
    bob, seated = await bobs_game(ui_server)
    app = app_joining(ui_server, seated)
    said: list[Notification] = []
    refusals: list[Error] = []

    def record(message: TextualMessage) -> None:
        if isinstance(message, Notify):
            said.append(message.notification)
        elif isinstance(message, ServerMessage) and isinstance(message.message, Error):
            refusals.append(message.message)

    try:
        async with app.run_test(size=SIZE, message_hook=record) as pilot:
            screen = await game_screen(pilot, app)
            model = screen.model
            await pilot.press("b", "2", "enter")
            await until(pilot, lambda: len(model.moves) == 1, "our move")
            bobs: tuple[type[Message], dict[str, Any]]
            if crossing_request == "abort":  # crossing bob's acceptance of her draw offer
                await pilot.press("ctrl+d", "ctrl+d")
                await until(pilot, lambda: model.offers == {"draw": 0}, "our offer")
                bobs, keys, result = (Draw, {"answer": "accept"}), ["ctrl+x"] * 2, "Draw"
            else:  # her move crossing bob's resignation
                await bob.request(Move, game_id=seated.game_id, action=0, ply=1)
                await until(pilot, lambda: model.my_turn, "our turn")
                bobs, keys, result = (Resign, {}), ["c", "3", "enter"], "You win"
            async with crossing(ui_server, bob, seated.game_id, bobs[0], **bobs[1]):
                await pilot.press(*keys)  # sent by a worker: not waited for
            assert (await game_over(pilot, app)).startswith(result)
            # Every request answered, and what the app does with the answers queued: a note
            # queued behind them is said after anything they say.
            await app.workers.wait_for_complete()
            app.call_later(app.notify, "the test's mark")
            await until(pilot, lambda: said and said[-1].message == "the test's mark", "the mark")
            assert [error.code for error in refusals] == [ErrorCode.GAME_OVER]  # it crossed
            assert not [
                f"{note.title}: {note.message}"
                for note in said
                if "refused" in note.title or "is over" in note.message
            ]
            assert not screen.sending  # the refused move is no longer being sent
    finally:
        await bob.close()


async def test_the_opponent_leaves_and_after_the_grace_period_the_app_claims_the_win(
    clocked_server: UIServer, server_clock: ManualClock
) -> None:
    bob, seated = await bobs_game(clocked_server)
    app = app_joining(clocked_server, seated)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await game_screen(pilot, app)
            model = screen.model
            await pilot.press("4", "enter")
            await until(pilot, lambda: len(model.moves) == 1, "our move")
            # While bob is here, there is nothing to claim: ctrl+w is not offered.
            assert "claim" not in actions(app)
            await bob.close()
            await until(pilot, lambda: not model.online[1], "bob away")
            # Nor before both sides have moved (as on Lichess: abort it then).
            assert "claim" not in actions(app)
            bob = await ServerConnection.connect(clocked_server.url, session=bob.session)
            await until(pilot, lambda: model.online[1], "bob back")
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=0, ply=1)
            await until(pilot, lambda: len(model.moves) == 2, "bob's move")
            await bob.close()
            await until(pilot, lambda: not model.online[1], "bob away again")
            assert isinstance(model.last_event, Presence)
            claim_at = model.claim_at[1]
            assert claim_at == server_clock.now + 60  # the server's grace period
            away = "bob (O) is away (ctrl+w claims the game once the grace period is over)"
            assert away in status_text(screen)
            assert "away" in clock_lines(screen)[1]
            # Within the grace period: refused, with the time left.
            server_clock.advance(59)
            await pilot.press("ctrl+w")
            await until(pilot, lambda: any("held for 1 s more" in n for n in notes(app)), "no")
            assert not model.over
            # Once it is over, ctrl+w claims the win.
            server_clock.advance(1)
            await pilot.press("ctrl+w")
            result = await game_over(pilot, app)
            assert (model.result, model.reason) == ("1-0", "abandoned")
            assert result == "You win: the game was abandoned."
    finally:
        await bob.close()


async def test_the_footer_offers_only_what_the_state_allows(ui_server: UIServer) -> None:
    """Issue 12: Play on our turn only; abort before both sides moved, resign after; decline
    only with an offer standing; no second draw offer of ours; rematch once over."""
    bob, seated = await bobs_game(ui_server)
    app = app_joining(ui_server, seated)
    game_id, token = seated.game_id, seated.token
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await game_screen(pilot, app)
            model = screen.model
            seat_actions = GameScreen.SEAT_ACTIONS | {"choose"}

            async def offered() -> set[str]:
                await pilot.pause()
                return actions(app) & seat_actions

            assert await offered() == {"choose", "abort", "draw"}
            await pilot.press("b", "2", "enter")
            await until(pilot, lambda: len(model.moves) == 1, "our move")
            assert await offered() == {"abort", "draw"}  # not our turn: no Play
            await bob.request(Move, game_id=game_id, token=token, action=0, ply=1)
            await until(pilot, lambda: model.my_turn, "our turn")
            assert await offered() == {"choose", "resign", "draw"}  # both moved: no abort
            await bob.request(Draw, game_id=game_id, token=token)
            await until(pilot, lambda: model.offers == {"draw": 1}, "bob's offer")
            assert await offered() == {"choose", "resign", "draw", "decline"}
            await pilot.press("ctrl+n")
            await until(pilot, lambda: not model.offers, "declined")
            await pilot.press("ctrl+d", "ctrl+d")
            await until(pilot, lambda: model.offers == {"draw": 0}, "our offer")
            assert await offered() == {"choose", "resign"}  # ours stands: not offered again
            await bob.request(Resign, game_id=game_id, token=token)
            await game_over(pilot, app)
            await pilot.press("escape")  # the board under the game-over dialog
            await until(pilot, lambda: app.screen is screen, "the board")
            assert await offered() == {"rematch"}
    finally:
        await bob.close()

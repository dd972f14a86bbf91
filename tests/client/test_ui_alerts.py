"""What calls the player (issue 12): the terminal bell when a game of ours starts, when the
opponent moves and when our clock runs low (once a turn), which ctrl+g (or --no-bell) turns
off; a challenge shown with accept and decline. A real server (whose clock the test moves)."""

from __future__ import annotations

import asyncio

from client.ui import NoughtsApp, Start
from protocol import Move, SeekDeclined
from tests.client.test_ui_game_keys import (  # noqa: F401 - fixtures
    SIZE,
    bobs_game,
    clocked_server,
    game_screen,
    notes,
    server_clock,
)
from tests.client.ui_support import ManualClock, UIServer, until


class BellCounter(NoughtsApp):
    """The app, counting its bells instead of ringing the test's terminal."""

    rings = 0

    def bell(self) -> None:
        self.rings += 1


async def test_the_bell_rings_for_a_start_a_move_and_a_low_clock_until_turned_off(
    clocked_server: UIServer,  # noqa: F811
) -> None:
    bob, seated = await bobs_game(clocked_server, clock={"initial_ms": 60_000, "increment_ms": 0})
    clock = ManualClock(0.0)
    start = Start("join", game_id=seated.game_id)
    app = BellCounter(clocked_server.url, name="ada", start=start, clock=clock)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await game_screen(pilot, app)
            model = screen.model
            await until(pilot, lambda: app.rings == 1, "the bell of the game's start")
            await pilot.press("4", "enter")
            await until(pilot, lambda: len(model.moves) == 1, "our move")
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=0, ply=1)
            await until(pilot, lambda: len(model.moves) == 2, "bob's move")
            assert app.rings == 2  # bob moved; our own move rang nothing
            clock.advance(55)  # five seconds left on our clock
            await until(pilot, lambda: app.rings == 3, "the low-clock bell")
            clock.advance(1)
            await pilot.pause(0.3)  # three ticks of the screen: still under ten seconds
            assert app.rings == 3  # once a turn
            await pilot.press("ctrl+g")
            assert not app.bell_on
            await pilot.press("8", "enter")
            await until(pilot, lambda: len(model.moves) == 3, "our second move")
            await bob.request(Move, game_id=seated.game_id, token=seated.token, action=1, ply=3)
            await until(pilot, lambda: len(model.moves) == 4, "bob's second move")
            assert app.rings == 3
    finally:
        await bob.close()


def test_no_bell_is_an_option_of_play() -> None:
    import argparse

    from client.commands import play

    parser = argparse.ArgumentParser()
    play.register(parser.add_subparsers())
    assert parser.parse_args(["play", "--no-bell"]).bell is False
    assert parser.parse_args(["play"]).bell is True


async def test_a_challenge_is_shown_with_accept_and_decline(ui_server: UIServer) -> None:
    from textual.widgets import Label

    from client.ui.dialogs import ChallengeDialog
    from client.ui.game import GameScreen
    from client.ui.lobby import LobbyScreen
    from protocol import Seek
    from tests.client.ui_support import open_lobby

    app = BellCounter(ui_server.url, name="ada", start=Start("lobby"))
    bob = await ui_server.connect("bob")
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_lobby(pilot, app)
            me = app.link.player_id

            def challenge_shown() -> bool:
                return isinstance(app.screen, ChallengeDialog) and bool(
                    app.screen.query("#challenge-text")
                )

            await bob.request(Seek, game="5x5", color="x", to=me)
            await until(pilot, challenge_shown, "the challenge")
            text = str(app.screen.query_one("#challenge-text", Label).render())
            assert text.startswith("bob challenges you to 5x5, no clock; you would play O")
            assert app.rings == 1
            await pilot.press("n")  # declined: back to the lobby, nothing starts
            await until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            # bob is told who declined (a protocol action now, not only a closed dialog).
            told = await asyncio.wait_for(bob.next_lobby_event(), 30)
            assert isinstance(told, SeekDeclined) and told.player["name"] == "ada"
            await until(
                pilot, lambda: any("You declined bob's challenge." in n for n in notes(app)), "said"
            )
            await bob.request(Seek, game="tictactoe", color="o", to=me)
            await until(pilot, challenge_shown, "a second one")
            text = str(app.screen.query_one("#challenge-text", Label).render())
            assert "tictactoe" in text and "you would play X" in text
            await pilot.press("y")
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            screen = app.screen
            assert isinstance(screen, GameScreen)
            await until(pilot, lambda: screen.model.game == "tictactoe", "its snapshot")
            assert screen.model.seat == 0
    finally:
        await bob.close()


async def test_the_challenger_learns_that_its_challenge_was_declined(ui_server: UIServer) -> None:
    """As on Lichess: "bob declined your challenge", and the seek leaves our lobby."""
    from client.ui.lobby import LobbyScreen
    from protocol import DeclineSeek, LobbySubscribe, Seek

    bob = await ui_server.connect("bob")
    start = Start("pairing", request=Seek, fields={"game": "5x5", "to": "bob"})
    app = BellCounter(ui_server.url, name="ada", start=start)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            lobby = app.screen
            assert isinstance(lobby, LobbyScreen)
            await until(pilot, lambda: bool(lobby.my_seeks), "our challenge posted")
            (seek_id,) = lobby.my_seeks
            listed = await bob.request(LobbySubscribe)
            assert seek_id in {s["seek_id"] for s in listed.seeks}
            rings = app.rings
            await bob.request(DeclineSeek, seek_id=seek_id)
            await until(
                pilot,
                lambda: "Challenge declined: bob declined your challenge." in notes(app),
                "told",
            )
            assert seek_id not in lobby.seeks and not lobby.my_seeks and app.rings == rings + 1
    finally:
        await bob.close()

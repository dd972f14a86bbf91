"""Snapshots of every screen at a fixed terminal size, against a real server.

Each test drives the app to a screen and compares its SVG screenshot with the file in
tests/client/snapshots/ (the format of pytest-textual-snapshot, viewable in a browser).
What changes from run to run is replaced before comparing: game ids (8 characters) and
the server's port (always 5 digits: Linux's ephemeral range). The server's clock is fixed.
Set NOUGHTS_UPDATE_SNAPSHOTS=1 to rewrite the files after a deliberate change; a missing
file is written and the test fails, so a new snapshot is always looked at once.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.widgets import DataTable

from client.sessions import SessionStore
from client.ui import NoughtsApp, Start
from client.ui.game import GameOverScreen, GameScreen
from client.ui.lobby import LobbyScreen
from client.ui.replay import ReplayScreen
from protocol import CreateGame, JoinGame, Move, Seek
from server.pool import EnginePool
from tests.client.ui_support import FIXED_TIME, UIServer, start_server, until

SNAPSHOTS = Path(__file__).parent / "snapshots"
SIZE = (100, 30)


@pytest.fixture
async def fixed_server(tmp_path: Path, ui_pool: EnginePool) -> AsyncIterator[UIServer]:
    async for started in start_server(tmp_path, ui_pool, clock=lambda: FIXED_TIME):
        yield started


def normalized(svg: str, volatile: dict[str, str]) -> str:
    svg = re.sub(r"\bterminal-\d+-", "terminal-", svg)  # the screenshot's random id
    for text, placeholder in volatile.items():
        assert len(text) == len(placeholder), (text, placeholder)
        svg = svg.replace(text, placeholder)
    return svg


async def settled(pilot: Any, app: App[None]) -> None:
    """Let the screen settle: the footer recomposes after a refresh once its bindings change
    (our turn: Play), so wait until it shows every key the bindings offer now."""

    def footer_current() -> bool:
        if not app.screen.query("Footer"):
            return True  # a dialog without one
        shown = {
            key.action  # type: ignore[attr-defined]
            for key in app.screen.query("FooterKey")
            if not key.has_class("-command-palette")
        }
        wanted = {b.action for _, b, _, _ in app.screen.active_bindings.values() if b.show}
        return shown == wanted - {"command_palette"}

    await pilot.pause()
    await until(pilot, footer_current, "the footer of the bindings now")
    await pilot.pause()


def check_snapshot(app: App[None], name: str, volatile: dict[str, str]) -> None:
    svg = normalized(app.export_screenshot(title=name), volatile)
    path = SNAPSHOTS / f"{name}.svg"
    actual = path.with_suffix(".actual.svg")
    if os.environ.get("NOUGHTS_UPDATE_SNAPSHOTS") == "1" or not path.exists():
        existed = path.exists()
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        actual.unlink(missing_ok=True)
        if not existed:
            pytest.fail(f"new snapshot {path.name} written: look at it, then run again")
        return
    expected = path.read_text(encoding="utf-8")
    if svg != expected:
        actual.write_text(svg, encoding="utf-8")
        diff = "\n".join(
            list(difflib.unified_diff(expected.splitlines(), svg.splitlines(), lineterm=""))[:40]
        )
        pytest.fail(f"{name} differs from its snapshot; the screen is in {actual}\n{diff}")
    actual.unlink(missing_ok=True)


def volatile_of(server: UIServer, *game_ids: str) -> dict[str, str]:
    port = server.url.rsplit(":", 1)[1]
    replace = {server.url: server.url[: -len(port)] + "9" * len(port)}
    for i, game_id in enumerate(game_ids):
        replace[game_id] = f"game{i:04d}"[: len(game_id)].ljust(len(game_id), "0")
    return replace


async def human_game(server: UIServer, game: str, actions: list[int]) -> tuple[str, str, str]:
    """bob (X) creates a game; returns its id and bob's token; ada's app joins it next."""
    bob = await server.connect("bob")
    seated = await bob.request(CreateGame, game=game, opponent="human", seat=1)
    return seated.game_id, seated.token, bob  # type: ignore[return-value]


async def test_snapshot_game_against_the_ai(fixed_server: UIServer) -> None:
    start = Start(
        "ai",
        fields={"game": "tictactoe", "opponent": "ai", "seat": 0, "algorithm": "alphabeta",
                "budget_ms": 20},
    )  # fmt: skip
    app = NoughtsApp(fixed_server.url, name="ada", start=start, clock=lambda: 0.0)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
        screen = app.screen
        assert isinstance(screen, GameScreen)
        await until(pilot, lambda: screen.model.my_turn and screen.is_mounted, "our turn")
        await settled(pilot, app)
        check_snapshot(app, "game_tictactoe_vs_ai", volatile_of(fixed_server, screen.model.game_id))


@pytest.mark.parametrize(
    ("game", "actions"),
    [
        # uttt: O wins small board 4 (the centre); X is sent to board 4's neighbours.
        ("uttt", [40, 36, 4, 37, 13, 38, 22]),
        ("gomoku", [112, 113, 97, 98, 127]),
        ("5x5", [12, 6, 18, 0]),
    ],
)
async def test_snapshot_game_boards(fixed_server: UIServer, game: str, actions: list[int]) -> None:
    bob = await fixed_server.connect("bob")
    try:
        seated = await bob.request(CreateGame, game=game, opponent="human", seat=1)
        start = Start("join", game_id=seated.game_id)
        app = NoughtsApp(fixed_server.url, name="ada", start=start, clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            screen = app.screen
            assert isinstance(screen, GameScreen)
            model = screen.model
            await until(pilot, lambda: model.my_turn, "our turn")
            for ply, action in enumerate(actions):
                if ply % 2 == 0:
                    await pilot.press(*str(action), "enter")
                else:
                    await bob.request(
                        Move, game_id=seated.game_id, token=seated.token, action=action, ply=ply
                    )
                await until(pilot, lambda: len(model.moves) == ply + 1, "the move")  # noqa: B023
            await settled(pilot, app)
            check_snapshot(app, f"game_{game}", volatile_of(fixed_server, seated.game_id))
    finally:
        await bob.close()


async def test_snapshot_game_over_and_replay(fixed_server: UIServer) -> None:
    bob = await fixed_server.connect("bob")
    try:
        seated = await bob.request(CreateGame, game="tictactoe", opponent="human", seat=1)
        start = Start("join", game_id=seated.game_id)
        app = NoughtsApp(fixed_server.url, name="ada", start=start, clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            screen = app.screen
            assert isinstance(screen, GameScreen)
            model = screen.model
            for ply, action in enumerate([4, 1, 0, 8, 6, 2, 3]):
                if ply % 2 == 0:
                    await until(pilot, lambda: model.my_turn, "our turn")
                    await pilot.press(str(action), "enter")
                else:
                    await bob.request(
                        Move, game_id=seated.game_id, token=seated.token, action=action, ply=ply
                    )
                await until(pilot, lambda: len(model.moves) == ply + 1, "the move")  # noqa: B023
            await until(pilot, lambda: isinstance(app.screen, GameOverScreen), "game over")
            await settled(pilot, app)
            volatile = volatile_of(fixed_server, seated.game_id)
            check_snapshot(app, "game_over", volatile)
            await pilot.press("p")
            await until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay")
            replay = app.screen
            assert isinstance(replay, ReplayScreen)
            await until(pilot, lambda: replay.verdicts is not None, "the verdicts")
            await pilot.press("home", "right", "right")
            await settled(pilot, app)
            check_snapshot(app, "replay", volatile)
    finally:
        await bob.close()


async def test_snapshot_lobby(fixed_server: UIServer) -> None:
    bob, carl = await fixed_server.connect("bob"), await fixed_server.connect("carl")
    try:
        await bob.request(
            Seek, game="gomoku", clock={"initial_ms": 300_000, "increment_ms": 3000}, color="x"
        )
        await carl.request(Seek, game="uttt", opponents="humans")
        live = await bob.request(CreateGame, game="5x5", opponent="human", seat=0)
        await carl.request(JoinGame, game_id=live.game_id)
        app = NoughtsApp(fixed_server.url, name="ada", start=Start("lobby"), clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            lobby = app.screen
            assert isinstance(lobby, LobbyScreen)
            await until(pilot, lambda: len(lobby.seeks) == 2 and lobby.live, "the lobby's lists")
            await settled(pilot, app)
            check_snapshot(app, "lobby", volatile_of(fixed_server, live.game_id))
    finally:
        await bob.close()
        await carl.close()


async def test_snapshot_lobby_with_your_games(fixed_server: UIServer, tmp_path: Path) -> None:
    """Two unfinished games of ada's from an earlier run: bob's move in one, hers in the other."""
    sessions = SessionStore(tmp_path / "sessions.json")
    bob = await fixed_server.connect("bob")
    try:
        first = await bob.request(CreateGame, game="5x5", opponent="human", seat=1)
        second = await bob.request(CreateGame, game="uttt", opponent="human", seat=0)
        earlier = NoughtsApp(fixed_server.url, name="ada", start=Start("lobby"), sessions=sessions)
        async with earlier.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: earlier.link_state[0] == "online", "the connection")
            mine = await earlier.link.request(JoinGame, game_id=first.game_id)
            await earlier.link.request(Move, game_id=first.game_id, token=mine.token, action=12)
            await earlier.link.request(JoinGame, game_id=second.game_id)
        await bob.request(Move, game_id=second.game_id, token=second.token, action=40, ply=0)
        app = NoughtsApp(
            fixed_server.url, name="ada", start=Start("lobby"), sessions=sessions, clock=lambda: 0.0
        )
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            lobby = app.screen
            assert isinstance(lobby, LobbyScreen)
            table = lobby.query_one("#mine", DataTable)

            def listed() -> bool:
                records = lobby.records
                return table.row_count == 2 and len(records) == 2 and all(records.values())

            await until(pilot, listed, "your games")
            await settled(pilot, app)
            volatile = volatile_of(fixed_server, first.game_id, second.game_id)
            check_snapshot(app, "lobby_your_games", volatile)
    finally:
        await bob.close()


async def test_snapshot_watch(fixed_server: UIServer) -> None:
    """A spectator's view of a live 5x5 game with a Fischer clock: no move input, both clocks."""
    bob, carl = await fixed_server.connect("bob"), await fixed_server.connect("carl")
    try:
        seated = await bob.request(
            CreateGame,
            game="5x5",
            opponent="human",
            seat=0,
            clock={"initial_ms": 180_000, "increment_ms": 2000},
        )
        joined = await carl.request(JoinGame, game_id=seated.game_id)
        for ply, action in enumerate([12, 6, 13]):
            mover = (seated.token, bob) if ply % 2 == 0 else (joined.token, carl)
            await mover[1].request(
                Move, game_id=seated.game_id, token=mover[0], action=action, ply=ply
            )
        app = NoughtsApp(
            fixed_server.url,
            name="ada",
            start=Start("watch", game_id=seated.game_id),
            clock=lambda: 0.0,
        )
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            screen = app.screen
            assert isinstance(screen, GameScreen)
            await until(pilot, lambda: len(screen.model.moves) == 3, "the position so far")
            await until(pilot, lambda: screen.is_mounted, "the game on screen")
            await settled(pilot, app)
            check_snapshot(app, "watch", volatile_of(fixed_server, seated.game_id))
    finally:
        await bob.close()
        await carl.close()

"""A real server for the UI tests, in this process: GameServer on port 0, SQLite in tmp_path,
a real engine pool; and helpers to drive the Textual app with its pilot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from client.connection import ServerConnection
from client.ui.board import BoardView
from protocol import Message
from server.app import GameServer, running
from server.pool import EnginePool
from server.store import SQLiteStore
from tests.server.conftest import next_event as server_next_event

FIXED_TIME = 1_800_000_000.0  # 2027-01-15 08:00 UTC: the server's clock in snapshot tests


@pytest.fixture(scope="session")
def ui_pool() -> Iterator[EnginePool]:
    engine_pool = EnginePool(1)
    engine_pool.start()
    yield engine_pool
    engine_pool.close()


@dataclass
class UIServer:
    url: str
    game_server: GameServer

    async def connect(self, name: str) -> ServerConnection:
        return await ServerConnection.connect(self.url, name=name)


class ManualClock:
    """A clock that moves only when the test moves it: the server's (clocks, flags, grace
    periods) or the app's (clocks ticking between readings)."""

    def __init__(self, now: float = FIXED_TIME) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def start_server(
    tmp_path: Path, pool: EnginePool | None, clock: Callable[[], float] | None = None
) -> AsyncIterator[UIServer]:
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    # One manual clock drives both of the server's clocks (durations and timestamps).
    game_server = GameServer(
        store, pool, monotonic=clock or time.monotonic, wall=clock or time.time
    )
    try:
        async with running(game_server) as ws_server:
            port = next(iter(ws_server.sockets)).getsockname()[1]
            yield UIServer(f"ws://127.0.0.1:{port}", game_server)
    finally:
        await store.close()


@pytest.fixture
async def ui_server(tmp_path: Path, ui_pool: EnginePool) -> AsyncIterator[UIServer]:
    async for started in start_server(tmp_path, ui_pool):
        yield started


async def until(pilot, predicate: Callable[[], object], what: str, limit_s: float = 60) -> None:
    """Let the app run until ``predicate()`` holds (a generous limit only catches hangs)."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await pilot.pause(0.02)


async def next_event(connection: ServerConnection, kind: type, timeout: float = 30) -> Any:
    """The other client's next game event of ``kind``, skipping others: the server tests'
    ``next_event``, with the UI tests' longer default wait."""
    return await server_next_event(connection, kind, timeout)


async def resign_after_the_first_moves(
    connection: ServerConnection, game_id: str, token: str, action: int = 0
) -> Any:
    """X (``connection``, to move at ply 0) plays ``action``, waits for the opponent's first
    move, then resigns: before both sides have moved a resign aborts the game (as on
    Lichess), with no result. Returns the ``ended``."""
    from protocol import Move, Moved, Resign

    await connection.request(Move, game_id=game_id, token=token, action=action, ply=0)
    while (await next_event(connection, Moved)).ply < 1:
        pass
    return await connection.request(Resign, game_id=game_id, token=token)


async def live_games_of(connection: ServerConnection, name: str) -> list[str]:
    """The ids of the live games in which player ``name`` sits, as ``connection`` lists them."""
    from protocol import ListGames

    games = (await connection.request(ListGames, status="live")).games
    return [g["game_id"] for g in games if any((p or {}).get("name") == name for p in g["players"])]


class ArrivalLock(asyncio.Lock):
    """A game's lock that tells when something waits for it (the server takes it for every
    change to the game, in the order asked)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: asyncio.Queue[None] = asyncio.Queue()

    async def acquire(self) -> Literal[True]:
        self.arrivals.put_nowait(None)
        return await super().acquire()


@asynccontextmanager
async def crossing(
    server: UIServer, bob: ServerConnection, game_id: str, kind: type[Message], **fields: object
) -> AsyncIterator[None]:
    """Bob's request ``kind`` handled first, then the one ada makes inside the block (a line
    typed, a key pressed): her request crosses bob's, which reaches her before her reply does
    (the server sends a game's events and its replies in order). Inside the block, start her
    request without waiting for its reply: the game is locked until the block ends."""
    lock = server.game_server._locks[game_id] = ArrivalLock()
    async with lock:
        await lock.arrivals.get()  # the test's own
        bobs = asyncio.ensure_future(bob.request(kind, game_id=game_id, **fields))
        await lock.arrivals.get()  # bob's request waits for the game
        yield
        await lock.arrivals.get()  # and ada's behind it
    await bobs


async def open_lobby(pilot: Any, app: Any) -> Any:
    """Wait for the lobby, connected and subscribed; return the LobbyScreen."""
    from client.ui.lobby import LobbyScreen

    await until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
    await until(pilot, lambda: app.link_state[0] == "online", "the connection")
    await until(pilot, lambda: app.screen.has_lobby_state, "the lobby's state")
    return app.screen


async def choose(pilot: Any, dialog: Any, select_id: str, value: str) -> None:
    """Pick ``value`` in one of NewGameDialog's Selects with the keys: Enter opens it,
    Home goes to the top, Down to the option, Enter takes it."""
    from textual.widgets import Select

    from client.ui.dialogs import OPTIONS

    index = [v for _, v in OPTIONS[select_id]].index(value)
    select = dialog.query_one(f"#{select_id}", Select)
    select.focus()
    await pilot.press("enter", "home", *["down"] * index, "enter")
    assert select.value == value, (select_id, select.value)


async def type_into(pilot: Any, dialog: Any, input_id: str, text: str) -> None:
    """Replace an Input's text with ``text``, typed."""
    from textual.widgets import Input

    field = dialog.query_one(f"#{input_id}", Input)
    field.focus()
    await pilot.press("ctrl+a", "ctrl+k", *text)
    assert field.value == text


async def press_ok(pilot: Any, dialog: Any) -> None:
    """Focus the dialog's OK button and press Enter on it."""
    from textual.widgets import Button

    ok = dialog.query_one("#ok", Button)
    ok.focus()
    await pilot.press("enter")


async def press_towards(pilot, board: BoardView, action: int) -> None:
    """Move the board's cursor onto ``action`` with the arrow keys."""
    row, col = board.state.game.grid.cell(action)
    while board.cursor[0] != row:
        await pilot.press("down" if board.cursor[0] < row else "up")
    while board.cursor[1] != col:
        await pilot.press("right" if board.cursor[1] < col else "left")


def actions(app: Any) -> set[str]:
    """The actions the footer offers now (the enabled bindings)."""
    return {b.action for _, b, enabled, _ in app.active_bindings.values() if enabled}

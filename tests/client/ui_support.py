"""A real server for the UI tests, in this process: GameServer on port 0, SQLite in tmp_path,
a real engine pool; and helpers to drive the Textual app with its pilot."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from client.connection import ServerConnection
from server.app import GameServer, running
from server.pool import EnginePool
from server.store import SQLiteStore

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


async def start_server(
    tmp_path: Path, pool: EnginePool, clock: Callable[[], float] | None = None
) -> AsyncIterator[UIServer]:
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    game_server = GameServer(store, pool, clock=clock) if clock else GameServer(store, pool)
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
    import time

    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await pilot.pause(0.02)

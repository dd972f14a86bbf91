"""Fixtures for server tests: a real server on port 0, real websocket clients, SQLite in tmp_path.

The engine pool is real (spawned, warmed worker processes) and shared by the whole session:
starting it costs about a second, and a pool serves any number of servers and event loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import websockets

from client.connection import ServerConnection
from protocol import PROTOCOL_VERSION, Error, Hello, Message, decode_server, encode
from server.app import GameServer, running
from server.pool import EnginePool
from server.settings import ServerSettings
from server.store import SQLiteStore


@pytest.fixture(scope="session")
def pool() -> Iterator[EnginePool]:
    engine_pool = EnginePool(2)
    engine_pool.start()
    yield engine_pool
    engine_pool.close()


@dataclass
class RunningServer:
    """A started server: its address, its GameServer and its database file."""

    url: str
    game_server: GameServer
    db_path: Path

    async def connect(self, name: str = "player", **kwargs: Any) -> ServerConnection:
        return await ServerConnection.connect(self.url, name=name, **kwargs)

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the database through a separate connection: sees only what is committed."""
        db = sqlite3.connect(self.db_path)
        try:
            return db.execute(sql, params).fetchall()
        finally:
            db.close()


@pytest.fixture
def settings() -> ServerSettings:
    """The server's settings; a test overrides this fixture to shorten a grace period."""
    return ServerSettings()


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, pool: EnginePool, settings: ServerSettings
) -> AsyncIterator[RunningServer]:
    """A real server on port 0 over SQLite in ``tmp_path``, with the given pool and settings."""
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    game_server = GameServer(store, pool, settings=settings)
    try:
        async with running(game_server) as ws_server:
            port = next(iter(ws_server.sockets)).getsockname()[1]
            yield RunningServer(f"ws://127.0.0.1:{port}", game_server, tmp_path / "games.db")
    finally:
        await store.close()


@pytest.fixture
async def server(
    tmp_path: Path, pool: EnginePool, settings: ServerSettings
) -> AsyncIterator[RunningServer]:
    async with serving(tmp_path, pool, settings) as running_server:
        yield running_server


_RAW_NAMES = itertools.count(1)


class RawClient:
    """A websocket speaking frames directly, for sending what a well-behaved client never would."""

    def __init__(self, websocket: websockets.ClientConnection) -> None:
        self.websocket = websocket

    @classmethod
    async def connect(cls, url: str, *, hello: bool = True, name: str | None = None) -> RawClient:
        client = cls(await websockets.connect(url, compression=None, max_size=None))
        if name is None:  # names are bound to their sessions: each raw client its own
            name = f"raw{next(_RAW_NAMES)}"
        if hello:
            await client.send_message(Hello(rid=0, version=PROTOCOL_VERSION, name=name))
            welcome = await client.receive()
            assert not isinstance(welcome, Error), welcome  # hello must succeed
        return client

    async def send_message(self, message: Message) -> None:
        await self.websocket.send(encode(message))

    async def send(self, data: bytes | str) -> None:
        await self.websocket.send(data)

    async def receive(self, timeout: float = 10) -> Message:
        frame = await asyncio.wait_for(self.websocket.recv(), timeout)
        return decode_server(frame)

    async def answers(self, rids: set[int], timeout: float = 10) -> tuple[dict[int, Message], int]:
        """Read until each of ``rids`` is answered (requests sent pipelined): each rid's
        answer (the frame carrying it: ``resumed``, an ``error``, ...), and the bytes of
        every frame read meanwhile, the events without ``rid`` included."""
        answers: dict[int, Message] = {}
        received = 0
        while not rids <= answers.keys():
            frame = await asyncio.wait_for(self.websocket.recv(), timeout)
            received += len(frame)
            message = decode_server(frame)
            rid = getattr(message, "rid", None)
            if rid in rids:
                answers[rid] = message
        return answers, received

    async def close(self) -> None:
        await self.websocket.close()


async def next_event(connection: ServerConnection, kind: type, timeout: float = 10) -> Any:
    """The next game event of ``kind``, skipping others (a test's focus)."""
    while True:
        event = await connection.next_event(timeout=timeout)
        if isinstance(event, kind):
            return event


async def next_event_where(
    connection: ServerConnection, kind: type, holds: Callable[[Any], bool], timeout: float = 10
) -> Any:
    """The next game event of ``kind`` for which ``holds`` is true, skipping others."""
    while True:
        event = await next_event(connection, kind, timeout)
        if holds(event):
            return event


async def next_lobby(connection: ServerConnection, timeout: float = 10) -> Any:
    return await asyncio.wait_for(connection.lobby_events.get(), timeout)


async def human_game(
    server: RunningServer, *, names: tuple[str, str] = ("ada", "bo"), **create: Any
) -> tuple[Any, Any, Any, Any]:
    """Two connected players in a live game: (ada, bo, ada's seat, bo's seat); ada is X.
    A name belongs to one session: a second game of the same test takes other ``names``."""
    from protocol import CreateGame, JoinGame, Snapshot

    ada = await server.connect(names[0])
    bo = await server.connect(names[1])
    seat_a = await ada.request(CreateGame, opponent="human", seat=0, **create)
    opened = await next_event(ada, Snapshot)  # the open game, before anyone joined
    assert opened.status == "open" and opened.seq == 0
    assert list(opened.online) == [seat_a.seat == 0, seat_a.seat == 1]  # no one in the open seat
    seat_b = await bo.request(JoinGame, game_id=seat_a.game_id)
    return ada, bo, seat_a, seat_b


async def http_get(port: int, path: str) -> str:
    """A GET of ``path`` on 127.0.0.1:``port`` (an admin port): the whole answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    body = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return body.decode()


async def admin_get(port: int, path: str) -> tuple[int, str]:
    """``http_get``'s answer as its status code and body."""
    head, _, body = (await http_get(port, path)).partition("\r\n\r\n")
    return int(head.split()[1]), body

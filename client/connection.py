"""The network half of every client: one websocket, requests matched to replies.

``ServerConnection`` knows nothing of terminals: the plain client, the Textual
UI and bots all drive it. Replies are matched by ``rid``; game events (moves,
endings, snapshots) also land in ``events`` so a UI can follow the game.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from protocol import (
    MAX_SERVER_FRAME,
    PROTOCOL_VERSION,
    Ended,
    Error,
    Hello,
    Message,
    Moved,
    ProtocolError,
    Snapshot,
    Welcome,
    decode_server,
    encode,
)

M = TypeVar("M", bound=Message)
GAME_EVENTS = (Snapshot, Moved, Ended)


class RequestFailed(Exception):
    """The server answered a request with an error message."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.code = error.code
        self.message = error.message
        self.error = error


class ConnectionLost(Exception):
    """The connection closed while a request waited for its reply."""


class ServerConnection:
    """A connected, greeted client session."""

    def __init__(self, websocket: ClientConnection) -> None:
        self.websocket = websocket
        self.events: asyncio.Queue[Message] = asyncio.Queue()
        self.errors: asyncio.Queue[Error] = asyncio.Queue()  # errors not tied to a request
        self._rids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self.welcome: Welcome | None = None
        self.closed = asyncio.Event()

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        name: str = "anonymous",
        bot: bool = False,
        client: str = "noughts",
        session: str | None = None,
    ) -> ServerConnection:
        websocket = await websockets.connect(
            url, max_size=MAX_SERVER_FRAME, compression=None, open_timeout=10
        )
        connection = cls(websocket)
        try:
            connection.welcome = await connection.request(
                Hello, version=PROTOCOL_VERSION, name=name, bot=bot, client=client, session=session
            )
        except BaseException:
            await connection.close()
            raise
        return connection

    async def request(self, kind: type[M], **fields: Any) -> Any:
        """Send a request and wait for its reply; raises RequestFailed on an error reply."""
        rid = next(self._rids)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await self.websocket.send(encode(kind(rid=rid, **fields)))  # type: ignore[call-arg]
            reply = await future
        finally:
            self._pending.pop(rid, None)
        if isinstance(reply, Error):
            raise RequestFailed(reply)
        return reply

    async def send(self, kind: type[M], **fields: Any) -> int:
        """Send a request without waiting for its reply; returns its rid."""
        rid = next(self._rids)
        await self.websocket.send(encode(kind(rid=rid, **fields)))  # type: ignore[call-arg]
        return rid

    async def _read(self) -> None:
        try:
            async for frame in self.websocket:
                try:
                    message = decode_server(frame)
                except ProtocolError:
                    continue  # a newer server's message we cannot read: skip it
                rid = getattr(message, "rid", None)
                future = self._pending.get(rid) if rid is not None else None
                replied = future is not None and not future.done()
                if future is not None and replied:
                    future.set_result(message)
                self.received(message, replied)
        except ConnectionClosed:
            pass
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionLost("the connection to the server closed"))

    def received(self, message: Message, replied: bool) -> None:
        """Every message from the server, after a waiting request got it as its reply
        (``replied``). Queues game events and unrequested errors; the Textual UI overrides
        it to route every message to its screens."""
        if isinstance(message, Error) and not replied:
            self.errors.put_nowait(message)
        if isinstance(message, GAME_EVENTS):
            self.events.put_nowait(message)

    async def next_event(self, timeout: float | None = None) -> Message:
        """The next game event; raises ConnectionLost if the connection closes first."""
        if not self.events.empty():
            return self.events.get_nowait()
        getter = asyncio.ensure_future(self.events.get())
        closed = asyncio.ensure_future(self.closed.wait())
        done, _ = await asyncio.wait(
            {getter, closed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        closed.cancel()
        if getter in done:
            return getter.result()
        getter.cancel()
        if not done:
            raise TimeoutError("no game event in time")
        raise ConnectionLost("the connection to the server closed")

    async def game_events(self) -> AsyncIterator[Message]:
        while True:
            try:
                yield await self.next_event()
            except ConnectionLost:
                return

    async def close(self) -> None:
        await self.websocket.close()
        try:
            await asyncio.wait_for(self._reader, timeout=5)
        except (TimeoutError, asyncio.CancelledError):
            self._reader.cancel()

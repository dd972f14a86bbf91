"""The UI's link to the server: one connection at a time, re-opened when it drops.

``ServerLink.run`` is meant to run in a Textual worker: it connects, greets the
server (with the session of the earlier ``welcome`` after a drop, so seats come
back), reports its state, hands every message to ``deliver`` and, when the
connection closes, waits a little and connects again. What to ask for after a
reconnection (``resume`` of each game with the last ``seq`` seen, ``watch`` again,
the lobby) is the app's business: ``on_connected`` is told whether it is a
reconnection.

Why not ``ServerConnection(reconnect=True)``: the UI needs what that one does not give:
retrying the first connection, a reason to show while offline, trying for as long as the
app runs, watching a spectated game again with ``watch`` (a ``resume`` would leave the
server unable to ``unwatch`` it), and each new ``welcome`` (the session to save, the games
to list under Your games).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from client.connection import ConnectionLost, RequestFailed, ServerConnection
from protocol import Message, Welcome

M = TypeVar("M", bound=Message)

BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # waits between attempts; the last one repeats


class UIConnection(ServerConnection):
    """A ServerConnection that hands every message to a callback instead of queueing it."""

    deliver: Callable[[Message], object] | None = None

    def received(self, message: Message, replied: bool) -> None:
        if self.deliver is not None:
            self.deliver(message)


class Offline(ConnectionLost):
    """A request made while the link is down."""


class ServerLink:
    """A connection to ``url`` that comes back by itself after a drop."""

    def __init__(
        self,
        url: str,
        *,
        name: str,
        deliver: Callable[[Message], object],
        on_state: Callable[[str, str], object],
        on_connected: Callable[[Welcome, bool], Awaitable[None]],
        session: str | None = None,
    ) -> None:
        self.url = url
        self.name = name
        self.deliver = deliver
        self.on_state = on_state  # (state, detail): "connecting", "online", "offline"
        self.on_connected = on_connected
        self.connection: UIConnection | None = None
        self.session = session  # from an earlier run, or None: the server starts a new one
        self.player_id: str | None = None
        self.connected = asyncio.Event()
        self._closing = False

    async def run(self) -> None:
        """Connect, and reconnect after every drop, until ``close``."""
        attempt = 0
        reconnect = False
        while not self._closing:
            self.on_state("connecting", self.url if not reconnect else "reconnecting…")
            try:
                connection = await self._open()
            except (OSError, ConnectionLost, TimeoutError) as exc:
                wait = BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
                attempt += 1
                self.on_state("offline", f"cannot reach {self.url} ({exc}); retrying in {wait:g} s")
                await asyncio.sleep(wait)
                continue
            except RequestFailed as exc:
                if exc.code == "bad_token" and self.session is not None:
                    self.session = None  # the server forgot us (a new database): start afresh
                    continue
                self.on_state("offline", f"the server refused us: {exc.message}")
                return
            attempt = 0
            self.connection = connection
            welcome = connection.welcome
            assert welcome is not None
            self.session, self.player_id = welcome.session, welcome.player_id
            self.connected.set()
            self.on_state("online", welcome.server)
            try:
                await self.on_connected(welcome, reconnect)
            except (ConnectionLost, RequestFailed):
                pass  # the connection dropped again at once, or a resume was refused
            await connection.closed.wait()
            self.connected.clear()
            self.connection = None
            reconnect = True
            if not self._closing:
                self.on_state("offline", "connection lost; reconnecting…")

    async def _open(self) -> UIConnection:
        websocket_connection = await UIConnection.connect(
            self.url, name=self.name, client="noughts-ui", session=self.session
        )
        assert isinstance(websocket_connection, UIConnection)
        websocket_connection.deliver = self.deliver
        return websocket_connection

    async def request(self, kind: type[M], **fields: Any) -> Any:
        """Send a request and wait for its reply; Offline when not connected."""
        connection = self.connection
        if connection is None or connection.closed.is_set():
            raise Offline("not connected to the server")
        return await connection.request(kind, **fields)

    async def close(self) -> None:
        self._closing = True
        if self.connection is not None:
            await self.connection.close()

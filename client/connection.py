"""The network half of every client: one websocket session, requests matched to replies.

``ServerConnection`` knows nothing of terminals: the plain client, the Textual UI and
bots all drive it. Replies are matched by ``rid``; game events (snapshots, moves,
offers, presence, endings) land in ``events`` and lobby changes in ``lobby_events``.

With ``reconnect=True`` a dropped connection is reopened by itself: hello with the
same session, then ``resume`` for every game followed, from the last ``seq`` seen, so
``events`` carries on without a gap or a duplicate. Requests in flight when the
connection dropped fail with ConnectionLost (the caller may send them again).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import msgpack
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from protocol import (
    GAME_EVENTS,
    MAX_SERVER_FRAME,
    PROTOCOL_VERSION,
    Error,
    Hello,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
    Message,
    ProtocolError,
    Resume,
    Resumed,
    Seated,
    Snapshot,
    Welcome,
    decode_server,
    encode,
)

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
# Waits between attempts to reconnect (seconds); the last one repeats.
BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0)


def server_url(text: str) -> str:
    """A server address as users write it: ``ws://`` or ``wss://`` URLs as they are, and a
    bare ``host:port`` as ``ws://host:port``. ValueError with a one-line reason otherwise."""
    from urllib.parse import urlsplit

    text = text.strip()
    if "://" not in text:
        text = f"ws://{text}"
    parts = urlsplit(text)
    if parts.scheme not in ("ws", "wss"):
        raise ValueError(
            f"{parts.scheme}:// is not a websocket address: give ws://HOST:PORT, wss://HOST:PORT "
            "or HOST:PORT"
        )
    if not parts.hostname:
        raise ValueError(f"no host in {text!r}: give ws://HOST:PORT or HOST:PORT")
    try:
        parts.port  # noqa: B018 - reading it checks it
    except ValueError:
        raise ValueError(f"the port of {text!r} is not a number in 0..65535") from None
    return text


class RequestFailed(Exception):
    """The server answered a request with an error message."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.code = error.code
        self.message = error.message
        self.error = error


class ConnectionLost(Exception):
    """The connection closed while a request waited for its reply."""


def _unreadable(frame: bytes | str, exc: ProtocolError) -> Error:
    """An error standing for a server frame the codec refused, with the frame's ``rid``
    when one can be read from it."""
    rid = None
    with contextlib.suppress(Exception):
        body = msgpack.unpackb(frame, raw=False, strict_map_key=False)
        if type(body.get("rid")) is int:
            rid = body["rid"]
    text = f"cannot read a frame from the server: {exc.message}"
    return Error(code=exc.code.value, message=text[:1024], rid=rid)


class ServerConnection:
    """A connected, greeted client session."""

    def __init__(
        self,
        url: str,
        *,
        name: str = "anonymous",
        bot: bool = False,
        client: str = "noughts",
        reconnect: bool = False,
        reconnect_for_s: float = 300.0,
    ) -> None:
        self.url = url
        self.name = name
        self.bot = bot
        self.client = client
        self.reconnect = reconnect
        self.reconnect_for_s = reconnect_for_s
        self.websocket: ClientConnection | None = None
        self.events: asyncio.Queue[Message] = asyncio.Queue()
        self.lobby_events: asyncio.Queue[Message] = asyncio.Queue()
        self.errors: asyncio.Queue[Error] = asyncio.Queue()  # errors not tied to a request
        # "connected", "reconnecting" or "closed", each change also put on this queue.
        self.status = "closed"
        self.status_changes: asyncio.Queue[str] = asyncio.Queue()
        self.welcome: Welcome | None = None
        self.session: str | None = None
        self.last_seq: dict[str, int] = {}  # game_id -> last event seq delivered
        self.seats: dict[str, tuple[int, str]] = {}  # game_id -> (seat, token)
        self.in_lobby = False
        self.closed = asyncio.Event()
        self._rids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        name: str = "anonymous",
        bot: bool = False,
        client: str = "noughts",
        session: str | None = None,
        reconnect: bool = False,
    ) -> ServerConnection:
        connection = cls(url, name=name, bot=bot, client=client, reconnect=reconnect)
        connection.session = session
        await connection._open()
        return connection

    # --- opening, greeting, reconnecting ---------------------------------------------------

    async def _open(self) -> None:
        self.websocket = await websockets.connect(
            self.url, max_size=MAX_SERVER_FRAME, compression=None, open_timeout=10
        )
        self._reader = asyncio.get_running_loop().create_task(self._read(self.websocket))
        try:
            self.welcome = await self._hello()
        except BaseException:
            await self.websocket.close()
            raise
        self.session = self.welcome.session
        for game in self.welcome.games:
            self.seats[game["game_id"]] = (game["seat"], game["token"])
        self._set_status("connected")
        if self.reconnect and self._supervisor is None:
            self._supervisor = asyncio.get_running_loop().create_task(self._supervise())

    async def _hello(self) -> Welcome:
        fields: dict[str, Any] = {
            "version": PROTOCOL_VERSION,
            "name": self.name,
            "bot": self.bot,
            "client": self.client,
        }
        if self.session is not None:
            try:
                return await self.request(Hello, session=self.session, **fields)
            except RequestFailed as exc:
                if exc.code != "bad_token":
                    raise
                # The server no longer knows the session (a new database): start afresh.
                self.session = None
        return await self.request(Hello, **fields)

    def _set_status(self, status: str) -> None:
        if status != self.status:
            self.status = status
            self.status_changes.put_nowait(status)

    async def _supervise(self) -> None:
        """Reopen a dropped connection and resume every followed game."""
        loop = asyncio.get_running_loop()
        while not self._closing:
            assert self._reader is not None
            await asyncio.shield(self._reader)
            if self._closing:
                return
            self._set_status("reconnecting")
            give_up_at = loop.time() + self.reconnect_for_s
            for attempt in itertools.count():
                await asyncio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
                if self._closing:
                    return
                try:
                    await self._open()
                    await self._resume_all()
                    break
                except (OSError, InvalidHandshake, ConnectionLost, TimeoutError) as exc:
                    log.info("reconnecting to %s: %s", self.url, exc)
                    if loop.time() > give_up_at:
                        self._set_status("closed")
                        self.closed.set()
                        return

    async def _resume_all(self) -> None:
        # Every game followed, and every unfinished game of ours the welcome names: one
        # still open (waiting for an opponent) has no seq recorded yet, and only a
        # follower receives the snapshot of its start.
        games = dict.fromkeys(self.last_seq, 0)
        if self.welcome is not None:
            games.update(dict.fromkeys((g["game_id"] for g in self.welcome.games), 0))
        for game_id in games:
            try:
                await self.request(Resume, game_id=game_id, since=self.last_seq.get(game_id, 0))
            except RequestFailed as exc:
                log.info("cannot resume %s: %s", game_id, exc.message)
        if self.in_lobby:
            await self.request(LobbySubscribe)

    # --- requests ------------------------------------------------------------------------

    async def request(self, kind: type[M], **fields: Any) -> Any:
        """Send a request and wait for its reply; raises RequestFailed on an error reply."""
        rid = next(self._rids)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await self._send(encode(kind(rid=rid, **fields)))  # type: ignore[call-arg]
            reply = await future
        finally:
            self._pending.pop(rid, None)
        if isinstance(reply, Error):
            raise RequestFailed(reply)
        if isinstance(reply, LobbyState):
            self.in_lobby = True
        return reply

    async def send(self, kind: type[M], **fields: Any) -> int:
        """Send a request without waiting for its reply; returns its rid."""
        rid = next(self._rids)
        await self._send(encode(kind(rid=rid, **fields)))  # type: ignore[call-arg]
        return rid

    async def _send(self, frame: bytes) -> None:
        if self.websocket is None:
            raise ConnectionLost("not connected")
        try:
            await self.websocket.send(frame)
        except ConnectionClosed as exc:
            raise ConnectionLost("the connection to the server closed") from exc

    def token_for(self, game_id: str) -> str | None:
        held = self.seats.get(game_id)
        return None if held is None else held[1]

    def forget(self, game_id: str) -> None:
        """Stop resuming a game after a reconnection (it is over, or no longer watched)."""
        self.last_seq.pop(game_id, None)

    # --- incoming ------------------------------------------------------------------------

    async def _read(self, websocket: ClientConnection) -> None:
        lost = "the connection to the server closed"
        try:
            async for frame in websocket:
                try:
                    message = decode_server(frame)
                except ProtocolError as exc:
                    # Never dropped in silence: the request it answers fails with this
                    # error, or it goes to ``errors`` (a frame over the websocket's size
                    # cap closes the connection instead, and says so below).
                    message = _unreadable(frame, exc)
                    log.warning("%s", message.message)
                self._deliver(message)
        except ConnectionClosed as exc:
            lost = f"{lost}: {exc}"
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionLost(lost))
            if not self.reconnect or self._closing:
                self._set_status("closed")
                self.closed.set()

    def _deliver(self, message: Message) -> None:
        rid = getattr(message, "rid", None)
        if isinstance(message, Seated):
            self.seats[message.game_id] = (message.seat, message.token)
        elif isinstance(message, Resumed) and message.seat is not None and message.token:
            self.seats[message.game_id] = (message.seat, message.token)
        future = self._pending.get(rid) if rid is not None else None
        replied = future is not None and not future.done()
        if future is not None and replied:
            future.set_result(message)
        if isinstance(message, GAME_EVENTS):
            game_id: str = message.game_id  # type: ignore[attr-defined]
            seq: int = message.seq  # type: ignore[attr-defined]
            if isinstance(message, Snapshot):
                if message.status != "open":
                    self.last_seq[game_id] = seq
            elif seq <= self.last_seq.get(game_id, 0):
                return  # already delivered before a reconnection
            else:
                self.last_seq[game_id] = seq
        self.received(message, replied)

    def received(self, message: Message, replied: bool) -> None:
        """Every message from the server (duplicates after a reconnection left out), after a
        waiting request got it as its reply (``replied``). Queues game events, lobby events
        and unrequested errors; the Textual UI overrides it to route messages to its screens."""
        if isinstance(message, Error) and not replied:
            self.errors.put_nowait(message)
        elif isinstance(message, GAME_EVENTS):
            self.events.put_nowait(message)
        elif isinstance(message, LobbyEvent | LobbyState):
            self.lobby_events.put_nowait(message)

    async def next_event(self, timeout: float | None = None) -> Message:
        """The next game event; raises ConnectionLost if the connection closes for good."""
        return await self._next(self.events, timeout, "game event")

    async def next_lobby_event(self, timeout: float | None = None) -> Message:
        """The next ``lobby_state`` or ``lobby_event`` (a subscription's reply included);
        raises ConnectionLost if the connection closes for good."""
        return await self._next(self.lobby_events, timeout, "lobby event")

    async def _next(
        self, queue: asyncio.Queue[Message], timeout: float | None, what: str
    ) -> Message:
        if not queue.empty():
            return queue.get_nowait()
        getter = asyncio.ensure_future(queue.get())
        closed = asyncio.ensure_future(self.closed.wait())
        done, _ = await asyncio.wait(
            {getter, closed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        closed.cancel()
        if getter in done:
            return getter.result()
        getter.cancel()
        if not done:
            raise TimeoutError(f"no {what} in time")
        raise ConnectionLost("the connection to the server closed")

    async def game_events(self) -> AsyncIterator[Message]:
        while True:
            try:
                yield await self.next_event()
            except ConnectionLost:
                return

    def drop(self) -> None:
        """Cut the connection as a network failure would: no closing handshake
        (reconnection, if on, follows)."""
        if self.websocket is not None:
            self.websocket.transport.abort()

    async def close(self) -> None:
        self._closing = True
        if self.websocket is not None:
            await self.websocket.close()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                self._reader.cancel()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        self._set_status("closed")
        self.closed.set()

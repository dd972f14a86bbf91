"""One client's websocket: frames in, typed messages to the server, frames out.

The handler only translates: it rate-limits and decodes each frame (anything malformed
becomes one documented error, carrying the request's ``rid`` whenever one can be read),
hands valid messages to the GameServer, and maps each error branch to one behaviour, as
websockets' send_context does: protocol and game errors are answered and the connection
stays open; anything else is logged with its traceback and closes this connection only.

Outgoing frames are written at once while the socket keeps up; once it falls behind they
wait in a queue. What waits for a client -- that queue plus the socket's write buffer,
where websockets also puts its pongs -- is capped in bytes: a client that does not read
is closed once it passes the cap, without delaying anyone else. Pings count against the
same rate limit as messages.

What a connection needs from the server is ``Handler`` (server/app.py implements it), so
this module does not import the server; ``PlayerSession`` is the player it speaks for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from websockets.exceptions import ConnectionClosed

from protocol import (
    OLDEST_PROTOCOL_VERSION,
    Error,
    ErrorCode,
    Hello,
    Message,
    ProtocolError,
    Welcome,
    decode,
    encode,
)
from protocol.codec import request_id
from server.errors import ServerError
from server.limits import TokenBucket
from server.session import Player
from server.settings import ServerSettings
from server.transport import GuardedConnection, storms

log = logging.getLogger(__name__)

CLOSE_VERSION_MISMATCH = 4001
CLOSE_SLOW_CONSUMER = 4008
CLOSE_RATE_LIMIT = 4029
# Seconds a dropped client's socket may take to drain its last frames before it is cut.
SHED_GRACE_S = 1.0


class Handler(Protocol):
    """What a connection needs from the server it serves (server/app.py's GameServer):
    defined here, so that this module does not import the server."""

    settings: ServerSettings

    async def hello(self, connection: Connection, hello: Hello) -> Welcome:
        """Identify the connection's player (``connection.player`` is set on return)."""

    async def dispatch(self, connection: Connection, message: Message) -> None:
        """Serve a request from a connection that said hello (errors: ServerError)."""

    async def disconnected(self, connection: Connection) -> None:
        """The connection is closed: forget it."""


@dataclass(slots=True, eq=False)
class PlayerSession:
    """A player known to this server process, and its open connections."""

    player_id: str
    name: str
    bot: bool
    connections: set[Connection] = field(default_factory=set)
    address: str = "?"  # the remote address of its latest hello (per-address caps)
    # The hashes of the session tokens it said hello with here (Hub.sessions).
    token_hashes: set[str] = field(default_factory=set)

    @property
    def online(self) -> bool:
        return bool(self.connections)

    def as_player(self) -> Player:
        return Player(self.name, "bot" if self.bot else "human", self.player_id)


class Connection:
    """A connected client: its player after hello, what it follows, its outgoing queue."""

    # The cluster node this client is connected to, when it is not this one (a
    # RemoteConnection, server/cluster_base.py); None for a websocket here.
    node: str | None = None
    # The request being served and the frame it was decoded from: a request forwarded
    # to its game's owner node goes as the client's bytes (server/cluster.py).
    request_frame: tuple[Message, bytes] | None = None
    # The newest protocol version the client speaks (its hello's; 1 for a client of version
    # 1 or 2, which read the same messages): a message of a newer version goes to it only.
    # A client of another node (cluster_base.RemoteConnection) is sent them by its node.
    version: int = OLDEST_PROTOCOL_VERSION

    def __init__(
        self,
        server: Handler,
        websocket: GuardedConnection,
        bucket: TokenBucket,
        send_buffer: int,
    ) -> None:
        self.server = server
        self.websocket = websocket
        self.bucket = bucket
        self.player: PlayerSession | None = None
        self.games: set[str] = set()  # games whose events this connection receives
        self.watching: set[str] = set()  # the subset followed as a spectator
        self.lobby = False
        self.send_buffer = send_buffer  # bytes that may wait for this client
        self._outbox: asyncio.Queue[bytes | None] = asyncio.Queue()  # bounded in bytes
        self._queued = 0  # bytes in _outbox
        self._writer: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None
        self.closed = False
        websocket.ping_received = self._ping_received

    @property
    def ready(self) -> bool:
        return self.player is not None

    @property
    def player_id(self) -> str | None:
        return None if self.player is None else self.player.player_id

    # --- outgoing ------------------------------------------------------------------------

    @property
    def backlog(self) -> int:
        """Bytes waiting for this client: queued here, and in the socket's write buffer."""
        return self._queued + self.websocket.buffered

    def post(self, frame: bytes) -> None:
        """Send a frame to this client without waiting; drop the client if it lags."""
        if self.closed:
            return
        websocket = self.websocket
        queued = self._queued
        backlog = queued + websocket.buffered
        # A frame larger than the cap still goes to a client that has caught up.
        if backlog and backlog + len(frame) > self.send_buffer:
            self._too_slow(backlog + len(frame))
            return
        # Nothing queued (no frame is empty) and the transport below its high-water mark:
        # written now, in order, without waking the writer task; else queued behind.
        if not queued and websocket.write_now(frame):
            return
        self._outbox.put_nowait(frame)
        self._queued += len(frame)

    def _too_slow(self, backlog: int) -> None:
        """The client does not read what it is sent: drop it (4008), reading nothing more.
        If it still piles up pongs while closing, past twice the cap, cut the connection."""
        if self.closed:
            if backlog > 2 * self.send_buffer:
                self.websocket.transport.abort()
            return
        storms.warning(
            "too slow",
            "dropping %s: %d bytes wait for it, over the %d-byte cap",
            self.describe(),
            backlog,
            self.send_buffer,
        )
        self.closed = True
        self.websocket.shed(
            CLOSE_SLOW_CONSUMER,
            f"send queue full ({self.send_buffer} bytes): client too slow",
            SHED_GRACE_S,
        )

    def _ping_received(self) -> None:
        """websockets has answered a ping (see server/transport.py): charge it to the rate
        limit, and check the outgoing buffer its pong went to."""
        backlog = self.backlog
        if backlog > self.send_buffer:
            self._too_slow(backlog)
        if self.closed:
            return
        if not self.bucket.take(time.monotonic()) and self.bucket.abusive:
            self._over_rate(None, answer=False)

    def send(self, message: Message) -> None:
        self.post(encode(message))

    def follow(self, game_id: str, seq: int) -> None:
        """Subscribed to a game's events on another node (RemoteConnection only)."""
        raise NotImplementedError

    def send_error(
        self, code: ErrorCode, text: str, rid: int | None = None, game_id: str | None = None
    ) -> None:
        self.send(Error(code=code.value, message=text, rid=rid, game_id=game_id))

    async def _write_loop(self) -> None:
        try:
            while True:
                frame = await self._outbox.get()
                if frame is None:
                    return
                self._queued -= len(frame)
                await self.websocket.send(frame)
        except ConnectionClosed:
            pass

    # --- incoming ------------------------------------------------------------------------

    async def run(self) -> None:
        self._writer = asyncio.create_task(self._write_loop())
        websocket = self.websocket
        try:
            while True:
                frame = await websocket.recv()  # (async for adds a generator's step)
                if self.closed:
                    # Closing: read and drop what the client still sends, so that its
                    # reply to our close frame gets through and the handshake ends.
                    continue
                await self._handle_frame(frame)
                if not self._outbox.empty():
                    # Requests already buffered are read without yielding: let the writer
                    # send the replies first, so a burst of requests does not look like a
                    # client that stopped reading.
                    await asyncio.sleep(0)
        except ConnectionClosed:
            pass
        finally:
            self.closed = True
            try:
                await self.server.disconnected(self)
            except Exception:
                log.exception("cleaning up after %s failed", self.describe())
            # Flush what is queued (an error that explains a close, say), then stop the writer.
            self._outbox.put_nowait(None)
            try:
                await asyncio.wait_for(self._writer, timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                self._writer.cancel()

    async def _handle_frame(self, frame: bytes | str) -> None:
        rid: int | None = None
        if not self.bucket.take(time.monotonic()):
            self._over_rate(request_id(frame))
            return
        try:
            message = decode(frame)
            rid = getattr(message, "rid", None)
            if isinstance(message, Hello):
                await self._hello(message)
            elif not self.ready:
                raise ProtocolError(ErrorCode.NOT_READY, "send hello first")
            else:
                if type(frame) is bytes:
                    self.request_frame = (message, frame)
                await self.server.dispatch(self, message)
        except ProtocolError as exc:
            self.send_error(exc.code, exc.message, rid if rid is not None else exc.rid)
            if exc.code is ErrorCode.VERSION_MISMATCH:
                await self._close_after_flush(CLOSE_VERSION_MISMATCH, "protocol version mismatch")
        except ServerError as exc:
            self.send_error(exc.code, exc.message, rid, exc.game_id)
        except ConnectionClosed:
            raise
        except Exception:
            log.exception("internal error serving %s; closing it", self.describe())
            self.send_error(ErrorCode.INTERNAL, "internal server error", rid)
            await self._close_after_flush(1011, "internal error")

    def _over_rate(self, rid: int | None, *, answer: bool = True) -> None:
        """A message or ping over the rate limit: dropped, and answered (``rate_limited``,
        with its ``rid``) unless it was a ping; a client that keeps on is closed (4029)."""
        if self.bucket.abusive:
            self.send_error(ErrorCode.RATE_LIMITED, "rate limit exceeded again and again", rid)
            self.closed = True
            self.websocket.transport.pause_reading()  # nothing more of it is read
            self._closing = asyncio.get_running_loop().create_task(
                self._close_after_flush(CLOSE_RATE_LIMIT, "rate limit exceeded", shed=True)
            )
        elif answer:
            self.send_error(
                ErrorCode.RATE_LIMITED,
                f"rate limit: {self.bucket.describe()}; this message was dropped",
                rid,
            )

    async def _close_after_flush(self, code: int, reason: str, *, shed: bool = False) -> None:
        """Close once what is queued (the error saying why) is sent: politely, or for an
        abusive client (``shed``) without reading from it again."""
        self.closed = True
        # Behind what is queued: the writer sends it all (the error saying why), then stops.
        self._outbox.put_nowait(None)
        if self._writer is not None:
            try:
                await asyncio.wait_for(self._writer, timeout=SHED_GRACE_S if shed else 5)
            except (TimeoutError, asyncio.CancelledError):
                pass
        if shed:
            self.websocket.shed(code, reason, SHED_GRACE_S)
            return
        # Not awaited here: the read loop must go on draining for the handshake to end.
        asyncio.get_running_loop().create_task(self.websocket.close(code, reason))

    async def _hello(self, hello: Hello) -> None:
        newest = self.server.settings.protocol_version
        if not OLDEST_PROTOCOL_VERSION <= hello.version <= newest:
            raise ProtocolError(
                ErrorCode.VERSION_MISMATCH,
                f"this server speaks protocol versions {OLDEST_PROTOCOL_VERSION} to "
                f"{newest}, not {hello.version}: "
                + ("say hello with version 1" if hello.version > newest else "upgrade your client"),
            )
        if self.ready:
            raise ProtocolError(ErrorCode.BAD_FIELD, "hello was already sent on this connection")
        self.version = hello.version
        self.send(await self.server.hello(self, hello))

    def describe(self) -> str:
        name = self.player.name if self.player else "?"
        remote = getattr(self.websocket, "remote_address", None)
        return f"{name}@{remote}"

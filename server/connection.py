"""One client's websocket: frames in, typed messages to the server, frames out.

The handler only translates: it rate-limits and decodes each frame (anything malformed
becomes one documented error), hands valid messages to the GameServer, and maps each
error branch to one behaviour, as websockets' send_context does: protocol and game
errors are answered and the connection stays open; anything else is logged with its
traceback and closes this connection only. Outgoing frames are written at once while
the socket keeps up; once it falls behind they wait in a bounded queue, so that a
client that stops reading is dropped without delaying anyone else.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from protocol import (
    PROTOCOL_VERSION,
    Error,
    ErrorCode,
    Hello,
    Message,
    ProtocolError,
    decode,
    encode,
)
from server.errors import ServerError
from server.limits import TokenBucket

if TYPE_CHECKING:
    from server.app import GameServer, PlayerSession

log = logging.getLogger(__name__)

SEND_QUEUE_FRAMES = 1024
CLOSE_VERSION_MISMATCH = 4001
CLOSE_SLOW_CONSUMER = 4008
CLOSE_RATE_LIMIT = 4029


class Connection:
    """A connected client: its player after hello, what it follows, its outgoing queue."""

    def __init__(
        self,
        server: GameServer,
        websocket: ServerConnection,
        bucket: TokenBucket,
        queue_size: int = SEND_QUEUE_FRAMES,
    ) -> None:
        self.server = server
        self.websocket = websocket
        self.bucket = bucket
        self.player: PlayerSession | None = None
        self.games: set[str] = set()  # games whose events this connection receives
        self.watching: set[str] = set()  # the subset followed as a spectator
        self.lobby = False
        self.queue_size = queue_size
        self._outbox: asyncio.Queue[bytes | None] = asyncio.Queue(queue_size)
        self._writer: asyncio.Task[None] | None = None
        self.closed = False

    @property
    def ready(self) -> bool:
        return self.player is not None

    @property
    def player_id(self) -> str | None:
        return None if self.player is None else self.player.player_id

    # --- outgoing ------------------------------------------------------------------------

    def post(self, frame: bytes) -> None:
        """Send a frame to this client without waiting; drop the client if it lags."""
        if self.closed:
            return
        websocket = self.websocket
        if self._outbox.empty() and not websocket.paused and websocket.protocol.state is State.OPEN:
            # Fast path: nothing queued and the transport below its high-water mark, so
            # write now, in order, without waking the writer task. This is what
            # websockets' send() does (sans-I/O protocol, then send_data) minus its drain,
            # which is needed only once the buffer is full: then frames queue below.
            websocket.protocol.send_binary(frame)
            websocket.send_data()
            return
        try:
            self._outbox.put_nowait(frame)
        except asyncio.QueueFull:
            log.warning("dropping %s: its send queue is full", self.describe())
            self.closed = True
            asyncio.get_running_loop().create_task(
                self.websocket.close(
                    CLOSE_SLOW_CONSUMER,
                    f"send queue full ({self.queue_size} frames): client too slow",
                )
            )

    def send(self, message: Message) -> None:
        self.post(encode(message))

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
                await self.websocket.send(frame)
        except ConnectionClosed:
            pass

    # --- incoming ------------------------------------------------------------------------

    async def run(self) -> None:
        self._writer = asyncio.create_task(self._write_loop())
        try:
            async for frame in self.websocket:
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
            try:
                self._outbox.put_nowait(None)
            except asyncio.QueueFull:
                self._writer.cancel()
            try:
                await asyncio.wait_for(self._writer, timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                self._writer.cancel()

    async def _handle_frame(self, frame: bytes | str) -> None:
        rid: int | None = None
        if not self.bucket.take(time.monotonic()):
            if self.bucket.abusive:
                self.send_error(ErrorCode.RATE_LIMITED, "rate limit exceeded again and again")
                await self._close_after_flush(CLOSE_RATE_LIMIT, "rate limit exceeded")
            else:
                self.send_error(
                    ErrorCode.RATE_LIMITED,
                    f"rate limit: {self.bucket.describe()}; this message was dropped",
                )
            return
        try:
            message = decode(frame)
            rid = getattr(message, "rid", None)
            if isinstance(message, Hello):
                await self._hello(message)
            elif not self.ready:
                raise ProtocolError(ErrorCode.NOT_READY, "send hello first")
            else:
                await self.server.dispatch(self, message)
        except ProtocolError as exc:
            self.send_error(exc.code, exc.message, rid)
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

    async def _close_after_flush(self, code: int, reason: str) -> None:
        self.closed = True
        try:
            # Behind what is queued: the writer sends it all (the error saying why), then stops.
            await asyncio.wait_for(self._outbox.put(None), timeout=5)
        except TimeoutError:
            pass
        if self._writer is not None:
            try:
                await asyncio.wait_for(self._writer, timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                pass
        # Not awaited here: the read loop must go on draining for the handshake to end.
        asyncio.get_running_loop().create_task(self.websocket.close(code, reason))

    async def _hello(self, hello: Hello) -> None:
        if hello.version != PROTOCOL_VERSION:
            raise ProtocolError(
                ErrorCode.VERSION_MISMATCH,
                f"this server speaks protocol version {PROTOCOL_VERSION}, "
                f"not {hello.version}: upgrade your client",
            )
        if self.ready:
            raise ProtocolError(ErrorCode.BAD_FIELD, "hello was already sent on this connection")
        self.send(await self.server.hello(self, hello))

    def describe(self) -> str:
        name = self.player.name if self.player else "?"
        remote = getattr(self.websocket, "remote_address", None)
        return f"{name}@{remote}"

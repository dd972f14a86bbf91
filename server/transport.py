"""The websocket connection the server runs, and the one place it reaches past websockets'
documented API.

``GuardedConnection`` is websockets' ``ServerConnection`` plus two duties:

- Admission: it takes its socket's ``Ticket`` when TCP accepts it and gives it back when
  the socket closes, on every path (asyncio's ``connection_made`` / ``connection_lost``,
  public Protocol methods). Over a per-address or descriptor cap, it answers HTTP 503
  at once and closes, holding nothing.
- Writes without waiting: ``write_now`` puts a binary message on the socket at once
  while the connection can take it, framed here (RFC 6455, section 5.2: a server's
  frames are not masked) instead of through websockets' ``send``, whose drain and frame
  objects cost more than the rest of a move's reply. It reads the connection's
  ``paused`` (write flow control) and the protocol's state and extensions, and writes
  to ``transport`` -- internal to websockets' asyncio ``Connection``; with an extension
  (permessage-deflate) the protocol frames the message.
- Pings: websockets answers each ping with a pong inside its sans-I/O protocol and has
  no hook to see pings, so a client could send them without limit (600 MB of pings grew
  the server by 524 MB, measured). ``process_event`` -- internal to websockets' asyncio
  ``Connection`` (websockets 13 to 17) -- is overridden to report each incoming ping to
  its owner, which charges it to the rate limit and checks the outgoing buffer the
  pongs fill. tests/server/test_transport.py fails if an upgrade changes either.

Refusals and descriptor shortages are logged through one ``RateLimitedLog``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable
from typing import Any, cast

from websockets.asyncio.server import Server, ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import Event, State
from websockets.server import ServerProtocol

from server.admission import Admission, Refused, Stage, Ticket
from server.logs import RateLimitedLog

log = logging.getLogger(__name__)
storms = RateLimitedLog(log)

OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class GuardedConnection(ServerConnection):
    """A server-side websocket that holds an admission ticket and reports incoming pings."""

    def __init__(
        self,
        protocol: ServerProtocol,
        server: Server,
        *,
        admission: Admission,
        health_only_timeout_s: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(protocol, server, **kwargs)
        self.admission = admission
        self.health_only_timeout_s = health_only_timeout_s
        self.ticket: Ticket | None = None
        self._health_only_timer: asyncio.TimerHandle | None = None
        # Set by the noughts Connection once the handler runs: called on each ping.
        self.ping_received: Callable[[], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) and peer else None
        try:
            self.ticket = self.admission.arrive(host)
        except Refused as refused:
            storms.warning(
                "refused at accept", "refusing a connection from %s: %s", host, refused.reason
            )
            refuse_at_once(self.transport, refused.reason)
            return
        if self.ticket.stage is Stage.HEALTH_ONLY:  # its request is read: GameServer.route
            self._health_only_timer = asyncio.get_running_loop().call_later(
                self.health_only_timeout_s, self._health_check_late
            )

    def _health_check_late(self) -> None:
        """A socket over its address's handshake cap sent no request in time: refused."""
        if self.ticket is not None and not self.transport.is_closing():
            storms.warning(
                "refused at accept",
                "refusing a connection from %s: %s",
                self.ticket.address,
                self.ticket.refused,
            )
            refuse_at_once(self.transport, self.ticket.refused)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._health_only_timer is not None:
            self._health_only_timer.cancel()
        if self.ticket is not None:
            self.admission.leave(self.ticket)
        super().connection_lost(exc)

    def process_event(self, event: Event) -> None:
        super().process_event(event)
        if isinstance(event, Frame) and event.opcode is Opcode.PING:
            if self.ping_received is not None:
                self.ping_received()

    def shed(self, code: int, reason: str, grace_s: float) -> None:
        """Drop a client that floods or does not read, without reading another byte from
        it: its close frame goes out if its buffer takes it, then a FIN (a half-close), and
        the socket is cut after ``grace_s``. Closing the socket at once would send RST, as
        its input is unread, and the peer's kernel drops the close frame it had not read yet:
        a client that keeps sending saw a reset, never the code saying why. Over TLS, which
        cannot half-close, the socket closes once its buffer drains. A polite close
        handshake would go on parsing whatever the client keeps sending (80,000 pings'
        worth: 150 ms of the event loop, measured)."""
        transport = self.transport
        if transport.is_closing():
            return
        transport.pause_reading()
        if self.protocol.state is State.OPEN:
            self.protocol.send_close(code, reason)
            self.send_data()
        if transport.can_write_eof():
            transport.write_eof()
        else:
            transport.close()
        asyncio.get_running_loop().call_later(grace_s, transport.abort)

    def write_now(self, message: bytes) -> bool:
        """Write ``message`` as one binary frame now, if the connection is open and its
        transport below the high-water mark; False, writing nothing, if not (the caller
        then queues it for ``send``, which waits for the buffer to drain). This is
        websockets' ``send`` minus its drain, which only matters once the buffer is
        full. The server never sends a fragmented message, so none is in progress."""
        protocol = self.protocol
        if self.paused or protocol.state is not State.OPEN:
            return False
        if protocol.extensions:  # permessage-deflate: the protocol compresses the frame
            protocol.send_binary(message)
            self.send_data()
        else:
            self.transport.write(frame_header(len(message)) + message)
        return True

    @property
    def buffered(self) -> int:
        """Bytes written to this socket that the kernel has not taken yet (pongs included)."""
        return self.transport.get_write_buffer_size()


def frame_header(length: int) -> bytes:
    """The header of an unfragmented, unmasked binary frame carrying ``length`` bytes
    (RFC 6455, section 5.2: FIN and opcode 2, then the length in 7, 7+16 or 7+64 bits)."""
    if length < 126:
        return bytes((0x82, length))
    if length < 1 << 16:
        return b"\x82\x7e" + length.to_bytes(2, "big")
    return b"\x82\x7f" + length.to_bytes(8, "big")


def refuse_at_once(transport: asyncio.Transport, reason: str) -> None:
    """Answer HTTP 503 naming the cap before reading the request, then close."""
    body = f"too_many: {reason}\n".encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    transport.write(head + body)
    transport.close()


def guarded_connections(
    admission: Admission, health_only_timeout_s: float
) -> type[ServerConnection]:
    """The ``create_connection`` websockets' serve() takes: "a wrapper or a subclass" of
    ServerConnection, its documentation says (its annotation names only the class)."""

    def create(protocol: ServerProtocol, server: Server, **kwargs: Any) -> GuardedConnection:
        return GuardedConnection(
            protocol,
            server,
            admission=admission,
            health_only_timeout_s=health_only_timeout_s,
            **kwargs,
        )

    return cast(type[ServerConnection], create)


def install_descriptor_log(loop: asyncio.AbstractEventLoop, admission: Admission) -> None:
    """Route asyncio's "out of system resource" accept errors through the rate-limited log.

    When accept() fails with EMFILE, asyncio pauses accepting for a second, but (CPython
    3.11 and 3.12) goes on calling accept() up to its backlog in the same tick and logs
    each failure with a traceback: 130,706 lines in 30 s, measured. The admission budget
    keeps the server under its limit; this bounds the log if something else exhausts it.
    """
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in OUT_OF_DESCRIPTORS:
            storms.error(
                "out of descriptors",
                "out of file descriptors (%s): new connections wait; %d sockets held",
                exc.strerror,
                admission.sockets,
            )
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)

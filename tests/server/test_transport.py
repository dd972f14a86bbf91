"""The one place the server reaches past websockets' documented API (server/transport.py),
held here so that an upgrade that changes it fails a test instead of silently turning off
the ping limit or writing frames websockets would not. See the websockets pin in
pyproject.toml."""

from __future__ import annotations

import asyncio
import inspect

import websockets
from websockets.asyncio.connection import Connection as WebsocketsConnection
from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, State

from server.transport import GuardedConnection, frame_header
from tests.server.conftest import RawClient, RunningServer


def test_websockets_still_routes_incoming_frames_through_process_event() -> None:
    # The internal method GuardedConnection overrides: every incoming frame, pings
    # included (answered beforehand by the sans-I/O protocol), goes through it.
    for cls in (WebsocketsConnection, ServerConnection):
        method = vars(cls).get("process_event")
        assert method is not None, f"{cls.__qualname__}.process_event is gone"
        assert list(inspect.signature(method).parameters) == ["self", "event"]
    assert "process_event" in vars(GuardedConnection)
    assert Opcode.PING in Opcode and "opcode" in {f for f in Frame.__dataclass_fields__}
    # data_received feeds the protocol, writes its answers (the pongs), then processes
    # the events: the order server/connection.py relies on to see the pongs' bytes.
    source = inspect.getsource(WebsocketsConnection.data_received)
    assert source.index("self.send_data()") < source.index("self.process_event(event)")
    assert websockets.version.version.split(".")[0] in {"14", "15", "16", "17"}


async def test_each_incoming_ping_reaches_the_connection(server: RunningServer) -> None:
    raw = await RawClient.connect(server.url)
    (websocket,) = [c.websocket for c in server.game_server.connections]
    seen: list[int] = []
    ping_received = websocket.ping_received
    assert ping_received is not None

    def count() -> None:
        seen.append(1)
        ping_received()

    websocket.ping_received = count
    for n in range(5):
        await asyncio.wait_for(await raw.websocket.ping(bytes([n])), 10)
    assert len(seen) == 5
    await raw.close()


def test_a_frame_written_at_once_is_the_one_websockets_would_write() -> None:
    # write_now frames a message itself: byte for byte what websockets' protocol writes
    # for a server (unmasked, no extension), at every length encoding of RFC 6455.
    for length in (0, 1, 125, 126, 127, 65535, 65536, 70000):
        payload = bytes(range(256)) * (length // 256) + bytes(length % 256)
        frame = Frame(Opcode.BINARY, payload).serialize(mask=False, extensions=[])
        assert frame_header(length) + payload == frame
    # What it reads of websockets' asyncio Connection and sans-I/O protocol.
    connection_init = inspect.getsource(WebsocketsConnection.__init__)
    assert "self.paused: bool = False" in connection_init
    assert "self.transport" in inspect.getsource(WebsocketsConnection.connection_made)
    protocol_init = inspect.getsource(Protocol.__init__)
    assert "self.extensions" in protocol_init and isinstance(Protocol.state, property)
    assert State.OPEN in State


async def test_replies_go_out_at_once_and_queue_while_the_socket_is_paused(
    server: RunningServer,
) -> None:
    raw = await RawClient.connect(server.url)
    (connection,) = server.game_server.connections
    websocket = connection.websocket
    assert websocket.write_now(b"\x81\xa1x")  # a msgpack map, as the server sends
    assert await asyncio.wait_for(raw.websocket.recv(), 10) == b"\x81\xa1x"
    websocket.pause_writing()  # as asyncio does past the transport's high-water mark
    try:
        assert not websocket.write_now(b"\x80")
        connection.post(b"\x80")  # queued for the writer, which waits for the drain
        assert connection.backlog == 1
    finally:
        websocket.resume_writing()
    assert await asyncio.wait_for(raw.websocket.recv(), 10) == b"\x80"
    await raw.close()

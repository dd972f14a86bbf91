"""The one place the server reaches past websockets' documented API (server/transport.py),
held here so that an upgrade that changes it fails a test instead of silently turning off
the ping limit. See the websockets pin in pyproject.toml."""

from __future__ import annotations

import asyncio
import inspect

import websockets
from websockets.asyncio.connection import Connection as WebsocketsConnection
from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode

from server.transport import GuardedConnection
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

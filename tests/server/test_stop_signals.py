"""A real `noughts serve` stopped by a signal: SIGTERM, SIGINT and SIGHUP (a closed terminal)
each stop it gracefully: its clients told to reconnect (1012), its database's lock
released."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
import websockets

from client.embedded import EmbeddedServer
from protocol import PROTOCOL_VERSION, Hello, encode


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
async def test_a_signal_stops_a_serving_server_with_its_drain(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """An operator's probe: SIGHUP (the terminal of a foreground server closed) killed it
    with no drain, its clients cut (1006) and its lock file left."""
    server = EmbeddedServer(tmp_path / "games.db", workers=0)
    url = await server.start()
    try:
        client = await websockets.connect(url)
        await client.send(encode(Hello(rid=1, version=PROTOCOL_VERSION, name="ada")))
        await client.recv()
        assert server.process is not None
        server.process.send_signal(stop)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(client.recv(), 30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        assert await asyncio.wait_for(server.process.wait(), 30) == 0
    finally:
        await server.stop()
    assert not (tmp_path / "games.db.lock").exists()  # released, as at any clean stop

"""A connection's transport limits against a real server over real sockets: pings count
against the rate limit, what waits for a client is capped in bytes (pongs included), and
every error to a request with a readable rid carries it. (Issue 11, findings 2 and 11.)"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

import msgpack
import pytest
import websockets

from protocol import MAX_CLIENT_FRAME, Error, Ping, Pong
from server.pool import EnginePool
from server.settings import ServerSettings
from tests.server.conftest import RawClient, RunningServer, serving


@pytest.fixture
def settings() -> ServerSettings:
    return ServerSettings(rate_per_s=20.0, burst=30)


async def _error(raw: RawClient, frame: bytes) -> Error:
    await raw.send(frame)
    reply = await raw.receive()
    assert isinstance(reply, Error), reply
    return reply


async def test_every_error_to_a_request_with_a_readable_rid_carries_it(
    server: RunningServer,
) -> None:
    """Finding 11: bad_field and rate_limited errors carried no rid: the client hung."""
    raw = await RawClient.connect(server.url)
    cases = [
        ({"type": "ping", "rid": 7, "extra": 0}, "bad_field", 7),
        ({"type": "move", "rid": 8, "game_id": "g"}, "bad_field", 8),
        ({"type": "castle", "rid": 9}, "unknown_type", 9),
        ({"type": "ping", "rid": 10, "pad": "x" * MAX_CLIENT_FRAME}, "too_large", 10),
        ({"type": "ping", "rid": "11"}, "bad_field", None),  # no readable rid
    ]
    for body, code, rid in cases:
        error = await _error(raw, msgpack.packb(body))
        assert (error.code, error.rid) == (code, rid), error
    # Over the rate limit (30 in a burst here; hello and the above took 6), each refusal
    # names the request it dropped.
    for rid in range(100, 124):
        await raw.send_message(Ping(rid=rid))
    assert [(await raw.receive()).rid for _ in range(24)] == list(range(100, 124))
    limited = await _error(raw, msgpack.packb({"type": "ping", "rid": 500}))
    assert (limited.code, limited.rid) == ("rate_limited", 500)
    await raw.close()


async def test_a_ping_flood_counts_against_the_rate_limit_and_is_closed(
    server: RunningServer,
) -> None:
    """Finding 2: pings at 900/s were never limited; here the limit is 20/s, bursts of 30."""
    bystander = await server.connect("bystander")
    raw = await RawClient.connect(server.url, name="flooder")
    (connection,) = [
        c
        for c in server.game_server.connections
        if c.player is not None and c.player.name == "flooder"
    ]
    tokens = connection.bucket.tokens
    for n in range(3):
        pong = await raw.websocket.ping(n.to_bytes(4, "big"))
        await asyncio.wait_for(pong, 10)  # websockets answers each one
    assert connection.bucket.tokens < tokens - 2.5  # each took a token (plus a refill)
    with pytest.raises(websockets.ConnectionClosed) as closed:
        for n in range(3, 1000):
            await raw.websocket.ping(n.to_bytes(4, "big"))
            await asyncio.sleep(0)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4029
    assert isinstance(await bystander.request(Ping), Pong)


async def test_a_client_that_does_not_read_its_pongs_is_closed(
    tmp_path: Path, pool: EnginePool
) -> None:
    """Finding 2: pongs to a client that never reads were queued without bound (600 MB of
    pings took the server from 169 to 693 MB). Here the rate limit is out of the way and
    16 KiB may wait for a client."""
    settings = ServerSettings(rate_per_s=1e9, burst=10**9, send_buffer=16 * 1024)
    async with serving(tmp_path, pool, settings) as server:
        bystander = await server.connect("bystander")
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        raw.setblocking(False)
        port = int(server.url.rsplit(":", 1)[1])
        await asyncio.get_running_loop().sock_connect(raw, ("127.0.0.1", port))
        flooder = await websockets.connect(
            server.url, sock=raw, compression=None, ping_interval=None, close_timeout=1
        )
        flooder.transport.pause_reading()
        admission = server.game_server.admission
        assert admission.open_total == 2
        sent = 0
        with contextlib.suppress(websockets.ConnectionClosed, OSError):
            while admission.open_total == 2 and sent < 200_000:  # 25 MB of pings at most
                for _ in range(100):
                    flooder.transport.write(_ping_frame(sent))
                    sent += 1
                await asyncio.sleep(0.001)
        for _ in range(200):
            if admission.open_total == 1:
                break
            await asyncio.sleep(0.05)
        assert admission.open_total == 1, f"still connected after {sent} pings"
        assert isinstance(await bystander.request(Ping), Pong)
        flooder.transport.abort()


async def test_a_dropped_flooder_is_not_read_any_further(server: RunningServer) -> None:
    """Once the server drops a flooder it reads nothing more from it: before, the polite
    close handshake went on parsing and answering every ping already sent (80,000 pings,
    150 ms of the event loop, in bench/attack.py's ping-flood)."""
    bystander = await server.connect("bystander")
    raw = await RawClient.connect(server.url, name="flooder")
    (websocket,) = [
        c.websocket
        for c in server.game_server.connections
        if c.player is not None and c.player.name == "flooder"
    ]
    processed = 0
    ping_received = websocket.ping_received
    assert ping_received is not None

    def count() -> None:
        nonlocal processed
        processed += 1
        ping_received()

    websocket.ping_received = count
    raw.websocket.transport.pause_reading()  # a flooder that never reads
    sent = 20_000  # 2.6 MB, written at once; the limit is 20/s in bursts of 30
    raw.websocket.transport.write(b"".join(_ping_frame(n) for n in range(sent)))
    for _ in range(200):
        if websocket.transport.is_closing():
            break
        await asyncio.sleep(0.05)
    assert websocket.transport.is_closing()
    await asyncio.sleep(0.5)  # what the server would still read, it reads now
    # At most the rest of the read that held the deciding ping (asyncio reads 256 KiB).
    assert 30 < processed < 5_000, processed
    assert isinstance(await bystander.request(Ping), Pong)
    raw.websocket.transport.abort()


def _ping_frame(n: int) -> bytes:
    """A masked ping frame with a 125-byte payload (the most a control frame carries)."""
    payload = n.to_bytes(4, "big") * 31 + b"!"
    mask = b"\x01\x02\x03\x04"
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return b"\x89" + bytes([0x80 | len(payload)]) + mask + masked

"""Admission against a real server over real sockets: a slot is taken only by an accepted
websocket and given back on every path; handshakes in progress are capped per address;
plain HTTP gets its answer and holds nothing; browser origins are refused unless allowed.
(Issue 11, findings 1 and 8, and the Origin allow-list.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import websockets

from server.admission import Admission, Refused, Stage, address_key
from server.app import GameServer, running
from server.pool import EnginePool
from server.settings import ServerSettings
from server.store import SQLiteStore
from tests.server.conftest import RunningServer

PLAIN_GET = b"GET / HTTP/1.1\r\nHost: noughts\r\n\r\n"
HEALTH = b"GET /healthz HTTP/1.1\r\nHost: noughts\r\n\r\n"
_UPGRADE = b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
BAD_VERSION = (
    b"GET / HTTP/1.1\r\nHost: noughts\r\n" + _UPGRADE + b"Sec-WebSocket-Key: "
    b"dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n"
)
NO_KEY = b"GET / HTTP/1.1\r\nHost: noughts\r\n" + _UPGRADE + b"Sec-WebSocket-Version: 13\r\n\r\n"


def _port(server: RunningServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


async def _http(server: RunningServer, request: bytes) -> bytes:
    """Send one raw HTTP request; the whole answer (the server closes after it)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    writer.write(request)
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def _settled(admission: Admission, sockets: int) -> None:
    """Wait until the server holds ``sockets`` sockets (closes are seen a tick later)."""
    for _ in range(200):
        if admission.sockets == sockets:
            return
        await asyncio.sleep(0.02)
    assert admission.sockets == sockets


@pytest.fixture
def settings() -> ServerSettings:
    # (A socket over the handshake cap is read for its health check for up to 30 s: one
    # answered sooner was answered on its request, or at once.)
    return ServerSettings(
        max_connections_per_ip=5,
        max_handshakes_per_ip=4,
        max_health_only=2,
        health_only_timeout_s=30,
    )


async def test_the_client_names_the_cap_that_refused_it(server: RunningServer) -> None:
    from client.connection import ServerConnection, ServerUnreachable

    held = [await websockets.connect(server.url) for _ in range(5)]
    try:
        with pytest.raises(ServerUnreachable) as refused:
            await ServerConnection.connect(server.url, name="ada")
    finally:
        for websocket in held:
            await websocket.close()
    assert str(refused.value) == (
        f"cannot reach {server.url}: the server refused the connection"
        " (HTTP 503: too_many: at most 5 connections per address)"
    )


async def test_plain_http_and_bad_handshakes_hold_no_slot(server: RunningServer) -> None:
    """Finding 1: 2,000 plain GETs locked 127.0.0.1 out for good; here the cap is 5."""
    admission = server.game_server.admission
    for request, status in ((PLAIN_GET, b"426"), (BAD_VERSION, b"4"), (NO_KEY, b"400")):
        for _ in range(20):
            answer = await _http(server, request)
            assert answer.startswith(b"HTTP/1.1 " + status), answer[:80]
    await _settled(admission, 0)
    # The five websockets an address may hold are all there.
    held = [await websockets.connect(server.url) for _ in range(5)]
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(server.url)
    assert refused.value.response.status_code == 503
    assert b"too_many: at most 5 connections per address" in refused.value.response.body
    # A refused handshake holds nothing either; a closed websocket gives its slot back.
    await held.pop().close()
    await _settled(admission, 4)
    held.append(await websockets.connect(server.url))
    for websocket in held:
        await websocket.close()
    await _settled(admission, 0)
    assert admission.open_total == 0 and not admission.open and not admission.handshakes


async def test_the_health_endpoint_answers_and_holds_nothing(server: RunningServer) -> None:
    held = [await websockets.connect(server.url) for _ in range(5)]  # the address is full
    answer = await _http(server, HEALTH)
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"\r\n\r\nok\n"), answer
    for method in (b"POST", b"DELETE"):  # a probe's finding: answered 200 as a GET
        answer = await _http(server, HEALTH.replace(b"GET", method))
        assert answer.startswith(b"HTTP/1.1 405"), answer
    await _settled(server.game_server.admission, 5)
    for websocket in held:
        await websocket.close()


async def test_the_health_check_is_answered_from_an_address_at_its_handshake_cap(
    server: RunningServer,
) -> None:
    """An operator's probe: /healthz was documented as answered 200 whatever the caps, but
    from an address at its handshake cap it was refused (503) before it was read, so a load
    balancer behind the same proxy address as one abusive client would mark the server
    down. The check is answered; everything else from that address is still refused, and
    only a few sockets over the cap are read at once (max_health_only, here 2)."""
    admission = server.game_server.admission
    silent = [await asyncio.open_connection("127.0.0.1", _port(server)) for _ in range(4)]
    await _settled(admission, 4)
    answer = await _http(server, HEALTH)
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"\r\n\r\nok\n"), answer
    answer = await _http(server, PLAIN_GET)
    assert answer.startswith(b"HTTP/1.1 503"), answer
    assert b"too_many: at most 4 handshakes in progress per address" in answer
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(server.url)
    assert refused.value.response.status_code == 503
    await _settled(admission, 4)
    # Two more silent ones are read, waiting for a request; past them, one is answered at
    # once, before it sends anything (in under its 30 s), and closed.
    silent += [await asyncio.open_connection("127.0.0.1", _port(server)) for _ in range(2)]
    await _settled(admission, 6)
    assert admission.health_only == 2
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    answer = await asyncio.wait_for(reader.read(), 10)
    assert answer.startswith(b"HTTP/1.1 503"), answer
    assert b"too_many: at most 4 handshakes in progress per address" in answer
    writer.close()
    for _reader, half_open in silent:
        half_open.close()
    await _settled(admission, 0)
    assert admission.health_only == 0


async def test_a_silent_socket_over_the_handshake_cap_is_refused_after_a_while(
    tmp_path: Path, pool: EnginePool
) -> None:
    """A socket over its address's handshake cap that sends nothing is answered 503 once
    health_only_timeout_s is over, and closed: it is not held for the handshake timeout."""
    settings = ServerSettings(
        max_handshakes_per_ip=1, health_only_timeout_s=0.5, handshake_timeout_s=60
    )
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    game_server = GameServer(store, pool, settings=settings)
    async with running(game_server) as ws_server:
        port = next(iter(ws_server.sockets)).getsockname()[1]
        first = await asyncio.open_connection("127.0.0.1", port)
        await _settled(game_server.admission, 1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answer = await asyncio.wait_for(reader.read(), 30)
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"too_many: at most 1 handshakes in progress per address" in answer
        await _settled(game_server.admission, 1)
        assert game_server.admission.health_only == 0
        writer.close()
        first[1].close()
    await store.close()


async def test_handshakes_in_progress_are_capped_per_address(server: RunningServer) -> None:
    """Finding 8: 3,000 half-open connections were held for the handshake timeout."""
    admission = server.game_server.admission
    silent = [await asyncio.open_connection("127.0.0.1", _port(server)) for _ in range(3)]
    partial = await asyncio.open_connection("127.0.0.1", _port(server))
    partial[1].write(PLAIN_GET[:20])  # a request that never ends
    silent.append(partial)
    await _settled(admission, 4)
    # The fifth is answered 503 on its request, and closed.
    answer = await _http(server, PLAIN_GET)
    assert answer.startswith(b"HTTP/1.1 503"), answer
    assert b"too_many: at most 4 handshakes in progress per address" in answer
    with pytest.raises(websockets.InvalidStatus):
        await websockets.connect(server.url)
    # Once the half-open ones go, the address is served again.
    for _reader, half_open in silent:
        half_open.close()
    await _settled(admission, 0)
    websocket = await websockets.connect(server.url)
    assert admission.open_total == 1
    await websocket.close()


async def test_the_handshake_timeout_frees_half_open_connections(
    tmp_path: Path, pool: EnginePool
) -> None:
    settings = ServerSettings(max_handshakes_per_ip=2, handshake_timeout_s=0.5)
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    game_server = GameServer(store, pool, settings=settings)
    async with running(game_server) as ws_server:
        port = next(iter(ws_server.sockets)).getsockname()[1]
        silent = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        for reader, _writer in silent:
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the server
        assert game_server.admission.sockets == 0
        websocket = await websockets.connect(f"ws://127.0.0.1:{port}")
        await websocket.close()
        for _reader, writer in silent:
            writer.close()
    await store.close()


@pytest.fixture
async def origin_server(tmp_path: Path, pool: EnginePool) -> AsyncIterator[RunningServer]:
    settings = ServerSettings(allow_origins=("https://play.example.org",))
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    game_server = GameServer(store, pool, settings=settings)
    async with running(game_server) as ws_server:
        port = next(iter(ws_server.sockets)).getsockname()[1]
        yield RunningServer(f"ws://127.0.0.1:{port}", game_server, tmp_path / "games.db")
    await store.close()


async def test_browser_origins_are_refused_by_default(server: RunningServer) -> None:
    """Finding 11: any browser Origin was accepted (cross-site websocket hijacking)."""
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(server.url, origin="https://evil.example")  # type: ignore[arg-type]
    assert refused.value.response.status_code == 403
    websocket = await websockets.connect(server.url)  # no Origin: not a browser
    await websocket.close()
    await _settled(server.game_server.admission, 0)


async def test_allowed_origins_connect_and_others_do_not(origin_server: RunningServer) -> None:
    allowed = await websockets.connect(origin_server.url, origin="https://play.example.org")  # type: ignore[arg-type]
    await allowed.close()
    for origin in ("https://evil.example", "https://play.example.org.evil.example", "null"):
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(origin_server.url, origin=origin)  # type: ignore[arg-type]
        assert refused.value.response.status_code == 403


def test_admission_counts_each_socket_once_whatever_its_path() -> None:
    admission = Admission(
        max_open=3, max_open_per_address=2, max_handshakes_per_address=2, max_sockets=4
    )
    a1, a2 = admission.arrive("10.0.0.1"), admission.arrive("10.0.0.1")
    with pytest.raises(Refused, match="2 handshakes"):
        admission.arrive("10.0.0.1")
    admission.open_websocket(a1)
    a3 = admission.arrive("10.0.0.1")  # a1 is open now: one handshake slot is free
    admission.open_websocket(a2)
    with pytest.raises(Refused, match="2 connections per address"):
        admission.open_websocket(a3)
    b1 = admission.arrive("10.0.0.2")
    with pytest.raises(Refused, match="4 sockets"):
        admission.arrive("10.0.0.3")
    admission.open_websocket(b1)
    for ticket in (a1, a2, a3, b1, a1, a3):  # leaving twice gives back nothing more
        admission.leave(ticket)
    assert (admission.sockets, admission.open_total) == (0, 0)
    assert not admission.open and not admission.handshakes
    gone = admission.arrive("10.0.0.1")
    admission.leave(gone)
    with pytest.raises(Refused):  # a socket that closed mid-handshake never opens
        admission.open_websocket(gone)
    assert admission.open_total == 0


def test_addresses_are_counted_by_ipv4_address_and_ipv6_slash_64() -> None:
    assert address_key("203.0.113.7") == "203.0.113.7"
    assert address_key("::ffff:203.0.113.7") == "203.0.113.7"
    assert address_key("2001:db8:1:2::1") == address_key("2001:db8:1:2:ffff::9")
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")
    assert address_key(None) == "?"


def test_over_its_handshake_cap_a_socket_is_held_for_its_health_check_only() -> None:
    admission = Admission(
        max_open=3,
        max_open_per_address=2,
        max_handshakes_per_address=1,
        max_sockets=4,
        max_health_only=1,
    )
    first = admission.arrive("10.0.0.1")
    health = admission.arrive("10.0.0.1")  # over the cap: a health check, or refused
    assert health.stage is Stage.HEALTH_ONLY
    assert health.refused == "at most 1 handshakes in progress per address"
    other = admission.arrive("10.0.0.2")
    with pytest.raises(Refused, match="1 handshakes"):  # over its cap, and one such is held
        admission.arrive("10.0.0.2")
    with pytest.raises(Refused, match="1 handshakes"):  # it never opens a websocket
        admission.open_websocket(health)
    admission.leave(health)
    admission.leave(health)  # (idempotent)
    assert (admission.sockets, admission.health_only) == (2, 0)
    assert admission.arrive("10.0.0.2").stage is Stage.HEALTH_ONLY  # its place is free again
    for ticket in (first, other):
        admission.leave(ticket)

"""Behind a reverse proxy (nginx, HAProxy) every connection comes from the proxy's address:
with `--trusted-proxy`, the per-address caps count the client the proxy names in
X-Forwarded-For, and a client that is not a trusted proxy cannot name anyone."""

from __future__ import annotations

from pathlib import Path

import pytest
import websockets

from protocol import PROTOCOL_VERSION, Hello, Welcome, decode_server, encode
from server.admission import Admission, Proxies, Refused
from server.pool import EnginePool
from server.settings import ServerSettings
from tests.server.conftest import RunningServer, serving

CLIENT_A, CLIENT_B = "198.51.100.7", "198.51.100.8"


def test_the_client_is_the_rightmost_address_no_trusted_proxy_added() -> None:
    proxies = Proxies(("127.0.0.1", "10.1.0.0/16"))
    assert proxies.client("127.0.0.1", [CLIENT_A]) == CLIENT_A
    # A client can write anything left of what the proxy appended: not believed.
    assert proxies.client("127.0.0.1", [f"1.2.3.4, {CLIENT_A}"]) == CLIENT_A
    # Two proxies in a row (an edge proxy, then nginx): both trusted, both skipped.
    assert proxies.client("127.0.0.1", [f"{CLIENT_A}, 10.1.2.3"]) == CLIENT_A
    assert proxies.client("127.0.0.1", [CLIENT_B, "10.1.2.3"]) == CLIENT_B  # two headers
    # From an address that is no trusted proxy, the header counts for nothing.
    assert proxies.client("203.0.113.9", [CLIENT_A]) == "203.0.113.9"
    # A garbled chain names no one: the proxy is counted.
    assert proxies.client("127.0.0.1", ["not-an-address"]) == "127.0.0.1"
    assert proxies.client("127.0.0.1", ["10.1.0.1"]) == "127.0.0.1"  # only proxies
    assert Proxies().client("127.0.0.1", [CLIENT_A]) == "127.0.0.1"
    with pytest.raises(ValueError, match="'nginx' is not an address"):
        Proxies(("nginx",))


def test_a_trusted_proxy_is_not_held_to_one_address_s_handshakes() -> None:
    admission = Admission(
        max_open=10,
        max_open_per_address=1,
        max_handshakes_per_address=1,
        max_sockets=10,
        proxies=Proxies(("127.0.0.1",)),
    )
    first, second = admission.arrive("127.0.0.1"), admission.arrive("127.0.0.1")
    admission.open_websocket(first, CLIENT_A)
    with pytest.raises(Refused, match="1 connections per address"):
        admission.open_websocket(second, CLIENT_A)
    admission.open_websocket(second, CLIENT_B)  # refused, then counted under another
    assert dict(admission.open) == {CLIENT_A: 1, CLIENT_B: 1} and not admission.handshakes
    for ticket in (first, second):
        admission.leave(ticket)
    assert not admission.open and admission.sockets == 0


@pytest.fixture
def settings() -> ServerSettings:
    return ServerSettings(max_connections_per_ip=2, trusted_proxies=("127.0.0.1",))


async def _connect(server: RunningServer, client: str) -> websockets.ClientConnection:
    return await websockets.connect(
        server.url, additional_headers={"X-Forwarded-For": client}, compression=None
    )


async def test_behind_a_trusted_proxy_each_client_has_its_own_caps(
    server: RunningServer,
) -> None:
    a1, a2 = await _connect(server, CLIENT_A), await _connect(server, CLIENT_A)
    with pytest.raises(websockets.InvalidStatus) as refused:
        await _connect(server, CLIENT_A)
    assert refused.value.response.status_code == 503
    b1 = await _connect(server, CLIENT_B)  # another client behind the same proxy
    await b1.send(encode(Hello(rid=1, version=PROTOCOL_VERSION, name="bee")))
    welcome = decode_server(await b1.recv())
    assert isinstance(welcome, Welcome)
    player = server.game_server.players[welcome.player_id]
    assert player.address == CLIENT_B  # the session caps count the client too
    for websocket in (a1, a2, b1):
        await websocket.close()


@pytest.mark.parametrize("trusted", [(), ("10.9.9.9",)])
async def test_without_trust_the_header_names_no_one(
    tmp_path: Path, pool: EnginePool, trusted: tuple[str, ...]
) -> None:
    settings = ServerSettings(max_connections_per_ip=2, trusted_proxies=trusted)
    async with serving(tmp_path, pool, settings) as server:
        held = [await _connect(server, CLIENT_A), await _connect(server, CLIENT_B)]
        with pytest.raises(websockets.InvalidStatus) as refused:
            await _connect(server, "198.51.100.9")  # all three are 127.0.0.1
        assert refused.value.response.status_code == 503
        for websocket in held:
            await websocket.close()

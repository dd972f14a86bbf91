"""The bus (server/bus.py): its own RESP framing of PUBLISH is byte for byte redis-py's;
publications reach the subscribing nodes whole and in order, many in one turn of the event
loop, over plain TCP and over TLS (``rediss://``, the connections redis-py opens); the
publisher's connection, cut, comes back and sends what was held meanwhile."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection

from server.bus import MAX_CONNECTIONS, RedisBus, pack_publish, redis_client
from server.settings import ServerSettings
from tests.services import REDIS_SERVER_HINT, REDIS_URL

TIMEOUT_S = ServerSettings().bus_timeout_s


@given(channel=st.text(min_size=1, max_size=80), data=st.binary(max_size=2000))
def test_pack_publish_is_redis_pys_framing(channel: str, data: bytes) -> None:
    expected = b"".join(Connection().pack_command("PUBLISH", channel, data))
    assert pack_publish(channel, data) == expected


class Heard:
    """A receiver: what a node's bus handed on, and a wait for a count of it."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, Any]] = []
        self.changed = asyncio.Event()

    def __call__(self, kind: str, name: str, payload: Any) -> None:
        self.items.append((kind, name, payload))
        self.changed.set()

    async def until(self, count: int, timeout: float = 10) -> list[tuple[str, str, Any]]:
        async with asyncio.timeout(timeout):
            while len([i for i in self.items if i[0] != "reconnected"]) < count:
                self.changed.clear()
                await self.changed.wait()
        return [i for i in self.items if i[0] != "reconnected"]


async def _two_buses(url: str, prefix: str) -> tuple[RedisBus, RedisBus, Heard]:
    sender, receiver = (
        RedisBus(url, prefix=prefix, node="a", timeout_s=TIMEOUT_S),
        RedisBus(url, prefix=prefix, node="b", timeout_s=TIMEOUT_S),
    )
    heard = Heard()
    await sender.start(lambda *_: None)
    await receiver.start(heard)
    return sender, receiver, heard


async def _in_order_both_ways(sender: RedisBus, receiver: RedisBus, heard: Heard) -> None:
    await receiver.follow_game("g1")
    assert receiver.subscribed("g1")
    # Many in one turn of the loop (one write), a game's events and an inbox message
    # interleaved: they arrive whole and in the order published.
    for seq in range(1, 301):
        sender.publish(sender.game_channel("g1"), [seq, b"x" * (seq % 7) * 100])
    sender.publish(sender.inbox("b"), {"op": "done", "fid": 7})
    sender.publish(sender.game_channel("g2"), [1])  # not followed: not heard
    items = await heard.until(301)
    assert [p[0] for k, n, p in items[:300]] == list(range(1, 301))
    assert {(k, n) for k, n, _ in items[:300]} == {("game", "g1")}
    assert items[300] == ("inbox", sender.inbox("b"), {"op": "done", "fid": 7})
    receiver.unfollow_game("g1")
    await asyncio.sleep(0.05)
    sender.publish(sender.game_channel("g1"), [301, b""])
    sender.publish(sender.inbox("b"), {"op": "last"})
    items = await heard.until(302)
    assert items[301][2] == {"op": "last"}  # g1's 301 was not heard: unfollowed


async def test_publications_arrive_whole_and_in_order(redis_prefix: str) -> None:
    sender, receiver, heard = await _two_buses(REDIS_URL, redis_prefix)
    try:
        await _in_order_both_ways(sender, receiver, heard)
    finally:
        await sender.close()
        await receiver.close()


async def test_the_publishers_connection_cut_comes_back_with_what_was_held(
    redis_prefix: str,
) -> None:
    sender, receiver, heard = await _two_buses(REDIS_URL, redis_prefix)
    admin = aioredis.Redis.from_url(REDIS_URL)
    try:
        # The sender's publisher connection is cut (found by its address), in CLIENT REPLY
        # OFF mode: nothing tells the sender but the connection's end.
        cut = sender._publisher
        assert cut is not None
        host, port = sender._publisher.get_extra_info("sockname")[:2]
        clients = {c["addr"]: c for c in await admin.client_list()}
        assert clients[f"{host}:{port}"]["cmd"] == "client|reply"
        before = len(heard.items)
        await admin.client_kill_filter(_id=clients[f"{host}:{port}"]["id"])
        async with asyncio.timeout(5):  # the sender reads the connection's end
            while sender._publisher is cut:
                await asyncio.sleep(0.001)
        # Published while it reconnects: held, and sent on the next connection.
        sender.publish(sender.inbox("b"), {"op": "after the cut"})
        items = await heard.until(before + 1)
        assert items[-1][2] == {"op": "after the cut"}
        assert sender.lost == 0
    finally:
        await admin.aclose()
        await sender.close()
        await receiver.close()


async def test_the_redis_client_pool_is_capped() -> None:
    client = redis_client(REDIS_URL, timeout_s=TIMEOUT_S)
    try:
        assert client.connection_pool.max_connections == MAX_CONNECTIONS
    finally:
        await client.aclose()


async def test_the_bus_speaks_tls_rediss(tmp_path: Path, redis_prefix: str) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip(REDIS_SERVER_HINT)
    from tests.server.test_cluster import _free_port
    from tests.server.test_tls import _certificate

    cert, key = _certificate(tmp_path)

    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        "redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
        "--tls-cert-file", str(cert), "--tls-key-file", str(key),
        "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no",
        "--save", "", "--appendonly", "no", "--dir", str(tmp_path),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={cert}"
    try:
        probe = redis_client(url, timeout_s=TIMEOUT_S)
        try:
            for _ in range(100):
                try:
                    await probe.ping()
                    break
                except Exception:
                    await asyncio.sleep(0.05)
        finally:
            await probe.aclose()
        sender, receiver, heard = await _two_buses(url, redis_prefix)
        try:
            await _in_order_both_ways(sender, receiver, heard)
        finally:
            await sender.close()
            await receiver.close()
    finally:
        process.kill()
        await process.wait()


async def test_a_password_in_a_bus_or_database_url_is_never_shown() -> None:
    """A Redis or PostgreSQL password in --bus or --db went whole into the errors and log
    lines naming the URL ("cannot reach the bus at redis://:PASSWORD@host", "node n-1 of
    the cluster on ..."): anyone reading the logs had it. Now they show ``***``."""
    from server.errors import ServerError
    from server.pgstore import PostgresStore
    from server.remote_engine import RemoteEngine

    url = "redis://:hunter2@127.0.0.1:1/0"  # (nothing listens on port 1)
    with pytest.raises(ServerError) as bus_refused:
        await RedisBus(url, prefix="p", node="a", timeout_s=TIMEOUT_S).start(lambda *_: None)
    with pytest.raises(ServerError) as queue_refused:
        await RemoteEngine(url).start()
    for refused in (bus_refused, queue_refused):
        assert "hunter2" not in str(refused.value)
        assert "redis://:***@127.0.0.1:1/0" in str(refused.value)
    for dsn, shown in [
        ("postgresql://noughts:hunter2@db/games", "postgresql://noughts:***@db/games"),
        (
            "postgresql://db/games?user=n&password=hunter2",
            "postgresql://db/games?user=n&password=***",
        ),
    ]:
        assert PostgresStore(dsn).describe() == shown

"""bench/cluster.py's scripted players against a real cluster node: a player whose node
is killed during its reconnection's handshake goes on to the node started in its place
(the kill run's games must all move again after every kill)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.server.cluster_nodes import cluster_of, schema_url
from tests.services import REDIS_URL

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cluster.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_cluster", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


async def test_a_player_whose_node_dies_mid_handshake_reconnects_to_its_replacement(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    bench_cluster = _bench()
    cut = asyncio.Event()

    async def dying(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A node killed as the handshake began: the connection closes unanswered."""
        writer.close()
        cut.set()

    listener = await asyncio.start_server(dying, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
            node = await cluster.start("a")
            bench = bench_cluster.Bench(
                schema_url(pg_schema), pg_schema, REDIS_URL, redis_prefix, tmp_path
            )
            # The player's node slot still lists the dying node (not reaped yet).
            bench.nodes.append(
                bench_cluster.Node(0, "dying", node.process, f"ws://127.0.0.1:{port}")
            )
            player = bench_cluster.Player(bench, 0, "x0")
            connecting = asyncio.create_task(player.connect())
            await asyncio.wait_for(cut.wait(), 10)
            # Its replacement is started in the slot (Bench.start_node).
            bench.nodes[0] = bench_cluster.Node(0, node.name, node.process, node.url)
            connection = await asyncio.wait_for(connecting, 30)
            assert connection.session is not None and player.node_name == node.name
            await connection.close()
            assert await node.stop() == 0
    finally:
        listener.close()
        await listener.wait_closed()

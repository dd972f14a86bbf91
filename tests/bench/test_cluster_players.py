"""bench/cluster.py's scripted players against a real cluster node: a player whose node
is killed during its reconnection's handshake goes on to the node started in its place
(the kill run's games must all move again after every kill); a look-up after a failover
waits out the cluster's ``unavailable`` while no node owns the game."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import asyncpg

from protocol import CreateGame, GetGame
from server.shards import shard_of
from tests.server.cluster_nodes import cluster_of, schema_url
from tests.services import PG_URL, REDIS_URL

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


async def test_a_look_up_after_a_failover_is_sent_again_while_no_node_owns_the_game(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """The resync after a failover (``get`` of the game whose move's fate is hidden) meets
    ``unavailable`` while the game's shard has no owner: it is counted and sent again,
    and answered once a node takes the shard, instead of stopping the pair."""
    bench_cluster = _bench()
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        first = await cluster.start("a")
        ada = await first.connect("ada")
        created = await ada.request(CreateGame, game="5x5", opponent="human")
        await ada.close()
        assert await first.stop() == 0
        # The game's shard held by the test: no node can own the game meanwhile.
        holder = await asyncpg.connect(
            PG_URL, server_settings={"search_path": pg_schema, "application_name": "noughts test"}
        )
        try:
            key = await holder.fetchval(
                "SELECT hashtext('noughts-shards:' || current_schema()) & 2147483647"
            )
            shard = shard_of(created.game_id)
            await holder.execute("SELECT pg_advisory_lock($1::int, $2::int)", key, shard)
            node = await cluster.start("b")
            await cluster.wait_balanced()
            bench = bench_cluster.Bench(
                schema_url(pg_schema), pg_schema, REDIS_URL, redis_prefix, tmp_path
            )
            bench.nodes.append(bench_cluster.Node(0, node.name, node.process, node.url))
            player = bench_cluster.Player(bench, 0, "x0")
            await player.connect()
            tally = bench_cluster.Tally()
            looking = asyncio.create_task(
                bench_cluster.look_up(player, tally, GetGame, created.game_id)
            )
            give_up = asyncio.get_running_loop().time() + 60
            while tally.unavailable == 0:  # each after forward_timeout_s (5 s)
                assert not looking.done(), looking
                assert asyncio.get_running_loop().time() < give_up, "never unavailable"
                await asyncio.sleep(0.05)
            await holder.execute("SELECT pg_advisory_unlock($1::int, $2::int)", key, shard)
        finally:
            await holder.close()
        record = await asyncio.wait_for(looking, 60)
        assert record.game["id"] == created.game_id and tally.unavailable >= 1
        assert player.connection is not None
        await player.connection.close()
        assert await node.stop() == 0

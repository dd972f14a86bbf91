"""Real cluster nodes for the cluster tests: `noughts serve --db postgresql://...?search_path=
SCHEMA --bus redis://... --bus-prefix PREFIX --node NAME` subprocesses, each on a free port,
with its log in the test's directory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from client.connection import ServerConnection
from server.settings import ServerSettings
from tests.services import PG_URL, REDIS_URL

# A stopping node cuts its drain at --drain-timeout-s; then it closes its bus (in at most
# 2 s), pool and store, and the interpreter ends: the margin is for those, on a slow machine.
STOP_S = ServerSettings().drain_timeout_s + 20


def schema_url(schema: str) -> str:
    separator = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{separator}search_path={schema}"


@dataclass
class Node:
    """A running node: its process, address, name (in pg_stat_activity: ``noughts NAME``)."""

    name: str
    process: asyncio.subprocess.Process
    url: str
    log: Path

    async def connect(self, name: str, **kwargs: Any) -> ServerConnection:
        return await ServerConnection.connect(self.url, name=name, **kwargs)

    def kill(self) -> None:
        """kill -9: no drain, no goodbye; its connections drop with it."""
        self.process.send_signal(signal.SIGKILL)

    async def stop(self) -> int:
        """SIGTERM, and its exit status once its bounded drain is over."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.process.wait(), STOP_S)
        except TimeoutError:
            raise AssertionError(
                f"node {self.name} still running {STOP_S:g} s after SIGTERM:\n"
                + self.log.read_text()[-4000:]
            ) from None


@dataclass
class Cluster:
    """Nodes sharing one schema and one key prefix (the test's own)."""

    schema: str
    prefix: str
    directory: Path
    bus: str = REDIS_URL
    nodes: list[Node] = field(default_factory=list)

    async def start(self, name: str, *args: str) -> Node:
        log = self.directory / f"{name}.log"
        node_name = f"{name}-{self.prefix}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOUGHTS_")}
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "server", "--port", "0", "--workers", "0",
                "--db", schema_url(self.schema), "--bus", self.bus, "--bus-prefix", self.prefix,
                "--node", node_name, "--log-level", "INFO", *args,
                stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env,
            )  # fmt: skip
        assert process.stdout is not None
        try:
            line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        except TimeoutError:
            process.kill()
            raise
        if not line.startswith("noughts server listening on "):
            await process.wait()
            raise AssertionError(f"node {name} did not start: {line!r}\n{log.read_text()}")
        node = Node(node_name, process, line.split()[4], log)
        self.nodes.append(node)
        return node

    async def start_pair(self, *args: str) -> tuple[Node, Node]:
        """Nodes a and b (with ``args``), once each holds shards."""
        a, b = await self.start("a", *args), await self.start("b", *args)
        await self.wait_balanced()
        return a, b

    async def owner_of(self, game_id: str) -> str:
        """The node whose lock holds the game's shard, from PostgreSQL itself."""
        return (await self.lock_holder(game_id))[0]

    async def lock_holder(self, game_id: str) -> tuple[str, int]:
        """The node holding the game's shard, and the pid of its lock connection."""
        from server.shards import shard_of

        conn = await asyncpg.connect(PG_URL, server_settings={"search_path": self.schema})
        try:
            key = await conn.fetchval(
                "SELECT hashtext('noughts-shards:' || current_schema()) & 2147483647"
            )
            row = await conn.fetchrow(
                "SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a "
                "USING (pid) WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted "
                "AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid",
                key,
                shard_of(game_id),
            )
        finally:
            await conn.close()
        assert row is not None, f"no node holds game {game_id}"
        return str(row[0]).split()[1], int(row[1])

    async def wait_owned(self, game_id: str, by: set[str], timeout: float = 15) -> str:
        """Wait until one of ``by`` holds the game's shard; its name."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout
        while True:
            with contextlib.suppress(AssertionError):
                owner = await self.owner_of(game_id)
                if owner in by:
                    return owner
            if loop.time() > give_up:
                raise TimeoutError(f"game {game_id} not taken by {by} in {timeout} s")
            await asyncio.sleep(0.05)

    async def wait_new_holder(self, game_id: str, pid: int, timeout: float = 15) -> str:
        """Wait until a lock connection other than ``pid`` holds the game's shard."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout
        while True:
            with contextlib.suppress(AssertionError):
                name, holder = await self.lock_holder(game_id)
                if holder != pid:
                    return name
            if loop.time() > give_up:
                raise TimeoutError(f"game {game_id}'s shard not taken again in {timeout} s")
            await asyncio.sleep(0.05)

    async def wait_balanced(self, timeout: float = 15, names: set[str] | None = None) -> None:
        """Wait until every running node (or each of ``names``) holds some shards (its fair
        share is coming)."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout
        running = names or {n.name for n in self.nodes if n.process.returncode is None}
        while True:
            conn = await asyncpg.connect(PG_URL, server_settings={"search_path": self.schema})
            try:
                names = await conn.fetch(
                    "SELECT DISTINCT a.application_name FROM pg_locks l JOIN pg_stat_activity a "
                    "USING (pid) WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted "
                    "AND l.classid = (hashtext('noughts-shards:' || current_schema()) "
                    "& 2147483647)::bigint::oid"
                )
            finally:
                await conn.close()
            if running <= {str(r[0]).split()[1] for r in names}:
                return
            if loop.time() > give_up:
                raise TimeoutError(f"not every node of {running} holds shards")
            await asyncio.sleep(0.05)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)


async def create_schema(schema: str) -> None:
    """The test's PostgreSQL schema, made if it is not there yet (its nodes' tables go in it)."""
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def cluster_of(schema: str, prefix: str, directory: Path) -> AsyncIterator[Cluster]:
    await create_schema(schema)
    cluster = Cluster(schema, prefix, directory)
    try:
        yield cluster
    finally:
        for node in cluster.nodes:
            if node.process.returncode is None:
                node.process.kill()
            await node.process.wait()

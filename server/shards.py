"""Game ownership across nodes: shards held by PostgreSQL session advisory locks.

Every game hashes to one of ``SHARDS`` shards (CRC-32 of its id). A node owns a shard
while its dedicated lock connection holds the advisory lock (``key``, shard): a session
lock, so it drops the moment that connection does (the node died, was cut off, or
drains), and another node's ``pg_try_advisory_lock`` then succeeds. The lock is the
only proof of ownership; Redis presence only says where to forward requests. A node
whose lock connection is lost stops owning every shard at once (fencing: at once when
PostgreSQL closes the connection, else at the next claim's query); the primary keys of
moves and events refuse a second writer of the same ply or seq meanwhile. The lock
connection also holds the database's server lock, shared with the other nodes
(``PostgresStore.connect_locked``): one opened while a server alone (no ``--bus``) holds
the database is refused, so such a node claims no shard beside it.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable

import asyncpg

SHARDS = 64
# The first key of every shard lock: this schema's own (two clusters in two schemas of one
# database hold different locks). Non-negative, as pg_locks shows it (classid is an oid).
_KEY = "SELECT hashtext('noughts-shards:' || current_schema()) & 2147483647"
_HELD = (
    "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 "
    "AND granted AND database = (SELECT oid FROM pg_database WHERE datname = "
    "current_database()) AND classid = $1::bigint::oid"
)


def shard_of(game_id: str) -> int:
    return zlib.crc32(game_id.encode()) % SHARDS


class ShardLocks:
    """One node's lock connection and the shards it holds. Any method may raise
    asyncpg/OS errors: the connection is then lost, and with it every shard."""

    def __init__(self, connect: Callable[[], Awaitable[asyncpg.Connection]]) -> None:
        self._connect = connect
        self._conn: asyncpg.Connection | None = None
        self._key = 0
        self.held: set[int] = set()

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def open(self, lost: Callable[[], None] | None = None) -> None:
        """Connect; ``lost`` is called the moment PostgreSQL closes this connection (a
        terminated backend, a restart): its locks are gone, the node must stop serving
        their games now rather than at its next claim (fencing)."""
        conn = await self._connect()

        def closed(_: object) -> None:
            if conn is self._conn and lost is not None:
                lost()

        conn.add_termination_listener(closed)
        self._conn = conn
        self._key = int(await conn.fetchval(_KEY))
        self.held = set()

    async def held_by_anyone(self) -> set[int]:
        """The shards some node holds now (this one included); also proves the
        connection still works."""
        assert self._conn is not None
        rows = await self._conn.fetch(_HELD, self._key, timeout=5)
        return {int(r[0]) for r in rows}

    async def try_claim(self, shard: int) -> bool:
        assert self._conn is not None
        got = bool(
            await self._conn.fetchval(
                "SELECT pg_try_advisory_lock($1::int, $2::int)", self._key, shard, timeout=5
            )
        )
        if got:
            self.held.add(shard)
        return got

    async def release(self, shard: int) -> None:
        assert self._conn is not None
        self.held.discard(shard)
        await self._conn.execute("SELECT pg_advisory_unlock($1::int, $2::int)", self._key, shard)

    async def close(self) -> None:
        """Drop the connection, and every shard with it."""
        self.held = set()
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=2)
            except Exception:
                conn.terminate()

    def abandon(self) -> None:
        """The connection failed: forget it (its locks are gone with it)."""
        self.held = set()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

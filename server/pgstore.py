"""The PostgreSQL store (``noughts serve --db postgresql://...``), through asyncpg.

The same rules as the SQLite store: every write joins the next group commit, a
caller's future resolves only once the transaction holding its write has
committed (a move is durable before it is acknowledged or broadcast), and a
failed batch is retried write by write so that one bad write fails alone. One
dedicated connection writes (its transactions in commit order); a cluster's node
has two, each committing a batch of its own while the other commits (a game's
writes are never in two at once: each is awaited, under the game's lock, before
the next is queued; the rows many batches share, players' sessions, are updated
last and in one order, touches and names bound alike, and a sweep locks those it
deletes in that order first, so that no two transactions deadlock on them); a
small pool reads. A lost connection fails the writes of that transaction with a
clear ``StorageError`` and is replaced at the next one, so the server recovers as
soon as PostgreSQL answers again; so does one that gives no answer within
``timeout_s`` (a PostgreSQL hung, or a network dropping packets, would otherwise hold
the requests waiting on it for ever).

The schema is versioned like SQLite's: ``PG_MIGRATIONS[i]`` upgrades version i to
i+1, the same versions as ``server.store.MIGRATIONS`` (a test holds the two lists
to the same length), recorded in ``noughts_schema``. Nodes starting together
migrate one at a time under an advisory lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import re
from collections.abc import Sequence
from typing import Any

import asyncpg

from server.errors import StorageError
from server.store import NOT_READ, NOT_STORED, UNANSWERED, UNCONFIRMED, SQLStore, _Runs
from server.urls import redacted_url

log = logging.getLogger(__name__)

# Each entry upgrades the schema from version i to i+1, as server.store.MIGRATIONS does for
# SQLite (the same tables and columns in PostgreSQL's types). Never edit one; append.
PG_MIGRATIONS: list[str] = [
    """
    CREATE TABLE games (
        id          TEXT PRIMARY KEY,
        game        TEXT NOT NULL,
        params      TEXT NOT NULL,
        status      TEXT NOT NULL,
        players     TEXT NOT NULL,
        result      TEXT,
        reason      TEXT,
        seq         BIGINT NOT NULL DEFAULT 0,
        created_at  DOUBLE PRECISION NOT NULL,
        started_at  DOUBLE PRECISION,
        ended_at    DOUBLE PRECISION
    );
    CREATE INDEX games_by_status ON games (status, created_at);
    CREATE TABLE moves (
        game_id     TEXT NOT NULL REFERENCES games (id),
        ply         INTEGER NOT NULL,
        seq         BIGINT NOT NULL,
        seat        INTEGER NOT NULL,
        action      INTEGER NOT NULL,
        at          DOUBLE PRECISION NOT NULL,
        algorithm   TEXT,
        budget_ms   DOUBLE PRECISION,
        iterations  BIGINT,
        value       DOUBLE PRECISION,
        pv          TEXT,
        seed        BIGINT,
        elapsed_ms  DOUBLE PRECISION,
        stats       TEXT,
        PRIMARY KEY (game_id, ply)
    );
    CREATE TABLE events (
        game_id     TEXT NOT NULL REFERENCES games (id),
        seq         BIGINT NOT NULL,
        kind        TEXT NOT NULL,
        data        TEXT NOT NULL,
        at          DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (game_id, seq)
    );
    """,
    """
    ALTER TABLE games ADD COLUMN clock TEXT;
    ALTER TABLE games ADD COLUMN tokens TEXT;
    ALTER TABLE games ADD COLUMN private INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE games ADD COLUMN rematch_of TEXT;
    ALTER TABLE moves ADD COLUMN clocks TEXT;
    CREATE TABLE sessions (
        token_sha256 TEXT PRIMARY KEY,
        player_id    TEXT NOT NULL,
        name         TEXT NOT NULL,
        bot          INTEGER NOT NULL,
        created_at   DOUBLE PRECISION NOT NULL
    );
    """,
    """
    ALTER TABLE sessions ADD COLUMN seen_at DOUBLE PRECISION;
    ALTER TABLE sessions ADD COLUMN played INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN named INTEGER NOT NULL DEFAULT 0;
    UPDATE sessions SET seen_at = created_at, played = 1;
    CREATE INDEX sessions_by_seen ON sessions (seen_at);
    CREATE INDEX sessions_by_player ON sessions (player_id);
    CREATE TABLE names (
        key         TEXT PRIMARY KEY,
        player_id   TEXT NOT NULL
    );
    CREATE INDEX names_by_player ON names (player_id);
    """,
    """
    ALTER TABLE games ADD COLUMN seek_id TEXT;
    CREATE UNIQUE INDEX games_by_seek ON games (seek_id);
    """,
]

PG_SCHEMA_VERSION = len(PG_MIGRATIONS)
MIGRATION_LOCK = 0x6E6F7567  # "noug": the advisory lock nodes migrate under
# The database's server lock (keyed with the schema): a server alone holds it exclusively,
# so that a second one is refused, as for SQLite; a cluster's nodes (--bus) each hold it
# shared, and own games by shard locks among themselves (server/shards.py). Either kind
# refuses the other: a server alone beside nodes would restore and write their games.
SERVER_LOCK = 0x6E6F7568
_TRY_LOCK = {
    False: "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))",
    True: "SELECT pg_try_advisory_lock_shared($1, hashtext(current_schema()))",
}


def is_postgres_url(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def check_url(url: str) -> None:
    """ValueError, asyncpg's own, if asyncpg cannot connect by ``url`` as written (a port
    that is not a number, an unknown sslmode, a query field without a value): read by the
    parser asyncpg.connect reads it with, connecting nowhere, so that a bad --db is a usage
    error rather than a traceback from asyncpg. A file the URL names that is missing is left
    to connecting, which reports it (StorageError)."""
    from asyncpg import connect_utils

    parse = connect_utils._parse_connect_dsn_and_args
    # Its other arguments (connect's keywords) vary between asyncpg versions: all unset.
    unset = dict.fromkeys(inspect.signature(parse).parameters)
    try:
        parse(**{**unset, "dsn": url})
    except OSError:
        return


@functools.lru_cache(maxsize=256)
def _dollar(sql: str) -> str:
    """The shared statements' ``?`` placeholders as PostgreSQL's ``$1, $2, ...`` (they hold
    no ``?`` inside literals)."""
    counter = iter(range(1, 1000))
    return re.sub(r"\?", lambda _: f"${next(counter)}", sql)


# InternalClientError: asyncpg's own state machine refused an operation ("cannot switch to
# state N; another operation is in progress"), seen when the server cut a connection in the
# middle of a pipelined executemany: that connection is unusable and is dropped.
_DB_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)


class PostgresStore(SQLStore):
    """Games in PostgreSQL: one writer connection doing group commit, a pool for reads."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        max_batch: int = 1024,
        node: str | None = None,
        shared: bool | None = None,
        timeout_s: float | None = None,
    ) -> None:
        # A cluster's node commits on two connections at once (SQLStore.writers): a move
        # waits for its own commit, not also for the one in progress (issue 13: at 1,000
        # moves/s that wait was 1.4 ms of a forwarded move's 6 ms, p50). One server alone
        # keeps one writer: its connection holds the one-server lock, which fences it.
        super().__init__(max_batch=max_batch, writers=1 if node is None else 2)
        self.dsn = dsn
        self.schema = schema  # a search_path of its own (tests: one schema per test)
        # A cluster's node (--bus): its name in application_name, and the server lock shared.
        self.node = node
        # The server lock held shared (beside a cluster's nodes; noughts migrate too, as a
        # node starting would migrate), not alone: by default, a node's.
        self.shared = node is not None if shared is None else shared
        # How long a connection, a read or a commit may wait for PostgreSQL's answer: the
        # server's settings.db_timeout_s; None, as long as it takes (asyncpg's own 60 s to
        # connect): a migration, the tests' stores.
        self.timeout_s = timeout_s
        self._pool: asyncpg.Pool | None = None
        self._writer_conn: asyncpg.Connection | None = None
        self._more_conns: list[asyncpg.Connection | None] = [None] * (self.writers - 1)

    def describe(self) -> str:
        """The URL without its password, for messages."""
        return redacted_url(self.dsn)

    def _server_settings(self) -> dict[str, str]:
        """What each connection sets: its name in pg_stat_activity (``noughts``, with the
        schema when it has one of its own), and that schema as its search_path."""
        name = "noughts" if self.node is None else f"noughts {self.node}"
        if self.schema is None:
            return {"application_name": name}
        return {"application_name": f"{name} {self.schema}", "search_path": self.schema}

    async def connect(self) -> asyncpg.Connection:
        """A connection of this store's own (its name, its schema)."""
        return await asyncpg.connect(
            self.dsn, server_settings=self._server_settings(), timeout=self.timeout_s
        )

    async def connect_locked(self) -> asyncpg.Connection:
        """A connection holding the server lock of the schema it uses (the one it resolves,
        whether set here or by the URL's ``search_path``), shared or alone: the writer's,
        and a cluster node's shard-lock connection (its shards then fenced by it too).
        StorageError, in one line saying which kind of server holds it, if refused."""
        conn = await self.connect()
        try:
            if await conn.fetchval(_TRY_LOCK[self.shared], SERVER_LOCK, timeout=self.timeout_s):
                return conn
            # Refused: shared holders let a shared request in, a server alone does not.
            nodes = not self.shared and await conn.fetchval(
                _TRY_LOCK[True], SERVER_LOCK, timeout=self.timeout_s
            )
            await conn.close()
        except BaseException:
            conn.terminate()
            raise
        holder = (
            "a noughts cluster's nodes (--bus) or noughts migrate are using"
            if nodes
            else "a noughts server alone (no --bus) is using"
        )
        advice = (
            "stop it first"  # (noughts migrate: a server alone migrates nothing beside it)
            if self.node is None and self.shared
            else "several servers on one database must be the nodes of one cluster (--bus)"
        )
        raise StorageError(f"{holder} {self.describe()}: {advice}")

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                # No floor: asyncpg (0.32) reconnects a pool's floor connections in the
                # background, logging a warning with a traceback at every attempt while
                # PostgreSQL is down. A lost connection is replaced by the next read instead
                # (its failure is the store's one line, _failure); the migration below
                # opens the first, and idle ones close after asyncpg's 300 s.
                min_size=0,
                max_size=4,
                server_settings=self._server_settings(),
                timeout=self.timeout_s,  # (each connection's: asyncpg's own is 60 s)
            )
            if self.schema is not None:
                await self._pool.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            # The server lock before the migration: no schema change under a running server
            # (one on the old schema would write rows the migration did not see).
            self._writer_conn = await self.connect_locked()
            await self.migrate()
            for index in range(len(self._more_conns)):
                self._more_conns[index] = await self.connect()
        except StorageError:
            await self._close_connections()
            raise
        except (*_DB_ERRORS, TimeoutError) as exc:
            await self._close_connections()
            reason = self._no_answer() if isinstance(exc, TimeoutError) else str(exc)
            raise StorageError(f"cannot open database {self.describe()}: {reason}") from exc
        self._start_writer("pg-store-writer")

    async def migrate(self) -> int:
        """Bring the schema to PG_SCHEMA_VERSION; returns the version found before."""
        assert self._pool is not None
        async with self._pool.acquire() as conn:
            await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
            try:
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS noughts_schema (version INTEGER NOT NULL)"
                )
                version = await conn.fetchval("SELECT max(version) FROM noughts_schema") or 0
                self.schema_found = int(version)
                if version > PG_SCHEMA_VERSION:
                    raise StorageError(
                        f"database {self.describe()} has schema {version}, newer than this "
                        f"server's {PG_SCHEMA_VERSION}: upgrade noughts"
                    )
                for target in range(version + 1, PG_SCHEMA_VERSION + 1):
                    async with conn.transaction():
                        await conn.execute(PG_MIGRATIONS[target - 1])
                        await conn.execute(
                            "INSERT INTO noughts_schema (version) VALUES ($1)", target
                        )
                    log.info("database %s migrated to schema %d", self.describe(), target)
                return int(version)
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)

    async def close(self) -> None:
        await self._stop_writer()
        await self._close_connections()

    async def _close_connections(self) -> None:
        """Close every connection, politely (PostgreSQL told) within timeout_s, else cut
        (asyncpg cuts one whose close fails): a PostgreSQL that no longer answers must
        not hold a stopping server."""
        conns = [self._writer_conn, *self._more_conns]
        self._writer_conn = None
        self._more_conns = [None] * len(self._more_conns)
        for conn in conns:
            if conn is not None:
                with contextlib.suppress(*_DB_ERRORS, TimeoutError):
                    await conn.close(timeout=self.timeout_s)
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                async with asyncio.timeout(self.timeout_s):
                    await pool.close()
            except (*_DB_ERRORS, TimeoutError):
                pool.terminate()

    # --- group commit ------------------------------------------------------------

    _INSERT_MOVE_RAISING = f"WITH m AS ({SQLStore._INSERT_MOVE}) {SQLStore._SET_SEQ}"
    _INSERT_EVENT_RAISING = f"WITH e AS ({SQLStore._INSERT_EVENT}) {SQLStore._SET_SEQ}"
    # A sweep locks the sessions it expires by player before it deletes them: the deletes
    # alone lock them in the order of the table's scan, and met another node's touches of
    # the same players in the other order (a deadlock; PostgreSQL failed the touches). A row
    # touched meanwhile no longer matches (seen_at only grows), so the deletes that follow
    # in the transaction find exactly the rows locked here.
    _LOCK_EXPIRED = (
        f"SELECT 1 FROM sessions WHERE {SQLStore._EXPIRED}"
        " ORDER BY player_id, token_sha256 FOR UPDATE"
    )

    def _batch_lost(self, exc: Exception) -> bool:
        # A lost connection fails the whole transaction's writes, not one of them.
        return isinstance(exc, _Lost)

    def _second_of_seek(self, exc: Exception) -> bool:
        return (
            isinstance(exc, asyncpg.UniqueViolationError) and exc.constraint_name == "games_by_seek"
        )

    def _write_error(self, exc: Exception) -> StorageError:
        if isinstance(exc, _Lost):
            public = UNCONFIRMED if exc.sent else UNANSWERED
            return self._failure("write", public, self._cause(exc.cause), down=True)
        return self._failure("write", NOT_STORED, self._cause(exc))

    def _no_answer(self) -> str:
        within = "" if self.timeout_s is None else f" within {self.timeout_s:g} s"
        return f"PostgreSQL gave no answer{within}"

    def _cause(self, exc: BaseException) -> str:
        """What made an operation fail, for the log (a TimeoutError says nothing)."""
        if isinstance(exc, TimeoutError):
            return self._no_answer()
        if isinstance(exc, StorageError):
            return exc.detail
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

    async def _commit(self, runs: _Runs, writer: int = 0) -> None:
        conn: asyncpg.Connection | None = None
        try:
            async with asyncio.timeout(self.timeout_s):
                conn = await self._writer_connection(writer)
                if len(runs) == 1:
                    # One statement (a batch of moves, say): executemany is one transaction
                    # of its own (asyncpg: all rows or none), committed in one round trip
                    # where BEGIN and COMMIT would add two.
                    sql, rows = runs[0]
                    await conn.executemany(_dollar(sql), rows)
                    return
                async with conn.transaction():
                    for sql, rows in runs:
                        await conn.executemany(_dollar(sql), rows)
        except _CONNECTION_LOST as exc:  # (a timeout too: TimeoutError is an OSError)
            if conn is not None:
                conn.terminate()  # lost, or in a state no close handshake can leave
                if writer:
                    self._more_conns[writer - 1] = None
                else:
                    self._writer_conn = None
            # Once the transaction went out on a connection, lost or unanswered, PostgreSQL
            # may have committed it: nobody knows (a connection never made sent nothing).
            raise _Lost(exc, sent=conn is not None) from exc

    async def _writer_connection(self, writer: int) -> asyncpg.Connection:
        """Writer ``writer``'s connection, a new one if the last was lost."""
        if writer:
            conn = self._more_conns[writer - 1]
            if conn is None or conn.is_closed():
                conn = self._more_conns[writer - 1] = await self.connect()
            return conn
        if self._writer_conn is None or self._writer_conn.is_closed():
            self._writer_conn = await self.connect_locked()
        return self._writer_conn

    # --- reads ---------------------------------------------------------------------

    async def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]:
        if self._pool is None:
            raise StorageError("the store is not open")
        try:
            async with asyncio.timeout(self.timeout_s), self._pool.acquire() as conn:
                try:
                    rows: list[Sequence[Any]] = [
                        tuple(r) for r in await conn.fetch(_dollar(sql), *params)
                    ]
                except (*_CONNECTION_LOST, asyncio.CancelledError):
                    conn.terminate()  # the next read opens a new one in its place
                    raise
        except _DB_ERRORS as exc:  # (a timeout too: TimeoutError is an OSError)
            down = isinstance(exc, _CONNECTION_LOST)
            public = UNANSWERED if down else NOT_READ
            raise self._failure("read", public, self._cause(exc), down=down) from exc
        self._works()
        return rows


class _Lost(Exception):
    """A writer's connection was lost, or gave no answer in time (``cause``): the whole
    transaction failed, and once it went out on the connection (``sent``) its outcome is
    unknown (PostgreSQL may have committed it, or commit it when it wakes)."""

    def __init__(self, cause: BaseException, *, sent: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.sent = sent


_CONNECTION_LOST = (
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.CannotConnectNowError,
    ConnectionError,
    OSError,
)

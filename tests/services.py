"""The services the cluster tests use: the machine's PostgreSQL (``$NOUGHTS_TEST_PG``, default
the local ``test`` database), a fresh schema per test, dropped afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest

PG_URL = os.environ.get("NOUGHTS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
PG_INSTALL = "Debian: apt-get install postgresql, or point NOUGHTS_TEST_PG at one"
INSTALL_HINT = (
    "PostgreSQL is not reachable at $NOUGHTS_TEST_PG ({url}): install and start it "
    f"({PG_INSTALL})"
)


async def _reachable() -> str | None:
    import asyncpg

    try:
        conn = await asyncpg.connect(PG_URL, timeout=3)
    except Exception as exc:  # any failure means: these tests cannot run here
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


async def require_postgres() -> None:
    """Skip the test, saying how to install PostgreSQL, where it does not answer."""
    why = await _reachable()
    if why is not None:
        pytest.skip(INSTALL_HINT.format(url=PG_URL) + f" ({why})")


@pytest.fixture
async def pg_schema() -> AsyncIterator[str]:
    """A new, empty schema in the test database; dropped after the test."""
    import asyncpg

    await require_postgres()
    schema = "t_" + secrets.token_hex(6)
    yield schema
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


class PostgresLink:
    """A TCP relay between a store and the test PostgreSQL (``url`` reaches it through
    the relay), which a test breaks as PostgreSQL fails: ``cut`` resets every connection
    and refuses new ones (PostgreSQL stopped), ``stall`` accepts connections and relays
    nothing (PostgreSQL hung, SIGSTOP), ``hold_answers`` relays what the store sends but
    none of PostgreSQL's answers (a commit done, its answer not back yet); ``restore``
    ends any of them. With ``target`` (host, port) it relays to that instead (a noughts
    server: its answers held, then the connection cut, a reply lost with it)."""

    def __init__(self, target: tuple[str, int] | None = None) -> None:
        parts = urlsplit(PG_URL)
        self._target = target or (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._parts = parts
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._relays: set[asyncio.Task[None]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._answering = asyncio.Event()  # PostgreSQL's side: held by hold_answers
        self._answering.set()

    @property
    def url(self) -> str:
        user = self._parts.netloc.rpartition("@")[0]
        netloc = f"{user}@127.0.0.1:{self.port}" if user else f"127.0.0.1:{self.port}"
        return urlunsplit(self._parts._replace(netloc=netloc))

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        relay = asyncio.current_task()
        assert relay is not None
        self._relays.add(relay)
        relay.add_done_callback(self._relays.discard)
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)

        async def pipe(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, *gates: asyncio.Event
        ) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    for gate in gates:
                        await gate.wait()
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        try:
            await asyncio.gather(
                pipe(reader, up_writer, self._flowing),
                pipe(up_reader, writer, self._flowing, self._answering),
            )
        finally:
            self._writers.discard(writer)
            self._writers.discard(up_writer)

    def stall(self) -> None:
        self._flowing.clear()

    def hold_answers(self) -> None:
        self._answering.clear()

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()

    async def restore(self) -> None:
        self._flowing.set()
        self._answering.set()
        if self._server is None:
            await self.open()  # on the same port

    async def close(self) -> None:
        await self.cut()
        self._flowing.set()  # what a stall held goes to the connections cut: they end
        self._answering.set()
        await asyncio.gather(*self._relays, return_exceptions=True)


@pytest.fixture
async def pg_link() -> AsyncIterator[PostgresLink]:
    """A relay to the test PostgreSQL, to cut or stall (PostgresLink)."""
    await require_postgres()
    link = PostgresLink()
    await link.open()
    yield link
    await link.close()


REDIS_URL = os.environ.get("NOUGHTS_TEST_REDIS", "redis://127.0.0.1:6379/0")
REDIS_INSTALL = "Debian: apt-get install redis-server, or point NOUGHTS_TEST_REDIS at one"
REDIS_HINT = (
    "Redis is not reachable at $NOUGHTS_TEST_REDIS ({url}): install and start it "
    f"({REDIS_INSTALL})"
)
REDIS_SERVER_HINT = "redis-server is not installed (Debian: apt-get install redis-server)"

# The services a test may skip for, each with the text its skip reason carries: the run's
# summary counts the tests each one kept from running (tests/conftest.py).
MISSING = {
    "PostgreSQL": PG_INSTALL,
    "Redis": REDIS_INSTALL,
    "the redis-server binary": REDIS_SERVER_HINT,
}


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A key prefix of this test's own in the test Redis; its keys are deleted afterwards."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:  # any failure means: these tests cannot run here
        await client.aclose()
        pytest.skip(REDIS_HINT.format(url=REDIS_URL) + f" ({type(exc).__name__}: {exc})")
    prefix = "t" + secrets.token_hex(6)
    yield prefix
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
    if keys:
        await client.delete(*keys)
    await client.aclose()

"""The services the cluster tests use: the machine's PostgreSQL (``$NOUGHTS_TEST_PG``, default
the local ``test`` database), a fresh schema per test, dropped afterwards."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator

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

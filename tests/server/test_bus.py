"""The bus's own RESP framing of PUBLISH (server/bus.py ``pack_publish``) is byte for byte
what redis-py sends for the same command."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection

from server.bus import pack_publish


@given(channel=st.text(min_size=1, max_size=80), data=st.binary(max_size=2000))
def test_pack_publish_is_redis_pys_framing(channel: str, data: bytes) -> None:
    expected = b"".join(Connection().pack_command("PUBLISH", channel, data))
    assert pack_publish(channel, data) == expected

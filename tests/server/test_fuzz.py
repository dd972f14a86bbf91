"""Garbage against a live server (hypothesis): random bytes and text, msgpack of the wrong
types and shapes, unknown message types, illegal, stale and out-of-turn moves, other
seats' tokens. Every case gets a documented error (or its valid reply), the connection
keeps working, the server stays up, the game under attack is unaffected and nothing of
it is stored."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from protocol import (
    CLIENT_TYPES,
    PROTOCOL_VERSION,
    CreateGame,
    Error,
    ErrorCode,
    Hello,
    JoinGame,
    Message,
    Move,
    Ping,
    Pong,
    Seated,
    decode_server,
    encode,
)
from server.app import GameServer, running
from server.settings import ServerSettings
from server.store import SQLiteStore

CODES = {code.value for code in ErrorCode} - {ErrorCode.INTERNAL.value}


@dataclass
class Target:
    """A server running in a thread, with a live game between two seats to attack."""

    url: str
    db: Path
    game_id: str
    tokens: tuple[str, str]
    moves: int


def _serve(ready: list[Any], stop: threading.Event, db: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(db)
        await store.open()
        # No rate limit to speak of: the fuzzer sends fast on purpose.
        game_server = GameServer(
            store,
            None,
            settings=ServerSettings(rate_per_s=1e6, burst=10**6, new_sessions_burst_per_ip=10**6),
        )
        async with running(game_server) as server:
            ready.append(next(iter(server.sockets)).getsockname()[1])
            while not stop.is_set():
                await asyncio.sleep(0.05)
        await store.close()

    asyncio.run(main())


def _request(ws: ClientConnection, message: Message) -> Message:
    ws.send(encode(message))
    while True:
        reply = decode_server(ws.recv(timeout=10))
        if getattr(reply, "rid", None) == getattr(message, "rid", None):
            return reply


@contextlib.contextmanager
def _hello(url: str, name: str) -> Iterator[ClientConnection]:
    with connect(url, compression=None, max_size=None) as ws:
        _request(ws, Hello(rid=0, version=PROTOCOL_VERSION, name=name))
        yield ws


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    db = tmp_path_factory.mktemp("fuzz") / "games.db"
    ready: list[Any] = []
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(ready, stop, db), daemon=True)
    thread.start()
    while not ready:
        thread.join(0.05)
        assert thread.is_alive(), "the server thread died"
    url = f"ws://127.0.0.1:{ready[0]}"
    with _hello(url, "ada") as ada, _hello(url, "bo") as bo:
        created = _request(ada, CreateGame(rid=1, game="tictactoe", opponent="human", seat=0))
        assert isinstance(created, Seated)
        joined = _request(bo, JoinGame(rid=1, game_id=created.game_id))
        assert isinstance(joined, Seated)
        _request(ada, Move(rid=2, game_id=created.game_id, token=created.token, action=4))
        yield Target(url, db, created.game_id, (created.token, joined.token), moves=1)
    stop.set()
    thread.join(10)


def _json_like() -> st.SearchStrategy[Any]:
    # msgpack packs integers from -2**63 to 2**64 - 1.
    integers = st.integers(-(2**63), 2**64 - 1)
    scalars = st.none() | st.booleans() | integers | st.floats() | st.text(max_size=20)
    scalars = scalars | st.binary(max_size=20)
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )


def _shaped(type_name: str) -> st.SearchStrategy[dict[str, Any]]:
    """A map with a real message type and fields of random (mostly wrong) types."""
    fields = st.dictionaries(
        st.sampled_from(["rid", "game_id", "token", "action", "ply", "game", "params", "seat",
                         "since", "seek_id", "answer", "clock", "to", "x"]),
        _json_like(),
        max_size=6,
    )  # fmt: skip
    return fields.map(lambda d: {"type": type_name, **d})


def frames(target_game: str, tokens: tuple[str, str]) -> st.SearchStrategy[bytes | str]:
    raw = st.binary(max_size=200)
    text = st.text(max_size=100)
    any_msgpack = _json_like().map(lambda v: msgpack.packb(v, use_bin_type=True))
    shaped = st.sampled_from(sorted(CLIENT_TYPES)).flatmap(_shaped).map(msgpack.packb)
    unknown = st.text(min_size=1, max_size=10).map(lambda t: msgpack.packb({"type": t, "rid": 1}))
    # Well-formed moves that must all be refused: wrong seat's token (the other player's,
    # from this connection), random tokens, any action, stale plies, other games.
    moves = st.builds(
        lambda game, token, action, ply: encode(
            Move(rid=7, game_id=game, token=token, action=action, ply=ply)
        ),
        st.sampled_from([target_game, "nosuchgm"]),
        st.sampled_from([*tokens, "x" * 32]) | st.text(max_size=64),
        st.integers(0, 100_000),
        st.none() | st.integers(0, 100_000),
    )
    return raw | text | any_msgpack | shaped | unknown | moves


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_garbage_gets_documented_errors_and_changes_nothing(
    target: Target, data: st.DataObject
) -> None:
    batch = data.draw(st.lists(frames(target.game_id, target.tokens), min_size=1, max_size=5))
    with _hello(target.url, "anonymous") as ws:  # a guest name: each example a new player
        _attack(ws, batch)
    db = sqlite3.connect(target.db)
    try:
        moves = db.execute("SELECT COUNT(*) FROM moves WHERE game_id = ?", (target.game_id,))
        assert moves.fetchone()[0] == target.moves
    finally:
        db.close()


def _attack(ws: ClientConnection, batch: list[bytes | str]) -> None:
    try:
        for frame in batch:
            ws.send(frame)
        # Every frame got an answer in order; a ping after them proves the connection lives.
        ws.send(encode(Ping(rid=999_999)))
        while True:
            reply = decode_server(ws.recv(timeout=10))
            if isinstance(reply, Error):
                assert reply.code in CODES, reply
                assert reply.message
            if isinstance(reply, Pong) and reply.rid == 999_999:
                break
    except ConnectionClosed as closed:
        # Only a documented close: a frame above 64 KiB (1009) cannot come from this strategy.
        raise AssertionError(f"the server closed a fuzzing connection: {closed}") from closed

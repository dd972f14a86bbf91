"""Faults contained: an engine worker killed mid-search, a client stalled in the middle of a
frame, a client that stops reading, a client opening connection after connection. In each
case the others keep playing."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import websockets

import engine
from client.connection import ServerConnection
from protocol import (
    PROTOCOL_VERSION,
    CreateGame,
    GetGame,
    Hello,
    Move,
    Moved,
    Ping,
    Pong,
    encode,
)
from server.app import GameServer, running
from server.pool import EnginePool
from server.settings import ServerSettings
from server.store import SQLiteStore
from tests.server.conftest import RunningServer, human_game, next_event


async def _start(tmp_path: Path, pool: EnginePool | None, settings: ServerSettings):  # type: ignore[no-untyped-def]
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    game_server = GameServer(store, pool, settings=settings)
    return store, game_server


@pytest.fixture
async def own_pool() -> AsyncIterator[EnginePool]:
    """A pool of this test's own: its workers get killed."""
    pool = EnginePool(2)
    await pool.start_async()
    yield pool
    pool.close()


async def test_a_worker_killed_mid_search_is_replaced_and_the_move_arrives(
    tmp_path: Path, own_pool: EnginePool
) -> None:
    store, game_server = await _start(tmp_path, own_pool, ServerSettings())
    async with running(game_server) as ws:
        url = f"ws://127.0.0.1:{next(iter(ws.sockets)).getsockname()[1]}"
        server = RunningServer(url, game_server, tmp_path / "games.db")
        ada = await server.connect("amy")
        # The AI opens a ultimate tic-tac-toe game with 1.5 s to think ...
        await ada.request(
            CreateGame, game="uttt", opponent="ai", seat=1, algorithm="mcts", budget_ms=1500
        )
        busy: list[int] = []
        while not busy:
            await asyncio.sleep(0.05)
            busy = own_pool.busy_pids()
        pid = busy[0]
        # ... and its worker dies mid-search, while two humans play on elsewhere.
        os.kill(pid, signal.SIGKILL)
        bo, cy, b, c = await human_game(server, game="tictactoe")
        for client, action in ((bo, 4), (cy, 0), (bo, 8)):
            await client.request(
                __import__("protocol").Move,
                game_id=b.game_id,
                token=client.token_for(b.game_id),
                action=action,
            )
        moved = await next_event(ada, Moved, timeout=60)
        assert moved.seat == 0 and moved.stats is not None
        # The search ran again on the first free worker; the dead one's slot comes back.
        for _ in range(600):
            if own_pool.replaced == 1:
                break
            await asyncio.sleep(0.1)
        assert own_pool.replaced == 1 and pid not in own_pool.pids
        rows = server.query("SELECT COUNT(*) FROM moves WHERE game_id = ?", b.game_id)
        assert rows[0][0] == 3
    await store.close()


@pytest.fixture
def settings() -> ServerSettings:
    return ServerSettings(
        max_connections_per_ip=20, send_buffer=64 * 1024, rate_per_s=1000.0, burst=1000
    )


@pytest.fixture
async def keepalive_server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    """A server pinging every 0.5 s, with 0.5 s for the answer and 1 s to close."""
    settings = ServerSettings(ping_interval_s=0.5, ping_timeout_s=0.5, close_timeout_s=1.0)
    store, game_server = await _start(tmp_path, None, settings)
    async with running(game_server) as ws:
        url = f"ws://127.0.0.1:{next(iter(ws.sockets)).getsockname()[1]}"
        yield RunningServer(url, game_server, tmp_path / "games.db")
    await store.close()


async def test_a_client_stalled_in_the_middle_of_a_frame_is_closed(
    keepalive_server: RunningServer,
) -> None:
    server = keepalive_server
    stalled = await websockets.connect(server.url, compression=None)
    await stalled.send(encode(Hello(rid=0, version=PROTOCOL_VERSION, name="staller")))
    await stalled.recv()
    # A binary frame header announcing 4,096 masked bytes, then ten of them, then nothing;
    # the client does not read either, so it never answers the server's keepalive pings.
    stalled.transport.write(b"\x82\xfe\x10\x00" + b"\x00" * 4 + b"\x00" * 10)
    stalled.transport.pause_reading()
    assert len(server.game_server.connections) == 1
    ada, bo, a, b = await human_game(server, game="tictactoe")
    from protocol import Move

    await ada.request(Move, game_id=a.game_id, token=a.token, action=4)
    for _ in range(100):  # keepalive: a ping every 0.5 s, 0.5 s to answer it
        if len(server.game_server.connections) == 2:
            break
        await asyncio.sleep(0.1)
    assert len(server.game_server.connections) == 2  # ada and bo; the staller is gone
    await bo.request(Move, game_id=a.game_id, token=b.token, action=0)
    stalled.transport.abort()
    await stalled.wait_closed()


async def test_a_client_that_stops_reading_is_dropped_alone(server: RunningServer) -> None:
    ada = await server.connect("ada")
    seated = await ada.request(
        CreateGame, game="mnk", params={"m": 19, "n": 19, "k": 19}, opponent="ai", seat=1,
        algorithm="random", budget_ms=1,
    )  # fmt: skip
    # A long game makes a large record (tens of KB): the frames that will pile up. The
    # human plays at random too: no line of 19 in a 19x19 board will come of it.
    rng = random.Random(7)
    state = engine.make_game("mnk", m=19, n=19, k=19).new_initial_state()
    while state.ply() < 300:
        moved = await next_event(ada, Moved)
        state.apply_action(moved.action)
        if state.current_player() == 1:
            action = rng.choice(state.legal_actions())
            await ada.request(Move, game_id=seated.game_id, token=seated.token, action=action)
    # A client with a tiny receive buffer asks for the record again and again and reads
    # nothing: the kernel's buffers fill, then the server's send buffer (64 KiB here).
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    raw.setblocking(False)
    port = int(server.url.rsplit(":", 1)[1])
    await asyncio.get_running_loop().sock_connect(raw, ("127.0.0.1", port))
    slow = await websockets.connect(
        server.url, sock=raw, compression=None, max_size=None, ping_interval=None
    )
    await slow.send(encode(Hello(rid=0, version=PROTOCOL_VERSION, name="slow")))
    await slow.recv()
    slow.transport.pause_reading()
    bystander = await server.connect("bystander")

    def slow_is_connected() -> bool:
        return any(
            c.player is not None and c.player.name == "slow" and not c.closed
            for c in server.game_server.connections
        )

    for rid in range(1, 1000):
        await slow.send(encode(GetGame(rid=rid, game_id=seated.game_id)))
        if rid % 5 == 0:
            await asyncio.sleep(0.05)
            assert isinstance(await bystander.request(Ping), Pong)  # others are served
            if not slow_is_connected():
                break
    assert not slow_is_connected()
    # Now read: a larger buffer opens the window, so the backlog drains fast.
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    slow.transport.resume_reading()
    with pytest.raises(websockets.ConnectionClosed) as closed:
        while True:
            await asyncio.wait_for(slow.recv(), 30)
    assert closed.value.rcvd is not None, closed.value
    assert closed.value.rcvd.code == 4008 and "send queue full" in closed.value.rcvd.reason
    assert isinstance(await bystander.request(Ping), Pong)
    await slow.wait_closed()


async def test_connections_over_the_cap_are_refused_with_the_reason(
    server: RunningServer,
) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    crowd = [await websockets.connect(server.url, compression=None) for _ in range(18)]
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(server.url, compression=None)
    assert refused.value.response.status_code == 503
    assert (
        b"too_many" in refused.value.response.body
        and b"20 connections" in refused.value.response.body
    )
    # Everyone admitted is still served; closing some makes room again.
    from protocol import Move

    await ada.request(Move, game_id=a.game_id, token=a.token, action=4)
    for websocket in crowd[:5]:
        await websocket.close()
    await asyncio.sleep(0.1)
    late = await ServerConnection.connect(server.url, name="late")
    assert isinstance(await late.request(Ping), Pong)
    for websocket in crowd[5:]:
        await websocket.close()


async def test_a_stopping_server_tells_clients_to_reconnect(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    try:
        async with running(GameServer(store, None)) as ws_server:
            port = next(iter(ws_server.sockets)).getsockname()[1]
            client = await websockets.connect(f"ws://127.0.0.1:{port}")
            await client.send(encode(Hello(rid=1, version=PROTOCOL_VERSION, name="ada")))
            await client.recv()
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await client.recv()
        assert closed.value.rcvd is not None
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (
            1012, "server restarting: reconnect",
        )  # fmt: skip
    finally:
        await store.close()

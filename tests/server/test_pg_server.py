"""A real server on PostgreSQL: a game against the AI to its end, every move stored before it
is acknowledged, and a live game restored by the next server on the same database."""

from __future__ import annotations

import asyncpg

from client.connection import ServerConnection
from protocol import CreateGame, Ended, JoinGame, Move, Moved, Resume, Resumed
from server.app import GameServer, running
from server.pgstore import PostgresStore
from server.pool import EnginePool
from tests.server.conftest import next_event
from tests.services import PG_URL


async def _count(schema: str, sql: str, *params: object) -> int:
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": schema})
    try:
        return int(await conn.fetchval(sql, *params))
    finally:
        await conn.close()


async def test_a_game_on_postgresql_is_stored_and_restored(
    pg_schema: str, pool: EnginePool
) -> None:
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    async with running(GameServer(store, pool)) as ws_server:
        url = f"ws://127.0.0.1:{next(iter(ws_server.sockets)).getsockname()[1]}"
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        # Against the AI: its move is committed before anyone hears of it.
        vs_ai = await ada.request(
            CreateGame, game="tictactoe", opponent="ai", seat=1, algorithm="alphabeta",
            budget_ms=5,
        )  # fmt: skip
        ai_move = await next_event(ada, Moved)
        assert ai_move.game_id == vs_ai.game_id
        stored = "SELECT count(*) FROM moves WHERE game_id = $1 AND ply = $2"
        assert await _count(pg_schema, stored, vs_ai.game_id, 0) == 1
        # Two humans to the end: each move acknowledged only once committed.
        won = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        seat_b = await bo.request(JoinGame, game_id=won.game_id)
        for client, token, action in [
            (ada, won.token, 0), (bo, seat_b.token, 3), (ada, won.token, 1),
            (bo, seat_b.token, 4), (ada, won.token, 2),
        ]:  # fmt: skip
            moved = await client.request(Move, game_id=won.game_id, token=token, action=action)
            assert await _count(pg_schema, stored, won.game_id, moved.ply) == 1
        ended = await next_event(bo, Ended)
        assert ended.result == "1-0"
        open_game = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
        await bo.request(JoinGame, game_id=open_game.game_id)
        await ada.request(Move, game_id=open_game.game_id, token=open_game.token, action=12)
        session = ada.session
        await ada.close()
        await bo.close()
    await store.close()
    assert await _count(pg_schema, "SELECT count(*) FROM games WHERE status = 'finished'") == 1

    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    async with running(GameServer(store, pool)) as ws_server:
        url = f"ws://127.0.0.1:{next(iter(ws_server.sockets)).getsockname()[1]}"
        ada = await ServerConnection.connect(url, name="ada", session=session)
        resumed = await ada.request(Resume, game_id=open_game.game_id, since=0)
        assert isinstance(resumed, Resumed) and resumed.seat == 0
        assert resumed.seq >= 2  # the start and the move
        await ada.close()
    await store.close()

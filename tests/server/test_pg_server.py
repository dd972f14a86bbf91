"""A real server on PostgreSQL: a game against the AI to its end, every move stored before it
is acknowledged, a live game restored by the next server on the same database, and games
that go on by themselves after PostgreSQL went away and came back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from client.connection import RequestFailed, ServerConnection
from protocol import (
    Claim,
    CreateGame,
    Ended,
    GetGame,
    JoinGame,
    ListGames,
    Move,
    Moved,
    Ping,
    Presence,
    Resign,
    Resume,
    Resumed,
    Snapshot,
)
from server.app import GameServer, running
from server.hub import UNFINISHED
from server.pgstore import PostgresStore
from server.pool import EnginePool
from server.settings import ServerSettings
from tests.server.conftest import next_event, next_event_where
from tests.services import PG_URL, PostgresLink


async def _count(schema: str, sql: str, *params: object) -> int:
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": schema})
    try:
        return int(await conn.fetchval(sql, *params))
    finally:
        await conn.close()


async def _moves_stored(schema: str, game_id: str) -> int:
    return await _count(schema, "SELECT count(*) FROM moves WHERE game_id = $1", game_id)


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


@contextlib.asynccontextmanager
async def _serving_through(
    link: PostgresLink,
    schema: str,
    pool: EnginePool,
    timeout_s: float = 10.0,
    monotonic: Callable[[], float] = time.monotonic,
) -> AsyncIterator[str]:
    """A real server whose store reaches PostgreSQL through ``link`` (and waits for it
    ``timeout_s``); yields its URL. A failed write's timers try again after 0.05 s.
    ``monotonic``: the server's clock for durations (a test's own, to move by hand)."""
    store = PostgresStore(link.url, schema=schema, timeout_s=timeout_s)
    await store.open()
    settings = ServerSettings(storage_retry_s=0.05)
    game_server = GameServer(store, pool, settings=settings, monotonic=monotonic)
    try:
        async with running(game_server) as ws_server:
            yield f"ws://127.0.0.1:{next(iter(ws_server.sockets)).getsockname()[1]}"
    finally:
        await store.close()


async def _cut(link: PostgresLink, schema: str) -> None:
    """PostgreSQL goes away for the server (its connections reset, new ones refused), and
    its sessions are gone from PostgreSQL (the writer's lock with them), as after a stop."""
    await link.cut()
    async with asyncio.timeout(30):
        while await _count(
            "public",
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            f"noughts {schema}",
        ):
            await asyncio.sleep(0.02)  # (PostgreSQL tells of no backend's end)


async def test_a_move_refused_while_postgresql_is_down_succeeds_once_it_is_back(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """Probe (PostgreSQL stopped under a live game): the move failed with `unavailable`, but
    the game, which could not be read back, left memory: every request about it answered
    "no live game" after PostgreSQL was back, until the server restarted. The game waits
    instead, and goes on as stored once the database answers: the same move then
    succeeds, its opponent hears of it, and every acknowledged move is stored."""
    async with _serving_through(pg_link, pg_schema, pool) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        game = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        seat_b = await bo.request(JoinGame, game_id=game.game_id)
        await ada.request(Move, game_id=game.game_id, token=game.token, action=0)
        await bo.request(Move, game_id=game.game_id, token=seat_b.token, action=4)
        await _cut(pg_link, pg_schema)
        with pytest.raises(RequestFailed) as refused:
            await ada.request(Move, game_id=game.game_id, token=game.token, action=1)
        assert refused.value.code == "unavailable"
        await pg_link.restore()
        moved = await ada.request(Move, game_id=game.game_id, token=game.token, action=1)
        assert moved.ply == 2
        assert (await next_event_where(bo, Moved, lambda e: e.ply == 2)).action == 1
        await bo.request(Move, game_id=game.game_id, token=seat_b.token, action=3)
        # bo leaves while the game waits again: ada is told once it goes on.
        await _cut(pg_link, pg_schema)
        with pytest.raises(RequestFailed):
            await ada.request(Move, game_id=game.game_id, token=game.token, action=2)
        await bo.close()
        await pg_link.restore()
        await ada.request(Move, game_id=game.game_id, token=game.token, action=5)
        left = await next_event(ada, Presence)
        assert left.seat == 1 and not left.online
        await ada.close()
    assert await _moves_stored(pg_schema, game.game_id) == 5


async def test_a_player_back_while_the_game_waited_for_postgresql_is_online_after(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """Probe (a note's "left alone"): bo left while PostgreSQL was down (his absence not
    stored: the game waits) and came back before it was up again. Once it was, the game
    went on with bo still held away, though connected: ada was told he had left and could
    claim the game after the grace, and bo's resume showed himself offline. He is online
    once the game goes on, and nobody is told of an absence that was never stored."""
    async with _serving_through(pg_link, pg_schema, pool) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        game = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        gid = game.game_id
        seat_b = await bo.request(JoinGame, game_id=gid)
        await ada.request(Move, game_id=gid, token=game.token, action=0)
        await bo.request(Move, game_id=gid, token=seat_b.token, action=4)
        await _cut(pg_link, pg_schema)
        session = bo.session
        await bo.close()
        refusal = await asyncio.wait_for(ada.errors.get(), 30)  # the game waits
        assert refusal.code == "unavailable"
        bo = await ServerConnection.connect(url, name="bo", session=session)  # from memory
        await pg_link.restore()
        moved = await ada.request(Move, game_id=gid, token=game.token, action=1)
        assert moved.ply == 2
        await bo.request(Resume, game_id=gid, since=0)
        snapshot = await next_event_where(bo, Snapshot, lambda s: s.game_id == gid)
        assert list(snapshot.online) == [True, True]
        with pytest.raises(RequestFailed, match="here"):
            await ada.request(Claim, game_id=gid, token=game.token, outcome="win")
        await bo.request(Move, game_id=gid, token=bo.token_for(gid), action=3)
        seen = []  # what ada heard until bo's move
        while not (seen and isinstance(seen[-1], Moved) and seen[-1].ply == 3):
            seen.append(await ada.next_event(timeout=10))
        assert not [e for e in seen if isinstance(e, Presence)], seen
        await ada.close()
        await bo.close()


async def test_the_time_a_game_waited_for_postgresql_is_charged_to_no_one(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """Probe: a game waiting for the database answers every move `unavailable` (its clocks
    stop, PROTOCOL.md says), yet once it went on the side to move was charged the whole
    outage: two minutes down flagged a player who had a minute left and could not move.
    As a restart's downtime, the wait is charged to no one."""
    clock = [5_000.0]
    async with _serving_through(pg_link, pg_schema, pool, monotonic=lambda: clock[0]) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        game = await ada.request(
            CreateGame, game="5x5", opponent="human", seat=0, clock={"initial_ms": 60_000}
        )
        gid = game.game_id
        await bo.request(JoinGame, game_id=gid)
        await ada.request(Move, game_id=gid, token=game.token, action=0)
        await bo.request(Move, game_id=gid, token=bo.token_for(gid), action=1)  # X's clock runs
        clock[0] += 5.0  # X thinks 5 s
        await _cut(pg_link, pg_schema)
        with pytest.raises(RequestFailed) as refused:
            await ada.request(Move, game_id=gid, token=game.token, action=2)
        assert refused.value.code == "unavailable"
        clock[0] += 120.0  # the database is down two minutes
        await pg_link.restore()
        moved = await ada.request(Move, game_id=gid, token=game.token, action=2)
        assert list(moved.clocks) == [55_000, 60_000]  # the 5 s before the outage
        await ada.close()
        await bo.close()


async def test_the_ais_move_not_stored_while_postgresql_is_down_is_made_once_it_is_back(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """The AI's move met PostgreSQL gone: the game left memory for good (nobody asks for
    an AI's move again). It waits, and the AI moves once the database answers."""
    async with _serving_through(pg_link, pg_schema, pool) as url:
        ada = await ServerConnection.connect(url, name="ada")
        game = await ada.request(
            CreateGame, game="tictactoe", opponent="ai", seat=0, algorithm="mcts", budget_ms=300
        )
        await ada.request(Move, game_id=game.game_id, token=game.token, action=4)
        await _cut(pg_link, pg_schema)  # while the AI thinks (300 ms)
        notice = await asyncio.wait_for(ada.errors.get(), 30)  # its move was not stored
        assert notice.code == "unavailable" and notice.game_id == game.game_id
        await pg_link.restore()
        ai_move = await next_event_where(ada, Moved, lambda e: e.ply == 1, timeout=30)
        moved = await ada.request(
            Move, game_id=game.game_id, token=game.token, action=0 if ai_move.action else 1
        )
        assert moved.ply == 2
        await ada.close()


async def test_requests_while_postgresql_stalls_fail_after_the_timeout_then_the_game_goes_on(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """Probe (PostgreSQL stopped by SIGSTOP: connections accepted, nothing answered): a
    move, a list of finished games and every later request of those connections waited
    for ever, as no read or commit had a time limit. Each now fails with `unavailable`
    after the store's timeout (db_timeout_s), a write's saying its outcome is unknown (it
    was sent: PostgreSQL may commit it when it wakes); then the game goes on, the move
    sent again with its ply acknowledged whether or not that commit happened."""
    async with _serving_through(pg_link, pg_schema, pool, timeout_s=0.5) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        game = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        seat_b = await bo.request(JoinGame, game_id=game.game_id)
        await ada.request(Move, game_id=game.game_id, token=game.token, action=0)
        await bo.request(Move, game_id=game.game_id, token=seat_b.token, action=4)
        pg_link.stall()
        move = dict(game_id=game.game_id, token=game.token, action=1, ply=2)
        with pytest.raises(RequestFailed) as refused:
            await asyncio.wait_for(ada.request(Move, **move), 30)
        assert refused.value.code == "unavailable"
        assert "the outcome is unknown" in refused.value.message
        with pytest.raises(RequestFailed) as refused:
            await asyncio.wait_for(bo.request(ListGames, status="finished"), 30)
        assert refused.value.code == "unavailable"
        assert refused.value.message == "the database does not answer: retry soon"
        await pg_link.restore()
        moved = await asyncio.wait_for(ada.request(Move, **move), 30)
        assert moved.ply == 2 and moved.action == 1
        await bo.request(Move, game_id=game.game_id, token=seat_b.token, action=3)
        await ada.close()
        await bo.close()
    assert await _moves_stored(pg_schema, game.game_id) == 4


async def test_a_server_started_while_postgresql_stalls_says_so_in_one_line_and_exits_1(
    pg_link: PostgresLink,
) -> None:
    """Probe (noughts serve on a PostgreSQL stopped by SIGSTOP): it waited 60 s, asyncpg's
    own connect timeout, then printed "cannot open database URL: " and no reason (a
    TimeoutError says nothing). It waits --db-timeout-s and says PostgreSQL gave no answer."""
    pg_link.stall()
    command = [sys.executable, "-m", "server", "--port", "0", "--workers", "0"]
    command += ["--db", pg_link.url, "--db-timeout-s", "1"]
    server = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(server.communicate(), 30)
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
    assert server.returncode == 1
    assert err.decode().strip().splitlines() == [
        f"noughts serve: cannot open database {pg_link.url}: PostgreSQL gave no answer within 1 s"
    ]


async def test_a_server_stopped_while_postgresql_stalls_exits(
    pg_schema: str, pg_link: PostgresLink
) -> None:
    """Probe: SIGTERM to a server whose PostgreSQL had stopped answering: it never exited,
    closing its connections politely (each waits for PostgreSQL's goodbye). They are cut
    after --db-timeout-s."""
    url = f"{pg_link.url}?search_path={pg_schema}"
    conn = await asyncpg.connect(PG_URL)
    await conn.execute(f'CREATE SCHEMA "{pg_schema}"')
    await conn.close()
    command = [sys.executable, "-m", "server", "--port", "0", "--workers", "0"]
    command += ["--db", url, "--db-timeout-s", "1"]
    server = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        listening = await asyncio.wait_for(server.stdout.readline(), 60)
        assert listening.startswith(b"noughts server listening on ws://"), listening
        pg_link.stall()
        server.send_signal(signal.SIGTERM)
        await asyncio.wait_for(server.wait(), 30)
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
    assert server.returncode == 0


class _Said(logging.Handler):
    """A log handler that keeps the records holding ``text`` and sets ``said`` at the first."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.records: list[logging.LogRecord] = []
        self.said = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.records.append(record)
            self.said.set()


async def test_a_session_sweep_while_postgresql_is_down_is_one_log_line(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """Probe: each session sweep (every 60 s) while PostgreSQL was down logged an ERROR
    with a 20-line traceback for a failure the server expects and handles (it sweeps
    again later). One line says why."""
    store = PostgresStore(pg_link.url, schema=pg_schema)
    await store.open()
    said = _Said("the session sweep failed")
    logging.getLogger("server").addHandler(said)
    try:
        async with running(GameServer(store, pool, settings=ServerSettings(session_sweep_s=0.05))):
            await _cut(pg_link, pg_schema)
            await asyncio.wait_for(said.said.wait(), 30)
    finally:
        logging.getLogger("server").removeHandler(said)
        await store.close()
    record = said.records[0]
    assert record.exc_info is None
    assert record.getMessage().startswith("the session sweep failed (the database does not answer")


def _names_the_database(text: str, link: PostgresLink) -> bool:
    """Whether ``text`` names where the database is: its URL, address or port."""
    return any(where in text for where in ("postgresql://", "127.0.0.1", str(link.port)))


async def test_clients_are_told_a_database_failure_in_one_generic_line_its_cause_logged_once(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """Probe: while PostgreSQL was down, the errors sent to clients named the database:
    "... postgresql://postgres@127.0.0.1:PORT/test: Connect call failed ('127.0.0.1', PORT)".
    A client is told one generic line (with its request's rid); the cause goes to the
    server's log, once for the outage however many requests meet it."""
    said = _Said(str(pg_link.port))
    logging.getLogger("server").addHandler(said)
    try:
        async with _serving_through(pg_link, pg_schema, pool) as url:
            ada = await ServerConnection.connect(url, name="ada")
            bo = await ServerConnection.connect(url, name="bo")
            game = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
            await bo.request(JoinGame, game_id=game.game_id)
            over = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
            await ada.request(Resign, game_id=over.game_id, token=over.token)
            await _cut(pg_link, pg_schema)
            refusals = []
            for request in [
                ada.request(Move, game_id=game.game_id, token=game.token, action=4),
                bo.request(ListGames, status="finished"),
                bo.request(GetGame, game_id=over.game_id),
                ada.request(CreateGame, game="tictactoe", opponent="human", seat=0),
                bo.request(ListGames, status="finished"),
                ada.request(Move, game_id=game.game_id, token=game.token, action=4),
            ]:
                with pytest.raises(RequestFailed) as refused:
                    await asyncio.wait_for(request, 30)
                refusals.append(refused.value.error)
            refusals.append(await asyncio.wait_for(bo.errors.get(), 30))  # the game waits
            during = list(said.records)
            await pg_link.restore()
            await ada.request(Move, game_id=game.game_id, token=game.token, action=4)
            await ada.close()
            await bo.close()
    finally:
        logging.getLogger("server").removeHandler(said)
    for error in refusals:
        assert error.code == "unavailable", error
        assert not _names_the_database(error.message, pg_link), error.message
        assert "\n" not in error.message
    assert [e.rid is not None for e in refusals] == [True] * 6 + [False]
    assert refusals[1].message == "the database does not answer: retry soon"
    assert len(during) == 1, [r.getMessage() for r in during]
    assert during[0].getMessage().startswith(f"database {pg_link.url} does not answer (")
    assert during[0].exc_info is None


async def test_a_postgresql_outage_is_one_log_line_from_the_server_and_none_from_asyncpg(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool, caplog: pytest.LogCaptureFixture
) -> None:
    """Probe: while PostgreSQL was down, asyncpg logged "Failed to restore the pool
    connection floor; retrying" with a traceback, again and again: the read pool's
    min_size=1 made asyncpg reconnect its floor connection in the background. The pool
    keeps no floor (a lost connection is replaced by the next read): an outage is one
    line from the server, and one when PostgreSQL answers again."""
    with caplog.at_level(logging.INFO, logger="server.store"):
        async with _serving_through(pg_link, pg_schema, pool) as url:
            ada = await ServerConnection.connect(url, name="ada")
            await ada.request(ListGames, status="finished")  # a read: the pool is in use
            caplog.clear()
            await _cut(pg_link, pg_schema)
            for _ in range(3):
                with pytest.raises(RequestFailed):
                    await ada.request(ListGames, status="finished")
            await pg_link.restore()
            await ada.request(ListGames, status="finished")
            said = list(caplog.records)
            await ada.close()
    assert [r.name for r in said] == ["server.store", "server.store"], said
    assert said[0].getMessage().startswith(f"database {pg_link.url} does not answer (")
    assert said[1].getMessage() == f"database {pg_link.url} answers again"
    assert all(r.exc_info is None for r in said)


async def _until_stored(schema: str, sql: str, *params: object) -> None:
    """Until PostgreSQL holds what ``sql`` counts (a commit the store awaits the answer of)."""
    async with asyncio.timeout(30):
        while not await _count(schema, sql, *params):
            await asyncio.sleep(0.02)  # (PostgreSQL tells nobody of a commit)


async def test_a_move_whose_connection_is_lost_mid_commit_is_told_its_outcome_is_unknown(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """Probe: the connection to PostgreSQL was lost while a move's commit waited for its
    answer (PostgreSQL had committed it): the mover was told "the database does not
    answer", as if nothing were stored, where the same commit unanswered within
    --db-timeout-s said its outcome was unknown. Either says so; the move sent again
    with its ply is acknowledged once the database answers, and stored once."""
    async with _serving_through(pg_link, pg_schema, pool) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        game = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        seat_b = await bo.request(JoinGame, game_id=game.game_id)
        await ada.request(Move, game_id=game.game_id, token=game.token, action=0)
        await bo.request(Move, game_id=game.game_id, token=seat_b.token, action=4)
        pg_link.hold_answers()
        move = dict(game_id=game.game_id, token=game.token, action=1, ply=2)
        sent = asyncio.ensure_future(ada.request(Move, **move))
        await _until_stored(
            pg_schema, "SELECT count(*) FROM moves WHERE game_id = $1 AND ply = 2", game.game_id
        )
        await _cut(pg_link, pg_schema)
        with pytest.raises(RequestFailed) as refused:
            await asyncio.wait_for(sent, 30)
        assert refused.value.code == "unavailable"
        assert "the outcome is unknown" in refused.value.message
        await pg_link.restore()
        moved = await asyncio.wait_for(ada.request(Move, **move), 30)
        assert (moved.ply, moved.action) == (2, 1)
        await bo.request(Move, game_id=game.game_id, token=seat_b.token, action=3)
        await ada.close()
        await bo.close()
    assert await _moves_stored(pg_schema, game.game_id) == 4


async def test_a_game_ended_by_a_move_of_unknown_outcome_ends_as_usual_once_read_back(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """Probe: the connection was cut while PostgreSQL committed the winning move (the move
    failed, its outcome unknown; the game waited for the database): once PostgreSQL
    answered, the game was read back finished, but nobody was told and it never went
    through its end: its followers waited, and it stayed in memory for good. Its
    followers now get it as stored (a snapshot, finished), and it ends as a game does:
    unloaded after keep_finished_s."""
    store = PostgresStore(pg_link.url, schema=pg_schema)
    await store.open()
    settings = ServerSettings(storage_retry_s=0.05, keep_finished_s=0)
    game_server = GameServer(store, pool, settings=settings)
    try:
        async with running(game_server) as ws_server:
            url = f"ws://127.0.0.1:{next(iter(ws_server.sockets)).getsockname()[1]}"
            ada = await ServerConnection.connect(url, name="ada")
            bo = await ServerConnection.connect(url, name="bo")
            game = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
            seat_b = await bo.request(JoinGame, game_id=game.game_id)
            for client, token, action in [
                (ada, game.token, 0), (bo, seat_b.token, 4), (ada, game.token, 1),
                (bo, seat_b.token, 3),
            ]:  # fmt: skip
                await client.request(Move, game_id=game.game_id, token=token, action=action)
            await _slow_commits_of_ends(pg_schema)
            sent = asyncio.ensure_future(
                ada.request(Move, game_id=game.game_id, token=game.token, action=2, ply=4)
            )
            await _until_stored(
                "public",
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1"
                " AND state = 'active' AND query LIKE 'COMMIT%'",
                f"noughts {pg_schema}",
            )
            await _cut(pg_link, pg_schema)  # (once its backend is gone: the commit is done)
            finished = "SELECT count(*) FROM games WHERE id = $1 AND status = 'finished'"
            assert await _count(pg_schema, finished, game.game_id) == 1
            with pytest.raises(RequestFailed, match="the outcome is unknown"):
                await asyncio.wait_for(sent, 30)
            await pg_link.restore()  # the waiting game is read back within 0.05 s
            for client in (ada, bo):
                told = await next_event_where(client, Snapshot, _over)
                assert (told.status, told.result, told.reason) == ("finished", "1-0", "line")
                assert list(told.actions) == [0, 4, 1, 3, 2]
            await bo.request(Ping)  # (its unloading, due at once, is done by then)
            assert game.game_id not in game_server.games
            assert game.game_id not in game_server.waiting
            await ada.close()
            await bo.close()
    finally:
        await store.close()


def _over(snapshot: Snapshot) -> bool:
    return snapshot.status not in UNFINISHED


async def _slow_commits_of_ends(schema: str) -> None:
    """A commit that ends a game takes PostgreSQL 1 s from now on (a deferred trigger
    sleeps in it): long enough to cut the connection while it commits."""
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": schema})
    try:
        await conn.execute(
            "CREATE FUNCTION slow_end() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$"
        )
        await conn.execute(
            "CREATE CONSTRAINT TRIGGER slow_end AFTER UPDATE ON games DEFERRABLE INITIALLY "
            "DEFERRED FOR EACH ROW WHEN (NEW.status = 'finished') EXECUTE FUNCTION slow_end()"
        )
    finally:
        await conn.close()


async def test_a_player_the_server_holds_says_hello_while_postgresql_is_down(
    pg_schema: str, pg_link: PostgresLink, pool: EnginePool
) -> None:
    """Probe: while PostgreSQL was down, a hello with the session of a player the server
    held in memory (seated in a live game, or still connected) was answered unavailable:
    the session was read from the database every time, so no one could reconnect, even
    to a game held in memory. Such a session is served from memory; a new session still
    needs the database (stored before it is acknowledged), as does a session the server
    does not hold. Once the database answers, the player resumes its game and plays on."""
    async with _serving_through(pg_link, pg_schema, pool) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        cy = await ServerConnection.connect(url, name="cy")
        game = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        seat_b = await bo.request(JoinGame, game_id=game.game_id)
        await ada.request(Move, game_id=game.game_id, token=game.token, action=0)
        known = {
            name: (c.session, c.player_id) for name, c in [("ada", ada), ("bo", bo), ("cy", cy)]
        }
        await bo.close()  # away, its seat in the game in memory
        away = await next_event(ada, Presence)
        assert away.seat == 1 and not away.online
        await cy.close()  # seated nowhere: forgotten
        await _cut(pg_link, pg_schema)
        # ada, still connected, on a second connection: its game is listed as it is.
        again = await ServerConnection.connect(url, name="ada", session=known["ada"][0])
        assert again.player_id == known["ada"][1] and again.welcome is not None
        assert [(g["game_id"], g["seat"], g["token"]) for g in again.welcome.games] == [
            (game.game_id, 0, game.token)
        ]
        # bo: its return cannot be stored, so its game waits for the database (left out).
        bo = await ServerConnection.connect(url, name="bo", session=known["bo"][0])
        assert bo.player_id == known["bo"][1] and bo.welcome is not None
        assert bo.welcome.name == "bo" and not bo.welcome.games
        for hello in [dict(name="cy", session=known["cy"][0]), dict(name="dee")]:
            with pytest.raises(RequestFailed) as refused:
                await ServerConnection.connect(url, **hello)
            assert refused.value.code == "unavailable"
        await pg_link.restore()
        resumed = await bo.request(Resume, game_id=game.game_id, since=0)
        assert resumed.seat == 1 and resumed.token == seat_b.token
        await bo.request(Move, game_id=game.game_id, token=seat_b.token, action=4)
        assert (await next_event_where(ada, Moved, lambda e: e.ply == 1)).action == 4
        cy = await ServerConnection.connect(url, name="cy", session=known["cy"][0])
        assert cy.player_id == known["cy"][1]
        for client in (ada, again, bo, cy):
            await client.close()
    assert await _count(pg_schema, "SELECT count(*) FROM sessions") == 3

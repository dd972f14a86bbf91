"""The PostgreSQL store against a real PostgreSQL: the same contract as the SQLite store
(migrations, group commit, a failing write fails alone, read back exactly what was written),
and a lost connection gives clear errors and recovers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import asyncpg
import pytest

from server.errors import SeekTaken, StorageError
from server.pgstore import PG_MIGRATIONS, PG_SCHEMA_VERSION, PostgresStore
from server.rows import GameRecord
from server.store import MIGRATIONS, UNANSWERED, UNCONFIRMED, GameEnd, GameRow, MoveRow, SessionRow
from tests.services import PG_URL


def _row(game_id: str = "g1") -> GameRow:
    return GameRow(
        id=game_id,
        game="tictactoe",
        params={},
        status="live",
        players=[{"name": "ada", "kind": "human"}, {"name": "mcts", "kind": "ai"}],
        created_at=1000.0,
        seq=1,
        started_at=1000.0,
        clock={"initial_ms": 60000, "increment_ms": 0},
        tokens=["aa", None],
    )


def test_both_stores_have_the_same_schema_versions() -> None:
    assert len(PG_MIGRATIONS) == len(MIGRATIONS)


async def test_schema_is_migrated_once(pg_schema: str) -> None:
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    await store.close()
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    assert await store.migrate() == PG_SCHEMA_VERSION  # nothing left to apply
    await store.close()


async def test_a_newer_schema_is_refused(pg_schema: str) -> None:
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    await store.close()
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
    await conn.execute("INSERT INTO noughts_schema VALUES ($1)", PG_SCHEMA_VERSION + 1)
    await conn.close()
    with pytest.raises(StorageError, match="newer"):
        await PostgresStore(PG_URL, schema=pg_schema).open()


async def test_noughts_migrate_on_postgresql_takes_no_file_lock(pg_schema: str, tmp_path) -> None:
    """noughts migrate holds a SQLite file's server lock; a URL has no file beside it (the
    advisory locks stand in): it migrates, and leaves nothing in the directory it ran in."""
    conn = await asyncpg.connect(PG_URL)
    await conn.execute(f'CREATE SCHEMA "{pg_schema}"')
    await conn.close()
    url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}search_path={pg_schema}"
    command = [sys.executable, "-m", "client", "migrate", "--db", url]
    result = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, cwd=tmp_path
    )
    created = f"{url}: schema created (version {PG_SCHEMA_VERSION})"
    assert (result.returncode, result.stdout.strip()) == (0, created)
    assert os.listdir(tmp_path) == []
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    assert await store.migrate() == PG_SCHEMA_VERSION  # the command migrated it all
    await store.close()


async def test_noughts_migrate_runs_beside_a_clusters_nodes_not_beside_a_server_alone(
    pg_schema: str,
) -> None:
    """The deploy step on PostgreSQL: noughts migrate holds the server lock as a node does,
    shared. Beside a cluster's nodes it runs (a node of the new version starting there would
    migrate too: README, rolling upgrades); beside a server alone it is refused in one line
    and migrates nothing under it (as on SQLite)."""
    url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}search_path={pg_schema}"
    command = [sys.executable, "-m", "client", "migrate", "--db", url]
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
    try:
        async with _two_nodes(pg_schema):
            result = await asyncio.to_thread(
                subprocess.run, command, capture_output=True, text=True
            )
            assert result.returncode == 0, result.stderr  # (before: refused by the nodes)
            assert result.stdout.strip() == f"{url}: schema up to date"
        alone = PostgresStore(PG_URL, schema=pg_schema)
        await alone.open()
        try:
            await conn.execute("DELETE FROM noughts_schema WHERE version = $1", PG_SCHEMA_VERSION)
            result = await asyncio.to_thread(
                subprocess.run, command, capture_output=True, text=True
            )
            assert result.returncode == 1
            assert result.stderr.splitlines() == [
                f"noughts migrate: a noughts server alone (no --bus) is using "
                f"{PostgresStore(url).describe()}: stop it first"
            ]
            assert await conn.fetchval("SELECT max(version) FROM noughts_schema") == (
                PG_SCHEMA_VERSION - 1
            )
            await conn.execute(
                "INSERT INTO noughts_schema (version) VALUES ($1)", PG_SCHEMA_VERSION
            )
        finally:
            await alone.close()
    finally:
        await conn.close()


async def test_moves_end_and_sessions_read_back(pg_schema: str) -> None:
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    await store.create_game(_row())
    stats = {"algorithm": "mcts", "budget_ms": 50, "iterations": 1234, "value": 0.5,
             "pv": [4, 0, 8], "seed": 7, "elapsed_ms": 49.1, "visits": [[4, 900]]}  # fmt: skip
    await store.append_move(MoveRow("g1", 0, 2, 0, 4, 1001.0, clocks=[59000, 60000]))
    await store.append_move(
        MoveRow("g1", 1, 3, 1, 0, 1002.0, stats), GameEnd("0-1", "resign", 4, 1003.0)
    )
    record = await store.get_game("g1")
    assert record is not None
    assert (record.row.status, record.row.result, record.row.reason, record.row.seq) == (
        "finished", "0-1", "resign", 4,
    )  # fmt: skip
    assert record.row.clock == {"initial_ms": 60000, "increment_ms": 0}
    assert record.row.tokens == ["aa", None]
    assert [(m.ply, m.seq, m.seat, m.action) for m in record.moves] == [(0, 2, 0, 4), (1, 3, 1, 0)]
    assert record.moves[0].clocks == [59000, 60000]
    assert record.moves[1].stats == stats
    assert record.events[-1]["kind"] == "ended"
    assert [r.id for r in await store.list_games("finished")] == ["g1"]
    assert [r.id for r in await store.list_games("finished", public=True)] == ["g1"]
    assert await store.list_games("live") == []
    assert await store.unfinished_games() == []
    assert await store.get_game("nope") is None
    session = SessionRow("h" * 64, "p-1", "ada", False, 5.0)
    await store.save_session(session)
    await store.save_session(session)  # the same token twice is one session
    assert await store.load_session("h" * 64) == SessionRow("h" * 64, "p-1", "ada", False, 5.0, 5.0)
    await store.close()


async def test_group_commit_batches_and_a_failing_write_fails_alone(pg_schema: str) -> None:
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    await asyncio.gather(*(store.create_game(_row(f"g{i}")) for i in range(100)))
    assert store.commits < 100
    results = await asyncio.gather(
        store.append_move(MoveRow("g1", 0, 2, 0, 4, 1.0)),
        store.append_move(MoveRow("g1", 0, 2, 0, 5, 1.0)),  # same ply: primary key clash
        store.append_move(MoveRow("g1", 1, 3, 1, 0, 1.0)),
        return_exceptions=True,
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StorageError)
    record = await store.get_game("g1")
    assert record is not None and [m.action for m in record.moves] == [4, 0]
    assert record.row.seq == 3  # each move's insert raised its game's seq with it
    assert len(await store.unfinished_games()) == 100
    await store.close()


async def test_a_lost_connection_fails_clearly_then_recovers(pg_schema: str) -> None:
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    await store.create_game(_row("g1"))
    admin = await asyncpg.connect(PG_URL)
    # Every connection of this schema's store is cut, as by a PostgreSQL restart; only
    # those (by their application_name): other users of the database are left alone.
    cut = await admin.fetch(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name = $1",
        f"noughts {pg_schema}",
    )
    assert len(cut) >= 2  # the writer's connection and the read pool's
    await admin.close()
    acknowledged = []
    for ply in range(3):
        try:
            await store.append_move(MoveRow("g1", ply, ply + 2, ply % 2, ply, 1.0))
        except StorageError as exc:
            assert exc.message in (UNANSWERED, UNCONFIRMED)  # (the cause: in the log)
        else:
            acknowledged.append(ply)
    assert acknowledged[-1] == 2  # the store reconnected
    for _ in range(3):  # reads recover too (the pool replaces its dead connections)
        try:
            record = await store.get_game("g1")
            break
        except StorageError:
            continue
    assert record is not None
    assert [m.ply for m in record.moves] == acknowledged  # every acknowledged move is stored
    await store.close()


async def test_a_second_server_on_the_same_database_is_refused(pg_schema: str) -> None:
    first = PostgresStore(PG_URL, schema=pg_schema)
    await first.open()
    # Refused before it migrates (noughts migrate opens a store): a schema one version
    # behind stays so under the running server.
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
    await conn.execute("DELETE FROM noughts_schema WHERE version = $1", PG_SCHEMA_VERSION)
    with pytest.raises(StorageError, match=r"a noughts server alone \(no --bus\) is using"):
        await PostgresStore(PG_URL, schema=pg_schema).open()
    assert await conn.fetchval("SELECT max(version) FROM noughts_schema") == PG_SCHEMA_VERSION - 1
    await conn.execute("INSERT INTO noughts_schema (version) VALUES ($1)", PG_SCHEMA_VERSION)
    await conn.close()
    await first.close()
    second = PostgresStore(PG_URL, schema=pg_schema)  # the first one is gone: now it may
    await second.open()
    await second.close()


async def test_a_server_alone_and_a_clusters_nodes_refuse_each_other(pg_schema: str) -> None:
    """An operator's probe: a cluster's node took no server lock and a server alone looked
    at no shard lock, so a node started beside a server alone (either order) claimed every
    shard and restored its live games. The nodes hold the server lock shared, a server alone
    holds it exclusively: each is refused beside the other, in one line saying who holds it
    (before it migrates), and nodes share it. A node's shard-lock connection holds it too,
    so a node cut off while a server alone took the database claims nothing."""
    from server.shards import ShardLocks

    alone = "a noughts server alone (no --bus) is using"
    nodes = "a noughts cluster's nodes (--bus) or noughts migrate are using"
    cluster = "several servers on one database must be the nodes of one cluster (--bus)"
    where = PostgresStore(PG_URL).describe()
    first = PostgresStore(PG_URL, schema=pg_schema)
    await first.open()
    try:
        with pytest.raises(StorageError) as refused:
            await PostgresStore(PG_URL, schema=pg_schema, node="n1").open()
        assert str(refused.value) == f"{alone} {where}: {cluster}"
        locks = ShardLocks(PostgresStore(PG_URL, schema=pg_schema, node="n1").connect_locked)
        with pytest.raises(StorageError) as refused:
            await locks.open()
        assert str(refused.value) == f"{alone} {where}: {cluster}"
        assert not locks.connected
    finally:
        await first.close()
    async with _two_nodes(pg_schema) as both:  # nodes share it
        locks = ShardLocks(both[0].connect_locked)
        await locks.open()
        assert await locks.try_claim(3)
        await locks.close()
        with pytest.raises(StorageError) as refused:
            await PostgresStore(PG_URL, schema=pg_schema).open()
        assert str(refused.value) == f"{nodes} {where}: {cluster}"
    again = PostgresStore(PG_URL, schema=pg_schema)  # the nodes are gone: now it may
    await again.open()
    await again.close()


async def test_names_sessions_and_a_corrupt_row_as_in_sqlite(pg_schema: str) -> None:
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    await store.save_session(SessionRow("a" * 64, "p-1", "carol", False, 10.0), ["carol"])
    await store.save_session(SessionRow("b" * 64, "p-2", "c4rol", False, 11.0), ["carol"])
    assert await store.name_holder(["carol"]) == "p-1"  # the first holder keeps the name
    await store.save_session(SessionRow("c" * 64, "p-3", "robot", True, 12.0), ["robot"])
    robot = await store.player_session("p-3")
    assert robot is not None and robot.token_sha256 == "c" * 64 and robot.bot
    assert await store.player_session("p-9") is None
    await store.touch_sessions(["p-1"], 50.0, played=True)
    loaded = await store.load_session("a" * 64)
    assert loaded is not None and loaded.seen_at == 50.0 and loaded.played
    await store.expire_sessions(unplayed_before=40.0, played_before=20.0)
    assert await store.load_session("b" * 64) is None  # never played, unused since 11
    assert await store.load_session("a" * 64) is not None
    await store.create_game(_row("bad"))
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
    await conn.execute("UPDATE games SET players = 'not json' WHERE id = 'bad'")
    await conn.close()
    assert await store.unfinished_games() == []  # set aside, the server starts
    await store.close()
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
    assert await conn.fetchval("SELECT status FROM games WHERE id = 'bad'") == "quarantined"
    await conn.close()


async def test_connections_cut_in_the_middle_of_writes_fail_clearly_then_recover(
    pg_schema: str,
) -> None:
    """The cut lands while batches of writes are in flight (a pipelined executemany can be
    left in a state asyncpg refuses to go on from): every failure is a StorageError, never
    another exception, and the store writes and reads again afterwards."""
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    games = [f"g{i}" for i in range(40)]
    for game_id in games:
        await store.create_game(_row(game_id))
    admin = await asyncpg.connect(PG_URL)
    cut_sql = (
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name = $1"
    )
    plies = dict.fromkeys(games, 0)
    failures: list[BaseException] = []

    async def write(game_id: str) -> None:
        ply = plies[game_id]
        try:
            await store.append_move(MoveRow(game_id, ply, ply + 2, ply % 2, ply, 1.0))
        except StorageError:
            return
        plies[game_id] = ply + 1

    async def read(game_id: str) -> None:
        with contextlib.suppress(StorageError):
            await store.get_game(game_id)

    for round_ in range(6):
        work = [write(g) for g in games] + [read(g) for g in games[:10]]
        tasks = [asyncio.ensure_future(w) for w in work]
        await asyncio.sleep(0.001 * round_)  # the cut at another point of the batch each time
        await admin.fetch(cut_sql, f"noughts {pg_schema}")
        results = await asyncio.gather(*tasks, return_exceptions=True)
        failures += [r for r in results if isinstance(r, BaseException)]
    await admin.close()
    assert failures == []  # (StorageError is caught above: anything else lands here)
    for game_id in games:  # then every game takes its next move, and reads back whole
        for _ in range(3):
            await write(game_id)
            record = await _read_retrying(store, game_id)
            if len(record.moves) == plies[game_id] and plies[game_id] > 0:
                break
        assert [m.ply for m in record.moves] == list(range(plies[game_id]))
    await store.close()


async def _read_retrying(store: PostgresStore, game_id: str) -> GameRecord:
    for _ in range(3):
        with contextlib.suppress(StorageError):
            record = await store.get_game(game_id)
            assert record is not None
            return record
    raise AssertionError(f"{game_id} could not be read back")


async def test_a_cluster_nodes_write_does_not_wait_for_the_commit_in_progress(
    pg_schema: str,
) -> None:
    """A cluster node's store commits on two connections: while one transaction waits (on a
    row another connection holds, here), a write queued meanwhile commits on the other.
    Both end committed; one server alone keeps one writer."""
    assert PostgresStore(PG_URL, schema=pg_schema).writers == 1
    store = PostgresStore(PG_URL, schema=pg_schema, node="n1")
    assert store.writers == 2
    await store.open()
    holder = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
    try:
        await store.create_game(_row("g1"))
        await holder.execute("BEGIN")
        await holder.execute("SELECT 1 FROM games WHERE id = 'g1' FOR UPDATE")
        blocked = asyncio.ensure_future(store.end_game("g1", GameEnd("draw", "agreed", 2, 2.0)))
        await asyncio.sleep(0.2)
        assert not blocked.done()  # its transaction waits for the row
        await asyncio.wait_for(store.create_game(_row("g2")), 5)  # on the other writer
        assert not blocked.done()
        await holder.execute("COMMIT")
        await asyncio.wait_for(blocked, 5)
        record = await store.get_game("g1")
        assert record is not None and record.row.status == "finished"
        assert await store.get_game("g2") is not None
    finally:
        await holder.close()
        await store.close()


@contextlib.asynccontextmanager
async def _two_nodes(schema: str) -> AsyncIterator[list[PostgresStore]]:
    """Two nodes' stores on one schema (two writers each)."""
    nodes = [PostgresStore(PG_URL, schema=schema, node=f"n{i}") for i in (1, 2)]
    for store in nodes:
        await store.open()
    try:
        yield nodes
    finally:
        for store in nodes:
            await store.close()


@contextlib.asynccontextmanager
async def _two_nodes_sharing_sessions(
    schema: str,
) -> AsyncIterator[tuple[list[PostgresStore], list[str]]]:
    """Two nodes' stores on one schema, and 400 players' sessions."""
    async with _two_nodes(schema) as nodes:
        players = [f"p-{i:03d}" for i in range(400)]
        for i, player in enumerate(players):
            await nodes[0].save_session(SessionRow(f"{i:064x}", player, f"ada{i}", False, 5.0))
        yield nodes, players


async def test_session_touches_in_opposite_orders_on_two_nodes_never_deadlock(
    pg_schema: str,
) -> None:
    """Two nodes' session sweeps touch the same players, each in its own order, on two
    writers each: every batch locks session rows in one order (by player), so none waits
    for another in a cycle (PostgreSQL would fail one after its deadlock_timeout)."""
    async with _two_nodes_sharing_sessions(pg_schema) as (nodes, players):
        for round_ in range(15):
            now = 10.0 + round_
            touches = [
                nodes[0].touch_sessions(players, now, True),
                nodes[1].touch_sessions(players[::-1], now, False),
            ]
            await asyncio.wait_for(asyncio.gather(*touches), 30)
        session = await nodes[1].load_session(f"{399:064x}")
        assert session is not None and (session.seen_at, session.played) == (24.0, True)


async def test_names_bound_against_a_sweep_in_the_other_order_never_deadlock(
    pg_schema: str,
) -> None:
    """One node binds players' names, last player first, while another sweeps the same
    players' sessions first player first: a name bound updates its session row in the same
    order as a touch does (by player), so no two batches wait for each other in a cycle."""
    async with _two_nodes_sharing_sessions(pg_schema) as (nodes, players):
        for round_ in range(15):
            binds = [
                nodes[0].bind_name(player, f"bo{i}r{round_}", [f"bo{i}r{round_}"])
                for i, player in reversed(list(enumerate(players)))
            ]
            sweep = nodes[1].touch_sessions(players, 10.0 + round_, True)
            await asyncio.wait_for(asyncio.gather(*binds, sweep), 30)
        session = await nodes[1].load_session(f"{399:064x}")
        assert session is not None
        assert (session.name, session.seen_at, session.played) == ("bo399r14", 24.0, True)


async def test_a_sweep_against_touches_of_the_sessions_it_expires_never_deadlocks(
    pg_schema: str,
) -> None:
    """One node expires sessions while another touches the same players, first player
    first. The rows lie last player first, the order a sweep's scan would lock them in;
    the sweep locks them by player, as every batch does, so neither waits for the other in
    a cycle (PostgreSQL would fail one after its deadlock_timeout)."""
    async with _two_nodes(pg_schema) as nodes:
        for round_ in range(10):
            players = [f"r{round_:02d}-p{i:03d}" for i in range(400)]
            for i, player in reversed(list(enumerate(players))):
                token = f"{round_:02d}{i:062x}"
                await nodes[0].save_session(SessionRow(token, player, f"ada{i}", False, 5.0))
            sweep = nodes[0].expire_sessions(unplayed_before=50.0, played_before=50.0)
            touches = nodes[1].touch_sessions(players, 100.0, True)
            await asyncio.wait_for(asyncio.gather(sweep, touches), 30)
            # Every session was swept or touched: none is left as it was.
            for i in (0, 199, 399):
                session = await nodes[1].load_session(f"{round_:02d}{i:062x}")
                assert session is None or session.seen_at == 100.0, session


async def test_a_second_game_of_one_seek_is_refused_and_the_first_kept(pg_schema: str) -> None:
    """As on SQLite (test_store.py): one game per seek, the second refused (SeekTaken)
    alone, with the database still answering."""
    store = PostgresStore(PG_URL, schema=pg_schema)
    await store.open()
    try:
        first, second, plain = _row("g1"), _row("g2"), _row("g3")
        first.seek_id = second.seek_id = "s-1"
        await store.create_game(first)
        results = await asyncio.gather(
            store.create_game(second), store.create_game(plain), return_exceptions=True
        )
        assert isinstance(results[0], SeekTaken) and results[0].code.value == "unknown_seek"
        assert results[1] is None
        assert await store.get_game("g2") is None
        assert await store.game_of_seek("s-1") == "g1"
        assert (await store.get_game("g1")).row.seek_id == "s-1"  # type: ignore[union-attr]
        assert not store.down
    finally:
        await store.close()

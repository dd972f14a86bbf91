"""The SQLite store: migrations, group commit, and reading back exactly what was written."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.errors import SeekTaken, StorageError
from server.store import MIGRATIONS, SCHEMA_VERSION, GameEnd, GameRow, MoveRow, SQLiteStore


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
    )


async def test_schema_is_migrated_and_wal(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    await store.open()
    await store.close()
    db = sqlite3.connect(tmp_path / "a.db")
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"games", "moves", "events"} <= tables
    db.close()
    # Opening again applies nothing and keeps the data.
    store = SQLiteStore(tmp_path / "a.db")
    await store.open()
    await store.close()


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The common umask, under which a file made 0644 is readable by every user."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.usefixtures("umask_022")
async def test_a_new_database_its_log_and_its_lock_are_its_owners_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new database, its -wal and -shm and the server's lock file were made 0644 (0666
    less the umask): on a shared machine any user could copy the players' sessions (their
    tokens' hashes), names and private games, or take the lock (read-only is enough for
    flock) and keep the server from starting. Now they are 0600, and the data directory a
    server makes (the client keeps its sessions there) 0700."""
    import stat

    from server.lockfile import ServerLock
    from server.store import default_db_path

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("NOUGHTS_DB", raising=False)
    path = default_db_path()
    lock = ServerLock.acquire(path)
    try:
        store = SQLiteStore(path)
        await store.open()
        try:
            await store.create_game(_row())  # (a write: the log and its index are in use)
            files = [path, Path(f"{path}-wal"), Path(f"{path}-shm"), lock.path]
            assert {str(f.name): mode(f) for f in files} == {str(f.name): 0o600 for f in files}
            assert mode(path.parent) == 0o700
        finally:
            await store.close()
    finally:
        lock.release()


async def test_newer_schema_is_refused(tmp_path) -> None:
    db = sqlite3.connect(tmp_path / "b.db")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    store = SQLiteStore(tmp_path / "b.db")
    with pytest.raises(StorageError, match="newer"):
        await store.open()


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` cannot be written for the duration: mode 0444, or for root (whom modes do
    not stop) the immutable attribute; skipped where neither holds."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)]).returncode != 0:
        pytest.skip("root, and no chattr +i here to make a file read-only")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)


@pytest.mark.parametrize("schema", ["current", "older"])
async def test_a_read_only_database_is_refused_at_open(tmp_path: Path, schema: str) -> None:
    """A database file the server cannot write opened and read, and the server said it
    listened; then every hello, move and list failed "the database could not store it,
    nothing was stored: retry soon" (noughts replay and export of a read-only file too). It
    is refused at open now, saying so, and left as it was; an older schema (whose migration
    is the first write) says the same."""
    path = tmp_path / "games.db"
    if schema == "older":  # written by the server before the last migration
        db = sqlite3.connect(path)
        for version, script in enumerate(MIGRATIONS[:-1], start=1):
            db.executescript(f"{script}\nPRAGMA user_version = {version};")
        db.execute(
            "INSERT INTO games (id, game, params, status, players, seq, created_at)"
            " VALUES ('g1', 'tictactoe', '{}', 'live', ?, 1, 1000.0)",
            (json.dumps(_row().players),),
        )
        db.commit()
        db.close()
    else:
        store = SQLiteStore(path)
        await store.open()
        await store.create_game(_row())
        await store.close()
    before = path.read_bytes()
    with read_only(path):
        store = SQLiteStore(path)
        with pytest.raises(StorageError) as refused:
            await store.open()
    assert str(refused.value) == (
        f"cannot open database {path}: it is read-only, and the server writes to it "
        "(sessions, games): make it writable, or copy it"
    )
    assert path.read_bytes() == before
    store = SQLiteStore(path)  # writable again: opens, the game intact
    await store.open()
    record = await store.get_game("g1")
    await store.close()
    assert record is not None and record.row.players == _row().players


@pytest.mark.parametrize("version", [0, 2, 7])
async def test_another_programs_database_is_refused_and_left_as_it_is(
    tmp_path: Path, version: int
) -> None:
    """A mistyped --db naming another program's SQLite file (noughts serve, or noughts
    games, replay or export through their embedded server) turned it into a noughts
    database: six tables added, its schema version set to ours, its journal switched to
    WAL; one with a schema version of its own past ours was "newer than this server's:
    upgrade noughts". It is refused now, saying whose it is not, and left byte for byte."""
    path = tmp_path / "places.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE bookmarks (url TEXT)")
    db.execute("INSERT INTO bookmarks VALUES ('https://example.org')")
    db.execute(f"PRAGMA user_version = {version}")
    db.commit()
    db.close()
    before = path.read_bytes()
    store = SQLiteStore(path)
    with pytest.raises(StorageError) as refused:
        await store.open()
    assert str(refused.value) == (
        f"database {path} is not a noughts database (schema version {version}, tables: "
        "bookmarks): it is left as it is; give the path of a noughts database, or of a new file"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["places.sqlite"]


async def test_moves_and_end_read_back(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "c.db")
    await store.open()
    await store.create_game(_row())
    stats = {
        "algorithm": "mcts",
        "budget_ms": 50.0,
        "iterations": 1234,
        "value": 0.5,
        "pv": [4, 0, 8],
        "seed": 7,
        "elapsed_ms": 49.1,
        "visits": [[4, 900]],
    }
    await store.append_move(MoveRow("g1", 0, 2, 0, 4, 1001.0))
    await store.append_move(
        MoveRow("g1", 1, 3, 1, 0, 1002.0, stats), GameEnd("0-1", "resign", 4, 1003.0)
    )
    record = await store.get_game("g1")
    assert record is not None
    assert record.row.status == "finished"
    assert (record.row.result, record.row.reason, record.row.seq) == ("0-1", "resign", 4)
    assert [(m.ply, m.seq, m.seat, m.action) for m in record.moves] == [(0, 2, 0, 4), (1, 3, 1, 0)]
    assert record.moves[0].stats is None
    assert record.moves[1].stats == stats
    assert record.events[-1]["kind"] == "ended"
    assert [r.id for r in await store.list_games("finished")] == ["g1"]
    assert await store.list_games("live") == []
    assert await store.get_game("nope") is None
    await store.close()
    # The typed columns hold the statistics too, for SQL queries.
    db = sqlite3.connect(tmp_path / "c.db")
    row = db.execute(
        "SELECT algorithm, budget_ms, iterations, value, pv, seed FROM moves WHERE ply = 1"
    ).fetchone()
    assert row == ("mcts", 50.0, 1234, 0.5, "[4,0,8]", 7)
    db.close()


async def test_group_commit_batches_concurrent_writes(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "d.db")
    await store.open()
    await asyncio.gather(*(store.create_game(_row(f"g{i}")) for i in range(200)))
    await asyncio.gather(
        *(store.append_move(MoveRow(f"g{i}", 0, 2, 0, 4, 1.0)) for i in range(200))
    )
    # 400 writes; concurrent writes share transactions.
    assert store.writes == 400
    assert store.commits < 400
    await store.close()
    db = sqlite3.connect(tmp_path / "d.db")
    assert db.execute("SELECT COUNT(*) FROM moves").fetchone()[0] == 200
    # Each game's seq was raised to its move's, in the transactions that stored them.
    assert db.execute("SELECT DISTINCT seq FROM games").fetchall() == [(2,)]
    db.close()


async def test_close_commits_the_writes_queued_before_it(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "q.db")
    await store.open()
    await store.create_game(_row("g1"))
    writes = [
        asyncio.ensure_future(store.append_move(MoveRow("g1", ply, ply + 2, ply % 2, ply, 1.0)))
        for ply in range(50)
    ]
    await asyncio.sleep(0)  # each is queued; none has committed
    assert store.writes == 1
    await store.close()
    assert await asyncio.gather(*writes) == [None] * 50
    db = sqlite3.connect(tmp_path / "q.db")
    assert db.execute("SELECT COUNT(*) FROM moves").fetchone()[0] == 50
    db.close()


async def test_a_failing_write_fails_alone(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "e.db")
    await store.open()
    await store.create_game(_row("g1"))
    results = await asyncio.gather(
        store.append_move(MoveRow("g1", 0, 2, 0, 4, 1.0)),
        store.append_move(MoveRow("g1", 0, 2, 0, 5, 1.0)),  # same ply: primary key clash
        store.append_move(MoveRow("g1", 1, 3, 1, 0, 1.0)),
        return_exceptions=True,
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StorageError)
    record = await store.get_game("g1")
    assert record is not None
    assert [m.action for m in record.moves] == [4, 0]
    await store.close()


async def test_the_log_starts_over_under_a_steady_stream_of_writes(tmp_path, monkeypatch) -> None:
    """A checkpoint alongside a busy writer never catches up; the writer pauses for one
    when the log is long, so the log is rewound instead of growing for ever."""
    import server.store

    monkeypatch.setattr(server.store, "CHECKPOINT_S", 0.005)
    monkeypatch.setattr(server.store, "WAL_RESET_FRAMES", 50)
    store = SQLiteStore(tmp_path / "w.db")
    await store.open()
    games = 20
    await asyncio.gather(*(store.create_game(_row(f"g{i}")) for i in range(games)))

    written = 0

    async def play(game: int) -> None:
        """Moves keep coming, with no pause in between, until the log has started over
        (however fast this machine commits and checkpoints), or 3,000 moves a game."""
        nonlocal written
        for ply in range(3_000):
            if ply >= 150 and store.wal_resets:
                return
            await store.append_move(MoveRow(f"g{game}", ply, ply + 2, ply % 2, ply, 1.0))
            written += 1

    try:
        await asyncio.gather(*(play(i) for i in range(games)))
        # The writer paused for a whole checkpoint at least once, and lost nothing by it.
        assert store.wal_resets >= 1
    finally:
        await store.close()
    db = sqlite3.connect(tmp_path / "w.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT COUNT(*) FROM moves").fetchone()[0] == written
    finally:
        db.close()


async def test_a_write_waits_off_the_loop_while_another_process_holds_the_lock(
    tmp_path,
) -> None:
    store = SQLiteStore(tmp_path / "f.db")
    await store.open()
    await store.create_game(_row("g1"))
    other = sqlite3.connect(tmp_path / "f.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another writer (an arena import, say) holds the lock
    write = asyncio.create_task(store.append_move(MoveRow("g1", 0, 2, 0, 4, 1.0)))
    ticks = 0
    for _ in range(20):  # the loop keeps running while the write waits
        await asyncio.sleep(0.01)
        ticks += 1
    assert not write.done() and ticks == 20
    other.execute("COMMIT")
    other.close()
    await asyncio.wait_for(write, 10)
    record = await store.get_game("g1")
    assert record is not None and [m.action for m in record.moves] == [4]
    await store.close()


async def test_a_second_game_of_one_seek_is_refused_and_the_first_kept(tmp_path) -> None:
    """A game names the seek it was made of (schema 4), one game per seek: a second is
    refused (SeekTaken, unknown_seek: the seek was taken) and nothing of it is stored, the
    first kept; games of no seek are many. A database of schema 3 migrates with its games."""
    db = sqlite3.connect(tmp_path / "s.db")
    for version, script in enumerate(MIGRATIONS[:3], start=1):
        db.executescript(f"{script}\nPRAGMA user_version = {version};")
    db.execute(
        "INSERT INTO games (id, game, params, status, players, created_at)"
        " VALUES ('old', 'tictactoe', '{}', 'finished', '[null, null]', 1.0)"
    )
    db.commit()
    db.close()
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        assert (await store.get_game("old")).row.seek_id is None  # type: ignore[union-attr]
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
        assert await store.game_of_seek("s-2") is None
        assert (await store.get_game("g1")).row.seek_id == "s-1"  # type: ignore[union-attr]
        assert not store.down
    finally:
        await store.close()

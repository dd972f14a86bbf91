"""Game storage: a small interface, and SQLite behind it through aiosqlite.

Every write goes through one writer task that commits the writes queued within
the same moment in a single transaction (group commit): each caller's future
resolves only after the transaction holding its write has committed, so a move
is durable before it is acknowledged or broadcast, and under load one commit
serves many moves. A transaction runs whole (BEGIN, its statements, COMMIT) on
the event loop through the writer's own connection: in WAL mode with
synchronous=NORMAL a commit appends to the log without fsync (a fraction of a
millisecond), far less than a hop to a thread and back, whose GIL handoff can
wait a whole switch interval (5 ms) while the loop is busy. What does fsync, the
checkpoint that copies the log into the database, never runs on the loop: the
writer's automatic checkpoints are off and the reader connection (aiosqlite, its
own thread) checkpoints in the background (PASSIVE: alongside the writer). A
checkpoint that runs alongside a busy writer never quite catches up, and the log
is rewound to its start only after one that did: so once the log passes
WAL_RESET_FRAMES the writer waits for one checkpoint (its writes queue meanwhile
and commit together after it), and the log starts over.
The database runs in WAL mode (one writer, readers alongside); its schema is
versioned by ``PRAGMA user_version`` and upgraded by the ordered MIGRATIONS at
open.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from server.errors import StorageError

log = logging.getLogger(__name__)

# Each entry upgrades the schema from version i to i+1. Never edit a shipped one; append.
MIGRATIONS: list[str] = [
    # 1: games, their moves (with AI search statistics) and their other events.
    """
    CREATE TABLE games (
        id          TEXT PRIMARY KEY,
        game        TEXT NOT NULL,
        params      TEXT NOT NULL,            -- JSON object of ints
        status      TEXT NOT NULL,            -- open | live | finished | aborted
        players     TEXT NOT NULL,            -- JSON array of two player objects (or null)
        result      TEXT,                     -- 1-0 | 0-1 | 1/2-1/2
        reason      TEXT,                     -- line | draw | resign | flag | abort | ...
        seq         INTEGER NOT NULL DEFAULT 0,
        created_at  REAL NOT NULL,
        started_at  REAL,
        ended_at    REAL
    );
    CREATE INDEX games_by_status ON games (status, created_at);
    CREATE TABLE moves (
        game_id     TEXT NOT NULL REFERENCES games (id),
        ply         INTEGER NOT NULL,
        seq         INTEGER NOT NULL,
        seat        INTEGER NOT NULL,
        action      INTEGER NOT NULL,
        at          REAL NOT NULL,
        algorithm   TEXT,                     -- AI moves: the search that chose it
        budget_ms   REAL,
        iterations  INTEGER,
        value       REAL,
        pv          TEXT,                     -- JSON array of actions
        seed        INTEGER,
        elapsed_ms  REAL,
        stats       TEXT,                     -- JSON: every statistic the search returned
        PRIMARY KEY (game_id, ply)
    ) WITHOUT ROWID;
    CREATE TABLE events (
        game_id     TEXT NOT NULL REFERENCES games (id),
        seq         INTEGER NOT NULL,
        kind        TEXT NOT NULL,
        data        TEXT NOT NULL,            -- JSON
        at          REAL NOT NULL,
        PRIMARY KEY (game_id, seq)
    ) WITHOUT ROWID;
    """,
    # 2: what a restart needs to restore live games and their players: sessions, the
    # seats' token hashes, time controls and the clocks after each move.
    """
    ALTER TABLE games ADD COLUMN clock TEXT;              -- JSON time control; NULL: none
    ALTER TABLE games ADD COLUMN tokens TEXT;             -- JSON [sha256 hex | null] per seat
    ALTER TABLE games ADD COLUMN private INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE games ADD COLUMN rematch_of TEXT;
    ALTER TABLE moves ADD COLUMN clocks TEXT;             -- JSON [ms, ms] left after the move
    CREATE TABLE sessions (
        token_sha256 TEXT PRIMARY KEY,
        player_id    TEXT NOT NULL,
        name         TEXT NOT NULL,
        bot          INTEGER NOT NULL,
        created_at   REAL NOT NULL
    ) WITHOUT ROWID;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

# AI statistics that get their own column; the whole dict also goes to `stats`.
STAT_COLUMNS = ("algorithm", "budget_ms", "iterations", "value", "pv", "seed", "elapsed_ms")


@dataclass(slots=True)
class GameRow:
    id: str
    game: str
    params: dict[str, int]
    status: str
    players: list[dict[str, Any] | None]
    created_at: float
    seq: int = 0
    result: str | None = None
    reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    clock: dict[str, int] | None = None
    tokens: list[str | None] = field(default_factory=lambda: [None, None])  # sha256 hex
    private: bool = False
    rematch_of: str | None = None


@dataclass(slots=True)
class MoveRow:
    game_id: str
    ply: int
    seq: int
    seat: int
    action: int
    at: float
    stats: dict[str, Any] | None = None
    clocks: list[int] | None = None


@dataclass(slots=True)
class EventRow:
    """A game event other than a move (offer, presence, start), as stored."""

    game_id: str
    seq: int
    kind: str
    data: dict[str, Any]
    at: float


@dataclass(slots=True)
class GameEnd:
    result: str  # "*" for an aborted game
    reason: str
    seq: int
    at: float

    @property
    def status(self) -> str:
        return "aborted" if self.result == "*" else "finished"


@dataclass(slots=True)
class SessionRow:
    token_sha256: str
    player_id: str
    name: str
    bot: bool
    created_at: float


@dataclass(slots=True)
class GameRecord:
    """A stored game with its moves, as the replay reads it."""

    row: GameRow
    moves: list[MoveRow] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        r = self.row
        return {
            "id": r.id,
            "game": r.game,
            "params": r.params,
            "status": r.status,
            "players": r.players,
            "result": r.result,
            "reason": r.reason,
            "seq": r.seq,
            "created_at": r.created_at,
            "started_at": r.started_at,
            "ended_at": r.ended_at,
            "clock": r.clock or {},
            "rematch_of": r.rematch_of,
            "moves": [
                {
                    "ply": m.ply,
                    "seq": m.seq,
                    "seat": m.seat,
                    "action": m.action,
                    "at": m.at,
                    "stats": m.stats,
                    "clocks": m.clocks,
                }
                for m in self.moves
            ],
            "events": self.events,
        }


class Store(ABC):
    """What the game logic needs from storage. SQLite now; another backend later."""

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def create_game(self, row: GameRow) -> None:
        """Insert a new game; returns once committed."""

    @abstractmethod
    async def update_game(self, row: GameRow, event: EventRow | None = None) -> None:
        """Write a game's status, players, seats and seq (and an event), committed on return."""

    @abstractmethod
    async def append_move(self, move: MoveRow, end: GameEnd | None = None) -> None:
        """Commit a move (and the game's end, in the same transaction) before returning."""

    @abstractmethod
    async def append_event(self, event: EventRow) -> None:
        """Commit a game event that is not a move (offer, presence) before returning."""

    @abstractmethod
    async def end_game(self, game_id: str, end: GameEnd) -> None:
        """Commit a game's end without a move (resignation, abort, flag)."""

    @abstractmethod
    async def get_game(self, game_id: str) -> GameRecord | None: ...

    @abstractmethod
    async def list_games(self, status: str | None = None, limit: int = 50) -> list[GameRow]: ...

    @abstractmethod
    async def unfinished_games(self) -> list[GameRecord]:
        """Every open or live game with its moves: what a restart restores."""

    @abstractmethod
    async def save_session(self, session: SessionRow) -> None:
        """Commit a player session (only its token's hash is kept)."""

    @abstractmethod
    async def load_session(self, token_sha256: str) -> SessionRow | None: ...


def default_db_path() -> Path:
    """NOUGHTS_DB if set, else noughts.db in the user's data directory."""
    env = os.environ.get("NOUGHTS_DB")
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("noughts", appauthor=False)) / "noughts.db"


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


# Seconds between background checkpoints (when something was committed meanwhile).
CHECKPOINT_S = 0.5
# Frames (pages) in the log past which the writer pauses for a checkpoint: 16 MiB of 4 KiB
# pages, a few seconds of writes at full speed.
WAL_RESET_FRAMES = 4096


def _run_transaction(db: sqlite3.Connection, runs: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
    """BEGIN, every statement, COMMIT; on any failure ROLLBACK."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for sql, rows in runs:
            db.executemany(sql, rows)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _run_transaction_waiting(
    db: sqlite3.Connection, runs: list[tuple[str, list[tuple[Any, ...]]]]
) -> None:
    """The same, off the loop, waiting up to BUSY_WAIT_MS for another writer's lock."""
    db.execute(f"PRAGMA busy_timeout={BUSY_WAIT_MS}")
    try:
        _run_transaction(db, runs)
    finally:
        db.execute("PRAGMA busy_timeout=0")


# How long a write waits for another process's lock before it fails.
BUSY_WAIT_MS = 5000

_Write = tuple[str, tuple[Any, ...]]


class SQLiteStore(Store):
    """The SQLite store. One connection; one writer task doing group commit."""

    def __init__(self, path: str | os.PathLike[str], *, max_batch: int = 1024) -> None:
        self.path = Path(path)
        self.max_batch = max_batch
        self._db: aiosqlite.Connection | None = None
        self._write_db: sqlite3.Connection | None = None  # used on the event loop only
        self._checkpointer: asyncio.Task[None] | None = None
        self._checkpointed_at = 0  # self.commits at the last checkpoint
        self._wal_reset_due = False  # the log is long: the writer waits for a checkpoint
        self.wal_resets = 0  # (for benchmarks)
        self._queue: asyncio.Queue[tuple[list[_Write], asyncio.Future[None]]] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self.commits = 0  # transactions committed (for benchmarks)
        self.writes = 0  # write requests committed

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StorageError("the store is not open")
        return self._db

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = await aiosqlite.connect(self.path, isolation_level=None)
            await self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit survives a process crash (kill -9); only power
            # loss can take the last transactions (SQLite docs, "WAL mode synchronous").
            await self._db.execute("PRAGMA synchronous=NORMAL")
            await self._db.execute("PRAGMA foreign_keys=ON")
            await self._db.execute("PRAGMA busy_timeout=5000")
            await self._migrate()
            self._write_db = self._open_writer()
        except (sqlite3.Error, StorageError) as exc:
            # aiosqlite runs a thread per connection: a failed open must not leave it behind.
            if self._db is not None:
                await self._db.close()
                self._db = None
            if isinstance(exc, StorageError):
                raise
            raise StorageError(f"cannot open database {self.path}: {exc}") from exc
        self._writer = asyncio.create_task(self._write_loop(), name="store-writer")
        self._checkpointer = asyncio.create_task(self._checkpoint_loop(), name="store-checkpoint")

    def _open_writer(self) -> sqlite3.Connection:
        """The writer's connection (autocommit: transactions are explicit). On the loop it
        never waits for a lock (busy_timeout 0): see _commit_batch."""
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA busy_timeout=0")
        # Checkpoints fsync: _checkpoint_loop runs them off the event loop instead.
        db.execute("PRAGMA wal_autocheckpoint=0")
        return db

    async def _checkpoint_loop(self) -> None:
        """Copy the log into the database now and then, on the reader's thread, so that
        the log stays short and no commit on the loop ever waits for an fsync."""
        while True:
            await asyncio.sleep(CHECKPOINT_S)
            if await self._checkpoint() > WAL_RESET_FRAMES:
                self._wal_reset_due = True

    async def _checkpoint(self, *, always: bool = False) -> int:
        """One PASSIVE checkpoint; returns the frames in the log (0 if none ran)."""
        if self._db is None or (self.commits == self._checkpointed_at and not always):
            return 0
        self._checkpointed_at = self.commits
        try:
            async with self._db.execute("PRAGMA wal_checkpoint(PASSIVE)") as cursor:
                row = await cursor.fetchone()
        except sqlite3.Error as exc:  # busy, say: the next round tries again
            log.warning("checkpoint of %s failed: %s", self.path, exc)
            return 0
        return int(row[1]) if row else 0

    async def _migrate(self) -> None:
        async with self.db.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        version = row[0] if row else 0
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"database {self.path} has schema {version}, newer than this server's "
                f"{SCHEMA_VERSION}: upgrade noughts"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            script = MIGRATIONS[target - 1]
            # executescript commits first; the script and the version bump commit together.
            await self.db.executescript(
                f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {target};\nCOMMIT;"
            )
            log.info("database %s migrated to schema %d", self.path, target)

    async def close(self) -> None:
        if self._writer is not None:
            # Let queued writes commit, then stop.
            await self._queue.join()
            self._writer.cancel()
            try:
                await self._writer
            except asyncio.CancelledError:
                pass
            self._writer = None
        if self._checkpointer is not None:
            self._checkpointer.cancel()
            try:
                await self._checkpointer
            except asyncio.CancelledError:
                pass
            self._checkpointer = None
            await self._checkpoint()
        if self._write_db is not None:
            self._write_db.close()
            self._write_db = None
        if self._db is not None:
            await self._db.close()
            self._db = None

    # --- group commit ------------------------------------------------------------

    async def _submit(self, writes: list[_Write]) -> None:
        if self._writer is None:
            raise StorageError("the store is not open")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((writes, future))
        await future

    async def _write_loop(self) -> None:
        while True:
            batch = [await self._queue.get()]
            if self._wal_reset_due:
                # No write while this checkpoint runs, so it copies the whole log and the
                # next transaction starts the log over (SQLite docs, "WAL reset").
                self._wal_reset_due = False
                await self._checkpoint(always=True)
                self.wal_resets += 1
            # Everything queued while the previous transaction committed joins this one.
            while len(batch) < self.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._commit_batch(batch)
            except Exception as exc:
                # Retry one by one so a single bad write fails alone.
                if len(batch) > 1:
                    for item in batch:
                        await self._commit_one(item)
                else:
                    self._fail(batch[0][1], exc)
            else:
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)
                self.commits += 1
                self.writes += len(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _commit_one(self, item: tuple[list[_Write], asyncio.Future[None]]) -> None:
        try:
            await self._commit_batch([item])
        except Exception as exc:
            self._fail(item[1], exc)
        else:
            if not item[1].done():
                item[1].set_result(None)
            self.commits += 1
            self.writes += 1

    @staticmethod
    def _fail(future: asyncio.Future[None], exc: Exception) -> None:
        if not future.done():
            future.set_exception(StorageError(f"database write failed: {exc}"))

    async def _commit_batch(self, batch: list[tuple[list[_Write], asyncio.Future[None]]]) -> None:
        if self._write_db is None:
            raise StorageError("the store is not open")
        # Consecutive writes with the same SQL go down in one executemany.
        runs: list[tuple[str, list[tuple[Any, ...]]]] = []
        for writes, _ in batch:
            for sql, params in writes:
                if runs and runs[-1][0] == sql:
                    runs[-1][1].append(params)
                else:
                    runs.append((sql, [params]))
        # The whole transaction in one call, here on the loop (see the module's docstring).
        try:
            _run_transaction(self._write_db, runs)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            # Another process holds the write lock (noughts arena --db on the same file, say):
            # wait for it on a thread, never on the loop.
            await asyncio.to_thread(_run_transaction_waiting, self._write_db, runs)

    # --- writes --------------------------------------------------------------------

    _INSERT_GAME = (
        "INSERT INTO games (id, game, params, status, players, result, reason, seq,"
        " created_at, started_at, ended_at, clock, tokens, private, rematch_of)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    _UPDATE_GAME = (
        "UPDATE games SET status = ?, players = ?, seq = ?, started_at = ?, tokens = ? WHERE id = ?"
    )
    _INSERT_MOVE = (
        "INSERT INTO moves (game_id, ply, seq, seat, action, at, algorithm, budget_ms,"
        " iterations, value, pv, seed, elapsed_ms, stats, clocks)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    _SET_SEQ = "UPDATE games SET seq = ? WHERE id = ? AND seq < ?"
    _INSERT_SESSION = (
        "INSERT OR IGNORE INTO sessions (token_sha256, player_id, name, bot, created_at)"
        " VALUES (?, ?, ?, ?, ?)"
    )
    _END_GAME = (
        "UPDATE games SET status = ?, result = ?, reason = ?, seq = ?, ended_at = ? WHERE id = ?"
    )
    _INSERT_EVENT = "INSERT INTO events (game_id, seq, kind, data, at) VALUES (?, ?, ?, ?, ?)"

    async def create_game(self, row: GameRow) -> None:
        await self._submit(
            [
                (
                    self._INSERT_GAME,
                    (
                        row.id,
                        row.game,
                        _json(row.params),
                        row.status,
                        _json(row.players),
                        row.result,
                        row.reason,
                        row.seq,
                        row.created_at,
                        row.started_at,
                        row.ended_at,
                        None if row.clock is None else _json(row.clock),
                        _json(row.tokens),
                        int(row.private),
                        row.rematch_of,
                    ),
                )
            ]
        )

    async def update_game(self, row: GameRow, event: EventRow | None = None) -> None:
        writes: list[_Write] = [
            (
                self._UPDATE_GAME,
                (
                    row.status,
                    _json(row.players),
                    row.seq,
                    row.started_at,
                    _json(row.tokens),
                    row.id,
                ),
            )
        ]
        if event is not None:
            writes.append(self._event_write(event))
        await self._submit(writes)

    @classmethod
    def _event_write(cls, event: EventRow) -> _Write:
        return (
            cls._INSERT_EVENT,
            (event.game_id, event.seq, event.kind, _json(event.data), event.at),
        )

    async def append_event(self, event: EventRow) -> None:
        await self._submit(
            [
                self._event_write(event),
                (self._SET_SEQ, (event.seq, event.game_id, event.seq)),
            ]
        )

    async def save_session(self, session: SessionRow) -> None:
        await self._submit(
            [
                (
                    self._INSERT_SESSION,
                    (
                        session.token_sha256,
                        session.player_id,
                        session.name,
                        int(session.bot),
                        session.created_at,
                    ),
                )
            ]
        )

    async def append_move(self, move: MoveRow, end: GameEnd | None = None) -> None:
        s = move.stats or {}
        pv = s.get("pv")
        writes: list[_Write] = [
            (
                self._INSERT_MOVE,
                (
                    move.game_id,
                    move.ply,
                    move.seq,
                    move.seat,
                    move.action,
                    move.at,
                    s.get("algorithm"),
                    s.get("budget_ms"),
                    s.get("iterations"),
                    s.get("value"),
                    None if pv is None else _json(list(pv)),
                    s.get("seed"),
                    s.get("elapsed_ms"),
                    None if move.stats is None else _json(move.stats),
                    None if move.clocks is None else _json(list(move.clocks)),
                ),
            )
        ]
        if end is not None:
            writes += self._end_writes(move.game_id, end)
        else:
            writes.append((self._SET_SEQ, (move.seq, move.game_id, move.seq)))
        await self._submit(writes)

    def _end_writes(self, game_id: str, end: GameEnd) -> list[_Write]:
        data = {"kind": "ended", "result": end.result, "reason": end.reason, "at": end.at}
        return [
            (self._END_GAME, (end.status, end.result, end.reason, end.seq, end.at, game_id)),
            self._event_write(EventRow(game_id, end.seq, "ended", data, end.at)),
        ]

    async def end_game(self, game_id: str, end: GameEnd) -> None:
        await self._submit(self._end_writes(game_id, end))

    # --- reads ---------------------------------------------------------------------

    _GAME_COLUMNS = (
        "id, game, params, status, players, result, reason, seq, created_at, started_at,"
        " ended_at, clock, tokens, private, rematch_of"
    )

    @staticmethod
    def _game_row(r: sqlite3.Row | tuple[Any, ...]) -> GameRow:
        return GameRow(
            id=r[0],
            game=r[1],
            params=json.loads(r[2]),
            status=r[3],
            players=json.loads(r[4]),
            result=r[5],
            reason=r[6],
            seq=r[7],
            created_at=r[8],
            started_at=r[9],
            ended_at=r[10],
            clock=None if r[11] is None else json.loads(r[11]),
            tokens=[None, None] if r[12] is None else json.loads(r[12]),
            private=bool(r[13]),
            rematch_of=r[14],
        )

    async def get_game(self, game_id: str) -> GameRecord | None:
        try:
            async with self.db.execute(
                f"SELECT {self._GAME_COLUMNS} FROM games WHERE id = ?", (game_id,)
            ) as cursor:
                row = await cursor.fetchone()
            if row is None:
                return None
            return await self._record(self._game_row(row))
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read game {game_id}: {exc}") from exc

    async def _record(self, row: GameRow) -> GameRecord:
        async with self.db.execute(
            "SELECT game_id, ply, seq, seat, action, at, stats, clocks FROM moves"
            " WHERE game_id = ? ORDER BY ply",
            (row.id,),
        ) as cursor:
            moves = [
                MoveRow(
                    m[0],
                    m[1],
                    m[2],
                    m[3],
                    m[4],
                    m[5],
                    None if m[6] is None else json.loads(m[6]),
                    None if m[7] is None else json.loads(m[7]),
                )
                for m in await cursor.fetchall()
            ]
        async with self.db.execute(
            "SELECT seq, data FROM events WHERE game_id = ? ORDER BY seq", (row.id,)
        ) as cursor:
            events = [{"seq": e[0], **json.loads(e[1])} for e in await cursor.fetchall()]
        return GameRecord(row, moves, events)

    async def unfinished_games(self) -> list[GameRecord]:
        try:
            async with self.db.execute(
                f"SELECT {self._GAME_COLUMNS} FROM games WHERE status IN ('open', 'live')"
                " ORDER BY created_at"
            ) as cursor:
                rows = [self._game_row(r) for r in await cursor.fetchall()]
            return [await self._record(row) for row in rows]
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read unfinished games: {exc}") from exc

    async def load_session(self, token_sha256: str) -> SessionRow | None:
        try:
            async with self.db.execute(
                "SELECT token_sha256, player_id, name, bot, created_at FROM sessions"
                " WHERE token_sha256 = ?",
                (token_sha256,),
            ) as cursor:
                r = await cursor.fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read sessions: {exc}") from exc
        return None if r is None else SessionRow(r[0], r[1], r[2], bool(r[3]), r[4])

    async def list_games(self, status: str | None = None, limit: int = 50) -> list[GameRow]:
        sql = f"SELECT {self._GAME_COLUMNS} FROM games"
        params: tuple[Any, ...] = ()
        if status is not None:
            sql += " WHERE status = ?"
            params = (status,)
        sql += " ORDER BY created_at DESC LIMIT ?"
        try:
            async with self.db.execute(sql, (*params, limit)) as cursor:
                return [self._game_row(r) for r in await cursor.fetchall()]
        except sqlite3.Error as exc:
            raise StorageError(f"cannot list games: {exc}") from exc

"""Game storage: a small interface, and SQLite behind it through aiosqlite.

Every write goes through one writer task that commits the writes queued within
the same moment in a single transaction (group commit): each caller's future
resolves only after the transaction holding its write has committed, so a move
is durable before it is acknowledged or broadcast, and under load one commit
serves many moves. A transaction runs whole (BEGIN, its statements, COMMIT) on
the writer's own thread and connection, never on the event loop: a disk that
stalls (frozen, full, or slow) stalls the writes waiting for it, not the pings,
lobby reads and games in memory the loop serves meanwhile. The loop hands the
thread one batch at a time and gathers the next batch while it commits, so the
hop costs one handoff per transaction, not per write (bench/load.py throughput:
see bench/SERVER.md). In WAL mode with synchronous=NORMAL a commit appends to
the log without fsync; what does fsync, the checkpoint that copies the log into
the database, runs on a third connection in the background (PASSIVE: alongside
the writer), so neither writes nor reads wait for it. A checkpoint that runs
alongside a busy writer never quite catches up, and the log is rewound to its
start only after one that did: so once the log file passes its limit (WAL_RESET_FRAMES
pages, or WAL_SHARE of the size cap) the writer waits for one checkpoint (its writes
queue meanwhile and commit together after it), and the log starts over, its file cut
back to that limit (``journal_size_limit``). Under the operator's size cap
(``db_max_mb``) the database file holds the rest of the cap (``max_page_count``): the
two together pass it by one transaction's pages at most.

Faults are translated once, here: a full disk, or the size cap reached (named so), is
``StorageFull``, any other failure ``StorageError``, and a
stored row that cannot be decoded quarantines its game (status ``quarantined``,
with a log line) instead of failing the read that met it.

The database runs in WAL mode (one writer, readers alongside); its schema is
versioned by ``PRAGMA user_version`` and upgraded by the ordered MIGRATIONS at
open.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import shutil
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiosqlite

from protocol.paths import (
    NoDirectory,
    default_db_path,  # noqa: F401 - one for server and client
)
from server.errors import Quarantined, SeekTaken, StorageError, StorageFull
from server.lockfile import make_db_directory, make_db_file
from server.logs import RateLimitedLog
from server.rows import (
    EventRow,
    GameEnd,
    GameRecord,
    GameRow,
    MoveRow,
    SessionRow,
    event_record,
)

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
    # 3: sessions expire when unused (seen_at; sooner if never seated: played), and a
    # player's name is bound to its session by the name's look-alike keys
    # (server/names.py): one holder per key, so no one can take a name or a look-alike.
    """
    ALTER TABLE sessions ADD COLUMN seen_at REAL;
    ALTER TABLE sessions ADD COLUMN played INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN named INTEGER NOT NULL DEFAULT 0;  -- name bound in names
    UPDATE sessions SET seen_at = created_at, played = 1;
    CREATE INDEX sessions_by_seen ON sessions (seen_at);
    CREATE INDEX sessions_by_player ON sessions (player_id);
    CREATE TABLE names (
        key         TEXT PRIMARY KEY,         -- a look-alike key of the name
        player_id   TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX names_by_player ON names (player_id);
    """,
    # 4: the seek (or quick-pairing entry) a game was made of: one game per seek, whatever a
    # cluster's Redis forgot (one that restarted empty may offer a taken seek again).
    """
    ALTER TABLE games ADD COLUMN seek_id TEXT;
    CREATE UNIQUE INDEX games_by_seek ON games (seek_id);
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

# AI statistics that get their own column; the whole dict also goes to `stats`.
STAT_COLUMNS = ("algorithm", "budget_ms", "iterations", "value", "pv", "seed", "elapsed_ms")

QUARANTINED = "quarantined"  # the status of a game whose stored rows cannot be read


class Store(ABC):
    """What the game logic needs from storage. SQLite now; another backend later."""

    # The schema version the database had when opened, before its migrations (None: not
    # opened, or a store without one): `noughts migrate` says what it did.
    schema_found: int | None = None

    @abstractmethod
    async def open(self) -> None: ...

    def describe(self) -> str:
        """Where the games are, for messages (never a password)."""
        return type(self).__name__

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
    async def game_of_seek(self, seek_id: str) -> str | None:
        """The id of the game made of a seek (or quick-pairing entry), if one was."""

    @abstractmethod
    async def list_games(
        self, status: str | None = None, limit: int = 50, *, public: bool = False
    ) -> list[GameRow]:
        """The latest games (of one status; ``public``: private ones left out)."""

    @abstractmethod
    async def unfinished_games(self, keep: Callable[[str], bool] | None = None) -> list[GameRecord]:
        """Every open or live game with its moves (``keep``: those whose id it keeps, as a
        cluster node restores the games of a shard it takes): what a restart restores."""

    # --- players: sessions and names ------------------------------------------------

    @abstractmethod
    async def save_session(self, session: SessionRow, name_keys: Iterable[str] = ()) -> None:
        """Commit a player session (only its token's hash is kept) and bind its name's
        keys to its player (keys another player holds stay theirs)."""

    @abstractmethod
    async def load_session(self, token_sha256: str) -> SessionRow | None: ...

    # False (--mark-quarantined false, the server of the commands that only read: games,
    # replay, export): a game whose rows cannot be read is left out and logged, and its
    # row left as it is; reading a database must not change its games.
    marks_quarantined: bool = True

    async def quarantine(self, game_id: str, reason: str) -> None:
        """Set aside a game whose stored rows cannot be read, so that the server goes on
        without it: logged here; a store that can also marks it (status ``quarantined``)
        so that no read meets it again, unless ``marks_quarantined`` is False. Never
        raises."""
        # Its earlier status is not lost: result and started_at tell it (README, "Storage").
        if not self.marks_quarantined:
            log.error(
                "game %s: its stored rows cannot be read (%s); left out, its row as it is "
                "(this server does not mark it %r)",
                game_id,
                reason,
                QUARANTINED,
            )
            return
        log.error(
            "game %s: its stored rows cannot be read (%s); quarantined: the server goes on "
            "without it (status %r; repair the row, then set the status back)",
            game_id,
            reason,
            QUARANTINED,
        )

    @abstractmethod
    async def name_holder(self, name_keys: Iterable[str]) -> str | None:
        """The player a name (any of its look-alike keys) is bound to, if any."""

    @abstractmethod
    async def player_session(self, player_id: str) -> SessionRow | None:
        """The session of a player (by its public id), online anywhere or not; None for a
        player without one (never was, or expired)."""

    @abstractmethod
    async def bind_name(self, player_id: str, name: str, name_keys: Iterable[str]) -> None:
        """Give a session from before names were bound its (checked, free) name."""

    @abstractmethod
    async def touch_sessions(self, player_ids: Iterable[str], now: float, played: bool) -> None:
        """Mark these players' sessions used at ``now`` (and as having played)."""

    @abstractmethod
    async def expire_sessions(self, unplayed_before: float, played_before: float) -> None:
        """Delete sessions last used before these times (by whether they ever played),
        and free their names."""


# One encoder for every column: json.dumps with separators builds a new one each call.
_json = json.JSONEncoder(separators=(",", ":")).encode


# Seconds between background checkpoints (when something was committed meanwhile).
CHECKPOINT_S = 0.5
# Frames (pages) in the log past which the writer pauses for a checkpoint: 16 MiB of 4 KiB
# pages, a few seconds of writes at full speed.
WAL_RESET_FRAMES = 4096
# Under a size cap, the share of it the log may take before it starts over (when that is
# less than WAL_RESET_FRAMES): the database file is capped at the rest.
WAL_SHARE = 0.25
# How long a write waits for another process's lock (noughts arena --db on the same file,
# say) before it fails. The writer waits on its own thread, never on the event loop.
BUSY_WAIT_MS = 5000


_Write = tuple[str, tuple[Any, ...]]
_Runs = list[tuple[str, list[tuple[Any, ...]]]]
_Item = tuple[list[_Write], asyncio.Future[None]]  # a caller's writes, settled once committed


def _append_run(runs: _Runs, sql: str, params: tuple[Any, ...]) -> None:
    """Add a write to ``runs``: to the last run if it has the same SQL (one executemany)."""
    if runs and runs[-1][0] == sql:
        runs[-1][1].append(params)
    else:
        runs.append((sql, [params]))


async def _cancel(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait for it to stop."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def is_full(exc: BaseException) -> bool:
    """A failed sqlite3 call's SQLITE_FULL: a full disk, or max_page_count reached."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_FULL


def full_error(doing: str, cap_mb: float | None = None) -> StorageFull:
    """The store's error for a write SQLite refused as full (``is_full``): the size cap
    ``cap_mb`` (settings.db_max_mb) when that is what was reached, else the disk."""
    if cap_mb is not None:
        return StorageFull(
            f"the database reached its size cap (--db-max-mb {cap_mb:g}): {doing} failed, "
            "nothing was stored"
        )
    return StorageFull(f"the server's disk is full: {doing} failed, nothing was stored")


# What a client is told when the store fails (PROTOCOL.md, "Storage"): one line whatever the
# cause, naming no path, URL or address; the cause goes to the server's log, not once per
# request (SQLStore._failure).
UNANSWERED = "the database does not answer: retry soon"
NOT_READ = "the database could not be read: retry soon"
NOT_STORED = "the database could not store it, nothing was stored: retry soon"
UNCONFIRMED = (
    "the database did not confirm the write: the outcome is unknown (resume the game, or "
    "send the request again with its ply or seq: it is never applied twice)"
)
# A game refused as the second of its seek (SeekTaken): a refusal, not a failure.
ALREADY_TAKEN = "seek already taken: a game was made of it already"


def _run_transaction(db: sqlite3.Connection, runs: _Runs) -> None:
    """BEGIN, every statement, COMMIT; on any failure ROLLBACK (on the writer's thread).

    SQLite rolls some failed transactions back by itself (a full disk, an I/O error:
    "Response To Errors Within A Transaction"); the ROLLBACK is then skipped, so the
    caller sees the error that happened, not "cannot rollback - no transaction is active".
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        for sql, rows in runs:
            db.executemany(sql, rows)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        raise


class SQLStore(Store):
    """What the SQL stores share: every statement (in the SQL both SQLite and PostgreSQL
    speak, ``?`` placeholders), the rows they write and read, quarantine, and the group
    commit: ``_submit`` returns once its writes have committed, together with whatever
    else was queued meanwhile (commit before acknowledge). A store supplies two
    primitives: ``_commit`` (one transaction, whole or not at all) and ``_fetchall`` (one
    read; StorageError on failure); and, where it differs, ``_write_error``,
    ``_before_batch`` and ``_batch_lost``."""

    def __init__(self, *, max_batch: int = 1024, writers: int = 1) -> None:
        self.max_batch = max_batch
        # Writes waiting for the next transaction; idle writers wait on _wake when none do.
        self._queue: collections.deque[_Item] = collections.deque()
        self._wake: asyncio.Future[None] | None = None
        self._idle = asyncio.Event()  # set while nothing waits and nothing commits
        self._idle.set()
        self._writer: asyncio.Task[None] | None = None
        # Writers committing at once (``writers``, each with its own connection where the
        # store has them): a write queued while one commits starts its own transaction at
        # once on another, instead of waiting for that commit to end first.
        self.writers = writers
        self._more_writers: list[asyncio.Task[None]] = []
        self._committing = 0
        self.commits = 0  # transactions committed (for benchmarks)
        self.writes = 0  # write requests committed
        # The database does not answer (connections refused or lost, no answer in time),
        # as logged once (_failure), until a read or a commit works (_works).
        self.down = False
        self._said = RateLimitedLog(log, period_s=60.0, burst=1)  # other failures' causes

    @abstractmethod
    async def _commit(self, runs: _Runs, writer: int = 0) -> None:
        """Run ``runs`` (each statement with its rows, in order) as one transaction, on
        writer ``writer``'s connection (0 to ``writers`` - 1)."""

    @abstractmethod
    async def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]: ...

    @abstractmethod
    def _write_error(self, exc: Exception) -> StorageError:
        """What a caller whose write failed with ``exc`` sees."""

    async def _before_batch(self) -> None:
        """Runs once a write is waiting, before the batch it starts is gathered."""

    def _batch_lost(self, exc: Exception) -> bool:
        """Whether ``exc`` fails every write of the batch at once (the store itself
        failed, say: its connection was lost), instead of their being retried one by one."""
        return False

    def _second_of_seek(self, exc: Exception) -> bool:
        """Whether ``exc`` is the refusal of a game whose seek has one already (games'
        unique seek_id, games_by_seek)."""
        return False

    # --- failures: one line for a client, the cause in the log -----------------------

    def _failure(self, kind: str, public: str, cause: str, *, down: bool = False) -> StorageError:
        """The StorageError of a ``kind`` ("read" or "write") that failed for ``cause``: its
        message ``public``, for a client. The cause is logged here, not per request (each
        request meeting a failed database would repeat it): a database that does not answer
        (``down``) once, until it answers again (``_works``); any other cause at most once
        a minute."""
        if not down:
            self._said.error(f"{kind} {cause}", "database %s: a %s failed (%s)",
                             self.describe(), kind, cause)  # fmt: skip
        elif not self.down:
            self.down = True
            log.error("database %s does not answer (%s); requests that need it are answered "
                      "unavailable until it does", self.describe(), cause)  # fmt: skip
        return StorageError(public, detail=cause)

    def _works(self) -> None:
        """A read or a commit worked: a database that did not answer does."""
        if self.down:
            self.down = False
            log.info("database %s answers again", self.describe())

    # --- group commit --------------------------------------------------------------

    def _start_writer(self, name: str) -> None:
        self._writer = asyncio.create_task(self._write_loop(0), name=name)
        self._more_writers = [
            asyncio.create_task(self._write_loop(i), name=f"{name}-{i}")
            for i in range(1, self.writers)
        ]

    async def _stop_writer(self) -> None:
        """Let queued writes commit, then stop the writers."""
        if self._writer is not None:
            while self._queue or not self._idle.is_set():
                await self._idle.wait()
            for task in self._more_writers:
                await _cancel(task)
            self._more_writers = []
            await _cancel(self._writer)
            self._writer = None

    def _submit(self, writes: list[_Write]) -> asyncio.Future[None]:
        """Queue ``writes`` for the next transaction; the returned future is done once it
        has committed (awaiting it is what makes a caller's write durable)."""
        if self._writer is None:
            raise StorageError("the store is not open")
        future: asyncio.Future[None] = self._writer.get_loop().create_future()
        self._queue.append((writes, future))
        self._idle.clear()
        wake = self._wake
        if wake is not None:
            self._wake = None
            if not wake.done():
                wake.set_result(None)
        return future

    async def _write_loop(self, writer: int = 0) -> None:
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            while not queue:
                if not self._committing:
                    self._idle.set()
                if self._wake is None:  # one future the idle writers share
                    self._wake = loop.create_future()
                await self._wake
            await self._before_batch()
            if not queue:  # another writer took it meanwhile
                continue
            # Everything queued while the previous transaction committed joins this one.
            count = min(len(queue), self.max_batch)
            batch = [queue.popleft() for _ in range(count)]
            self._committing += 1
            try:
                await self._commit_batch(batch, writer)
            except Exception as exc:
                # Retry one by one so a single bad write fails alone.
                if len(batch) > 1 and not self._batch_lost(exc):
                    for item in batch:
                        await self._commit_one(item, writer)
                else:
                    for _, future in batch:
                        self._fail(future, exc)
            else:
                self._resolve(batch)
            finally:
                self._committing -= 1

    async def _commit_one(self, item: _Item, writer: int = 0) -> None:
        try:
            await self._commit_batch([item], writer)
        except Exception as exc:
            self._fail(item[1], exc)
        else:
            self._resolve([item])

    def _resolve(self, batch: list[_Item]) -> None:
        self._works()
        for _, future in batch:
            if not future.done():
                future.set_result(None)
        self.commits += 1
        self.writes += len(batch)

    def _fail(self, future: asyncio.Future[None], exc: Exception) -> None:
        if not future.done():
            if self._second_of_seek(exc):  # (a refusal: the database works)
                future.set_exception(SeekTaken(ALREADY_TAKEN, detail=str(exc)))
            else:
                future.set_exception(self._write_error(exc))

    async def _commit_batch(self, batch: list[_Item], writer: int = 0) -> None:
        # Consecutive writes with the same SQL go down in one executemany. A move's or
        # event's raise of its game's seq goes last: it never lowers a seq (its guard), so
        # the batch's raises commute with each other and with every other write, and
        # taking them out leaves its moves (or events) consecutive: two executemany
        # calls for a batch of moves, not two a move (one where a move's insert raises
        # its seq itself: _INSERT_MOVE_RAISING).
        # Updates of session rows (touches, a name bound) go last too, ordered by player (a
        # stable sort: one player's keep their order): a touch only ever moves a time later
        # and a name is bound once, so they commute with the rest, and with every batch of
        # every writer and node locking session rows in one order, no two transactions
        # wait for each other in a cycle (two nodes' sweeps over the same players
        # deadlocked; PostgreSQL failed one).
        runs: _Runs = []
        raises: list[tuple[Any, ...]] = []
        sessions: list[_Write] = []
        for writes, _ in batch:
            for sql, params in writes:
                if sql is self._SET_SEQ:
                    raises.append(params)
                elif sql is self._TOUCH_SESSION or sql is self._NAME_SESSION:
                    sessions.append((sql, params))
                else:
                    _append_run(runs, sql, params)
        for sql, params in sorted(sessions, key=lambda write: write[1][-1]):
            _append_run(runs, sql, params)
        if raises:
            runs.append((self._SET_SEQ, raises))
        await self._commit(runs, writer)

    # --- writes --------------------------------------------------------------------

    _INSERT_GAME = (
        "INSERT INTO games (id, game, params, status, players, result, reason, seq,"
        " created_at, started_at, ended_at, clock, tokens, private, rematch_of, seek_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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
    _END_GAME = (
        "UPDATE games SET status = ?, result = ?, reason = ?, seq = ?, ended_at = ? WHERE id = ?"
    )
    _INSERT_EVENT = "INSERT INTO events (game_id, seq, kind, data, at) VALUES (?, ?, ?, ?, ?)"
    # A move's (or event's) row and its game's seq raise as one statement, where the SQL
    # has one (PostgreSQL: a data-modifying WITH), its parameters the row's and then
    # _SET_SEQ's: a batch of moves is then one statement, committed in one round trip.
    _INSERT_MOVE_RAISING: str | None = None
    _INSERT_EVENT_RAISING: str | None = None

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
                        row.seek_id,
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
        sql, row = self._event_write(event)
        raising = (event.seq, event.game_id, event.seq)
        if self._INSERT_EVENT_RAISING is not None:
            await self._submit([(self._INSERT_EVENT_RAISING, row + raising)])
        else:
            await self._submit([(sql, row), (self._SET_SEQ, raising)])

    async def append_move(self, move: MoveRow, end: GameEnd | None = None) -> None:
        s = move.stats
        clocks = None if move.clocks is None else _json(list(move.clocks))
        row: tuple[Any, ...]
        if s is None:  # a player's move: no search statistics
            row = (move.game_id, move.ply, move.seq, move.seat, move.action, move.at,
                   None, None, None, None, None, None, None, None, clocks)  # fmt: skip
        else:
            pv = s.get("pv")
            row = (
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
                _json(s),
                clocks,
            )
        writes: list[_Write]
        if end is not None:
            writes = [(self._INSERT_MOVE, row), *self._end_writes(move.game_id, end)]
        elif self._INSERT_MOVE_RAISING is not None:
            writes = [(self._INSERT_MOVE_RAISING, (*row, move.seq, move.game_id, move.seq))]
        else:
            writes = [(self._INSERT_MOVE, row), (self._SET_SEQ, (move.seq, move.game_id, move.seq))]
        await self._submit(writes)

    def _end_writes(self, game_id: str, end: GameEnd) -> list[_Write]:
        data = {"kind": "ended", "result": end.result, "reason": end.reason, "at": end.at}
        return [
            (self._END_GAME, (end.status, end.result, end.reason, end.seq, end.at, game_id)),
            self._event_write(EventRow(game_id, end.seq, "ended", data, end.at)),
        ]

    async def end_game(self, game_id: str, end: GameEnd) -> None:
        await self._submit(self._end_writes(game_id, end))

    # --- quarantine ----------------------------------------------------------------

    _QUARANTINE = f"UPDATE games SET status = '{QUARANTINED}' WHERE id = ?"

    async def quarantine(self, game_id: str, reason: str) -> None:
        await super().quarantine(game_id, reason)
        if not self.marks_quarantined:
            return
        try:
            await self._submit([(self._QUARANTINE, (game_id,))])
        except StorageError as exc:  # it stays unreadable; the next read tries again
            log.error("cannot quarantine game %s: %s", game_id, exc)

    @staticmethod
    def _quarantined(game_id: str, reason: str | None) -> Quarantined:
        """What a read of a quarantined game answers: what is wrong with its rows (the
        column, and the move or event), so that a user needs no server log (that of
        `noughts replay`'s own server is gone when it says so)."""
        if reason is None:  # its rows read well now: set aside for moves it could not replay
            return Quarantined(
                f"game {game_id} is quarantined (status {QUARANTINED!r}): its rows read well "
                "now (repaired since, or a server could not replay its moves); its status is "
                "set back by hand (README, Storage)",
                game_id,
            )
        return Quarantined(
            f"game {game_id} is quarantined: its stored record cannot be read: {reason}",
            game_id,
        )

    # --- reads ---------------------------------------------------------------------

    _GAME_COLUMNS = (
        "id, game, params, status, players, result, reason, seq, created_at, started_at,"
        " ended_at, clock, tokens, private, rematch_of, seek_id"
    )

    @staticmethod
    def _game_row(r: Sequence[Any]) -> GameRow:
        """A games row, decoded; CorruptRow if a column does not hold what it should."""
        players = _load(r[4], "games.players", list)
        tokens = [None, None] if r[12] is None else _load(r[12], "games.tokens", list)
        if len(players) != 2 or len(tokens) != 2:
            raise CorruptRow("games.players and games.tokens: two seats expected")
        return GameRow(
            id=r[0],
            game=r[1],
            params=_load(r[2], "games.params", dict),
            status=r[3],
            players=players,
            result=r[5],
            reason=r[6],
            seq=r[7],
            created_at=r[8],
            started_at=r[9],
            ended_at=r[10],
            clock=None if r[11] is None else _load(r[11], "games.clock", dict),
            tokens=tokens,
            private=bool(r[13]),
            rematch_of=r[14],
            seek_id=r[15],
        )

    async def get_game(self, game_id: str) -> GameRecord | None:
        """A stored game with its moves and events; Quarantined, saying why, if its rows
        cannot be read (the game is quarantined then, once) or it was quarantined before."""
        rows = await self._fetchall(
            f"SELECT {self._GAME_COLUMNS} FROM games WHERE id = ?", (game_id,)
        )
        if not rows:
            return None
        row = rows[0]
        try:
            record = await self._record(self._game_row(row))
        except CorruptRow as exc:
            if row[3] != QUARANTINED:
                await self.quarantine(game_id, str(exc))
            raise self._quarantined(game_id, str(exc)) from exc
        if row[3] == QUARANTINED:
            raise self._quarantined(game_id, None)
        return record

    async def _record(self, row: GameRow) -> GameRecord:
        moves = [
            MoveRow(
                m[0],
                m[1],
                m[2],
                m[3],
                m[4],
                m[5],
                None if m[6] is None else _load(m[6], f"moves.stats of move {m[1] + 1}", dict),
                None if m[7] is None else _load(m[7], f"moves.clocks of move {m[1] + 1}", list),
            )
            for m in await self._fetchall(
                "SELECT game_id, ply, seq, seat, action, at, stats, clocks FROM moves"
                " WHERE game_id = ? ORDER BY ply",
                (row.id,),
            )
        ]
        events = [
            event_record(e[0], e[1], _load(e[2], f"events.data of seq {e[0]}", dict), e[3])
            for e in await self._fetchall(
                "SELECT seq, kind, data, at FROM events WHERE game_id = ? ORDER BY seq", (row.id,)
            )
        ]
        return GameRecord(row, moves, events)

    async def game_of_seek(self, seek_id: str) -> str | None:
        rows = await self._fetchall("SELECT id FROM games WHERE seek_id = ?", (seek_id,))
        return str(rows[0][0]) if rows else None

    async def unfinished_games(self, keep: Callable[[str], bool] | None = None) -> list[GameRecord]:
        """Every open or live game with its moves (``keep``: of the ids it keeps); one whose
        rows cannot be read is quarantined and left out, so that the others are served."""
        rows = await self._fetchall(
            f"SELECT {self._GAME_COLUMNS} FROM games WHERE status IN ('open', 'live')"
            " ORDER BY created_at",
            (),
        )
        records = []
        for r in rows:
            if keep is not None and not keep(r[0]):
                continue
            try:
                records.append(await self._record(self._game_row(r)))
            except CorruptRow as exc:
                await self.quarantine(r[0], str(exc))
        return records

    async def list_games(
        self, status: str | None = None, limit: int = 50, *, public: bool = False
    ) -> list[GameRow]:
        """The latest games (of one status; ``public``: private ones left out); a row that
        cannot be read is quarantined and left out."""
        sql = f"SELECT {self._GAME_COLUMNS} FROM games"
        params: tuple[Any, ...] = (QUARANTINED,)
        if status is not None:
            sql += " WHERE status = ?"
            params = (status,)
        else:
            sql += " WHERE status != ?"
        if public:
            sql += " AND private = 0"
        sql += " ORDER BY created_at DESC LIMIT ?"
        games = []
        for r in await self._fetchall(sql, (*params, limit)):
            try:
                games.append(self._game_row(r))
            except CorruptRow as exc:
                await self.quarantine(r[0], str(exc))
        return games

    # --- players: sessions and names (migrations 2 and 3) ----------------------------

    _INSERT_SESSION = (
        "INSERT INTO sessions"
        " (token_sha256, player_id, name, bot, created_at, seen_at, played, named)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING"
    )
    _BIND_NAME = "INSERT INTO names (key, player_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
    _TOUCH_SESSION = (  # the later of two times, in both dialects (no max/GREATEST)
        "UPDATE sessions SET seen_at = CASE WHEN coalesce(seen_at, 0) > ? THEN seen_at"
        " ELSE ? END, played = CASE WHEN played > ? THEN played ELSE ? END"
        " WHERE player_id = ?"
    )
    _NAME_SESSION = "UPDATE sessions SET name = ?, named = 1 WHERE player_id = ?"
    _EXPIRED = (
        "(played = 0 AND coalesce(seen_at, created_at) < ?) OR coalesce(seen_at, created_at) < ?"
    )

    async def save_session(self, session: SessionRow, name_keys: Iterable[str] = ()) -> None:
        row = (
            session.token_sha256,
            session.player_id,
            session.name,
            int(session.bot),
            session.created_at,
            session.created_at if session.seen_at is None else session.seen_at,
            int(session.played),
        )
        writes: list[_Write] = [(self._INSERT_SESSION, row)]
        writes += [(self._BIND_NAME, (key, session.player_id)) for key in sorted(name_keys)]
        await self._submit(writes)

    async def load_session(self, token_sha256: str) -> SessionRow | None:
        return await self._session_where("token_sha256", token_sha256)

    async def player_session(self, player_id: str) -> SessionRow | None:
        return await self._session_where("player_id", player_id)

    async def _session_where(self, column: str, value: str) -> SessionRow | None:
        rows = await self._fetchall(
            "SELECT token_sha256, player_id, name, bot, created_at, seen_at, played, named"
            f" FROM sessions WHERE {column} = ? LIMIT 1",
            (value,),
        )
        if not rows:
            return None
        r = rows[0]
        return SessionRow(r[0], r[1], r[2], bool(r[3]), r[4], r[5], bool(r[6]), bool(r[7]))

    async def name_holder(self, name_keys: Iterable[str]) -> str | None:
        keys = sorted(name_keys)  # a name has one or two keys (server/names.py)
        if not keys or len(keys) > 2:
            raise ValueError(f"a name has one or two keys, not {len(keys)}")
        rows = await self._fetchall(
            "SELECT player_id FROM names WHERE key = ? OR key = ? LIMIT 1", (keys[0], keys[-1])
        )
        return None if not rows else str(rows[0][0])

    async def bind_name(self, player_id: str, name: str, name_keys: Iterable[str]) -> None:
        writes: list[_Write] = [(self._NAME_SESSION, (name, player_id))]
        writes += [(self._BIND_NAME, (key, player_id)) for key in sorted(name_keys)]
        await self._submit(writes)

    async def touch_sessions(self, player_ids: Iterable[str], now: float, played: bool) -> None:
        writes = [
            (self._TOUCH_SESSION, (now, now, int(played), int(played), p)) for p in player_ids
        ]
        if writes:
            await self._submit(writes)

    # A statement run before a sweep's deletes that locks the expired sessions by player,
    # the order in which every batch updates session rows (``_commit_batch``); None where
    # one writer holds the whole database (SQLite). PostgresStore sets it.
    _LOCK_EXPIRED: str | None = None

    async def expire_sessions(self, unplayed_before: float, played_before: float) -> None:
        cutoffs = (unplayed_before, played_before)
        writes: list[_Write] = [] if self._LOCK_EXPIRED is None else [(self._LOCK_EXPIRED, cutoffs)]
        writes += [
            (
                "DELETE FROM names WHERE player_id IN"
                f" (SELECT player_id FROM sessions WHERE {self._EXPIRED})",
                cutoffs,
            ),
            (f"DELETE FROM sessions WHERE {self._EXPIRED}", cutoffs),
        ]
        await self._submit(writes)


class SQLiteStore(SQLStore):
    """The SQLite store: a writer connection on its own thread doing group commit, a
    reader connection (aiosqlite), and a checkpointer connection."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_batch: int = 1024,
        max_mb: float | None = None,
    ) -> None:
        super().__init__(max_batch=max_batch)
        self.path = Path(path)
        self.max_mb = max_mb  # the database's size cap; past it writes fail with StorageFull
        self.max_pages: int | None = None  # the database file's share of it (max_page_count)
        self.wal_limit = 0  # bytes of log file past which it starts over (set at open)
        # SQLite keeps the log beside the real file, a symlink's target.
        self._wal_path = f"{os.path.realpath(self.path)}-wal"
        self._page_size = 4096
        self._db: aiosqlite.Connection | None = None
        self._write_db: sqlite3.Connection | None = None  # used on the writer thread only
        self._write_thread: ThreadPoolExecutor | None = None
        self._checkpoint_db: sqlite3.Connection | None = None  # one checkpoint at a time
        self._checkpointer: asyncio.Task[None] | None = None
        # Set by close: the checkpoint loop ends after the checkpoint it is running. It is
        # never cancelled: a cancelled await leaves its thread running the checkpoint on a
        # connection close() then frees (a segfault, seen once in a full test run).
        self._stopping = asyncio.Event()
        self._checkpointing = asyncio.Lock()  # one checkpoint at a time on its connection
        self._checkpointed_at = 0  # self.commits at the last checkpoint
        self._wal_reset_due = False  # the log is long: the writer waits for a checkpoint
        self.wal_resets = 0  # (for benchmarks)

    def describe(self) -> str:
        return str(self.path)

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StorageError("the store is not open")
        return self._db

    async def open(self) -> None:
        """Open (creating and migrating if need be) the database. The first connection is
        the writer's, opened here before anything else: a file that cannot be opened
        (missing directory, read-only filesystem, not a database) fails here, with one
        StorageError and nothing left running; so does one that opens but cannot be
        written (a read-only file), which would otherwise fail every request after."""
        try:
            make_db_directory(self.path)
            make_db_file(self.path)
            self._write_db = self._open_writer()
            self._migrate()
            _check_writable(self._write_db)
            self._checkpoint_db = self._connect()
            self._db = await aiosqlite.connect(self.path, isolation_level=None)
            await self._db.execute("PRAGMA foreign_keys=ON")
            await self._db.execute(f"PRAGMA busy_timeout={BUSY_WAIT_MS}")
        except (OSError, sqlite3.Error, StorageError) as exc:
            await self._close_connections()
            if isinstance(exc, StorageError):
                raise
            if isinstance(exc, NoDirectory):
                raise StorageError(str(exc)) from None
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_READONLY:
                raise StorageError(
                    f"cannot open database {self.path}: it is read-only, and the server "
                    "writes to it (sessions, games): make it writable, or copy it"
                ) from exc
            raise StorageError(f"cannot open database {self.path}: {exc}") from exc
        self._write_thread = ThreadPoolExecutor(1, thread_name_prefix="store-writer")
        self._start_writer("store-writer")
        self._checkpointer = asyncio.create_task(self._checkpoint_loop(), name="store-checkpoint")

    def _connect(self) -> sqlite3.Connection:
        """A connection in autocommit mode (transactions are explicit), usable from
        whichever one thread uses it at a time."""
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout={BUSY_WAIT_MS}")
        return db

    def _open_writer(self) -> sqlite3.Connection:
        db = self._connect()
        try:
            self._check_ours(db)  # before anything is changed (the journal mode persists)
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit survives a process crash (kill -9); only power
            # loss can take the last transactions (SQLite docs, "WAL mode synchronous").
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            # Checkpoints fsync: _checkpoint_loop runs them on their own connection instead.
            db.execute("PRAGMA wal_autocheckpoint=0")
            page_size = self._page_size = db.execute("PRAGMA page_size").fetchone()[0]
            self.wal_limit = WAL_RESET_FRAMES * page_size
            if self.max_mb is not None:
                cap = int(self.max_mb * 2**20)
                self.wal_limit = min(self.wal_limit, max(page_size, int(cap * WAL_SHARE)))
                self.max_pages = max(1, (cap - self.wal_limit) // page_size)
                # Past this many pages a write fails with SQLITE_FULL, as on a full disk.
                db.execute(f"PRAGMA max_page_count={self.max_pages}")
            # The first commit after the log starts over cuts its file back to this.
            db.execute(f"PRAGMA journal_size_limit={self.wal_limit}")
        except sqlite3.Error:
            db.close()
            raise
        return db

    async def _close_connections(self) -> None:
        for connection in (self._write_db, self._checkpoint_db):
            if connection is not None:
                connection.close()
        self._write_db = self._checkpoint_db = None
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def _checkpoint_loop(self) -> None:
        """Copy the log into the database now and then, on the checkpointer's connection
        (a thread of its own), so that the log stays short, no commit ever waits for an
        fsync, and no read waits behind a checkpoint."""
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), CHECKPOINT_S)
                return
            await self._checkpoint()

    async def _checkpoint(self, *, always: bool = False) -> None:
        """One PASSIVE checkpoint (if something was committed since the last, or ``always``)."""
        async with self._checkpointing:
            db = self._checkpoint_db
            if db is None or (self.commits == self._checkpointed_at and not always):
                return
            self._checkpointed_at = self.commits
            work = asyncio.ensure_future(
                asyncio.to_thread(lambda: db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
            )
            try:
                await asyncio.shield(work)
            except asyncio.CancelledError:
                # The thread runs on whatever happens to this task: hold the lock (and so
                # the connection) until it has finished.
                with contextlib.suppress(Exception):
                    await work
                raise
            except sqlite3.Error as exc:  # busy, say: the next round tries again
                log.warning("checkpoint of %s failed: %s", self.path, exc)

    def _check_ours(self, db: sqlite3.Connection) -> None:
        """StorageError for a SQLite database of another program (a mistyped --db): tables
        without a schema version, or a version without the games table. Migrating it would
        have added noughts' tables to it and turned its journal to WAL."""
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = [row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
            " ORDER BY name"
        )]  # fmt: skip
        if (version == 0 and tables) or (version > 0 and "games" not in tables):
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise StorageError(
                f"database {self.path} is not a noughts database (schema version {version}, "
                f"tables: {shown or 'none'}): it is left as it is; give the path of a noughts "
                "database, or of a new file"
            )

    def _migrate(self) -> None:
        """Upgrade the schema to SCHEMA_VERSION (at open, before anything is served)."""
        db = self._write_db
        assert db is not None
        version = db.execute("PRAGMA user_version").fetchone()[0]
        self.schema_found = int(version)
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"database {self.path} has schema {version}, newer than this server's "
                f"{SCHEMA_VERSION}: upgrade noughts"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            script = MIGRATIONS[target - 1]
            # executescript commits first; the script and the version bump commit together.
            db.executescript(
                f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {target};\nCOMMIT;"
            )
            log.info("database %s migrated to schema %d", self.path, target)

    async def close(self) -> None:
        await self._stop_writer()
        if self._write_thread is not None:
            self._write_thread.shutdown()
            self._write_thread = None
        if self._checkpointer is not None:
            self._stopping.set()
            await self._checkpointer  # ends after the checkpoint it runs, if any
            self._checkpointer = None
            await self._checkpoint()
        async with self._checkpointing:  # no checkpoint thread is left on the connection
            await self._close_connections()

    # --- reads, and the writer's side of the group commit -------------------------

    async def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]:
        try:
            async with self.db.execute(sql, params) as cursor:
                rows: list[Sequence[Any]] = list(await cursor.fetchall())
        except sqlite3.Error as exc:
            raise self._failure("read", NOT_READ, str(exc)) from exc
        self._works()
        return rows

    async def _before_batch(self) -> None:
        if self._wal_reset_due:
            # No write while this checkpoint runs, so it copies the whole log and the
            # next transaction starts the log over (SQLite docs, "WAL reset").
            self._wal_reset_due = False
            await self._checkpoint(always=True)
            self.wal_resets += 1

    def _second_of_seek(self, exc: Exception) -> bool:
        return isinstance(exc, sqlite3.IntegrityError) and "games.seek_id" in str(exc)

    def _write_error(self, exc: Exception) -> StorageError:
        # (a StorageFull naming the size cap comes from the writer's thread: _transaction)
        if isinstance(exc, StorageError):
            return exc
        if is_full(exc):
            return full_error("a database write")
        return self._failure("write", NOT_STORED, str(exc))

    async def _commit(self, runs: _Runs, writer: int = 0) -> None:
        if self._write_db is None or self._write_thread is None:
            raise StorageError("the store is not open")
        # The whole transaction on the writer's thread (see the module's docstring).
        log_bytes = await asyncio.get_running_loop().run_in_executor(
            self._write_thread, self._transaction, self._write_db, runs
        )
        if log_bytes > self.wal_limit:
            self._wal_reset_due = True

    def _transaction(self, db: sqlite3.Connection, runs: _Runs) -> int:
        """``_run_transaction`` on the writer's thread; the log file's size after it. A
        SQLITE_FULL under the size cap is StorageFull naming the cap when the disk has more
        room than the cap has left (the cap, not the disk, is what is full)."""
        try:
            _run_transaction(db, runs)
        except sqlite3.Error as exc:
            cap = self.max_pages
            if cap is not None and is_full(exc) and self._cap_reached(db, cap):
                raise full_error("a database write", self.max_mb) from exc
            raise
        try:
            return os.stat(self._wal_path).st_size
        except OSError:
            return 0

    def _cap_reached(self, db: sqlite3.Connection, max_pages: int) -> bool:
        """Whether the size cap (``max_pages``) has less room left than the disk has (on
        the writer's thread)."""
        try:
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            free = shutil.disk_usage(os.path.dirname(self._wal_path)).free
        except (sqlite3.Error, OSError):
            return False
        return (max_pages - pages) * self._page_size < free


def _check_writable(db: sqlite3.Connection) -> None:
    """Raise SQLITE_READONLY if ``db`` cannot be written: a write to the header (the
    schema version it already has), rolled back, so the file is left as it was. A
    read-only file opens and reads; only its first write fails."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(f"PRAGMA user_version = {version}")
    finally:
        db.execute("ROLLBACK")


class CorruptRow(ValueError):
    """A stored value that does not decode to what its column holds."""


def _load(text: Any, column: str, kind: type) -> Any:
    """One JSON column, decoded and checked to be a ``kind``; else CorruptRow."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise CorruptRow(f"{column}: {exc}") from exc
    if not isinstance(value, kind):
        raise CorruptRow(f"{column}: a JSON {kind.__name__} expected, not {type(value).__name__}")
    return value

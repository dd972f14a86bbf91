"""The engine pool: pre-forked worker processes that run searches off the event loop.

Each worker is a process running the engine's worker loop (engine/worker.py: one
``engine.Searcher``, so one game's searches routed to the same worker reuse their tree) on a
duplex pipe, with a stop word in shared memory; a keeper thread per worker slot turns
replies into results on the requesting event loop with ``call_soon_threadsafe``. A
pre-forked worker fed through a pipe answers in about 0.1-0.2 ms on this class of machine,
against 0.35-0.6 ms for ``run_in_executor``. Workers are started and warmed (every numba
kernel loaded) before the server accepts a connection.

Fair and self-healing (issue 11, findings 3 and 4):

- Searches wait in one queue here, and a worker is handed one only when it is idle: a
  search's budget starts when its worker starts it, so waiting is charged to no one, and a
  waiting search whose game ended is simply dropped. One running is stopped cheaply: the
  worker's clock reads a stop word in shared memory, so the search sees its deadline passed
  at its next clock check (every 2 ms at most) and the worker is free again, warm.
- Addresses, then their players, are served in turn (the one served longest ago first),
  each player with at most ``ai_running_per_player`` searches running, so no one player
  holds every worker and no one address's many sessions crowd out the others (the turn
  order of server/turns.py, which the engine queue shares).
- A search waits its turn for as long as the workers make progress (one is idle, or runs
  a search inside its budget); one that has waited ``wait_s`` while they did not (every
  worker down, restarting or overrunning) fails with ``EngineUnavailable``
  (``engine_unavailable``): the player is told in bounded time, never left in silence.
- A worker that dies is restarted in its slot, again and again, with a pause that doubles
  (0.5 s up to ``engine_restart_max_s``) while restarts keep failing. The search it was
  running starts again on the next free worker with its whole budget, once; a search that
  overruns its budget is told to stop, and its worker killed if it does not.

A worker imports only ``engine`` (its target is ``engine.worker.main``), and gets its moves
as the server checked them: it replays them unchecked.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import logging
import multiprocessing
import os
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import engine.worker as engine_worker
from engine.options import Budget
from engine.result import SearchResult
from engine.search import DEFAULT_MAX_TREE_BYTES
from engine.warmup import all_targets, is_warm, warm_up_in_background
from server.errors import EngineUnavailable
from server.settings import ServerSettings
from server.turns import TurnOrder

log = logging.getLogger(__name__)

# A search past its budget by this much is told to stop (it answers with its best so far) ...
OVERRUN_STOP_S = 1.0
# ... and past it by this much its worker is killed: it is stuck where no clock is read.
HUNG_GRACE_S = 10.0
# A search stopped because its game ended must answer within this, or its worker is killed.
STOP_GRACE_S = 2.0
# How long a warming worker may stay silent (it reports progress as it compiles kernels).
READY_TIMEOUT_S = 300.0
# How soon a worker's start in progress sees the pool closed (the server stopped).
CLOSED_CHECK_S = 0.2
# The first pause before restarting a worker that keeps dying; it doubles each time.
RESTART_FIRST_PAUSE_S = 0.5
# A worker up this long without dying has proved itself: its slot's failures are forgotten.
STABLE_S = 10.0
# How often the watchdog looks for searches waiting or running too long.
WATCH_EVERY_S = 0.05
# The game keys a slot remembers having searched (to tell it to forget them); the Searcher
# keeps the trees of at most 64.
REMEMBERED_KEYS = 256


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """An AI move to search: the game, the moves, the budget (the pool's view of it)."""

    game: str
    params: dict[str, int]
    actions: tuple[int, ...]
    algorithm: str = "mcts"
    budget_ms: float | None = 100.0
    iterations: int | None = None
    seed: int | None = None
    game_key: str | None = None  # routes one game's searches to one worker (tree reuse)
    options: dict[str, Any] = field(default_factory=dict)
    owner: str | None = None  # the player it is run for: served in turn, capped (None: not)
    address: str | None = None  # the owner's address: addresses are served in turn first

    def for_worker(self) -> engine_worker.SearchRequest:
        """What the engine's worker loop (engine/worker.py) is sent."""
        return engine_worker.SearchRequest(
            game=self.game,
            params=self.params,
            actions=self.actions,
            algorithm=self.algorithm,
            budget=Budget(self.budget_ms, self.iterations),
            seed=self.seed,
            game_key=self.game_key,
            options=self.options,
        )


# --- the messages between the pool and a worker (engine/worker.py runs the worker) -------
#
# pool -> worker   ("search", search_id, engine.worker.SearchRequest)   run it, then answer
#                  ("forget", game_key)                   drop that game's saved tree
#                  ("stop",)                              exit
# worker -> pool   ("progress", text) while warming up, then ("ready", pid)
#                  ("result", search_id, SearchResult) or ("error", search_id, text)
# shared memory    the slot's stop word: a search id; while it names the running search,
#                  the worker's clock reads ever further in the future
#                  (engine.worker.stoppable_clock): that search ends at its next clock check.


# --- the pool's side ------------------------------------------------------------------


class SlotState(enum.Enum):
    STARTING = "starting"  # its worker is warming up
    IDLE = "idle"
    BUSY = "busy"  # running one search
    DOWN = "down"  # its worker died; a restart is due


@dataclass(slots=True, eq=False)
class _Search:
    id: int
    request: SearchRequest
    future: asyncio.Future[SearchResult]
    loop: asyncio.AbstractEventLoop
    wait_s: float | None  # fails after waiting this long while the pool is stalled
    queued_at: float  # monotonic: when it joined the queue (again, after its worker died)
    started_at: float | None = None
    attempts: int = 0
    stopped_at: float | None = None  # told to stop (its game ended, or it overran)
    dropped: bool = False  # nobody wants the answer any more
    hung: bool = False  # its worker was killed for overrunning

    @property
    def owner(self) -> str | None:
        return self.request.owner

    @property
    def address(self) -> str | None:
        return self.request.address


@dataclass(slots=True, eq=False)
class _Slot:
    index: int
    state: SlotState = SlotState.DOWN
    process: Any = None
    conn: Connection | None = None
    stop_word: Any = None
    search: _Search | None = None
    up_since: float = 0.0
    failures: int = 0  # deaths and failed starts since it last proved itself
    keys: OrderedDict[str, None] = field(default_factory=OrderedDict)  # games searched here
    stale: set[str] = field(default_factory=set)  # to forget once idle

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


class EnginePool:
    """A fixed number of warm engine workers shared by every game of the server.

    The pool belongs to no particular event loop: a search's future lives on the loop that
    asked, so one pool can serve several servers (as in the tests). ``settings`` gives the
    per-player cap and the restart pauses (``ServerSettings``' engine section)."""

    def __init__(
        self,
        size: int | None = None,
        *,
        settings: ServerSettings | None = None,
        start_method: str = "spawn",
        warm: list[tuple[str, str]] | None = None,
        max_tree_bytes: int = DEFAULT_MAX_TREE_BYTES,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        settings = settings or ServerSettings()
        self.size = max(1, size or os.cpu_count() or 1)
        # (game, algorithm) targets compiled before the pool serves (None: all of them);
        # the rest are compiled in the background (engine/warmup.py).
        self.warm = warm
        self.max_tree_bytes = max_tree_bytes
        self.progress = progress
        self._background: Any = None
        self.restart_max_s = settings.engine_restart_max_s
        self._context = multiprocessing.get_context(start_method)
        self._slots: list[_Slot] = []
        # The searches waiting, in their turn order (server/turns.py).
        self._turns: TurnOrder[_Search] = TurnOrder(settings.ai_running_per_player)
        self._ids = itertools.count(1)
        self._stalled_since: float | None = None  # no worker free or in its budget since
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self.replaced = 0  # workers restarted after dying (for tests and benchmarks)
        self.failed_starts = 0  # restarts that died or timed out while warming up

    # --- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start every worker and wait until each has warmed up (blocking).

        Kernels not yet in numba's cache are compiled once: by the first worker, before
        the others start and load them (every worker compiling everything at once took
        250 s on 2 cores, issue 12). Targets outside ``warm`` are compiled afterwards by a
        background process at the lowest priority, so later games load them."""
        slots = [_Slot(i) for i in range(self.size)]
        targets = all_targets() if self.warm is None else self.warm
        try:
            if is_warm(targets):
                first: list[_Slot] = []
            else:
                first = slots[:1]
                self._spawn(first[0])
                self._await_ready(first[0], self.progress)
            for slot in slots[len(first) :]:
                self._check_open()
                self._spawn(slot)
            for slot in slots[len(first) :]:
                self._await_ready(slot, None if first else self.progress)
            with self._lock:  # (close() reads the slots under it once it says closing)
                self._check_open()
                now = time.monotonic()
                for slot in slots:
                    slot.state, slot.up_since = SlotState.IDLE, now
                self._slots = slots
        except BaseException:
            for slot in slots:
                self._reap(slot)
            raise
        rest = [t for t in all_targets() if t not in targets]
        if rest and not is_warm(rest):
            self._background = self._context.Process(  # type: ignore[attr-defined]
                target=warm_up_in_background, args=(rest,), name="noughts-compile", daemon=True
            )
            self._background.start()
        for slot in slots:
            self._thread(self._keep, slot, name=f"pool-keeper-{slot.index}")
        self._thread(self._watch, name="pool-watchdog")

    async def start_async(self) -> None:
        """``start`` in a thread. Cancelled (the server stopped while warming up), it stops
        the warm-up and returns once the workers it started are killed."""
        starting = asyncio.ensure_future(asyncio.to_thread(self.start))
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            self._closing.set()
            with contextlib.suppress(EngineUnavailable):
                await starting
            raise

    def _check_open(self) -> None:
        """EngineUnavailable once the pool is closed: a start in progress stops."""
        if self._closing.is_set():
            raise EngineUnavailable("the engine pool was closed while it started")

    def _thread(self, target: Callable[..., None], *args: Any, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _spawn(self, slot: _Slot) -> None:
        parent, child = self._context.Pipe(duplex=True)
        stop_word = self._context.RawValue("q", 0)
        process = self._context.Process(  # type: ignore[attr-defined]
            target=engine_worker.main,
            args=(child, self.warm, self.max_tree_bytes, stop_word),
            name=f"noughts-engine-{slot.index}",
            daemon=True,
        )
        process.start()
        child.close()
        slot.process, slot.conn, slot.stop_word = process, parent, stop_word

    def _await_ready(
        self,
        slot: _Slot,
        progress: Callable[[str], None] | None = None,
        timeout: float = READY_TIMEOUT_S,
    ) -> None:
        """Wait for the worker's "ready", passing its warm-up "progress" on; ``timeout`` is
        the longest silence allowed. EngineUnavailable as soon as the pool is closed."""
        assert slot.conn is not None
        while True:
            try:
                if not self._heard(slot.conn, timeout):
                    raise EngineUnavailable(
                        f"engine worker {slot.index} said nothing in {timeout}s"
                    )
                message = slot.conn.recv()
            except (EOFError, OSError) as exc:
                raise EngineUnavailable(f"engine worker {slot.index} died while starting") from exc
            if message[0] != "progress":
                break
            if progress is not None:
                progress(message[1])
        if message[0] != "ready":
            raise EngineUnavailable(f"engine worker {slot.index} sent {message!r} at start")

    def _heard(self, conn: Connection, timeout: float) -> bool:
        """Whether ``conn`` has something to read within ``timeout`` seconds, looking at the
        pool's closing at least every CLOSED_CHECK_S (a warm-up can take minutes)."""
        deadline = time.monotonic() + timeout
        while not conn.poll(min(CLOSED_CHECK_S, max(0.0, deadline - time.monotonic()))):
            self._check_open()
            if time.monotonic() >= deadline:
                return False
        return True

    def close(self) -> None:
        """Stop every worker; searches waiting or running fail with EngineUnavailable."""
        self._closing.set()
        if self._background is not None and self._background.is_alive():
            self._background.kill()  # what it compiled so far stays in the cache
            self._background.join(timeout=2)
        with self._lock:
            for search in self._turns.waiting:
                self._settle(search, "exception", EngineUnavailable("the engine pool is closed"))
            self._turns.waiting.clear()
            for slot in self._slots:
                if slot.state in (SlotState.IDLE, SlotState.BUSY):
                    self._send(slot, ("stop",))
        for slot in self._slots:
            process = slot.process
            if process is None:
                continue
            process.join(timeout=2)
            if process.is_alive():
                process.kill()
                process.join(timeout=2)
            if slot.conn is not None:
                slot.conn.close()
        with self._lock:
            for slot in self._slots:
                running = self._clear(slot)
                if running is not None:
                    error = EngineUnavailable("the engine pool is closed")
                    self._settle(running, "exception", error)
        for thread in self._threads:
            thread.join(timeout=5)

    @property
    def closed(self) -> bool:
        return self._closing.is_set()

    # --- what the server and the tests read ----------------------------------------------

    @property
    def available(self) -> bool:
        """Whether any worker is up (idle or busy) to take a search."""
        return any(slot.state in (SlotState.IDLE, SlotState.BUSY) for slot in self._slots)

    unavailable = "no engine worker is up (they are restarting): retry soon"  # (available)

    @property
    def alive(self) -> int:
        """Workers up now, idle or busy (the admin port's readiness and metrics)."""
        return sum(1 for slot in self._slots if slot.state in (SlotState.IDLE, SlotState.BUSY))

    @property
    def pending(self) -> int:
        """Searches waiting for a worker or running in one."""
        with self._lock:
            return len(self._turns.waiting) + self.busy

    @property
    def busy(self) -> int:
        """How many workers are running a search now."""
        return sum(1 for slot in self._slots if slot.state is SlotState.BUSY)

    @property
    def pids(self) -> list[int | None]:
        """Each slot's worker process, starting or up (None while a slot is down)."""
        return [None if slot.state is SlotState.DOWN else slot.pid for slot in self._slots]

    def busy_pids(self) -> list[int]:
        return [s.pid for s in self._slots if s.state is SlotState.BUSY and s.pid is not None]

    def searches_of(self, owner: str) -> int:
        """Searches run for ``owner`` that are waiting or running now."""
        with self._lock:
            return self._turns.held(owner)

    def worker_for(self, game_key: str | None) -> int:
        """The worker a game's searches prefer: the same one every time, for tree reuse."""
        if game_key is None:
            return -1
        return zlib.crc32(game_key.encode()) % self.size

    # --- searches ------------------------------------------------------------------------

    async def search(self, request: SearchRequest, *, wait_s: float | None = None) -> SearchResult:
        """Run one search in a worker.

        Raises EngineUnavailable if it has waited ``wait_s`` seconds while the pool was
        stalled (``_working``); the wait is not part of its budget. Cancelling the caller
        drops the search, or stops it if it is running."""
        if self.closed or not self._slots:
            raise EngineUnavailable("the engine pool is not running")
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        search = _Search(
            id=next(self._ids),
            request=request,
            future=loop.create_future(),
            loop=loop,
            wait_s=wait_s,
            queued_at=now,
        )
        with self._lock:
            self._turns.join(search)
            self._dispatch()
        try:
            return await search.future
        except asyncio.CancelledError:
            self._drop(search)
            raise

    def _drop(self, search: _Search) -> None:
        """Nobody wants this search's answer: forget it if waiting, stop it if running."""
        with self._lock:
            if search.dropped:
                return
            search.dropped = True
            if self._turns.withdraw(search):
                return
            for slot in self._slots:
                if slot.search is search:
                    self._stop(slot, search)

    def forget(self, game_key: str) -> None:
        """Drop a finished game's saved search tree from the workers that searched it."""
        with self._lock:
            for slot in self._slots:
                if game_key in slot.keys:
                    del slot.keys[game_key]
                    slot.stale.add(game_key)
                    if slot.state is SlotState.IDLE:
                        self._flush(slot)

    # --- scheduling (all under self._lock) -------------------------------------------------

    def _dispatch(self) -> None:
        """Hand waiting searches to idle workers, in their turn order (server/turns.py)."""
        while not self.closed:
            idle = [slot for slot in self._slots if slot.state is SlotState.IDLE]
            if not idle:
                return
            search = self._turns.next()
            if search is None:
                return
            preferred = self.worker_for(search.request.game_key)
            slot = next((s for s in idle if s.index == preferred), idle[0])
            self._begin(slot, search)

    def _begin(self, slot: _Slot, search: _Search) -> None:
        self._turns.begin(search)
        slot.state, slot.search = SlotState.BUSY, search
        search.started_at = time.monotonic()
        search.attempts += 1
        key = search.request.game_key
        if key is not None:
            slot.keys[key] = None
            slot.keys.move_to_end(key)
            while len(slot.keys) > REMEMBERED_KEYS:
                slot.keys.popitem(last=False)
        self._send(slot, ("search", search.id, search.request.for_worker()))

    def _clear(self, slot: _Slot) -> _Search | None:
        """Take the running search off a slot (it answered, or the worker died)."""
        search, slot.search = slot.search, None
        if search is not None:
            self._turns.end(search)
        return search

    def _stop(self, slot: _Slot, search: _Search) -> None:
        if search.stopped_at is None:
            search.stopped_at = time.monotonic()
        if slot.stop_word is not None:
            slot.stop_word.value = search.id

    def _flush(self, slot: _Slot) -> None:
        for key in slot.stale:
            self._send(slot, ("forget", key))
        slot.stale.clear()

    def _send(self, slot: _Slot, message: tuple[Any, ...]) -> None:
        try:
            if slot.conn is not None:
                slot.conn.send(message)
        except (OSError, ValueError):
            pass  # the keeper sees the broken pipe and restarts the worker

    def _settle(self, search: _Search, kind: str, payload: Any) -> None:
        if search.dropped and kind != "exception":
            return
        try:
            search.loop.call_soon_threadsafe(_resolve, search.future, kind, payload)
        except RuntimeError:  # the asking event loop is closed: nobody waits any more
            pass

    # --- keepers: one thread per slot reads its worker's replies and restarts it ----------------

    def _keep(self, slot: _Slot) -> None:
        while True:
            self._read(slot)
            if self.closed:
                return
            self._lost(slot)
            while not self._restart(slot):
                if self.closed:
                    return

    def _read(self, slot: _Slot) -> None:
        assert slot.conn is not None
        while True:
            try:
                message = slot.conn.recv()
            except (EOFError, OSError, ValueError):
                return
            if message[0] not in ("result", "error"):
                continue
            with self._lock:
                search = slot.search
                if search is None or search.id != message[1]:
                    continue
                self._clear(slot)
                self._turns.release(search)
                slot.state = SlotState.IDLE
                slot.failures = 0
                self._flush(slot)
                self._dispatch()
                self._settle(search, message[0], message[2])

    def _lost(self, slot: _Slot) -> None:
        """The slot's worker died: its search runs again elsewhere (once), or fails."""
        now = time.monotonic()
        with self._lock:
            slot.state = SlotState.DOWN
            slot.failures = 1 if now - slot.up_since >= STABLE_S else slot.failures + 1
            slot.keys.clear()
            slot.stale.clear()
            search = self._clear(slot)
            if search is not None:
                if search.dropped:
                    self._turns.release(search)
                elif search.hung or search.attempts >= 2:
                    self._turns.release(search)
                    why = "overran its budget" if search.hung else "killed its worker twice"
                    error = EngineUnavailable(f"the AI's search {why}")
                    self._settle(search, "exception", error)
                else:  # first in the queue again, with its whole budget
                    search.started_at = search.stopped_at = None
                    search.queued_at = now
                    self._turns.wait_again(search)
                    self._dispatch()
        log.warning(
            "engine worker %d (pid %s) died%s; restarting it",
            slot.index,
            slot.pid,
            f" with the search of {search.request.game_key}" if search is not None else "",
        )
        self._reap(slot)

    def _reap(self, slot: _Slot) -> None:
        process = slot.process
        if process is not None:
            if process.is_alive():
                process.kill()
            process.join(timeout=5)
        if slot.conn is not None:
            slot.conn.close()

    def _restart(self, slot: _Slot) -> bool:
        """One attempt to bring the slot back, after its pause; False if it failed."""
        pause = self._pause(slot.failures)
        if pause > 0:
            log.warning("engine worker %d: next restart in %.1f s", slot.index, pause)
            if self._closing.wait(pause):
                return False
        with self._lock:
            if self.closed:
                return False
            slot.state = SlotState.STARTING
        try:
            self._spawn(slot)
            self._await_ready(slot)
        except Exception as exc:
            with self._lock:
                slot.state = SlotState.DOWN
                slot.failures += 1
                self.failed_starts += 1
            log.error("engine worker %d could not restart: %s", slot.index, exc)
            self._reap(slot)
            return False
        with self._lock:
            if self.closed:
                return False
            slot.state, slot.up_since = SlotState.IDLE, time.monotonic()
            self.replaced += 1
            self._dispatch()
        log.info("engine worker %d is back (pid %s)", slot.index, slot.pid)
        return True

    def _pause(self, failures: int) -> float:
        """No pause after a first death; then 0.5 s, doubling, up to restart_max_s."""
        if failures <= 1:
            return 0.0
        return min(self.restart_max_s, RESTART_FIRST_PAUSE_S * 2 ** (failures - 2))

    # --- the watchdog: searches waiting or running too long --------------------------------

    def _watch(self) -> None:
        while not self._closing.wait(WATCH_EVERY_S):
            now = time.monotonic()
            with self._lock:
                if self._working(now):
                    self._stalled_since = None
                elif self._stalled_since is None:
                    self._stalled_since = now
                stalled = 0.0 if self._stalled_since is None else now - self._stalled_since
                expired = [
                    s
                    for s in self._turns.waiting
                    if s.wait_s is not None and min(now - s.queued_at, stalled) >= s.wait_s
                ]
                for search in expired:
                    self._turns.withdraw(search)
                    self._settle(search, "exception", self._unavailable(search))
                doomed = [(s.index, s.process) for s in self._slots if self._stuck(s, now)]
            for index, process in doomed:
                log.warning("engine worker %d does not stop its search; killing it", index)
                process.kill()

    def _working(self, now: float) -> bool:
        """Whether the pool makes progress: a worker is idle (the searches waiting wait for
        their player's turn) or runs a search inside its budget. Searches queue behind
        others for as long as that holds; only a stalled pool (every worker down,
        restarting or overrunning) fails them."""
        for slot in self._slots:
            if slot.state is SlotState.IDLE:
                return True
            search = slot.search
            if slot.state is SlotState.BUSY and search is not None and search.started_at:
                if now - search.started_at <= _budget_s(search) + OVERRUN_STOP_S:
                    return True
        return False

    def _stuck(self, slot: _Slot, now: float) -> bool:
        """Stop a search running past its budget; True if its worker must be killed: the
        search ran on long past that, or was stopped for its game and did not answer."""
        search = slot.search
        if slot.state is not SlotState.BUSY or search is None or search.started_at is None:
            return False
        over = now - search.started_at - _budget_s(search)
        if over > OVERRUN_STOP_S and search.stopped_at is None:
            self._stop(slot, search)
        stopped_for = 0.0 if search.stopped_at is None else now - search.stopped_at
        if over > HUNG_GRACE_S or (search.dropped and stopped_for > STOP_GRACE_S):
            search.hung = not search.dropped
            return True
        return False

    def _unavailable(self, search: _Search) -> EngineUnavailable:
        up = self.available
        why = "every engine worker is stuck past its budget" if up else "no engine worker is up"
        return EngineUnavailable(f"{why}: the AI's move could not start within {search.wait_s}s")


def _budget_s(search: _Search) -> float:
    """A search's budget in seconds (one of iterations only: a minute, for the watchdog)."""
    return (search.request.budget_ms or 60_000.0) / 1000.0


def _resolve(future: asyncio.Future[SearchResult], kind: str, payload: Any) -> None:
    if future.done():
        return
    if kind == "result":
        future.set_result(payload)
    elif kind == "exception":
        future.set_exception(payload)
    else:
        future.set_exception(EngineUnavailable(f"search failed: {payload}"))

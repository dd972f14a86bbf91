"""The engine worker: one loop for every process that searches for another (the server's
pool, root parallelism, the bench), and a handle to start one.

A worker holds one ``Searcher`` (so the searches of one game sent to the same worker reuse
its tree) and answers messages on a ``multiprocessing`` connection:

    ("search", id, SearchRequest)  ->  ("result", id, SearchResult) or ("error", id, text)
    ("forget", game_key)               drop what is kept for a finished game
    ("ping", token)                ->  ("pong", token)
    ("stop",)                          end the loop

A worker may also share a stop word with its parent (a 64-bit integer in shared memory):
while it holds the id of the running search, the worker's clock reads ever further in the
future (``stoppable_clock``), so that search ends at its next clock check, as at its
deadline, with its best move so far. That is how the server's pool stops the search of a
game that ended without killing a warm worker.

Before its first answer it warms up (engine/warmup.py: compiles or loads the kernels the
given targets need, reporting ("progress", text) as it goes) and says ("ready", pid).
What crosses the pipe is small and picklable (STYLE.md section 3): the game's name and
parameters, the move list, the budget and the options; back, the typed result.

The moves were checked at the trust boundary (the server applying each player's move), so
the worker replays them unchecked.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.games import replay
from engine.options import DEFAULT_BUDGET, Budget, Options
from engine.result import SearchResult
from engine.search import DEFAULT_MAX_TREE_BYTES, Searcher

__all__ = [
    "SearchRequest",
    "WorkerProcess",
    "main",
    "run",
    "serve",
    "stoppable_clock",
    "stopping_clock",
]

Target = tuple[str, str]  # (game name, algorithm) to warm up


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """Everything a worker needs, small and picklable: the game, the moves, the budget."""

    game: str
    params: Mapping[str, int]
    actions: tuple[int, ...]
    algorithm: str = "mcts"
    budget: Budget = DEFAULT_BUDGET
    seed: int | None = None
    game_key: str | None = None  # routes one game's searches to one worker (tree reuse)
    options: Options | Mapping[str, Any] | None = field(default=None)


def run(searcher: Searcher, request: SearchRequest) -> SearchResult:
    """Answer one request: rebuild the position from its (trusted) moves and search it."""
    state = replay((request.game, dict(request.params)), request.actions, trusted=True)
    return searcher.search(
        state,
        request.algorithm,
        request.budget,
        seed=request.seed,
        game_key=request.game_key,
        options=request.options,
    )


NO_SEARCH = -1  # what ``running`` holds between searches (search ids are positive)
_FAR_FUTURE_S = 1e9  # how far a stopped search's clock jumps at each reading


def stopping_clock(stopped: Callable[[], bool]) -> Callable[[], float]:
    """``time.perf_counter``, unless ``stopped()``: then each reading is a further
    ``_FAR_FUTURE_S`` on, past every deadline, even one computed from an earlier stopped
    reading (a stop that came before the search read its start time). Every search reads
    its injected clock between chunks of work (the compiled kernels too), so this stops any
    of them. Its readings are no durations: a Searcher times its searches on a ``timer``."""
    perf_counter = time.perf_counter
    jumps = 0

    def clock() -> float:
        nonlocal jumps
        now = perf_counter()
        if not stopped():
            return now
        jumps += 1
        return now + jumps * _FAR_FUTURE_S

    return clock


def stoppable_clock(stop_word: Any, running: list[int]) -> Callable[[], float]:
    """``stopping_clock`` stopped while ``stop_word.value`` names the running search
    (``running[0]``): the pool's way to stop a worker's search from outside."""
    return stopping_clock(lambda: bool(stop_word.value == running[0]))


def serve(conn: Any, searcher: Searcher, running: list[int] | None = None) -> None:
    """Answer messages on ``conn`` (module docstring) until "stop" or the pipe closes;
    ``running`` gets the id of the search in progress (for ``stoppable_clock``)."""
    running = [NO_SEARCH] if running is None else running
    while True:
        try:
            message = conn.recv()
            kind = message[0]
            if kind == "search":
                _, request_id, request = message
                running[0] = request_id
                try:
                    result = run(searcher, request)
                    reply: tuple[Any, ...] = ("result", request_id, result)
                except Exception as exc:  # reported to the caller; the worker carries on
                    reply = ("error", request_id, f"{type(exc).__name__}: {exc}")
                finally:
                    running[0] = NO_SEARCH
                conn.send(reply)
            elif kind == "forget":
                searcher.forget(message[1])
            elif kind == "ping":
                conn.send(("pong", message[1]))
            else:
                return
        except (EOFError, OSError):
            return  # the other end is gone


def main(
    conn: Any,
    warm: Iterable[Target] | None = (),
    max_tree_bytes: int = DEFAULT_MAX_TREE_BYTES,
    stop_word: Any = None,
) -> None:
    """A worker process's entry point: warm up ``warm`` (None: everything), say ready, serve
    (with a clock ``stop_word`` can stop, if given).

    Ctrl-C in a terminal reaches the whole process group: the worker leaves it to its
    parent, which stops it."""
    from engine.warmup import warm_up

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        warm_up(
            None if warm is None else list(warm),
            progress=lambda text: conn.send(("progress", text)),
        )
        conn.send(("ready", os.getpid()))
    except (EOFError, OSError):
        return
    running = [NO_SEARCH]
    clock = time.perf_counter if stop_word is None else stoppable_clock(stop_word, running)
    serve(conn, Searcher(clock, max_tree_bytes, timer=time.perf_counter), running)


class WorkerProcess:
    """A worker started with ``spawn`` (no state inherited from the parent), and its pipe."""

    def __init__(
        self,
        *,
        warm: Iterable[Target] | None = (),
        max_tree_bytes: int = DEFAULT_MAX_TREE_BYTES,
        name: str | None = None,
        start_method: str = "spawn",
    ) -> None:
        context = multiprocessing.get_context(start_method)
        self.conn, child = context.Pipe(duplex=True)
        self.process: Any = context.Process(  # type: ignore[attr-defined]
            target=main,
            args=(child, None if warm is None else tuple(warm), max_tree_bytes),
            name=name,
            daemon=True,
        )
        self.process.start()
        child.close()

    @property
    def pid(self) -> int | None:
        return int(self.process.pid) if self.process.pid is not None else None

    def wait_ready(
        self, timeout: float = 600.0, progress: Callable[[str], None] | None = None
    ) -> bool:
        """Wait for "ready", passing each "progress" text on; False if the worker died or
        said nothing for ``timeout`` seconds."""
        while True:
            try:
                if not self.conn.poll(timeout):
                    return False
                message = self.conn.recv()
            except (EOFError, OSError):
                return False
            if message[0] == "ready":
                return True
            if message[0] == "progress" and progress is not None:
                progress(message[1])

    def send(self, message: tuple[Any, ...]) -> None:
        self.conn.send(message)

    def recv(self) -> Any:
        return self.conn.recv()

    def search(self, request_id: int, request: SearchRequest) -> None:
        self.conn.send(("search", request_id, request))

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to stop; kill it if it does not within ``timeout`` seconds."""
        try:
            self.conn.send(("stop",))
        except (OSError, ValueError):
            pass
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()

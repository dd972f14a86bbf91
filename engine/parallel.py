"""Root parallelization across worker processes (Chaslot, Winands & van den Herik 2008).

``RootParallel(n)`` starts ``n`` worker processes, each holding its own ``Searcher``; a search
runs the same request in every worker at once, with seeds ``seed, seed + 1, ...``, and the
root statistics are merged by ``engine.mcts.merge_root_results`` (visit counts summed per
root move, the most visited move played; a proof from any worker wins). Each worker keeps
its own tree between the moves of one game (``game_key``), so tree reuse works as with one
process. ``RootParallel`` searches as a ``Searcher`` does (same ``search`` signature), for the
algorithms whose registry entry says ``root_parallel`` (mcts, uct).

The workers run the engine's one worker loop (engine/worker.py): what crosses the process
boundary is a small picklable request, and back the typed result. They are started with
``spawn`` and warmed (every kernel loaded) before the first search.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.algorithms import ALGORITHMS
from engine.algorithms import algorithm as algorithm_entry
from engine.errors import EngineError
from engine.game import State
from engine.mcts import merge_root_results
from engine.options import DEFAULT_BUDGET, Budget, Options, parse_options
from engine.result import SearchResult
from engine.worker import SearchRequest, WorkerProcess

__all__ = ["RootParallel"]

# Sending the request and the reply through pipes takes a fraction of a millisecond: each
# worker gets the budget less this, so the merged move still comes within the budget.
PIPE_MARGIN_MS = 0.5


class RootParallel:
    """``workers`` processes searching the same position independently (module docstring).
    ``search`` takes what ``Searcher.search`` takes."""

    def __init__(self, workers: int) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise EngineError(
                f"root parallelization needs a positive number of workers: {workers!r}"
            )
        self._workers: list[WorkerProcess] = []
        try:
            for _ in range(workers):
                self._workers.append(WorkerProcess(warm=None))
            for worker in self._workers:
                if not worker.wait_ready():
                    raise EngineError("a root-parallel worker did not start")
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        return len(self._workers)

    def search(
        self,
        state: State,
        algorithm: str = "mcts",
        budget: Budget = DEFAULT_BUDGET,
        *,
        seed: int | None = None,
        game_key: str | None = None,
        options: Options | Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """One search per worker, merged. The budget applies to each worker (so the merged
        result holds about ``workers`` times the iterations)."""
        entry = algorithm_entry(algorithm)
        if not entry.root_parallel:
            names = " and ".join(name for name, e in ALGORITHMS.items() if e.root_parallel)
            raise EngineError(
                f"root parallelization merges the root statistics of {names} searches, "
                f"not of {algorithm!r}"
            )
        typed = parse_options(entry.options, options, algorithm)
        worker_budget = budget
        if budget.time_ms is not None and budget.time_ms > 4 * PIPE_MARGIN_MS:
            worker_budget = Budget(budget.time_ms - PIPE_MARGIN_MS, budget.iterations)
        game_name, params = state.game.spec()
        actions = tuple(state.history())
        for i, worker in enumerate(self._workers):
            request = SearchRequest(
                game=game_name,
                params=params,
                actions=actions,
                algorithm=algorithm,
                budget=worker_budget,
                seed=None if seed is None else seed + i,
                game_key=game_key,
                options=typed,
            )
            worker.search(i, request)
        results, errors = [], []
        for worker in self._workers:
            kind, _, payload = worker.recv()
            if kind == "result":
                results.append(payload)
            else:
                errors.append(payload)
        if errors:
            raise EngineError(f"root-parallel search failed: {errors[0]}")
        return merge_root_results(results)

    def forget(self, game_key: str) -> None:
        for worker in self._workers:
            worker.send(("forget", game_key))

    def close(self) -> None:
        for worker in self._workers:
            worker.stop()
        self._workers = []

    def __enter__(self) -> RootParallel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""Root parallelization across worker processes (Chaslot, Winands & van den Herik 2008).

``RootParallel(n)`` starts ``n`` worker processes, each holding its own ``Searcher``; a search
runs the same request in every worker at once, with seeds ``seed, seed + 1, ...``, and the
root statistics are merged by ``engine.mcts.merge_root_results`` (visit counts summed per
root move, the most visited move played; a proof from any worker wins). Each worker keeps
its own tree between the moves of one game (``game_key``), so tree reuse works as with one
process. ``Searcher.search(..., root_workers=n)`` uses one of these, started on first use.

What crosses the process boundary is small and picklable (STYLE.md section 3): the game's
name and parameters, the move list, the budget and the options, and back the result as a
dict. The workers are started with ``spawn`` and warmed (every kernel loaded) before the
first search, never on a request's budget after the first.
"""

from __future__ import annotations

import os
from typing import Any

from engine.errors import EngineError
from engine.search import SearchResult

__all__ = ["ROOT_PARALLEL_ALGORITHMS", "RootParallel"]

ROOT_PARALLEL_ALGORITHMS = ("mcts", "uct")
# Sending the request and the reply through pipes takes a fraction of a millisecond: each
# worker gets the budget less this, so the merged move still comes within the budget.
PIPE_MARGIN_MS = 0.5


def _worker_main(conn: Any) -> None:
    """A worker: warm the engine, then answer search requests until told to stop."""
    import engine

    engine.warm_up()
    searcher = engine.Searcher()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if message[0] == "search":
            _, game_spec, actions, kwargs = message
            try:
                state = engine.replay(game_spec, actions)
                conn.send(("result", searcher.search(state, **kwargs).to_dict()))
            except Exception as exc:  # reported to the caller; the worker carries on
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
        elif message[0] == "forget":
            searcher.forget(message[1])
        else:
            return


def _from_dict(data: dict[str, Any]) -> SearchResult:
    data = dict(data)
    data["pv"] = tuple(data.get("pv") or ())
    visits = data.get("visits")
    data["visits"] = None if visits is None else tuple((int(a), int(v)) for a, v in visits)
    return SearchResult(**data)


class RootParallel:
    """``workers`` processes searching the same position independently (module docstring)."""

    def __init__(self, workers: int) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise EngineError(f"root_workers must be a positive integer, not {workers!r}")
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._conns: list[Any] = []
        self._processes: list[Any] = []
        try:
            for _ in range(workers):
                parent, child = context.Pipe()
                process = context.Process(target=_worker_main, args=(child,), daemon=True)
                process.start()
                child.close()
                self._conns.append(parent)
                self._processes.append(process)
            for conn in self._conns:
                if conn.recv()[0] != "ready":
                    raise EngineError("a root-parallel worker did not start")
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        return len(self._conns)

    def search(
        self,
        state: Any,
        algorithm: str = "mcts",
        budget_ms: float | None = None,
        iterations: int | None = None,
        seed: int | None = None,
        game_key: str | None = None,
        **options: Any,
    ) -> SearchResult:
        """One search per worker, merged. ``budget_ms`` / ``iterations`` apply to each worker
        (so the merged result holds about ``workers`` times the iterations)."""
        from engine.mcts import merge_root_results

        if algorithm not in ROOT_PARALLEL_ALGORITHMS:
            names = ", ".join(ROOT_PARALLEL_ALGORITHMS)
            raise EngineError(
                f"root parallelization merges tree searches ({names}), not {algorithm!r}"
            )
        worker_budget = budget_ms
        if budget_ms is not None and budget_ms > 4 * PIPE_MARGIN_MS:
            worker_budget = budget_ms - PIPE_MARGIN_MS
        game_spec = state.game.spec()
        actions = list(state.history())
        for i, conn in enumerate(self._conns):
            kwargs = {
                "algorithm": algorithm,
                "budget_ms": worker_budget,
                "iterations": iterations,
                "seed": None if seed is None else seed + i,
                "game_key": game_key,
                **options,
            }
            conn.send(("search", game_spec, actions, kwargs))
        results, errors = [], []
        for conn in self._conns:
            kind, payload = conn.recv()
            if kind == "result":
                results.append(_from_dict(payload))
            else:
                errors.append(payload)
        if errors:
            raise EngineError(f"root-parallel search failed: {errors[0]}")
        return merge_root_results(results)

    def forget(self, game_key: str) -> None:
        for conn in self._conns:
            conn.send(("forget", game_key))

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(("stop",))
                conn.close()
            except OSError:
                pass
        for process in self._processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
        self._conns = []
        self._processes = []

    def __enter__(self) -> RootParallel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

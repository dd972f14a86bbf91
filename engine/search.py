"""The search front door: ``search()``, ``Searcher``, ``SearchResult`` and the algorithm registry.

Every algorithm is a function
``fn(state, *, deadline, iterations, seed, clock, options, cache) -> SearchResult``
where ``deadline`` is an absolute ``clock()`` time or None, ``iterations`` the
playout/node budget or None, and ``cache`` the per-game dict a ``Searcher``
keeps between the moves of one game (tree reuse; an empty dict for a fresh
search). The front door validates the request, turns the millisecond budget
into a deadline, and stamps the result with the elapsed time, seed and budget.
"""

from __future__ import annotations

import importlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from engine.errors import EngineError
from engine.game import State

DEFAULT_BUDGET_MS = 100.0
MAX_CACHED_GAMES = 64  # a Searcher keeps tree-reuse state for at most this many games


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What a search decided and what it did to decide it (never its tree)."""

    action: int
    value: float  # expected return for the player to move at the root, in [-1, 1]
    algorithm: str
    iterations: int  # playouts for Monte Carlo searches, nodes for tree searches
    elapsed_ms: float = 0.0
    pv: tuple[int, ...] = ()
    visits: tuple[tuple[int, int], ...] | None = None
    depth: int | None = None
    proven: str | None = None  # "win" | "draw" | "loss" for the player to move, if proven
    seed: int | None = None
    budget_ms: float | None = None

    @property
    def win_probability(self) -> float:
        return (self.value + 1.0) / 2.0

    def to_dict(self) -> dict[str, Any]:
        """Plain builtins only (lists for tuples), for storage and the wire."""
        # Shallow: dataclasses.asdict deep-copies each of up to 225 visit pairs (about
        # 1 ms on gomoku, paid in the worker after the deadline on every AI move).
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["pv"] = list(self.pv)
        data["visits"] = None if self.visits is None else [list(v) for v in self.visits]
        return data


AlgorithmFunc = Callable[..., SearchResult]
ALGORITHM_FUNCS: dict[str, AlgorithmFunc] = {}
# The order names are listed in engine.ALGORITHMS.
ALGORITHM_ORDER = ("random", "flat", "mcts", "minimax", "alphabeta", "perfect", "uct")


class _DefaultBudget(float):
    """The default 100 ms budget, told apart from an explicit ``budget_ms=100``:
    with an iteration budget and no explicit time budget the search is
    deterministic (no deadline)."""

    def __repr__(self) -> str:
        return "DEFAULT_BUDGET"


DEFAULT_BUDGET = _DefaultBudget(DEFAULT_BUDGET_MS)


class Searcher:
    """Runs searches; keeps per-game state (MCTS tree reuse) keyed by ``game_key``.

    One per worker process. ``clock`` is injected (seconds, monotonic)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self._caches: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._parallel: Any = None  # engine.parallel.RootParallel, for the root_workers option

    def search(
        self,
        state: State,
        algorithm: str = "mcts",
        budget_ms: float | None = DEFAULT_BUDGET,
        iterations: int | None = None,
        seed: int | None = None,
        game_key: str | None = None,
        **options: Any,
    ) -> SearchResult:
        start = self.clock()
        func = ALGORITHM_FUNCS.get(algorithm)
        if func is None:
            raise EngineError(
                f"unknown algorithm {algorithm!r}: choose one of {', '.join(algorithms())}"
            )
        if state.is_terminal():
            raise EngineError("the game is over: there is no move to search for")
        if isinstance(budget_ms, _DefaultBudget):
            budget_ms = None if iterations is not None else DEFAULT_BUDGET_MS
        if budget_ms is not None and not budget_ms > 0:
            raise EngineError(f"budget_ms must be positive, not {budget_ms!r}")
        if iterations is not None and (isinstance(iterations, bool) or iterations < 1):
            raise EngineError(f"iterations must be a positive integer, not {iterations!r}")
        if budget_ms is None and iterations is None:
            budget_ms = DEFAULT_BUDGET_MS
        deadline = None if budget_ms is None else start + budget_ms / 1000.0
        workers = options.pop("root_workers", 1)
        if workers != 1:
            # Root parallelization: the same search in `workers` processes, merged.
            left_ms = None if budget_ms is None else budget_ms - (self.clock() - start) * 1000.0
            result = self._root_parallel(workers, algorithm).search(
                state,
                algorithm,
                budget_ms=left_ms,
                iterations=iterations,
                seed=seed,
                game_key=game_key,
                **options,
            )
        else:
            result = func(
                state,
                deadline=deadline,
                iterations=iterations,
                seed=seed,
                clock=self.clock,
                options=options,
                cache=self._cache_for(game_key),
            )
        elapsed_ms = (self.clock() - start) * 1000.0
        return replace(
            result,
            algorithm=algorithm,
            elapsed_ms=elapsed_ms,
            seed=seed,
            budget_ms=budget_ms,
        )

    def forget(self, game_key: str) -> None:
        """Drop what was kept for one game (it ended)."""
        self._caches.pop(game_key, None)
        if self._parallel is not None:
            self._parallel.forget(game_key)

    def close(self) -> None:
        """Stop the root-parallel worker processes, if the root_workers option started some."""
        if self._parallel is not None:
            self._parallel.close()
            self._parallel = None

    def _root_parallel(self, workers: Any, algorithm: str) -> Any:
        from engine.parallel import ROOT_PARALLEL_ALGORITHMS, RootParallel

        if algorithm not in ROOT_PARALLEL_ALGORITHMS:
            names = " and ".join(ROOT_PARALLEL_ALGORITHMS)
            raise EngineError(
                f"root_workers merges the root statistics of {names} searches, not of {algorithm!r}"
            )
        if self._parallel is not None and self._parallel.workers != workers:
            self.close()
        if self._parallel is None:
            self._parallel = RootParallel(workers)
        return self._parallel

    def _cache_for(self, game_key: str | None) -> dict[str, Any]:
        if game_key is None:
            return {}
        cache = self._caches.get(game_key)
        if cache is None:
            cache = self._caches[game_key] = {"game_key": game_key}
            while len(self._caches) > MAX_CACHED_GAMES:
                self._caches.popitem(last=False)
        else:
            self._caches.move_to_end(game_key)
        return cache


def search(
    state: State,
    algorithm: str = "mcts",
    budget_ms: float | None = DEFAULT_BUDGET,
    iterations: int | None = None,
    seed: int | None = None,
    **options: Any,
) -> SearchResult:
    """One search with a fresh Searcher (no tree reuse)."""
    return Searcher().search(
        state, algorithm=algorithm, budget_ms=budget_ms, iterations=iterations, seed=seed, **options
    )


def algorithms() -> tuple[str, ...]:
    """The registered algorithm names, in the documented order."""
    known = [name for name in ALGORITHM_ORDER if name in ALGORITHM_FUNCS]
    return tuple(known + sorted(set(ALGORITHM_FUNCS) - set(known)))


def register(name: str, func: AlgorithmFunc) -> None:
    ALGORITHM_FUNCS[name] = func


def _optional(module: str, attribute: str) -> AlgorithmFunc | None:
    """``module.attribute`` if that module exists yet (a colleague's work may not have landed)."""
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise
    return getattr(loaded, attribute, None)


def _register_builtin() -> None:
    from engine.alphabeta import alphabeta_search
    from engine.random_search import random_search

    register("random", random_search)
    register("alphabeta", alphabeta_search)
    for name, module, attribute in (
        ("minimax", "engine.minimax", "minimax_search"),
        ("perfect", "engine.perfect", "perfect_search"),
        ("mcts", "engine.mcts", "mcts_search"),
        ("uct", "engine.mcts", "uct_search"),
        ("flat", "engine.flat", "flat_search"),
    ):
        func = _optional(module, attribute)
        if func is not None:
            register(name, func)
    if "mcts" not in ALGORITHM_FUNCS:
        # Until the compiled MCTS lands: plain UCT in Python with decisive root moves.
        from engine.python_uct import python_uct_search

        register("mcts", python_uct_search)


_register_builtin()

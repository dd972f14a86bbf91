"""The search front door: ``search()`` and ``Searcher``.

A request is a state, an algorithm's name (engine/algorithms.py), a ``Budget`` and the
algorithm's options (engine/options.py); the answer is a ``SearchResult``. The front door
checks the request, turns the time budget into a deadline on the injected clock, and stamps
the result with the elapsed time, seed and budget. A ``Searcher`` also keeps, per game, what
a search leaves for the next move of that game (MCTS's tree), bounded in bytes, least
recently used first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from engine.algorithms import algorithm as algorithm_entry
from engine.errors import EngineError
from engine.game import State
from engine.options import DEFAULT_BUDGET, Budget, Options, parse_options
from engine.result import SearchResult

__all__ = ["DEFAULT_MAX_TREE_BYTES", "Searcher", "search"]

# What a Searcher keeps between the moves of its games (MCTS trees), at most: a 15 s gomoku
# search leaves a tree of about 100 MB; the least recently searched games go first.
DEFAULT_MAX_TREE_BYTES = 256 << 20


class Searcher:
    """Runs searches and keeps per-game state between them (tree reuse), keyed by
    ``game_key``, within ``max_tree_bytes``. One per worker process; ``clock`` is injected
    (seconds, monotonic): deadlines are read on it. ``timer``: the clock a search's elapsed
    time is read on, ``clock`` unless that one jumps ahead to stop a search
    (engine.worker.stopping_clock: a stopped search's time was a jump of 10^9 s)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        max_tree_bytes: int = DEFAULT_MAX_TREE_BYTES,
        timer: Callable[[], float] | None = None,
    ) -> None:
        if isinstance(max_tree_bytes, bool) or not isinstance(max_tree_bytes, int):
            raise EngineError(f"max_tree_bytes is a number of bytes, not {max_tree_bytes!r}")
        self.clock = clock
        self.timer = clock if timer is None else timer
        self.max_tree_bytes = max(0, max_tree_bytes)
        self._caches: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._sizes: dict[str, int] = {}

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
        started = self.timer()
        start = self.clock()
        entry = algorithm_entry(algorithm)
        typed = parse_options(entry.options, options, algorithm)
        if not isinstance(budget, Budget):
            raise EngineError(f"a budget is an engine.Budget, not {budget!r}")
        if state.is_terminal():
            raise EngineError("the game is over: there is no move to search for")
        reason = entry.cannot_play(state.game)
        if reason is not None:
            raise EngineError(f"{algorithm} cannot play {state.game.name}: {reason}")
        deadline = None if budget.time_ms is None else start + budget.time_ms / 1000.0
        cache = self._cache_for(game_key)
        result = entry.function(
            state,
            deadline=deadline,
            iterations=budget.iterations,
            seed=seed,
            clock=self.clock,
            options=typed,
            cache=cache,
        )
        elapsed_ms = (self.timer() - started) * 1000.0
        if game_key is not None:
            self._keep(game_key, cache)
        return replace(
            result,
            algorithm=algorithm,
            elapsed_ms=elapsed_ms,
            seed=seed,
            budget_ms=budget.time_ms,
        )

    def forget(self, game_key: str) -> None:
        """Drop what was kept for one game (it ended)."""
        self._caches.pop(game_key, None)
        self._sizes.pop(game_key, None)

    @property
    def kept_bytes(self) -> int:
        """The bytes of search trees kept for later moves, over every game."""
        return sum(self._sizes.values())

    def kept_games(self) -> list[str]:
        """The games something is kept for, least recently searched first."""
        return list(self._caches)

    def _cache_for(self, game_key: str | None) -> dict[str, Any]:
        if game_key is None:
            return {}
        cache = self._caches.get(game_key)
        if cache is None:
            cache = self._caches[game_key] = {"game_key": game_key}
        self._caches.move_to_end(game_key)
        return cache

    def _keep(self, game_key: str, cache: dict[str, Any]) -> None:
        """Count what the search left in the game's cache; drop the least recently searched
        games (this one last) until the total fits in ``max_tree_bytes``."""
        self._sizes[game_key] = _nbytes(cache)
        total = sum(self._sizes.values())
        while total > self.max_tree_bytes and self._caches:
            oldest = next(iter(self._caches))
            total -= self._sizes.pop(oldest, 0)
            del self._caches[oldest]


def _nbytes(value: Any) -> int:
    """The bytes of the arrays in a cache (numpy arrays and objects with ``nbytes``)."""
    size = getattr(value, "nbytes", None)
    if isinstance(size, int):
        return size
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_nbytes(v) for v in value)
    return 0


def search(
    state: State,
    algorithm: str = "mcts",
    budget: Budget = DEFAULT_BUDGET,
    *,
    seed: int | None = None,
    options: Options | Mapping[str, Any] | None = None,
) -> SearchResult:
    """One search with a fresh Searcher (nothing kept between moves)."""
    return Searcher().search(state, algorithm, budget, seed=seed, options=options)

"""The algorithms registry: every search the engine offers, by name, in one place.

Static and light: importing it loads no search (no numpy, no numba); an algorithm's module
is imported the first time it searches (``Algorithm.function``). Adding a search is one
entry in ``ALGORITHMS`` with its options dataclass (engine/options.py). Every search is a
function

    fn(state, *, deadline, iterations, seed, clock, options, cache) -> SearchResult

where ``deadline`` is an absolute ``clock()`` time or None, ``iterations`` the playout/node
budget or None, ``options`` the algorithm's options dataclass, and ``cache`` the per-game
dict a ``Searcher`` keeps between the moves of one game (an empty dict for a fresh search).
Algorithm modules never import this registry nor the front door (engine/search.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from engine.errors import EngineError
from engine.game import Game, State
from engine.mnk import MNKGame
from engine.options import (
    AlphaBetaOptions,
    MCTSOptions,
    MinimaxOptions,
    NoOptions,
    Options,
    UCTOptions,
)
from engine.result import SearchResult
from engine.uttt import UTTTGame

__all__ = ["ALGORITHMS", "Algorithm", "AlgorithmFunction", "algorithm", "check_algorithm"]

PERFECT_MAX_CELLS = 16  # engine/perfect.py solves boards up to this many cells


class AlgorithmFunction(Protocol):
    def __call__(
        self,
        state: State,
        *,
        deadline: float | None,
        iterations: int | None,
        seed: int | None,
        clock: Callable[[], float],
        options: Any,
        cache: dict[str, Any],
    ) -> SearchResult: ...


def _any_game(game: Game) -> str | None:
    return None


def _compiled_games(game: Game) -> str | None:
    """The compiled kernels play the m,n,k games and ultimate tic-tac-toe."""
    if isinstance(game, MNKGame | UTTTGame):
        return None
    return f"it has no compiled rules for {game.name}"


def _small_boards(game: Game) -> str | None:
    if isinstance(game, MNKGame) and game.cells <= PERFECT_MAX_CELLS:
        return None
    return f"it solves m,n,k boards of at most {PERFECT_MAX_CELLS} cells exactly"


@dataclass(frozen=True, slots=True)
class Algorithm:
    """One entry of the registry."""

    name: str
    summary: str  # one line for --help and menus
    options: type[Options]
    load: Callable[[], AlgorithmFunction]  # imports the search on first use
    cannot_play: Callable[[Game], str | None] = _any_game  # why not, or None if it can
    compiled: bool = True  # runs numba kernels (engine/warmup.py compiles them ahead)
    root_parallel: bool = False  # root statistics engine.parallel can merge (visit counts)

    @property
    def function(self) -> AlgorithmFunction:
        return self.load()


def _random() -> AlgorithmFunction:
    from engine.random_search import random_search

    return random_search


def _flat() -> AlgorithmFunction:
    from engine.flat import flat_search

    return flat_search


def _mcts() -> AlgorithmFunction:
    from engine.mcts import mcts_search

    return mcts_search


def _uct() -> AlgorithmFunction:
    from engine.mcts import uct_search

    return uct_search


def _minimax() -> AlgorithmFunction:
    from engine.minimax import minimax_search

    return minimax_search


def _alphabeta() -> AlgorithmFunction:
    from engine.alphabeta import alphabeta_search

    return alphabeta_search


def _perfect() -> AlgorithmFunction:
    from engine.perfect import perfect_search

    return perfect_search


ALGORITHMS: Mapping[str, Algorithm] = {
    entry.name: entry
    for entry in (
        Algorithm("random", "a uniformly random legal move", NoOptions, _random, compiled=False),
        Algorithm(
            "flat",
            "flat Monte Carlo: random playouts from each move",
            NoOptions,
            _flat,
            _compiled_games,
        ),  # fmt: skip
        Algorithm(
            "mcts",
            "UCT with MCTS-Solver, decisive moves and tree reuse",
            MCTSOptions,
            _mcts,
            _compiled_games,
            root_parallel=True,
        ),  # fmt: skip
        Algorithm(
            "minimax",
            "plain negamax, the reference for small boards",
            MinimaxOptions,
            _minimax,
            compiled=False,
        ),  # fmt: skip
        Algorithm(
            "alphabeta",
            "negamax with alpha-beta, iterative deepening and threat search",
            AlphaBetaOptions,
            _alphabeta,
        ),  # fmt: skip
        Algorithm(
            "perfect",
            "exact play on m,n,k boards of at most 16 cells",
            NoOptions,
            _perfect,
            _small_boards,
        ),  # fmt: skip
        Algorithm(
            "uct",
            "plain UCT, the baseline the enhancements are measured against",
            UCTOptions,
            _uct,
            _compiled_games,
            root_parallel=True,
        ),  # fmt: skip
    )
}


def algorithm(name: str) -> Algorithm:
    """The registry entry, or EngineError listing the algorithms there are."""
    entry = ALGORITHMS.get(name)
    if entry is None:
        raise EngineError(f"unknown algorithm {name!r}: choose one of {', '.join(ALGORITHMS)}")
    return entry


def check_algorithm(name: str, game: Game) -> None:
    """Raise EngineError when ``name`` is no algorithm or cannot play ``game`` (``perfect``
    on boards over 16 cells): the server refuses such a game when it is created."""
    reason = algorithm(name).cannot_play(game)
    if reason is not None:
        raise EngineError(f"{name} cannot play {game.name}: {reason}")

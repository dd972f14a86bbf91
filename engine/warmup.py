"""Warm-up: compile (or load from numba's cache) what a search needs before it is timed.

A target is a (game, algorithm) pair; warming it up runs that algorithm briefly on that
game, from two first moves: once with an iteration budget and twice against the clock two
moves apart in the same game (the second reuses the first's tree), which compiles exactly
the kernels its searches call, with the argument types they use, and the clock's
object-mode block that numba cannot cache. On boards of five in a row it also searches a
position where the mover faces two open threes: the root's threat defence (``safest``) runs
only there, and left cold it compiled in the middle of a game's first defended move (about
2 s over that move's budget). numba's
on-disk cache (``cache=True``) makes every later process load instead of compile, and
``engine.compiled_cache`` notes which targets are compiled, so that a server can tell a cold
start (compile once, in one process, then start the others) from a warm one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from engine.algorithms import ALGORITHMS
from engine.compiled_cache import is_warm, record_warm
from engine.errors import EngineError
from engine.game import Game, State
from engine.games import GAMES
from engine.mnk import MNKGame
from engine.options import Budget
from engine.search import Searcher

__all__ = ["all_targets", "is_warm", "parse_targets", "warm_up", "warm_up_in_background"]

Target = tuple[str, str]  # (game name, algorithm name)

_warmed: set[Target] = set()  # in this process


def _sample_game(name: str) -> Game:
    game_type = GAMES[name]
    return game_type.make(game_type.sample or {})


def all_targets() -> list[Target]:
    """Every registered game with every compiled algorithm that plays it."""
    targets = []
    for name in GAMES:
        game = _sample_game(name)
        for entry in ALGORITHMS.values():
            if entry.compiled and entry.cannot_play(game) is None:
                targets.append((name, entry.name))
    return targets


def parse_targets(text: str) -> list[Target] | None:
    """'all' (None: every target) or 'GAME:ALGORITHM,...'; EngineError naming what is wrong."""
    if text.strip().lower() == "all":
        return None
    targets = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        game, sep, algorithm = item.partition(":")
        if not sep or game not in GAMES or algorithm not in ALGORITHMS:
            raise EngineError(
                f"bad warm-up target {item!r}: GAME:ALGORITHM with a game among "
                f"{', '.join(GAMES)} and an algorithm among {', '.join(ALGORITHMS)}, or all"
            )
        targets.append((game, algorithm))
    return targets


def warm_up(
    targets: Iterable[Target] | None = None, progress: Callable[[str], None] | None = None
) -> None:
    """Warm up ``targets`` (None: ``all_targets()``), calling ``progress`` before each; a
    target whose algorithm cannot play its game, or that needs no compiling, is skipped."""
    todo = []
    for game_name, algorithm in all_targets() if targets is None else targets:
        entry = ALGORITHMS[algorithm]
        if (game_name, algorithm) in _warmed or not entry.compiled:
            continue
        if entry.cannot_play(_sample_game(game_name)) is None:
            todo.append((game_name, algorithm))
    for index, (game_name, algorithm) in enumerate(todo):
        if progress is not None:
            progress(f"{algorithm} for {game_name} ({index + 1}/{len(todo)})")
        game = _sample_game(game_name)
        legal = game.new_initial_state().legal_actions()
        # From the centre, and from a first move no symmetry of the board maps to itself (a
        # search from a symmetric position starts a fresh tree, and one line must reuse one).
        for line, first in enumerate((legal[len(legal) // 2], legal[1])):
            state = game.new_initial_state()
            state.apply_action(first)
            searcher = Searcher()
            key = f"warm-up-{line}"
            searcher.search(state, algorithm, Budget(iterations=64), seed=1, game_key=key)
            # Then two searches against the clock along the line the first of them found:
            # the second reuses the first's tree (mcts compacts the subtree it keeps:
            # kernels a game meets at its second move).
            for seed in (2, 3):
                if state.is_terminal():
                    break
                budget = Budget(time_ms=5.0)
                result = searcher.search(state, algorithm, budget, seed=seed, game_key=key)
                for action in result.pv[:2] or (result.action,):
                    if not state.is_terminal():
                        state.apply_action(action)
        threatened = _facing_two_threes(game)
        if threatened is not None:
            Searcher().search(threatened, algorithm, Budget(iterations=2000), seed=3)
        _warmed.add((game_name, algorithm))
        record_warm([(game_name, algorithm)])


def _facing_two_threes(game: Game) -> State | None:
    """On an m,n,k board with k >= 5: O to move against X's open three along the centre row
    and open three along the centre column, crossing at the centre (O's stones in the
    corners), which no single move stops: the search sees the loss and the threat defence
    runs. None on other games."""
    if not isinstance(game, MNKGame) or game.k < 5:
        return None
    row, col = game.m // 2, game.n // 2
    threes = [(row, col - 2), (row, col - 1), (row, col), (row - 2, col), (row - 1, col)]
    corners = [(0, 0), (0, game.n - 1), (game.m - 1, 0), (game.m - 1, game.n - 1)]
    state = game.new_initial_state()
    for index, (r, c) in enumerate(threes):
        state.apply_action(r * game.n + c)
        if index < len(corners):
            r, c = corners[index]
            state.apply_action(r * game.n + c)
    return state


def warm_up_in_background(targets: list[Target] | None) -> None:
    """A process's entry point: warm up ``targets`` at the lowest CPU priority (the kernels a
    server's first games do not need, compiled into the cache while those games run)."""
    os.nice(19)
    warm_up(targets)

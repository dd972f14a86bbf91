"""Warm-up covers what a timed search calls: after ``warm_up`` a search under a deadline
compiles (or loads from numba's cache) nothing more.

A kernel signature first met inside a timed search is paid for by that search: without
warm-up the first 200 ms gomoku alphabeta search of a process ran 365-500 ms over budget
(loading nine kernels from the cache), the first 100 ms uttt mcts search 330 ms over.
Each case runs in a fresh interpreter, so kernels compiled by other tests cannot hide a
signature the warm-up misses. On gomoku the probe also searches a position where the mover
faces two open threes, where the root's threat defence runs: its kernel (``safest``) was
first compiled there, about 2 s into a game's first defended move, until the warm-up
searched such a position too. And it searches twice along one game's line, so that the
second search reuses the first's tree: mcts's tree compaction (``subtree_size``,
``compact``) was first compiled there, in a game's second move.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Warm up one target, then search positions the warm-up never saw, against the clock, and
# print the engine's numba dispatchers that gained a compiled signature during the searches.
PROBE = """
import json, sys
from engine.games import GAMES
from engine.options import Budget
from engine.search import Searcher
from engine.warmup import warm_up

game_name, algorithm, warm = sys.argv[1], sys.argv[2], sys.argv[3] == "warm"
if warm:
    warm_up([(game_name, algorithm)])
from numba.core.dispatcher import Dispatcher

def signatures():
    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("engine.") and module is not None:
            for attr, value in vars(module).items():
                if isinstance(value, Dispatcher):
                    found[f"{name}.{attr}"] = len(value.signatures)
    return found

before = signatures()
game_type = GAMES[game_name]
game = game_type.make(game_type.sample or {})
for index in range(3):
    state = game.new_initial_state()
    legal = state.legal_actions()
    state.apply_action(legal[(len(legal) // 2 + 7 * index + 3) % len(legal)])
    result = Searcher().search(state, algorithm, Budget(time_ms=30.0), seed=index)
    state.apply_action(result.action)
# Two moves of one game along the first search's line: the second reuses its tree.
searcher = Searcher()
state = game.new_initial_state()
state.apply_action(state.legal_actions()[-1])
first = searcher.search(state, algorithm, Budget(time_ms=60.0), seed=4, game_key="probe")
for action in first.pv[:2]:
    if not state.is_terminal():
        state.apply_action(action)
if not state.is_terminal():
    searcher.search(state, algorithm, Budget(time_ms=30.0), seed=5, game_key="probe")
if getattr(game, "k", 0) >= 5:
    # O to move against X's open threes along a row and a diagonal, crossing off the centre
    # (not the warm-up's position): the root's threat defence runs.
    row, col = game.m // 2 + 1, game.n // 2 - 1
    threes = [(row, col), (row, col + 1), (row - 1, col + 1), (row, col + 2), (row - 2, col + 2)]
    others = [(0, 0), (0, 1), (1, 0), (game.m - 1, game.n - 1)]
    state = game.new_initial_state()
    for index, (r, c) in enumerate(threes):
        state.apply_action(r * game.n + c)
        if index < len(others):
            state.apply_action(others[index][0] * game.n + others[index][1])
    Searcher().search(state, algorithm, Budget(time_ms=30.0), seed=3)
after = signatures()
print(json.dumps(sorted(k for k, v in after.items() if v != before.get(k, 0))))
"""


def _new_signatures(game: str, algorithm: str, warm: bool) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, game, algorithm, "warm" if warm else "cold"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_probe_sees_kernels_a_cold_search_loads() -> None:
    assert "engine.kernels.alphabeta.root" in _new_signatures("gomoku", "alphabeta", warm=False)


@pytest.mark.parametrize(("game", "algorithm"), [("gomoku", "alphabeta"), ("uttt", "mcts")])
def test_a_timed_search_after_warm_up_meets_no_new_kernel_signature(
    game: str, algorithm: str
) -> None:
    assert _new_signatures(game, algorithm, warm=True) == []

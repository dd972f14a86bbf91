"""The fitted window evaluation of gomoku `alphabeta` (AlphaBetaOptions.fitted_windows)."""

from __future__ import annotations

import random

import numpy as np
import pytest

import engine
from engine import Budget
from engine.alphabeta_driver import _mnk_context
from engine.kernels import alphabeta_mnk as K

# (move, nodes, depth, value, pv) of main's searches (4daa545) of ``_positions`` at 6,000
# nodes, seed 7: with the option off the search is main's.
MAIN_SEARCHES = [
    (52, 6000, 3, 0.576697268, (52, 112, 68)),
    (162, 6000, 3, 0.249612949, (162, 158, 190)),
    (126, 6000, 3, 0.568294378, (126, 154, 125)),
    (124, 10, 3, 1.0, (124,)),
    (97, 69, 5, 1.0, (97,)),
    (141, 2345, 3, -1.0, (141, 155, 99, 85, 67, 81, 33, 83, 84, 125, 139, 69)),
    (128, 6001, 5, -0.064908613, (128, 132, 84, 164, 148)),
    (70, 2, 3, 1.0, (70, 115, 40)),
]


def _positions() -> list[list[int]]:
    """Seeded clusters of 6 to 20 stones around the centre of the 15x15 board."""
    rng = random.Random(1413)
    box = [r * 15 + c for r in range(3, 12) for c in range(3, 12)]
    return [rng.sample(box, 6 + 2 * i) for i in range(8)]


def _searches(options: dict[str, bool]) -> list[tuple[int, int, int, float, tuple[int, ...]]]:
    game = engine.make_game("gomoku")
    out = []
    for moves in _positions():
        state = engine.replay(game, moves)
        if state.is_terminal():
            continue
        result = engine.search(state, "alphabeta", Budget(iterations=6000), seed=7, options=options)
        out.append(
            (
                int(result.action),
                int(result.iterations),
                int(result.depth),
                round(float(result.value), 9),
                tuple(int(a) for a in result.pv),
            )
        )
    return out


def test_option_off_is_mains_search():
    assert _searches({}) == MAIN_SEARCHES
    assert _searches({"fitted_windows": False}) == MAIN_SEARCHES


def test_option_on_searches_differently():
    assert _searches({"fitted_windows": True}) != MAIN_SEARCHES


def _recount(g, k: int) -> tuple[int, int]:
    """The fitted sums (X to move, O to move) from the window counts."""
    sums = [0, 0]
    for x, o in g.counts:
        for p, own, other in ((0, x, o), (1, o, x)):
            if own > 0 and other == 0:
                sums[p] += int(K.FIT_MOVER[own])
                sums[1 - p] -= int(K.FIT_OPPONENT[own])
    return sums[0], sums[1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fitted_sums_follow_place_and_remove(seed):
    game = engine.make_game("gomoku")
    context = _mnk_context(game)
    context.set_fitted(True)
    context.set_position([])
    g, info = context.game, context.info
    rng = random.Random(seed)
    played: list[int] = []
    for _ in range(150):
        if played and rng.random() < 0.35:
            c = played.pop()
            K.remove(c, len(played) & 1, g, info)
        else:
            c = rng.choice([a for a in range(game.cells) if g.cells[a] == 0])
            K.place(c, len(played) & 1, g, info)
            played.append(c)
        assert tuple(int(v) for v in g.fit_eval) == _recount(g, game.k)
        assert info[K.EVAL] == 0  # the default evaluation is not kept
    fresh = _mnk_context(game)
    fresh.set_fitted(True)
    fresh.set_position(played)
    assert np.array_equal(fresh.game.fit_eval, g.fit_eval)
    assert any(int(v) != 0 for v in g.fit_eval)

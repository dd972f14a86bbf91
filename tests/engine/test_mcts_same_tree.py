"""Speed-only changes to the MCTS kernels keep the search: with a seed and an iteration budget
the compiled loop builds, record for record, the tree it built before, and the searches
return the results they returned before. The digests below were computed by the code of main
at 92b3550 (before the cheaper uttt tree step of issue 14): a change that moves one visit,
win, proof or child, or one draw of the generator, changes them."""

from __future__ import annotations

import hashlib
import math
import time

import numpy as np
import pytest
from numba import njit

import engine
from engine.kernels import kernel_game, root_state
from engine.kernels.layout import seed_rng
from engine.kernels.tree import (
    NODE_SIZE,
    SQRT_LOG_WIDE,
    SQRT_WIDE,
    TABLE_SIZE,
    WIDE_TABLE_SIZE,
)
from engine.mcts import _run, _Tree

UTTT_MIDDLE = (30, 29, 23, 52, 64, 9, 7, 68, 48, 28, 17, 80, 79, 67, 38, 21)  # bench/mcts_speed
# 44 random moves (random.Random(12)), 24 legal: the solver proves the root (a win for X).
UTTT_LATE = (60, 58, 44, 77, 47, 24, 54, 5, 53, 76, 43, 66, 35, 72, 2, 26, 75, 29, 20, 19, 9)
UTTT_LATE += (6, 56, 18, 7, 69, 61, 71, 73, 10, 11, 22, 36, 4, 40, 15, 62, 78, 50, 67, 64, 13)
UTTT_LATE += (1, 14)
UTTT_PROOFS = UTTT_LATE[:38]  # the solver proves ~380 nodes in 20,000 iterations, not the root

OPTIONS = {
    # the uttt defaults of mcts_search: c, solver, decisive moves, expand 4, prior 8
    "default": {"c": 0.7, "solver": True, "decisive": True, "expand": 4, "prior": 8},
    "no_prior": {"c": 0.7, "solver": True, "decisive": True, "expand": 1, "prior": 0},
    # as uct_search: no solver, no decisive moves
    "plain": {"c": 1.41, "solver": False, "decisive": False, "expand": 1, "prior": 0},
    "anti": {"c": 0.7, "solver": True, "decisive": True, "prior": 8, "expand": 4}
    | {"anti_decisive_playouts": True},
    "capture": {"c": 0.7, "solver": True, "decisive": True, "prior": 8, "expand": 4}
    | {"capture_playouts": True},
    # the uttt defaults since implicit minimax backups (branch uttt10)
    "minimax": {"c": 0.7, "solver": True, "decisive": True, "expand": 4, "prior": 8}
    | {"minimax": 0.15},
    # the uttt defaults since playouts avoid sending to captures (branch uttt12)
    "avoid": {"c": 0.7, "solver": True, "decisive": True, "expand": 4, "prior": 8}
    | {"minimax": 0.15, "avoid_playouts": True},
    # the uttt defaults since playouts also take the small board of a forced move (uttt14)
    "take": {"c": 0.7, "solver": True, "decisive": True, "expand": 4, "prior": 8}
    | {"minimax": 0.15, "avoid_playouts": True, "capture_playouts": True},
}

# (game, moves, iterations, options of _run, digest of the node records in use and the
# generator). 80,000 iterations from the opening take the root past 65,536 visits.
TREES = [
    ("uttt", (), 80_000, "default", "895e396373db8c05"),
    ("uttt", UTTT_MIDDLE, 30_000, "default", "12246719abf5abfa"),
    ("uttt", UTTT_MIDDLE, 30_000, "plain", "bb8c7f235458b400"),
    ("uttt", UTTT_MIDDLE, 20_000, "no_prior", "724845fb787989e2"),
    ("uttt", UTTT_MIDDLE, 20_000, "anti", "8c9b32a7f4ccf2d8"),
    ("uttt", UTTT_MIDDLE, 20_000, "capture", "a26cb5845b36758f"),
    ("uttt", UTTT_PROOFS, 20_000, "default", "ee6deb7524e09405"),
    ("uttt", UTTT_PROOFS, 20_000, "no_prior", "a7c9e7a89ef8c2a8"),
    ("uttt", UTTT_LATE, 20_000, "default", "d2ee242d12047c5a"),
    ("uttt", UTTT_LATE, 20_000, "no_prior", "0639b03b3c1ef8fc"),
    ("tictactoe", (), 20_000, "no_prior", "6ed7186e49f7e2fb"),
    ("tictactoe", (4,), 5_000, "plain", "baa3e8b1fb42e994"),
    ("5x5", (12,), 10_000, "no_prior", "37b519c41cb692d6"),
    ("gomoku", (112, 113), 3_000, "no_prior", "543651636a313c92"),
    # computed on branch uttt10 when implicit minimax backups became uttt's default
    ("uttt", (), 80_000, "minimax", "e81d9eefe175014f"),
    ("uttt", UTTT_MIDDLE, 30_000, "minimax", "3adb4a522aa96ce2"),
    ("uttt", UTTT_PROOFS, 20_000, "minimax", "b9e434cbc31f413f"),
    # computed on branch uttt12 when avoid_playouts became uttt's default
    ("uttt", (), 80_000, "avoid", "798a5acbf9a08034"),
    ("uttt", UTTT_MIDDLE, 30_000, "avoid", "f1cce279715a105c"),
    ("uttt", UTTT_PROOFS, 20_000, "avoid", "a08f39b2361eee15"),
    # computed on branch uttt14 when capture_playouts (with avoid_playouts) became the default
    ("uttt", (), 80_000, "take", "a7c3d78c97decfd0"),
    ("uttt", UTTT_MIDDLE, 30_000, "take", "36662948edf29a52"),
    ("uttt", UTTT_PROOFS, 20_000, "take", "922989b8fee5767e"),
]

# (game, moves, algorithm, iterations, digest of the SearchResult with seed 7); "mcts-0":
# mcts with minimax=0 and avoid_playouts=False, the uttt default before implicit minimax
# backups (the digests of main); "mcts-imm": avoid_playouts=False, the default from branch
# uttt10 (where those digests were computed) to uttt12; "mcts-avoid": capture_playouts=False,
# the default from branch uttt12 (where those digests were computed) to uttt14; the "mcts"
# digests of uttt were computed on branch uttt14 when capture_playouts became the default.
SEARCHES = [
    ("uttt", (), "mcts-0", 20_000, "e5ebf802907d8c21"),
    ("uttt", UTTT_MIDDLE, "mcts-0", 20_000, "9f341bf3ffc89d91"),
    ("uttt", UTTT_PROOFS, "mcts-0", 20_000, "765bd2deecca469d"),
    ("uttt", UTTT_LATE, "mcts-0", 20_000, "2524a96f3433cb5a"),
    ("uttt", (), "mcts-imm", 20_000, "16dc94576573f843"),
    ("uttt", UTTT_MIDDLE, "mcts-imm", 20_000, "7c1b6b298f13b04c"),
    ("uttt", UTTT_PROOFS, "mcts-imm", 20_000, "29b0497873e35000"),
    ("uttt", UTTT_LATE, "mcts-imm", 20_000, "ba0eefa28e1c4305"),
    ("uttt", (), "mcts-avoid", 20_000, "528dc7b622e87c0c"),
    ("uttt", UTTT_MIDDLE, "mcts-avoid", 20_000, "799a666dd65baceb"),
    ("uttt", UTTT_PROOFS, "mcts-avoid", 20_000, "321cc9c1f504d032"),
    ("uttt", UTTT_LATE, "mcts-avoid", 20_000, "0e7a1df8a7eecb17"),
    ("uttt", (), "mcts", 20_000, "6fb43f20de01fed3"),
    ("uttt", UTTT_MIDDLE, "mcts", 20_000, "7d3ae3200f71e1d9"),
    ("uttt", UTTT_PROOFS, "mcts", 20_000, "d4c475ed033aa3f5"),
    ("uttt", UTTT_LATE, "mcts", 20_000, "9a0786ab6614c486"),
    ("uttt", UTTT_MIDDLE, "uct", 10_000, "c6693633250e6b85"),
    ("uttt", UTTT_MIDDLE, "flat", 10_000, "84c86248fc1fe114"),
    ("5x5", (12,), "mcts", 5_000, "10fdc0805dcc78d4"),
]


def _digest(*parts: bytes) -> str:
    return hashlib.sha256(b"".join(parts)).hexdigest()[:16]


def tree_digest(name: str, moves: tuple[int, ...], iterations: int, options: str) -> str:
    state = engine.replay(engine.make_game(name), list(moves))
    game = kernel_game(state.game)
    tree = _Tree(1 << 12)  # small, so that the search grows it on the way
    rng = seed_rng(2026)
    done = _run(
        tree,
        root_state(state, game),
        game,
        deadline=None,
        iterations=iterations,
        clock=time.perf_counter,
        rng=rng,
        **OPTIONS[options],
    )
    used = tree.nodes[: tree.size * NODE_SIZE]
    return _digest(str(done).encode(), used.tobytes(), rng.tobytes())


def search_digest(name: str, moves: tuple[int, ...], algorithm: str, iterations: int) -> str:
    state = engine.replay(engine.make_game(name), list(moves))
    budget = engine.Budget(iterations=iterations)
    if algorithm in ("mcts-0", "mcts-imm"):
        minimax = 0.0 if algorithm == "mcts-0" else None
        options = engine.MCTSOptions(minimax=minimax, avoid_playouts=False)
        result = engine.search(state, "mcts", budget, seed=7, options=options)
    elif algorithm == "mcts-avoid":
        options = engine.MCTSOptions(capture_playouts=False)
        result = engine.search(state, "mcts", budget, seed=7, options=options)
    else:
        result = engine.search(state, algorithm, budget, seed=7)
    fields = (result.action, result.value, result.iterations, result.pv, result.visits)
    return _digest(repr((fields, result.proven)).encode())


def _label(case: tuple) -> str:
    name, moves, *rest = case
    return f"{name}-{len(moves)}-" + "-".join(str(x) for x in rest[:-1])


@pytest.mark.parametrize("case", TREES, ids=_label)
def test_seeded_search_builds_the_same_tree(case: tuple) -> None:
    *key, expected = case
    assert tree_digest(*key) == expected


@pytest.mark.parametrize("case", SEARCHES, ids=_label)
def test_seeded_search_returns_the_same_result(case: tuple) -> None:
    *key, expected = case
    assert search_digest(*key) == expected


@njit
def _ucb1_roots(visits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sqrt(log(v + 1)) and sqrt(v) as the compiled UCB1 loop computes them past its tables."""
    sqrt_log = np.empty(visits.shape[0])
    sqrt_v = np.empty(visits.shape[0])
    for i in range(visits.shape[0]):
        v = visits[i]
        sqrt_log[i] = math.sqrt(math.log(v + 1.0))
        sqrt_v[i] = math.sqrt(v)
    return sqrt_log, sqrt_v


def test_wide_ucb1_tables_hold_the_formula_bit_for_bit() -> None:
    visits = np.arange(TABLE_SIZE, WIDE_TABLE_SIZE, dtype=np.int32)
    sqrt_log, sqrt_v = _ucb1_roots(visits)
    assert np.array_equal(SQRT_LOG_WIDE[TABLE_SIZE:].view(np.int64), sqrt_log.view(np.int64))
    assert np.array_equal(SQRT_WIDE[TABLE_SIZE:].view(np.int64), sqrt_v.view(np.int64))


if __name__ == "__main__":  # the digests of this code, in the order of the tables
    print([tree_digest(*case[:-1]) for case in TREES])
    print([search_digest(*case[:-1]) for case in SEARCHES])

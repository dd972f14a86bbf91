"""Flat int32 state layout shared by every compiled kernel, and the kernels' random generator.

A position lives in one int32 array: a fixed header followed by the game's own arrays, so the
search loop copies one buffer per iteration and dispatches on ``st[H_KIND]`` (no jitclass, so
``cache=True`` works everywhere).
"""

from typing import Any

import numpy as np
from numba import njit

# numba's options for the search loops (the alpha-beta kernels, the MCTS loop): compiled once
# (cache) and without the runtime's reference counts (numba's private option ``_nrt=False``,
# fenced by tests/engine/test_numba_options.py and pyproject's pin). Each call or descent step
# that took the position's arrays counted a reference to each and dropped it (atomic
# operations: half of the gomoku search's CPU time, ~9% of uttt's MCTS, measured); these
# loops allocate no array, so they need none.
NO_NRT_OPTIONS: dict[str, Any] = {"cache": True, "_nrt": False}

KIND_MNK = 0
KIND_UTTT = 1
KIND_TTT = 2  # 3x3 on bitboards (the m,n,k rules with m = n = k = 3)

# Header slots.
H_KIND = 0
H_M = 1
H_N = 2
H_K = 3
H_TO_MOVE = 4  # 0 = X (first player), 1 = O
H_STATUS = 5  # ONGOING, X_WON, O_WON or DRAW
H_PLY = 6
H_LAST = 7  # last action, -1 at the start
H_EMPTY = 8  # empty cells left
H_CELLS = 9  # m*n (mnk) or 81 (uttt)
H_NEAR = 10  # mnk: keep the list of empty cells near stones (big boards)
# mnk only
H_WCOUNT0 = 11  # empty cells where X would complete k in a row
H_WCOUNT1 = 12
H_WSP0 = 13  # stack sizes of those cells (stale entries popped lazily)
H_WSP1 = 14
H_NLEN = 15  # length of the near-cell list
# uttt only
H_FORCED = 11  # small board the mover must play in, -1 = any open board
H_CLOSED = 12  # 9-bit mask of small boards won or full
H_META0 = 13  # 9-bit mask of small boards won by X
H_META1 = 14
H_THREAT0 = 16  # 9-bit mask of boards where X has a cell completing a small-board line
H_THREAT1 = 17
HEADER = 20

ONGOING = 0
X_WON = 1
O_WON = 2
DRAW = 3

# Tree-move codes returned by the expansion move generator (decisive moves, Teytaud & Teytaud 2010).
MOVES_NORMAL = 0
MOVES_MOVER_WINS = 1  # the single generated move wins at once
MOVES_MOVER_LOSES = 2  # every move lets the opponent win at once

# Playout policy: 0 uniform, 1 decisive moves, 2 decisive and anti-decisive; uttt playouts
# with this bit added also capture the small board they are sent to when they can.
PLAYOUT_CAPTURE = 4
# uttt playouts with this bit added draw a move again, once, when it sends the opponent to a
# board it can capture at once or gives it a free move.
PLAYOUT_AVOID = 8

NEAR_MIN_CELLS = 50  # mnk boards with more cells search only cells within 2 of a stone
NEAR_RADIUS = 2


def mnk_state_size(m: int, n: int) -> int:
    return HEADER + 10 * m * n


UTTT_STATE_SIZE = HEADER + 27
TTT_STATE_SIZE = HEADER


@njit(cache=True, inline="always")
def xorshift_step(x):
    """xorshift64 step (Vigna 2016): the next generator state, for loops that keep it in a
    register instead of ``rand_below``'s array."""
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    return x


@njit(cache=True, inline="always")
def xorshift_back(y):
    """The state ``x`` with ``xorshift_step(x) == y`` (each xor-shift undone, last first): a
    loop that carries the next state can still leave the last one it used."""
    y ^= (y >> np.uint64(27)) ^ (y >> np.uint64(54))
    y ^= (y << np.uint64(25)) ^ (y << np.uint64(50))
    y ^= (y >> np.uint64(12)) ^ (y >> np.uint64(24)) ^ (y >> np.uint64(36))
    y ^= y >> np.uint64(48)
    return y


@njit(cache=True, inline="always")
def below(x, n):
    """An int in [0, n) from the state ``x``: xorshift64* output (Vigna 2016) scaled by Lemire's
    multiply-shift."""
    r = (x * np.uint64(0x2545F4914F6CDD1D)) >> np.uint64(32)
    return np.int64((r * np.uint64(n)) >> np.uint64(32))


@njit(cache=True)
def rand_below(rng, n):
    """One generator step on ``rng[0]``; an int in [0, n) (``below``)."""
    x = xorshift_step(rng[0])
    rng[0] = x
    return below(x, n)


def seed_rng(seed: int) -> np.ndarray:
    """A non-zero xorshift state from any integer seed (splitmix64 finaliser)."""
    z = (seed + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    z ^= z >> 31
    return np.array([z or 1], dtype=np.uint64)

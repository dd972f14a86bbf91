"""Compiled 3x3 tic-tac-toe on two 9-bit boards (header slots only): the hot path for the
smallest game, where the generic m,n,k kernel would spend its time walking directions.
Win, threat, popcount and n-th-bit tables are the uttt small-board tables."""

from numba import njit

from engine.kernels.layout import (
    DRAW,
    H_CELLS,
    H_EMPTY,
    H_K,
    H_KIND,
    H_LAST,
    H_M,
    H_N,
    H_PLY,
    H_STATUS,
    H_TO_MOVE,
    KIND_TTT,
    MOVES_MOVER_LOSES,
    MOVES_MOVER_WINS,
    MOVES_NORMAL,
    ONGOING,
    rand_below,
)
from engine.kernels.uttt import NTH9, POP9, THREAT9, WIN9

H_MASK0 = 11  # cells of X; O's at H_MASK0 + 1


@njit(cache=True)
def ttt_init(st):
    st[:] = 0
    st[H_KIND] = KIND_TTT
    st[H_M] = 3
    st[H_N] = 3
    st[H_K] = 3
    st[H_LAST] = -1
    st[H_EMPTY] = 9
    st[H_CELLS] = 9


@njit(cache=True)
def ttt_apply(st, cell):
    p = st[H_TO_MOVE]
    mask = st[H_MASK0 + p] | (1 << cell)
    st[H_MASK0 + p] = mask
    st[H_PLY] += 1
    st[H_EMPTY] -= 1
    st[H_LAST] = cell
    st[H_TO_MOVE] = 1 - p
    if WIN9[mask]:
        st[H_STATUS] = p + 1
    elif st[H_EMPTY] == 0:
        st[H_STATUS] = DRAW


@njit(cache=True)
def _free(st):
    return ~(st[H_MASK0] | st[H_MASK0 + 1]) & 511


@njit(cache=True)
def _lowest(mask):
    c = 0
    while not (mask >> c) & 1:
        c += 1
    return c


@njit(cache=True)
def ttt_legal(st, out):
    if st[H_STATUS] != ONGOING:
        return 0
    free = _free(st)
    cnt = 0
    for c in range(9):
        if (free >> c) & 1:
            out[cnt] = c
            cnt += 1
    return cnt


@njit(cache=True)
def ttt_tree_moves(st, out, decisive):
    """As mnk_tree_moves: a win alone; a single threat blocked; two threats lose."""
    free = _free(st)
    if decisive:
        p = st[H_TO_MOVE]
        wins = THREAT9[st[H_MASK0 + p]] & free
        if wins:
            out[0] = _lowest(wins)
            return 1, MOVES_MOVER_WINS
        threats = THREAT9[st[H_MASK0 + 1 - p]] & free
        if POP9[threats] == 1:
            out[0] = _lowest(threats)
            return 1, MOVES_NORMAL
        if threats:
            cnt = 0  # lost anyway: blocking moves first
            for c in range(9):
                if (threats >> c) & 1:
                    out[cnt] = c
                    cnt += 1
            for c in range(9):
                if (free >> c) & 1 and not (threats >> c) & 1:
                    out[cnt] = c
                    cnt += 1
            return cnt, MOVES_MOVER_LOSES
    return ttt_legal(st, out), MOVES_NORMAL


@njit(cache=True)
def ttt_random_move(st, rng):
    free = _free(st)
    return NTH9[free * 9 + rand_below(rng, POP9[free])]


@njit(cache=True)
def ttt_playout(st, rng, decisive):
    while st[H_STATUS] == ONGOING:
        if decisive:
            p = st[H_TO_MOVE]
            free = _free(st)
            if THREAT9[st[H_MASK0 + p]] & free:
                return p + 1
            threats = THREAT9[st[H_MASK0 + 1 - p]] & free
            if threats:
                if POP9[threats] >= 2:
                    return 2 - p
                ttt_apply(st, _lowest(threats))
                continue
        ttt_apply(st, ttt_random_move(st, rng))
    return st[H_STATUS]

"""Game-independent entry points: dispatch on ``st[H_KIND]`` to the mnk or uttt kernels."""

import numpy as np
from numba import njit

from engine.kernels.layout import (
    H_KIND,
    H_STATUS,
    KIND_MNK,
    KIND_TTT,
    KIND_UTTT,
    ONGOING,
    TTT_STATE_SIZE,
    UTTT_STATE_SIZE,
    mnk_state_size,
)
from engine.kernels.mnk import (
    mnk_apply,
    mnk_init,
    mnk_legal,
    mnk_playout,
    mnk_random_move,
    mnk_tree_moves,
)
from engine.kernels.ttt import (
    ttt_apply,
    ttt_init,
    ttt_legal,
    ttt_playout,
    ttt_random_move,
    ttt_tree_moves,
)
from engine.kernels.uttt import (
    uttt_apply,
    uttt_child_value,
    uttt_init,
    uttt_legal,
    uttt_move_prior,
    uttt_play,
    uttt_playout,
    uttt_priors_and_values,
    uttt_random_move,
    uttt_refresh_threats,
    uttt_tree_moves,
)


@njit(cache=True, inline="always")
def apply(st, action):
    kind = st[H_KIND]
    if kind == KIND_TTT:
        ttt_apply(st, action)
    elif kind == KIND_MNK:
        mnk_apply(st, action)
    else:
        uttt_apply(st, action)


@njit(cache=True, inline="always")
def descend(st, action):
    """``apply`` for the tree's descent: uttt leaves its threat masks as they were
    (``uttt_play``); returns the mask of the boards whose masks that left stale (0 for the
    other games), for ``refresh`` where a leaf is expanded."""
    kind = st[H_KIND]
    if kind == KIND_TTT:
        ttt_apply(st, action)
    elif kind == KIND_MNK:
        mnk_apply(st, action)
    else:
        uttt_play(st, action)
        return 1 << (action // 9)
    return 0


@njit(cache=True)
def refresh(st, stale):
    """After ``descend``: the state ``apply`` would have left (``stale``: the or of what
    ``descend`` returned)."""
    if stale:
        uttt_refresh_threats(st, stale)


@njit(cache=True)
def legal(st, out):
    if st[H_KIND] == KIND_TTT:
        return ttt_legal(st, out)
    if st[H_KIND] == KIND_MNK:
        return mnk_legal(st, out)
    return uttt_legal(st, out)


@njit(cache=True)
def tree_moves(st, out, decisive):
    if st[H_KIND] == KIND_TTT:
        return ttt_tree_moves(st, out, decisive)
    if st[H_KIND] == KIND_MNK:
        return mnk_tree_moves(st, out, decisive)
    return uttt_tree_moves(st, out, decisive)


@njit(cache=True)
def move_prior(st, action):
    """A move's prior for progressive bias in the tree (uttt only, else 0)."""
    if st[H_KIND] == KIND_UTTT:
        return uttt_move_prior(st, action)
    return 0


@njit(cache=True)
def child_value(st, action, scale):
    """A heuristic value in [0, 1] of the position after ``action`` for its mover, for
    implicit minimax backups (uttt only, with the tanh scale ``scale``; else 1/2)."""
    if st[H_KIND] == KIND_UTTT:
        return uttt_child_value(st, action, scale)
    return 0.5


@njit(cache=True)
def priors_and_values(st, moves, n, scale, values, first):
    """(``move_prior``, ``child_value``) of each of ``moves[:n]`` in one call (an expansion's
    children): the value of ``moves[i]`` into ``values[first + i]``, its prior over
    ``moves[i]``."""
    if st[H_KIND] == KIND_UTTT:
        uttt_priors_and_values(st, moves, n, scale, values, first)
    else:
        for i in range(n):
            moves[i] = 0
            values[first + i] = 0.5


@njit(cache=True)
def random_move(st, rng, near):
    if st[H_KIND] == KIND_TTT:
        return ttt_random_move(st, rng)
    if st[H_KIND] == KIND_MNK:
        return mnk_random_move(st, rng, near)
    return uttt_random_move(st, rng)


# Inlined (as ``uttt_playout``): the search loop calls the playout loop itself, one call an
# iteration instead of three.
@njit(cache=True, inline="always")
def playout(st, rng, policy, near, buf):
    """Random playout to the end, or to a forced outcome: ``policy`` 0 plays uniformly at
    random; 1 takes a win in one (decisive moves, Teytaud & Teytaud 2010); 2 also avoids
    moves that let the opponent win at once (anti-decisive moves). The m,n,k kernels know
    both at the cost of a counter (any policy >= 1 is 2 there); final status."""
    if st[H_KIND] == KIND_TTT:
        return ttt_playout(st, rng, policy != 0)
    if st[H_KIND] == KIND_MNK:
        return mnk_playout(st, rng, policy != 0, near)
    return uttt_playout(st, rng, policy, buf)


@njit(cache=True)
def replay(st, kind, m, n, k, near, actions):
    """Initialise ``st`` and play ``actions``; returns how many were played before the end."""
    if kind == KIND_TTT:
        ttt_init(st)
    elif kind == KIND_MNK:
        mnk_init(st, m, n, k, near)
    else:
        uttt_init(st)
    for i in range(actions.shape[0]):
        if st[H_STATUS] != ONGOING:
            return i
        apply(st, actions[i])
    return actions.shape[0]


def state_size(kind: int, m: int, n: int) -> int:
    if kind == KIND_TTT:
        return TTT_STATE_SIZE
    return mnk_state_size(m, n) if kind == KIND_MNK else UTTT_STATE_SIZE


def max_moves(kind: int, m: int, n: int) -> int:
    if kind == KIND_TTT:
        return 9
    return m * n if kind == KIND_MNK else 81


def new_state(kind: int, m: int, n: int, k: int, near: int, actions) -> np.ndarray:
    st = np.zeros(state_size(kind, m, n), dtype=np.int32)
    replay(st, kind, m, n, k, near, np.asarray(actions, dtype=np.int32))
    return st

"""Compiled m,n,k rules (3x3 is m=n=k=3) over the flat int32 state of ``layout``.

Board cells hold 0 (empty), 1 (X) or 2 (O); action = row*n + col. k or more in a row wins
(gomoku's "five or more"). Each player keeps, per empty cell, a 4-bit mask of the directions in
which a stone there would complete k in a row. Placing a stone changes that mask only for the
first empty cell past each end of the run through the stone, so a move costs O(k) per
direction, the win check is a mask lookup, and decisive / anti-decisive moves (Teytaud &
Teytaud 2010) are counters.
"""

import numpy as np
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
    H_NEAR,
    H_NLEN,
    H_PLY,
    H_STATUS,
    H_TO_MOVE,
    H_WCOUNT0,
    H_WSP0,
    HEADER,
    KIND_MNK,
    MOVES_MOVER_LOSES,
    MOVES_MOVER_WINS,
    MOVES_NORMAL,
    NEAR_RADIUS,
    ONGOING,
    rand_below,
)

# Directions (drow, dcol): row, column, diagonal, anti-diagonal.
DIR_R = np.array([0, 1, 1, 1], dtype=np.int64)
DIR_C = np.array([1, 0, 1, -1], dtype=np.int64)


@njit(cache=True)
def _off_board(st):
    return HEADER


@njit(cache=True)
def _off_empties(st):
    return HEADER + st[H_CELLS]


@njit(cache=True)
def _off_epos(st):
    return HEADER + 2 * st[H_CELLS]


@njit(cache=True)
def _off_wmask(st, player):
    return HEADER + (3 + player) * st[H_CELLS]


@njit(cache=True)
def _off_wstack(st, player):
    return HEADER + (5 + player) * st[H_CELLS]


@njit(cache=True)
def _off_ncount(st):
    return HEADER + 7 * st[H_CELLS]


@njit(cache=True)
def _off_nlist(st):
    return HEADER + 8 * st[H_CELLS]


@njit(cache=True)
def _off_npos(st):
    return HEADER + 9 * st[H_CELLS]


@njit(cache=True)
def mnk_init(st, m, n, k, near):
    cells = m * n
    st[:] = 0
    st[H_KIND] = KIND_MNK
    st[H_M] = m
    st[H_N] = n
    st[H_K] = k
    st[H_LAST] = -1
    st[H_EMPTY] = cells
    st[H_CELLS] = cells
    st[H_NEAR] = near
    e = _off_empties(st)
    ep = _off_epos(st)
    npos = _off_npos(st)
    for i in range(cells):
        st[e + i] = i
        st[ep + i] = i
        st[npos + i] = -1


@njit(cache=True)
def _mark_win_cell(st, player, cell, dirbit):
    wm = _off_wmask(st, player) + cell
    if st[wm] == 0:
        st[H_WCOUNT0 + player] += 1
        sp = H_WSP0 + player
        st[_off_wstack(st, player) + st[sp]] = cell
        st[sp] += 1
    st[wm] |= dirbit


@njit(cache=True)
def _clear_win_cell(st, player, cell):
    wm = _off_wmask(st, player) + cell
    if st[wm] != 0:
        st[wm] = 0
        st[H_WCOUNT0 + player] -= 1


@njit(cache=True)
def mnk_apply(st, cell):
    """Play ``cell`` for the side to move (unchecked)."""
    m = st[H_M]
    n = st[H_N]
    k = st[H_K]
    p = st[H_TO_MOVE]
    stone = p + 1
    wins = st[_off_wmask(st, p) + cell] != 0
    _clear_win_cell(st, 0, cell)
    _clear_win_cell(st, 1, cell)
    b = _off_board(st)
    st[b + cell] = stone
    # Remove from the empty-cell list (swap with the last entry).
    e = _off_empties(st)
    ep = _off_epos(st)
    last = st[H_EMPTY] - 1
    i = st[ep + cell]
    moved = st[e + last]
    st[e + i] = moved
    st[ep + moved] = i
    st[e + last] = cell
    st[ep + cell] = last
    st[H_EMPTY] = last
    st[H_LAST] = cell
    st[H_PLY] += 1
    st[H_TO_MOVE] = 1 - p
    if st[H_NEAR] != 0:
        _near_update(st, cell)
    if wins:
        st[H_STATUS] = stone
        return
    r0 = cell // n
    c0 = cell - r0 * n
    for d in range(4):
        dr = DIR_R[d]
        dc = DIR_C[d]
        # Forward: run of own stones, then the first cell past it.
        fr = r0 + dr
        fc = c0 + dc
        fwd = 0
        while 0 <= fr < m and 0 <= fc < n and st[b + fr * n + fc] == stone and fwd < k:
            fwd += 1
            fr += dr
            fc += dc
        br = r0 - dr
        bc = c0 - dc
        bwd = 0
        while 0 <= br < m and 0 <= bc < n and st[b + br * n + bc] == stone and bwd < k:
            bwd += 1
            br -= dr
            bc -= dc
        run = 1 + fwd + bwd
        dirbit = 1 << d
        if 0 <= fr < m and 0 <= fc < n and st[b + fr * n + fc] == 0:
            beyond = 0
            rr = fr + dr
            cc = fc + dc
            while 0 <= rr < m and 0 <= cc < n and st[b + rr * n + cc] == stone and beyond < k:
                beyond += 1
                rr += dr
                cc += dc
            if run + 1 + beyond >= k:
                _mark_win_cell(st, p, fr * n + fc, dirbit)
        if 0 <= br < m and 0 <= bc < n and st[b + br * n + bc] == 0:
            beyond = 0
            rr = br - dr
            cc = bc - dc
            while 0 <= rr < m and 0 <= cc < n and st[b + rr * n + cc] == stone and beyond < k:
                beyond += 1
                rr -= dr
                cc -= dc
            if run + 1 + beyond >= k:
                _mark_win_cell(st, p, br * n + bc, dirbit)
    if last == 0:
        st[H_STATUS] = DRAW


@njit(cache=True)
def _near_update(st, cell):
    """Maintain the list of empty cells within NEAR_RADIUS (Chebyshev) of a stone."""
    m = st[H_M]
    n = st[H_N]
    b = _off_board(st)
    nc = _off_ncount(st)
    nl = _off_nlist(st)
    npos = _off_npos(st)
    # The played cell leaves the list.
    i = st[npos + cell]
    if i >= 0:
        last = st[H_NLEN] - 1
        moved = st[nl + last]
        st[nl + i] = moved
        st[npos + moved] = i
        st[npos + cell] = -1
        st[H_NLEN] = last
    r0 = cell // n
    c0 = cell - r0 * n
    for r in range(max(0, r0 - NEAR_RADIUS), min(m, r0 + NEAR_RADIUS + 1)):
        for c in range(max(0, c0 - NEAR_RADIUS), min(n, c0 + NEAR_RADIUS + 1)):
            x = r * n + c
            st[nc + x] += 1
            if st[nc + x] == 1 and st[b + x] == 0:
                st[nl + st[H_NLEN]] = x
                st[npos + x] = st[H_NLEN]
                st[H_NLEN] += 1


@njit(cache=True)
def mnk_legal(st, out):
    """All empty cells in increasing order; returns their number (0 when the game is over)."""
    if st[H_STATUS] != ONGOING:
        return 0
    b = _off_board(st)
    cnt = 0
    for i in range(st[H_CELLS]):
        if st[b + i] == 0:
            out[cnt] = i
            cnt += 1
    return cnt


@njit(cache=True)
def _candidates(st, out):
    """Moves the tree considers: every empty cell, or on big boards those near a stone."""
    if st[H_NEAR] == 0:
        return mnk_legal(st, out)
    b = _off_board(st)
    nc = _off_ncount(st)
    cnt = 0
    for i in range(st[H_CELLS]):
        if st[b + i] == 0 and st[nc + i] > 0:
            out[cnt] = i
            cnt += 1
    if cnt == 0:
        if st[H_PLY] == 0:
            # The centre; on an even side the central cell of lowest index, which the
            # root's symmetry classes keep (engine.symmetry: the smallest of each class).
            out[0] = ((st[H_M] - 1) // 2) * st[H_N] + (st[H_N] - 1) // 2
            return 1
        return mnk_legal(st, out)
    return cnt


@njit(cache=True)
def mnk_win_cell(st, player):
    """An empty cell where ``player`` completes k in a row, or -1."""
    if st[H_WCOUNT0 + player] == 0:
        return -1
    ws = _off_wstack(st, player)
    wm = _off_wmask(st, player)
    sp = H_WSP0 + player
    while st[sp] > 0:
        cell = st[ws + st[sp] - 1]
        if st[wm + cell] != 0:
            return cell
        st[sp] -= 1  # stale: occupied since it was pushed
    return -1


@njit(cache=True)
def mnk_tree_moves(st, out, decisive):
    """Expansion moves and a MOVES_* code. With ``decisive``: a winning move alone
    (MOVES_MOVER_WINS); two opponent threats lose (MOVES_MOVER_LOSES, all moves listed);
    one threat must be blocked (that move alone). Teytaud & Teytaud 2010."""
    if decisive:
        p = st[H_TO_MOVE]
        w = mnk_win_cell(st, p)
        if w >= 0:
            out[0] = w
            return 1, MOVES_MOVER_WINS
        threats = st[H_WCOUNT0 + 1 - p]
        if threats >= 2:
            # Lost anyway: list the blocking moves first so the loss is at least not at once.
            cnt = _candidates(st, out)
            wm = _off_wmask(st, 1 - p)
            front = 0
            for i in range(cnt):
                if st[wm + out[i]] != 0:
                    tmp = out[front]
                    out[front] = out[i]
                    out[i] = tmp
                    front += 1
            return cnt, MOVES_MOVER_LOSES
        if threats == 1:
            out[0] = mnk_win_cell(st, 1 - p)
            return 1, MOVES_NORMAL
    return _candidates(st, out), MOVES_NORMAL


@njit(cache=True)
def mnk_random_move(st, rng, near):
    if near and st[H_NLEN] > 0:
        return st[_off_nlist(st) + rand_below(rng, st[H_NLEN])]
    return st[_off_empties(st) + rand_below(rng, st[H_EMPTY])]


@njit(cache=True)
def mnk_playout(st, rng, decisive, near):
    """Play random moves to the end; returns the final status. With ``decisive`` the side to
    move takes a win in one, blocks a single threat, and the playout stops as soon as the
    outcome is forced (a win in one, or two opponent threats)."""
    while st[H_STATUS] == ONGOING:
        if decisive:
            p = st[H_TO_MOVE]
            if st[H_WCOUNT0 + p] > 0:
                return p + 1
            threats = st[H_WCOUNT0 + 1 - p]
            if threats >= 2:
                return 2 - p
            if threats == 1:
                mnk_apply(st, mnk_win_cell(st, 1 - p))
                continue
        mnk_apply(st, mnk_random_move(st, rng, near))
    return st[H_STATUS]


@njit(cache=True)
def mnk_board(st):
    b = _off_board(st)
    return st[b : b + st[H_CELLS]]

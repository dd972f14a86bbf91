"""Compiled search loops: UCT / MCTS-Solver over struct-of-arrays node storage, and flat
Monte Carlo. Python drives them in chunks of iterations and reads the clock between chunks.

Node arrays (one slot per node; children of a node are a contiguous block; slots are handed
out once, from zero-filled arrays, so a new node needs only its parent and action):
  parent, first (first child; 0 = not expanded, as the root is nobody's child), count
  (children), action, visits,
  wins (half-points for the player who moved into the node: win 2, draw 1), proven.
``proven`` is from the point of view of the player who moved into the node (MCTS-Solver,
Winands, Bjornsson & Saito 2008, with draws: a node whose children are all proven takes the
best of their values). ``floor`` marks a node whose mover has a proven draw in hand: its other
proven-draw children are no longer selected and losses backed up through it count as draws
(the pessimistic bound of score-bounded MCTS, Cazenave & Saffidine 2010).
"""

import math

import numpy as np
from numba import njit

from engine.kernels.layout import (
    DRAW,
    H_PLY,
    H_STATUS,
    H_TO_MOVE,
    MOVES_MOVER_LOSES,
    MOVES_MOVER_WINS,
    rand_below,
)
from engine.kernels.rules import apply, playout, tree_moves

UNKNOWN = 0
PROVEN_WIN = 1  # the player who moved into the node wins with best play
PROVEN_DRAW = 2
PROVEN_LOSS = 3

# meta slots
M_NODES = 0  # nodes in use
M_ROOM = 1  # in: 1 = return before an expansion could overflow; out: 2 = returned for that

# 1/v and 1/sqrt(v) for small visit counts: table lookups instead of a division and a square
# root per child in the UCB1 loop (the root of uttt has 81 children).
TABLE_SIZE = 1 << 12
_v = np.arange(TABLE_SIZE, dtype=np.float64)
_v[0] = 1.0
HALF_INV = (0.5 / _v).astype(np.float32)
INV_SQRT = (1.0 / np.sqrt(_v)).astype(np.float32)
SQRT_LOG = np.sqrt(np.log(np.arange(TABLE_SIZE, dtype=np.float64) + 1.0)).astype(np.float32)
del _v


@njit(cache=True)
def _propagate(node, parent, first, count, proven, floor):
    """Push a new proof at ``node`` towards the root while it decides the parent."""
    while node > 0:
        par = parent[node]
        if proven[par] != UNKNOWN:
            return
        if proven[node] == PROVEN_WIN:
            proven[par] = PROVEN_LOSS  # the mover at par has a winning move
        else:
            if proven[node] == PROVEN_DRAW:
                floor[par] = 1
            best = PROVEN_WIN  # worst case for the mover at par: every move loses
            f = first[par]
            for j in range(f, f + count[par]):
                pj = proven[j]
                if pj == UNKNOWN:
                    return
                if pj == PROVEN_DRAW:
                    best = PROVEN_DRAW
            proven[par] = best
        node = par


@njit(cache=True)
def _half_points(status, player):
    if status == DRAW:
        return 1
    return 2 if status == player + 1 else 0


@njit(cache=True)
def mcts_run(
    root_st,
    st,
    parent,
    first,
    count,
    action,
    visits,
    wins,
    proven,
    floor,
    meta,
    iterations,
    c,
    solver,
    decisive,
    playout_policy,
    near,
    rng,
    path,
    buf,
    root_keep,
    expand_at,
):
    """Run up to ``iterations`` MCTS iterations from node 0 (whose position is ``root_st``).
    Stops early when the solver proves the root, or (if ``meta[M_ROOM]`` asks for it) when
    the node arrays might not hold one more expansion. Returns the number of iterations run.
    Where chunks end does not change the search: the same seed gives the same tree.
    The root's children are the moves ``a`` with ``root_keep[a] != 0`` (one move of each
    class of moves a symmetry of the position makes equivalent, ``engine.symmetry``).
    ``decisive``: decisive and anti-decisive moves at expansion; ``playout_policy``: the
    playouts' (``rules.playout``: 0 random, 1 decisive, 2 decisive and anti-decisive).
    A leaf is expanded once it has ``expand_at`` visits (the root at once); until then its
    iterations are playouts from it."""
    capacity = parent.shape[0]
    room = buf.shape[0]  # more than any node's number of children
    root_player = root_st[H_TO_MOVE]
    n_state = root_st.shape[0]
    for it in range(iterations):
        if solver and proven[0] != UNKNOWN:
            return it
        if meta[M_ROOM] != 0 and meta[M_NODES] + room > capacity:
            meta[M_ROOM] = 2  # the caller grows the arrays and calls again
            return it
        for i in range(n_state):
            st[i] = root_st[i]
        node = 0
        depth = 0
        path[0] = 0
        status = 0
        # Selection: UCB1 (Kocsis & Szepesvari 2006), unvisited children first.
        while first[node] > 0 and st[H_STATUS] == 0:
            f = first[node]
            best = -1
            best_value = -1.0
            vn = visits[node]
            if vn < TABLE_SIZE:
                explore = c * SQRT_LOG[vn]
            else:
                explore = c * math.sqrt(math.log(vn + 1.0))
            skip_draws = floor[node] != 0
            for j in range(f, f + count[node]):
                if solver and (
                    proven[j] == PROVEN_LOSS or (skip_draws and proven[j] == PROVEN_DRAW)
                ):
                    continue
                vj = visits[j]
                if vj == 0:
                    best = j
                    break
                if vj < TABLE_SIZE:
                    value = wins[j] * HALF_INV[vj] + explore * INV_SQRT[vj]
                else:
                    value = wins[j] / (2.0 * vj) + explore / math.sqrt(vj)
                if value > best_value:
                    best_value = value
                    best = j
            if best < 0:
                break
            node = best
            apply(st, action[node])
            depth += 1
            path[depth] = node
            if solver and proven[node] != UNKNOWN:
                break
        mover_in = 1 - st[H_TO_MOVE]  # the player who moved into `node`
        if st[H_STATUS] != 0:
            status = st[H_STATUS]
            if solver and proven[node] == UNKNOWN:
                proven[node] = PROVEN_DRAW if status == DRAW else PROVEN_WIN
                _propagate(node, parent, first, count, proven, floor)
        elif solver and proven[node] != UNKNOWN:
            pv = proven[node]
            if pv == PROVEN_DRAW:
                status = DRAW
            elif pv == PROVEN_WIN:
                status = mover_in + 1
            else:
                status = 2 - mover_in
        elif (
            first[node] == 0
            and (node == 0 or visits[node] >= expand_at)
            and meta[M_NODES] < capacity
        ):
            # Expansion: all children at once, in random order.
            n_moves, code = tree_moves(st, buf, decisive)
            if node == 0 and code != MOVES_MOVER_WINS:
                # The move lists are closed under the position's symmetries: keeping one move
                # per class leaves at least one.
                kept = 0
                for i in range(n_moves):
                    if root_keep[buf[i]] != 0:
                        buf[kept] = buf[i]
                        kept += 1
                n_moves = kept
            n_nodes = meta[M_NODES]
            if n_nodes + n_moves > capacity:
                n_moves = 0
            for i in range(n_moves - 1 if code != MOVES_MOVER_LOSES else 0, 0, -1):
                r = rand_below(rng, i + 1)
                tmp = buf[i]
                buf[i] = buf[r]
                buf[r] = tmp
            for i in range(n_moves):
                j = n_nodes + i
                parent[j] = node  # the other fields of a new slot are still zero
                action[j] = buf[i]
            if n_moves > 0:
                first[node] = n_nodes
                count[node] = n_moves
                meta[M_NODES] = n_nodes + n_moves
            mover = st[H_TO_MOVE]
            if n_moves > 0 and code == MOVES_MOVER_WINS:
                node = n_nodes
                depth += 1
                path[depth] = node
                status = mover + 1
                if solver:
                    proven[node] = PROVEN_WIN
                    _propagate(node, parent, first, count, proven, floor)
            elif code == MOVES_MOVER_LOSES:
                status = 2 - mover
                if solver and node > 0:
                    proven[node] = PROVEN_WIN
                    _propagate(node, parent, first, count, proven, floor)
                elif solver:
                    proven[0] = PROVEN_WIN
            elif n_moves > 0:
                node = n_nodes
                apply(st, action[node])
                depth += 1
                path[depth] = node
                if st[H_STATUS] != 0:
                    status = st[H_STATUS]
                    if solver:
                        proven[node] = PROVEN_DRAW if status == DRAW else PROVEN_WIN
                        _propagate(node, parent, first, count, proven, floor)
                else:
                    status = playout(st, rng, playout_policy, near, buf)
            else:
                status = playout(st, rng, playout_policy, near, buf)
        else:
            status = playout(st, rng, playout_policy, near, buf)
        # Backpropagation, leaf to root: the node at depth d was entered by the player to move
        # at depth d-1; above a node with a draw in hand a loss for its mover becomes a draw.
        for d in range(depth, -1, -1):
            nd = path[d]
            player = (root_player + d + 1) & 1
            visits[nd] += 1
            wins[nd] += _half_points(status, player)
            if d > 0 and floor[path[d - 1]] != 0 and status == 2 - player:
                status = DRAW
    return iterations


@njit(cache=True)
def subtree_size(first, count, node, queue):
    """Number of nodes in the subtree under ``node`` (breadth first; ``queue`` holds at least
    that many slots, e.g. the tree's size)."""
    queue[0] = node
    head = 0
    tail = 1
    while head < tail:
        f = first[queue[head]]
        if f > 0:
            for j in range(count[queue[head]]):
                queue[tail + j] = f + j
            tail += count[queue[head]]
        head += 1
    return tail


@njit(cache=True)
def compact(
    parent,
    first,
    count,
    action,
    visits,
    wins,
    proven,
    floor,
    new_root,
    d_parent,
    d_first,
    d_count,
    d_action,
    d_visits,
    d_wins,
    d_proven,
    d_floor,
    src_of,
):
    """Copy the subtree under ``new_root`` into the ``d_`` arrays with the new root at slot 0
    (breadth first, child blocks stay contiguous). Returns the number of nodes copied."""
    src_of[0] = new_root
    head = 0
    tail = 1
    while head < tail:
        s = src_of[head]
        d_action[head] = action[s]
        d_visits[head] = visits[s]
        d_wins[head] = wins[s]
        d_proven[head] = proven[s]
        d_floor[head] = floor[s]
        f = first[s]
        if f > 0:
            n = count[s]
            d_first[head] = tail
            d_count[head] = n
            for j in range(n):
                src_of[tail + j] = f + j
                d_parent[tail + j] = head
            tail += n
        else:
            d_first[head] = 0
            d_count[head] = 0
        head += 1
    d_parent[0] = -1
    return tail


@njit(cache=True)
def flat_run(root_st, st, moves, plays, wins, score, start, iterations, rng, buf, near, max_len):
    """Flat Monte Carlo: ``iterations`` random playouts, one per root move in turn from index
    ``start``. A win scores 1 + (max_len - length) / max_len for the root mover, a loss minus
    that: shorter wins and longer losses weigh more. Returns the next round-robin index."""
    n_moves = moves.shape[0]
    root_player = root_st[H_TO_MOVE]
    root_ply = root_st[H_PLY]
    n_state = root_st.shape[0]
    i = start
    for _ in range(iterations):
        for t in range(n_state):
            st[t] = root_st[t]
        apply(st, moves[i])
        status = st[H_STATUS]
        if status == 0:
            status = playout(st, rng, 0, near, buf)
        length = st[H_PLY] - root_ply
        weight = 1.0 + (max_len - length) / max_len
        plays[i] += 1
        if status == DRAW:
            wins[i] += 1
        elif status == root_player + 1:
            wins[i] += 2
            score[i] += weight
        else:
            score[i] -= weight
        i += 1
        if i == n_moves:
            i = 0
    return i

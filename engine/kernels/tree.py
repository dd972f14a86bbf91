"""Compiled search loops: UCT / MCTS-Solver over one record per node, and flat Monte Carlo.
Python drives them in chunks of iterations and reads the clock between chunks.

Nodes: one int32 array of records of NODE_SIZE fields, node ``i`` at ``NODE_SIZE * i``
(a selection step reads the children's visits, wins and proofs and then the chosen child's
links from one run of records: two records a cache line, where separate arrays per field
cost a line per field and level). Children of a node are a contiguous block; records are
handed out once, from a zero-filled array, so a new node needs only its parent and action.
Fields: visits, wins (half-points for the player who moved into the node: win 2, draw 1),
proven, floor, first (first child; 0 = not expanded, as the root is nobody's child), count
(children), action, parent.
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
    NO_NRT_OPTIONS,
    rand_below,
)
from engine.kernels.rules import (
    apply,
    child_value,
    descend,
    move_prior,
    playout,
    priors_and_values,
    refresh,
    tree_moves,
)

UNKNOWN = 0
PROVEN_WIN = 1  # the player who moved into the node wins with best play
PROVEN_DRAW = 2
PROVEN_LOSS = 3

# A node record's fields, in order.
FIELDS = ("visits", "wins", "proven", "floor", "first", "count", "action", "parent")
VISITS, WINS, PROVEN, FLOOR, FIRST, COUNT, ACTION, PARENT = range(len(FIELDS))
NODE_SIZE = len(FIELDS)

# meta slots
M_NODES = 0  # nodes in use
M_ROOM = 1  # in: 1 = return before an expansion could overflow; out: 2 = returned for that

# 1/v and 1/sqrt(v) for small visit counts: table lookups instead of a division and a square
# root per child in the UCB1 loop (the root of uttt has 81 children).
TABLE_SIZE = 1 << 12
_v = np.arange(TABLE_SIZE, dtype=np.float64)
_v[0] = 1.0
# Rounded to float32 (the trees' values since these tables were float32) and held in float64,
# so the UCB1 scan converts none.
HALF_INV = (0.5 / _v).astype(np.float32).astype(np.float64)
INV_SQRT = (1.0 / np.sqrt(_v)).astype(np.float32).astype(np.float64)
SQRT_LOG = np.sqrt(np.log(np.arange(TABLE_SIZE, dtype=np.float64) + 1.0)).astype(np.float32)
del _v
# From TABLE_SIZE to WIDE_TABLE_SIZE visits, sqrt(log(v + 1)) and sqrt(v) in float64, computed
# by the same libm calls as the loop's formula (bit for bit its values, so the search is the
# same): the root and its most visited children skip a log and square roots per iteration.
WIDE_TABLE_SIZE = 1 << 16
SQRT_LOG_WIDE = np.array([math.sqrt(math.log(v + 1.0)) for v in range(WIDE_TABLE_SIZE)])
SQRT_WIDE = np.array([math.sqrt(v) for v in range(WIDE_TABLE_SIZE)])


@njit(cache=True)
def _propagate(node, nodes):
    """Push a new proof at ``node`` towards the root while it decides the parent."""
    while node > 0:
        par = nodes[NODE_SIZE * node + PARENT]
        rp = NODE_SIZE * par
        if nodes[rp + PROVEN] != UNKNOWN:
            return
        pn = nodes[NODE_SIZE * node + PROVEN]
        if pn == PROVEN_WIN:
            nodes[rp + PROVEN] = PROVEN_LOSS  # the mover at par has a winning move
        else:
            if pn == PROVEN_DRAW:
                nodes[rp + FLOOR] = 1
            best = PROVEN_WIN  # worst case for the mover at par: every move loses
            f = nodes[rp + FIRST]
            for j in range(f, f + nodes[rp + COUNT]):
                pj = nodes[NODE_SIZE * j + PROVEN]
                if pj == UNKNOWN:
                    return
                if pj == PROVEN_DRAW:
                    best = PROVEN_DRAW
            nodes[rp + PROVEN] = best
        node = par


@njit(cache=True)
def _minimax_value(nodes, values, node):
    """Implicit minimax: the value of expanded ``node`` for the player who moved into it, one
    minus the best of its children's for its mover (proven children at their proven value)."""
    best = 0.0
    f = nodes[NODE_SIZE * node + FIRST]
    for j in range(f, f + nodes[NODE_SIZE * node + COUNT]):
        pj = nodes[NODE_SIZE * j + PROVEN]
        if pj == UNKNOWN:
            v = values[j]
        elif pj == PROVEN_WIN:
            v = 1.0
        elif pj == PROVEN_DRAW:
            v = 0.5
        else:
            v = 0.0
        if v > best:
            best = v
    return 1.0 - best


@njit(cache=True)
def _back_up_values(nodes, values, path, depth):
    """After the expansion of ``path[depth]`` (or a proof below it): its minimax value and its
    ancestors', up to the first unproven one that does not change."""
    for d in range(depth, -1, -1):
        node = path[d]
        v = _minimax_value(nodes, values, node)
        if v == values[node] and d < depth and nodes[NODE_SIZE * node + PROVEN] == UNKNOWN:
            return
        values[node] = v


@njit(cache=True, inline="always")
def _half_points(status, player):
    if status == DRAW:
        return 1
    return 2 if status == player + 1 else 0


@njit(cache=True, inline="always")
def _ucb1_best(nodes, values, f, end, explore, solver, skip_from, imm, minimax):
    """UCB1 (Kocsis & Szepesvari 2006) over the children ``f`` to ``end`` of a node whose
    exploration term is ``explore`` (c * sqrt(ln N)): the first unvisited child, else the first
    of the highest score; with ``minimax`` the score moves ``imm`` of the way from the mean
    reward to the child's implicit minimax value. The solver (``solver``) skips children whose
    proof is ``skip_from`` or above. -1 when every child is skipped. Inlined, so a call with
    constant flags compiles a loop without their tests."""
    best = -1
    best_value = -1.0
    for j in range(f, end):
        rj = NODE_SIZE * j
        if solver and nodes[rj + PROVEN] >= skip_from:
            continue
        vj = nodes[rj + VISITS]
        if np.uint32(vj - 1) < TABLE_SIZE - 1:  # 0 < vj < TABLE_SIZE, one test
            t = np.uint32(vj)  # an unsigned index: no test for a negative one
            q = nodes[rj + WINS] * HALF_INV[t]
            value = q + explore * INV_SQRT[t]
        elif vj == 0:
            best = j
            break
        elif vj < WIDE_TABLE_SIZE:
            q = nodes[rj + WINS] / (2.0 * vj)
            value = q + explore / SQRT_WIDE[vj]
        else:
            q = nodes[rj + WINS] / (2.0 * vj)
            value = q + explore / math.sqrt(vj)
        if minimax:
            value += imm * (values[j] - q)
        # Branchless (a cmov and a maxsd; written as an ``if`` or a select, LLVM emits a
        # branch, which child leads the scan being close to a coin toss): the first child of
        # the highest value.
        take = -np.int64(value > best_value)  # all ones when the child leads
        best ^= (best ^ j) & take
        best_value = max(value, best_value)
    return best


@njit(**NO_NRT_OPTIONS)
def mcts_run(
    root_st,
    st,
    nodes,
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
    prior,
    values,
    imm,
    scale,
):
    """Run up to ``iterations`` MCTS iterations from node 0 (whose position is ``root_st``).
    Stops early when the solver proves the root, or (if ``meta[M_ROOM]`` asks for it) when
    the node records might not hold one more expansion. Returns the number of iterations run.
    Where chunks end does not change the search: the same seed gives the same tree.
    The root's children are the moves ``a`` with ``root_keep[a] != 0`` (one move of each
    class of moves a symmetry of the position makes equivalent, ``engine.symmetry``).
    ``decisive``: decisive and anti-decisive moves at expansion; ``playout_policy``: the
    playouts' (``rules.playout``: 0 random, 1 decisive, 2 decisive and anti-decisive).
    A leaf is expanded once it has ``expand_at`` visits (the root at once); until then its
    iterations are playouts from it. ``prior`` > 0: progressive bias by prior knowledge
    (Gelly & Silver 2007; Chaslot et al. 2008): each new child starts with ``prior`` virtual
    visits scored by its ``rules.move_prior`` (+1: 3/4 of a win, 0: half, -1: a quarter,
    -2: none). ``imm`` > 0: implicit minimax backups (Lanctot, Winands, Pepels & Sturtevant
    2014): ``values[j]`` holds node j's heuristic minimax value for the player who moved into
    it (``rules.child_value`` at a leaf, its tanh scale ``scale``, backed up through the tree
    at each expansion) and selection scores a child (1 - imm) * its mean reward + imm * that
    value."""
    capacity = nodes.shape[0] // NODE_SIZE
    room = buf.shape[0]  # more than any node's number of children
    root_player = root_st[H_TO_MOVE]
    n_state = root_st.shape[0]
    for it in range(iterations):
        if solver and nodes[PROVEN] != UNKNOWN:
            return it
        if meta[M_ROOM] != 0 and meta[M_NODES] + room > capacity:
            meta[M_ROOM] = 2  # the caller grows the arrays and calls again
            return it
        for i in range(n_state):
            st[i] = root_st[i]
        node = 0
        r = 0  # the record of ``node``: NODE_SIZE * node
        depth = 0
        path[0] = 0
        status = 0
        stale = 0  # what the descent left for ``refresh`` (uttt: the boards played in)
        # Selection: UCB1 (Kocsis & Szepesvari 2006), unvisited children first.
        while nodes[r + FIRST] > 0 and st[H_STATUS] == 0:
            f = nodes[r + FIRST]
            vn = nodes[r + VISITS]
            if vn < TABLE_SIZE:
                explore = c * SQRT_LOG[vn]
            elif vn < WIDE_TABLE_SIZE:
                explore = c * SQRT_LOG_WIDE[vn]
            else:
                explore = c * math.sqrt(math.log(vn + 1.0))
            # The solver skips proven losses for the mover, and proven draws too where it
            # has a draw in hand: PROVEN_LOSS (3) > PROVEN_DRAW (2) > the others.
            skip_from = PROVEN_DRAW if nodes[r + FLOOR] != 0 else PROVEN_LOSS
            end = f + nodes[r + COUNT]
            if solver and imm > 0.0:  # the defaults of uttt: a loop without their tests
                best = _ucb1_best(nodes, values, f, end, explore, True, skip_from, imm, True)
            else:
                best = _ucb1_best(nodes, values, f, end, explore, solver, skip_from, imm, imm > 0.0)
            if best < 0:
                break
            node = best
            r = NODE_SIZE * node
            stale |= descend(st, nodes[r + ACTION])
            depth += 1
            path[depth] = node
            if solver and nodes[r + PROVEN] != UNKNOWN:
                break
        mover_in = 1 - st[H_TO_MOVE]  # the player who moved into `node`
        if st[H_STATUS] != 0:
            status = st[H_STATUS]
            if solver and nodes[r + PROVEN] == UNKNOWN:
                nodes[r + PROVEN] = PROVEN_DRAW if status == DRAW else PROVEN_WIN
                _propagate(node, nodes)
        elif solver and nodes[r + PROVEN] != UNKNOWN:
            pv = nodes[r + PROVEN]
            if pv == PROVEN_DRAW:
                status = DRAW
            elif pv == PROVEN_WIN:
                status = mover_in + 1
            else:
                status = 2 - mover_in
        elif (
            nodes[r + FIRST] == 0
            and (node == 0 or nodes[r + VISITS] >= expand_at + prior)
            and meta[M_NODES] < capacity
        ):
            # Expansion: all children at once, in random order.
            refresh(st, stale)
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
                k = rand_below(rng, i + 1)
                tmp = buf[i]
                buf[i] = buf[k]
                buf[k] = tmp
            both = prior > 0 and imm > 0.0  # the children's priors and values in one call
            for i in range(n_moves):
                rj = NODE_SIZE * (n_nodes + i)
                nodes[rj + PARENT] = node  # the other fields of a new record are still zero
                nodes[rj + ACTION] = buf[i]
                if prior > 0 and not both:
                    nodes[rj + VISITS] = prior
                    nodes[rj + WINS] = max(0, prior * (2 + move_prior(st, buf[i])) // 2)
            if both:
                priors_and_values(st, buf, n_moves, scale, values, n_nodes)  # buf: the priors
                for i in range(n_moves):
                    rj = NODE_SIZE * (n_nodes + i)
                    nodes[rj + VISITS] = prior
                    nodes[rj + WINS] = max(0, prior * (2 + buf[i]) // 2)
            if n_moves > 0:
                nodes[r + FIRST] = n_nodes
                nodes[r + COUNT] = n_moves
                meta[M_NODES] = n_nodes + n_moves
                if imm > 0.0:
                    if not both:
                        for i in range(n_moves):
                            values[n_nodes + i] = child_value(st, buf[i], scale)
                    _back_up_values(nodes, values, path, depth)
            mover = st[H_TO_MOVE]
            if n_moves > 0 and code == MOVES_MOVER_WINS:
                node = n_nodes
                depth += 1
                path[depth] = node
                status = mover + 1
                if solver:
                    nodes[NODE_SIZE * node + PROVEN] = PROVEN_WIN
                    _propagate(node, nodes)
            elif code == MOVES_MOVER_LOSES:
                status = 2 - mover
                if solver and node > 0:
                    nodes[r + PROVEN] = PROVEN_WIN
                    _propagate(node, nodes)
                elif solver:
                    nodes[PROVEN] = PROVEN_WIN
            elif n_moves > 0:
                node = n_nodes
                r = NODE_SIZE * node
                descend(st, nodes[r + ACTION])  # the playout does not read what it leaves
                depth += 1
                path[depth] = node
                if st[H_STATUS] != 0:
                    status = st[H_STATUS]
                    if solver:
                        nodes[r + PROVEN] = PROVEN_DRAW if status == DRAW else PROVEN_WIN
                        _propagate(node, nodes)
                else:
                    status = playout(st, rng, playout_policy, near, buf)
            else:
                status = playout(st, rng, playout_policy, near, buf)
        else:
            status = playout(st, rng, playout_policy, near, buf)
        if imm > 0.0 and depth > 0 and nodes[NODE_SIZE * path[depth] + PROVEN] != UNKNOWN:
            _back_up_values(nodes, values, path, depth - 1)  # a proven leaf at its value
        # Backpropagation, leaf to root: the node at depth d was entered by the player to move
        # at depth d-1; above a node with a draw in hand a loss for its mover becomes a draw.
        for d in range(depth, -1, -1):
            rd = NODE_SIZE * path[d]
            player = (root_player + d + 1) & 1
            nodes[rd + VISITS] += 1
            nodes[rd + WINS] += _half_points(status, player)
            if d > 0 and nodes[NODE_SIZE * path[d - 1] + FLOOR] != 0 and status == 2 - player:
                status = DRAW
    return iterations


@njit(cache=True)
def subtree_size(nodes, node, queue):
    """Number of nodes in the subtree under ``node`` (breadth first; ``queue`` holds at least
    that many slots, e.g. the tree's size)."""
    queue[0] = node
    head = 0
    tail = 1
    while head < tail:
        rq = NODE_SIZE * queue[head]
        f = nodes[rq + FIRST]
        if f > 0:
            n = nodes[rq + COUNT]
            for j in range(n):
                queue[tail + j] = f + j
            tail += n
        head += 1
    return tail


@njit(cache=True)
def compact(nodes, new_root, out, src_of):
    """Copy the subtree under ``new_root`` into the records ``out`` with the new root at
    record 0 (breadth first, child blocks stay contiguous). Returns the number of nodes
    copied."""
    src_of[0] = new_root
    head = 0
    tail = 1
    while head < tail:
        rs = NODE_SIZE * src_of[head]
        rd = NODE_SIZE * head
        for k in range(NODE_SIZE):
            out[rd + k] = nodes[rs + k]
        f = nodes[rs + FIRST]
        if f > 0:
            n = nodes[rs + COUNT]
            out[rd + FIRST] = tail
            for j in range(n):
                src_of[tail + j] = f + j
            tail += n
        head += 1
    # Parents: each copied child block points at its new parent.
    for h in range(tail):
        rd = NODE_SIZE * h
        f = out[rd + FIRST]
        if f > 0:
            for j in range(f, f + out[rd + COUNT]):
                out[NODE_SIZE * j + PARENT] = h
    out[PARENT] = -1
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

"""Monte Carlo tree search over the compiled kernels.

``mcts_search``: UCT with UCB1 (Kocsis & Szepesvari 2006) and an exploration constant tuned
for rewards in [0, 1] (``MCTS_C``, option "c"); MCTS-Solver (Winands, Bjornsson & Saito 2008:
proven wins and losses propagate; draws too); decisive and anti-decisive moves (Teytaud &
Teytaud 2010) at every expansion (so at the root) and, where cheap, in the playouts (uttt
playouts take a game-winning move; option ``anti_decisive_playouts`` adds the full test);
tree reuse between the moves of one game through the Searcher's per-game ``cache``; in a
position that a board symmetry maps to itself, one root move of each class of equivalent
moves (``engine.symmetry``; the 5x5 reply to the centre has 5 classes instead of 24); on
m,n,k boards, an alpha-beta check of the chosen root move in the last part of the budget
(option ``verify``, a share of the budget; ``_verify``); on uttt, progressive bias by prior
knowledge (Gelly & Silver 2007; Chaslot et al. 2008: a new child starts with ``prior``
virtual visits scored by ``kernels.uttt.uttt_move_prior``) and leaves expanded after
``expand`` visits (``UTTT_PRIOR``, ``UTTT_EXPAND``); option ``minimax``: implicit minimax
backups of a heuristic value (Lanctot, Winands, Pepels & Sturtevant 2014;
``kernels.uttt.uttt_child_value``, the scale of its tanh the option ``value_scale``;
``UTTT_MINIMAX``, ``UTTT_VALUE_SCALE``); option ``avoid_playouts``: uttt playouts draw a
move again, once, when it sends the opponent to a board it can capture at once or to a closed
one (the playout-side term of the prior; ``UTTT_AVOID_PLAYOUTS``), and with it option
``capture_playouts``: on a forced board they take the small board when they can
(``UTTT_CAPTURE_PLAYOUTS``). Final move: the most visited.
``uct_search``: the plain UCT baseline (UCB1 with c = sqrt(2), uniform playouts; no solver,
no decisive moves, no reuse, no symmetry, no check).
``merge_root_results``: root parallelization (Chaslot, Winands & van den Herik 2008): sum the
root visit counts of independent searches of one position; ``engine.parallel`` runs them in
worker processes (the search option ``root_workers=N``).

The whole iteration (selection, expansion, playout, backpropagation) runs inside one compiled
function (``engine.kernels.tree.mcts_run``); Python only slices the budget into chunks and
reads the result. On m,n,k boards of 50 cells or more (gomoku) the tree considers only empty
cells within two of a stone (the centre on an empty board) and playouts pick among the same
cells (option ``near_playouts``; measured on gomoku: 60k vs 54k iterations/s and 8 of 12 games
won against uniform playouts at 100 ms).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.errors import EngineError
from engine.kernels import KernelGame, kernel_game, root_state
from engine.kernels.budget import DEFAULT_SECONDS, run_chunked
from engine.kernels.layout import H_FORCED, KIND_UTTT, PLAYOUT_AVOID, PLAYOUT_CAPTURE, seed_rng
from engine.kernels.tree import (
    FIELDS,
    M_ROOM,
    NODE_SIZE,
    PROVEN_DRAW,
    PROVEN_LOSS,
    PROVEN_WIN,
    UNKNOWN,
    _propagate,
    compact,
    mcts_run,
    subtree_size,
)
from engine.options import UCB1_C, MCTSOptions, UCTOptions
from engine.result import Proof, SearchResult
from engine.symmetry import representative_moves

__all__ = ["mcts_search", "merge_root_results", "uct_search"]

INITIAL_NODES = 1 << 15
MAX_NODES = 1 << 22  # 128 MB of node records; past this the tree stops growing
# What doubling the node records costs per node held, with a margin (measured 19-40 ns on
# the 2-core development machine; the larger arrays fault in fresh pages).
GROW_S_PER_NODE = 80e-9
MAX_PV = 40
CACHE_KEY = "mcts"
# Share of a time budget spent checking the chosen root move with alpha-beta (_verify); with
# an iteration budget, that share of the iterations as alpha-beta nodes (at least the minimum).
VERIFY_SHARE = 0.15
VERIFY_MIN_NODES = 500
VERIFY_MIN_SECONDS = 0.001
# uttt defaults of the options expand and prior, measured in arena matches against the mcts
# of a3f180e at 100 ms (bench/README.md); other games: 1 and 0 (as before).
UTTT_EXPAND = 4
UTTT_PRIOR = 8
# uttt default of the option minimax (implicit minimax backups), measured in arena matches
# against main at 100 ms (0.533 over 500 games) and at equal iterations (bench/README.md,
# branch uttt10).
UTTT_MINIMAX = 0.15
# uttt default of the option value_scale: the scale of the tanh of uttt_child_value, the
# heuristic of implicit minimax backups (0.2 since branch uttt10, where 0.4 measured no better).
UTTT_VALUE_SCALE = 0.2
# uttt default of the option avoid_playouts (playouts redraw a move that sends the opponent
# to a board it can capture, or to a closed one), measured at 100 ms against main (branch
# uttt12, bench/README.md).
UTTT_AVOID_PLAYOUTS = True
# uttt default of the option capture_playouts with avoid_playouts (on a forced board the
# playout takes the small board when it can), measured at equal iterations and at 100 ms
# against main (branch uttt14, bench/README.md).
UTTT_CAPTURE_PLAYOUTS = True
SOLVE_CELLS = 9  # boards this small are searched until the solver proves the root ...
SOLVE_ITERATIONS = 200_000  # ... within this many iterations (3x3 needs ~500 from any position)

# proven[root] is from the point of view of the player who moved into the root.
_ROOT_PROOF: dict[int, Proof] = {PROVEN_LOSS: "win", PROVEN_DRAW: "draw", PROVEN_WIN: "loss"}
_PROOF_VALUE = {"win": 1.0, "draw": 0.0, "loss": -1.0}


def _capacity(nodes: int) -> int:
    """Node-array capacity for ``nodes``: a power of two in [INITIAL_NODES, MAX_NODES]."""
    capacity = INITIAL_NODES
    while capacity < nodes and capacity < MAX_NODES:
        capacity *= 2
    return capacity


class _Tree:
    """Node records (engine.kernels.tree: one int32 array, NODE_SIZE fields a node), each
    field also seen from Python as a strided view (``tree.visits[j]``), and the fill level."""

    __slots__ = ("nodes", *FIELDS, "meta", "values")
    nodes: np.ndarray
    values: np.ndarray
    visits: np.ndarray
    wins: np.ndarray
    proven: np.ndarray
    floor: np.ndarray
    first: np.ndarray
    count: np.ndarray
    action: np.ndarray
    parent: np.ndarray

    def __init__(self, capacity: int = INITIAL_NODES) -> None:
        self._hold(np.zeros(capacity * NODE_SIZE, dtype=np.int32))
        # Implicit minimax values (option minimax, kernels.tree.mcts_run), a node each.
        self.values = np.zeros(capacity, dtype=np.float64)
        self.meta = np.array([1, 0], dtype=np.int64)  # [nodes in use (the root), M_ROOM]
        self.parent[0] = -1  # zero-filled: the kernel writes only parent and action of new nodes
        self.action[0] = -1

    def _hold(self, nodes: np.ndarray) -> None:
        self.nodes = nodes
        records = nodes.reshape(-1, NODE_SIZE)
        for index, name in enumerate(FIELDS):
            setattr(self, name, records[:, index])

    @property
    def size(self) -> int:
        return int(self.meta[0])

    @property
    def capacity(self) -> int:
        return int(self.nodes.shape[0]) // NODE_SIZE

    @property
    def nbytes(self) -> int:
        """The memory of the node records (what a Searcher counts against its bound)."""
        return int(self.nodes.nbytes + self.values.nbytes + self.meta.nbytes)

    def grow(self) -> None:
        """Double the records (up to MAX_NODES); new ones are zero, as the kernel expects."""
        new_capacity = min(MAX_NODES, 2 * self.capacity)
        used = self.size * NODE_SIZE
        nodes = np.zeros(new_capacity * NODE_SIZE, dtype=np.int32)
        nodes[:used] = self.nodes[:used]
        self._hold(nodes)
        values = np.zeros(new_capacity, dtype=np.float64)
        values[: self.size] = self.values[: self.size]
        self.values = values

    def subtree(self, node: int, room: int = 0) -> _Tree:
        """A new tree holding the subtree under ``node`` (the new root), with capacity for
        about ``room`` more nodes. Costs time in proportion to the subtree, not the tree."""
        queue = np.empty(self.size, dtype=np.int32)
        size = int(subtree_size(self.nodes, node, queue))
        out = _Tree(_capacity(size + room))
        out.meta[0] = compact(self.nodes, node, out.nodes, queue)
        out.values[:size] = self.values[queue[:size]]  # queue: the source of each copied node
        return out

    def child(self, node: int, action: int) -> int:
        f = int(self.first[node])
        if f <= 0:
            return -1
        for j in range(f, f + int(self.count[node])):
            if int(self.action[j]) == action:
                return j
        return -1

    def children(self, node: int) -> range:
        f = int(self.first[node])
        return range(f, f + int(self.count[node])) if f > 0 else range(0)


def _run(
    tree: _Tree,
    st: np.ndarray,
    game: KernelGame,
    *,
    deadline: float | None,
    iterations: int | None,
    clock: Callable[[], float],
    rng: np.ndarray,
    c: float,
    solver: bool,
    decisive: bool,
    near_playouts: bool = True,
    root_keep: np.ndarray | None = None,
    anti_decisive_playouts: bool = False,
    expand: int = 1,
    capture_playouts: bool = False,
    prior: int = 0,
    minimax: float = 0.0,
    value_scale: float = UTTT_VALUE_SCALE,
    avoid_playouts: bool = False,
) -> int:
    scratch = np.empty_like(st)
    if root_keep is None:
        root_keep = np.ones(game.max_moves, dtype=np.int8)
    path = np.empty(game.max_moves + 2, dtype=np.int32)
    buf = np.empty(game.max_moves + 1, dtype=np.int32)
    near = bool(game.near) and near_playouts
    # Playouts: 0 random, 1 decisive moves, 2 decisive and anti-decisive (kernels.rules.playout).
    policy = (2 if anti_decisive_playouts else 1) if decisive else 0
    if decisive and capture_playouts:
        policy |= PLAYOUT_CAPTURE
    if decisive and avoid_playouts:
        policy |= PLAYOUT_AVOID

    full = False  # no more growth in this search: the copy would not fit in the budget

    def step(n: int) -> tuple[int, bool]:
        nonlocal full
        # Below MAX_NODES the kernel returns for room rather than refuse an expansion.
        tree.meta[M_ROOM] = 1 if tree.capacity < MAX_NODES and not full else 0
        ran = int(
            mcts_run(
                st,
                scratch,
                tree.nodes,
                tree.meta,
                n,
                c,
                solver,
                decisive,
                policy,
                near,
                rng,
                path,
                buf,
                root_keep,
                expand,
                prior,
                tree.values,
                minimax,
                value_scale,
            )
        )
        if tree.meta[M_ROOM] == 2:
            # Growing copies the whole tree (~40 ns a node here: 80 ms at 2M nodes). When
            # the copy would outlast the budget, the rest of this search runs on without
            # new nodes (as at MAX_NODES) and the next search of the game makes the room.
            if deadline is not None and clock() + GROW_S_PER_NODE * tree.size > deadline:
                full = True
            else:
                tree.grow()  # the budget loop reads the clock after it
            return ran, False
        return ran, ran < n  # fewer than asked: the solver proved the root

    return run_chunked(step, deadline=deadline, iterations=iterations, clock=clock)


def mcts_kernel_run(
    st: np.ndarray, game: KernelGame, *, iterations: int, seed: int, compact_after: bool = False
) -> int:
    """Run the compiled loop without a State (warm-up and benchmarks)."""
    total = 0
    for solver in (True, False):
        tree = _Tree()
        total += _run(
            tree,
            st,
            game,
            deadline=None,
            iterations=iterations,
            clock=_no_clock,
            rng=seed_rng(seed),
            c=UCB1_C,
            solver=solver,
            decisive=solver,
        )
        if compact_after:
            tree.subtree(max(0, int(tree.first[0])), room=tree.size)
    return total


def _no_clock() -> float:
    return 0.0


def _reused_tree(cache: dict[str, Any], spec: Any, history: list[int]) -> _Tree | None:
    """The subtree of the last search's tree for this position, if the moves since are in it.

    The last search saved its whole tree (no work after its deadline); the copy is made here,
    inside this search's budget, and holds only the part below the moves played since (the
    move played, whichever it was, and the opponent's reply), a small fraction of the tree."""
    saved = cache.pop(CACHE_KEY, None)
    if saved is None or saved["spec"] != spec:
        return None
    old: tuple[int, ...] = saved["history"]
    if len(history) < len(old) or tuple(history[: len(old)]) != old:
        return None
    tree: _Tree = saved["tree"]
    node = 0
    for action in history[len(old) :]:
        node = tree.child(node, action)
        if node < 0:
            return None
    if tree.first[node] <= 0:
        return None  # nothing below it worth keeping
    # Room for about as many new nodes as the last search added: few or no regrowths.
    out = tree.subtree(node, room=tree.size)
    _root_proof_from_children(out)
    return out


def _root_proof_from_children(tree: _Tree) -> None:
    """Make the root's proof the one its children give (MCTS-Solver's rule, as in
    ``kernels.tree._propagate``). A node proven by the alpha-beta check (``_verify``) has no
    proven children; as a new root its proof would leave no move to choose, so the search
    proves it again from below."""
    proofs = [int(tree.proven[j]) for j in tree.children(0)]
    tree.floor[0] = int(PROVEN_DRAW in proofs)
    if PROVEN_WIN in proofs:
        tree.proven[0] = PROVEN_LOSS  # the mover has a winning move
    elif proofs and UNKNOWN not in proofs:
        tree.proven[0] = PROVEN_DRAW if PROVEN_DRAW in proofs else PROVEN_WIN
    else:
        tree.proven[0] = UNKNOWN


def _root_symmetry(game: KernelGame, history: list[int], st: np.ndarray) -> np.ndarray | None:
    """The root moves to search when a symmetry maps the position to itself (one move of
    each class of equivalent moves, ``engine.symmetry``), else None (every move)."""
    uttt = game.kind == KIND_UTTT
    forced = int(st[H_FORCED]) if uttt else -1
    return representative_moves(uttt, game.m, game.n, history, forced)


def _verify(
    tree: _Tree,
    state: Any,
    best: int,
    deadline: float | None,
    nodes: int | None,
    clock: Callable[[], float],
    cache: dict[str, Any],
) -> int:
    """Check the chosen root move with alpha-beta before playing it, and the next choice if
    that one is refuted, until the budget is spent or a check proves nothing: MCTS-minimax
    hybrid at the root (Baier & Winands 2015, minimax searches inside MCTS against the
    shallow traps that random playouts miss: on 5x5 k=4 most replies to the centre lose in
    about seven plies while their playouts look even). Only proofs are used: they enter the
    tree as the solver's values (Winands et al. 2008) and propagate. Returns the move to play."""
    from engine.alphabeta import alphabeta_search
    from engine.options import AlphaBetaOptions

    checked: set[int] = set()
    # Within a game alpha-beta keeps its table between the checks, except with an iteration
    # budget: then a fresh table keeps the search a function of its seed and budget.
    game_key = cache.get("game_key")
    keep = deadline is not None and game_key is not None
    ab_cache = {"game_key": f"{game_key}:mcts-verify"} if keep else {}
    while best not in checked and tree.proven[0] == UNKNOWN and tree.proven[best] == UNKNOWN:
        if deadline is not None and deadline - clock() < VERIFY_MIN_SECONDS:
            break
        checked.add(best)
        child = state.clone()
        child.apply_action(int(tree.action[best]))
        if child.is_terminal():
            break
        proof = alphabeta_search(
            child,
            deadline=deadline,
            iterations=nodes,
            seed=0,
            clock=clock,
            options=AlphaBetaOptions(),
            cache=ab_cache,
        ).proven  # for the player to move after ``best``: the opponent
        if proof is None:
            break
        tree.proven[best] = {"win": PROVEN_LOSS, "loss": PROVEN_WIN, "draw": PROVEN_DRAW}[proof]
        _propagate(best, tree.nodes)
        best = _choose(tree)
    return best


def _choose(tree: _Tree) -> int:
    """The root child to play (see module docstring of engine.kernels.tree for ``proven``)."""
    kids = list(tree.children(0))
    proven = tree.proven
    visits = tree.visits

    def most_visited(nodes: list[int]) -> int:
        return max(nodes, key=lambda j: (int(visits[j]), int(tree.wins[j])))

    root = int(proven[0])
    if root == PROVEN_LOSS:  # the mover wins: play a proven win
        return most_visited([j for j in kids if proven[j] == PROVEN_WIN])
    if root == PROVEN_DRAW:
        return most_visited([j for j in kids if proven[j] == PROVEN_DRAW])
    if root == PROVEN_WIN:  # the mover loses whatever it does: resist the longest
        return most_visited(kids)
    open_kids = [j for j in kids if proven[j] == UNKNOWN]
    draws = [j for j in kids if proven[j] == PROVEN_DRAW]
    if not open_kids:
        return most_visited(draws or kids)
    best = most_visited(open_kids)
    if draws and (visits[best] == 0 or tree.wins[best] < int(visits[best])):
        return most_visited(draws)  # expected worse than the draw in hand
    return best


def _result(
    tree: _Tree, best: int, algorithm: str, iterations: int, prior: int = 0
) -> SearchResult:
    """The search's result; the root moves' visits without the ``prior`` virtual visits each
    child started with (progressive bias)."""
    action = int(tree.action[best])
    proof = _ROOT_PROOF.get(int(tree.proven[0]))
    if proof is not None:
        value = _PROOF_VALUE[proof]
    elif tree.proven[best] == PROVEN_DRAW:
        value = 0.0
    else:
        v = int(tree.visits[best])
        value = (tree.wins[best] / v - 1.0) if v else 0.0  # 2 * winrate - 1, wins in half-points
        if tree.floor[0]:
            value = max(value, 0.0)
    pv = [action]
    node = best
    while len(pv) < MAX_PV:
        kids = list(tree.children(node))
        if not kids:
            break
        won = [j for j in kids if tree.proven[j] == PROVEN_WIN]
        node = won[0] if won else max(kids, key=lambda j: int(tree.visits[j]))
        if tree.visits[node] == 0 and not won:
            break
        pv.append(int(tree.action[node]))
    visits = tuple(
        sorted((int(tree.action[j]), max(0, int(tree.visits[j]) - prior)) for j in tree.children(0))
    )
    return SearchResult(
        action=action,
        value=float(max(-1.0, min(1.0, value))),
        algorithm=algorithm,
        iterations=iterations,
        pv=tuple(pv),
        visits=visits,
        proven=proof,
    )


def _search(
    state: Any,
    *,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: MCTSOptions,
    cache: dict[str, Any],
    algorithm: str,
) -> SearchResult:
    c = options.c
    solver = options.solver
    decisive = options.decisive
    reuse = options.reuse
    near_playouts = options.near_playouts
    # uttt playouts take a game-winning move but do not test every move for handing the
    # opponent one: that test costs ~40% of the playout rate, and with it MCTS scored 0.28
    # against itself without it (200 games at 50 ms, bench/README.md). The m,n,k playouts
    # block a single threat at the cost of a counter, always (kernels.rules.playout).
    anti_playouts = options.anti_decisive_playouts
    symmetry = options.symmetry
    game = kernel_game(state.game)
    uttt = game.kind == KIND_UTTT
    expand = options.expand
    if expand is None:
        expand = UTTT_EXPAND if uttt else 1
    prior = options.prior
    if prior is None:
        prior = UTTT_PRIOR if uttt else 0
    minimax = options.minimax
    if minimax is None:
        minimax = UTTT_MINIMAX if uttt else 0.0
    value_scale = options.value_scale
    if value_scale is None:
        value_scale = UTTT_VALUE_SCALE
    avoid_playouts = options.avoid_playouts
    if avoid_playouts is None:
        avoid_playouts = UTTT_AVOID_PLAYOUTS and uttt
    capture_playouts = options.capture_playouts
    if capture_playouts is None:
        # with the avoid redraw only (anti-decisive playouts draw through _policy_move)
        capture_playouts = UTTT_CAPTURE_PLAYOUTS and uttt and avoid_playouts and not anti_playouts
    # By default on m,n,k boards under NEAR_MIN_CELLS: there alpha-beta generates every move
    # (on gomoku only cells near stones, so its "proofs" are not exact) and the traps are
    # shallow; uttt's are deep, left to the solver (the option turns it on anywhere).
    exact_ab = game.kind != KIND_UTTT and not game.near
    verify_share = options.verify
    if verify_share is None:
        verify_share = VERIFY_SHARE if solver and exact_ab else 0.0
    history = state.history()
    spec = (state.game.name, tuple(sorted(state.game.params.items())))
    st = root_state(state, game)
    root_keep = _root_symmetry(game, history, st) if symmetry else None
    # A reused root already has all its moves: a symmetric position starts a fresh tree.
    tree = _reused_tree(cache, spec, history) if reuse and root_keep is None else None
    if tree is None:
        tree = _Tree()
    rng = seed_rng(secrets.randbits(63) if seed is None else seed)
    if solver and iterations is None and game.max_moves <= SOLVE_CELLS:
        # As alphabeta on 3x3: MCTS-Solver proves any 3x3 position in a few hundred
        # iterations (under a millisecond), so it always does, and a CPU starved by other
        # processes cannot cut the search short (3 of 1,000 games lost to perfect as O at
        # load 4, each after a first move searched for ~20 iterations).
        deadline, iterations = None, SOLVE_ITERATIONS
    if deadline is None and iterations is None:
        deadline = clock() + DEFAULT_SECONDS  # as run_chunked, for the verification too
    search_deadline = deadline
    if deadline is not None and verify_share > 0.0:
        # The last part of the budget verifies the chosen move (below).
        search_deadline = deadline - verify_share * max(0.0, deadline - clock())
    done = _run(
        tree,
        st,
        game,
        deadline=search_deadline,
        iterations=iterations,
        clock=clock,
        rng=rng,
        c=c,
        solver=solver,
        decisive=decisive,
        near_playouts=near_playouts,
        root_keep=root_keep,
        anti_decisive_playouts=anti_playouts,
        expand=expand,
        capture_playouts=capture_playouts,
        prior=prior,
        minimax=minimax,
        value_scale=value_scale,
        avoid_playouts=avoid_playouts,
    )
    best = _choose(tree)
    if verify_share > 0.0:
        nodes = None if iterations is None else int(verify_share * iterations)
        nodes = None if nodes is None else max(VERIFY_MIN_NODES, nodes)
        best = _verify(tree, state, best, deadline, nodes, clock, cache)
    result = _result(tree, best, algorithm, done, prior)
    if reuse:
        # Keep the tree; the next search of this game copies out the part below the moves
        # played since (work done inside that search's budget).
        cache[CACHE_KEY] = {"spec": spec, "history": tuple(history), "tree": tree}
    return result


def mcts_search(
    state: Any,
    *,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: MCTSOptions,
    cache: dict[str, Any],
) -> SearchResult:
    """UCT + MCTS-Solver + decisive/anti-decisive moves + tree reuse + root symmetry + root
    check (module docstring), each enhancement switched by its option (MCTSOptions)."""
    return _search(
        state,
        deadline=deadline,
        iterations=iterations,
        seed=seed,
        clock=clock,
        options=options,
        cache=cache,
        algorithm="mcts",
    )


def uct_search(
    state: Any,
    *,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: UCTOptions,
    cache: dict[str, Any],
) -> SearchResult:
    """Plain UCT with UCB1 and uniform random playouts: no solver, no decisive moves, no
    tree reuse (the baseline the enhancements are measured against). Option: c."""
    plain = MCTSOptions(
        c=options.c,
        solver=False,
        decisive=False,
        reuse=False,
        symmetry=False,
        anti_decisive_playouts=False,
        verify=0.0,
        expand=1,
        capture_playouts=False,
        prior=0,
        minimax=0.0,
        avoid_playouts=False,
    )
    return _search(
        state,
        deadline=deadline,
        iterations=iterations,
        seed=seed,
        clock=clock,
        options=plain,
        cache=cache,
        algorithm="uct",
    )


def merge_root_results(results: Sequence[SearchResult]) -> SearchResult:
    """Root parallelization: one result from independent searches of the same position.

    Visit counts are summed per root move and the most visited move is played; a proof from
    any search is exact and wins over statistics. The value is the iteration-weighted mean of
    the values of the searches that chose the merged move (or of all, if none did)."""
    if not results:
        raise EngineError("merge_root_results needs at least one result")
    for proof in ("win", "draw", "loss"):
        proved = [r for r in results if r.proven == proof]
        if proved:
            base = proved[0]
            break
    else:
        base = None
    totals: dict[int, int] = {}
    for r in results:
        for action, count in r.visits or ((r.action, max(1, r.iterations)),):
            totals[action] = totals.get(action, 0) + count
    if base is not None and base.proven in ("win", "draw"):
        action = base.action
    else:
        action = max(totals, key=lambda a: (totals[a], -a))
    agreeing = [r for r in results if r.action == action] or list(results)
    weight = sum(max(1, r.iterations) for r in agreeing)
    value = sum(r.value * max(1, r.iterations) for r in agreeing) / weight
    if base is not None:
        value = _PROOF_VALUE[base.proven or "draw"]
    pv_source = max(agreeing, key=lambda r: r.iterations)
    return SearchResult(
        action=action,
        value=value,
        algorithm=results[0].algorithm,
        iterations=sum(r.iterations for r in results),
        elapsed_ms=max(r.elapsed_ms for r in results),
        pv=pv_source.pv if pv_source.action == action else (action,),
        visits=tuple(sorted(totals.items())),
        depth=None,
        proven=base.proven if base is not None else None,
        seed=results[0].seed,
        budget_ms=results[0].budget_ms,
    )

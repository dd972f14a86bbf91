"""Iterative deepening around the one compiled alpha-beta search (engine/kernels/alphabeta.py).

Python owns the loop over depths, the root move list and the result; each depth is one
kernel call that stops itself at the node limit or the deadline (on the search's injected
clock, which the kernel reads through ``alphabeta_base.CLOCK``). The move of the last
completed depth is played. One context (position arrays and a transposition table) is kept
per board in the process, for the few boards searched last: a fresh search starts a new
table generation, while consecutive searches for the same game (a Searcher's game_key) keep
the table, so one game's moves share what earlier moves learned. On m,n,k boards with k >= 5
the root first tries a VCF for the mover, then (``vct``) a VCT within a share of the budget,
then drops the moves after which the opponent has a VCF (within a share), and, when the
opponent has a VCT as if the mover passed (``defence``), after the deepening plays the best
move after which the opponent has no VCT (the best moves checked together, one threat deeper
each in turn; the deepening goes on in what the check leaves), unless the search found a
win; with ``threats`` (AlphaBetaOptions) the kernel answers open threes with their defences
only and searches the best moves below the root, so only the root's proofs (VCF, VCT,
immediate wins) are reported as proven.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.kernels import alphabeta as AB
from engine.kernels import alphabeta_base as base
from engine.kernels import alphabeta_mnk as K
from engine.kernels import alphabeta_uttt as U
from engine.options import AlphaBetaOptions
from engine.result import Proof, SearchResult

TT_BITS_BIG = 20  # 1M entries (32 MB) for boards of more than 49 cells
TT_BITS_SMALL = 16
ROOT_VCF_DEPTH = 16  # fours in a row tried at the root (k >= 5)
LEAF_VCF_DEPTH = 4  # and at the quiet leaves (threat extension in the tree)
DEFENCE_VCF_DEPTH = 10  # the opponent's fours tried after each root move
VCT_MAX_DEPTH = 8  # threats in a row tried at the root (k = 5)
VCT_SHARE = 0.2  # of the budget left after the VCF
REFUTE_SHARE = 0.2  # of the budget left after them, for the opponent's VCF after each move
# Of the budget left after the root's VCF and VCT, for the defence (which runs only when the
# opponent has a VCT as if the mover passed; 0.4 measured no better, bench/README.md).
DEFENCE_SHARE = 0.25
DEFENCE_MOVES = 6  # the best root moves checked for the opponent's VCT, in order
DEFENCE_STATIC = 3  # and the best root moves by static score not among them
DEFENCE_VCT_DEPTH = 6  # threats in a row tried for the opponent
PASS_SHARE = 0.1  # of the budget left, for the opponent's VCT as if the mover passed
RESUME_SHARE = 0.05  # of the budget: left after the defence, the deepening goes on in it
MAX_ROUNDS = 4  # deepening and defence, at most
DEADLINE_MARGIN_S = 0.0003
EXACT_CELLS = 9  # 3x3 is searched to the end whatever the budget (about 2,000 nodes, ~2 ms)
MNK_EVAL_SCALE = 400.0  # heuristic score mapped to value tanh(score / scale)
UTTT_EVAL_SCALE = 300.0
MAX_CONTEXTS = 3  # boards whose table a process keeps (a gomoku table is about 40 MB)

Context = K.MNKContext | U.UTTTContext
_CONTEXTS: OrderedDict[Any, Context] = OrderedDict()


def _context(key: Any, make: Callable[[], Context], cache: dict[str, Any]) -> tuple[Any, bool]:
    """The process's search context for this board, and whether to keep its table: yes when
    the previous search on it was for the same game (a Searcher's game_key). The least
    recently used board's context goes when more than MAX_CONTEXTS are held."""
    context = _CONTEXTS.get(key)
    if context is None:
        context = _CONTEXTS[key] = make()
        while len(_CONTEXTS) > MAX_CONTEXTS:
            _CONTEXTS.popitem(last=False)
    _CONTEXTS.move_to_end(key)
    game_key = cache.get("game_key")
    keep = game_key is not None and context.owner == game_key
    context.owner = game_key
    return context, keep


def _start(
    context: Any,
    history: list[int],
    keep: bool,
    iterations: int | None,
    clock: Callable[[], float],
) -> None:
    """Set the position and a new search: the kernels read ``clock`` (base.CLOCK), the
    counters, the first check after CHECK_EVERY nodes."""
    context.set_position(history)
    context.new_search(keep)
    info = context.info
    info[base.NODES] = 0
    info[base.STOP] = 0
    base.CLOCK[0] = clock
    context.deadline[base.D_LAST] = clock()
    context.deadline[base.D_STEP] = base.CHECK_EVERY
    info[base.CHECK_AT] = base.CHECK_EVERY
    info[base.LIMIT] = iterations or 0


def _kernel_deadline(deadline: float | None) -> float:
    """The deadline on the search's clock, less a margin for the work after the search
    (principal variation, result); 0.0 = none."""
    if deadline is None:
        return 0.0
    return deadline - DEADLINE_MARGIN_S


def _value(score: int, scale: float) -> float:
    if score > base.MATE_BOUND:
        return 1.0
    if score < -base.MATE_BOUND:
        return -1.0
    return math.tanh(score / scale)


def _proven(score: int, exact: bool) -> Proof | None:
    if score > base.MATE_BOUND:
        return "win"
    if score < -base.MATE_BOUND:
        return "loss"
    return "draw" if exact and score == 0 else None


def _deepen(
    context: Any,
    player: int,
    moves: list[int],
    max_depth: int,
    empties: int,
    kernel_deadline: float,
    iterations: int | None,
    single_opening: bool,
    resume: tuple[int, int, int] | None = None,
) -> tuple[int, int, int, list[int], bool]:
    """Iterative deepening over the root moves: (move, score, depth) of the last completed
    depth, the root moves in that depth's order (best first), and whether the deadline (or
    node limit) stopped it. Every depth, the first included, stops at the deadline (a gomoku
    depth 1, each leaf with its VCF, can take seconds): then the best move searched so far is
    played, else the first of ``moves``. ``resume`` = (move, score, depth) of an earlier
    deepening over ``moves`` (in its order): this one goes on from the depth after it."""
    info = context.info
    root_moves = np.array(moves, dtype=np.int32)
    root_scores = np.zeros(len(moves), dtype=np.int64)
    n = len(moves)
    best_action, best_score, completed = resume or (moves[0], 0, 0)
    stopped = False
    for depth in range(completed + 1, max_depth + 1):
        context.deadline[base.D_DEADLINE] = kernel_deadline
        info[base.LIMIT] = iterations or 0
        root_scores[:] = -base.INF
        best_index = AB.root(player, depth, root_moves, root_scores, n, context.game,
                             context.search)  # fmt: skip
        if info[base.STOP] != 0:
            # A move that beat the first one (the last depth's best) in a full-window search
            # of this unfinished depth is the better move (as chess engines play it).
            if (best_index > 0 or completed == 0) and root_scores[best_index] > -base.INF:
                best_action = int(root_moves[best_index])
                best_score = int(root_scores[best_index])
                root_moves[[0, best_index]] = root_moves[[best_index, 0]]
            stopped = True
            break
        best_action = int(root_moves[best_index])
        best_score = int(root_scores[best_index])
        completed = depth
        # Best first, then the others by their scores in this iteration (stable).
        order = sorted(range(n), key=lambda i: (i != best_index, -int(root_scores[i])))
        root_moves[:n] = root_moves[order]
        if abs(best_score) > base.MATE_BOUND or (single_opening and n == 1 and depth >= 2):
            break
        if depth >= empties:
            break
    return best_action, best_score, completed, [int(m) for m in root_moves], stopped


def _pv(context: Any, player: int, first: int, limit: int) -> tuple[int, ...]:
    """The principal variation from the kernel: ``first``, then forced moves and TT moves."""
    out = np.zeros(min(limit, 80), dtype=np.int64)
    length = AB.pv_line(player, first, out.size, out, context.game, context.search)
    return tuple(int(a) for a in out[:length])


def _pv_limit(completed: int, score: int) -> int:
    """As deep as the search went; to the end of the game when it found a forced result."""
    return max(completed, 1) + (64 if abs(score) > base.MATE_BOUND else 0)


def mnk_context(game: Any) -> K.MNKContext:
    """A new alpha-beta context for the m,n,k game ``game`` (its tables, a table sized for
    the board): what a search keeps between the moves of a game; the tests and the bench
    tools set positions and call its kernels directly."""
    tables = K.MNKTables(game.m, game.n, game.k, game.zobrist)
    return K.MNKContext(tables, TT_BITS_BIG if game.cells > 49 else TT_BITS_SMALL)


def _share(
    context: Any,
    share: float,
    kernel_deadline: float,
    iterations: int | None,
    clock: Callable[[], float],
) -> None:
    """Let the next kernel call run for ``share`` of what is left of the budget (time or
    nodes)."""
    if kernel_deadline:
        now = clock()
        context.deadline[base.D_DEADLINE] = now + share * max(0.0, kernel_deadline - now)
    if iterations:
        spent = int(context.info[base.NODES])
        context.info[base.LIMIT] = spent + max(1, int(share * (iterations - spent)))


def _whole_budget(context: Any, kernel_deadline: float, iterations: int | None) -> None:
    """Clear a kernel call's stop and give the next call what is left of the whole budget
    (after a ``_share``)."""
    context.info[base.STOP] = 0
    context.info[base.LIMIT] = iterations or 0
    context.deadline[base.D_DEADLINE] = kernel_deadline


def _root_vct(
    context: K.MNKContext,
    player: int,
    deadline: float | None,
    iterations: int | None,
    clock: Callable[[], float],
) -> int:
    """Victory by continuous threats (fours and open threes, Allis 1994) for the mover, by
    iterative deepening on the number of attacking moves, within VCT_SHARE of what is left
    of the budget (time or nodes). Returns the attacking moves of the win found (0: none);
    info[BEST] is its first move."""
    info = context.info
    _share(context, VCT_SHARE, _kernel_deadline(deadline), iterations, clock)
    for depth in range(2, VCT_MAX_DEPTH + 1):
        if K.vct(player, 1, depth, 0, context.game, context.search):
            return depth
        if info[base.STOP] != 0:
            break
    return 0


def _passed_threat(
    context: K.MNKContext,
    player: int,
    kernel_deadline: float,
    iterations: int | None,
    clock: Callable[[], float],
) -> int | None:
    """The opponent's VCT within DEFENCE_VCT_DEPTH threats if ``player`` passed (null-move
    threat detection), within PASS_SHARE of what is left of the budget: its first move, -1 if
    the share ran out first, None if there is none."""
    info = context.info
    _share(context, PASS_SHARE, kernel_deadline, iterations, clock)
    found: int | None = None
    for depth in range(1, DEFENCE_VCT_DEPTH + 1):
        if K.vct(1 - player, 1, depth, 0, context.game, context.search):
            found = int(info[K.BEST])
            break
        if info[base.STOP] != 0:
            found = -1
            break
    _whole_budget(context, kernel_deadline, iterations)
    return found


def _defend(
    context: K.MNKContext,
    player: int,
    ordered: list[int],
    kernel_deadline: float,
    iterations: int | None,
    static: Sequence[int] = (),
) -> tuple[int, set[int]]:
    """The DEFENCE_MOVES best root moves checked together for the opponent's VCT, one threat
    deeper for each in turn (``alphabeta_mnk.safest``), within the rest of the budget: the
    first not refuted, else the one refuted by the longest VCT; and the moves refuted (each
    a proof that the opponent wins). When each is refuted, the DEFENCE_STATIC best of
    ``static`` (the root moves by static score) not among them are checked the same way:
    the search's scores, a few plies deep, miss the threats that refute its best moves, and
    the cells that block the opponent's lines (or its threat, first) often hold."""
    info = context.info
    chosen = ordered[:DEFENCE_MOVES]
    tiers = [chosen, [m for m in static if m not in chosen][:DEFENCE_STATIC]]
    refuted: set[int] = set()
    best, longest = chosen[0], 0
    for tier in tiers:
        if not tier:
            continue
        _whole_budget(context, kernel_deadline, iterations)
        candidates = np.array(tier, dtype=np.int64)
        refuted_at = np.zeros(len(candidates), dtype=np.int64)
        index = K.safest(player, candidates, len(candidates), DEFENCE_VCT_DEPTH, refuted_at,
                         context.game, context.search)  # fmt: skip
        stopped = info[base.STOP] != 0
        info[base.STOP] = 0
        refuted |= {int(c) for c, at in zip(candidates, refuted_at, strict=True) if at}
        if refuted_at[index] == 0:
            return int(candidates[index]), refuted
        if refuted_at[index] > longest:
            best, longest = int(candidates[index]), int(refuted_at[index])
        if stopped:
            break
    return best, refuted


def _budget_left(
    context: Any,
    started: float,
    kernel_deadline: float,
    iterations: int | None,
    clock: Callable[[], float],
) -> bool:
    """Whether more than RESUME_SHARE of the budget (time since ``started``, or nodes) is left:
    enough for the deepening to go on."""
    if kernel_deadline:
        now = clock()
        if kernel_deadline - now <= RESUME_SHARE * (kernel_deadline - started):
            return False
    if iterations:
        if iterations - int(context.info[base.NODES]) <= RESUME_SHARE * iterations:
            return False
    return True


def mnk_alphabeta(
    state: Any,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: AlphaBetaOptions,
    cache: dict[str, Any],
) -> SearchResult:
    game = state.game
    context, keep = _context(("mnk", game.m, game.n, game.k), lambda: mnk_context(game), cache)
    context.set_patterns(options.patterns)
    _start(context, state.history(), keep, iterations, clock)
    player = state.current_player()
    info = context.info
    info[K.VCF_DEPTH] = 0
    context.t.params[K.P_THREATS] = int(options.threats and game.k >= 5)
    context.t.params[K.P_WIDTH] = options.width
    kernel_deadline = _kernel_deadline(deadline)
    if game.cells <= EXACT_CELLS:
        kernel_deadline = 0.0  # the whole tree is a few thousand nodes: always play exactly

    moves, kind, cell = context.generate_root(player, None if seed is None else random.Random(seed))
    if kind == 1:
        return SearchResult(cell, 1.0, "alphabeta", 1, pv=(cell,), depth=1, proven="win")
    if kind == 2:
        return SearchResult(cell, -1.0, "alphabeta", 1, pv=(cell,), depth=1, proven="loss")

    empties = game.cells - state.ply()
    # Victory by continuous fours first (gomoku and other k >= 5 boards).
    if game.k >= 5 and kind in (0, 4):  # 4: the mover answers a three, unless it wins first
        g, s = context.game, context.search
        context.deadline[base.D_DEADLINE] = kernel_deadline
        found = K.vcf(player, ROOT_VCF_DEPTH, 0, g, s)
        if found == 0 and info[base.STOP] == 0 and options.vct:
            found = _root_vct(context, player, deadline, iterations, clock)
        if found > 0 and info[base.STOP] == 0:
            action = int(info[K.BEST])
            pv = _pv(context, player, action, 2 * found - 1)
            return SearchResult(
                action, 1.0, "alphabeta", int(info[base.NODES]), pv=pv, depth=2 * found - 1,
                proven="win",
            )  # fmt: skip
        info[base.STOP] = 0
        _share(context, REFUTE_SHARE, kernel_deadline, iterations, clock)
        # Threat-space defence: drop the moves after which the opponent wins by fours (the
        # best by static score first; those left unchecked when the share runs out stay).
        flags = np.zeros(len(moves), dtype=np.int64)
        candidates = np.array(moves, dtype=np.int64)
        K.refuted_by_vcf(player, candidates, len(moves), flags, DEFENCE_VCF_DEPTH, g, s)
        _whole_budget(context, kernel_deadline, iterations)
        safe = [m for m, flag in zip(moves, flags, strict=True) if not flag]
        if safe:
            moves = safe
        info[K.VCF_DEPTH] = LEAF_VCF_DEPTH

    # Threat-space defence against a VCT: keep DEFENCE_SHARE of what is left for it. When the
    # defence ends early (at once when the opponent has no threats), the deepening goes on
    # in what it left, over the moves it did not refute, and the defence checks again.
    defend = game.k >= 5 and options.defence and kind in (0, 4) and len(moves) > 1
    static = list(moves)
    if defend:
        # The opponent's VCT as if the mover passed: none, and it has none after any move
        # (a stone of the mover never helps the opponent), so the defence is not needed;
        # one, and its first move is a cell the defence checks.
        threat = _passed_threat(context, player, kernel_deadline, iterations, clock)
        if threat is None:
            defend = False
        elif threat >= 0 and threat in static:
            static.remove(threat)
            static.insert(0, threat)
    started, resume = clock(), None
    for _ in range(MAX_ROUNDS):
        search_deadline, search_iterations = kernel_deadline, iterations
        if defend:
            if deadline is not None:
                now = clock()
                search_deadline = now + (1.0 - DEFENCE_SHARE) * max(0.0, kernel_deadline - now)
            if iterations:
                spent = int(info[base.NODES])
                search_iterations = spent + int((1.0 - DEFENCE_SHARE) * max(1, iterations - spent))
        best_action, best_score, completed, moves, stopped = _deepen(
            context, player, moves, options.max_depth or empties, empties, search_deadline,
            search_iterations, single_opening=state.ply() == 0, resume=resume,
        )  # fmt: skip
        # Also when the search sees a loss (below the root it searches the best moves only:
        # not a proof): then the move refuted by the longest VCT resists longest.
        if not (defend and best_score <= base.MATE_BOUND):
            break
        deepened = best_action
        best_action, refuted = _defend(
            context, player, moves, kernel_deadline, iterations, static=static
        )
        if not stopped or not _budget_left(context, started, kernel_deadline, iterations, clock):
            break
        safe = [m for m in moves if m not in refuted]
        if safe and safe != moves:
            moves, deepened = safe, safe[0]
        resume = (deepened, best_score, completed)
    exact = completed >= empties and not context.t.params[K.P_RESTRICT]
    # With threats, nodes below the root search their best moves only (kind 5): a win or loss
    # the search scores there is not a proof and is not reported as one (the root's VCF is).
    pruned = bool(context.t.params[K.P_THREATS])
    return SearchResult(
        action=best_action,
        value=_value(best_score, MNK_EVAL_SCALE),
        algorithm="alphabeta",
        iterations=int(info[base.NODES]),
        pv=_pv(context, player, best_action, _pv_limit(completed, best_score)),
        depth=completed,
        proven=None if pruned else _proven(best_score, exact),
    )


def uttt_alphabeta(
    state: Any,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: AlphaBetaOptions,
    cache: dict[str, Any],
) -> SearchResult:
    context, keep = _context("uttt", U.UTTTContext, cache)
    _start(context, state.history(), keep, iterations, clock)
    player = state.current_player()
    info = context.info
    kernel_deadline = _kernel_deadline(deadline)
    moves, winning = context.generate_root(player, None if seed is None else random.Random(seed))
    if winning >= 0:
        return SearchResult(winning, 1.0, "alphabeta", 1, pv=(winning,), depth=1, proven="win")
    empties = 81 - state.ply()
    best_action, best_score, completed, _, _ = _deepen(
        context, player, moves, options.max_depth or empties, empties, kernel_deadline,
        iterations, single_opening=False,
    )  # fmt: skip
    return SearchResult(
        action=best_action,
        value=_value(best_score, UTTT_EVAL_SCALE),
        algorithm="alphabeta",
        iterations=int(info[base.NODES]),
        pv=_pv(context, player, best_action, _pv_limit(completed, best_score)),
        depth=completed,
        proven=_proven(best_score, completed >= empties),
    )

"""Iterative deepening around the compiled alpha-beta kernels (engine/alphabeta_mnk.py, ...).

Python owns the loop over depths, the root move list and the result; each
depth is one kernel call that stops itself at the node limit or the deadline
(converted from the injected clock to the kernel's monotonic clock). The move
of the last completed depth is played. One context (position arrays and a
transposition table) is kept per board size in the process: a fresh search
starts a new table generation, while consecutive searches for the same game
(a Searcher's game_key) keep the table, so one game's moves share what earlier
moves learned. For k >= 5 the root first tries a VCF for the mover, then drops
the moves after which the opponent has one.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from engine import alphabeta_mnk as K
from engine.search import SearchResult

TT_BITS_BIG = 20  # 1M entries (32 MB) for boards of more than 49 cells
TT_BITS_SMALL = 16
ROOT_VCF_DEPTH = 16  # fours in a row tried at the root (k >= 5)
LEAF_VCF_DEPTH = 2  # and at the leaves
DEFENCE_VCF_DEPTH = 10  # the opponent's fours tried after each root move
DEADLINE_MARGIN_S = 0.0003
EXACT_CELLS = 9  # 3x3 is searched to the end whatever the budget (about 2,000 nodes, ~2 ms)
EVAL_SCALE = 400.0  # heuristic score mapped to value tanh(score / EVAL_SCALE)

_TABLES: dict[tuple[int, int, int], K.MNKTables] = {}
_CONTEXTS: dict[tuple[int, int, int], K.MNKContext] = {}


def _pv_limit(completed: int, score: int) -> int:
    """As deep as the search went; to the end of the game when it found a forced result."""
    return max(completed, 1) + (64 if abs(score) > K.MATE_BOUND else 0)


def _kernel_deadline(deadline: float | None, clock: Callable[[], float]) -> float:
    """The deadline on the kernel's clock (perf_counter), less a margin for the work after
    the search (principal variation, result); 0.0 = none."""
    if deadline is None:
        return 0.0
    return time.perf_counter() + (deadline - clock()) - DEADLINE_MARGIN_S


def _start_checks(deadline: np.ndarray, info: np.ndarray, check_at: int) -> None:
    """First node-limit / clock check after CHECK_EVERY nodes (``alphabeta_mnk._tick``)."""
    deadline[K.D_LAST] = time.perf_counter()
    deadline[K.D_STEP] = K.CHECK_EVERY
    info[check_at] = K.CHECK_EVERY


def _value(score: int) -> float:
    if score > K.MATE_BOUND:
        return 1.0
    if score < -K.MATE_BOUND:
        return -1.0
    return math.tanh(score / EVAL_SCALE)


def _proven(score: int, exact: bool) -> str | None:
    if score > K.MATE_BOUND:
        return "win"
    if score < -K.MATE_BOUND:
        return "loss"
    return "draw" if exact and score == 0 else None


def mnk_tables(m: int, n: int, k: int, zobrist: Any) -> K.MNKTables:
    tables = _TABLES.get((m, n, k))
    if tables is None:
        tables = _TABLES[(m, n, k)] = K.MNKTables(m, n, k, zobrist)
    return tables


def _mnk_context(state: Any, cache: dict[str, Any]) -> tuple[K.MNKContext, bool]:
    """The process's search context for this board size, and whether to keep its table:
    yes when the previous search on it was for the same game (a Searcher's game_key)."""
    game = state.game
    size = (game.m, game.n, game.k)
    context = _CONTEXTS.get(size)
    if context is None:
        tables = mnk_tables(game.m, game.n, game.k, game.zobrist)
        bits = TT_BITS_BIG if game.cells > 49 else TT_BITS_SMALL
        context = _CONTEXTS[size] = K.MNKContext(tables, bits)
    game_key = cache.get("game_key")
    keep = game_key is not None and context.owner == game_key
    context.owner = game_key
    return context, keep


def mnk_alphabeta(
    state: Any,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: dict[str, Any],
    cache: dict[str, Any],
) -> SearchResult:
    context, keep = _mnk_context(state, cache)
    context.set_position(state.history())
    context.new_search(keep)
    player = state.current_player()
    game = state.game
    info = context.info
    info[K.NODES] = 0
    info[K.STOP] = 0
    _start_checks(context.deadline, info, K.CHECK_AT)
    info[K.LIMIT] = iterations or 0
    info[K.VCF_DEPTH] = 0
    kernel_deadline = _kernel_deadline(deadline, clock)
    if game.cells <= EXACT_CELLS:
        kernel_deadline = 0.0  # the whole tree is a few thousand nodes: always play exactly
    args = context.arguments()
    tt = context.tt_arrays()

    moves, kind, cell = context.generate_root(player, None if seed is None else random.Random(seed))
    if kind == 1:
        return SearchResult(cell, 1.0, "alphabeta", 1, pv=(cell,), depth=1, proven="win")
    if kind == 2:
        return SearchResult(cell, -1.0, "alphabeta", 1, pv=(cell,), depth=1, proven="loss")

    empties = game.cells - state.ply()
    exact_possible = not bool(context.t.params[K.P_RESTRICT])
    max_depth = int(options.get("max_depth", empties))
    best_action, best_score, completed = moves[0], 0, 0

    # Victory by continuous fours first (gomoku and other k >= 5 boards).
    if game.k >= 5 and kind == 0:
        context.deadline[0] = kernel_deadline
        found = K.vcf(player, ROOT_VCF_DEPTH, 0, *args)
        if found > 0 and info[K.STOP] == 0:
            action = int(info[K.BEST])
            pv = _pv(context, K, player, action, 2 * found - 1)
            return SearchResult(
                action, 1.0, "alphabeta", int(info[K.NODES]), pv=pv, depth=2 * found - 1,
                proven="win",
            )  # fmt: skip
        info[K.STOP] = 0
        # Threat-space defence: drop the moves after which the opponent wins by fours.
        flags = np.zeros(len(moves), dtype=np.int64)
        candidates = np.array(moves, dtype=np.int64)
        K.refuted_by_vcf(player, candidates, len(moves), flags, DEFENCE_VCF_DEPTH, *args)
        info[K.STOP] = 0
        safe = [m for m, flag in zip(moves, flags, strict=True) if not flag]
        if safe:
            moves = safe
        info[K.VCF_DEPTH] = LEAF_VCF_DEPTH

    root_moves = np.array(moves, dtype=np.int32)
    root_scores = np.zeros(len(moves), dtype=np.int64)
    n = len(moves)
    for depth in range(1, max_depth + 1):
        # Depth 1 always completes, so there is always a searched move to play.
        context.deadline[0] = kernel_deadline if depth > 1 else 0.0
        info[K.LIMIT] = (iterations or 0) if depth > 1 else 0
        root_scores[:] = -K.INF
        best_index = K.root(player, depth, root_moves, root_scores, n, *args, *tt)
        if info[K.STOP] != 0:
            break
        best_action = int(root_moves[best_index])
        best_score = int(root_scores[best_index])
        completed = depth
        # Best first, then the others by their scores in this iteration (stable).
        order = sorted(range(n), key=lambda i: (i != best_index, -int(root_scores[i])))
        root_moves[:n] = root_moves[order]
        if abs(best_score) > K.MATE_BOUND or (n == 1 and state.ply() == 0 and depth >= 2):
            break
        if depth >= empties:
            break
    exact = completed >= empties and exact_possible
    pv = _pv(context, K, player, best_action, _pv_limit(completed, best_score))
    return SearchResult(
        action=best_action,
        value=_value(best_score),
        algorithm="alphabeta",
        iterations=int(info[K.NODES]),
        pv=pv,
        depth=completed,
        proven=_proven(best_score, exact),
    )


def _pv(context: Any, kernel: Any, player: int, first: int, limit: int) -> tuple[int, ...]:
    """The principal variation from the kernel: ``first``, then forced moves and TT moves."""
    out = np.zeros(min(limit, 80), dtype=np.int64)
    args = context.arguments()
    extra = context.tt_arrays() if hasattr(context, "tt_arrays") else ()
    length = kernel.pv_line(player, first, out.size, out, *args, *extra)
    return tuple(int(a) for a in out[:length])


_UTTT_CONTEXT: list[Any] = []


def uttt_alphabeta(
    state: Any,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: dict[str, Any],
    cache: dict[str, Any],
) -> SearchResult:
    from engine import alphabeta_uttt as U

    if not _UTTT_CONTEXT:
        _UTTT_CONTEXT.append(U.UTTTContext())
    context = _UTTT_CONTEXT[0]
    game_key = cache.get("game_key")
    keep = game_key is not None and context.owner == game_key
    context.owner = game_key
    context.set_position(state.history())
    context.new_search(keep)
    player = state.current_player()
    info = context.info
    info[U.NODES] = 0
    info[U.STOP] = 0
    _start_checks(context.deadline, info, U.CHECK_AT)
    kernel_deadline = _kernel_deadline(deadline, clock)
    args = context.arguments()
    moves, winning = context.generate_root(player, None if seed is None else random.Random(seed))
    if winning >= 0:
        return SearchResult(winning, 1.0, "alphabeta", 1, pv=(winning,), depth=1, proven="win")
    empties = 81 - state.ply()
    max_depth = int(options.get("max_depth", empties))
    root_moves = np.array(moves, dtype=np.int32)
    root_scores = np.zeros(len(moves), dtype=np.int64)
    n = len(moves)
    best_action, best_score, completed = moves[0], 0, 0
    for depth in range(1, max_depth + 1):
        context.deadline[0] = kernel_deadline if depth > 1 else 0.0
        info[U.LIMIT] = (iterations or 0) if depth > 1 else 0
        root_scores[:] = -K.INF
        best_index = U.root(player, depth, root_moves, root_scores, n, *args)
        if info[U.STOP] != 0:
            break
        best_action = int(root_moves[best_index])
        best_score = int(root_scores[best_index])
        completed = depth
        order = sorted(range(n), key=lambda i: (i != best_index, -int(root_scores[i])))
        root_moves[:n] = root_moves[order]
        if abs(best_score) > K.MATE_BOUND or depth >= empties:
            break
    exact = completed >= empties
    pv = _pv(context, U, player, best_action, _pv_limit(completed, best_score))
    return SearchResult(
        action=best_action,
        value=math.tanh(best_score / 300.0)
        if abs(best_score) <= K.MATE_BOUND
        else _value(best_score),
        algorithm="alphabeta",
        iterations=int(info[U.NODES]),
        pv=pv,
        depth=completed,
        proven=_proven(best_score, exact),
    )


def warm_up() -> None:
    """Compile or load the kernels by searching small boards briefly, with a deadline: the
    clock's object-mode block is compiled on its first use in each process (not cached)."""
    from engine.mnk import MNKGame
    from engine.uttt import UTTTGame

    for m, n, k in ((3, 3, 3), (15, 15, 5)):
        state = MNKGame(m, n, k).new_initial_state()
        state.apply_action(m * n // 2)
        mnk_alphabeta(state, None, 2000, 0, time.perf_counter, {}, {})
        mnk_alphabeta(state, time.perf_counter() + 0.005, None, 0, time.perf_counter, {}, {})
    uttt_state = UTTTGame().new_initial_state()
    uttt_state.apply_action(40)
    uttt_alphabeta(uttt_state, None, 2000, 0, time.perf_counter, {}, {})
    deadline = time.perf_counter() + 0.005
    uttt_alphabeta(uttt_state, deadline, None, 0, time.perf_counter, {}, {})

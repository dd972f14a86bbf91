"""The one alpha-beta search, compiled with numba (``cache=True``) for every game that
implements the operations of ``alphabeta_base`` (``alphabeta_mnk``, ``alphabeta_uttt``).

Negamax with alpha-beta (Knuth & Moore 1975), principal variation search (Marsland 1983),
a Zobrist-keyed transposition table (Zobrist 1970) with generations, killer moves (Akl &
Newborn 1977) and the history heuristic (Schaeffer 1989). Python (engine/alphabeta.py) owns
the iterative deepening around ``root``; each call stops itself at the node limit or the
deadline (``alphabeta_base.tick``).

``game`` is the game's position tuple, ``search`` its ``SearchArrays``; numba compiles each
function once per game (per position tuple type).
"""

from __future__ import annotations

import numpy as np

from engine.kernels import alphabeta_mnk as _mnk  # noqa: F401 (registers the m,n,k operations)
from engine.kernels import alphabeta_uttt as _uttt  # noqa: F401 (registers uttt's)
from engine.kernels.alphabeta_base import (
    EXACT,
    GEN,
    INF,
    LOWER,
    MATE_BOUND,
    NODES,
    ROOT_DEPTH,
    STOP,
    UPPER,
    WIN,
    board_full,
    evaluate,
    generate,
    kernel,
    pick,
    place,
    position_key,
    quiet_leaf,
    remove,
    tick,
)

__all__ = ["negamax", "pv_line", "root"]

# Late-move reductions at the nodes that search their best moves only (generate's kind 5,
# gomoku with threats): from the LMR_FROM-th move on, at LMR_DEPTH plies or more left.
LMR_FROM = 3
LMR_DEPTH = 3


@kernel
def negamax(p, depth, alpha, beta, ply, game, search):
    """Score for player p to move, from p's side; PVS with a transposition table."""
    info = search.info
    tick(info, search.deadline)
    if info[STOP] != 0:
        return 0
    if board_full(game, search):
        return 0
    tt_key, tt_score, tt_meta, tt_gen = (
        search.tt_key,
        search.tt_score,
        search.tt_meta,
        search.tt_gen,
    )
    key = position_key(game, search)
    slot = key & (tt_key.size - 1)
    tt_move = -1
    if tt_key[slot] == key and tt_gen[slot] == info[GEN]:
        meta = tt_meta[slot]
        tt_move = (meta & 0xFFFF) - 1
        e_depth = meta >> 20
        e_flag = (meta >> 16) & 3
        if e_depth >= depth:
            s = tt_score[slot]
            if s > MATE_BOUND:
                s -= ply
            elif s < -MATE_BOUND:
                s += ply
            if (
                e_flag == EXACT
                or (e_flag == LOWER and s >= beta)
                or (e_flag == UPPER and s <= alpha)
            ):
                return s
    done, score = quiet_leaf(game, search, p, depth, ply)
    if done:
        return score
    n, kind, cell = generate(game, search, p, ply, tt_move)
    if kind == 1:
        return WIN - (ply + 1)
    if kind == 2:
        return -(WIN - (ply + 2))
    if n == 0:
        return 0
    # A forced block (3) costs no depth; nor does an answer to a threat (4) within twice the
    # iteration's depth (a bounded extension: beyond it, where the opponent's open threes
    # follow each other, each answer extended again kept an iteration from ending).
    if kind == 3 or (kind == 4 and ply < 2 * info[ROOT_DEPTH]):
        depth += 1
    if depth <= 0:
        return evaluate(game, search, p)
    alpha0 = alpha
    best = -INF
    best_move = -1
    moves, scores, killers = search.moves, search.scores, search.killers
    for i in range(n):
        c = pick(ply, i, n, moves, scores)
        result = place(game, search, c, p, ply)
        if result == 1:
            score = WIN - (ply + 1)
        elif result == 2:
            score = 0
        elif i == 0:
            score = -negamax(1 - p, depth - 1, -beta, -alpha, ply + 1, game, search)
        else:
            # Late-move reductions (as in Stockfish and the Gomocup engines, e.g. Rapfi): at
            # a node that searches its best moves only (kind 5), a move late in the order is
            # first searched one ply shallower with a null window; only if it beats alpha
            # there is it searched again to the full depth.
            reduced = depth - 1
            if kind == 5 and i >= LMR_FROM and depth >= LMR_DEPTH:
                reduced -= 1
            score = -negamax(1 - p, reduced, -alpha - 1, -alpha, ply + 1, game, search)
            if reduced < depth - 1 and score > alpha:
                score = -negamax(1 - p, depth - 1, -alpha - 1, -alpha, ply + 1, game, search)
            if alpha < score < beta:
                score = -negamax(1 - p, depth - 1, -beta, -score, ply + 1, game, search)
        remove(game, search, c, p, ply)
        if info[STOP] != 0:
            return 0
        if score > best:
            best = score
            best_move = c
        if score > alpha:
            alpha = score
        if alpha >= beta:
            if killers[ply, 0] != c:
                killers[ply, 1] = killers[ply, 0]
                killers[ply, 0] = c
            search.history[c] += depth * depth
            break
    flag = EXACT
    if best <= alpha0:
        flag = UPPER
    elif best >= beta:
        flag = LOWER
    stored = best
    if stored > MATE_BOUND:
        stored += ply
    elif stored < -MATE_BOUND:
        stored -= ply
    if tt_gen[slot] != info[GEN] or tt_key[slot] == key or (tt_meta[slot] >> 20) <= depth:
        tt_key[slot] = key
        tt_gen[slot] = info[GEN]
        tt_score[slot] = stored
        tt_meta[slot] = (max(depth, 0) << 20) | (flag << 16) | (best_move + 1)
    return best


@kernel
def root(p, depth, root_moves, root_scores, n, game, search):
    """One iteration at the root over ``root_moves[:n]`` (best first); PVS with a full window.
    Sets root_scores (lower bounds for moves that failed low) and returns the best index."""
    info = search.info
    alpha = -INF
    beta = INF
    best = 0
    # Not literals: a literal argument would compile a second copy of the recursive
    # negamax, and numba's cache cannot load calls between copies (numba issue #6061/#6713).
    ply = np.int64(0)
    child_ply = ply + 1
    info[NODES] += 1
    info[ROOT_DEPTH] = depth
    for i in range(n):
        c = root_moves[i]
        result = place(game, search, c, p, ply)
        if result == 1:
            score = WIN - 1
        elif result == 2 or board_full(game, search):
            score = 0
        elif i == 0:
            score = -negamax(1 - p, depth - 1, -beta, -alpha, child_ply, game, search)
        else:
            score = -negamax(1 - p, depth - 1, -alpha - 1, -alpha, child_ply, game, search)
            if score > alpha and info[STOP] == 0:
                score = -negamax(1 - p, depth - 1, -beta, -score, child_ply, game, search)
        remove(game, search, c, p, ply)
        if info[STOP] != 0:
            return best
        root_scores[i] = score
        if score > alpha:
            alpha = score
            best = i
    return best


@kernel
def pv_line(p, first, limit, out, game, search):
    """Write the principal variation from ``first`` into out (at most ``limit`` moves): forced
    moves (a win at once, a block), else the transposition table's move if it is legal.
    Returns its length; the position is left as it was."""
    info = search.info
    out[0] = first
    n = 1
    result = place(game, search, first, p, 0)
    player = p
    while n < limit and result == 0 and not board_full(game, search):
        player = 1 - player
        count, kind, cell = generate(game, search, player, n, -1)
        move = cell
        ordinary = kind == 0 or kind >= 4  # a move from the table
        if ordinary:
            move = -1
            key = position_key(game, search)
            slot = key & (search.tt_key.size - 1)
            if search.tt_key[slot] == key and search.tt_gen[slot] == info[GEN]:
                move = (search.tt_meta[slot] & 0xFFFF) - 1
        if move < 0 or count == 0 or game.cells[move] != 0:
            break
        if ordinary:
            legal = False
            for i in range(count):
                if search.moves[n, i] == move:
                    legal = True
            if not legal:
                break
        out[n] = move
        result = place(game, search, move, player, n)
        n += 1
    for i in range(n - 1, -1, -1):
        remove(game, search, out[i], p if i % 2 == 0 else 1 - p, i)
    return n

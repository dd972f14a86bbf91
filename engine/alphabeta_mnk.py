"""Compiled alpha-beta for m,n,k-games (numba, ``cache=True``), driven by engine/alphabeta.py.

The board is an int8 array (0 empty, 1 X, 2 O) plus, for every window of k
cells in a row, the number of X and O stones in it. A window holding k stones
of one player is a win, so "k or more in a row" needs no special case; the
counts also give the line-counting evaluation (each window open to one player
only scores ``WEIGHT[count]`` for that player) incrementally, and the move
ordering: a cell scores by the windows it extends and the windows it blocks.

The search is negamax with alpha-beta (Knuth & Moore 1975), principal
variation search (Marsland 1983), a Zobrist-keyed transposition table
(Zobrist 1970) with generations, killer moves and the history heuristic
(Schaeffer 1989). At every node, leaves included: a win in one ends the node,
two opponent threats lose it, one threat forces the block. On big boards only
cells within two of a stone are candidates. For k >= 5 a VCF search
(victory by continuous fours, Allis 1994: each attacking move makes a four that
the defender must block) runs at the root and, shallower, at the leaves.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numba import njit, objmode

WIN = 1 << 40  # a win at ply p scores WIN - p: faster wins score higher
MATE_BOUND = WIN - 100_000
INF = 1 << 50
MAX_PLY = 400

# info[] slots (int64)
NODES, LIMIT, STOP, EVAL, HASH, STONES, GEN, CHECK_AT, VCF_DEPTH, BEST, KLEN = range(11)
# info[FOURS + p]: windows one stone short of k for p and free of the opponent (p wins at
# once); info[THREES + p]: two short (p can make a four). Kept up to date by place/remove.
FOURS, THREES = 11, 13
# params[] slots (int64)
P_M, P_N, P_K, P_CELLS, P_RESTRICT = range(5)
EXACT, LOWER, UPPER = 0, 1, 2
# deadline[] slots (float64): the deadline on perf_counter (0.0 = none), the time of the last
# clock read, and the nodes between checks, adapted so that clock reads come about every
# CHECK_SECONDS whatever a node costs (a gomoku node with its threat search costs tens of
# times a 5x5 node: a fixed count either reads the clock too often or overruns the deadline).
D_DEADLINE, D_LAST, D_STEP = 0, 1, 2
CHECK_SECONDS = 0.0002
CHECK_EVERY = 16  # nodes between the checks at the start of a search
CHECK_MAX = 4096


@njit(cache=True)
def now() -> float:
    """The monotonic clock (seconds), read from compiled code through object mode."""
    with objmode(t="float64"):
        t = time.perf_counter()
    return t


@njit(cache=True)
def _contribution(x, o, weights):
    """A window's score from X's side: open to one player only, by that player's count."""
    if x > 0 and o > 0:
        return 0
    if x > 0:
        return weights[x]
    if o > 0:
        return -weights[o]
    return 0


@njit(cache=True)
def _threat_counts(x, o, info, sign):
    """Add ``sign`` times this window's part in the fours/threes counts."""
    k = info[KLEN]
    if o == 0 and x > 0:
        if x == k - 1:
            info[FOURS] += sign
        elif x == k - 2:
            info[THREES] += sign
    elif x == 0 and o > 0:
        if o == k - 1:
            info[FOURS + 1] += sign
        elif o == k - 2:
            info[THREES + 1] += sign


@njit(cache=True)
def place(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n, weights,
          zobrist, k):  # fmt: skip
    """Put a stone of player p (0/1) on cell c; returns True if it completes a window (a win)."""
    board[c] = p + 1
    info[HASH] ^= zobrist[p, c]
    info[STONES] += 1
    won = False
    delta = 0
    for j in range(cell_win_n[c]):
        w = cell_win[c, j]
        before = _contribution(counts[w, 0], counts[w, 1], weights)
        _threat_counts(counts[w, 0], counts[w, 1], info, -1)
        counts[w, p] += 1
        if counts[w, p] == k:
            won = True
        _threat_counts(counts[w, 0], counts[w, 1], info, 1)
        delta += _contribution(counts[w, 0], counts[w, 1], weights) - before
    info[EVAL] += delta
    for j in range(near_n[c]):
        near[near_list[c, j]] += 1
    return won


@njit(cache=True)
def remove(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n, weights,
           zobrist):  # fmt: skip
    board[c] = 0
    info[HASH] ^= zobrist[p, c]
    info[STONES] -= 1
    delta = 0
    for j in range(cell_win_n[c]):
        w = cell_win[c, j]
        before = _contribution(counts[w, 0], counts[w, 1], weights)
        _threat_counts(counts[w, 0], counts[w, 1], info, -1)
        counts[w, p] -= 1
        _threat_counts(counts[w, 0], counts[w, 1], info, 1)
        delta += _contribution(counts[w, 0], counts[w, 1], weights) - before
    info[EVAL] += delta
    for j in range(near_n[c]):
        near[near_list[c, j]] -= 1


@njit(cache=True)
def _candidates(board, near, params, out):
    """Empty cells worth a look: all of them on small boards, near a stone on big ones."""
    cells = params[P_CELLS]
    n = 0
    restrict = params[P_RESTRICT] == 1
    any_stone = False
    for c in range(cells):
        if board[c] != 0:
            any_stone = True
            continue
        if restrict and near[c] == 0:
            continue
        out[n] = c
        n += 1
    if restrict and not any_stone:
        out[0] = (params[P_M] // 2) * params[P_N] + params[P_N] // 2
        n = 1
    return n


@njit(cache=True)
def generate(p, ply, board, counts, near, params, cell_win, cell_win_n, weights, moves, scores,
             tt_move, killers, history):  # fmt: skip
    """Fill moves[ply] with scored candidates for player p. Returns (n, kind, cell):
    kind 1 = p wins at once on ``cell``; kind 2 = the opponent has two winning cells (p loses);
    kind 3 = the opponent threatens ``cell``, the only move left (n = 1); kind 0 = ordinary."""
    k = params[P_K]
    buf = moves[ply]
    n = _candidates(board, near, params, buf)
    threat = -1
    threats = 0
    for i in range(n):
        c = buf[i]
        own = 0
        for j in range(cell_win_n[c]):
            w = cell_win[c, j]
            a = counts[w, p]
            b = counts[w, 1 - p]
            if b == 0:
                if a == k - 1:
                    return n, 1, c
                own += weights[a + 1]
            if a == 0:
                if b == k - 1:
                    if threat != c:
                        threats += 1
                        threat = c
                own += weights[b + 1] >> 1
        score = own + history[c]
        if c == tt_move:
            score += INF >> 2
        elif c == killers[ply, 0] or c == killers[ply, 1]:
            score += INF >> 4
        scores[ply, i] = score
    if threats >= 2:
        return n, 2, threat
    if threats == 1:
        buf[0] = threat
        scores[ply, 0] = 0
        return 1, 3, threat
    return n, 0, -1


@njit(cache=True)
def _pick(ply, start, n, moves, scores):
    """Selection sort step: bring the best remaining move to ``start``."""
    best = start
    for i in range(start + 1, n):
        if scores[ply, i] > scores[ply, best]:
            best = i
    if best != start:
        moves[ply, start], moves[ply, best] = moves[ply, best], moves[ply, start]
        scores[ply, start], scores[ply, best] = scores[ply, best], scores[ply, start]
    return moves[ply, start]


@njit(cache=True)
def _tick(info, deadline):
    """Count a node; every deadline[D_STEP] nodes compare with the node limit and the
    deadline. The step adapts only when the clock is read (so that reads come about every
    CHECK_SECONDS: it halves when they come too far apart, doubles when too close); without
    a deadline it stays as set, and a node-limited search is deterministic."""
    info[NODES] += 1
    if info[NODES] >= info[CHECK_AT]:
        step = int(deadline[D_STEP])
        if info[LIMIT] > 0 and info[NODES] >= info[LIMIT]:
            info[STOP] = 1
        elif deadline[D_DEADLINE] > 0.0:
            t = now()
            if t >= deadline[D_DEADLINE]:
                info[STOP] = 1
            gap = t - deadline[D_LAST]
            if gap > 2.0 * CHECK_SECONDS and step > 1:
                step //= 2
            elif gap < 0.5 * CHECK_SECONDS and step < CHECK_MAX:
                step *= 2
            deadline[D_LAST] = t
            deadline[D_STEP] = step
        info[CHECK_AT] = info[NODES] + max(1, step)


@njit(cache=True)
def _winning_cells(p, board, counts, params, win_cells, out):
    """The distinct empty cells where p wins at once (at most ``out.size``); returns how many."""
    k = params[P_K]
    n = 0
    for w in range(win_cells.shape[0]):
        if counts[w, p] == k - 1 and counts[w, 1 - p] == 0:
            for t in range(k):
                e = win_cells[w, t]
                if board[e] == 0:
                    seen = False
                    for i in range(n):
                        if out[i] == e:
                            seen = True
                    if not seen and n < out.size:
                        out[n] = e
                        n += 1
    return n


@njit(cache=True)
def vcf(p, depth, ply, board, counts, near, info, deadline, params, cell_win, cell_win_n,
        near_list, near_n, weights, zobrist, win_cells, moves, scores, killers,
        history):  # fmt: skip
    """Victory by continuous fours for attacker p within ``depth`` fours: returns the number of
    attacker moves to the win (1 = wins at once) or 0; info[BEST] = the first move."""
    _tick(info, deadline)
    if info[STOP] != 0:
        return 0
    k = params[P_K]
    buf = moves[ply]
    if info[FOURS + p] > 0:
        _winning_cells(p, board, counts, params, win_cells, buf[:1])
        info[BEST] = buf[0]
        return 1
    forced = -1
    if info[FOURS + 1 - p] > 0:
        if _winning_cells(1 - p, board, counts, params, win_cells, buf[:2]) >= 2:
            return 0
        forced = buf[0]
    if depth <= 0 or info[THREES + p] == 0:
        return 0
    # The cells that make a four: empty cells of windows two short for p, free of 1 - p.
    n = 0
    for w in range(win_cells.shape[0]):
        if counts[w, p] == k - 2 and counts[w, 1 - p] == 0:
            for t in range(k):
                e = win_cells[w, t]
                if board[e] == 0 and (forced < 0 or e == forced):
                    seen = False
                    for i in range(n):
                        if buf[i] == e:
                            seen = True
                    if not seen:
                        buf[n] = e
                        n += 1
    for i in range(n):
        c = buf[i]
        place(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n, weights,
              zobrist, k)  # fmt: skip
        # The cells where p now wins: empty cells of the fours through c.
        first = -1
        second = -1
        for j in range(cell_win_n[c]):
            w = cell_win[c, j]
            if counts[w, p] == k - 1 and counts[w, 1 - p] == 0:
                for t in range(k):
                    e = win_cells[w, t]
                    if board[e] == 0:
                        if first < 0:
                            first = e
                        elif e != first:
                            second = e
        result = 0
        if second >= 0:
            result = 2  # two winning cells: the defender blocks one, p plays the other
        elif first >= 0:
            place(first, 1 - p, board, counts, near, info, cell_win, cell_win_n, near_list,
                  near_n, weights, zobrist, k)  # fmt: skip
            deeper = vcf(p, depth - 1, ply + 2, board, counts, near, info, deadline, params,
                         cell_win, cell_win_n, near_list, near_n, weights, zobrist, win_cells,
                         moves, scores, killers, history)  # fmt: skip
            remove(first, 1 - p, board, counts, near, info, cell_win, cell_win_n, near_list,
                   near_n, weights, zobrist)  # fmt: skip
            if deeper > 0:
                result = deeper + 1
        remove(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n,
               weights, zobrist)  # fmt: skip
        if result > 0:
            info[BEST] = c
            return result
        if info[STOP] != 0:
            return 0
    return 0


@njit(cache=True)
def refuted_by_vcf(p, root_moves, n, flags, depth, board, counts, near, info, deadline, params,
                   cell_win, cell_win_n, near_list, near_n, weights, zobrist, win_cells, moves,
                   scores, killers, history):  # fmt: skip
    """flags[i] = 1 where playing root_moves[i] lets the opponent win by continuous fours (a
    sound proof of loss: threat-space defence at the root). Stops early at the deadline."""
    k = params[P_K]
    ply = np.int64(1)  # not a literal (see root)
    for i in range(n):
        c = root_moves[i]
        flags[i] = 0
        won = place(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n,
                    weights, zobrist, k)  # fmt: skip
        if not won and vcf(1 - p, depth, ply, board, counts, near, info, deadline, params,
                           cell_win, cell_win_n, near_list, near_n, weights, zobrist, win_cells,
                           moves, scores, killers, history) > 0:  # fmt: skip
            flags[i] = 1
        remove(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n, weights,
               zobrist)  # fmt: skip
        if info[STOP] != 0:
            flags[i] = 0
            break
    return 0


@njit(cache=True)
def negamax(p, depth, alpha, beta, ply, board, counts, near, info, deadline, params, cell_win,
            cell_win_n, near_list, near_n, weights, zobrist, win_cells, moves, scores, killers,
            history, tt_key, tt_score, tt_meta, tt_gen):  # fmt: skip
    """Score for player p to move, from p's side; PVS with a transposition table."""
    _tick(info, deadline)
    if info[STOP] != 0:
        return 0
    cells = params[P_CELLS]
    if info[STONES] == cells:
        return 0
    key = info[HASH]
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
    if depth <= 0 and info[FOURS + 1 - p] == 0:
        # A quiet leaf: no move list needed unless p wins at once or the opponent threatens.
        if info[FOURS + p] > 0:
            return WIN - (ply + 1)
        if info[VCF_DEPTH] > 0 and info[THREES + p] > 0:
            found = vcf(p, info[VCF_DEPTH], ply, board, counts, near, info, deadline, params,
                        cell_win, cell_win_n, near_list, near_n, weights, zobrist, win_cells,
                        moves, scores, killers, history)  # fmt: skip
            if found > 0:
                return WIN - (ply + 2 * found - 1)
        return info[EVAL] if p == 0 else -info[EVAL]
    n, kind, cell = generate(p, ply, board, counts, near, params, cell_win, cell_win_n, weights,
                             moves, scores, tt_move, killers, history)  # fmt: skip
    if kind == 1:
        return WIN - (ply + 1)
    if kind == 2:
        return -(WIN - (ply + 2))
    if n == 0:
        return 0
    if kind == 3:
        depth += 1  # a forced block costs no depth (a one-reply extension)
    if depth <= 0:
        return info[EVAL] if p == 0 else -info[EVAL]
    alpha0 = alpha
    best = -INF
    best_move = -1
    k = params[P_K]
    for i in range(n):
        c = _pick(ply, i, n, moves, scores)
        won = place(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n,
                    weights, zobrist, k)  # fmt: skip
        if won:
            score = WIN - (ply + 1)
        elif i == 0:
            score = -negamax(1 - p, depth - 1, -beta, -alpha, ply + 1, board, counts, near, info,
                             deadline, params, cell_win, cell_win_n, near_list, near_n, weights,
                             zobrist, win_cells, moves, scores, killers, history, tt_key,
                             tt_score, tt_meta, tt_gen)  # fmt: skip
        else:
            score = -negamax(1 - p, depth - 1, -alpha - 1, -alpha, ply + 1, board, counts, near,
                             info, deadline, params, cell_win, cell_win_n, near_list, near_n,
                             weights, zobrist, win_cells, moves, scores, killers, history, tt_key,
                             tt_score, tt_meta, tt_gen)  # fmt: skip
            if alpha < score < beta:
                score = -negamax(1 - p, depth - 1, -beta, -score, ply + 1, board, counts, near,
                                 info, deadline, params, cell_win, cell_win_n, near_list, near_n,
                                 weights, zobrist, win_cells, moves, scores, killers, history,
                                 tt_key, tt_score, tt_meta, tt_gen)  # fmt: skip
        remove(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n, weights,
               zobrist)  # fmt: skip
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
            history[c] += depth * depth
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


@njit(cache=True)
def root(p, depth, root_moves, root_scores, n, board, counts, near, info, deadline, params,
         cell_win, cell_win_n, near_list, near_n, weights, zobrist, win_cells, moves, scores,
         killers, history, tt_key, tt_score, tt_meta, tt_gen):  # fmt: skip
    """One iteration at the root over ``root_moves[:n]`` (best first); PVS with a full window.
    Sets root_scores (lower bounds for moves that failed low) and returns the best index."""
    alpha = -INF
    beta = INF
    best = 0
    k = params[P_K]
    # Not the literal 1: a literal argument would compile a second copy of the recursive
    # negamax, and numba's cache cannot load calls between copies (numba issue #6061/#6713).
    ply = np.int64(1)
    info[NODES] += 1
    for i in range(n):
        c = root_moves[i]
        won = place(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n,
                    weights, zobrist, k)  # fmt: skip
        if won:
            score = WIN - 1
        elif info[STONES] == params[P_CELLS]:
            score = 0
        elif i == 0:
            score = -negamax(1 - p, depth - 1, -beta, -alpha, ply, board, counts, near, info,
                             deadline, params, cell_win, cell_win_n, near_list, near_n, weights,
                             zobrist, win_cells, moves, scores, killers, history, tt_key,
                             tt_score, tt_meta, tt_gen)  # fmt: skip
        else:
            score = -negamax(1 - p, depth - 1, -alpha - 1, -alpha, ply, board, counts, near, info,
                             deadline, params, cell_win, cell_win_n, near_list, near_n, weights,
                             zobrist, win_cells, moves, scores, killers, history, tt_key,
                             tt_score, tt_meta, tt_gen)  # fmt: skip
            if score > alpha and info[STOP] == 0:
                score = -negamax(1 - p, depth - 1, -beta, -score, ply, board, counts, near, info,
                                 deadline, params, cell_win, cell_win_n, near_list, near_n,
                                 weights, zobrist, win_cells, moves, scores, killers, history,
                                 tt_key, tt_score, tt_meta, tt_gen)  # fmt: skip
        remove(c, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n, weights,
               zobrist)  # fmt: skip
        if info[STOP] != 0:
            return best
        root_scores[i] = score
        if score > alpha:
            alpha = score
            best = i
    return best


@njit(cache=True)
def _replay(history, board, counts, near, info, cell_win, cell_win_n, near_list, near_n, weights,
            zobrist, k):  # fmt: skip
    for ply in range(history.size):
        place(history[ply], ply & 1, board, counts, near, info, cell_win, cell_win_n, near_list,
              near_n, weights, zobrist, k)  # fmt: skip


@njit(cache=True)
def pv_line(p, first, limit, out, board, counts, near, info, deadline, params, cell_win,
            cell_win_n, near_list, near_n, weights, zobrist, win_cells, moves, scores, killers,
            history, tt_key, tt_score, tt_meta, tt_gen):  # fmt: skip
    """Write the principal variation from ``first`` into out (at most ``limit`` moves): forced
    moves (a win at once, a block), else the transposition table's move. Returns its length;
    the position is left as it was."""
    k = params[P_K]
    cells = params[P_CELLS]
    out[0] = first
    n = 1
    won = place(first, p, board, counts, near, info, cell_win, cell_win_n, near_list, near_n,
                weights, zobrist, k)  # fmt: skip
    player = p
    while n < limit and not won and info[STONES] < cells:
        player = 1 - player
        count, kind, cell = generate(player, n, board, counts, near, params, cell_win, cell_win_n,
                                     weights, moves, scores, -1, killers, history)  # fmt: skip
        move = cell
        if kind == 0:
            move = -1
            key = info[HASH]
            slot = key & (tt_key.size - 1)
            if tt_key[slot] == key and tt_gen[slot] == info[GEN]:
                move = (tt_meta[slot] & 0xFFFF) - 1
        if move < 0 or count == 0 or board[move] != 0:
            break
        out[n] = move
        n += 1
        won = place(move, player, board, counts, near, info, cell_win, cell_win_n, near_list,
                    near_n, weights, zobrist, k)  # fmt: skip
    for i in range(n - 1, -1, -1):
        remove(out[i], p if i % 2 == 0 else 1 - p, board, counts, near, info, cell_win,
               cell_win_n, near_list, near_n, weights, zobrist)  # fmt: skip
    return n


class MNKTables:
    """The static tables of one (m, n, k): windows, neighbourhoods, weights, Zobrist keys."""

    def __init__(self, m: int, n: int, k: int, zobrist: tuple[tuple[int, ...], ...]) -> None:
        cells = m * n
        windows = []
        for r in range(m):
            for c in range(n):
                for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                    end_r, end_c = r + (k - 1) * dr, c + (k - 1) * dc
                    if 0 <= end_r < m and 0 <= end_c < n:
                        windows.append([(r + i * dr) * n + c + i * dc for i in range(k)])
        self.win_cells = np.array(windows, dtype=np.int32).reshape(len(windows), k)
        through: list[list[int]] = [[] for _ in range(cells)]
        for w, window in enumerate(windows):
            for c in window:
                through[c].append(w)
        width = max(1, max(len(t) for t in through))
        self.cell_win = np.zeros((cells, width), dtype=np.int32)
        self.cell_win_n = np.array([len(t) for t in through], dtype=np.int32)
        for c, t in enumerate(through):
            self.cell_win[c, : len(t)] = t
        restrict = cells > 49
        radius = 2
        neighbours = []
        for c in range(cells):
            r0, c0 = divmod(c, n)
            neighbours.append(
                [
                    r * n + cc
                    for r in range(max(0, r0 - radius), min(m, r0 + radius + 1))
                    for cc in range(max(0, c0 - radius), min(n, c0 + radius + 1))
                    if (r, cc) != (r0, c0)
                ]
            )
        self.near_list = np.zeros((cells, max(len(x) for x in neighbours)), dtype=np.int32)
        self.near_n = np.array([len(x) for x in neighbours], dtype=np.int32)
        for c, x in enumerate(neighbours):
            self.near_list[c, : len(x)] = x
        # Window weights by stone count: each stone multiplies the worth of a window by 8.
        self.weights = np.zeros(k + 2, dtype=np.int64)
        for count in range(1, k + 2):
            self.weights[count] = 8 ** min(count - 1, 6)
        self.zobrist = np.array(
            [[z - (1 << 64) if z >= 1 << 63 else z for z in row] for row in zobrist], dtype=np.int64
        )
        self.params = np.array([m, n, k, cells, 1 if restrict else 0], dtype=np.int64)
        self.cells = cells
        self.k = k


class MNKContext:
    """Mutable search state for one board size: position arrays, TT, killers, history."""

    def __init__(self, tables: MNKTables, tt_bits: int) -> None:
        self.t = tables
        cells = tables.cells
        self.board = np.zeros(cells, dtype=np.int8)
        self.counts = np.zeros((tables.win_cells.shape[0], 2), dtype=np.int32)
        self.near = np.zeros(cells, dtype=np.int32)
        self.info = np.zeros(16, dtype=np.int64)
        self.deadline = np.zeros(3, dtype=np.float64)  # D_DEADLINE, D_LAST, D_STEP
        size = 1 << tt_bits
        self.tt_key = np.zeros(size, dtype=np.int64)
        self.tt_score = np.zeros(size, dtype=np.int64)
        self.tt_meta = np.zeros(size, dtype=np.int64)
        self.tt_gen = np.full(size, -1, dtype=np.int64)
        self.moves = np.zeros((MAX_PLY + 2, cells), dtype=np.int32)
        self.scores = np.zeros((MAX_PLY + 2, cells), dtype=np.int64)
        self.killers = np.full((MAX_PLY + 2, 2), -1, dtype=np.int32)
        self.history = np.zeros(cells, dtype=np.int64)
        self.generation = 0
        self.owner: str | None = None  # the game_key of the last search, if any

    def set_position(self, history: list[int]) -> None:
        t = self.t
        self.board[:] = 0
        self.counts[:] = 0
        self.near[:] = 0
        info = self.info
        info[EVAL] = info[HASH] = info[STONES] = 0
        info[FOURS] = info[FOURS + 1] = info[THREES] = info[THREES + 1] = 0
        info[KLEN] = t.k
        moves = np.array(history, dtype=np.int64)
        _replay(moves, self.board, self.counts, self.near, info, t.cell_win, t.cell_win_n,
                t.near_list, t.near_n, t.weights, t.zobrist, t.k)  # fmt: skip

    def new_search(self, keep_table: bool) -> None:
        if not keep_table:
            self.generation += 1
            self.history[:] = 0
        else:
            self.history >>= 2  # age the history between the moves of one game
        self.killers[:] = -1
        self.info[GEN] = self.generation

    def arguments(self) -> tuple[Any, ...]:
        t = self.t
        return (
            self.board, self.counts, self.near, self.info, self.deadline, t.params, t.cell_win,
            t.cell_win_n, t.near_list, t.near_n, t.weights, t.zobrist, t.win_cells, self.moves,
            self.scores, self.killers, self.history,
        )  # fmt: skip

    def tt_arrays(self) -> tuple[Any, ...]:
        return (self.tt_key, self.tt_score, self.tt_meta, self.tt_gen)

    def tt_move(self) -> int:
        key = int(self.info[HASH])
        slot = key & (self.tt_key.size - 1)
        if self.tt_key[slot] == key and self.tt_gen[slot] == self.info[GEN]:
            return int(self.tt_meta[slot] & 0xFFFF) - 1
        return -1

    def generate_root(self, player: int, rng: Any = None) -> tuple[list[int], int, int]:
        """(candidate moves ordered by the static scores, kind, cell) as ``generate`` gives;
        ``rng`` breaks ties between equal scores."""
        t = self.t
        n, kind, cell = generate(
            player, 0, self.board, self.counts, self.near, t.params, t.cell_win, t.cell_win_n,
            t.weights, self.moves, self.scores, self.tt_move(), self.killers, self.history,
        )  # fmt: skip
        moves = [int(x) for x in self.moves[0, :n]]
        scores = [int(x) for x in self.scores[0, :n]]
        if rng is not None:
            ties = [rng.random() for _ in range(n)]
            order = sorted(range(n), key=lambda i: (-scores[i], ties[i]))
        else:
            order = sorted(range(n), key=lambda i: -scores[i])
        return [moves[i] for i in order], int(kind), int(cell)

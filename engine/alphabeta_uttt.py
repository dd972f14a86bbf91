"""Compiled alpha-beta for ultimate tic-tac-toe (numba, ``cache=True``).

Same search as engine/alphabeta_mnk.py (negamax, PVS, Zobrist transposition
table with generations, killers, history; Knuth & Moore 1975, Marsland 1983,
Schaeffer 1989) over uttt arrays: 81 cells (0 empty, 1 X, 2 O), nine small-board
results (0 open, 1/2 won by X/O, 3 drawn) and the small board the mover is sent
to. The evaluation counts lines at both levels: two-in-a-row and one-in-a-row
in the open small boards (weighted by the small board's place in the frame),
won small boards, and frame lines held by one player's won boards; the side
sent to "any board" gets a tempo bonus. Moves are ordered by TT move, killers,
history, then by what they win, block, and where they send the opponent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from engine.alphabeta_mnk import CHECK_EVERY, EXACT, INF, LOWER, MATE_BOUND, UPPER, WIN, _tick
from engine.uttt import LINES, LINES_THROUGH, ZOBRIST, ZOBRIST_FORCED

MAX_PLY = 84
# info[] slots shared with the mnk kernel (NODES, LIMIT, STOP, CHECK_AT by _tick) and our own
NODES, LIMIT, STOP, HASH, GEN, CHECK_AT, FORCED, OPEN, BEST = 0, 1, 2, 4, 6, 7, 11, 12, 13

BOARD_WEIGHT = np.array([3, 2, 3, 2, 4, 2, 3, 2, 3], dtype=np.int64)


def _signed(z: int) -> int:
    return z - (1 << 64) if z >= 1 << 63 else z


LINE_TABLE = np.array(LINES, dtype=np.int32)
THROUGH = np.full((9, 4), -1, dtype=np.int32)
THROUGH_N = np.zeros(9, dtype=np.int32)
for _cell in range(9):
    _lines = [LINES.index(line) for line in LINES_THROUGH[_cell]]
    THROUGH[_cell, : len(_lines)] = _lines
    THROUGH_N[_cell] = len(_lines)
ZOB = np.array([[_signed(z) for z in row] for row in ZOBRIST], dtype=np.int64)
ZOB_FORCED = np.array([_signed(z) for z in ZOBRIST_FORCED], dtype=np.int64)


@njit(cache=True)
def place(a, p, cells, macro, filled, info, undo, ply, lines, through, through_n, zob):
    """Play action a for player p (0/1). Returns 1 if p wins the game, 2 if the game is drawn
    (no open board left), 0 otherwise. undo[ply] keeps what remove() restores."""
    b = a // 9
    c = a % 9
    undo[ply, 0] = info[FORCED]
    undo[ply, 1] = macro[b]
    mark = p + 1
    cells[a] = mark
    filled[b] += 1
    info[HASH] ^= zob[p, a]
    base = b * 9
    for j in range(through_n[c]):
        line = lines[through[c, j]]
        if (
            cells[base + line[0]] == mark
            and cells[base + line[1]] == mark
            and (cells[base + line[2]] == mark)
        ):
            macro[b] = mark
            break
    if macro[b] == mark:
        info[OPEN] -= 1
        for j in range(through_n[b]):
            line = lines[through[b, j]]
            if macro[line[0]] == mark and macro[line[1]] == mark and macro[line[2]] == mark:
                info[FORCED] = -1
                return 1
    elif filled[b] == 9:
        macro[b] = 3
        info[OPEN] -= 1
    info[FORCED] = c if macro[c] == 0 else -1
    if info[OPEN] == 0:
        info[FORCED] = -1
        return 2
    return 0


@njit(cache=True)
def remove(a, p, cells, macro, filled, info, undo, ply, zob):
    b = a // 9
    cells[a] = 0
    filled[b] -= 1
    info[HASH] ^= zob[p, a]
    if macro[b] != undo[ply, 1]:
        macro[b] = undo[ply, 1]
        info[OPEN] += 1
    info[FORCED] = undo[ply, 0]


@njit(cache=True)
def evaluate(p, cells, macro, info, lines, weight):
    """Line counting at both levels, from X's side, returned for player p."""
    score = 0
    for b in range(9):
        if macro[b] == 1:
            score += 60 * weight[b]
            continue
        if macro[b] == 2:
            score -= 60 * weight[b]
            continue
        if macro[b] == 3:
            continue
        base = b * 9
        small = 0
        for li in range(8):
            x = 0
            o = 0
            for t in range(3):
                v = cells[base + lines[li, t]]
                if v == 1:
                    x += 1
                elif v == 2:
                    o += 1
            if o == 0:
                if x == 2:
                    small += 6
                elif x == 1:
                    small += 1
            elif x == 0:
                if o == 2:
                    small -= 6
                elif o == 1:
                    small -= 1
        score += small * weight[b]
    for li in range(8):
        x = 0
        o = 0
        closed = False
        for t in range(3):
            v = macro[lines[li, t]]
            if v == 1:
                x += 1
            elif v == 2:
                o += 1
            elif v == 3:
                closed = True
        if closed:
            continue
        if o == 0:
            if x == 2:
                score += 300
            elif x == 1:
                score += 40
        elif x == 0:
            if o == 2:
                score -= 300
            elif o == 1:
                score -= 40
    if p == 1:
        score = -score
    if info[FORCED] < 0:
        score += 25  # sent anywhere: a free choice
    return score


@njit(cache=True)
def generate(p, ply, cells, macro, info, lines, through, through_n, moves, scores, tt_move,
             killers, history):  # fmt: skip
    """Fill moves[ply] with scored legal moves. Returns (n, winning action or -1)."""
    mark = p + 1
    opp = 2 - p
    forced = info[FORCED]
    n = 0
    for b in range(9):
        if macro[b] != 0 or (forced >= 0 and b != forced):
            continue
        base = b * 9
        for c in range(9):
            a = base + c
            if cells[a] != 0:
                continue
            score = history[a]
            wins_board = False
            for j in range(through_n[c]):
                line = lines[through[c, j]]
                mine = 0
                theirs = 0
                for t in range(3):
                    v = cells[base + line[t]]
                    if v == mark:
                        mine += 1
                    elif v == opp:
                        theirs += 1
                if mine == 2:
                    wins_board = True
                if theirs == 2:
                    score += 300  # blocks a small-board win
            if wins_board:
                score += 1000
                for j in range(through_n[b]):
                    line = lines[through[b, j]]
                    count = 0
                    for t in range(3):
                        if line[t] == b or macro[line[t]] == mark:
                            count += 1
                    if count == 3:
                        return n, a
            # Where the move sends the opponent.
            if macro[c] != 0 or (c == b and wins_board):
                score -= 250  # a free choice for the opponent
            else:
                tbase = c * 9
                for li in range(8):
                    theirs = 0
                    empty = 0
                    for t in range(3):
                        v = cells[tbase + lines[li, t]]
                        if v == opp:
                            theirs += 1
                        elif v == 0:
                            empty += 1
                    if theirs == 2 and empty == 1:
                        score -= 400  # the opponent can win that board
                        break
            if a == tt_move:
                score += INF >> 2
            elif a == killers[ply, 0] or a == killers[ply, 1]:
                score += INF >> 4
            moves[ply, n] = a
            scores[ply, n] = score
            n += 1
    return n, -1


@njit(cache=True)
def _pick(ply, start, n, moves, scores):
    best = start
    for i in range(start + 1, n):
        if scores[ply, i] > scores[ply, best]:
            best = i
    if best != start:
        moves[ply, start], moves[ply, best] = moves[ply, best], moves[ply, start]
        scores[ply, start], scores[ply, best] = scores[ply, best], scores[ply, start]
    return moves[ply, start]


@njit(cache=True)
def negamax(p, depth, alpha, beta, ply, cells, macro, filled, info, deadline, undo, lines,
            through, through_n, zob, zob_forced, weight, moves, scores, killers, history, tt_key,
            tt_score, tt_meta, tt_gen):  # fmt: skip
    _tick(info, deadline)
    if info[STOP] != 0:
        return 0
    key = info[HASH] ^ zob_forced[info[FORCED] + 1]
    slot = key & (tt_key.size - 1)
    tt_move = -1
    if tt_key[slot] == key and tt_gen[slot] == info[GEN]:
        meta = tt_meta[slot]
        tt_move = (meta & 0xFFFF) - 1
        if (meta >> 20) >= depth:
            s = tt_score[slot]
            if s > MATE_BOUND:
                s -= ply
            elif s < -MATE_BOUND:
                s += ply
            flag = (meta >> 16) & 3
            if flag == EXACT or (flag == LOWER and s >= beta) or (flag == UPPER and s <= alpha):
                return s
    n, winning = generate(p, ply, cells, macro, info, lines, through, through_n, moves, scores,
                          tt_move, killers, history)  # fmt: skip
    if winning >= 0:
        return WIN - (ply + 1)
    if depth <= 0:
        return evaluate(p, cells, macro, info, lines, weight)
    alpha0 = alpha
    best = -INF
    best_move = -1
    for i in range(n):
        a = _pick(ply, i, n, moves, scores)
        result = place(a, p, cells, macro, filled, info, undo, ply, lines, through, through_n, zob)
        if result == 1:
            score = WIN - (ply + 1)
        elif result == 2:
            score = 0
        elif i == 0:
            score = -negamax(1 - p, depth - 1, -beta, -alpha, ply + 1, cells, macro, filled, info,
                             deadline, undo, lines, through, through_n, zob, zob_forced, weight,
                             moves, scores, killers, history, tt_key, tt_score, tt_meta,
                             tt_gen)  # fmt: skip
        else:
            score = -negamax(1 - p, depth - 1, -alpha - 1, -alpha, ply + 1, cells, macro, filled,
                             info, deadline, undo, lines, through, through_n, zob, zob_forced,
                             weight, moves, scores, killers, history, tt_key, tt_score, tt_meta,
                             tt_gen)  # fmt: skip
            if alpha < score < beta:
                score = -negamax(1 - p, depth - 1, -beta, -score, ply + 1, cells, macro, filled,
                                 info, deadline, undo, lines, through, through_n, zob,
                                 zob_forced, weight, moves, scores, killers, history, tt_key,
                                 tt_score, tt_meta, tt_gen)  # fmt: skip
        remove(a, p, cells, macro, filled, info, undo, ply, zob)
        if info[STOP] != 0:
            return 0
        if score > best:
            best = score
            best_move = a
        if score > alpha:
            alpha = score
        if alpha >= beta:
            if killers[ply, 0] != a:
                killers[ply, 1] = killers[ply, 0]
                killers[ply, 0] = a
            history[a] += depth * depth
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
def root(p, depth, root_moves, root_scores, n, cells, macro, filled, info, deadline, undo, lines,
         through, through_n, zob, zob_forced, weight, moves, scores, killers, history, tt_key,
         tt_score, tt_meta, tt_gen):  # fmt: skip
    """One iteration over root_moves[:n]; returns the index of the best (see alphabeta_mnk)."""
    alpha = -INF
    beta = INF
    best = 0
    ply = np.int64(0)  # not a literal: one compiled negamax (numba issues #6061, #6713)
    child_ply = ply + 1
    info[NODES] += 1
    for i in range(n):
        a = root_moves[i]
        result = place(a, p, cells, macro, filled, info, undo, ply, lines, through, through_n, zob)
        if result == 1:
            score = WIN - 1
        elif result == 2:
            score = 0
        elif i == 0:
            score = -negamax(1 - p, depth - 1, -beta, -alpha, child_ply, cells, macro, filled,
                             info, deadline, undo, lines, through, through_n, zob, zob_forced,
                             weight, moves, scores, killers, history, tt_key, tt_score, tt_meta,
                             tt_gen)  # fmt: skip
        else:
            score = -negamax(1 - p, depth - 1, -alpha - 1, -alpha, child_ply, cells, macro,
                             filled, info, deadline, undo, lines, through, through_n, zob,
                             zob_forced, weight, moves, scores, killers, history, tt_key,
                             tt_score, tt_meta, tt_gen)  # fmt: skip
            if score > alpha and info[STOP] == 0:
                score = -negamax(1 - p, depth - 1, -beta, -score, child_ply, cells, macro,
                                 filled, info, deadline, undo, lines, through, through_n, zob,
                                 zob_forced, weight, moves, scores, killers, history, tt_key,
                                 tt_score, tt_meta, tt_gen)  # fmt: skip
        remove(a, p, cells, macro, filled, info, undo, ply, zob)
        if info[STOP] != 0:
            return best
        root_scores[i] = score
        if score > alpha:
            alpha = score
            best = i
    return best


@njit(cache=True)
def _replay(history, cells, macro, filled, info, undo, lines, through, through_n, zob):
    ply = np.int64(0)
    for i in range(history.size):
        place(history[i], i & 1, cells, macro, filled, info, undo, ply, lines, through,
              through_n, zob)  # fmt: skip


@njit(cache=True)
def pv_line(p, first, limit, out, cells, macro, filled, info, deadline, undo, lines, through,
            through_n, zob, zob_forced, weight, moves, scores, killers, history, tt_key, tt_score,
            tt_meta, tt_gen):  # fmt: skip
    """The principal variation from ``first`` (see alphabeta_mnk.pv_line); returns its length."""
    out[0] = first
    n = 1
    result = place(first, p, cells, macro, filled, info, undo, 0, lines, through, through_n, zob)
    player = p
    while n < limit and result == 0:
        player = 1 - player
        count, winning = generate(player, n, cells, macro, info, lines, through, through_n, moves,
                                  scores, -1, killers, history)  # fmt: skip
        move = winning
        if move < 0:
            key = info[HASH] ^ zob_forced[info[FORCED] + 1]
            slot = key & (tt_key.size - 1)
            if tt_key[slot] == key and tt_gen[slot] == info[GEN]:
                move = (tt_meta[slot] & 0xFFFF) - 1
        if move < 0 or cells[move] != 0:
            break
        legal = False
        for i in range(count):
            if moves[n, i] == move:
                legal = True
        if not legal and winning < 0:
            break
        out[n] = move
        result = place(move, player, cells, macro, filled, info, undo, n, lines, through,
                       through_n, zob)  # fmt: skip
        n += 1
    for i in range(n - 1, -1, -1):
        remove(out[i], p if i % 2 == 0 else 1 - p, cells, macro, filled, info, undo, i, zob)
    return n


class UTTTContext:
    """Mutable search state for uttt: position arrays, TT, killers, history."""

    def __init__(self, tt_bits: int = 20) -> None:
        self.cells = np.zeros(81, dtype=np.int8)
        self.macro = np.zeros(9, dtype=np.int8)
        self.filled = np.zeros(9, dtype=np.int8)
        self.info = np.zeros(16, dtype=np.int64)
        self.deadline = np.zeros(3, dtype=np.float64)  # alphabeta_mnk's D_DEADLINE, D_LAST, D_STEP
        self.undo = np.zeros((MAX_PLY + 2, 2), dtype=np.int64)
        size = 1 << tt_bits
        self.tt_key = np.zeros(size, dtype=np.int64)
        self.tt_score = np.zeros(size, dtype=np.int64)
        self.tt_meta = np.zeros(size, dtype=np.int64)
        self.tt_gen = np.full(size, -1, dtype=np.int64)
        self.moves = np.zeros((MAX_PLY + 2, 81), dtype=np.int32)
        self.scores = np.zeros((MAX_PLY + 2, 81), dtype=np.int64)
        self.killers = np.full((MAX_PLY + 2, 2), -1, dtype=np.int32)
        self.history = np.zeros(81, dtype=np.int64)
        self.generation = 0
        self.owner: str | None = None

    def set_position(self, history: list[int]) -> None:
        self.cells[:] = 0
        self.macro[:] = 0
        self.filled[:] = 0
        info = self.info
        info[HASH] = 0
        info[FORCED] = -1
        info[OPEN] = 9
        _replay(np.array(history, dtype=np.int64), self.cells, self.macro, self.filled, info,
                self.undo, LINE_TABLE, THROUGH, THROUGH_N, ZOB)  # fmt: skip

    def new_search(self, keep_table: bool) -> None:
        if not keep_table:
            self.generation += 1
            self.history[:] = 0
        else:
            self.history >>= 2
        self.killers[:] = -1
        self.info[GEN] = self.generation

    def arguments(self) -> tuple[Any, ...]:
        return (
            self.cells, self.macro, self.filled, self.info, self.deadline, self.undo, LINE_TABLE,
            THROUGH, THROUGH_N, ZOB, ZOB_FORCED, BOARD_WEIGHT, self.moves, self.scores,
            self.killers, self.history, self.tt_key, self.tt_score, self.tt_meta, self.tt_gen,
        )  # fmt: skip

    def tt_move(self) -> int:
        key = int(self.info[HASH] ^ ZOB_FORCED[self.info[FORCED] + 1])
        slot = key & (self.tt_key.size - 1)
        if self.tt_key[slot] == key and self.tt_gen[slot] == self.info[GEN]:
            return int(self.tt_meta[slot] & 0xFFFF) - 1
        return -1

    def generate_root(self, player: int, rng: Any = None) -> tuple[list[int], int]:
        n, winning = generate(
            player, 0, self.cells, self.macro, self.info, LINE_TABLE, THROUGH, THROUGH_N,
            self.moves, self.scores, self.tt_move(), self.killers, self.history,
        )  # fmt: skip
        moves = [int(x) for x in self.moves[0, :n]]
        scores = [int(x) for x in self.scores[0, :n]]
        ties = [rng.random() for _ in range(n)] if rng is not None else [0.0] * n
        order = sorted(range(n), key=lambda i: (-scores[i], ties[i]))
        return [moves[i] for i in order], int(winning)


__all__ = ["CHECK_EVERY", "UTTTContext", "negamax", "root"]

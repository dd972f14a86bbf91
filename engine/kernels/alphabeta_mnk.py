"""The m,n,k games for the one alpha-beta search (engine/kernels/alphabeta.py), compiled
with numba (``cache=True``).

The board is an int8 array (0 empty, 1 X, 2 O) plus, for every window of k
cells in a row, the number of X and O stones in it. A window holding k stones
of one player is a win, so "k or more in a row" needs no special case; the
counts also give the line-counting evaluation (each window open to one player
only scores ``WEIGHT[count]`` for that player) incrementally, and the move
ordering: a cell scores by the windows it extends and the windows it blocks.

What the search asks of a game (engine/kernels/alphabeta_base.py): at every
node, leaves included, a win in one ends the node, two opponent threats lose
it, one threat forces the block (``generate``). On big boards only cells within
two of a stone are candidates. For k >= 5 a VCF search (victory by continuous
fours, Allis 1994: each attacking move makes a four that the defender must
block) runs at the root (engine/alphabeta.py) and, shallower, at the quiet
leaves (``quiet_leaf``).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
from numba import njit
from numba.extending import overload

from engine.kernels import alphabeta_base as base
from engine.kernels.alphabeta_base import (
    GEN,
    HASH,
    INF,
    INFO_SIZE,
    STOP,
    WIN,
    SearchArrays,
    tick,
)

MAX_PLY = 400
WIDTH = 12  # moves searched below the root with P_THREATS (the best by static score)

# info[] slots of the m,n,k games (alphabeta_base numbers the shared ones)
EVAL, STONES, VCF_DEPTH, BEST, KLEN = 3, 5, 8, 9, 10
# info[FOURS + p]: windows one stone short of k for p and free of the opponent (p wins at
# once); info[THREES + p]: two short (p can make a four). Kept up to date by place/remove.
FOURS, THREES = 11, 13
# params[] slots (int64)
P_M, P_N, P_K, P_CELLS, P_RESTRICT, P_THREATS, P_WIDTH = range(7)

MNKArrays = namedtuple(
    "MNKArrays",
    ["cells", "counts", "near", "params", "cell_win", "cell_win_n", "near_list", "near_n",
     "weights", "zobrist", "win_cells"],
)  # fmt: skip


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
def generate(p, ply, board, counts, near, params, cell_win, cell_win_n, weights, win_cells, moves,
             scores, tt_move, killers, history):  # fmt: skip
    """Fill moves[ply] with scored candidates for player p. Returns (n, kind, cell):
    kind 1 = p wins at once on ``cell``; kind 2 = the opponent has two winning cells (p loses);
    kind 3 = the opponent threatens ``cell``, the only move left (n = 1); kind 0 = ordinary.
    With params[P_THREATS], a node where the opponent has a three that makes an open four (or
    a double four) keeps only the moves that answer it (``_answers``): kind 4; other nodes
    below the root keep their params[P_WIDTH] best moves: kind 5 when that drops some."""
    k = params[P_K]
    buf = moves[ply]
    n = _candidates(board, near, params, buf)
    threat = -1
    threats = 0
    look = params[P_THREATS] != 0
    open_fours = 0  # candidates where the opponent would get two winning cells
    for i in range(n):
        c = buf[i]
        own = 0
        win_q = -1  # a cell where the opponent would win after playing c
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
                elif b == k - 2 and look and win_q != -2:
                    for t in range(k):  # the window's one other empty cell
                        e = win_cells[w, t]
                        if e != c and board[e] == 0:
                            if win_q == -1:
                                win_q = e
                            elif e != win_q:
                                win_q = -2  # a second winning cell
                                open_fours += 1
                            break
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
    if open_fours > 0:
        n = _answers(p, ply, n, board, counts, k, cell_win, cell_win_n, win_cells, moves, scores)
        return n, 4, -1
    width = params[P_WIDTH]
    if look and ply > 0 and n > width:
        return _best(ply, n, width, moves, scores), 5, -1
    return n, 0, -1


@njit(cache=True)
def _best(ply, n, width, moves, scores):
    """Keep the ``width`` best-scored of moves[ply][:n] (selection), best first: below the
    root a gomoku node searches its most promising moves only, as the strong engines do."""
    for i in range(width):
        best = i
        for j in range(i + 1, n):
            if scores[ply, j] > scores[ply, best]:
                best = j
        if best != i:
            moves[ply, i], moves[ply, best] = moves[ply, best], moves[ply, i]
            scores[ply, i], scores[ply, best] = scores[ply, best], scores[ply, i]
    return width


@njit(cache=True)
def _winning_cells_after(q, c, board, counts, k, cell_win, cell_win_n, win_cells):
    """How many distinct cells q would win on after playing the empty cell c (0, 1, or 2 for
    two or more: an open four or a double four, which wins unless the other side wins first)."""
    first = -1
    for j in range(cell_win_n[c]):
        w = cell_win[c, j]
        if counts[w, q] == k - 2 and counts[w, 1 - q] == 0:
            for t in range(k):
                e = win_cells[w, t]
                if e != c and board[e] == 0:
                    if first < 0:
                        first = e
                    elif e != first:
                        return 2
    return 0 if first < 0 else 1


@njit(cache=True)
def _answers(p, ply, n, board, counts, k, cell_win, cell_win_n, win_cells, moves, scores):
    """Threat-space defence (Allis 1994): the opponent q has cells t where it makes an open
    four (or a double four). p's only moves that do not lose to it are the fours of p (p
    keeps the initiative) and the cells of the windows that make q's winning cells after t
    (t itself included): a stone anywhere else leaves t winning. Keeps those of moves[ply][:n]
    in place (with their scores) and returns how many."""
    q = 1 - p
    buf = moves[ply]
    defence = np.zeros(board.size, dtype=np.uint8)
    for i in range(n):
        t = buf[i]
        if _winning_cells_after(q, t, board, counts, k, cell_win, cell_win_n, win_cells) >= 2:
            for j in range(cell_win_n[t]):
                w = cell_win[t, j]
                if counts[w, q] == k - 2 and counts[w, p] == 0:
                    for x in range(k):
                        defence[win_cells[w, x]] = 1
    kept = 0
    for i in range(n):
        c = buf[i]
        keep = defence[c] == 1
        if not keep:
            for j in range(cell_win_n[c]):
                w = cell_win[c, j]
                if counts[w, p] == k - 2 and counts[w, q] == 0:
                    keep = True  # c makes a four
                    break
        if keep:
            buf[kept] = c
            scores[ply, kept] = scores[ply, i]
            kept += 1
    return kept


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
    tick(info, deadline)
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
def _replay(history, board, counts, near, info, cell_win, cell_win_n, near_list, near_n, weights,
            zobrist, k):  # fmt: skip
    for ply in range(history.size):
        place(history[ply], ply & 1, board, counts, near, info, cell_win, cell_win_n, near_list,
              near_n, weights, zobrist, k)  # fmt: skip


# --- the operations the search asks of a game (alphabeta_base), for MNKArrays ----------------


def _is_mnk(game: Any) -> bool:
    return getattr(game, "instance_class", None) is MNKArrays


@overload(base.place)
def _place_mnk(game, search, action, player, ply):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search, action, player, ply):  # noqa: ANN001, ANN202
            g = game
            won = place(action, player, g.cells, g.counts, g.near, search.info, g.cell_win,
                        g.cell_win_n, g.near_list, g.near_n, g.weights, g.zobrist,
                        g.params[P_K])  # fmt: skip
            return 1 if won else 0

        return impl
    return None


@overload(base.remove)
def _remove_mnk(game, search, action, player, ply):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search, action, player, ply):  # noqa: ANN001, ANN202
            g = game
            remove(action, player, g.cells, g.counts, g.near, search.info, g.cell_win,
                   g.cell_win_n, g.near_list, g.near_n, g.weights, g.zobrist)  # fmt: skip

        return impl
    return None


@overload(base.board_full)
def _board_full_mnk(game, search):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search):  # noqa: ANN001, ANN202
            return search.info[STONES] == game.params[P_CELLS]

        return impl
    return None


@overload(base.position_key)
def _position_key_mnk(game, search):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search):  # noqa: ANN001, ANN202
            return search.info[HASH]

        return impl
    return None


@overload(base.quiet_leaf)
def _quiet_leaf_mnk(game, search, player, depth, ply):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search, player, depth, ply):  # noqa: ANN001, ANN202
            # A quiet leaf: no move list needed unless p wins at once or the opponent threatens.
            info = search.info
            p = player
            if depth > 0 or info[FOURS + 1 - p] != 0:
                return False, 0
            if info[FOURS + p] > 0:
                return True, WIN - (ply + 1)
            if info[VCF_DEPTH] > 0 and info[THREES + p] > 0:
                g = game
                s = search
                found = vcf(p, info[VCF_DEPTH], ply, g.cells, g.counts, g.near, s.info,
                            s.deadline, g.params, g.cell_win, g.cell_win_n, g.near_list,
                            g.near_n, g.weights, g.zobrist, g.win_cells, s.moves, s.scores,
                            s.killers, s.history)  # fmt: skip
                if found > 0:
                    return True, WIN - (ply + 2 * found - 1)
            return True, info[EVAL] if p == 0 else -info[EVAL]

        return impl
    return None


@overload(base.generate)
def _generate_mnk(game, search, player, ply, tt_move):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search, player, ply, tt_move):  # noqa: ANN001, ANN202
            g = game
            s = search
            return generate(player, ply, g.cells, g.counts, g.near, g.params, g.cell_win,
                            g.cell_win_n, g.weights, g.win_cells, s.moves, s.scores, tt_move,
                            s.killers, s.history)  # fmt: skip

        return impl
    return None


@overload(base.evaluate)
def _evaluate_mnk(game, search, player):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search, player):  # noqa: ANN001, ANN202
            info = search.info
            return info[EVAL] if player == 0 else -info[EVAL]

        return impl
    return None


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
        # P_THREATS: set per search by the driver (AlphaBetaOptions.threats, k >= 5).
        self.params = np.array([m, n, k, cells, 1 if restrict else 0, 0, WIDTH], dtype=np.int64)
        self.cells = cells
        self.k = k


class MNKContext:
    """Mutable search state for one board size: position arrays, TT, killers, history."""

    def __init__(self, tables: MNKTables, tt_bits: int) -> None:
        self.t = tables
        cells = tables.cells
        size = 1 << tt_bits
        self.search = SearchArrays(
            info=np.zeros(INFO_SIZE, dtype=np.int64),
            deadline=np.zeros(3, dtype=np.float64),  # D_DEADLINE, D_LAST, D_STEP
            moves=np.zeros((MAX_PLY + 2, cells), dtype=np.int32),
            scores=np.zeros((MAX_PLY + 2, cells), dtype=np.int64),
            killers=np.full((MAX_PLY + 2, 2), -1, dtype=np.int32),
            history=np.zeros(cells, dtype=np.int64),
            tt_key=np.zeros(size, dtype=np.int64),
            tt_score=np.zeros(size, dtype=np.int64),
            tt_meta=np.zeros(size, dtype=np.int64),
            tt_gen=np.full(size, -1, dtype=np.int64),
        )
        t = tables
        self.game = MNKArrays(
            cells=np.zeros(cells, dtype=np.int8),
            counts=np.zeros((t.win_cells.shape[0], 2), dtype=np.int32),
            near=np.zeros(cells, dtype=np.int32),
            params=t.params,
            cell_win=t.cell_win,
            cell_win_n=t.cell_win_n,
            near_list=t.near_list,
            near_n=t.near_n,
            weights=t.weights,
            zobrist=t.zobrist,
            win_cells=t.win_cells,
        )
        self.info = self.search.info
        self.deadline = self.search.deadline
        self.generation = 0
        self.owner: str | None = None  # the game_key of the last search, if any

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self.search, *self.game))

    def set_position(self, history: list[int]) -> None:
        g = self.game
        g.cells[:] = 0
        g.counts[:] = 0
        g.near[:] = 0
        info = self.info
        info[EVAL] = info[HASH] = info[STONES] = 0
        info[FOURS] = info[FOURS + 1] = info[THREES] = info[THREES + 1] = 0
        info[KLEN] = self.t.k
        moves = np.array(history, dtype=np.int64)
        _replay(moves, g.cells, g.counts, g.near, info, g.cell_win, g.cell_win_n, g.near_list,
                g.near_n, g.weights, g.zobrist, self.t.k)  # fmt: skip

    def new_search(self, keep_table: bool) -> None:
        history = self.search.history
        if not keep_table:
            self.generation += 1
            history[:] = 0
        else:
            history >>= 2  # age the history between the moves of one game
        self.search.killers[:] = -1
        self.info[GEN] = self.generation

    def vcf_arguments(self) -> tuple[Any, ...]:
        """The arrays ``vcf`` and ``refuted_by_vcf`` take after their own arguments."""
        g, s = self.game, self.search
        return (
            g.cells, g.counts, g.near, s.info, s.deadline, g.params, g.cell_win, g.cell_win_n,
            g.near_list, g.near_n, g.weights, g.zobrist, g.win_cells, s.moves, s.scores,
            s.killers, s.history,
        )  # fmt: skip

    def tt_move(self) -> int:
        s = self.search
        key = int(self.info[HASH])
        slot = key & (s.tt_key.size - 1)
        if s.tt_key[slot] == key and s.tt_gen[slot] == self.info[GEN]:
            return int(s.tt_meta[slot] & 0xFFFF) - 1
        return -1

    def generate_root(self, player: int, rng: Any = None) -> tuple[list[int], int, int]:
        """(candidate moves ordered by the static scores, kind, cell) as ``generate`` gives;
        ``rng`` breaks ties between equal scores."""
        g, s = self.game, self.search
        n, kind, cell = generate(
            player, 0, g.cells, g.counts, g.near, g.params, g.cell_win, g.cell_win_n,
            g.weights, g.win_cells, s.moves, s.scores, self.tt_move(), s.killers, s.history,
        )  # fmt: skip
        moves = [int(x) for x in s.moves[0, :n]]
        scores = [int(x) for x in s.scores[0, :n]]
        if rng is not None:
            ties = [rng.random() for _ in range(n)]
            order = sorted(range(n), key=lambda i: (-scores[i], ties[i]))
        else:
            order = sorted(range(n), key=lambda i: -scores[i])
        return [moves[i] for i in order], int(kind), int(cell)

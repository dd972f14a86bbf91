"""The m,n,k games for the one alpha-beta search (engine/kernels/alphabeta.py), compiled with
numba (``cache=True``).

The board is an int8 array (0 empty, 1 X, 2 O) plus, for every window of k cells in a row,
the number of X and O stones in it. A window holding k stones of one player is a win, so "k
or more in a row" needs no special case; the counts also give the line-counting evaluation
(each window open to one player only scores ``WEIGHT[count]`` for that player)
incrementally, and the move ordering: a cell scores by the windows it extends and the
windows it blocks. Each cell keeps, per player, a tally of the windows through it (``tally``:
their ordering score, and how many make a win, a four, a three there), updated by
``place``/``remove`` for the cells of the windows a stone changes, so that move generation
and the threat searches read a cell instead of scanning its windows.

With AlphaBetaOptions.patterns, on boards with k = 5 (gomoku) the evaluation and the move
ordering read line shapes instead (engine/kernels/patterns.py, as Rapfi and Embryo do):
every cell keeps, per direction, the key of the four cells on each side, updated by
``place``/``remove`` for the 32 cells a stone touches, and the shape each player makes there
(a table lookup). The evaluation is the sum over empty cells of the worth of those shapes
(``SHAPE_VALUE``); a cell's ordering score is its shapes for the mover and, at 3/4, for the
opponent, with the winning combinations (open four, double four, four-three, double open
three) on top. (Off by default: with the weights below it played weaker than the window
counts.)

What the search asks of a game (engine/kernels/alphabeta_base.py): at every node, leaves
included, a win in one ends the node, two opponent threats lose it, one threat forces the
block (``generate``). On big boards only cells within two of a stone are candidates. For k
>= 5 a VCF search (victory by continuous fours, Allis 1994: each attacking move makes a four
that the defender must block) runs at the root (engine/alphabeta.py) and, shallower, at the
quiet leaves (``quiet_leaf``); at the root a VCT follows (``vct``: victory by continuous
threats, fours and open threes, every defence tried), and the defence against the
opponent's (``safest``). Failed VCF/VCT searches are remembered per position
(``_no_threat_win``).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
from numba.extending import overload

from engine.kernels import alphabeta_base as base
from engine.kernels import patterns as shapes
from engine.kernels.alphabeta_base import (
    HASH,
    INF,
    STOP,
    WIN,
    kernel,
    tick,
)

MAX_PLY = 400
WIDTH = 12  # moves searched below the root with P_THREATS (AlphaBetaOptions.width's default)

# info[] slots of the m,n,k games (alphabeta_base numbers the shared ones)
EVAL, STONES, VCF_DEPTH, BEST, KLEN = 3, 5, 8, 9, 10
# info[FOURS + p]: windows one stone short of k for p and free of the opponent (p wins at
# once); info[THREES + p]: two short (p can make a four). Kept up to date by place/remove.
FOURS, THREES = 11, 13
# params[] slots (int64)
P_M, P_N, P_K, P_CELLS, P_RESTRICT, P_THREATS, P_WIDTH, P_PATTERN = range(8)

NONE, ONE, TWO, OPEN_TWO, THREE, OPEN_THREE, FOUR, OPEN_FOUR, FIVE = range(9)
# The evaluation's worth of a shape a player can make on an empty cell (one direction).
# (1, 4, 10, 12, 30, 25, 120, 250 from ONE up scored 0.20 against main in 20 games: the open
# twos a stone makes around it outweighed the threes and fours.)
SHAPE_VALUE = np.array([0, 0, 1, 2, 4, 10, 15, 100, 200], dtype=np.int64)
# The move ordering's worth of a shape at a cell, and of the winning combinations.
ORDER_VALUE = np.array([0, 2, 8, 30, 40, 400, 300, 4000, 100000], dtype=np.int64)
WINNING_SHAPES, FOUR_THREE, DOUBLE_THREE = 20000, 10000, 5000
THREAT_SLOTS = 1 << 16  # the table of failed VCF/VCT searches (``_no_threat_win``)
OPEN_THREE_TEMPO = 1500  # a quiet leaf where the mover can make an open four

MNKArrays = namedtuple(
    "MNKArrays",
    ["cells", "counts", "near", "params", "cell_win", "cell_win_n", "near_list", "near_n",
     "weights", "zobrist", "win_cells",
     "line_key",  # int32[cells, 4]: the neighbours of each cell per direction (patterns.py)
     "shape",  # int8[2, cells, 4]: what each player makes on the cell along each direction
     "shape_table",  # int8[2, 4**8]: line key -> shape, for X and O
     "neighbour",  # int32[cells, 4, 8]: the cell at each slot of the key, -1 off the board
     "shape_count",  # int64[2, 9]: (empty cell, direction) pairs of each shape per player
     "shape_value",  # int64[9]: SHAPE_VALUE
     "threat_key",  # int64[THREAT_SLOTS]: positions where a VCF or VCT was not found
     "threat_depth",  # int64[THREAT_SLOTS]: ... within this many attacking moves
     "mark",  # uint8[cells]: scratch (``_answers``)
     "tally"],  # int64[2, cells]: per player and cell, its windows' sums (``_retally``)
)  # fmt: skip

# tally[q, c] packs, over the windows through cell c (kept up to date by place/remove, so
# that move generation and the threat searches read a cell instead of rescanning its
# windows): the sum of weights[count + 1] of those free of the other player (bits 0-31),
# how many are two short of k for q and free of the other (a stone of q on c makes a four
# there; bits 32-39), one short (q wins on c; bits 40-47), three short (bits 56-62), and,
# in X's word only, how many hold no stone (bits 48-55).
T_FOURS, T_WINS, T_EMPTY, T_THREES = 32, 40, 48, 56


@kernel
def _contribution(x, o, weights):
    """A window's score from X's side: open to one player only, by that player's count."""
    if x > 0 and o > 0:
        return 0
    if x > 0:
        return weights[x]
    if o > 0:
        return -weights[o]
    return 0


@kernel
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


@kernel
def _window_tally(own, other, k, weights):
    """What one window with ``own`` and ``other`` stones adds to the tally of a player."""
    if other != 0:
        return 0
    t = weights[own + 1]
    if own == k - 2:
        t += 1 << T_FOURS
    elif own == k - 1:
        t += 1 << T_WINS
    elif own == k - 3:
        t += 1 << T_THREES
    return t


@kernel
def _retally(w, x0, o0, x1, o1, g):
    """Window w went from (x0, o0) stones of X and O to (x1, o1): update its cells' tallies."""
    k = g.params[P_K]
    weights = g.weights
    dx = _window_tally(x1, o1, k, weights) - _window_tally(x0, o0, k, weights)
    dx += ((1 if x1 + o1 == 0 else 0) - (1 if x0 + o0 == 0 else 0)) << T_EMPTY
    do = _window_tally(o1, x1, k, weights) - _window_tally(o0, x0, k, weights)
    _add_to_cells(w, dx, do, g)
    return 0


@kernel
def _add_to_cells(w, dx, do, g):
    """Add dx to X's and do to O's tally of each cell of window w."""
    for t in range(g.params[P_K]):
        e = g.win_cells[w, t]
        g.tally[0, e] += dx
        g.tally[1, e] += do
    return 0


@kernel
def tally_from_scratch(g):
    """The tallies of ``_retally`` computed from the window counts (a new position)."""
    k = g.params[P_K]
    g.tally[:] = 0
    for w in range(g.win_cells.shape[0]):
        x = g.counts[w, 0]
        o = g.counts[w, 1]
        tx = _window_tally(x, o, k, g.weights) + ((1 if x + o == 0 else 0) << T_EMPTY)
        _add_to_cells(w, tx, _window_tally(o, x, k, g.weights), g)
    return 0


@kernel
def _fours_at(q, c, g):
    """How many windows through c a stone of q there makes a four in (``tally``)."""
    return (g.tally[q, c] >> T_FOURS) & 0xFF


@kernel
def _cell_terms(c, g, info, sign):
    """Add (sign 1) or take out (sign -1) the shapes of cell c from the evaluation and the
    shape counts: they count while the cell is empty."""
    for q in range(2):
        for d in range(4):
            v = g.shape[q, c, d]
            g.shape_count[q, v] += sign
            worth = g.shape_value[v] * sign
            info[EVAL] += worth if q == 0 else -worth
    return 0


@kernel
def _restone(c, p, g, info, sign):
    """Add (sign 1) or take out (-1) p's stone on c from the keys of the cells it sees, and
    re-read their shapes (the pattern evaluation's incremental update)."""
    for d in range(4):
        for j in range(8):
            e = g.neighbour[c, d, j]
            if e < 0:
                continue
            g.line_key[e, d] += sign * ((p + 1) << (2 * (7 - j)))
            key = g.line_key[e, d]
            empty = g.cells[e] == 0
            for q in range(2):
                new = g.shape_table[q, key]
                old = g.shape[q, e, d]
                if new != old:
                    g.shape[q, e, d] = new
                    if empty:
                        g.shape_count[q, old] -= 1
                        g.shape_count[q, new] += 1
                        worth = g.shape_value[new] - g.shape_value[old]
                        info[EVAL] += worth if q == 0 else -worth
    return 0


@kernel
def place(c, p, g, info):
    """Put a stone of player p (0/1) on cell c; returns True if it completes a window (a win)."""
    g.cells[c] = p + 1
    info[HASH] ^= g.zobrist[p, c]
    info[STONES] += 1
    k = info[KLEN]
    pattern = g.params[P_PATTERN] != 0
    won = False
    delta = 0
    counts = g.counts
    for j in range(g.cell_win_n[c]):
        w = g.cell_win[c, j]
        if not pattern:
            delta -= _contribution(counts[w, 0], counts[w, 1], g.weights)
        x0, o0 = counts[w, 0], counts[w, 1]
        _threat_counts(x0, o0, info, -1)
        counts[w, p] += 1
        if counts[w, p] == k:
            won = True
        _threat_counts(counts[w, 0], counts[w, 1], info, 1)
        _retally(w, x0, o0, counts[w, 0], counts[w, 1], g)
        if not pattern:
            delta += _contribution(counts[w, 0], counts[w, 1], g.weights)
    if pattern:
        _cell_terms(c, g, info, -1)
        _restone(c, p, g, info, 1)
    else:
        info[EVAL] += delta
    for j in range(g.near_n[c]):
        g.near[g.near_list[c, j]] += 1
    return won


@kernel
def remove(c, p, g, info):
    """Take back ``place``."""
    g.cells[c] = 0
    info[HASH] ^= g.zobrist[p, c]
    info[STONES] -= 1
    pattern = g.params[P_PATTERN] != 0
    delta = 0
    counts = g.counts
    for j in range(g.cell_win_n[c]):
        w = g.cell_win[c, j]
        if not pattern:
            delta -= _contribution(counts[w, 0], counts[w, 1], g.weights)
        x0, o0 = counts[w, 0], counts[w, 1]
        _threat_counts(x0, o0, info, -1)
        counts[w, p] -= 1
        _threat_counts(counts[w, 0], counts[w, 1], info, 1)
        _retally(w, x0, o0, counts[w, 0], counts[w, 1], g)
        if not pattern:
            delta += _contribution(counts[w, 0], counts[w, 1], g.weights)
    if pattern:
        _cell_terms(c, g, info, 1)
        _restone(c, p, g, info, -1)
    else:
        info[EVAL] += delta
    for j in range(g.near_n[c]):
        g.near[g.near_list[c, j]] -= 1


@kernel
def _candidates(g, out):
    """Empty cells worth a look: all of them on small boards, near a stone on big ones."""
    params = g.params
    board = g.cells
    cells = params[P_CELLS]
    n = 0
    restrict = params[P_RESTRICT] == 1
    any_stone = False
    for c in range(cells):
        if board[c] != 0:
            any_stone = True
            continue
        if restrict and g.near[c] == 0:
            continue
        out[n] = c
        n += 1
    if restrict and not any_stone:
        out[0] = ((params[P_M] - 1) // 2) * params[P_N] + (params[P_N] - 1) // 2  # as mnk
        n = 1
    return n


@kernel
def shape_score(q, c, g):
    """How much cell c is worth to player q by its line shapes (move ordering): the shapes'
    ORDER_VALUE, plus the combinations that win: an open four or two fours, a four and an
    open three, two open threes (freestyle has no forbidden moves)."""
    score = 0
    fours = 0
    open_fours = 0
    open_threes = 0
    for d in range(4):
        v = g.shape[q, c, d]
        score += ORDER_VALUE[v]
        if v >= OPEN_FOUR:
            open_fours += 1
        elif v == FOUR:
            fours += 1
        elif v == OPEN_THREE:
            open_threes += 1
    if open_fours > 0 or fours >= 2:
        score += WINNING_SHAPES
    elif fours > 0 and open_threes > 0:
        score += FOUR_THREE
    elif open_threes >= 2:
        score += DOUBLE_THREE
    return score


@kernel
def generate(p, ply, g, s, tt_move):
    """Fill moves[ply] with scored candidates for player p. Returns (n, kind, cell):
    kind 1 = p wins at once on ``cell``; kind 2 = the opponent has two winning cells (p loses);
    kind 3 = the opponent threatens ``cell``, the only move left (n = 1); kind 0 = ordinary.
    With params[P_THREATS], a node where the opponent has a three that makes an open four (or
    a double four) keeps only the moves that answer it (``_answers``): kind 4; other nodes
    below the root keep their params[P_WIDTH] best moves: kind 5 when that drops some."""
    params = g.params
    moves, scores, killers, history = s.moves, s.scores, s.killers, s.history
    buf = moves[ply]
    n = _candidates(g, buf)
    threat = -1
    threats = 0
    look = params[P_THREATS] != 0
    pattern = params[P_PATTERN] != 0
    q = 1 - p
    tally = g.tally
    open_fours = 0  # candidates where the opponent would get two winning cells
    for i in range(n):
        c = buf[i]
        mine = tally[p, c]
        theirs = tally[q, c]
        if (mine >> T_WINS) & 0xFF:
            return n, 1, c
        if (theirs >> T_WINS) & 0xFF:
            threats += 1
            threat = c
        if look and ((theirs >> T_FOURS) & 0xFF) >= 2 and _winning_cells_after(q, c, g) >= 2:
            open_fours += 1
        # The windows c extends (weights[count + 1]) and, at half, those it blocks (the
        # empty windows count 1 for p, 0 for q: weights[1] = 1, and 1 >> 1 = 0).
        empty = (tally[0, c] >> T_EMPTY) & 0xFF
        own = (mine & 0xFFFFFFFF) + (((theirs & 0xFFFFFFFF) - empty) >> 1)
        if pattern:
            own = shape_score(p, c, g) + ((3 * shape_score(1 - p, c, g)) >> 2)
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
        n = _answers(p, ply, n, g, moves, scores)
        return n, 4, -1
    width = params[P_WIDTH]
    if look and ply > 0 and n > width:
        return _best(ply, n, width, moves, scores), 5, -1
    return n, 0, -1


@kernel
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


@kernel
def _winning_cells_after(q, c, g):
    """How many distinct cells q would win on after playing the empty cell c (0, 1, or 2 for
    two or more: an open four or a double four, which wins unless the other side wins first)."""
    k = g.params[P_K]
    first = -1
    for j in range(g.cell_win_n[c]):
        w = g.cell_win[c, j]
        if g.counts[w, q] == k - 2 and g.counts[w, 1 - q] == 0:
            for t in range(k):
                e = g.win_cells[w, t]
                if e != c and g.cells[e] == 0:
                    if first < 0:
                        first = e
                    elif e != first:
                        return 2
    return 0 if first < 0 else 1


@kernel
def _answers(p, ply, n, g, moves, scores):
    """Threat-space defence (Allis 1994): the opponent q has cells t where it makes an open
    four (or a double four). p's only moves that do not lose to it are the fours of p (p
    keeps the initiative) and the cells of the windows that make q's winning cells after t
    (t itself included): a stone anywhere else leaves t winning. Keeps those of moves[ply][:n]
    in place (with their scores) and returns how many."""
    q = 1 - p
    k = g.params[P_K]
    counts, cell_win, cell_win_n, win_cells = g.counts, g.cell_win, g.cell_win_n, g.win_cells
    buf = moves[ply]
    defence = g.mark
    defence[:] = 0
    for i in range(n):
        t = buf[i]
        if _fours_at(q, t, g) >= 2 and _winning_cells_after(q, t, g) >= 2:
            for j in range(cell_win_n[t]):
                w = cell_win[t, j]
                if counts[w, q] == k - 2 and counts[w, p] == 0:
                    for x in range(k):
                        defence[win_cells[w, x]] = 1
    kept = 0
    for i in range(n):
        c = buf[i]
        keep = defence[c] == 1 or _fours_at(p, c, g) > 0  # or c makes a four
        if keep:
            buf[kept] = c
            scores[ply, kept] = scores[ply, i]
            kept += 1
    return kept


@kernel
def _winning_cells(p, g, out):
    """The distinct empty cells where p wins at once (at most ``out.size``); returns how many."""
    tally = g.tally
    n = 0
    for e in range(g.params[P_CELLS]):
        if (tally[p, e] >> T_WINS) & 0xFF and g.cells[e] == 0:
            out[n] = e
            n += 1
            if n == out.size:
                break
    return n


@kernel
def _four_cells(p, g, out, forced):
    """The cells where p makes a four (empty cells of windows two short for p, free of the
    opponent), only ``forced`` if it is >= 0; returns how many (distinct)."""
    if forced >= 0:
        if g.cells[forced] == 0 and _fours_at(p, forced, g) > 0:
            out[0] = forced
            return 1
        return 0
    n = 0
    for e in range(g.params[P_CELLS]):
        if (g.tally[p, e] >> T_FOURS) & 0xFF and g.cells[e] == 0:
            out[n] = e
            n += 1
    return n


@kernel
def _four_wins(c, p, g):
    """After p played the four c: the cell where p now wins, or -2 if there are two (the
    defender cannot block both), -1 if none."""
    k = g.params[P_K]
    first = -1
    for j in range(g.cell_win_n[c]):
        w = g.cell_win[c, j]
        if g.counts[w, p] == k - 1 and g.counts[w, 1 - p] == 0:
            for t in range(k):
                e = g.win_cells[w, t]
                if g.cells[e] == 0:
                    if first < 0:
                        first = e
                    elif e != first:
                        return -2
    return first


@kernel
def _threat_slot(p, kind, info):
    """The table key of the position for attacker p and search kind (0 VCF, 1 VCT)."""
    return (info[HASH] << 2) | (p << 1) | kind


@kernel
def _no_threat_win(key, depth, g):
    """Whether a search of this key (``_threat_slot``) found no win within ``depth`` or more
    attacking moves before: a fact of the position, kept across the searches of one game
    (cleared with the transposition table, so that a fresh search is reproducible)."""
    slot = key & (THREAT_SLOTS - 1)
    return g.threat_key[slot] == key and g.threat_depth[slot] >= depth


@kernel
def _threat_won(key, depth, g):
    """Whether a VCT of this key (``_threat_slot``) was proven before within ``depth`` or
    fewer attacking moves (stored as minus the depth): a transposition table of proofs as
    well as of failures (Allis 1994 keeps both in his threat-space searches)."""
    slot = key & (THREAT_SLOTS - 1)
    return g.threat_key[slot] == key and -depth <= g.threat_depth[slot] < 0


@kernel
def _store_no_threat_win(key, depth, g):
    """Remember the search of ``key``: no win within ``depth`` attacking moves (> 0), or a win
    within -``depth`` (< 0, ``_threat_won``)."""
    slot = key & (THREAT_SLOTS - 1)
    g.threat_key[slot] = key
    g.threat_depth[slot] = depth


@kernel
def vcf(p, depth, ply, g, s):
    """Victory by continuous fours for attacker p within ``depth`` fours: returns the number of
    attacker moves to the win (1 = wins at once) or 0; info[BEST] = the first move."""
    info = s.info
    tick(info, s.deadline)
    if info[STOP] != 0:
        return 0
    buf = s.moves[ply]
    if info[FOURS + p] > 0:
        _winning_cells(p, g, buf[:1])
        info[BEST] = buf[0]
        return 1
    forced = -1
    if info[FOURS + 1 - p] > 0:
        if _winning_cells(1 - p, g, buf[:2]) >= 2:
            return 0
        forced = buf[0]
    if depth <= 0 or info[THREES + p] == 0:
        return 0
    key = _threat_slot(p, 0, info)
    if _no_threat_win(key, depth, g):
        return 0
    n = _four_cells(p, g, buf, forced)
    for i in range(n):
        c = buf[i]
        place(c, p, g, info)
        block = _four_wins(c, p, g)
        result = 0
        if block == -2:
            result = 2  # two winning cells: the defender blocks one, p plays the other
        elif block >= 0:
            place(block, 1 - p, g, info)
            deeper = vcf(p, depth - 1, ply + 2, g, s)
            remove(block, 1 - p, g, info)
            if deeper > 0:
                result = deeper + 1
        remove(c, p, g, info)
        if result > 0:
            info[BEST] = c
            return result
        if info[STOP] != 0:
            return 0
    _store_no_threat_win(key, depth, g)
    return 0


@kernel
def refuted_by_vcf(p, root_moves, n, flags, depth, g, s):
    """flags[i] = 1 where playing root_moves[i] lets the opponent win by continuous fours (a
    sound proof of loss: threat-space defence at the root). Stops early at the deadline."""
    info = s.info
    ply = np.int64(1)  # not a literal (see root)
    for i in range(n):
        c = root_moves[i]
        flags[i] = 0
        won = place(c, p, g, info)
        if not won and vcf(1 - p, depth, ply, g, s) > 0:
            flags[i] = 1
        remove(c, p, g, info)
        if info[STOP] != 0:
            flags[i] = 0
            break
    return 0


@kernel
def safest(p, root_moves, n, depth, refuted_at, g, s):
    """Threat-space defence at the root against a VCT (Allis 1994), the candidates together:
    the opponent's VCT after each of root_moves[:n] is searched within 1, 2, ... ``depth``
    threats, each candidate not yet refuted in turn at each depth (in lockstep: a budget cut
    short leaves the candidates checked to about the same depth, not the first one deep and
    the others unchecked). refuted_at[i] = the threats of the VCT found after root_moves[i],
    0 if none was. Returns the index of the first candidate not refuted; if each is, of the
    one refuted by the longest VCT (it needs the deepest search to see: the best resistance).
    Stops at the deadline, when at most one candidate is left unrefuted (deeper searches
    cannot change the answer then), or at the first found safe to the full depth."""
    info = s.info
    ply = np.int64(1)  # not literals (see ``vct``)
    attack = ply
    for i in range(n):
        refuted_at[i] = 0
    for d in range(1, depth + 1):
        left = 0
        for i in range(n):
            if refuted_at[i] != 0:
                continue
            c = root_moves[i]
            if not place(c, p, g, info) and vct(1 - p, attack, d, ply, g, s):
                refuted_at[i] = d  # a True is a proof, even when the deadline came after it
            remove(c, p, g, info)
            if info[STOP] != 0:
                break
            if refuted_at[i] == 0:
                left += 1
                if d == depth:
                    break  # checked to the full depth, the ones before it refuted: the answer
        if info[STOP] != 0 or left <= 1:
            break
    best = 0
    for i in range(n):
        if refuted_at[i] == 0:
            return i
        if refuted_at[i] > refuted_at[best]:
            best = i
    return best


@kernel
def _threat_kind(p, c, g, info):
    """What p's stone on the empty cell c makes: 2 a four (through c, a window two short for
    p and free of the opponent), 1 an open three (after it, a cell of such a window gives p
    two winning cells: an open four or a double four), 0 neither. Only a window three short
    through c can become such a window, so the stone is tried (on the cells and the window
    counts alone) only where there is one."""
    k = g.params[P_K]
    counts, cell_win, cell_win_n = g.counts, g.cell_win, g.cell_win_n
    if _fours_at(p, c, g) > 0:
        return 2
    if (g.tally[p, c] >> T_THREES) & 0x7F == 0:
        return 0
    threat = 0
    g.cells[c] = p + 1
    for j in range(cell_win_n[c]):
        counts[cell_win[c, j], p] += 1
    for j in range(cell_win_n[c]):
        w = cell_win[c, j]
        if counts[w, p] == k - 2 and counts[w, 1 - p] == 0:
            for t in range(k):
                e = g.win_cells[w, t]
                if g.cells[e] == 0 and _winning_cells_after(p, e, g) >= 2:
                    threat = 1
                    break
        if threat:
            break
    for j in range(cell_win_n[c]):
        counts[cell_win[c, j], p] -= 1
    g.cells[c] = 0
    return threat


@kernel
def _double_threat_move(p, g, buf, n):
    """The first of the ``n`` cells of ``buf`` where p makes an open four or a double four (two
    winning cells: it wins unless the other side wins first), or -1."""
    for i in range(n):
        c = buf[i]
        if _fours_at(p, c, g) >= 2 and _winning_cells_after(p, c, g) >= 2:
            return c
    return -1


@kernel
def vct(p, attacking, depth, ply, g, s):
    """Victory by continuous threats (Allis 1994, threat-space search) for attacker p, within
    ``depth`` attacking moves, each a four or an open three (``_threat_kind``). With
    ``attacking`` (1) p is to move, and info[BEST] gets the first move of a win; else the
    defender (1 - p) is, and tries every move that could stop the threat (a four: its block;
    an open three: ``_answers``, its own fours included), so a True is a proof. One
    self-recursive function for both sides, called with the same argument types everywhere:
    numba's cache does not reload mutually recursive functions, nor a second copy compiled
    for a literal argument (the reloaded copy crashes; numba issues #6061, #6713)."""
    info = s.info
    buf = s.moves[ply]
    attack = ply - ply + 1  # 1 and 0, not literals (see above)
    defend = ply - ply
    if attacking == 0:
        d = 1 - p
        if info[FOURS + d] > 0:
            return False  # the defender makes five
        if info[FOURS + p] > 0:
            if _winning_cells(p, g, buf[:2]) >= 2:
                return True
            n = 1  # block the four
        else:
            n = _candidates(g, buf)
            if _double_threat_move(p, g, buf, n) < 0:
                return False  # no four, no open three: the attack has run out
            n = _answers(d, ply, n, g, s.moves, s.scores)
        for i in range(n):
            c = buf[i]
            place(c, d, g, info)
            won = vct(p, attack, depth, ply + 1, g, s)
            remove(c, d, g, info)
            if not won or info[STOP] != 0:
                return False
        return True
    tick(info, s.deadline)
    if info[STOP] != 0:
        return False
    if info[FOURS + p] > 0:
        _winning_cells(p, g, buf[:1])
        info[BEST] = buf[0]
        return True
    if depth <= 0:
        return False
    if info[FOURS + 1 - p] > 0:  # the defender's four: block it, and the threat must remain
        if _winning_cells(1 - p, g, buf[:2]) >= 2:
            return False
        c = buf[0]
        place(c, p, g, info)
        won = vct(p, defend, depth - 1, ply + 1, g, s)
        remove(c, p, g, info)
        if won:
            info[BEST] = c
        return won
    n = _candidates(g, buf)
    if depth == 1:
        # The last attacking move must win by itself: an open four or a double four. After
        # a four (one winning cell) or an open three the defender blocks, and no attacking
        # move is left (Allis 1994's threat sequences end in such a double threat).
        c = _double_threat_move(p, g, buf, n)
        if c < 0:
            return False
        info[BEST] = c
        return True
    key = _threat_slot(p, 1, info)
    if _no_threat_win(key, depth, g):
        return False
    if ply > 0 and _threat_won(key, depth, g):
        return True  # (not at the root: info[BEST] must come from this search)
    kept = 0
    for i in range(n):
        c = buf[i]
        threat = _threat_kind(p, c, g, info)
        if threat > 0:
            buf[kept] = c
            # Fours first, then by the windows the cell extends and, at half, those it blocks
            # (``tally``, as ``generate`` orders its moves): the likely winning threat first.
            own = g.tally[p, c] & 0xFFFFFFFF
            s.scores[ply, kept] = (threat << 40) + own + ((g.tally[1 - p, c] & 0xFFFFFFFF) >> 1)
            kept += 1
    for i in range(kept):
        c = base.pick(ply, i, kept, s.moves, s.scores)
        place(c, p, g, info)
        won = vct(p, defend, depth - 1, ply + 1, g, s)
        remove(c, p, g, info)
        if won:
            info[BEST] = c
            _store_no_threat_win(key, -depth, g)
            return True
        if info[STOP] != 0:
            return False
    _store_no_threat_win(key, depth, g)
    return False


@kernel
def _replay(history, g, info):
    for ply in range(history.size):
        place(history[ply], ply & 1, g, info)


# --- the operations the search asks of a game (alphabeta_base), for MNKArrays ----------------


def _is_mnk(game: Any) -> bool:
    return getattr(game, "instance_class", None) is MNKArrays


@overload(base.place)
def _place_mnk(game, search, action, player, ply):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search, action, player, ply):  # noqa: ANN001, ANN202
            return 1 if place(action, player, game, search.info) else 0

        return impl
    return None


@overload(base.remove)
def _remove_mnk(game, search, action, player, ply):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search, action, player, ply):  # noqa: ANN001, ANN202
            remove(action, player, game, search.info)

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
                found = vcf(p, info[VCF_DEPTH], ply, game, search)
                if found > 0:
                    return True, WIN - (ply + 2 * found - 1)
            score = info[EVAL] if p == 0 else -info[EVAL]
            if game.params[P_PATTERN] != 0 and game.shape_count[p, OPEN_FOUR] > 0:
                # The mover has an open three and the opponent no four: an open four next.
                score += OPEN_THREE_TEMPO
            return True, score

        return impl
    return None


@overload(base.generate)
def _generate_mnk(game, search, player, ply, tt_move):  # noqa: ANN001, ANN202
    if _is_mnk(game):

        def impl(game, search, player, ply, tt_move):  # noqa: ANN001, ANN202
            return generate(player, ply, game, search, tt_move)

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
        # P_THREATS, P_PATTERN: set per search by the driver (AlphaBetaOptions.threats, k >= 5;
        # .patterns, k = 5).
        self.params = np.array([m, n, k, cells, 1 if restrict else 0, 0, WIDTH, 0], dtype=np.int64)
        self.cells = cells
        self.k = k
        # Line shapes (k = 5 only): the table (built when first used: ``load_shapes``), the
        # neighbour at each slot of a cell's key per direction, and each cell's key on the
        # empty board (the edges, as WALL).
        self.patterns = k == 5
        lines = cells if self.patterns else 1
        self.shape_table = np.zeros((2, 1), np.int8)
        self.neighbour = np.full((lines, 4, shapes.SLOTS), -1, dtype=np.int32)
        self.empty_key = np.zeros((lines, 4), dtype=np.int32)
        if self.patterns:
            for c in range(cells):
                r0, c0 = divmod(c, n)
                for d, (dr, dc) in enumerate(((0, 1), (1, 0), (1, 1), (1, -1))):
                    for offset in (*range(-shapes.HALF, 0), *range(1, shapes.HALF + 1)):
                        r, cc = r0 + offset * dr, c0 + offset * dc
                        j = shapes.slot(offset)
                        if 0 <= r < m and 0 <= cc < n:
                            self.neighbour[c, d, j] = r * n + cc
                        else:
                            self.empty_key[c, d] |= shapes.WALL << (2 * j)

    def load_shapes(self) -> None:
        if self.patterns and self.shape_table.shape[1] == 1:
            self.shape_table = shapes.shape_tables()


class MNKContext(base.Context):
    """Mutable search state for one board size: position arrays, TT, killers, history."""

    def __init__(self, tables: MNKTables, tt_bits: int) -> None:
        self.t = tables
        cells = tables.cells
        t = tables
        game = MNKArrays(
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
            line_key=t.empty_key.copy(),
            shape=np.zeros((2, *t.empty_key.shape), dtype=np.int8),
            shape_table=t.shape_table,
            neighbour=t.neighbour,
            shape_count=np.zeros((2, shapes.SHAPES), dtype=np.int64),
            shape_value=SHAPE_VALUE,
            threat_key=np.zeros(THREAT_SLOTS, dtype=np.int64),
            threat_depth=np.zeros(THREAT_SLOTS, dtype=np.int64),
            mark=np.zeros(cells, dtype=np.uint8),
            tally=np.zeros((2, cells), dtype=np.int64),
        )
        super().__init__(base.search_arrays(MAX_PLY + 2, cells, tt_bits), game)

    def set_patterns(self, on: bool) -> None:
        """Evaluate and order moves by line shapes (k = 5 boards) or by window counts; takes
        effect at the next ``set_position``."""
        on = on and self.t.patterns
        self.t.params[P_PATTERN] = int(on)
        if on:
            self.t.load_shapes()
            if self.game.shape_table is not self.t.shape_table:
                self.game = self.game._replace(shape_table=self.t.shape_table)

    def set_position(self, history: list[int]) -> None:
        g = self.game
        g.cells[:] = 0
        g.counts[:] = 0
        g.near[:] = 0
        info = self.info
        info[EVAL] = info[HASH] = info[STONES] = 0
        info[FOURS] = info[FOURS + 1] = info[THREES] = info[THREES + 1] = 0
        info[KLEN] = self.t.k
        g.line_key[:] = self.t.empty_key
        g.shape_count[:] = 0
        if g.params[P_PATTERN]:  # the empty board's shapes (X's and O's are the same)
            for q in (0, 1):
                g.shape[q] = g.shape_table[q][g.line_key]
                g.shape_count[q] = np.bincount(g.shape[q].ravel(), minlength=shapes.SHAPES)
        tally_from_scratch(g)
        moves = np.array(history, dtype=np.int64)
        _replay(moves, g, info)

    def new_search(self, keep_table: bool) -> None:
        super().new_search(keep_table)
        if not keep_table:
            self.game.threat_depth[:] = 0  # a fresh search runs as if it were the first

    def tt_move(self) -> int:
        return self.table_move(int(self.info[HASH]))

    def generate_root(self, player: int, rng: Any = None) -> tuple[list[int], int, int]:
        """(candidate moves ordered by the static scores, kind, cell) as ``generate`` gives;
        ``rng`` breaks ties between equal scores."""
        g, s = self.game, self.search
        n, kind, cell = generate(player, 0, g, s, self.tt_move())
        return base.ordered(s.moves[0, :n], s.scores[0, :n], rng), int(kind), int(cell)

"""Compiled ultimate tic-tac-toe rules over the flat int32 state of ``layout``.

Action = board*9 + cell. Each small board keeps a 9-bit mask per player and one of its
occupied cells; tables indexed by a mask give the 3x3 win test (WIN9), the cells that would
complete a line (THREAT9), the number and the list of the set bits (POP9, NTH9) and of the
empty cells (EMPTY9, both in one int64: a random move is one lookup), so the decisive move
(win the game now) and the anti-decisive filter (never send the opponent where they win the
game at once; Teytaud & Teytaud 2010) cost a few table lookups.
"""

import math

import numpy as np
from numba import njit

from engine.kernels.layout import (
    DRAW,
    H_CELLS,
    H_CLOSED,
    H_EMPTY,
    H_FORCED,
    H_KIND,
    H_LAST,
    H_META0,
    H_PLY,
    H_STATUS,
    H_THREAT0,
    H_TO_MOVE,
    HEADER,
    KIND_UTTT,
    MOVES_MOVER_LOSES,
    MOVES_MOVER_WINS,
    MOVES_NORMAL,
    O_WON,
    ONGOING,
    PLAYOUT_AVOID,
    PLAYOUT_CAPTURE,
    X_WON,
    below,
    rand_below,
    xorshift_back,
    xorshift_step,
)

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    line_masks = [sum(1 << i for i in line) for line in LINES]
    win = np.zeros(512, dtype=np.int32)
    threat = np.zeros(512, dtype=np.int32)
    pop = np.zeros(512, dtype=np.int32)
    for mask in range(512):
        win[mask] = any(mask & lm == lm for lm in line_masks)
        pop[mask] = bin(mask).count("1")
    for mask in range(512):
        threat[mask] = sum(
            1 << c
            for c in range(9)
            if not mask >> c & 1 and any((mask | 1 << c) & lm == lm for lm in line_masks)
        )
    nth = np.zeros(512 * 9, dtype=np.int32)  # [mask*9 + j] = index of the j-th set bit
    for mask in range(512):
        bits = [c for c in range(9) if mask >> c & 1]
        for j, c in enumerate(bits):
            nth[mask * 9 + j] = c
    # [mask]: the empty cells of a board whose occupied cells are ``mask``: their number in
    # bits 0-3, the j-th of them (increasing) in bits 4j+4 .. 4j+7.
    empty = np.zeros(512, dtype=np.int64)
    for mask in range(512):
        cells = [c for c in range(9) if not mask >> c & 1]
        empty[mask] = len(cells) + sum(c << (4 * j + 4) for j, c in enumerate(cells))
    return win, threat, pop, nth, empty


WIN9, THREAT9, POP9, NTH9, EMPTY9 = _tables()
META_LINES = np.array([sum(1 << i for i in line) for line in LINES], dtype=np.int32)
# uttt_child_value: what the opponent's capture in reply (on the board it is sent to) costs the
# mover (the scale of its tanh is the option value_scale, engine/mcts.py).
REPLY_CAPTURE = 1.0

SAFE_TRIES = 4  # random legal moves tried in a playout before listing the safe ones

OFF_SMALL = HEADER  # [player*9 + board] 9-bit masks of each player's cells
OFF_FULL = HEADER + 18  # [board] occupied cells


@njit(cache=True)
def uttt_init(st):
    st[:] = 0
    st[H_KIND] = KIND_UTTT
    st[H_LAST] = -1
    st[H_EMPTY] = 81
    st[H_CELLS] = 81
    st[H_FORCED] = -1


@njit(cache=True, inline="always")
def uttt_apply(st, action):
    """Play ``action`` for the side to move (unchecked)."""
    uttt_play(st, action)
    _refresh_board_threats(st, action // 9)


@njit(cache=True, inline="always")
def uttt_play(st, action):
    """``uttt_apply`` but for the threat masks (H_THREAT0/1), left as they were: the tree's
    descent, whose positions need them only where a leaf is expanded
    (``uttt_refresh_threats`` on the boards played in); the playouts do not read them."""
    b = action // 9
    c = action - 9 * b
    p = st[H_TO_MOVE]
    small = st[OFF_SMALL + 9 * p + b] | (1 << c)
    st[OFF_SMALL + 9 * p + b] = small
    full = st[OFF_FULL + b] | (1 << c)
    st[OFF_FULL + b] = full
    closed = st[H_CLOSED]
    if WIN9[small]:
        closed |= 1 << b
        meta = st[H_META0 + p] | (1 << b)
        st[H_META0 + p] = meta
        if WIN9[meta]:
            st[H_STATUS] = p + 1
    elif full == 511:
        closed |= 1 << b
    st[H_CLOSED] = closed
    st[H_FORCED] = -1 if (closed >> c) & 1 else c
    st[H_PLY] += 1
    st[H_EMPTY] -= 1
    st[H_LAST] = action
    st[H_TO_MOVE] = 1 - p
    if st[H_STATUS] == ONGOING and closed == 511:
        st[H_STATUS] = DRAW


@njit(cache=True, inline="always")
def _refresh_board_threats(st, b):
    """Board ``b``'s bit of each player's threat mask: whether the player has an empty cell
    there completing a small-board line (decisive-move tests)."""
    bit = 1 << b
    free = ~st[OFF_FULL + b] & 511
    for q in range(2):
        if THREAT9[st[OFF_SMALL + 9 * q + b]] & free:
            st[H_THREAT0 + q] |= bit
        else:
            st[H_THREAT0 + q] &= ~bit


@njit(cache=True)
def uttt_refresh_threats(st, boards):
    """The threat masks after ``uttt_play`` moves on the 9-bit mask ``boards``: the same
    state as ``uttt_apply`` would have left."""
    while boards:
        b = NTH9[boards * 9]
        boards &= boards - 1
        _refresh_board_threats(st, b)


@njit(cache=True, inline="always")
def _allowed(st):
    f = st[H_FORCED]
    if f >= 0:
        return 1 << f
    return ~st[H_CLOSED] & 511


@njit(cache=True)
def uttt_legal(st, out):
    """Legal actions in increasing order; returns their number (0 when the game is over)."""
    if st[H_STATUS] != ONGOING:
        return 0
    allowed = _allowed(st)
    cnt = 0
    for b in range(9):
        if (allowed >> b) & 1:
            free = ~st[OFF_FULL + b] & 511
            for c in range(9):
                if (free >> c) & 1:
                    out[cnt] = 9 * b + c
                    cnt += 1
    return cnt


@njit(cache=True)
def uttt_win_move(st):
    """An action that wins the game for the side to move at once, or -1."""
    p = st[H_TO_MOVE]
    boards = THREAT9[st[H_META0 + p]] & _allowed(st) & ~st[H_CLOSED] & st[H_THREAT0 + p]
    b = 0
    while boards:
        if boards & 1:
            cells = THREAT9[st[OFF_SMALL + 9 * p + b]] & ~st[OFF_FULL + b] & 511
            if cells:
                c = 0
                while not (cells >> c) & 1:
                    c += 1
                return 9 * b + c
        boards >>= 1
        b += 1
    return -1


@njit(cache=True)
def _opponent_wins_mask(st):
    """Open small boards where the opponent of the mover could win the game in one move."""
    o = 1 - st[H_TO_MOVE]
    return THREAT9[st[H_META0 + o]] & ~st[H_CLOSED] & st[H_THREAT0 + o] & 511


@njit(cache=True)
def _is_safe(st, action, opp_wins):
    """Whether ``action`` leaves the opponent without a game-winning reply."""
    b = action // 9
    c = action - 9 * b
    p = st[H_TO_MOVE]
    o = 1 - p
    full = st[OFF_FULL + b] | (1 << c)
    closes = WIN9[st[OFF_SMALL + 9 * p + b] | (1 << c)] != 0 or full == 511
    wins = opp_wins
    if closes:
        wins &= ~(1 << b)
    elif (wins >> b) & 1 and not (THREAT9[st[OFF_SMALL + 9 * o + b]] & ~full & 511):
        wins &= ~(1 << b)
    closed = st[H_CLOSED] | ((1 << b) if closes else 0)
    if (closed >> c) & 1:
        return wins == 0
    return not (wins >> c) & 1


@njit(cache=True)
def _safe_cells(st, b, opp_wins):
    """9-bit mask of the empty cells of board ``b`` that are safe (``_is_safe``), by masks:
    a cell that neither closes ``b`` nor blocks an opponent threat there leaves the
    opponent's winning boards as they are, so it is safe iff it sends the opponent to an
    open board outside them (or anywhere, when there are none); the few other cells are
    tested one by one."""
    p = st[H_TO_MOVE]
    empties = ~st[OFF_FULL + b] & 511
    open_boards = ~st[H_CLOSED] & 511
    if opp_wins == 0:
        return empties
    generic = empties & open_boards & ~opp_wins
    special = (
        THREAT9[st[OFF_SMALL + 9 * p + b]] | THREAT9[st[OFF_SMALL + 9 * (1 - p) + b]]
    ) & empties
    if POP9[empties] == 1:
        special = empties  # the last cell closes the board
    safe = generic & ~special
    while special:
        c = NTH9[special * 9]
        special &= special - 1
        if _is_safe(st, 9 * b + c, opp_wins):
            safe |= 1 << c
    return safe


@njit(cache=True)
def uttt_tree_moves(st, out, decisive):
    """Expansion moves and a MOVES_* code. With ``decisive``: a game-winning move alone;
    otherwise only the moves that do not hand the opponent a game-winning reply, or every
    move with MOVES_MOVER_LOSES when none is safe."""
    cnt = uttt_legal(st, out)
    if not decisive:
        return cnt, MOVES_NORMAL
    w = uttt_win_move(st)
    if w >= 0:
        out[0] = w
        return 1, MOVES_MOVER_WINS
    opp = _opponent_wins_mask(st)
    if opp == 0:
        return cnt, MOVES_NORMAL
    allowed = _allowed(st)
    safe = 0
    for b in range(9):
        if (allowed >> b) & 1:
            cells = _safe_cells(st, b, opp)
            while cells:
                out[safe] = 9 * b + NTH9[cells * 9]
                cells &= cells - 1
                safe += 1
    if safe == 0:
        return uttt_legal(st, out), MOVES_MOVER_LOSES
    return safe, MOVES_NORMAL


@njit(cache=True, inline="always")
def _after_move(st, action):
    """(board, cell, mover, the mover's small board, the board's occupied cells) of
    ``action``, the two boards as after it: what a move's prior and its value start from."""
    b = action // 9
    c = action - 9 * b
    p = st[H_TO_MOVE]
    return b, c, p, st[OFF_SMALL + 9 * p + b] | (1 << c), st[OFF_FULL + b] | (1 << c)


@njit(cache=True)
def uttt_move_prior(st, action):
    """A move's prior for progressive bias, in [-2, 1]: +1 if it captures its small board,
    -1 if it gives the opponent a free move (sends them to a closed board), -1 if the
    opponent can capture a small board at once in reply; a move that ends the game scores
    its capture alone. In constant time: the boards where the opponent can capture are its
    threat mask (H_THREAT), with board ``b`` as after the move."""
    b, c, p, small, full = _after_move(st, action)
    o = 1 - p
    captures = WIN9[small] != 0
    closed = st[H_CLOSED]
    if captures or full == 511:
        closed |= 1 << b
    if closed == 511 or (captures and WIN9[st[H_META0 + p] | (1 << b)]):
        return 1 if captures else 0
    score = 1 if captures else 0
    if (closed >> c) & 1:
        score -= 1  # a free move for the opponent
        open_boards = ~closed & 511
    else:
        open_boards = 1 << c
    # The opponent's captures in reply, on the boards it may play (board b as after the move).
    threats = st[H_THREAT0 + o] & ~(1 << b)
    if THREAT9[st[OFF_SMALL + 9 * o + b]] & ~full & 511:
        threats |= 1 << b
    if threats & open_boards:
        score -= 1
    return score


@njit(cache=True)
def _line_score(won, dead, threats):
    """A player's prospects on the board of boards: over the lines of boards with no board
    closed against the player (``dead``), (boards won + half the open boards where the player
    threatens a small line)^2, so two boards of a line weigh more than two apart."""
    score = 0.0
    for i in range(8):
        line = META_LINES[i]
        if line & dead:
            continue
        x = POP9[won & line] + 0.5 * POP9[threats & line & ~won]
        score += x * x
    return score


@njit(cache=True, inline="always")
def _threats_after(st, p, b, small, full, closed):
    """Both players' threat masks (``p``'s, the opponent's) after ``p``'s move on small board
    ``b`` (``small``: p's stones there, ``full``: its occupied cells), on the boards still open
    (``closed`` as after the move)."""
    o = 1 - p
    bit = 1 << b
    free = ~full & 511
    threats_p = st[H_THREAT0 + p] & ~bit
    if THREAT9[small] & free:
        threats_p |= bit
    threats_o = st[H_THREAT0 + o] & ~bit
    if THREAT9[st[OFF_SMALL + 9 * o + b]] & free:
        threats_o |= bit
    return threats_p & ~closed, threats_o & ~closed


@njit(cache=True, inline="always")
def _line_difference(st, p, b, small, full, closed, meta_p, meta_o):
    """After ``p``'s move on small board ``b`` (``small``: p's stones there, ``full``: its
    occupied cells; ``closed`` and the meta masks as after the move): p's ``_line_score`` less
    the opponent's, with the threat masks of ``_threats_after``, and the opponent's threat
    mask. Used by ``uttt_child_value``; ``uttt_priors_and_values`` shares ``_threats_after``."""
    threats_p, threats_o = _threats_after(st, p, b, small, full, closed)
    diff = _line_score(meta_p, closed & ~meta_p, threats_p) - _line_score(
        meta_o, closed & ~meta_o, threats_o
    )
    return diff, threats_o


@njit(cache=True)
def uttt_child_value(st, action, scale):
    """A heuristic value in [0, 1] of the position after ``action`` for the player who plays it
    (1: the move wins the game, 1/2: it draws it): a tanh of ``scale`` times the difference of
    the players' ``_line_score``, less REPLY_CAPTURE when the opponent can take the small board
    it is sent to (or any, on a free move). The evaluation of implicit minimax backups
    (Lanctot, Winands, Pepels & Sturtevant 2014), computed from the masks without playing the
    move (the threat masks H_THREAT0/1 as ``uttt_apply`` leaves them: at an expansion, after
    ``refresh``)."""
    b, c, p, small, full = _after_move(st, action)
    o = 1 - p
    closed = st[H_CLOSED]
    meta_p = st[H_META0 + p]
    meta_o = st[H_META0 + o]
    if WIN9[small]:
        closed |= 1 << b
        meta_p |= 1 << b
        if WIN9[meta_p]:
            return 1.0
    elif full == 511:
        closed |= 1 << b
    if closed == 511:
        return 0.5
    diff, threats_o = _line_difference(st, p, b, small, full, closed, meta_p, meta_o)
    sent = ~closed & 511 if (closed >> c) & 1 else 1 << c
    if threats_o & sent:
        diff -= REPLY_CAPTURE
    return 0.5 + 0.5 * math.tanh(scale * diff)


@njit(cache=True)
def uttt_priors_and_values(st, moves, n, scale, values, first):
    """``uttt_move_prior`` and ``uttt_child_value`` of each of ``moves[:n]`` (an expansion's
    children): the value of ``moves[i]`` into ``values[first + i]`` and its prior over
    ``moves[i]``. Bit for bit the single calls; what children share is computed once: the
    players' line scores depend on the boards closed, the mover's won boards and both threat
    masks as after the move, which most children of a board leave alike, so the last such key
    keeps its difference, and the tanh of each difference (with or without the reply capture)
    for that key."""
    p = st[H_TO_MOVE]
    o = 1 - p
    meta_o = st[H_META0 + o]
    # The last key (closed, meta_p, threats_p, threats_o) and its values; -1: none yet.
    k_closed = -1
    k_meta = -1
    k_tp = -1
    k_to = -1
    k_diff = 0.0
    k_value = 0.0  # the value without the reply capture, when ``k_have & 1``
    k_reply = 0.0  # with it, when ``k_have & 2``
    k_have = 0
    for i in range(n):
        b, c, _, small, full = _after_move(st, moves[i])
        bit = 1 << b
        captures = WIN9[small] != 0
        closed = st[H_CLOSED]
        meta_p = st[H_META0 + p]
        if captures:
            closed |= bit
            meta_p |= bit
            if WIN9[meta_p]:
                moves[i] = 1
                values[first + i] = 1.0
                continue
        elif full == 511:
            closed |= bit
        score = 1 if captures else 0
        if closed == 511:
            moves[i] = score
            values[first + i] = 0.5
            continue
        if (closed >> c) & 1:
            score -= 1  # a free move for the opponent
            sent = ~closed & 511
        else:
            sent = 1 << c
        threats_p, threats_o = _threats_after(st, p, b, small, full, closed)
        if closed != k_closed or meta_p != k_meta or threats_p != k_tp or threats_o != k_to:
            k_closed = closed
            k_meta = meta_p
            k_tp = threats_p
            k_to = threats_o
            k_diff = _line_score(meta_p, closed & ~meta_p, threats_p) - _line_score(
                meta_o, closed & ~meta_o, threats_o
            )
            k_have = 0
        if threats_o & sent:
            score -= 1  # the opponent captures in reply
            if not k_have & 2:
                k_reply = 0.5 + 0.5 * math.tanh(scale * (k_diff - REPLY_CAPTURE))
                k_have |= 2
            values[first + i] = k_reply
        else:
            if not k_have & 1:
                k_value = 0.5 + 0.5 * math.tanh(scale * k_diff)
                k_have |= 1
            values[first + i] = k_value
        moves[i] = score


@njit(cache=True, inline="always")
def _random_empty(full, x):
    """A uniformly random empty cell of a small board whose occupied cells are ``full``, from
    the generator state ``x``: one lookup in EMPTY9 gives the count and the cells."""
    e = EMPTY9[np.uint32(full)]
    return (e >> (4 * below(x, e & 15) + 4)) & 15


@njit(cache=True, inline="always")
def _free_move(st, closed, j):
    """(board, cell) of the ``j``-th empty cell of the open boards, in board order (``j`` less
    than their number). Branchless: every board is looked at and the choice is carried by
    selects, since which board holds the ``j``-th cell is a coin toss a branch mispredicts."""
    pick_b = 0
    pick_e = 0
    pick_j = 0
    for b in range(9):
        e = EMPTY9[np.uint32(st[OFF_FULL + b])]
        pc = (e & 15) & (((closed >> b) & 1) - 1)  # 0 for a closed board
        here = (j >= 0) & (j < pc)
        pick_b = b if here else pick_b
        pick_e = e if here else pick_e
        pick_j = j if here else pick_j
        j -= pc
    return pick_b, (pick_e >> (4 * pick_j + 4)) & 15


@njit(cache=True)
def uttt_random_move(st, rng):
    b, c = _random_cell(st, rng, st[H_FORCED], st[H_CLOSED], _open_cells(st, st[H_CLOSED]))
    return 9 * b + c


@njit(cache=True)
def _open_cells(st, closed):
    """The number of empty cells of the open boards."""
    n = 0
    for b in range(9):
        if not (closed >> b) & 1:
            n += EMPTY9[st[OFF_FULL + b]] & 15
    return n


@njit(cache=True)
def _safe_random_move(st, rng, opp, buf):
    """A uniformly random move that leaves the opponent no game-winning reply, or -1."""
    allowed = _allowed(st)
    total = 0
    for b in range(9):
        cells = _safe_cells(st, b, opp) if (allowed >> b) & 1 else 0
        buf[b] = cells
        total += POP9[cells]
    if total == 0:
        return -1
    j = rand_below(rng, total)
    for b in range(9):
        pc = POP9[buf[b]]
        if j < pc:
            return 9 * b + NTH9[buf[b] * 9 + j]
        j -= pc
    return -1


@njit(cache=True, inline="always")
def _any_threat_board(st, q, boards):
    """Whether ``_threat_boards`` is not empty, inlined (the playout loop holds no call)."""
    rest = boards
    while rest:
        b = NTH9[rest * 9]
        rest &= rest - 1
        if THREAT9[st[OFF_SMALL + 9 * q + b]] & ~st[OFF_FULL + b] & 511:
            return True
    return False


@njit(cache=True)
def _threat_boards(st, q, boards):
    """The boards of ``boards`` where player ``q`` has an empty cell completing a small line."""
    out = 0
    rest = boards
    while rest:
        b = NTH9[rest * 9]
        rest &= rest - 1
        if THREAT9[st[OFF_SMALL + 9 * q + b]] & ~st[OFF_FULL + b] & 511:
            out |= 1 << b
    return out


@njit(cache=True, inline="always")
def _gives_capture(st, o, b, c, full, closed):
    """Whether the move to cell ``c`` of board ``b`` (``full``: b's occupied cells after it)
    gives opponent ``o`` a free move (a closed board, as before the move) or sends it to a
    board where it can capture a small board at once. Branchless (every load is in bounds:
    ``c`` < 9): whether a playout move is redrawn is close to a coin toss."""
    occupied = st[np.uint32(OFF_FULL + c)]
    occupied = full if c == b else occupied
    threats = THREAT9[np.uint32(st[np.uint32(OFF_SMALL + 9 * o + c)])] & ~occupied
    return ((closed >> c) & 1 | (threats & 511)) != 0


@njit(cache=True, inline="always")
def uttt_playout(st, rng, policy, buf):
    """Play random moves to the end; returns the final status. With ``policy`` >= 1 the
    mover wins at once when it can (decisive moves) and, with 2, otherwise avoids moves that
    let the opponent win the game at once (anti-decisive moves; Teytaud & Teytaud 2010); the
    playout stops when the outcome is forced (``st`` then holds the position before the
    forced end, still ONGOING). With PLAYOUT_CAPTURE the mover takes the small board it is
    sent to when it can; with PLAYOUT_AVOID (and not 2) it draws a move again, once, when the
    move sends the opponent to a board it can capture at once or gives it a free move
    (``_gives_capture``; the playout-side term of ``uttt_move_prior``), and with both it
    first takes the small board of a forced move when it can (``_playout_avoid_take``; on a
    free move it draws with the redraw alone). The state
    is left as ``uttt_apply`` would leave it but for the threat masks (H_THREAT0/1), not kept
    up to date.

    The rules of ``uttt_apply`` inlined over local variables: the header fields stay in
    registers for the whole playout and a move costs one lookup of the board's occupied
    cells, one of its empty cells (EMPTY9) and one win test (WIN9); the game can only end
    when a board closes, so that is the only place it is tested. A game-winning move needs
    a small-board threat on a board that completes a line of boards, so the small boards
    are looked at only once a player has such a board (none, most of the time) instead of
    following every player's threats move by move."""
    if policy & PLAYOUT_AVOID:
        if policy & PLAYOUT_CAPTURE and not policy & 2:
            return _playout_avoid_take(st, rng, policy, buf)
        return _playout_avoid(st, rng, policy, buf)
    return _playout_plain(st, rng, policy, buf)


def _make_playout(avoid, name, take=False):
    """``uttt_playout``'s loop compiled with or without PLAYOUT_AVOID (``avoid``, a constant
    of the closure: the other loop carries none of its code or registers), and with it
    PLAYOUT_CAPTURE on forced boards (``take``), as kernel ``name``.
    numba names a kernel's cache files after its qualified name and line, which closures of
    one factory share; processes compiling both loops at once could then swap their code. So
    each gets its own name (tests/engine/test_kernel_cache_files.py)."""

    def run(st, rng, policy, buf):
        status = st[H_STATUS]
        if status != ONGOING:
            return status
        p = st[H_TO_MOVE]
        forced = st[H_FORCED]
        closed = st[H_CLOSED]
        meta0 = st[H_META0]
        meta1 = st[H_META0 + 1]
        # Open boards whose capture would complete a line of boards, per player (they change only
        # when a board closes); zero without decisive moves, so never tested.
        decisive = 511 if policy >= 1 else 0
        meta_threat0 = THREAT9[meta0] & ~closed & decisive
        meta_threat1 = THREAT9[meta1] & ~closed & decisive
        avail = _open_cells(st, closed)  # a free move is the avail-th of them, found in one pass
        ply0 = st[H_PLY]
        ply = ply0
        result = ONGOING
        # _policy_move draws the moves (never with ``take``: uttt_playout gives policy 2 to the
        # avoid loop, where _policy_move draws every move as it would here; so the take loop
        # holds no call and keeps its registers)
        special = False if take else (policy & (2 | PLAYOUT_CAPTURE)) != 0
        b = 0
        c = forced  # a forced board is the last move's cell: the loop reads it from ``c``
        last = st[H_LAST]
        # The generator's next state (the one the next draw uses), in a register between the
        # calls that take ``rng``: a redraw selects the state after it, both made before the
        # redraw test is known, so the next move's draw does not wait for a generator step.
        y = xorshift_step(rng[0])
        cap_mover = _threat_boards(st, p, 511) if avoid else 0
        cap_other = _threat_boards(st, 1 - p, 511) if avoid else 0
        while True:
            mine = meta_threat0 if p == 0 else meta_threat1
            if forced >= 0:
                b = c  # == forced; c is ready before forced (no wait on the closed test)
                full = st[np.uint32(OFF_FULL + b)]
                if (mine >> b) & 1 and THREAT9[st[OFF_SMALL + 9 * p + b]] & ~full & 511:
                    result = p + 1  # a game-winning move is there
                    break
            elif mine and _any_threat_board(st, p, mine):
                result = p + 1
                break
            if special:
                st[H_TO_MOVE] = p
                st[H_FORCED] = forced
                st[H_CLOSED] = closed
                rng[0] = xorshift_back(y)
                opp = meta_threat1 if p == 0 else meta_threat0
                b, c = _policy_move(st, rng, policy, opp, avail, buf)
                y = xorshift_step(rng[0])
                if b < 0:
                    result = 2 - p  # every move hands the opponent the game
                    break
                full = st[np.uint32(OFF_FULL + b)]
            elif take and forced >= 0 and (cap_mover >> b) & 1:
                # The mover takes the small board it is sent to (avoid and capture together).
                wins = THREAT9[np.uint32(st[np.uint32(OFF_SMALL + 9 * p + b)])] & ~full & 511
                c = NTH9[np.uint32(wins * 9 + below(y, POP9[wins]))]
                y = xorshift_step(y)
            elif forced >= 0:
                c = _random_empty(full, y)
                y2 = xorshift_step(y)
                if avoid:
                    # The cells whose move is redrawn, made before the draw is known: board b as
                    # after a move there (a threat on another empty cell), the others from the
                    # opponent's capture mask; a closed board gives a free move.
                    here = THREAT9[np.uint32(st[np.uint32(OFF_SMALL + 9 * (1 - p) + b)])] & ~full
                    at_b = (here & ~(1 << b) & 511) != 0
                    bad = (closed | cap_other) & ~(1 << b) | closed & (1 << b)
                    bad |= (1 << b) if at_b else 0
                    c2 = _random_empty(full, y2)
                    y3 = xorshift_step(y2)
                    redraw = (bad >> c) & 1
                    y2 = y3 if redraw else y2
                    c = c2 if redraw else c
                y = y2
            else:
                b, c = _free_move(st, closed, below(y, avail))
                y2 = xorshift_step(y)
                full = st[np.uint32(OFF_FULL + b)]
                if avoid:
                    # the redraw made before its test is known, and selected (no branch)
                    b2, c2 = _free_move(st, closed, below(y2, avail))
                    y3 = xorshift_step(y2)
                    redraw = _gives_capture(st, 1 - p, b, c, full | (1 << c), closed)
                    b = b2 if redraw else b
                    c = c2 if redraw else c
                    y2 = y3 if redraw else y2
                    full = st[np.uint32(OFF_FULL + b)]
                y = y2
            # uttt_apply, inlined (tables and the state indexed by unsigned ints: no negative-index
            # wraparound on the chain of dependent loads).
            bit = 1 << b
            k = np.uint32(OFF_SMALL + 9 * p + b)
            small = st[k] | (1 << c)
            st[k] = small
            full |= 1 << c
            st[np.uint32(OFF_FULL + b)] = full
            avail -= 1
            ply += 1
            last = 9 * b + c
            p = 1 - p
            if avoid:
                # Each player's capture boards (a small-board threat on an empty cell), board b as
                # after the move; the mover's become the other's.
                mine_now = (THREAT9[np.uint32(small)] & ~full & 511) != 0
                theirs = THREAT9[np.uint32(st[np.uint32(OFF_SMALL + 9 * p + b)])] & ~full & 511
                mover_cap = (cap_mover & ~bit) | (bit if mine_now else 0)
                other_cap = (cap_other & ~bit) | (bit if theirs != 0 else 0)
                cap_mover = other_cap
                cap_other = mover_cap
            if WIN9[np.uint32(small)]:
                closed |= bit
                avail -= EMPTY9[np.uint32(full)] & 15
                if p == 1:
                    meta0 |= bit
                    if WIN9[np.uint32(meta0)]:
                        status = X_WON
                else:
                    meta1 |= bit
                    if WIN9[np.uint32(meta1)]:
                        status = O_WON
                meta_threat0 = THREAT9[meta0] & ~closed & decisive
                meta_threat1 = THREAT9[meta1] & ~closed & decisive
                if status == ONGOING and closed == 511:
                    status = DRAW
            elif full == 511:
                closed |= bit
                meta_threat0 &= ~bit
                meta_threat1 &= ~bit
                if closed == 511:
                    status = DRAW
            forced = -1 if (closed >> c) & 1 else c
            if status != ONGOING:
                result = status
                break
        rng[0] = xorshift_back(y)
        # The threat masks are left as they were (nothing reads them after a playout;
        # ``uttt_refresh_threats`` on all boards makes them uttt_apply's).
        st[H_TO_MOVE] = p
        st[H_FORCED] = forced
        st[H_CLOSED] = closed
        st[H_META0] = meta0
        st[H_META0 + 1] = meta1
        st[H_EMPTY] -= ply - ply0
        st[H_PLY] = ply
        st[H_LAST] = last
        st[H_STATUS] = status
        return result

    run.__name__ = run.__qualname__ = name
    return njit(cache=True)(run)


_playout_plain = _make_playout(False, "_playout_plain")
_playout_avoid = _make_playout(True, "_playout_avoid")
_playout_avoid_take = _make_playout(True, "_playout_avoid_take", take=True)


@njit(cache=True)
def _policy_move(st, rng, policy, opp, avail, buf):
    """(board, cell) of a playout move under ``policy`` 2 (anti-decisive) or PLAYOUT_CAPTURE
    for the position in ``st`` (its header as the playout left it; ``opp``: the open boards
    that would win the game for the opponent, ``avail``: the open boards' empty cells);
    (-1, -1) when every move hands the opponent the game."""
    p = st[H_TO_MOVE]
    forced = st[H_FORCED]
    closed = st[H_CLOSED]
    if policy & 2 and opp:
        opp = _threat_boards(st, 1 - p, opp)
    if opp:
        # Uniform over the safe moves by rejection sampling: a few uniform legal moves tested
        # one by one (most are safe) before listing every safe move.
        for _ in range(SAFE_TRIES):
            b, c = _random_cell(st, rng, forced, closed, avail)
            if _is_safe(st, 9 * b + c, opp):
                return b, c
        a = _safe_random_move(st, rng, opp, buf)
        if a < 0:
            return -1, -1
        return a // 9, a % 9
    x = xorshift_step(rng[0])
    rng[0] = x
    if forced >= 0:
        full = st[OFF_FULL + forced]
        wins = THREAT9[st[OFF_SMALL + 9 * p + forced]] & ~full & 511
        if policy & PLAYOUT_CAPTURE and wins:
            return forced, NTH9[wins * 9 + below(x, POP9[wins])]  # take the small board
        return forced, _random_empty(full, x)
    return _free_move(st, closed, below(x, avail))


@njit(cache=True)
def _random_cell(st, rng, forced, closed, avail):
    """(board, cell) of a uniformly random legal move; ``avail``: the empty cells of the open
    boards."""
    x = xorshift_step(rng[0])
    rng[0] = x
    if forced >= 0:
        return forced, _random_empty(st[OFF_FULL + forced], x)
    return _free_move(st, closed, below(x, avail))

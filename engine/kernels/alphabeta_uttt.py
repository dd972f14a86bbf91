"""Ultimate tic-tac-toe for the one alpha-beta search (engine/kernels/alphabeta.py),
compiled with numba (``cache=True``).

The position: 81 cells (0 empty, 1 X, 2 O), nine small-board results (0 open, 1/2 won by
X/O, 3 drawn) and the small board the mover is sent to. The evaluation counts lines at both
levels: two-in-a-row and one-in-a-row in the open small boards (weighted by the small
board's place in the frame), won small boards, and frame lines held by one player's won
boards; the side sent to "any board" gets a tempo bonus. Moves are ordered by TT move,
killers, history, then by what they win, block, and where they send the opponent.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
from numba import njit
from numba.extending import overload

from engine.kernels import alphabeta_base as base
from engine.kernels.alphabeta_base import HASH, INF
from engine.uttt import LINES, LINES_THROUGH, ZOBRIST, ZOBRIST_FORCED

MAX_PLY = 84
# info[] slots of uttt (alphabeta_base numbers the shared ones)
FORCED, OPEN, BEST = 11, 12, 13

UTTTArrays = namedtuple(
    "UTTTArrays",
    ["cells", "macro", "filled", "undo", "lines", "through", "through_n", "zob", "zob_forced",
     "weight"],
)  # fmt: skip


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

BOARD_WEIGHT = np.array([3, 2, 3, 2, 4, 2, 3, 2, 3], dtype=np.int64)


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
def _replay(history, cells, macro, filled, info, undo, lines, through, through_n, zob):
    ply = np.int64(0)
    for i in range(history.size):
        place(history[i], i & 1, cells, macro, filled, info, undo, ply, lines, through,
              through_n, zob)  # fmt: skip


# --- the operations the search asks of a game (alphabeta_base), for UTTTArrays ---------------


def _is_uttt(game: Any) -> bool:
    return getattr(game, "instance_class", None) is UTTTArrays


@overload(base.place)
def _place_uttt(game, search, action, player, ply):  # noqa: ANN001, ANN202
    if _is_uttt(game):

        def impl(game, search, action, player, ply):  # noqa: ANN001, ANN202
            g = game
            return place(action, player, g.cells, g.macro, g.filled, search.info, g.undo, ply,
                         g.lines, g.through, g.through_n, g.zob)  # fmt: skip

        return impl
    return None


@overload(base.remove)
def _remove_uttt(game, search, action, player, ply):  # noqa: ANN001, ANN202
    if _is_uttt(game):

        def impl(game, search, action, player, ply):  # noqa: ANN001, ANN202
            g = game
            remove(action, player, g.cells, g.macro, g.filled, search.info, g.undo, ply, g.zob)

        return impl
    return None


@overload(base.board_full)
def _board_full_uttt(game, search):  # noqa: ANN001, ANN202
    if _is_uttt(game):

        def impl(game, search):  # noqa: ANN001, ANN202
            return False  # place() reports the draw

        return impl
    return None


@overload(base.position_key)
def _position_key_uttt(game, search):  # noqa: ANN001, ANN202
    if _is_uttt(game):

        def impl(game, search):  # noqa: ANN001, ANN202
            info = search.info
            return info[HASH] ^ game.zob_forced[info[FORCED] + 1]

        return impl
    return None


@overload(base.quiet_leaf)
def _quiet_leaf_uttt(game, search, player, depth, ply):  # noqa: ANN001, ANN202
    if _is_uttt(game):

        def impl(game, search, player, depth, ply):  # noqa: ANN001, ANN202
            return False, np.int64(0)

        return impl
    return None


@overload(base.generate)
def _generate_uttt(game, search, player, ply, tt_move):  # noqa: ANN001, ANN202
    if _is_uttt(game):

        def impl(game, search, player, ply, tt_move):  # noqa: ANN001, ANN202
            g = game
            s = search
            n, winning = generate(player, ply, g.cells, g.macro, s.info, g.lines, g.through,
                                  g.through_n, s.moves, s.scores, tt_move, s.killers,
                                  s.history)  # fmt: skip
            if winning >= 0:
                return n, 1, winning
            return n, 0, -1

        return impl
    return None


@overload(base.evaluate)
def _evaluate_uttt(game, search, player):  # noqa: ANN001, ANN202
    if _is_uttt(game):

        def impl(game, search, player):  # noqa: ANN001, ANN202
            return evaluate(player, game.cells, game.macro, search.info, game.lines, game.weight)

        return impl
    return None


class UTTTContext(base.Context):
    """Mutable search state for uttt: position arrays, TT, killers, history."""

    def __init__(self, tt_bits: int = 20) -> None:
        game = UTTTArrays(
            cells=np.zeros(81, dtype=np.int8),
            macro=np.zeros(9, dtype=np.int8),
            filled=np.zeros(9, dtype=np.int8),
            undo=np.zeros((MAX_PLY + 2, 2), dtype=np.int64),
            lines=LINE_TABLE,
            through=THROUGH,
            through_n=THROUGH_N,
            zob=ZOB,
            zob_forced=ZOB_FORCED,
            weight=BOARD_WEIGHT,
        )
        super().__init__(base.search_arrays(MAX_PLY + 2, 81, tt_bits), game)

    def set_position(self, history: list[int]) -> None:
        g = self.game
        g.cells[:] = 0
        g.macro[:] = 0
        g.filled[:] = 0
        info = self.info
        info[HASH] = 0
        info[FORCED] = -1
        info[OPEN] = 9
        _replay(np.array(history, dtype=np.int64), g.cells, g.macro, g.filled, info, g.undo,
                g.lines, g.through, g.through_n, g.zob)  # fmt: skip

    def tt_move(self) -> int:
        return self.table_move(int(self.info[HASH] ^ ZOB_FORCED[self.info[FORCED] + 1]))

    def generate_root(self, player: int, rng: Any = None) -> tuple[list[int], int]:
        g, s = self.game, self.search
        n, winning = generate(
            player, 0, g.cells, g.macro, self.info, g.lines, g.through, g.through_n,
            s.moves, s.scores, self.tt_move(), s.killers, s.history,
        )  # fmt: skip
        return base.ordered(s.moves[0, :n], s.scores[0, :n], rng), int(winning)

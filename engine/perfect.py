"""``perfect``: exact play for small m,n,k boards (m * n <= 16: 3x3, 3x4, 4x4, 3x5 ...).

A numba kernel solves positions by negamax with alpha-beta over the three
values {-1, 0, +1} on two bitboards, memoized in a transposition table keyed
by the base-3 code of the canonical position: the least code among the board's
symmetries (8 for a square board, 4 for a rectangle). Before expanding a node
it applies the two rules every tic-tac-toe player knows: a move that wins at
once decides the node (+1), two opponent threats lose (-1), one threat forces
the block. Symmetric sibling moves are searched once. The table lives for the
process, so each board is solved once, on first use (or at warm-up), and
later questions are lookups.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from engine.errors import EngineError
from engine.game import State
from engine.mnk import MNKGame
from engine.options import NoOptions
from engine.result import Proof, SearchResult

MAX_CELLS = 16
TT_BITS = 18  # 256K entries (2.3 MB): 4x4 k=4 from empty visits about 27K positions
GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)  # 2^64 / golden ratio, as a signed 64-bit integer
LABELS: dict[int, Proof] = {1: "win", 0: "draw", -1: "loss"}


@njit(cache=True)
def _wins_at(mask, cell, lines, through, through_count):
    """Does the stone set ``mask`` plus ``cell`` contain a whole line through ``cell``?"""
    with_cell = mask | (np.int64(1) << cell)
    for j in range(through_count[cell]):
        line = lines[through[cell, j]]
        if with_cell & line == line:
            return True
    return False


@njit(cache=True)
def _negamax(
    me, opp, player, empties, depth, alpha, beta, codes, lines, through, through_count, perms,
    pow3, order, tt_keys, tt_values, stats,
):  # fmt: skip
    """Exact value in {-1, 0, 1} for the player to move (``me``), fail-hard alpha-beta.

    ``codes[depth]`` holds this position's base-3 code under each symmetry
    (digit 1 = X, 2 = O); ``stats[0]`` counts nodes (calls of this function)."""
    stats[0] += 1
    cells = order.size
    occupied = me | opp
    # A move that wins at once decides the node.
    for i in range(cells):
        c = order[i]
        if not (occupied >> c) & 1 and _wins_at(me, c, lines, through, through_count):
            return 1
    # Two opponent threats cannot both be blocked; one must be.
    threats = 0
    forced = -1
    for i in range(cells):
        c = order[i]
        if not (occupied >> c) & 1 and _wins_at(opp, c, lines, through, through_count):
            threats += 1
            forced = c
    if threats >= 2:
        return -1
    if empties <= 1:
        return 0  # the last stone cannot win (checked above): a full board, drawn
    symmetries = perms.shape[0]
    key = codes[depth, 0]
    for s in range(1, symmetries):
        if codes[depth, s] < key:
            key = codes[depth, s]
    # A direct-mapped table: slot from a multiplicative hash (Knuth), key + 1 stored (0 = empty).
    slot = ((key * GOLDEN) >> 20) & (tt_keys.size - 1)
    entry = tt_values[slot] if tt_keys[slot] == key + 1 else 0
    if entry != 0:
        low = (entry - 1) // 3 - 1
        high = (entry - 1) % 3 - 1
        if low == high or low >= beta:
            return low
        if high <= alpha:
            return high
        if low > alpha:
            alpha = low
        if high < beta:
            beta = high
    alpha0 = alpha
    beta0 = beta
    best = -2
    digit = player + 1
    n_children = 0  # stats[1 + depth * cells + j]: keys of the siblings searched here
    for i in range(cells):
        c = order[i]
        if forced >= 0 and c != forced:
            continue
        if (occupied >> c) & 1:
            continue
        child_key = -1
        for s in range(symmetries):
            code = codes[depth, s] + digit * pow3[perms[s, c]]
            codes[depth + 1, s] = code
            if child_key < 0 or code < child_key:
                child_key = code
        # Symmetric siblings have the same value: search one of them.
        duplicate = False
        for j in range(n_children):
            if stats[1 + depth * cells + j] == child_key:
                duplicate = True
                break
        if duplicate:
            continue
        stats[1 + depth * cells + n_children] = child_key
        n_children += 1
        value = -_negamax(
            opp, me | (np.int64(1) << c), 1 - player, empties - 1, depth + 1, -beta, -alpha,
            codes, lines, through, through_count, perms, pow3, order, tt_keys, tt_values, stats,
        )  # fmt: skip
        if value > best:
            best = value
        if best > alpha:
            alpha = best
        if alpha >= beta:
            break
    # Store what was learned as bounds [low, high], merged with what was known.
    low = -1
    high = 1
    if best <= alpha0:
        high = best
    elif best >= beta0:
        low = best
    else:
        low = best
        high = best
    if entry != 0:
        old_low = (entry - 1) // 3 - 1
        old_high = (entry - 1) % 3 - 1
        if old_low > low:
            low = old_low
        if old_high < high:
            high = old_high
    tt_keys[slot] = key + 1
    tt_values[slot] = (low + 1) * 3 + (high + 1) + 1
    return best


@njit(cache=True)
def _position_value(board, to_move, codes, lines, through, through_count, perms, pow3, order,
                    tt_keys, tt_values, stats):  # fmt: skip
    """Exact value for ``to_move`` of a board (-1 empty, 0 X, 1 O) where nobody has won yet."""
    x = np.int64(0)
    o = np.int64(0)
    empties = 0
    for c in range(board.size):
        if board[c] == 0:
            x |= np.int64(1) << c
        elif board[c] == 1:
            o |= np.int64(1) << c
        else:
            empties += 1
    for s in range(perms.shape[0]):
        code = np.int64(0)
        for c in range(board.size):
            if board[c] >= 0:
                code += (board[c] + 1) * pow3[perms[s, c]]
        codes[0, s] = code
    me = x if to_move == 0 else o
    opp = o if to_move == 0 else x
    return _negamax(me, opp, np.int64(to_move), np.int64(empties), np.int64(0), np.int64(-1),
                    np.int64(1), codes, lines, through, through_count, perms, pow3, order,
                    tt_keys, tt_values, stats)  # fmt: skip


@njit(cache=True)
def _score_moves(board, to_move, count_traps, values, traps, codes, lines, through,
                 through_count, perms, pow3, order, tt_keys, tt_values, stats):  # fmt: skip
    """For each empty cell: values[c] = the exact value of playing it for ``to_move`` (2 for a
    win at once), and with ``count_traps`` traps[c] = how many replies then lose for the
    opponent. Occupied cells get -9."""
    empties = 0
    for c in range(board.size):
        if board[c] < 0:
            empties += 1
    for c in range(board.size):
        values[c] = -9
        traps[c] = 0
        if board[c] >= 0:
            continue
        mine = np.int64(0)
        for i in range(board.size):
            if board[i] == to_move:
                mine |= np.int64(1) << i
        if _wins_at(mine, c, lines, through, through_count):
            values[c] = 2
            continue
        if empties == 1:
            values[c] = 0
            continue
        board[c] = to_move
        value = -_position_value(board, 1 - to_move, codes, lines, through, through_count, perms,
                                 pow3, order, tt_keys, tt_values, stats)  # fmt: skip
        values[c] = value
        if count_traps and value >= 0 and empties > 2:
            theirs = np.int64(0)
            for i in range(board.size):
                if board[i] == 1 - to_move:
                    theirs |= np.int64(1) << i
            for r in range(board.size):
                if board[r] >= 0 or _wins_at(theirs, r, lines, through, through_count):
                    continue
                board[r] = 1 - to_move
                if _position_value(board, to_move, codes, lines, through, through_count, perms,
                                   pow3, order, tt_keys, tt_values, stats) > 0:  # fmt: skip
                    traps[c] += 1
                board[r] = -1
        board[c] = -1


class BoardSolver:
    """Tables and the transposition table of one small m,n,k board (one per process)."""

    def __init__(self, m: int, n: int, k: int, symmetry: bool = True) -> None:
        self.m, self.n, self.k = m, n, k
        cells = m * n
        self.cells = cells
        lines = []
        for r in range(m):
            for c in range(n):
                for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                    end_r, end_c = r + (k - 1) * dr, c + (k - 1) * dc
                    if 0 <= end_r < m and 0 <= end_c < n:
                        mask = 0
                        for i in range(k):
                            mask |= 1 << ((r + i * dr) * n + c + i * dc)
                        lines.append(mask)
        self.lines = np.array(lines, dtype=np.int64)
        through_lists = [[j for j, line in enumerate(lines) if line >> c & 1] for c in range(cells)]
        width = max(1, max(len(t) for t in through_lists))
        self.through = np.zeros((cells, width), dtype=np.int32)
        self.through_count = np.zeros(cells, dtype=np.int32)
        for c, t in enumerate(through_lists):
            self.through[c, : len(t)] = t
            self.through_count[c] = len(t)
        self.perms = np.array(self._symmetries(m, n, symmetry), dtype=np.int32)
        self.pow3 = np.array([3**i for i in range(cells)], dtype=np.int64)
        # Centre first, then by distance: good moves early make alpha-beta cut more.
        centre_r, centre_c = (m - 1) / 2, (n - 1) / 2
        self.order = np.array(
            sorted(range(cells), key=lambda c: (abs(c // n - centre_r) + abs(c % n - centre_c), c)),
            dtype=np.int32,
        )
        self.tt_keys = np.zeros(1 << TT_BITS, dtype=np.int64)
        self.tt_values = np.zeros(1 << TT_BITS, dtype=np.int8)
        self.codes = np.zeros((cells + 2, self.perms.shape[0]), dtype=np.int64)
        self.stats = np.zeros(1 + (cells + 1) * cells, dtype=np.int64)

    @staticmethod
    def _symmetries(m: int, n: int, symmetry: bool) -> list[list[int]]:
        def transform(f: Callable[[int, int], tuple[int, int]], cols: int) -> list[int]:
            out = []
            for c in range(m * n):
                r2, c2 = f(c // n, c % n)
                out.append(r2 * cols + c2)
            return out

        ident = transform(lambda r, c: (r, c), n)
        if not symmetry:
            return [ident]
        perms = [
            ident,
            transform(lambda r, c: (r, n - 1 - c), n),
            transform(lambda r, c: (m - 1 - r, c), n),
            transform(lambda r, c: (m - 1 - r, n - 1 - c), n),
        ]
        if m == n:
            perms += [
                transform(lambda r, c: (c, r), n),
                transform(lambda r, c: (c, m - 1 - r), n),
                transform(lambda r, c: (n - 1 - c, r), n),
                transform(lambda r, c: (n - 1 - c, m - 1 - r), n),
            ]
        return perms

    def _arrays(self) -> tuple[Any, ...]:
        return (
            self.codes, self.lines, self.through, self.through_count, self.perms, self.pow3,
            self.order, self.tt_keys, self.tt_values, self.stats,
        )  # fmt: skip

    def value(self, board: list[int], to_move: int) -> tuple[int, int]:
        """(exact value for ``to_move``, nodes searched) of a non-terminal position."""
        self.stats[0] = 0
        cells = np.array(board, dtype=np.int64)
        value = _position_value(cells, np.int64(to_move), *self._arrays())
        return int(value), int(self.stats[0])

    def score_moves(
        self, board: list[int], to_move: int, count_traps: bool
    ) -> tuple[list[int], list[int], int]:
        """(values, traps, nodes) per cell, as ``_score_moves`` computes them."""
        self.stats[0] = 0
        cells = np.array(board, dtype=np.int64)
        values = np.zeros(cells.size, dtype=np.int64)
        traps = np.zeros(cells.size, dtype=np.int64)
        _score_moves(cells, np.int64(to_move), count_traps, values, traps, *self._arrays())
        return [int(v) for v in values], [int(t) for t in traps], int(self.stats[0])


_SOLVERS: dict[tuple[int, int, int, bool], BoardSolver] = {}


def solver_for(game: Any, symmetry: bool = True) -> BoardSolver:
    if not isinstance(game, MNKGame):
        raise EngineError(f"perfect play covers m,n,k boards of at most {MAX_CELLS} cells")
    if game.cells > MAX_CELLS:
        raise EngineError(
            f"perfect play covers boards of at most {MAX_CELLS} cells, not {game.m}x{game.n}"
        )
    key = (game.m, game.n, game.k, symmetry)
    solver = _SOLVERS.get(key)
    if solver is None:
        solver = _SOLVERS[key] = BoardSolver(game.m, game.n, game.k, symmetry)
    return solver


def solve_counted(state: State, symmetry: bool = True) -> tuple[int, int]:
    """(perfect-play value for the player to move, nodes searched for it)."""
    if state.is_terminal():
        return (0 if state.winner() is None else -1), 0
    solver = solver_for(state.game, symmetry)
    return solver.value(state.board, state.current_player())  # type: ignore[attr-defined]


def solve(state: State) -> int:
    """Perfect-play value for the player to move: +1 win, 0 draw, -1 loss (m * n <= 16).

    A finished game counts for the player who would move next: -1 after a win, 0 after a draw."""
    return solve_counted(state)[0]


def label_moves(game: Any, actions: list[int]) -> list[str | None]:
    """Label the position before each move as "win"/"draw"/"loss" for its mover; None where the
    board is too big to solve."""
    if not isinstance(game, MNKGame) or game.cells > MAX_CELLS:
        return [None] * len(actions)
    state = game.new_initial_state()
    labels: list[str | None] = []
    for action in actions:
        labels.append(LABELS[solve(state)] if not state.is_terminal() else None)
        state.apply_checked(action)
    return labels


def benchmark_solve(
    game: Any, symmetry: bool = True, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """Solve the empty board with a fresh table: value, nodes and seconds (for the bench)."""
    from engine.tictactoe import TicTacToeGame

    solve(TicTacToeGame().new_initial_state())  # compile or load the kernel first
    solver = BoardSolver(game.m, game.n, game.k, symmetry)
    state = game.new_initial_state()
    start = clock()
    value, nodes = solver.value(state.board, 0)
    return {"value": value, "nodes": nodes, "seconds": clock() - start}


def perfect_search(
    state: State,
    *,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: NoOptions,
    cache: dict[str, Any],
) -> SearchResult:
    """Play a move of the best exact value: a win at once if there is one; among equals the
    move that leaves the opponent the most losing replies; then by the seed."""
    solver = solver_for(state.game)
    board = state.board  # type: ignore[attr-defined]
    values, traps, nodes = solver.score_moves(board, state.current_player(), True)
    rng = random.Random(seed)
    # Win at once (2) > other wins (1) > draws > losses; then traps; then the seed.
    action = max(state.legal_actions(), key=lambda a: (values[a], traps[a], rng.random()))
    value = min(values[action], 1)
    pv = _perfect_line(solver, state, action)
    return SearchResult(
        action=action,
        value=float(value),
        algorithm="perfect",
        iterations=max(nodes, 1),
        pv=pv,
        depth=len(pv),
        proven=LABELS[value],
    )


def _perfect_line(solver: BoardSolver, state: State, first: int) -> tuple[int, ...]:
    """A line of perfect play starting with ``first`` (winning at once whenever possible)."""
    line = [first]
    state = state.clone()
    state.apply_action(first)
    while not state.is_terminal():
        board = state.board  # type: ignore[attr-defined]
        values, _, _ = solver.score_moves(board, state.current_player(), False)
        best = max(state.legal_actions(), key=lambda a: values[a])
        line.append(best)
        state.apply_action(best)
    return tuple(line)

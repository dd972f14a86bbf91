"""What the one alpha-beta search (``alphabeta``) asks of a game, and what it shares.

The search (engine/kernels/alphabeta.py) is written once against the operations below;
each game (``alphabeta_mnk``, ``alphabeta_uttt``) implements them for its own arrays,
registered with ``numba.extending.overload`` on the type of its position tuple (a
``namedtuple``). numba then compiles one search per game, each with that game's operations
inlined, as a C++ template would; a game's search is compiled only when that game is first
searched. The stubs raise if called from Python.

A position tuple holds the game's arrays, one of which is ``cells`` (0 empty, 1 X, 2 O per
action); the search tuple (``SearchArrays``) holds what every game's search uses: the info
slots, the deadline, the move lists, killers, history and the transposition table.
"""

from __future__ import annotations

import time
from collections import namedtuple
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numba import njit, objmode

from engine.kernels.layout import NO_NRT_OPTIONS

WIN = 1 << 40  # a win at ply p scores WIN - p: faster wins score higher
MATE_BOUND = WIN - 100_000
INF = 1 << 50
EXACT, LOWER, UPPER = 0, 1, 2

# info[] slots (int64) every game's search uses; the games number theirs from 3 up.
NODES, LIMIT, STOP = 0, 1, 2
HASH, GEN, CHECK_AT = 4, 6, 7
# The depth of the running iteration of the deepening, written by ``root``: the search
# extends answers to threats only within twice that many plies (``negamax``).
ROOT_DEPTH = 15
INFO_SIZE = 16

# deadline[] slots (float64): the deadline on CLOCK (0.0 = none), the time of the last
# clock read, and the nodes between checks, adapted so that clock reads come about every
# CHECK_SECONDS whatever a node costs (a gomoku node with its threat search costs tens of
# times a 5x5 node: a fixed count either reads the clock too often or overruns the deadline).
D_DEADLINE, D_LAST, D_STEP = 0, 1, 2
CHECK_SECONDS = 0.0002
CHECK_EVERY = 16  # nodes between the checks at the start of a search
CHECK_MAX = 4096

_F = TypeVar("_F", bound=Callable[..., Any])


def kernel(function: _F) -> _F:
    """``numba.njit`` for the alpha-beta search's functions (no reference counting)."""
    return cast(_F, njit(**NO_NRT_OPTIONS)(function))


SearchArrays = namedtuple(
    "SearchArrays",
    [
        "info",  # int64[INFO_SIZE]
        "deadline",  # float64[3]
        "moves",  # int32[plies, cells]: the move list of each ply
        "scores",  # int64[plies, cells]: their ordering scores
        "killers",  # int32[plies, 2] (Akl & Newborn 1977)
        "history",  # int64[cells] (Schaeffer 1989)
        "tt_key",  # int64[2**bits]: the transposition table (Zobrist 1970), with generations
        "tt_score",
        "tt_meta",  # depth << 20 | flag << 16 | (move + 1)
        "tt_gen",
    ],
)


def search_arrays(plies: int, actions: int, tt_bits: int) -> SearchArrays:
    """Zeroed search arrays for ``plies`` plies of move lists over ``actions`` actions and a
    transposition table of 2**tt_bits slots."""
    size = 1 << tt_bits
    return SearchArrays(
        info=np.zeros(INFO_SIZE, dtype=np.int64),
        deadline=np.zeros(3, dtype=np.float64),  # D_DEADLINE, D_LAST, D_STEP
        moves=np.zeros((plies, actions), dtype=np.int32),
        scores=np.zeros((plies, actions), dtype=np.int64),
        killers=np.full((plies, 2), -1, dtype=np.int32),
        history=np.zeros(actions, dtype=np.int64),
        tt_key=np.zeros(size, dtype=np.int64),
        tt_score=np.zeros(size, dtype=np.int64),
        tt_meta=np.zeros(size, dtype=np.int64),
        tt_gen=np.full(size, -1, dtype=np.int64),
    )


class Context:
    """One game's mutable search state, kept between the searches of a game: ``search`` (the
    SearchArrays) and ``game`` (that game's position tuple). A game's context adds ``tt_move``,
    ``set_position`` and ``generate_root``."""

    def __init__(self, search: SearchArrays, game: Any) -> None:
        self.search = search
        self.game: Any = game  # the game's position tuple (a namedtuple of arrays)
        self.info = search.info
        self.deadline = search.deadline
        self.generation = 0  # the table's entries of other generations are misses
        self.owner: str | None = None  # the game_key of the last search, if any

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self.search, *self.game))

    def new_search(self, keep_table: bool) -> None:
        """Start a search: a new table generation and history, or (``keep_table``, the next
        move of the same game) the table kept and the history aged."""
        history = self.search.history
        if not keep_table:
            self.generation += 1
            history[:] = 0
        else:
            history >>= 2
        self.search.killers[:] = -1
        self.info[GEN] = self.generation

    def table_move(self, key: int) -> int:
        """The move the transposition table holds for the position of hash ``key``, or -1."""
        s = self.search
        slot = key & (s.tt_key.size - 1)
        if s.tt_key[slot] == key and s.tt_gen[slot] == self.info[GEN]:
            return int(s.tt_meta[slot] & 0xFFFF) - 1
        return -1


def ordered(moves: Any, scores: Any, rng: Any = None) -> list[int]:
    """``moves`` by descending ``scores``; ``rng`` (random.Random) breaks ties, else the
    generator's order does."""
    n = len(moves)
    ties = [rng.random() for _ in range(n)] if rng is not None else [0.0] * n
    order = sorted(range(n), key=lambda i: (-int(scores[i]), ties[i]))
    return [int(moves[i]) for i in order]


# The clock the compiled searches read: the driver (engine/alphabeta_driver.py) sets it to
# the running search's injected clock, so that clock alone says when they stop (the
# server's engine pool stops a search mid-kernel by making its clock jump past every
# deadline).
CLOCK: list[Callable[[], float]] = [time.perf_counter]


@kernel
def now() -> float:
    """The search's clock (seconds), read from compiled code through object mode."""
    with objmode(t="float64"):
        t = CLOCK[0]()
    return t


@kernel
def tick(info, deadline):
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


@kernel
def pick(ply, start, n, moves, scores):
    """Selection sort step: bring the best remaining move of ``moves[ply]`` to ``start``."""
    best = start
    for i in range(start + 1, n):
        if scores[ply, i] > scores[ply, best]:
            best = i
    if best != start:
        moves[ply, start], moves[ply, best] = moves[ply, best], moves[ply, start]
        scores[ply, start], scores[ply, best] = scores[ply, best], scores[ply, start]
    return moves[ply, start]


# --- the operations a game implements (overloaded on its position tuple's type) ---------------


def place(game, search, action, player, ply):  # noqa: ANN001, ANN201
    """Play ``action`` for ``player`` (0/1) at ``ply``: 1 if it wins, 2 if it ends the game
    drawn, else 0."""
    raise NotImplementedError("compiled code only")


def remove(game, search, action, player, ply):  # noqa: ANN001, ANN201
    """Take back what ``place`` did at ``ply``."""
    raise NotImplementedError("compiled code only")


def board_full(game, search):  # noqa: ANN001, ANN201
    """No move left (a game whose ``place`` reports draws itself says False)."""
    raise NotImplementedError("compiled code only")


def position_key(game, search):  # noqa: ANN001, ANN201
    """The transposition table key of the position (Zobrist hash and whatever else makes
    two positions different: uttt's forced board)."""
    raise NotImplementedError("compiled code only")


def quiet_leaf(game, search, player, depth, ply):  # noqa: ANN001, ANN201
    """(True, score) where the node is scored without a move list, else (False, 0)."""
    raise NotImplementedError("compiled code only")


def generate(game, search, player, ply, tt_move):  # noqa: ANN001, ANN201
    """Fill ``search.moves[ply]`` with scored moves; (n, kind, cell): kind 1 = the mover wins
    at once on ``cell``; 2 = the opponent has two wins at once (the mover loses; ``cell`` is
    one); 3 = ``cell`` is the only move (a forced block: n = 1); 4 = the moves answer a threat
    (the search extends 3 by a ply, and 4 within twice the iteration's depth); 5 = the best
    moves only, not all of them (what is found there is not a proof: the driver does not
    report it as one); 0 = ordinary."""
    raise NotImplementedError("compiled code only")


def evaluate(game, search, player):  # noqa: ANN001, ANN201
    """The heuristic score of the position for ``player``."""
    raise NotImplementedError("compiled code only")

"""``alphabeta``: negamax with alpha-beta pruning, a transposition table and iterative deepening.

The readable Python searcher here works on any game through the State
interface (and serves as the reference, ``compiled=False``); mnk and uttt
positions go to the one compiled search (engine/kernels/alphabeta.py, with the
games' operations in engine/kernels/alphabeta_mnk.py and alphabeta_uttt.py),
driven by engine/alphabeta_driver.py. Both: negamax (Knuth & Moore 1975) with a
transposition table keyed by Zobrist hashes, iterative deepening under the
deadline (the move of the last completed depth is played), move ordering by TT
move, killer moves (Akl & Newborn 1977) and the history heuristic (Schaeffer
1989), and principal variation search (Marsland 1983).
Scores are integers: a win is ``WIN - ply`` so that faster wins score higher.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from engine.game import State
from engine.options import AlphaBetaOptions
from engine.result import Proof, SearchResult

WIN = 1_000_000
MATE_BOUND = WIN - 10_000  # scores beyond this are proven wins/losses
EVAL_SCALE = 2_000.0  # heuristic score that maps to value tanh(1) ~ 0.76
EXACT, LOWER, UPPER = 0, 1, 2
CHECK_EVERY = 128  # nodes between clock reads


class _Stop(Exception):
    """The deadline or the node budget ran out mid-iteration."""


def score_to_value(score: int) -> float:
    if score > MATE_BOUND:
        return 1.0
    if score < -MATE_BOUND:
        return -1.0
    return math.tanh(score / EVAL_SCALE)


def proven_label(score: int, exact: bool) -> Proof | None:
    if score > MATE_BOUND:
        return "win"
    if score < -MATE_BOUND:
        return "loss"
    if exact and score == 0:
        return "draw"
    return None


def _tt_store(score: int, ply: int) -> int:
    """Win scores are stored as distance from the node, not the root."""
    if score > MATE_BOUND:
        return score + ply
    if score < -MATE_BOUND:
        return score - ply
    return score


def _tt_load(score: int, ply: int) -> int:
    if score > MATE_BOUND:
        return score - ply
    if score < -MATE_BOUND:
        return score + ply
    return score


def position_key(state: State) -> Any:
    key = getattr(state, "position_key", None)
    if key is not None:
        return key()
    zobrist = getattr(state, "zobrist", None)
    if zobrist is not None:
        return zobrist
    return tuple(state.history())


class PythonNegamax:
    """Negamax + TT + killers + history + PVS over the generic State interface."""

    def __init__(
        self,
        deadline: float | None,
        node_limit: int | None,
        clock: Callable[[], float],
        evaluate: Callable[[State], int] | None = None,
    ) -> None:
        self.deadline = deadline
        self.node_limit = node_limit
        self.clock = clock
        self.evaluate = evaluate or (lambda state: 0)
        self.nodes = 0
        self.next_check = CHECK_EVERY
        self.may_stop = False
        self.tt: dict[Any, tuple[int, int, int, int]] = {}
        self.killers: dict[int, list[int]] = {}
        self.history: dict[int, int] = {}

    def _check(self) -> None:
        self.next_check = self.nodes + CHECK_EVERY
        if not self.may_stop:
            return
        if self.node_limit is not None and self.nodes >= self.node_limit:
            raise _Stop
        if self.deadline is not None and self.clock() >= self.deadline:
            raise _Stop

    def _order(self, moves: list[int], tt_move: int, ply: int) -> list[int]:
        killers = self.killers.get(ply, ())
        history = self.history

        def rank(a: int) -> int:
            if a == tt_move:
                return -(1 << 60)
            if a in killers:
                return -(1 << 50)
            return -history.get(a, 0)

        return sorted(moves, key=rank)

    def negamax(self, state: State, depth: int, alpha: int, beta: int, ply: int) -> int:
        self.nodes += 1
        if self.nodes >= self.next_check or (
            self.node_limit is not None and self.nodes >= self.node_limit
        ):
            self._check()
        key = position_key(state)
        entry = self.tt.get(key)
        tt_move = -1
        if entry is not None:
            e_depth, e_score, e_flag, tt_move = entry
            if e_depth >= depth:
                score = _tt_load(e_score, ply)
                if (
                    e_flag == EXACT
                    or (e_flag == LOWER and score >= beta)
                    or (e_flag == UPPER and score <= alpha)
                ):
                    return score
        if depth <= 0:
            return self.evaluate(state)
        alpha_original = alpha
        best_score, best_move = -2 * WIN, -1
        for index, action in enumerate(self._order(state.legal_actions(), tt_move, ply)):
            child = state.clone()
            child.apply_action(action)
            if child.is_terminal():
                score = 0 if child.winner() is None else WIN - (ply + 1)
            elif index == 0:
                score = -self.negamax(child, depth - 1, -beta, -alpha, ply + 1)
            else:  # PVS: a null window first, a full re-search only if it fails high
                score = -self.negamax(child, depth - 1, -alpha - 1, -alpha, ply + 1)
                if alpha < score < beta:
                    score = -self.negamax(child, depth - 1, -beta, -score, ply + 1)
            if score > best_score:
                best_score, best_move = score, action
            if score > alpha:
                alpha = score
            if alpha >= beta:
                killers = self.killers.setdefault(ply, [])
                if action not in killers:
                    killers.insert(0, action)
                    del killers[2:]
                self.history[action] = self.history.get(action, 0) + depth * depth
                break
        flag = UPPER if best_score <= alpha_original else LOWER if best_score >= beta else EXACT
        self.tt[key] = (depth, _tt_store(best_score, ply), flag, best_move)
        return best_score

    def principal_variation(self, state: State, limit: int) -> tuple[int, ...]:
        pv: list[int] = []
        state = state.clone()
        seen = set()
        while len(pv) < limit and not state.is_terminal():
            key = position_key(state)
            entry = self.tt.get(key)
            if entry is None or key in seen or entry[3] not in state.legal_actions():
                break
            seen.add(key)
            pv.append(entry[3])
            state.apply_action(entry[3])
        return tuple(pv)

    def iterate(
        self, state: State, seed: int | None, max_depth: int | None = None
    ) -> tuple[int, int, int, bool]:
        """Iterative deepening; returns (action, score, completed depth, exact)."""
        remaining = state.game.max_game_length() - state.ply()
        limit = remaining if max_depth is None else min(max_depth, remaining)
        moves = state.legal_actions()
        if seed is not None:
            random.Random(seed).shuffle(moves)
        best_action, best_score, completed = moves[0], 0, 0
        for depth in range(1, limit + 1):
            self.may_stop = depth > 1
            try:
                score, action = self._root(state, moves, depth)
            except _Stop:
                break
            best_action, best_score, completed = action, score, depth
            moves.remove(action)
            moves.insert(0, action)
            if abs(score) > MATE_BOUND:
                break
        exact = completed >= remaining or abs(best_score) > MATE_BOUND
        return best_action, best_score, completed, exact

    def _root(self, state: State, moves: list[int], depth: int) -> tuple[int, int]:
        alpha, beta = -2 * WIN, 2 * WIN
        best_score, best_move = -2 * WIN, moves[0]
        self.nodes += 1
        for index, action in enumerate(moves):
            child = state.clone()
            child.apply_action(action)
            if child.is_terminal():
                score = 0 if child.winner() is None else WIN - 1
            elif index == 0:
                score = -self.negamax(child, depth - 1, -beta, -alpha, 1)
            else:
                score = -self.negamax(child, depth - 1, -alpha - 1, -alpha, 1)
                if score > alpha:
                    score = -self.negamax(child, depth - 1, -beta, -score, 1)
            if score > best_score:
                best_score, best_move = score, action
            alpha = max(alpha, score)
        self.tt[position_key(state)] = (depth, best_score, EXACT, best_move)
        return best_score, best_move


def alphabeta_search(
    state: State,
    *,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: AlphaBetaOptions,
    cache: dict[str, Any],
) -> SearchResult:
    """Compiled search for mnk and uttt boards; the Python searcher for anything else
    (or with ``compiled=False``)."""
    if options.compiled:
        from engine.mnk import MNKState
        from engine.uttt import UTTTState

        if isinstance(state, MNKState):
            from engine.alphabeta_driver import mnk_alphabeta

            return mnk_alphabeta(state, deadline, iterations, seed, clock, options, cache)
        if isinstance(state, UTTTState):
            from engine.alphabeta_driver import uttt_alphabeta

            return uttt_alphabeta(state, deadline, iterations, seed, clock, options, cache)
    return python_alphabeta(state, deadline, iterations, seed, clock, options)


def python_alphabeta(
    state: State,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: AlphaBetaOptions,
) -> SearchResult:
    heuristic = getattr(type(state), "heuristic", None)  # a game may offer an evaluation
    searcher = PythonNegamax(deadline, iterations, clock, evaluate=heuristic)
    action, score, depth, exact = searcher.iterate(state, seed, options.max_depth)
    pv = searcher.principal_variation(state, max(depth, 1))
    if not pv or pv[0] != action:
        pv = (action,)
    return SearchResult(
        action=action,
        value=score_to_value(score),
        algorithm="alphabeta",
        iterations=searcher.nodes,
        pv=pv,
        depth=depth,
        proven=proven_label(score, exact),
    )

"""``minimax``: plain negamax without pruning or memory, the reference for small boards.

Depth-limited and deepened one ply at a time under the deadline or node
budget; a position beyond the horizon counts as 0. Given the budget to reach
the end of the game it returns the exact game-theoretic value, which the tests
compare with ``alphabeta`` and ``perfect``. Wins score ``WIN - ply`` (faster is
better), as in alphabeta.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from engine.alphabeta import CHECK_EVERY, WIN, proven_label, score_to_value
from engine.game import State
from engine.options import MinimaxOptions
from engine.result import SearchResult


class _Stop(Exception):
    pass


class _Minimax:
    def __init__(
        self, deadline: float | None, node_limit: int | None, clock: Callable[[], float]
    ) -> None:
        self.deadline, self.node_limit, self.clock = deadline, node_limit, clock
        self.nodes = 0
        self.may_stop = False

    def negamax(self, state: State, depth: int, ply: int) -> tuple[int, list[int]]:
        """(score for the player to move, principal variation)."""
        self.nodes += 1
        if self.may_stop:
            if self.node_limit is not None and self.nodes >= self.node_limit:
                raise _Stop
            if self.deadline is not None and self.nodes % CHECK_EVERY == 0:
                if self.clock() >= self.deadline:
                    raise _Stop
        if depth == 0:
            return 0, []
        best, best_line = -2 * WIN, list[int]()
        line: list[int]
        for action in state.legal_actions():
            child = state.clone()
            child.apply_action(action)
            if child.is_terminal():
                score, line = (0 if child.winner() is None else WIN - (ply + 1)), []
            else:
                score, line = self.negamax(child, depth - 1, ply + 1)
                score = -score
            if score > best:
                best, best_line = score, [action, *line]
        return best, best_line


def minimax_search(
    state: State,
    *,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: MinimaxOptions,
    cache: dict[str, Any],
) -> SearchResult:
    search = _Minimax(deadline, iterations, clock)
    remaining = state.game.max_game_length() - state.ply()
    limit = min(options.max_depth or remaining, remaining)
    fallback = random.Random(seed).choice(state.legal_actions())
    score, line, completed = 0, [fallback], 0
    for depth in range(1, limit + 1):
        search.may_stop = depth > 1
        try:
            score, line = search.negamax(state, depth, 0)
        except _Stop:
            break
        completed = depth
        if abs(score) > WIN - 10_000:
            break
    exact = completed >= remaining or abs(score) > WIN - 10_000
    return SearchResult(
        action=line[0],
        value=score_to_value(score),
        algorithm="minimax",
        iterations=search.nodes,
        pv=tuple(line),
        depth=completed,
        proven=proven_label(score, exact),
    )

"""A plain, readable UCT in pure Python over the State interface.

The stand-in ``mcts`` until the compiled one (engine/mcts.py) is present, and a
reference for it: UCB1 selection with c = sqrt(2) (Kocsis & Szepesvari 2006),
uniform random playouts, and at the root the decisive / anti-decisive rule
(Teytaud & Teytaud 2010): take a winning move at once; otherwise consider only
the moves that leave the opponent no win in one, when there are any.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from engine.game import State, safe_actions, winning_actions
from engine.search import SearchResult


class _Node:
    __slots__ = ("action", "mover", "children", "untried", "visits", "wins")

    def __init__(self, action: int, mover: int, untried: list[int]) -> None:
        self.action = action
        self.mover = mover  # the player who played ``action`` into this node
        self.children: list[_Node] = []
        self.untried = untried
        self.visits = 0
        self.wins = 0.0  # from ``mover``'s point of view: win 1, draw 0.5


def python_uct_search(
    state: State,
    *,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: dict[str, Any],
    cache: dict[str, Any],
) -> SearchResult:
    rng = random.Random(seed)
    c = float(options.get("c", math.sqrt(2.0)))
    me = state.current_player()
    wins = winning_actions(state)
    if wins:
        action = wins[0]
        return SearchResult(action, 1.0, "mcts", 0, pv=(action,), proven="win")
    candidates = safe_actions(state) or state.legal_actions()
    rng.shuffle(candidates)
    root = _Node(-1, 1 - me, candidates)
    done = 0
    while True:
        if iterations is not None and done >= iterations:
            break
        if deadline is not None and clock() >= deadline and done > 0:
            break
        _iterate(root, state.clone(), rng, c)
        done += 1
    best = max(root.children, key=lambda n: n.visits)
    pv = [best.action]
    node = best
    while node.children:
        node = max(node.children, key=lambda n: n.visits)
        pv.append(node.action)
    value = 2.0 * best.wins / best.visits - 1.0
    visits = tuple(sorted((n.action, n.visits) for n in root.children))
    return SearchResult(best.action, value, "mcts", done, pv=tuple(pv), visits=visits)


def _iterate(root: _Node, state: State, rng: random.Random, c: float) -> None:
    node = root
    path = [root]
    # Selection: UCB1 while fully expanded.
    while not node.untried and node.children:
        log_n = math.log(node.visits)
        node = max(
            node.children,
            key=lambda ch: ch.wins / ch.visits + c * math.sqrt(log_n / ch.visits),
        )
        state.apply_action(node.action)
        path.append(node)
    # Expansion: one new child.
    if node.untried:
        action = node.untried.pop()
        mover = state.current_player()
        state.apply_action(action)
        untried = state.legal_actions()
        rng.shuffle(untried)
        child = _Node(action, mover, untried)
        node.children.append(child)
        node = child
        path.append(node)
    # Simulation: uniform random moves to the end.
    while not state.is_terminal():
        state.apply_action(rng.choice(state.legal_actions()))
    winner = state.winner()
    for visited in path:
        visited.visits += 1
        if winner is None:
            visited.wins += 0.5
        elif winner == visited.mover:
            visited.wins += 1.0

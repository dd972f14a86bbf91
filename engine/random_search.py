"""The ``random`` algorithm: a uniformly random legal move (a baseline and a sparring partner)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from engine.game import State
from engine.options import NoOptions
from engine.result import SearchResult


def random_search(
    state: State,
    *,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: NoOptions,
    cache: dict[str, Any],
) -> SearchResult:
    action = random.Random(seed).choice(state.legal_actions())
    return SearchResult(action=action, value=0.0, algorithm="random", iterations=1, pv=(action,))

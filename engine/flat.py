"""Flat Monte Carlo, as in the seed's ultimate tic-tac-toe bot: uniform random playouts from
each root move in turn until the budget is spent; the move with the best mean score is played.
A playout won by the mover scores 1 + (L - length) / L and a lost one minus that (L = most
moves left at the root), so shorter wins and longer losses weigh more; draws score 0.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.kernels import KernelGame, compiled_legal_actions, kernel_game, root_state
from engine.kernels.budget import run_chunked
from engine.kernels.layout import H_EMPTY, seed_rng
from engine.kernels.tree import flat_run
from engine.options import NoOptions
from engine.result import SearchResult

__all__ = ["flat_search"]


class _Stats:
    __slots__ = ("moves", "plays", "wins", "score", "next")

    def __init__(self, moves: list[int]) -> None:
        self.moves = np.array(moves, dtype=np.int32)
        self.plays = np.zeros(len(moves), dtype=np.int64)
        self.wins = np.zeros(len(moves), dtype=np.int64)  # half-points: win 2, draw 1
        self.score = np.zeros(len(moves), dtype=np.float64)
        self.next = 0


def _run(
    st: np.ndarray,
    game: KernelGame,
    stats: _Stats,
    *,
    deadline: float | None,
    iterations: int | None,
    clock: Callable[[], float],
    rng: np.ndarray,
) -> int:
    scratch = np.empty_like(st)
    buf = np.empty(game.max_moves + 1, dtype=np.int32)
    max_len = float(max(1, int(st[H_EMPTY])))

    def step(n: int) -> tuple[int, bool]:
        stats.next = int(
            flat_run(
                st,
                scratch,
                stats.moves,
                stats.plays,
                stats.wins,
                stats.score,
                stats.next,
                n,
                rng,
                buf,
                False,
                max_len,
            )
        )
        return n, False

    return run_chunked(step, deadline=deadline, iterations=iterations, clock=clock)


def flat_kernel_run(st: np.ndarray, game: KernelGame, *, iterations: int, seed: int) -> int:
    """Run the compiled loop without a State (warm-up and benchmarks)."""
    stats = _Stats(compiled_legal_actions(st))
    return _run(
        st, game, stats, deadline=None, iterations=iterations, clock=_no_clock, rng=seed_rng(seed)
    )


def _no_clock() -> float:
    return 0.0


def flat_search(
    state: Any,
    *,
    deadline: float | None,
    iterations: int | None,
    seed: int | None,
    clock: Callable[[], float],
    options: NoOptions,
    cache: dict[str, Any],
) -> SearchResult:
    """Flat Monte Carlo (module docstring); ``visits`` are the playouts per root move."""
    game = kernel_game(state.game)
    st = root_state(state, game)
    stats = _Stats(compiled_legal_actions(st))
    rng = seed_rng(secrets.randbits(63) if seed is None else seed)
    done = _run(st, game, stats, deadline=deadline, iterations=iterations, clock=clock, rng=rng)
    mean = stats.score / np.maximum(stats.plays, 1)
    mean[stats.plays == 0] = -np.inf
    best = int(np.argmax(mean))
    plays = int(stats.plays[best])
    value = float(stats.wins[best]) / plays - 1.0 if plays else 0.0
    action = int(stats.moves[best])
    return SearchResult(
        action=action,
        value=value,
        algorithm="flat",
        iterations=done,
        pv=(action,),
        visits=tuple((int(a), int(p)) for a, p in zip(stats.moves, stats.plays, strict=True)),
    )

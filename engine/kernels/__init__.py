"""Compiled (numba, ``cache=True``) rules and search loops for every game of the family.

Positions are flat int32 arrays (``layout``); ``rules`` dispatches to 3x3 on bitboards
(``ttt``), the m,n,k kernels (``mnk``: 5x5, gomoku, any m,n in 3..20) or ultimate
tic-tac-toe (``uttt``); ``tree`` holds the MCTS and flat Monte Carlo loops and ``budget``
drives them against the clock. The kernels know games by their rules (``kernel_game``) and
positions only by their move list, so they never depend on the Python ``State`` internals.
Tests check on many random games that they agree with the Python rules.

numba caches each compiled function next to its source but does not notice edits to the
kernels it calls from other files; ``engine.compiled_cache.drop_if_stale`` (run first, below)
clears the whole package's cache whenever any file of it changes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from engine.compiled_cache import drop_if_stale

drop_if_stale()

from engine.kernels.layout import (  # noqa: E402 (after the cache check)
    H_CELLS,
    H_STATUS,
    KIND_MNK,
    KIND_TTT,
    KIND_UTTT,
    NEAR_MIN_CELLS,
    ONGOING,
)
from engine.kernels.rules import legal, max_moves, new_state  # noqa: E402

__all__ = [
    "KernelGame",
    "compiled_legal_actions",
    "compiled_outcome",
    "kernel_game",
    "root_state",
]


class KernelGame(NamedTuple):
    """The kernels' view of a game: its kind and board parameters."""

    kind: int
    m: int
    n: int
    k: int
    near: int  # 1: big m,n,k board, search only cells within 2 of a stone

    @property
    def max_moves(self) -> int:
        return max_moves(self.kind, self.m, self.n)


def kernel_game(game: Any) -> KernelGame:
    """Map a Game to its kernel parameters, by its rules (m,n,k or ultimate), not its name."""
    from engine.mnk import MNKGame
    from engine.uttt import UTTTGame

    if isinstance(game, UTTTGame):
        return KernelGame(KIND_UTTT, 0, 0, 0, 0)
    if isinstance(game, MNKGame):
        m, n, k = game.m, game.n, game.k
        if (m, n, k) == (3, 3, 3):
            return KernelGame(KIND_TTT, 3, 3, 3, 0)  # on bitboards
        return KernelGame(KIND_MNK, m, n, k, int(m * n >= NEAR_MIN_CELLS))
    raise ValueError(f"no compiled kernels for game {game!r}")


def root_state(state: Any, game: KernelGame | None = None) -> np.ndarray:
    """The compiled position of a Python State, rebuilt from its move list."""
    g = game if game is not None else kernel_game(state.game)
    return new_state(g.kind, g.m, g.n, g.k, g.near, state.history())


def compiled_legal_actions(st: np.ndarray) -> list[int]:
    buf = np.empty(int(st[H_CELLS]), dtype=np.int32)
    count = legal(st, buf)
    return [int(a) for a in buf[:count]]


def compiled_outcome(st: np.ndarray) -> tuple[bool, int | None]:
    """(terminal, winner) of a compiled position; winner 0, 1 or None."""
    status = int(st[H_STATUS])
    if status == ONGOING:
        return False, None
    return True, (status - 1 if status in (1, 2) else None)

"""Compiled (numba, ``cache=True``) rules and search loops for every game of the family.

Positions are flat int32 arrays (``layout``); ``rules`` dispatches to 3x3 on bitboards
(``ttt``), the m,n,k kernels (``mnk``: 5x5, gomoku, any m,n in 3..19) or ultimate
tic-tac-toe (``uttt``); ``tree`` holds the MCTS and flat Monte Carlo loops and ``budget``
drives them against the clock. The kernels know games only by name and parameters and
positions only by their move list, so they never depend on the Python ``State`` internals.
Tests check on many random games that they agree with the Python rules.

numba caches each compiled function next to its source but does not notice edits to the
kernels it calls from other files; ``_drop_stale_cache`` below clears the whole package's
cache whenever any file of it changes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np


def _drop_stale_cache() -> None:
    """numba's cache checks only the source file of the function it caches, not the kernels
    it calls from other files: after any edit in this package, drop every cached kernel."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for source in sorted(here.glob("*.py")):
        digest.update(source.name.encode() + source.read_bytes())
    cache_dir = here / "__pycache__"
    stamp = cache_dir / "kernels.sha256"
    try:
        if stamp.read_text() == digest.hexdigest():
            return
    except OSError:
        pass
    try:
        cache_dir.mkdir(exist_ok=True)
        for cached in (*cache_dir.glob("*.nbi"), *cache_dir.glob("*.nbc")):
            cached.unlink(missing_ok=True)
        stamp.write_text(digest.hexdigest())
    except OSError:
        pass  # read-only install: numba falls back to compiling in memory


_drop_stale_cache()

from engine.kernels.layout import (  # noqa: E402 (after the cache check)
    H_CELLS,
    H_STATUS,
    KIND_MNK,
    KIND_TTT,
    KIND_UTTT,
    NEAR_MIN_CELLS,
    ONGOING,
    seed_rng,
)
from engine.kernels.rules import legal, max_moves, new_state  # noqa: E402

__all__ = [
    "KernelGame",
    "compiled_legal_actions",
    "compiled_outcome",
    "kernel_game",
    "root_state",
    "warm_up",
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
    """Map a Game (by ``name`` and ``params`` only) to its kernel parameters."""
    name = game.name
    if name == "tictactoe":
        return KernelGame(KIND_TTT, 3, 3, 3, 0)
    if name == "mnk":
        p = game.params
        m, n, k = int(p["m"]), int(p["n"]), int(p["k"])
        return KernelGame(KIND_MNK, m, n, k, int(m * n >= NEAR_MIN_CELLS))
    if name == "uttt":
        return KernelGame(KIND_UTTT, 0, 0, 0, 0)
    raise ValueError(f"no compiled kernels for game {name!r}")


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


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel with the exact argument types the
    searches use, so no JIT happens on the request path. Workers call this at start."""
    from engine.flat import flat_kernel_run
    from engine.mcts import mcts_kernel_run

    games = (
        KernelGame(KIND_TTT, 3, 3, 3, 0),
        KernelGame(KIND_MNK, 5, 5, 4, 0),
        KernelGame(KIND_UTTT, 0, 0, 0, 0),
    )
    for game in games:
        st = new_state(game.kind, game.m, game.n, game.k, game.near, [0])
        compiled_legal_actions(st)
        mcts_kernel_run(st, game, iterations=8, seed=1, compact_after=True)
        flat_kernel_run(st, game, iterations=8, seed=1)
    seed_rng(0)

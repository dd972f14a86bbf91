"""Board symmetries of a position, to search one move of each class of equivalent moves.

Every game of the family is played on a grid (m x n for m,n,k; 9 x 9 for ultimate
tic-tac-toe, where a symmetry of the big grid maps small boards and their cells alike), and
its rules are invariant under the grid's dihedral symmetries (8 on a square, 4 on a
rectangle). A symmetry that maps a position to itself maps its moves to equivalent moves
(same value, mirrored continuations), so a search needs only one move of each orbit: the
move-group reduction of symmetric positions (Childs, Brodeur & Kocsis 2008, transpositions
and move groups in MCTS; Schiffel 2010, symmetry detection in general game playing).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["grid_permutations", "representative_moves"]


def _grid_of(kind_uttt: bool, m: int, n: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Grid size and each action's (row, col)."""
    if kind_uttt:
        actions = np.arange(81)
        board, cell = actions // 9, actions % 9
        rows = 3 * (board // 3) + cell // 3
        cols = 3 * (board % 3) + cell % 3
        return 9, 9, rows, cols
    actions = np.arange(m * n)
    return m, n, actions // n, actions % n


@lru_cache(maxsize=32)
def grid_permutations(kind_uttt: bool, m: int, n: int) -> np.ndarray:
    """One row per symmetry of the grid (the identity first): row[a] is the image of action a."""
    rows_n, cols_n, r, c = _grid_of(kind_uttt, m, n)
    last_r, last_c = rows_n - 1, cols_n - 1
    images = [(r, c), (last_r - r, last_c - c), (last_r - r, c), (r, last_c - c)]
    if rows_n == cols_n:  # the quarter turns and the diagonal reflections of a square
        images += [(c, last_r - r), (last_c - c, r), (c, r), (last_c - c, last_r - r)]
    if kind_uttt:
        back = np.empty((9, 9), dtype=np.int64)
        back[r, c] = np.arange(81)
        perms = [back[ir, ic] for ir, ic in images]
    else:
        perms = [ir * cols_n + ic for ir, ic in images]
    out = np.array(perms, dtype=np.int64)
    out.setflags(write=False)
    return out


def representative_moves(
    kind_uttt: bool, m: int, n: int, history: list[int], forced_board: int = -1
) -> np.ndarray | None:
    """For the position after ``history``: an int8 mask over actions, 1 for the smallest
    action of each class of moves that some symmetry of the position maps onto each other;
    None when the position has no symmetry but the identity. ``forced_board`` (uttt: the
    small board the mover must play in, -1 for any) must be kept by the symmetry too."""
    perms = grid_permutations(kind_uttt, m, n)
    owner = np.zeros(perms.shape[1], dtype=np.int8)
    for ply, action in enumerate(history):
        owner[action] = 1 + (ply & 1)
    keeps = owner[perms] == owner  # [g, a]: the image of a holds what a holds
    fixes = keeps.all(axis=1)
    if kind_uttt and forced_board >= 0:
        # The small board of an action's image is the image of its small board.
        fixes &= perms[:, 9 * forced_board + 4] // 9 == forced_board
    if fixes.sum() <= 1:
        return None
    canonical = perms[fixes].min(axis=0)
    return (canonical == np.arange(perms.shape[1])).astype(np.int8)

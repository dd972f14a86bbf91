"""Line shapes of five-in-a-row (freestyle: five or more wins), for the pattern evaluation of
the m,n,k search (engine/kernels/alphabeta_mnk.py) on boards with k = 5.

As in the strong Gomocup engines (Rapfi, Embryo, Yixin), each empty cell and direction has a
shape for each player: what a stone of that player on the cell makes along that line, read
from the four cells on each side. The names follow the Gomoku literature: a five; an open
four (two cells that make five: ``_XXXX_``); a four (one such cell); an open three (one move
makes an open four); a three (one move makes a four); open and closed twos likewise; a one
(a five is still possible through the cell). Only the fives through the cell count, so the
nine cells decide the shape exactly.

The table is indexed by the line's key: two bits per neighbour (0 empty, 1 X, 2 O, 3 off the
board), offsets -4..-1 in slots 0..3 and +1..+4 in slots 4..7 (``slot``). Pure Python and
numpy, built once per process (about 6,561 lines analysed).
"""

from __future__ import annotations

from functools import cache

import numpy as np

NONE, ONE, TWO, OPEN_TWO, THREE, OPEN_THREE, FOUR, OPEN_FOUR, FIVE = range(9)
SHAPES = 9
HALF = 4  # cells read on each side
SLOTS = 2 * HALF
EMPTY, OWN, BLOCKED = 0, 1, 2  # a line seen by one player; BLOCKED = opponent or edge
WALL = 3  # the key's code for a cell off the board

_PROMOTED = {OPEN_FOUR: OPEN_THREE, FOUR: THREE, OPEN_THREE: OPEN_TWO, THREE: TWO}


def slot(offset: int) -> int:
    """The key's slot of the neighbour at ``offset`` (-4..-1, 1..4)."""
    return offset + HALF if offset < 0 else offset + HALF - 1


def _five_windows(line: tuple[int, ...]) -> list[range]:
    """The windows of five cells through the centre with no blocked cell."""
    return [
        range(start, start + 5)
        for start in range(HALF + 1)
        if all(line[i] != BLOCKED for i in range(start, start + 5))
    ]


@cache
def line_shape(line: tuple[int, ...]) -> int:
    """The shape of a line of nine cells (EMPTY, OWN, BLOCKED) whose centre holds OWN."""
    windows = _five_windows(line)
    if not windows:
        return NONE
    wins = set()
    for window in windows:
        empty = [i for i in window if line[i] == EMPTY]
        if not empty:
            return FIVE
        if len(empty) == 1:
            wins.add(empty[0])
    if len(wins) >= 2:
        return OPEN_FOUR
    if wins:
        return FOUR
    best = ONE
    for i in {i for window in windows for i in window if line[i] == EMPTY}:
        after = line_shape(line[:i] + (OWN,) + line[i + 1 :])
        best = max(best, _PROMOTED.get(after, ONE))
    return best


@cache
def shape_tables() -> np.ndarray:
    """int8[2, 4**8]: the shape for X (row 0) and O (row 1) of every line key (built once)."""
    keys = np.arange(4**SLOTS, dtype=np.int64)
    codes = [(keys >> (2 * s)) & 3 for s in range(SLOTS)]
    tables = np.zeros((2, keys.size), dtype=np.int8)
    shapes = np.zeros(3**SLOTS, dtype=np.int8)
    for code in range(3**SLOTS):
        cells = [(code // 3**s) % 3 for s in range(SLOTS)]
        shapes[code] = line_shape((*cells[:HALF], OWN, *cells[HALF:]))
    for player in (0, 1):
        index = np.zeros(keys.size, dtype=np.int64)
        for s in range(SLOTS):
            seen = np.where(
                codes[s] == EMPTY, EMPTY, np.where(codes[s] == player + 1, OWN, BLOCKED)
            )
            index += seen * 3**s
        tables[player] = shapes[index]
    return tables

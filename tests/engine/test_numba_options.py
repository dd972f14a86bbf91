"""The alpha-beta kernels and the MCTS loop are compiled with numba's private option
``_nrt=False`` (no reference counting: half of the gomoku search's CPU time went to it, and
the uttt MCTS runs ~9% more iterations without it). A private option may change in any
release: this fails when numba stops honouring it (pyproject pins numba's version beside the
reason)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from engine.kernels.layout import NO_NRT_OPTIONS
from engine.kernels.tree import mcts_run

OPTIONS = {**NO_NRT_OPTIONS, "cache": False}  # nothing written next to the tests


def test_a_kernel_without_reference_counting_runs() -> None:
    @njit(**OPTIONS)
    def total(cells):  # noqa: ANN001, ANN202
        s = 0
        for i in range(cells.shape[0]):
            s += cells[i]
        return s

    assert total(np.arange(10, dtype=np.int64)) == 45
    assert total.targetoptions["_nrt"] is False


def test_the_option_still_takes_the_runtime_away() -> None:
    """Allocating needs numba's runtime: refused when the option works (if numba ignored or
    renamed it, this would compile)."""

    @njit(**OPTIONS)
    def allocate(n):  # noqa: ANN001, ANN202
        return np.zeros(n)

    # numba's wording without its runtime: an array may only come from the arguments.
    with pytest.raises(TypingError, match="returning of array passed into the function"):
        allocate(3)


def test_the_mcts_loop_counts_no_references() -> None:
    assert mcts_run.targetoptions["_nrt"] is False

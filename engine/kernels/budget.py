"""Drive a compiled loop in chunks of iterations, reading the injected clock between chunks.

numba code cannot call the clock cheaply, so Python sizes each chunk from the measured rate to
end close to the deadline: a chunk lasts at most ``MAX_CHUNK_SECONDS`` and at most 90% of the
time left, so a search overruns its deadline by a fraction of a millisecond. A step that did
other work than iterating (the MCTS growing its node records) returns early, so that the clock
is read again before more iterations run.
"""

from __future__ import annotations

from collections.abc import Callable

MAX_CHUNK_SECONDS = 0.002
FIRST_CHUNK = 16  # iterations, to measure the rate
ITERATION_CHUNK = 8192  # chunk size when only an iteration budget is given
MIN_REMAINING = 20e-6  # stop when less time is left than this
DEFAULT_SECONDS = 0.1  # the engine's default budget, if a caller gives none


def run_chunked(
    step: Callable[[int], tuple[int, bool]],
    *,
    deadline: float | None,
    iterations: int | None,
    clock: Callable[[], float],
) -> int:
    """Call ``step(n)`` until the deadline or the iteration budget is reached (100 ms when
    neither is given). ``step(n)`` runs up to n iterations and returns (how many ran, whether
    the search is finished); it may stop short of n without being finished, after work that
    took time of its own. Always runs at least one iteration. Returns the total run."""
    if deadline is None and iterations is None:
        deadline = clock() + DEFAULT_SECONDS
    done = 0
    rate = 0.0  # iterations per second, from the last chunk
    while True:
        if iterations is not None:
            n = iterations - done
            if n <= 0:
                break
        else:
            n = 1 << 62
        if deadline is None:
            n = min(n, ITERATION_CHUNK)
        else:
            remaining = deadline - clock()
            if done > 0 and remaining < MIN_REMAINING:
                break
            if rate <= 0.0:
                n = min(n, FIRST_CHUNK)
            else:
                budget = min(MAX_CHUNK_SECONDS, 0.9 * remaining)
                n = min(n, max(1, int(rate * budget)))
        start = clock()
        ran, finished = step(n)
        elapsed = clock() - start
        done += ran
        if finished:
            break
        if ran < n:
            continue  # the step did other work: the clock is read again, the rate kept
        if elapsed > 0.0:
            rate = ran / elapsed
        else:
            rate = max(rate * 2.0, float(ran) * 1e4)
    return done

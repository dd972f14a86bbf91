"""The rate-limited log: a burst of lines of each kind, then one per period, and the
next line written says how many were held back."""

from __future__ import annotations

import logging

import pytest

from server.logs import MAX_KINDS, RateLimitedLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_storm_writes_a_burst_then_one_line_a_period(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    storms = RateLimitedLog(logging.getLogger("storm"), period_s=10.0, burst=3, clock=clock)
    with caplog.at_level(logging.WARNING, "storm"):
        written = [storms.warning("refused", "refusing %s", n) for n in range(10_000)]
        assert written.count(True) == 3
        # Another kind has its own bucket.
        assert storms.warning("too slow", "dropping a client")
        clock.now += 10.0
        assert storms.warning("refused", "refusing %s", "later")
        assert not storms.warning("refused", "refusing %s", "again")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refusing 0",
        "refusing 1",
        "refusing 2",
        "dropping a client",
        "refusing later (and 9997 more like it, not logged)",
    ]


def test_kinds_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    storms = RateLimitedLog(logging.getLogger("storm"), burst=1, clock=Clock())
    with caplog.at_level(logging.WARNING, "storm"):
        for n in range(MAX_KINDS * 3):
            storms.warning(f"kind {n}", "line %s", n)
    assert len(storms._kinds) == MAX_KINDS
    assert len(caplog.records) == MAX_KINDS  # the overflow shares one bucket

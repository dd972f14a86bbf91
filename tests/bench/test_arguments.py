"""bench/arguments.py, the bench tools' argparse types, and the tools refusing values out of
range in one line before they start anything."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from arguments import (  # noqa: E402
    count,
    iterations,
    non_negative_float,
    positive_float,
    positive_int,
    time_budget,
)

from engine.options import MAX_BUDGET_ITERATIONS, MAX_BUDGET_MS  # noqa: E402

MOST = str(MAX_BUDGET_ITERATIONS)
TOO_MANY = str(MAX_BUDGET_ITERATIONS + 1)
TOO_MANY_SAID = f"a whole number from 1 to {MOST}, not '{TOO_MANY}'"


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        (positive_int, {"1": 1, "30": 30}, ["0", "-2", "1.5", "x", ""]),
        (count, {"0": 0, "7": 7}, ["-1", "2.0", "x"]),
        (positive_float, {"0.5": 0.5, "10": 10.0}, ["0", "-1", "nan", "inf", "x"]),
        (non_negative_float, {"0": 0.0, "2.5": 2.5}, ["-0.1", "nan", "-inf", "x"]),
        # the engine's most (engine.Budget refuses more, with a traceback from a tool)
        (iterations, {"1": 1, MOST: MAX_BUDGET_ITERATIONS}, ["0", TOO_MANY, "1.5", "x"]),
        (time_budget, {"0.5": 0.5, "3600000": MAX_BUDGET_MS}, ["0", "3600001", "nan", "x"]),
    ],
)
def test_each_type_takes_its_range_and_refuses_the_rest(
    kind: object, good: dict[str, float], bad: list[str]
) -> None:
    assert callable(kind)
    for text, value in good.items():
        assert kind(text) == value
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError, match=repr(text)):
            kind(text)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["load.py", "throughput", "--games", "0"], "--games or --ai-games: at least one game"),
        (["load.py", "kill", "--kills", "-1"], "argument --kills: a whole number of at least 0"),
        (["load.py", "soak", "--duration", "4", "--warmup", "5"], "--warmup: shorter than"),
        (["mcts_speed.py", "--runs", "0"], "argument --runs: a whole number of at least 1"),
        (["gomoku_nodes.py", "--options", "foo=1"], "--options: unknown option 'foo'"),
        (["attack.py", "--seconds", "-1"], "argument --seconds: a number above 0, not '-1'"),
        (["codingame_match.py", "--a", "x", "--b", "y", "--games", "0"], "argument --games"),
        (["floor.py", "--duration", "0"], "argument --duration: a number above 0, not '0'"),
        (["queue_overhead.py", "--searches", "0"], "argument --searches: a whole number"),
        (["mcts_ab.py", "HEAD", "--iterations", TOO_MANY], f"--iterations: {TOO_MANY_SAID}"),
        (["gomoku_nodes.py", "--nodes", TOO_MANY], f"argument --nodes: {TOO_MANY_SAID}"),
        (["mcts_speed.py", "--budget-ms", "3600001"], "--budget-ms: a number above 0 and at most"),
        (["mcts_ab.py", "HEAD", "--time-ms", "3600001"], "--time-ms: a number above 0 and at most"),
        (["queue_overhead.py", "--budget-ms", "1e9"], "--budget-ms: a number above 0 and at most"),
        (
            ["fit_gomoku_windows.py", "generate", "--nodes", TOO_MANY, "--out", os.devnull],
            f"argument --nodes: {TOO_MANY_SAID}",
        ),
    ],
)
def test_a_tool_refuses_a_value_out_of_range_in_one_line(args: list[str], said: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert said in done.stderr.splitlines()[-1], done.stderr

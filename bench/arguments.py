"""argparse types of the bench tools' counts and durations: a value out of range is a
one-line usage error (exit 2), not a run that measures nothing or a traceback."""

from __future__ import annotations

import argparse
import ast
import functools
import math
from pathlib import Path


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    return _int(text, 1)


def count(text: str) -> int:
    """A whole number of at least 0."""
    return _int(text, 0)


def iterations(text: str) -> int:
    """A search's iteration (or node) budget: a whole number from 1 to the engine's most,
    engine.options.MAX_BUDGET_ITERATIONS (engine.Budget refuses more)."""
    return _int(text, 1, int(_engine_constant("MAX_BUDGET_ITERATIONS")))


def time_budget(text: str) -> float:
    """A search's time budget in milliseconds: above 0, at most the engine's most,
    engine.options.MAX_BUDGET_MS (engine.Budget refuses more)."""
    value = _float(text, low_open=True)
    most = _engine_constant("MAX_BUDGET_MS")
    if value > most:
        raise argparse.ArgumentTypeError(f"a number above 0 and at most {most:g}, not {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0."""
    return _float(text, low_open=True)


def non_negative_float(text: str) -> float:
    """A finite number of at least 0."""
    return _float(text, low_open=False)


def _int(text: str, low: int, high: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if high is not None and not low <= value <= high:
        raise argparse.ArgumentTypeError(f"a whole number from {low} to {high}, not {text!r}")
    if value < low:
        raise argparse.ArgumentTypeError(f"a whole number of at least {low}, not {text!r}")
    return value


@functools.cache
def _engine_constant(name: str) -> float:
    """A constant of this tree's engine/options.py, read from its source: importing the
    engine here would choose the build a tool imports before the tool does (gomoku_nodes.py
    --tree imports another build's, mcts_ab.py copies builds under names of their own)."""
    source = Path(__file__).resolve().parent.parent / "engine" / "options.py"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in node.targets
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, int | float):
                return value
    raise LookupError(f"{source} assigns no number to {name}")


def _float(text: str, *, low_open: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (low_open and value == 0):
        wanted = "above 0" if low_open else "of at least 0"
        raise argparse.ArgumentTypeError(f"a number {wanted}, not {text!r}")
    return value

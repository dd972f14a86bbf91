"""argparse types of the bench tools' counts and durations: a value out of range is a
one-line usage error (exit 2), not a run that measures nothing or a traceback."""

from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    return _int(text, 1)


def count(text: str) -> int:
    """A whole number of at least 0."""
    return _int(text, 0)


def positive_float(text: str) -> float:
    """A finite number above 0."""
    return _float(text, low_open=True)


def non_negative_float(text: str) -> float:
    """A finite number of at least 0."""
    return _float(text, low_open=False)


def _int(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise argparse.ArgumentTypeError(f"a whole number of at least {low}, not {text!r}")
    return value


def _float(text: str, *, low_open: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (low_open and value == 0):
        wanted = "above 0" if low_open else "of at least 0"
        raise argparse.ArgumentTypeError(f"a number {wanted}, not {text!r}")
    return value

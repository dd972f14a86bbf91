"""The typed inputs of a search: its ``Budget`` and one options dataclass per algorithm.

A misspelt or unknown option is an error that names the options there are (python-chess's
``Limit`` does the same for its limits), never a silent default. Options arrive either as
the dataclass itself or, at the edge (the wire, a command line), as a mapping that
``parse_options`` checks field by field.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar, get_type_hints

from engine.errors import EngineError

__all__ = [
    "DEFAULT_BUDGET",
    "AlphaBetaOptions",
    "Budget",
    "MCTSOptions",
    "MinimaxOptions",
    "NoOptions",
    "Options",
    "UCTOptions",
    "parse_options",
]

# UCB1's constant for rewards in [0, 1] (Auer, Cesa-Bianchi & Fischer 2002): plain uct.
UCB1_C = math.sqrt(2.0)
# mcts: tuned by arena matches against uct at 50 ms on uttt (rewards in [0, 1], draws 0.5):
# score 0.55 with sqrt(2), 0.655 with 1.0, 0.71 with 0.7 (bench/README.md).
MCTS_C = 0.7

MAX_EXPAND = 1_000  # visits before a leaf is expanded (option expand): more starves the tree
MAX_VALUE_SCALE = 10.0  # option value_scale: past this the tanh is a sign
MAX_BUDGET_MS = 3_600_000.0  # an hour: longer is a mistake, not a budget
# Iterations (playouts or nodes) a search may be given: about the hour above at gomoku's
# slowest measured rate (mcts, 40,000 a second), and a tenth of what mcts's int32 node records
# hold (a node's wins are half-points, 2 a visit: they overflow past about 10^9 visits, which
# a reused tree adds up to over several moves).
MAX_BUDGET_ITERATIONS = 100_000_000


@dataclass(frozen=True, slots=True)
class Budget:
    """How long a search may run: a time in milliseconds, a number of iterations (playouts
    for Monte Carlo searches, nodes for tree searches), or both (whichever ends first).
    An iteration budget alone has no deadline: the search is a function of its seed."""

    time_ms: float | None = None
    iterations: int | None = None

    def __post_init__(self) -> None:
        ms, iterations = self.time_ms, self.iterations
        if ms is None and iterations is None:
            raise EngineError("a budget needs a time (time_ms) or a number of iterations")
        if ms is not None and (
            isinstance(ms, bool)
            or not isinstance(ms, int | float)
            or not 0 < ms <= MAX_BUDGET_MS
            or math.isnan(ms)
        ):
            raise EngineError(f"a time budget is 0 < ms <= {MAX_BUDGET_MS:g}, not {ms!r}")
        if iterations is not None and (
            isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1
        ):
            raise EngineError(f"an iteration budget is a positive integer, not {iterations!r}")
        if iterations is not None and iterations > MAX_BUDGET_ITERATIONS:
            raise EngineError(
                f"an iteration budget is 1..{MAX_BUDGET_ITERATIONS}, not {iterations!r}"
            )

    @classmethod
    def parse(cls, text: str) -> Budget:
        """'100ms' or '100' (milliseconds), '0.5s' (seconds), '5000it' (iterations)."""
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(ms|s|it)?\s*", text, re.I)
        if match is not None:
            number, unit = match.group(1), (match.group(2) or "ms").lower()
            if unit == "it" and number.isdigit():
                return cls(iterations=int(number))
            if unit != "it":
                return cls(time_ms=float(number) * (1000.0 if unit == "s" else 1.0))
        raise EngineError(
            f"bad budget {text!r}: milliseconds (100ms), seconds (0.5s) or iterations (5000it)"
        )

    def __str__(self) -> str:
        parts = []
        if self.time_ms is not None:
            parts.append(f"{self.time_ms:g}ms")
        if self.iterations is not None:
            parts.append(f"{self.iterations}it")
        return "+".join(parts)


DEFAULT_BUDGET = Budget(time_ms=100.0)


@dataclass(frozen=True, slots=True)
class Options:
    """Base of the options dataclasses; a field's type is checked by ``parse_options``."""

    def __post_init__(self) -> None:
        _check_types(self)


@dataclass(frozen=True, slots=True)
class NoOptions(Options):
    """An algorithm without options (random, flat, perfect)."""


@dataclass(frozen=True, slots=True)
class MCTSOptions(Options):
    """mcts (engine/mcts.py): UCB1's exploration constant and the enhancements, each of which
    can be switched off on its own; ``verify`` is the share of the budget spent checking the
    chosen move with alpha-beta (None: 0.15 on m,n,k boards under 50 cells, else 0);
    ``expand`` is the number of visits a leaf gets before its children are added, ``prior``
    the virtual visits a new child gets from its heuristic value (progressive bias; 0: off),
    both None for the game's default (engine/mcts.py); ``capture_playouts`` makes uttt
    playouts take the small board they are sent to when they can (None: the game's default,
    on for uttt with ``avoid_playouts`` and without ``anti_decisive_playouts``);
    ``avoid_playouts`` makes them draw a move again, once, when it sends the opponent to a
    board it can capture at once or to a closed one (None: the game's default, on for uttt);
    ``minimax`` the weight of implicit minimax backups of a heuristic value in selection (0:
    off; None: the game's default), ``value_scale`` the scale of that heuristic's tanh (None:
    the default)."""

    c: float = MCTS_C
    solver: bool = True
    decisive: bool = True
    reuse: bool = True
    symmetry: bool = True
    near_playouts: bool = True
    anti_decisive_playouts: bool = False
    capture_playouts: bool | None = None
    avoid_playouts: bool | None = None
    prior: int | None = None
    verify: float | None = None
    expand: int | None = None
    minimax: float | None = None
    value_scale: float | None = None

    def __post_init__(self) -> None:
        _check_types(self)
        _check_c(self.c)
        if self.value_scale is not None and not 0.0 < self.value_scale <= MAX_VALUE_SCALE:
            raise EngineError(
                f"option value_scale is in (0, {MAX_VALUE_SCALE:g}], not {self.value_scale}"
            )
        if self.avoid_playouts and (not self.decisive or self.anti_decisive_playouts):
            # uttt_playout applies the redraw to its own decisive-move playouts only
            raise EngineError(
                "option avoid_playouts works with decisive playouts, not with"
                " decisive=false or anti_decisive_playouts"
            )
        if self.minimax is not None and not 0.0 <= self.minimax <= 1.0:
            raise EngineError(f"option minimax is a weight in [0, 1], not {self.minimax}")
        if self.prior is not None and not 0 <= self.prior <= MAX_EXPAND:
            raise EngineError(f"option prior is 0..{MAX_EXPAND} virtual visits, not {self.prior}")
        if self.expand is not None and not 1 <= self.expand <= MAX_EXPAND:
            raise EngineError(f"option expand is 1..{MAX_EXPAND} visits, not {self.expand}")
        if self.verify is not None and not 0.0 <= self.verify < 1.0:
            raise EngineError(
                f"option verify is a share of the budget in [0, 1), not {self.verify}"
            )


@dataclass(frozen=True, slots=True)
class UCTOptions(Options):
    """uct: plain UCT, the baseline; only UCB1's exploration constant."""

    c: float = UCB1_C

    def __post_init__(self) -> None:
        _check_types(self)
        _check_c(self.c)


@dataclass(frozen=True, slots=True)
class MinimaxOptions(Options):
    """minimax: how deep to search at most (None: to the end of the game)."""

    max_depth: int | None = None

    def __post_init__(self) -> None:
        _check_types(self)
        _check_depth(self.max_depth)


@dataclass(frozen=True, slots=True)
class AlphaBetaOptions(Options):
    """alphabeta: how deep to search at most, the compiled kernels or the Python reference
    searcher (``compiled=False``), and on m,n,k boards with k >= 5 the threat-space move
    generation (``threats``: answer the opponent's open threes; False plays as the search
    did before it, for matches against that one); on k = 5 boards the evaluation and move
    ordering by line shapes (``patterns``; off: by counts of stones in windows, which
    measured stronger, bench/README.md) and on k >= 5 boards a VCT at the root (``vct``:
    victory by continuous fours and open threes) and a defence against the opponent's
    (``defence``: the best root move after which the opponent has no VCT is played); with
    ``threats``, the moves searched below the root (``width``: the best by static score)."""

    max_depth: int | None = None
    compiled: bool = True
    threats: bool = True
    patterns: bool = False
    vct: bool = True
    defence: bool = True
    width: int = 12

    def __post_init__(self) -> None:
        _check_types(self)
        _check_depth(self.max_depth)
        if self.width < 1:
            raise EngineError(f"option width must be at least 1, not {self.width!r}")


OptionsT = TypeVar("OptionsT", bound=Options)


def parse_options(
    kind: type[OptionsT], given: OptionsT | Mapping[str, Any] | None, algorithm: str
) -> OptionsT:
    """``given`` as a ``kind``: the dataclass itself, or a mapping from the wire or a command
    line whose every key must be one of ``kind``'s fields (EngineError naming them if not)."""
    if given is None:
        return kind()
    if isinstance(given, kind):
        return given
    if isinstance(given, Options):
        raise EngineError(f"{algorithm} takes {kind.__name__}, not {type(given).__name__}")
    if not isinstance(given, Mapping):
        raise EngineError(f"options for {algorithm} are a mapping of names to values")
    names = [f.name for f in fields(kind)]
    for key in given:
        if key not in names:
            raise EngineError(_unknown_option(str(key), algorithm, names))
    return kind(**given)


def _unknown_option(key: str, algorithm: str, names: list[str]) -> str:
    if not names:
        return f"{algorithm} takes no options, not {key!r}"
    close = difflib.get_close_matches(key, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown option {key!r} for {algorithm}{hint}: it takes {', '.join(names)}"


_HINTS: dict[type, dict[str, Any]] = {}


def _check_types(options: Options) -> None:
    """Each field holds its declared type: bool, int, float (an int is fine, made a float)
    or None where allowed. A bool is not a number here, and a number is not a bool. An int
    left in a float field reached the kernels as an int: numba compiled them again for it,
    inside a timed move (value_scale=1: 4.7 s past a 10 ms budget)."""
    hints = _HINTS.get(type(options))
    if hints is None:
        hints = _HINTS[type(options)] = get_type_hints(type(options))
    for f in fields(options):
        value = getattr(options, f.name)
        allowed = getattr(hints[f.name], "__args__", (hints[f.name],))
        if value is None and type(None) in allowed:
            continue
        if isinstance(value, bool):
            ok = bool in allowed
        elif isinstance(value, int):
            ok = int in allowed or float in allowed
            if ok and int not in allowed:
                object.__setattr__(options, f.name, float(value))
        elif isinstance(value, float):
            ok = float in allowed and math.isfinite(value)
        else:
            ok = False
        if not ok:
            names = " or ".join("none" if t is type(None) else t.__name__ for t in allowed)
            raise EngineError(f"option {f.name} must be {names}, not {value!r}")


def _check_c(c: float) -> None:
    if c < 0:
        raise EngineError(f"option c (UCB1 exploration) must be a number >= 0, not {c!r}")


def _check_depth(depth: int | None) -> None:
    if depth is not None and depth < 1:
        raise EngineError(f"option max_depth must be at least 1, not {depth!r}")

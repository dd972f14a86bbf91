"""Base classes for every game: the OpenSpiel-style Game/State interface.

A ``Game`` is an immutable description (name and parameters); a ``State`` is a
position plus its history. Search code sees only this interface (and the
optional fast paths a game offers); the server validates moves with
``apply_checked`` and searches apply them unchecked.
"""

from __future__ import annotations

import numbers
import random
from typing import Any

from engine.errors import IllegalMove
from engine.notation import Grid

TERMINAL = -1  # current_player() once the game is over (OpenSpiel's kTerminalPlayerId)


class Game:
    """A game of the family: a name, integer parameters and a way to start."""

    name: str = ""
    grid: Grid  # its cells as drawn and named (engine/notation.py)

    @property
    def params(self) -> dict[str, int]:
        return {}

    def spec(self) -> tuple[str, dict[str, int]]:
        """Small and picklable: ``make_game(*spec[:1], **spec[1])`` rebuilds this game."""
        return self.name, dict(self.params)

    def num_distinct_actions(self) -> int:
        raise NotImplementedError

    def max_game_length(self) -> int:
        raise NotImplementedError

    def new_initial_state(self) -> State:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Game):
            return NotImplemented
        return self.spec() == other.spec()

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.params.items()))))

    def __repr__(self) -> str:
        params = "".join(f", {k}={v}" for k, v in self.params.items())
        return f"{type(self).__name__}({self.name!r}{params})"


class State:
    """A position: whose turn, what is legal, how it ended. Subclasses hold the board."""

    game: Game

    # --- supplied by subclasses -------------------------------------------------
    def current_player(self) -> int:
        raise NotImplementedError

    def legal_actions(self) -> list[int]:
        raise NotImplementedError

    def apply_action(self, action: int) -> None:
        """Play ``action`` without checking it (the hot path used by searches)."""
        raise NotImplementedError

    def illegal_reason(self, action: int) -> str | None:
        """Why ``action`` may not be played here, or None if it may."""
        raise NotImplementedError

    def clone(self) -> State:
        raise NotImplementedError

    def winner(self) -> int | None:
        raise NotImplementedError

    def history(self) -> list[int]:
        raise NotImplementedError

    def action_to_string(self, action: int) -> str:
        raise NotImplementedError

    def parse_action(self, text: str) -> int:
        raise NotImplementedError

    def render(self) -> str:
        raise NotImplementedError

    def winning_line(self) -> list[int] | None:
        raise NotImplementedError

    # --- shared behaviour -------------------------------------------------------
    def is_terminal(self) -> bool:
        return self.current_player() == TERMINAL

    def ply(self) -> int:
        return len(self.history())

    def returns(self) -> list[float]:
        """[+1, -1], [-1, +1] or [0, 0]; zeros while the game goes on."""
        winner = self.winner()
        if winner is None:
            return [0.0, 0.0]
        return [1.0, -1.0] if winner == 0 else [-1.0, 1.0]

    def apply_checked(self, action: Any) -> None:
        """Play ``action`` after checking it; raises ``IllegalMove`` naming the problem."""
        if type(action) is not int:  # (the server's case, without the ABC check below)
            if isinstance(action, bool) or not isinstance(action, numbers.Integral):
                raise IllegalMove(f"a move is an integer action, not {action!r}")
            action = int(action)  # numpy integers too
        reason = self.illegal_reason(action)
        if reason is not None:
            raise IllegalMove(reason)
        self.apply_action(action)

    def random_action(self, rng: random.Random) -> int:
        return rng.choice(self.legal_actions())

    def __str__(self) -> str:
        return self.render()


class RecordedState(State):
    """A state that keeps its moves, its winner and its winning line, and a Zobrist key
    (Zobrist 1970) of its cells: what the m,n,k and ultimate tic-tac-toe states share. X
    moves at even plies, O at odd ones."""

    _history: list[int]
    _winner: int | None
    _over: bool
    _line: list[int] | None
    zobrist: int

    def _begin_record(self) -> None:
        """No move yet (a subclass's ``__init__``)."""
        self._history = []
        self._winner = None
        self._over = False
        self._line = None
        self.zobrist = 0

    def _copy_record(self, other: RecordedState) -> None:
        """Give ``other`` (a new copy, from a subclass's ``clone``) this state's record."""
        other._history = self._history.copy()
        other._winner = self._winner
        other._over = self._over
        other._line = None if self._line is None else self._line.copy()
        other.zobrist = self.zobrist

    def current_player(self) -> int:
        return TERMINAL if self._over else len(self._history) & 1

    def is_terminal(self) -> bool:
        return self._over

    def winner(self) -> int | None:
        return self._winner

    def history(self) -> list[int]:
        return self._history.copy()

    def ply(self) -> int:
        return len(self._history)

    def winning_line(self) -> list[int] | None:
        """The actions of the winning line (in ultimate tic-tac-toe, the cells of the won
        small boards' lines), or None."""
        return None if self._line is None else self._line.copy()


def check_int_param(name: str, value: Any, low: int, high: int) -> int:
    """An integer parameter in [low, high], or EngineError with a clear message."""
    from engine.errors import EngineError

    if isinstance(value, bool) or not isinstance(value, int):
        raise EngineError(f"parameter {name} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise EngineError(f"parameter {name}={value} is out of range {low}..{high}")
    return value


def winning_actions(state: State) -> list[int]:
    """The moves that win on the spot for the player to move (decisive moves)."""
    fast = getattr(state, "wins_with", None)
    player = state.current_player()
    if fast is not None:
        return [a for a in state.legal_actions() if fast(a, player)]
    wins = []
    for action in state.legal_actions():
        child = state.clone()
        child.apply_action(action)
        if child.winner() == player:
            wins.append(action)
    return wins


def safe_actions(state: State) -> list[int]:
    """The moves after which the opponent has no immediate win (anti-decisive moves,
    Teytaud & Teytaud 2010). Empty when every move loses at once."""
    safe = []
    for action in state.legal_actions():
        child = state.clone()
        child.apply_action(action)
        if child.is_terminal() or not winning_actions(child):
            safe.append(action)
    return safe

"""Time management: how long one move's search may take under a time limit (pure).

One rule for every player of ours that plays against a clock: the Gomocup brain (INFO
timeout_turn, timeout_match, time_left: engine/piskvork.py) and `noughts bot` in a game with
a clock (client/bot.py: a fixed time per move is a turn's limit, Fischer a match's time left
plus its increment).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TimeControl"]


@dataclass(slots=True)
class TimeControl:
    """The limits a move is played under (milliseconds): the Piskvork protocol's defaults
    until told otherwise. ``budget_ms`` is one move's search time."""

    timeout_turn: int = 30_000  # per move; 0 = play as fast as possible
    timeout_match: int = 0  # per game; 0 = no limit
    time_left: int | None = None  # left of timeout_match, sent before each move
    increment_ms: int = 0  # added to time_left after each move (Fischer)
    overhead_ms: float = 0.0  # more margin: the round trip of a player over the network

    # A move spends at most 1/N of what is left of the match (plus the increment, which comes
    # back after the move), N the moves it expects still to play: MOVES_AHEAD on the empty
    # board, one fewer every STONES_PER_MOVE stones, never fewer than MIN_MOVES_AHEAD (so the
    # budget shrinks geometrically and the clock never runs out, and the middle game, where
    # games are decided, gets more than the opening); within a turn less its safety margin:
    # MARGIN_FRACTION of the turn plus MARGIN_MS for the pipes, the process and Python's part
    # of the move (plus ``overhead_ms``).
    MOVES_AHEAD = 20
    STONES_PER_MOVE = 4
    MIN_MOVES_AHEAD = 8
    MARGIN_FRACTION = 0.1
    MARGIN_MS = 50.0
    MIN_MS = 5.0

    def moves_ahead(self, stones: int) -> int:
        """The brain's moves expected still to play with ``stones`` on the board."""
        return max(self.MIN_MOVES_AHEAD, self.MOVES_AHEAD - stones // self.STONES_PER_MOVE)

    def budget_ms(self, stones: int = 0) -> float:
        margin = self.MARGIN_MS + self.overhead_ms
        turn = float(self.timeout_turn) if self.timeout_turn > 0 else 0.0
        budget = turn * (1.0 - self.MARGIN_FRACTION) - margin
        if self.timeout_match > 0 and self.time_left is not None:
            left = self.time_left
            share = min(left / self.moves_ahead(stones) + self.increment_ms, left) - margin
            budget = min(budget, share) if turn > 0 else share
        return max(self.MIN_MS, budget)

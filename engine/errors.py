"""The engine's errors: one root, one branch for moves that break the rules."""

from __future__ import annotations


class EngineError(ValueError):
    """Anything the engine refuses: unknown game, bad parameters, bad search options."""


class IllegalMove(EngineError):
    """A move that breaks the rules here: out of range, occupied, wrong small board, game over."""

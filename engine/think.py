"""What a brain protocol (``engine.piskvork``, ``engine.codingame``) asks of its I/O layer:
search a position for a time (``Think``), or write a diagnostic line (``Log``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.game import State

__all__ = ["Log", "Think"]


@dataclass(frozen=True, slots=True)
class Think:
    """Search ``state`` (the brain to move) for ``time_ms`` and hand the result to the
    protocol's ``played``."""

    state: State
    time_ms: float


@dataclass(frozen=True, slots=True)
class Log:
    """A line for the diagnostic stream (stderr), not for the protocol's output."""

    text: str

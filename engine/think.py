"""What a brain protocol (``engine.piskvork``, ``engine.codingame``) asks of its I/O layer:
search a position for a time (``Think``), or write a diagnostic line (``Log``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import EngineError

if TYPE_CHECKING:
    from engine.game import State
    from engine.result import SearchResult

__all__ = ["Log", "Think", "answer"]


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


def answer(
    protocol: Any, replies: list[Any], search: Callable[[Think], SearchResult]
) -> Iterator[str | Log]:
    """The lines of a protocol's ``replies`` in order, each ``Think`` answered by ``search``
    and handed to the protocol's ``played`` (whose replies come next); a search that fails
    with EngineError is handed to its ``cancel``, which says what to answer instead."""
    pending = list(replies)
    while pending:
        reply = pending.pop(0)
        if not isinstance(reply, Think):
            yield reply
            continue
        try:
            result = search(reply)
        except EngineError as exc:
            pending[:0] = protocol.cancel(str(exc))
            continue
        pending[:0] = protocol.played(result)

"""Time controls and game clocks (sans-I/O: every method takes ``now``, in seconds).

Time comes in as ``Now``, one reading of two clocks: ``mono`` (``time.monotonic``) for
every duration, clocks, grace periods and deadlines, so that a step of the system
clock (NTP, a VM resumed, an operator) never charges or credits anyone; ``wall``
(``time.time``) only for the timestamps people read (records, ``at`` fields, when a
seat may be claimed). A GameClock sees monotonic seconds only.

Three controls, as on Lichess: none, a fixed time per move, and Fischer (an initial
time plus an increment added after each move made on a running clock). As on Lichess
the clocks start once each side has made its first move (no increment before); before
that each side has FIRST_MOVE_S for its first move, or the game is aborted (reason
``no_start``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from server.errors import BadRequest

FIRST_MOVE_S = 30.0
MIN_TIME_MS = 1_000
MAX_TIME_MS = 24 * 3600 * 1000
MAX_INCREMENT_MS = 3600 * 1000


class Now(NamedTuple):
    """The time at one moment: ``mono`` for durations, ``wall`` for timestamps (a tuple:
    read at every request, it is made at a third of a frozen dataclass's cost)."""

    mono: float
    wall: float


@dataclass(frozen=True, slots=True)
class TimeControl:
    """A fixed time per move (``move_ms``) or Fischer (``initial_ms`` + ``increment_ms``)."""

    initial_ms: int = 0
    increment_ms: int = 0
    move_ms: int = 0

    @classmethod
    def parse(cls, spec: dict[str, Any] | None) -> TimeControl | None:
        """The control a request's ``clock`` map names; {} is none. Raises BadRequest."""
        if not spec:
            return None
        keys = set(spec)
        if keys == {"move_ms"}:
            control = cls(move_ms=_within("move_ms", spec["move_ms"], MIN_TIME_MS, MAX_TIME_MS))
        elif keys in ({"initial_ms"}, {"initial_ms", "increment_ms"}):
            control = cls(
                initial_ms=_within("initial_ms", spec["initial_ms"], MIN_TIME_MS, MAX_TIME_MS),
                increment_ms=_within(
                    "increment_ms", spec.get("increment_ms", 0), 0, MAX_INCREMENT_MS
                ),
            )
        else:
            raise BadRequest(
                f"clock {dict(spec)!r}: use {{}} (none), {{'move_ms': M}} or "
                "{'initial_ms': I, 'increment_ms': J}"
            )
        return control

    def to_dict(self) -> dict[str, int]:
        if self.move_ms:
            return {"move_ms": self.move_ms}
        return {"initial_ms": self.initial_ms, "increment_ms": self.increment_ms}

    @property
    def start_ms(self) -> int:
        """Each side's time at the start (and after each move, for a per-move control)."""
        return self.move_ms or self.initial_ms

    def describe(self) -> str:
        if self.move_ms:
            return f"{self.move_ms / 1000:g} s/move"
        return f"{self.initial_ms / 60000:g}+{self.increment_ms / 1000:g}"


def _within(name: str, value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise BadRequest(f"clock {name} must be an integer of ms in {low}..{high}, not {value!r}")
    return value


@dataclass(slots=True)
class GameClock:
    """Both sides' remaining time; at most one runs, from ``since``, for ``running``.
    Every ``now`` and ``since`` here is monotonic seconds (``Now.mono``)."""

    control: TimeControl
    remaining: list[int]
    running: int | None = None
    since: float = 0.0
    # Seats whose clock never runs (AI seats think within their own budget).
    frozen: tuple[bool, bool] = (False, False)

    @classmethod
    def new(cls, control: TimeControl, frozen: tuple[bool, bool] = (False, False)) -> GameClock:
        return cls(control, [control.start_ms, control.start_ms], frozen=frozen)

    def left(self, seat: int, now: float) -> int:
        """Milliseconds ``seat`` has left at ``now`` (never below 0)."""
        if seat != self.running:
            return self.remaining[seat]
        return max(0, self.remaining[seat] - int((now - self.since) * 1000))

    def snapshot(self, now: float) -> list[int]:
        return [self.left(0, now), self.left(1, now)]

    def start(self, seat: int, now: float) -> None:
        """Start ``seat``'s clock (unless that seat's clock is frozen)."""
        self.running = None if self.frozen[seat] else seat
        self.since = now

    def press(self, seat: int, now: float) -> None:
        """``seat`` moved at ``now``: charge its thinking time, add the increment or reset.
        The increment is added only to a clock that ran (scalachess Clock.step: none while
        the clock is not running), so not after a side's first move, nor to a frozen seat."""
        running = self.running == seat
        if running:
            spent = self.remaining[seat] - self.left(seat, now)
            self.remaining[seat] -= spent
        if self.control.move_ms:
            self.remaining[seat] = self.control.move_ms
        elif running:
            self.remaining[seat] += self.control.increment_ms
        self.running = None

    def stop(self, now: float) -> None:
        if self.running is not None:
            self.remaining[self.running] = self.left(self.running, now)
            self.running = None

    def flag_at(self) -> float | None:
        """When the running side's time runs out, or None if no clock runs."""
        if self.running is None:
            return None
        return self.since + self.remaining[self.running] / 1000

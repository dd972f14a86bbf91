"""Rate limiting (sans-I/O): the token bucket; the limits themselves are in server/settings.py."""

from __future__ import annotations

from dataclasses import dataclass

FORGIVEN = 0.1  # of the rate: refusals forgiven a second


@dataclass(slots=True)
class TokenBucket:
    """The token bucket (Turner 1986): ``rate`` tokens a second up to ``burst``; each
    message takes one. ``refused`` counts the messages refused, forgiven at a tenth of
    the rate a second: a client over the rate by more than a tenth ends up abusive,
    however its refusals interleave with messages that pass (counted "in a row", a
    client sending at twice the rate never was, and cost an error reply every other
    message forever)."""

    rate: float
    burst: int
    tokens: float = 0.0
    updated: float = 0.0
    refused: float = 0.0

    def take(self, now: float) -> bool:
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        self.refused += 1.0
        return False

    def charge(self, now: float, cost: float, *, owe: bool = False) -> bool:
        """Take ``cost`` more tokens for an expensive request (its frame took one already).
        Refused (False, nothing taken) when the bucket holds fewer, unless ``owe``: then
        they are taken anyway, for work already done, and the bucket may go below zero
        (at most a burst below), refusing requests until it has refilled."""
        self._refill(now)
        if self.tokens >= cost or owe:
            self.tokens = max(self.tokens - cost, -float(self.burst))
            return True
        return False

    def next_token_at(self) -> float:
        """When the bucket will hold one token (now or earlier if it does)."""
        return self.updated + max(0.0, 1.0 - self.tokens) / self.rate

    def _refill(self, now: float) -> None:
        elapsed = now - self.updated
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
        if self.refused:
            self.refused = max(0.0, self.refused - elapsed * self.rate * FORGIVEN)
        self.updated = now

    @property
    def abusive(self) -> bool:
        """The client kept sending a whole burst's worth after being told to slow down."""
        return self.refused > self.burst

    def describe(self) -> str:
        return f"at most {self.rate:g} messages/s, in bursts of {self.burst}"

"""Limits that protect everyone: a token bucket per connection, and the caps (sans-I/O)."""

from __future__ import annotations

from dataclasses import dataclass

# Messages per second a connection may send, sustained and in a burst. A bot playing many
# fast games at once stays far below: one move per game per round trip.
RATE_PER_S = 200.0
BURST = 400
# Caps per connection or player.
MAX_SEEKS_PER_CONNECTION = 5
MAX_OPEN_GAMES_PER_PLAYER = 20
MAX_WATCHED_PER_CONNECTION = 100
# Connections the server holds, in all and from one address (refused at the handshake).
MAX_CONNECTIONS = 20_000
MAX_CONNECTIONS_PER_IP = 2_000


@dataclass(slots=True)
class TokenBucket:
    """The token bucket (Turner 1986): ``rate`` tokens a second up to ``burst``; each
    message takes one. ``refused`` counts messages refused in a row."""

    rate: float = RATE_PER_S
    burst: int = BURST
    tokens: float = float(BURST)
    updated: float = 0.0
    refused: int = 0

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            self.refused = 0
            return True
        self.refused += 1
        return False

    @property
    def abusive(self) -> bool:
        """The client kept sending a whole burst's worth after being told to slow down."""
        return self.refused > self.burst

    def describe(self) -> str:
        return f"at most {self.rate:g} messages/s, in bursts of {self.burst}"

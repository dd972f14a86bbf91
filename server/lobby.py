"""The lobby: open seeks, challenges and the quick-pairing queues (sans-I/O).

A seek belongs to the connection that posted it and dies with it. A challenge is a
seek addressed to one player (``to``): only that player and its owner see it. Quick
pairing keeps one first-in-first-out queue per (game, parameters, clock).
"""

from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass, field
from typing import Any

from server.clock import TimeControl
from server.session import Player


def new_seek_id() -> str:
    return "s-" + secrets.token_hex(5)


@dataclass(slots=True)
class SeekEntry:
    id: str
    game: str
    params: dict[str, int]
    control: TimeControl | None
    owner: Player
    owner_connection: Any  # the server's Connection; the seek dies with it
    created_at: float
    color: str = "random"  # the seat the owner takes: x, o or random
    opponents: str = "any"  # any | humans
    to: str | None = None  # a challenge: the one player_id who may accept
    quick: bool = False
    ai_after_s: int = 0
    algorithm: str = "mcts"
    budget_ms: int = 200
    order: int = field(default_factory=itertools.count().__next__)

    @property
    def key(self) -> tuple[Any, ...]:
        """What two quick seeks must share to be paired."""
        clock = None if self.control is None else tuple(sorted(self.control.to_dict().items()))
        return (self.game, tuple(sorted(self.params.items())), clock)

    def visible_to(self, player_id: str | None) -> bool:
        if self.quick:
            return False
        return self.to is None or player_id in (self.to, self.owner.player_id)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "seek_id": self.id,
            "game": self.game,
            "params": dict(self.params),
            "clock": {} if self.control is None else self.control.to_dict(),
            "color": self.color,
            "opponents": self.opponents,
            "player": self.owner.to_dict(),
            "created_at": self.created_at,
        }
        if self.to is not None:
            d["to"] = self.to
        return d


class Lobby:
    """Every seek and quick-pairing entry, by id."""

    def __init__(self) -> None:
        self.seeks: dict[str, SeekEntry] = {}

    def add(self, entry: SeekEntry) -> None:
        self.seeks[entry.id] = entry

    def remove(self, seek_id: str) -> SeekEntry | None:
        return self.seeks.pop(seek_id, None)

    def owned_by(self, connection: Any) -> list[SeekEntry]:
        return [s for s in self.seeks.values() if s.owner_connection is connection]

    def visible_to(self, player_id: str | None) -> list[SeekEntry]:
        return [s for s in self.seeks.values() if s.visible_to(player_id)]

    def quick_partner(self, entry: SeekEntry) -> SeekEntry | None:
        """The longest-waiting quick seek ``entry`` pairs with (another player, same key)."""
        waiting = [
            s
            for s in self.seeks.values()
            if s.quick and s.key == entry.key and s.owner.player_id != entry.owner.player_id
        ]
        return min(waiting, key=lambda s: s.order) if waiting else None

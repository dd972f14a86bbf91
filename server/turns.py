"""The turn order of AI searches, one for the server's own engine pool (server/pool.py) and
for the engine queue (server/remote_engine.py).

Addresses, then their players, are served in turn (the one served longest ago first, one
never served before any other), each player with at most ``running_per_owner`` searches
running; a player's own searches go in arrival order. By address first, so that sessions
opened by the dozen from one address take one turn among the other addresses, not one
each (issue 11, finding 3).
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Generic, Protocol, TypeVar


class Turn(Protocol):
    """What the turn order reads of a search: the player it runs for and their address
    (None: not capped, and served as one more player)."""

    @property
    def owner(self) -> str | None: ...

    @property
    def address(self) -> str | None: ...


T = TypeVar("T", bound=Turn)


class TurnOrder(Generic[T]):
    """The searches waiting their turn, and the counts that choose the next one. Its owner
    serialises the calls (the pool holds its lock, the queue runs on one event loop).

    A search ``join``s, waits until ``begin`` (its turn), runs until ``end``, and counts
    for its player and address until ``release`` (or ``withdraw``, if it never began)."""

    def __init__(self, running_per_owner: int) -> None:
        self.running_per_owner = max(1, running_per_owner)
        self.waiting: list[T] = []
        self.running = 0  # searches begun and not ended, of every player
        self._ticks = itertools.count(1)
        self._arrival: dict[T, int] = {}  # every search joined and not released
        self._running: Counter[str | None] = Counter()  # per owner
        self._held: Counter[str | None] = Counter()  # waiting or running, per owner
        self._last_turn: dict[str | None, int] = {}  # when each owner was last served
        self._address_held: Counter[str | None] = Counter()  # as _held, per address
        self._address_turn: dict[str | None, int] = {}  # when each address was last served

    def held(self, owner: str | None) -> int:
        """Searches of ``owner`` waiting or running."""
        return self._held[owner]

    def join(self, search: T) -> None:
        """``search`` arrives: it waits its turn, and counts for its player until released."""
        self._arrival[search] = next(self._ticks)
        self.waiting.append(search)
        self._held[search.owner] += 1
        self._address_held[search.address] += 1

    def next(self) -> T | None:
        """The waiting search whose turn it is: of the address served longest ago, then of
        its player served longest ago, among players under their running cap; None if no
        waiting search may run now."""
        best: T | None = None
        best_key: tuple[int, int, int] = (0, 0, 0)
        for search in self.waiting:
            owner = search.owner
            if owner is not None and self._running[owner] >= self.running_per_owner:
                continue
            key = (
                self._address_turn.get(search.address, 0),
                self._last_turn.get(owner, 0),
                self._arrival[search],
            )
            if best is None or key < best_key:
                best, best_key = search, key
        return best

    def begin(self, search: T) -> None:
        """``search``'s turn (from ``next``): it runs, and its player and address were served
        last."""
        self.waiting.remove(search)
        self.running += 1
        self._running[search.owner] += 1
        self._last_turn[search.owner] = self._address_turn[search.address] = next(self._ticks)

    def end(self, search: T) -> None:
        """``search`` runs no more (answered, failed, or its worker died)."""
        self.running -= 1
        self._running[search.owner] -= 1
        if self._running[search.owner] <= 0:
            del self._running[search.owner]

    def wait_again(self, search: T) -> None:
        """An ended ``search`` waits again (its worker died), its arrival kept."""
        self.waiting.insert(0, search)

    def withdraw(self, search: T) -> bool:
        """Release ``search`` if it is waiting (nobody wants it any more); False if not."""
        if search not in self.waiting:
            return False
        self.waiting.remove(search)
        self.release(search)
        return True

    def release(self, search: T) -> None:
        """``search`` is over for good (not waiting, nor running): it no longer counts."""
        if self._arrival.pop(search, None) is None:
            return  # released already
        owner = search.owner
        self._held[owner] -= 1
        if self._held[owner] <= 0:
            del self._held[owner]
            self._last_turn.pop(owner, None)
        address = search.address
        self._address_held[address] -= 1
        if self._address_held[address] <= 0:
            del self._address_held[address]
            self._address_turn.pop(address, None)

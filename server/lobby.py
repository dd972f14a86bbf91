"""The lobby: open seeks, challenges, the quick-pairing queues, and what subscribers see
of them (sans-I/O).

A seek belongs to the connection that posted it and dies with it. A challenge is a
seek addressed to one player (``to``): only that player and its owner see it. Quick
pairing keeps one first-in-first-out queue per (game, parameters, clock).

Subscribers see one bounded page: the public seeks that have waited longest and the live
games that matter most (between two players before against the AI, the longest running
first), plus the totals; further pages on request. Changes reach them coalesced per tick,
as Lichess batches its lobby's hook removals: the server compares each page size's first
page with what it sent at the last tick (a ``Window``, shared by every subscriber with that
page size) and sends only the difference, so a seek posted and cancelled within a tick
costs nobody anything, and a subscriber gets at most one update a tick however busy the
lobby is.
"""

from __future__ import annotations

import heapq
import itertools
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

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
    algorithm: str = ""  # "": the game's own
    budget_ms: int = 200
    order: int = field(default_factory=itertools.count().__next__)

    @property
    def key(self) -> tuple[Any, ...]:
        """What two quick seeks must share to be paired."""
        clock = None if self.control is None else tuple(sorted(self.control.to_dict().items()))
        return (self.game, tuple(sorted(self.params.items())), clock)

    @property
    def public(self) -> bool:
        """Listed for everyone (not a challenge, not a quick-pairing entry)."""
        return not self.quick and self.to is None

    @property
    def parties(self) -> tuple[str | None, ...]:
        """The players a challenge concerns: its owner and the player it names."""
        return (self.owner.player_id, self.to) if self.to is not None else ()

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


class ListedGame(Protocol):
    """What the lobby needs of a live game (the server's GameSession)."""

    id: str
    players: list[Player | None]
    created_at: float
    started_at: float | None
    serial: int


def game_rank(game: ListedGame) -> tuple[int, float, int]:
    """Sort key, most relevant first: games between two players (humans or bots) before
    games against the AI (a flood of idle games against the AI never hides a real one),
    then the longest running first (the first created, on equal times)."""
    against_ai = any(p is None or p.is_ai for p in game.players)
    return (int(against_ai), game.started_at or game.created_at, game.serial)


def top_games(games: Iterable[ListedGame], count: int) -> list[ListedGame]:
    """The ``count`` most relevant of ``games``, in order (a heap: O(n log count))."""
    return heapq.nsmallest(count, games, key=game_rank)


@dataclass(slots=True)
class Subscription:
    """A connection's lobby subscription: the ``rid`` of its request (a fresh lobby_state
    is sent with it), its page size, and whether it asked for pages (then it gets totals
    and ``lobby_update`` batches; otherwise the ``lobby_event`` frames clients written
    before paging know)."""

    rid: int
    limit: int
    paged: bool
    # The first page as this subscriber was sent it, when that was not the shared window
    # of its page size (it subscribed between two ticks); None from the next tick on.
    window: Window | None = None


class Subscriptions(dict[Any, Subscription]):
    """Lobby subscribers: connection -> subscription (``discard`` as on a set)."""

    def discard(self, connection: Any) -> None:
        self.pop(connection, None)


@dataclass(slots=True)
class Window:
    """The first page sent to the subscribers with one page size, as of the last tick."""

    seeks: dict[str, SeekEntry]
    games: list[str]
    seeks_total: int
    games_total: int


@dataclass(slots=True)
class Changes:
    """What changed in a first page between two ticks (ids for removals)."""

    seeks: list[SeekEntry]
    seeks_removed: list[str]
    games: list[str]
    games_removed: list[str]
    totals: bool  # a total changed

    def __len__(self) -> int:
        return len(self.seeks) + len(self.seeks_removed) + len(self.games) + len(self.games_removed)

    @classmethod
    def between(cls, old: Window, new: Window) -> Changes:
        old_games, new_games = set(old.games), set(new.games)
        return cls(
            seeks=[s for i, s in new.seeks.items() if i not in old.seeks],
            seeks_removed=[i for i in old.seeks if i not in new.seeks],
            games=[g for g in new.games if g not in old_games],
            games_removed=[g for g in old.games if g not in new_games],
            totals=(old.seeks_total, old.games_total) != (new.seeks_total, new.games_total),
        )


# A challenge's change in the current tick: the entry (added) or None (removed).
Journal = dict[str, dict[str, SeekEntry | None]]


@dataclass(slots=True)
class _ChallengeChange:
    """A challenge changed in the current tick: whether its players' subscriptions listed
    it when the tick began, and the entry as it is now (None: removed). Only a difference
    between the two is news: added and removed within the tick, nothing; removed, added
    again (its id posted anew) and removed again, a removal."""

    listed_before: bool
    entry: SeekEntry | None


class Lobby:
    """Every seek and quick-pairing entry, indexed for what the server asks of them, and
    the windows subscribers were last sent."""

    def __init__(self) -> None:
        self.seeks: dict[str, SeekEntry] = {}
        self._public: dict[str, SeekEntry] = {}  # in posting order: longest waiting first
        self._owned: dict[Any, dict[str, SeekEntry]] = {}  # by owner connection
        self._challenges: dict[str, dict[str, SeekEntry]] = {}  # by player concerned
        self._queues: dict[tuple[Any, ...], dict[str, SeekEntry]] = {}  # quick pairing
        # Challenges changed since the last tick, by player.
        self._journal: dict[str, dict[str, _ChallengeChange]] = {}
        self.windows: dict[int, Window] = {}  # by page size

    def add(self, entry: SeekEntry) -> None:
        self.seeks[entry.id] = entry
        self._owned.setdefault(entry.owner_connection, {})[entry.id] = entry
        if entry.quick:
            self._queues.setdefault(entry.key, {})[entry.id] = entry
        elif entry.to is None:
            self._public[entry.id] = entry
        for player_id in entry.parties:
            if player_id is not None:
                self._challenges.setdefault(player_id, {})[entry.id] = entry
                self._journaled(player_id, entry.id, entry)

    def remove(self, seek_id: str) -> SeekEntry | None:
        entry = self.seeks.pop(seek_id, None)
        if entry is None:
            return None
        _discard(self._owned, entry.owner_connection, seek_id)
        if entry.quick:
            _discard(self._queues, entry.key, seek_id)
        self._public.pop(seek_id, None)
        for player_id in entry.parties:
            if player_id is None:
                continue
            _discard(self._challenges, player_id, seek_id)
            self._journaled(player_id, seek_id, None)
        return entry

    def _journaled(self, player_id: str, seek_id: str, entry: SeekEntry | None) -> None:
        """A challenge of ``player_id``'s added (``entry``) or removed (None) in this tick."""
        changes = self._journal.setdefault(player_id, {})
        change = changes.get(seek_id)
        if change is None:
            changes[seek_id] = _ChallengeChange(listed_before=entry is None, entry=entry)
        else:
            change.entry = entry

    def owned_by(self, connection: Any) -> list[SeekEntry]:
        return list(self._owned.get(connection, {}).values())

    def quick_partner(self, entry: SeekEntry) -> SeekEntry | None:
        """The longest-waiting quick seek ``entry`` pairs with (another player, same key)."""
        for waiting in self._queues.get(entry.key, {}).values():
            if waiting.owner.player_id != entry.owner.player_id:
                return waiting
        return None

    # --- what subscribers see ---------------------------------------------------------------

    @property
    def public_count(self) -> int:
        return len(self._public)

    def public_page(self, limit: int, page: int = 1) -> list[SeekEntry]:
        """Public seeks, longest waiting first: page ``page`` of ``limit``."""
        start = (page - 1) * limit
        return list(itertools.islice(self._public.values(), start, start + limit))

    def challenges_of(self, player_id: str | None, limit: int) -> list[SeekEntry]:
        """The challenges a player sent or received, oldest first, at most ``limit``."""
        held = self._challenges.get(player_id or "", {})
        return list(itertools.islice(held.values(), limit))

    def window(self, limit: int, games: list[str], games_total: int) -> Window:
        """The first page for page size ``limit``, given the most relevant games' ids."""
        seeks = {s.id: s for s in self.public_page(limit)}
        return Window(seeks, games[:limit], self.public_count, games_total)

    def take_journal(self) -> Journal:
        """The challenges changed since the last call, by player; starts a new tick."""
        journal, self._journal = self._journal, {}
        news: Journal = {}
        for player, changes in journal.items():
            said = {
                seek_id: change.entry
                for seek_id, change in changes.items()
                if change.listed_before != (change.entry is not None)
            }
            if said:
                news[player] = said
        return news


def _discard(index: dict[Any, dict[str, SeekEntry]], key: Any, seek_id: str) -> None:
    entries = index.get(key)
    if entries is not None:
        entries.pop(seek_id, None)
        if not entries:
            del index[key]

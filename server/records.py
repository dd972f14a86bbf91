"""Game records as sent by `get`, encoded once and kept (sans-I/O).

Reading a long game's record from the database and encoding it costs tens of milliseconds;
sending the same bytes again costs almost nothing. A record changes only while its game is
loaded (each event raises the game's ``seq``), and a game that has left memory never
changes again, so an entry is good while its ``seq`` is the loaded game's, or for good once
it was read after the game left memory. Entries are bounded in bytes, least recently used
out first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class CachedRecord:
    packed: bytes  # the record map, msgpack
    seq: int  # the game's seq when it was read
    final: bool  # read after the game left memory: it never changes again


class RecordCache:
    """Encoded records by game id, at most ``max_bytes`` of them."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[str, CachedRecord] = OrderedDict()

    def get(self, game_id: str, loaded_seq: int | None) -> bytes | None:
        """The record of ``game_id`` if it is still current: ``loaded_seq`` is the game's
        seq if it is in memory, None if it is not."""
        entry = self._entries.get(game_id)
        current = entry is not None and (
            entry.seq == loaded_seq if loaded_seq is not None else entry.final
        )
        if entry is None or not current:
            self.misses += 1
            return None
        self._entries.move_to_end(game_id)
        self.hits += 1
        return entry.packed

    def put(self, game_id: str, packed: bytes, seq: int, *, final: bool) -> None:
        old = self._entries.pop(game_id, None)
        if old is not None:
            self.size -= len(old.packed)
        if len(packed) > self.max_bytes:
            return
        self._entries[game_id] = CachedRecord(packed, seq, final)
        self.size += len(packed)
        while self.size > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.size -= len(evicted.packed)

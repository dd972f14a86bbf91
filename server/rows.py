"""The rows a game is stored as, and read back as (sans-I/O): what the game core
(server/session.py) produces and restores from, and what every store writes and reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class GameRow:
    id: str
    game: str
    params: dict[str, int]
    status: str
    players: list[dict[str, Any] | None]
    created_at: float
    seq: int = 0
    result: str | None = None
    reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    clock: dict[str, int] | None = None
    tokens: list[str | None] = field(default_factory=lambda: [None, None])  # sha256 hex
    private: bool = False
    rematch_of: str | None = None
    # The seek or quick-pairing entry the game was made of: one game per seek (the store
    # refuses a second: SeekTaken).
    seek_id: str | None = None


@dataclass(slots=True)
class MoveRow:
    game_id: str
    ply: int
    seq: int
    seat: int
    action: int
    at: float
    stats: dict[str, Any] | None = None
    clocks: list[int] | None = None


@dataclass(slots=True)
class EventRow:
    """A game event other than a move (offer, presence, start), as stored."""

    game_id: str
    seq: int
    kind: str
    data: dict[str, Any]
    at: float


@dataclass(slots=True)
class GameEnd:
    result: str  # "*" for an aborted game
    reason: str
    seq: int
    at: float

    @property
    def status(self) -> str:
        return "aborted" if self.result == "*" else "finished"


@dataclass(slots=True)
class SessionRow:
    token_sha256: str
    player_id: str
    name: str
    bot: bool
    created_at: float
    seen_at: float | None = None  # last used; None: created_at
    played: bool = False  # has held a seat (expires later)
    named: bool = True  # its name is bound (False: a session from before schema 3)


@dataclass(slots=True)
class GameRecord:
    """A stored game with its moves, as the replay reads it."""

    row: GameRow
    moves: list[MoveRow] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The record as the wire carries it: a nil field is left out, at every depth
        (PROTOCOL.md, "nil")."""
        r = self.row
        record = {
            "id": r.id,
            "game": r.game,
            "params": r.params,
            "status": r.status,
            "players": r.players,
            "result": r.result,
            "reason": r.reason,
            "seq": r.seq,
            "created_at": r.created_at,
            "started_at": r.started_at,
            "ended_at": r.ended_at,
            "clock": r.clock or {},
            "rematch_of": r.rematch_of,
            "moves": [
                _present(
                    {
                        "ply": m.ply,
                        "seq": m.seq,
                        "seat": m.seat,
                        "action": m.action,
                        "at": m.at,
                        "stats": None
                        if m.stats is None
                        else _present(m.stats),  # older rows kept nils
                        "clocks": m.clocks,
                    }
                )
                for m in self.moves
            ],
            "events": self.events,
        }
        return _present(record)


def event_record(seq: int, kind: str, data: dict[str, Any], at: float) -> dict[str, Any]:
    """A stored event as a record carries it (PROTOCOL.md, get): its ``type`` (the event's,
    as on the wire: started, offer, presence, ended, ...), ``seq`` and ``at``, then its data
    (where an offer's ``kind`` is draw or rematch), a nil field left out. The records lost
    the type and the time, and kept presence's nil ``claim_at``."""
    return _present({"type": kind, "seq": seq, "at": at, **data})


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` without the ones that are None."""
    return {name: value for name, value in fields.items() if value is not None}

"""Every message of the noughts wire protocol, as frozen dataclasses.

Client requests carry ``rid`` (a request id the client picks); the server's
reply to that request echoes it. Game events (``snapshot``, ``moved``,
``ended``) carry the game's ``seq``: every change to a game is one event with
the next sequence number, so a client can tell what it missed. Actions are
plain integers as in OpenSpiel; seats are 0 (moves first, X) and 1 (O).
PROTOCOL.md documents each field; this module is the single source of truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

PROTOCOL_VERSION = 1


def _rid() -> Any:
    return field(metadata={"min": 0, "max": 2**31 - 1})


def _game_id() -> Any:
    return field(metadata={"max_len": 32})


def _token() -> Any:
    return field(metadata={"max_len": 64})


_REQUIRED: Any = object()


def _bounded(lo: int, hi: int, default: Any = _REQUIRED) -> Any:
    """An integer field within lo..hi, required unless a default is given."""
    if default is _REQUIRED:
        return field(metadata={"min": lo, "max": hi})
    return field(default=default, metadata={"min": lo, "max": hi})


Status = Literal["open", "live", "finished", "aborted"]


class Message:
    """Base of all messages; ``TYPE`` is the wire tag."""

    __slots__ = ()
    TYPE: ClassVar[str]


# --- client -> server -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Hello(Message):
    """First message on a connection: protocol version and who is connecting."""

    TYPE: ClassVar[str] = "hello"
    rid: int = _rid()
    version: int = _bounded(0, 1_000_000)
    name: str = field(default="anonymous", metadata={"max_len": 32})
    bot: bool = False
    session: str | None = field(default=None, metadata={"max_len": 64})
    client: str = field(default="", metadata={"max_len": 64})


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateGame(Message):
    """Create a game: against the AI, or with an open seat for another player."""

    TYPE: ClassVar[str] = "create"
    rid: int = _rid()
    game: str = field(metadata={"max_len": 32})
    params: dict[str, int] = field(default_factory=dict, metadata={"min": 0, "max": 100})
    opponent: Literal["ai", "human"] = "ai"
    seat: int = _bounded(-1, 1, 0)  # the seat the creator takes; -1 = random
    algorithm: str = field(default="mcts", metadata={"max_len": 32})
    budget_ms: int = _bounded(1, 60_000, 200)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGames(Message):
    TYPE: ClassVar[str] = "list"
    rid: int = _rid()
    status: Status = "open"
    limit: int = _bounded(1, 500, 50)


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGame(Message):
    TYPE: ClassVar[str] = "join"
    rid: int = _rid()
    game_id: str = _game_id()


@dataclass(frozen=True, slots=True, kw_only=True)
class Move(Message):
    """Play ``action`` for the seat ``token`` holds. ``ply``, if given, must equal the
    number of moves already played: a move meant for an earlier position is refused."""

    TYPE: ClassVar[str] = "move"
    rid: int = _rid()
    game_id: str = _game_id()
    token: str = _token()
    action: int = _bounded(0, 100_000)
    ply: int | None = _bounded(0, 100_000, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Resign(Message):
    TYPE: ClassVar[str] = "resign"
    rid: int = _rid()
    game_id: str = _game_id()
    token: str = _token()


@dataclass(frozen=True, slots=True, kw_only=True)
class GetGame(Message):
    """Ask for a game's full record (moves and AI statistics), live or stored."""

    TYPE: ClassVar[str] = "get"
    rid: int = _rid()
    game_id: str = _game_id()


@dataclass(frozen=True, slots=True, kw_only=True)
class Watch(Message):
    """Follow a game as a spectator: a snapshot, then every event after it."""

    TYPE: ClassVar[str] = "watch"
    rid: int = _rid()
    game_id: str = _game_id()


@dataclass(frozen=True, slots=True, kw_only=True)
class Ping(Message):
    TYPE: ClassVar[str] = "ping"
    rid: int = _rid()


# --- server -> client -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Welcome(Message):
    """Reply to hello: the session token identifies this player on reconnection."""

    TYPE: ClassVar[str] = "welcome"
    rid: int = _rid()
    version: int = _bounded(0, 1_000_000)
    session: str = _token()
    player_id: str = field(metadata={"max_len": 64})
    server: str = field(default="", metadata={"max_len": 64})


@dataclass(frozen=True, slots=True, kw_only=True)
class Seated(Message):
    """Reply to create/join: the seat taken and its secret token, needed to move."""

    TYPE: ClassVar[str] = "seated"
    rid: int = _rid()
    game_id: str = _game_id()
    seat: int = _bounded(0, 1)
    token: str = _token()


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot(Message):
    """A game's whole state at event ``seq``: the position is ``actions`` replayed."""

    TYPE: ClassVar[str] = "snapshot"
    game_id: str = _game_id()
    seq: int = _bounded(0, 2**31 - 1)
    game: str = field(metadata={"max_len": 32})
    params: dict[str, int] = field(metadata={"min": 0, "max": 100})
    players: list[dict[str, Any] | None] = field(metadata={"max_len": 2})
    actions: list[int] = field(metadata={"min": 0, "max": 100_000, "max_len": 100_000})
    status: Status
    to_move: int = _bounded(-1, 1)
    result: str | None = field(default=None, metadata={"max_len": 16})
    reason: str | None = field(default=None, metadata={"max_len": 32})
    rid: int | None = _bounded(0, 2**31 - 1, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Moved(Message):
    """A move was committed. The mover's copy carries its request's ``rid``: that is
    the acknowledgement. ``stats`` holds the search statistics of AI moves."""

    TYPE: ClassVar[str] = "moved"
    game_id: str = _game_id()
    seq: int = _bounded(0, 2**31 - 1)
    ply: int = _bounded(0, 100_000)
    seat: int = _bounded(0, 1)
    action: int = _bounded(0, 100_000)
    to_move: int = _bounded(-1, 1)
    at: float = 0.0
    stats: dict[str, Any] | None = None
    rid: int | None = _bounded(0, 2**31 - 1, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ended(Message):
    """The game is over. ``result`` is "1-0" (seat 0 won), "0-1" or "1/2-1/2"."""

    TYPE: ClassVar[str] = "ended"
    game_id: str = _game_id()
    seq: int = _bounded(0, 2**31 - 1)
    result: str = field(metadata={"max_len": 16})
    reason: str = field(metadata={"max_len": 32})
    winner: int | None = _bounded(0, 1, None)
    rid: int | None = _bounded(0, 2**31 - 1, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class GameList(Message):
    TYPE: ClassVar[str] = "games"
    rid: int = _rid()
    games: list[dict[str, Any]] = field(metadata={"max_len": 500})


@dataclass(frozen=True, slots=True, kw_only=True)
class Record(Message):
    """A game's full record: the reply to ``get``."""

    TYPE: ClassVar[str] = "record"
    rid: int = _rid()
    game: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Pong(Message):
    TYPE: ClassVar[str] = "pong"
    rid: int = _rid()


@dataclass(frozen=True, slots=True, kw_only=True)
class Error(Message):
    """A request was refused; ``code`` is one of protocol.ErrorCode."""

    TYPE: ClassVar[str] = "error"
    code: str = field(metadata={"max_len": 32})
    message: str = field(metadata={"max_len": 1024})
    rid: int | None = _bounded(0, 2**31 - 1, None)
    game_id: str | None = field(default=None, metadata={"max_len": 32})


CLIENT_MESSAGES: tuple[type[Message], ...] = (
    Hello,
    CreateGame,
    ListGames,
    JoinGame,
    Move,
    Resign,
    GetGame,
    Watch,
    Ping,
)
SERVER_MESSAGES: tuple[type[Message], ...] = (
    Welcome,
    Seated,
    Snapshot,
    Moved,
    Ended,
    GameList,
    Record,
    Pong,
    Error,
)

"""Every message of the noughts wire protocol, as frozen dataclasses.

Client requests carry ``rid`` (a request id the client picks); the server's
reply to that request echoes it. Game events (``snapshot`` at the start,
``moved``, ``offer``, ``presence``, ``ended``) carry the game's ``seq``: every
change to a game is one event with the next sequence number, so a client can
tell what it missed and ask for it (``resume``). Lobby events (``lobby_event``)
are pushed to the connections that subscribed with ``lobby``. Actions are
plain integers as in OpenSpiel; seats are 0 (moves first, X) and 1 (O).
PROTOCOL.md documents each field; this module is the single source of truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

# The version this code speaks. Version 2 is version 1 with one optional field more: the
# ``seq`` of the game requests (resign, abort, draw, claim, rematch) that makes sending one
# again harmless. Version 3 adds a message a client must read (``rematch_closed``), so a
# client says in ``hello`` the newest version it speaks, and a server sends such a message
# only to a connection that said 3 or more. A server accepts ``hello`` of any version from
# OLDEST_PROTOCOL_VERSION to its own and names its own in ``welcome``; a client that meets a
# server older than it (``version_mismatch``) says hello again with the oldest version, 1,
# on a new connection, and sends ``seq`` only to a server of version 2 or more.
PROTOCOL_VERSION = 3
OLDEST_PROTOCOL_VERSION = 1
SEQ_SINCE_VERSION = 2  # the first version whose servers take ``seq`` on game requests
REMATCH_CLOSED_SINCE_VERSION = 3  # the first version whose clients read ``rematch_closed``


def _rid() -> Any:
    return field(metadata={"min": 0, "max": 2**31 - 1})


def _game_id() -> Any:
    return field(metadata={"max_len": 32})


def _token() -> Any:
    return field(metadata={"max_len": 64})


_REQUIRED: Any = object()
# Array fields decode to tuples, so their defaults are tuples too (typed Any for mypy).
_NO_ITEMS: Any = ()
_BOTH_ONLINE: Any = (True, True)


def _bounded(lo: int, hi: int, default: Any = _REQUIRED) -> Any:
    """An integer field within lo..hi, required unless a default is given."""
    if default is _REQUIRED:
        return field(metadata={"min": lo, "max": hi})
    return field(default=default, metadata={"min": lo, "max": hi})


def _request_seq() -> Any:
    """A game request's ``seq``: the last seq of the game the client had seen when it first
    sent the request, the same when it sends it again (PROTOCOL.md, "A request sent
    again")."""
    return _bounded(0, 2**31 - 1, None)


Status = Literal["open", "live", "finished", "aborted"]
Answer = Literal["offer", "accept", "decline"]


def _clock() -> Any:
    """A time control: {} (none), {"move_ms": M} (fixed time per move) or
    {"initial_ms": I, "increment_ms": J} (Fischer). The server checks the combination."""
    return field(default_factory=dict, metadata={"min": 0, "max": 24 * 3600 * 1000})


def _game_params() -> Any:
    return field(default_factory=dict, metadata={"min": 0, "max": 100})


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
    version: int = _bounded(0, 1_000_000)  # the newest the client speaks (1: version 1 or 2)
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
    params: dict[str, int] = _game_params()
    opponent: Literal["ai", "human"] = "ai"
    seat: int = _bounded(-1, 1, 0)  # the seat the creator takes; -1 = random
    algorithm: str = field(default="", metadata={"max_len": 32})  # "": the game's own
    budget_ms: int = _bounded(1, 60_000, 200)
    clock: dict[str, int] = _clock()
    private: bool = False  # an open seat joined only by its id (the invite code), never listed


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
    seq: int | None = _request_seq()


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
    since: int | None = _bounded(0, 2**31 - 1, None)  # as in resume: only events after it


@dataclass(frozen=True, slots=True, kw_only=True)
class Unwatch(Message):
    """Stop receiving a game's events (a spectator leaving)."""

    TYPE: ClassVar[str] = "unwatch"
    rid: int = _rid()
    game_id: str = _game_id()


@dataclass(frozen=True, slots=True, kw_only=True)
class Resume(Message):
    """After a reconnection: the events of ``game_id`` after ``since`` (the last seq the
    client saw), or a snapshot if ``since`` is 0 or older than what the server keeps; a
    seat this session holds in the game is given back. Replied with ``resumed``."""

    TYPE: ClassVar[str] = "resume"
    rid: int = _rid()
    game_id: str = _game_id()
    since: int = _bounded(0, 2**31 - 1, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class LobbySubscribe(Message):
    """Subscribe to the lobby (``lobby_state`` now, pushes after), or stop. With ``limit``
    (a page size) or ``page``, the state carries the totals and the pushes are one
    ``lobby_update`` a tick; a ``page`` after the first is read without subscribing."""

    TYPE: ClassVar[str] = "lobby"
    rid: int = _rid()
    subscribe: bool = True
    limit: int | None = _bounded(1, 200, None)
    page: int | None = _bounded(1, 100_000, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Seek(Message):
    """Post a seek: an offer to play that another player accepts. With ``to`` (a player id
    or name) it is a challenge only that player sees and can accept."""

    TYPE: ClassVar[str] = "seek"
    rid: int = _rid()
    game: str = field(metadata={"max_len": 32})
    params: dict[str, int] = _game_params()
    clock: dict[str, int] = _clock()
    color: Literal["x", "o", "random"] = "random"
    opponents: Literal["any", "humans"] = "any"  # "humans": bots may not accept
    to: str | None = field(default=None, metadata={"max_len": 64})


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelSeek(Message):
    """Withdraw a seek or leave the quick-pairing queue."""

    TYPE: ClassVar[str] = "cancel_seek"
    rid: int = _rid()
    seek_id: str = field(metadata={"max_len": 32})


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptSeek(Message):
    TYPE: ClassVar[str] = "accept"
    rid: int = _rid()
    seek_id: str = field(metadata={"max_len": 32})


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclineSeek(Message):
    """Decline a challenge addressed to you: it leaves the lobby and its poster is told
    (``seek_declined``), as a Lichess challenger reads "X declined your challenge"."""

    TYPE: ClassVar[str] = "decline_seek"
    rid: int = _rid()
    seek_id: str = field(metadata={"max_len": 32})


@dataclass(frozen=True, slots=True, kw_only=True)
class QuickPair(Message):
    """Join the quick-pairing queue for a game; after ``ai_after_s`` seconds without a
    partner (0: never) the server seats the player against its AI instead."""

    TYPE: ClassVar[str] = "quick"
    rid: int = _rid()
    game: str = field(metadata={"max_len": 32})
    params: dict[str, int] = _game_params()
    clock: dict[str, int] = _clock()
    ai_after_s: int = _bounded(0, 3600, 20)
    algorithm: str = field(default="", metadata={"max_len": 32})  # "": the game's own
    budget_ms: int = _bounded(1, 60_000, 200)


@dataclass(frozen=True, slots=True, kw_only=True)
class Draw(Message):
    """Offer, accept or decline a draw in a live game."""

    TYPE: ClassVar[str] = "draw"
    rid: int = _rid()
    game_id: str = _game_id()
    token: str = _token()
    answer: Answer = "offer"
    seq: int | None = _request_seq()


@dataclass(frozen=True, slots=True, kw_only=True)
class Rematch(Message):
    """Offer, accept or decline a rematch (colours swapped) after a game ended."""

    TYPE: ClassVar[str] = "rematch"
    rid: int = _rid()
    game_id: str = _game_id()
    token: str = _token()
    answer: Answer = "offer"
    seq: int | None = _request_seq()


@dataclass(frozen=True, slots=True, kw_only=True)
class Abort(Message):
    """Abort a game before both sides have made their first move (ply < 2): no result."""

    TYPE: ClassVar[str] = "abort"
    rid: int = _rid()
    game_id: str = _game_id()
    token: str = _token()
    seq: int | None = _request_seq()


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim(Message):
    """The opponent stayed away past its grace period: end the game as a win or a draw."""

    TYPE: ClassVar[str] = "claim"
    rid: int = _rid()
    game_id: str = _game_id()
    token: str = _token()
    outcome: Literal["win", "draw"] = "win"
    seq: int | None = _request_seq()


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
    name: str = field(default="", metadata={"max_len": 32})  # the name as the server keeps it
    # Seats this session holds in unfinished games: {game_id, seat, token, seq}.
    games: list[dict[str, Any]] = field(default=_NO_ITEMS, metadata={"max_len": 500})


@dataclass(frozen=True, slots=True, kw_only=True)
class Seated(Message):
    """A seat and its secret token, needed to move. The reply to create, join and accept;
    sent without ``rid`` when a seek of ours is accepted, quick pairing or a rematch
    seats us."""

    TYPE: ClassVar[str] = "seated"
    game_id: str = _game_id()
    seat: int = _bounded(0, 1)
    token: str = _token()
    rid: int | None = _bounded(0, 2**31 - 1, None)


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
    clock: dict[str, int] = _clock()
    # Remaining ms per seat at server time ``at``; the side to move's clock runs from then.
    clocks: list[int] | None = field(default=None, metadata={"min": 0, "max_len": 2})
    # A timed game's time for each side's first move, its clock not yet running (Clocks).
    first_move_ms: int | None = _bounded(0, 86_400_000, None)
    # What the side to move has left of it at ``at`` while its first move is due (Clocks).
    first_move_left_ms: int | None = _bounded(0, 86_400_000, None)
    at: float = 0.0
    online: list[bool] = field(default=_BOTH_ONLINE, metadata={"max_len": 2})
    offers: dict[str, int] = field(default_factory=dict, metadata={"min": 0, "max": 1})
    next_game: str | None = field(default=None, metadata={"max_len": 32})  # the rematch
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
    clocks: list[int] | None = field(default=None, metadata={"min": 0, "max_len": 2})
    rid: int | None = _bounded(0, 2**31 - 1, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Offer(Message):
    """A draw or rematch offer, accepted or declined, by ``seat``. An accepted rematch
    names the new game in ``next_game``."""

    TYPE: ClassVar[str] = "offer"
    game_id: str = _game_id()
    seq: int = _bounded(0, 2**31 - 1)
    kind: Literal["draw", "rematch"]
    seat: int = _bounded(0, 1)
    answer: Answer
    next_game: str | None = field(default=None, metadata={"max_len": 32})
    rid: int | None = _bounded(0, 2**31 - 1, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Presence(Message):
    """A seat's player left or came back. While away its seat is held until ``claim_at``
    (server time); after that the opponent may claim the game."""

    TYPE: ClassVar[str] = "presence"
    game_id: str = _game_id()
    seq: int = _bounded(0, 2**31 - 1)
    seat: int = _bounded(0, 1)
    online: bool
    claim_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Ended(Message):
    """The game is over. ``result`` is "1-0" (seat 0 won), "0-1", "1/2-1/2", or "*" for an
    aborted game (no result). ``clocks`` are the remaining times at the end."""

    TYPE: ClassVar[str] = "ended"
    game_id: str = _game_id()
    seq: int = _bounded(0, 2**31 - 1)
    result: str = field(metadata={"max_len": 16})
    reason: str = field(metadata={"max_len": 32})
    winner: int | None = _bounded(0, 1, None)
    clocks: list[int] | None = field(default=None, metadata={"min": 0, "max_len": 2})
    at: float = 0.0
    rid: int | None = _bounded(0, 2**31 - 1, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class RematchClosed(Message):
    """A finished game's rematch window closed: the server let the game go (its
    ``keep_finished_s`` after the end, or both players left), no rematch can be agreed in it
    any more, and the connection no longer follows it. Protocol version 3: sent only to a
    connection whose ``hello`` said 3 or more."""

    TYPE: ClassVar[str] = "rematch_closed"
    game_id: str = _game_id()


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
class Ok(Message):
    """The request was done; what it changed arrives as events (offer, ended, ...)."""

    TYPE: ClassVar[str] = "ok"
    rid: int = _rid()


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumed(Message):
    """Reply to resume, after the missed events: the game's seq now, and the seat (and its
    token) this session holds in it, if any."""

    TYPE: ClassVar[str] = "resumed"
    rid: int = _rid()
    game_id: str = _game_id()
    seq: int = _bounded(0, 2**31 - 1)
    seat: int | None = _bounded(0, 1, None)
    token: str | None = field(default=None, metadata={"max_len": 64})


@dataclass(frozen=True, slots=True, kw_only=True)
class SeekPosted(Message):
    """Reply to seek and quick: the id to cancel it with."""

    TYPE: ClassVar[str] = "posted"
    rid: int = _rid()
    seek_id: str = field(metadata={"max_len": 32})


@dataclass(frozen=True, slots=True, kw_only=True)
class SeekDeclined(Message):
    """To the poster of a challenge: ``player`` (name, kind, player_id) declined it; the
    seek is gone."""

    TYPE: ClassVar[str] = "seek_declined"
    seek_id: str = field(metadata={"max_len": 32})
    player: dict[str, Any] = field(metadata={"max_len": 8})


@dataclass(frozen=True, slots=True, kw_only=True)
class LobbyState(Message):
    """Reply to lobby: one page of the seeks this connection may accept (the challenges
    that name it first) and of the live games, the most relevant first. A subscription that
    asked for pages also gets the page, its size and the totals. Sent again, with the
    subscription's ``rid``, when more changed in a tick than single events would carry."""

    TYPE: ClassVar[str] = "lobby_state"
    rid: int = _rid()
    seeks: list[dict[str, Any]] = field(metadata={"max_len": 10_000})
    games: list[dict[str, Any]] = field(metadata={"max_len": 10_000})
    page: int | None = _bounded(1, 100_000, None)
    limit: int | None = _bounded(1, 10_000, None)
    seeks_total: int | None = _bounded(0, 2**31 - 1, None)
    games_total: int | None = _bounded(0, 2**31 - 1, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class LobbyUpdate(Message):
    """A tick's changes to the first page of a subscription that asked for pages: seeks and
    games that entered it, the ids of those that left it, and the totals."""

    TYPE: ClassVar[str] = "lobby_update"
    seeks: list[dict[str, Any]] = field(default=_NO_ITEMS, metadata={"max_len": 10_000})
    seeks_removed: list[str] = field(default=_NO_ITEMS, metadata={"max_len": 10_000})
    games: list[dict[str, Any]] = field(default=_NO_ITEMS, metadata={"max_len": 10_000})
    games_removed: list[str] = field(default=_NO_ITEMS, metadata={"max_len": 10_000})
    seeks_total: int = _bounded(0, 2**31 - 1)
    games_total: int = _bounded(0, 2**31 - 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class LobbyEvent(Message):
    """A change to the lobby: a seek added or removed, a game gone live or over.
    ``seek`` / ``game`` hold the new entry; removals carry only the id."""

    TYPE: ClassVar[str] = "lobby_event"
    kind: Literal["seek_added", "seek_removed", "game_added", "game_removed"]
    seek: dict[str, Any] | None = None
    seek_id: str | None = field(default=None, metadata={"max_len": 32})
    game: dict[str, Any] | None = None
    game_id: str | None = field(default=None, metadata={"max_len": 32})


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
    Unwatch,
    Resume,
    LobbySubscribe,
    Seek,
    CancelSeek,
    AcceptSeek,
    DeclineSeek,
    QuickPair,
    Draw,
    Rematch,
    Abort,
    Claim,
    Ping,
)
SERVER_MESSAGES: tuple[type[Message], ...] = (
    Welcome,
    Seated,
    Snapshot,
    Moved,
    Offer,
    Presence,
    Ended,
    RematchClosed,
    GameList,
    Record,
    Pong,
    Ok,
    Resumed,
    SeekPosted,
    SeekDeclined,
    LobbyState,
    LobbyEvent,
    LobbyUpdate,
    Error,
)
# Messages that are events of one game, numbered by its seq.
GAME_EVENTS: tuple[type[Message], ...] = (Snapshot, Moved, Offer, Presence, Ended)

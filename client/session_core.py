"""The client's side of the protocol as a pure state machine: frames in, frames and events out.

``ClientSession`` does no I/O, reads no clock and holds no socket, as websockets'
``Protocol`` and h11's ``Connection``: the I/O layer (``client.connection``) tells it that a
connection opened (``connection_made``) or closed (``connection_lost``), feeds it every
frame received (``receive_frame``), sends what ``data_to_send`` returns and acts on what
``events_received`` returns. It owns what every client needs and once wrote for itself:

- request ids, and which request each reply answers (``Reply``);
- the greeting: ``hello`` with the session of the earlier ``welcome`` (a fresh one when the
  server no longer knows it, ``bad_token``);
- the seats (game -> seat, token) from ``welcome``, ``seated`` and ``resumed``, and the
  token of every request for a seat's game (a server restored from its database issues new
  tokens in its welcome: a token kept anywhere else would go stale);
- the last ``seq`` seen per game followed, so an event seen already is never delivered
  twice; and in every game request (resign, abort, draw, claim, rematch) to a server that
  takes it, the ``seq`` seen when it was first sent, so that sending it again is harmless
  (PROTOCOL.md, "A request sent again");
- what to send again after a reconnection (PROTOCOL.md, resume): ``resume`` for every game
  played or ours, ``watch`` with ``since`` for every game watched (a ``resume`` would leave
  the server unable to ``unwatch`` it), the lobby subscription.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from dataclasses import dataclass
from typing import Any

import msgpack

from protocol import (
    GAME_EVENTS,
    OLDEST_PROTOCOL_VERSION,
    SEQ_SINCE_VERSION,
    Abort,
    Claim,
    Draw,
    Ended,
    Error,
    Hello,
    LobbySubscribe,
    Message,
    ProtocolError,
    Rematch,
    Resign,
    Resume,
    Resumed,
    Seated,
    Snapshot,
    Unwatch,
    Watch,
    Welcome,
    decode_server,
    encode,
)

# Game requests that carry ``seq`` (the seq seen when first sent) to a server of version 2.
RESENDABLE: tuple[type[Message], ...] = (Resign, Abort, Draw, Claim, Rematch)

# --- what the session tells its I/O layer ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer (an ``Error`` included) to the request sent with ``rid``."""

    rid: int
    message: Message


@dataclass(frozen=True, slots=True)
class Received:
    """A message for the application: every game event, lobby message and unrequested
    error, and every reply too (``replied``: a request got it as its ``Reply`` already).
    Events seen before a reconnection are left out."""

    message: Message
    replied: bool


@dataclass(frozen=True, slots=True)
class Welcomed:
    """The server greeted us; ``again`` on every connection after the first (the requests
    that follow every game again are queued already)."""

    welcome: Welcome
    again: bool


@dataclass(frozen=True, slots=True)
class Refused:
    """The server refused the greeting (not a forgotten session: that one is retried)."""

    error: Error


@dataclass(frozen=True, slots=True)
class Failed:
    """The request sent with ``rid`` will get no reply: the connection closed."""

    rid: int
    reason: str


@dataclass(frozen=True, slots=True)
class NotResumed:
    """After a reconnection the server refused to resume (or watch) ``game_id``."""

    game_id: str
    error: Error


SessionEvent = Reply | Received | Welcomed | Refused | Failed | NotResumed


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait before reconnection attempt ``attempt`` (0, 1, ...): exponential
    backoff with full jitter, a uniform draw in [0, min(cap, base * 2**attempt)] (AWS
    Architecture Blog, "Exponential Backoff and Jitter", 2015), so the clients of a
    restarted server come back spread out, not all at once."""

    base_s: float = 0.25
    cap_s: float = 8.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap_s, self.base_s * 2 ** min(attempt, 64)))


def unreadable(frame: bytes | str, exc: ProtocolError) -> Error:
    """An error standing for a server frame the codec refused, with the frame's ``rid``
    when one can be read from it: never dropped in silence."""
    rid = None
    with contextlib.suppress(Exception):
        body = msgpack.unpackb(frame, raw=False, strict_map_key=False)
        if type(body.get("rid")) is int:
            rid = body["rid"]
    text = f"cannot read a frame from the server: {exc.message}"
    return Error(code=exc.code.value, message=text[:1024], rid=rid)


class ClientSession:
    """One player's session with a server, across any number of connections."""

    def __init__(
        self,
        *,
        name: str = "anonymous",
        bot: bool = False,
        client: str = "noughts",
        session: str | None = None,
    ) -> None:
        self.name = name
        self.bot = bot
        self.client = client
        self.session = session  # the token of the last welcome (or one saved from a run before)
        self.welcome: Welcome | None = None
        self.connected = False
        self.seats: dict[str, tuple[int, str]] = {}  # game_id -> (seat, token)
        self.last_seq: dict[str, int] = {}  # game_id -> seq of the last event delivered
        # game_id -> the highest seq seen, kept after the game's end (a rematch's ``seq``)
        self.seen_seq: dict[str, int] = {}
        self.watching: set[str] = set()  # games followed as a spectator (``watch``)
        self.lobby: dict[str, Any] | None = None  # the fields of the lobby subscription
        self._rids = itertools.count(1)
        self._pending: dict[int, Message] = {}  # rid -> request awaiting its reply
        self._internal: set[int | None] = set()  # rids of the session's own requests
        self._hello_rid: int | None = None
        self._welcomes = 0
        self._out: list[bytes] = []
        self._events: list[SessionEvent] = []

    # --- the I/O layer's calls -----------------------------------------------------------

    def connection_made(self) -> None:
        """A new connection opened: greet the server (the reply is a ``Welcomed``)."""
        self.connected = True
        self._send_hello()

    def connection_lost(self, reason: str) -> None:
        """The connection closed: every request in flight fails (a ``Failed`` each)."""
        self.connected = False
        self._hello_rid = None
        for rid in list(self._pending):
            if rid not in self._internal:
                self._events.append(Failed(rid, reason))
        self._pending.clear()
        self._internal.clear()

    def send_request(self, kind: type[Message], **fields: Any) -> int:
        """Queue a request; returns its rid (its reply comes as a ``Reply`` with it). A
        request for a game we hold a seat in gets that seat's token unless it names one; a
        game request its ``seq`` (``with_seq``) unless it names one."""
        if "token" in getattr(kind, "__dataclass_fields__", ()) and fields.get("token") is None:
            token = self.token_for(str(fields.get("game_id")))
            if token is not None:
                fields["token"] = token
        fields = self.with_seq(kind, fields)
        if not self.takes_seq:  # a server of version 1 would refuse it (bad_field)
            fields.pop("seq", None)
        rid = next(self._rids)
        request = kind(rid=rid, **fields)  # type: ignore[call-arg]
        self._pending[rid] = request
        self._out.append(encode(request))
        if isinstance(request, Watch):
            self.watching.add(request.game_id)
        elif isinstance(request, Unwatch):
            self.forget(request.game_id)
        elif isinstance(request, LobbySubscribe):
            # A page after the first is read without subscribing (PROTOCOL.md, lobby).
            if not request.subscribe:
                self.lobby = None
            elif request.page in (None, 1):
                self.lobby = fields
        return rid

    @property
    def takes_seq(self) -> bool:
        """The server greeting us takes ``seq`` on game requests (protocol version 2): an
        older one would refuse the field (``bad_field``)."""
        return self.welcome is not None and self.welcome.version >= SEQ_SINCE_VERSION

    def with_seq(self, kind: type[Message], fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` of a game request with its ``seq``: the last seq of the game seen now,
        unless given (a request sent again keeps the one it was first sent with); none for a
        game of which no event was seen (a seq too old would answer the request with what an
        earlier one of its kind did, and leave it undone)."""
        if kind not in RESENDABLE or fields.get("seq") is not None:
            return fields
        seen = self.seen_seq.get(str(fields.get("game_id")))
        return fields if seen is None else fields | {"seq": seen}

    def forget(self, game_id: str) -> None:
        """Stop following a game after a reconnection (no longer watched, or left)."""
        self.last_seq.pop(game_id, None)
        self.watching.discard(game_id)

    def receive_frame(self, frame: bytes | str) -> None:
        """A frame from the server."""
        try:
            message = decode_server(frame)
        except ProtocolError as exc:
            message = unreadable(frame, exc)
        self.receive(message)

    def data_to_send(self) -> list[bytes]:
        """The frames to send, in order (each once)."""
        out, self._out = self._out, []
        return out

    def events_received(self) -> list[SessionEvent]:
        """What happened since the last call, in order."""
        events, self._events = self._events, []
        return events

    def token_for(self, game_id: str) -> str | None:
        held = self.seats.get(game_id)
        return None if held is None else held[1]

    # --- incoming ------------------------------------------------------------------------

    def receive(self, message: Message) -> None:
        """A decoded message from the server."""
        rid = getattr(message, "rid", None)
        request = self._pending.pop(rid, None) if rid is not None else None
        internal = rid in self._internal
        self._internal.discard(rid)
        if request is not None and rid == self._hello_rid:
            self._greeted(message)
            return
        if isinstance(message, Seated):
            self.seats[message.game_id] = (message.seat, message.token)
        elif isinstance(message, Resumed) and message.seat is not None and message.token:
            self.seats[message.game_id] = (message.seat, message.token)
        if isinstance(message, Error) and request is not None:
            self._refused(request, message, internal)
        if request is not None and not internal:
            self._events.append(Reply(rid, message))  # type: ignore[arg-type]
        if isinstance(message, GAME_EVENTS) and self._seen(message):
            return  # already delivered before a reconnection
        if not (internal and isinstance(message, Error)):
            self._events.append(Received(message, request is not None))

    def _seen(self, event: Message) -> bool:
        game_id: str = event.game_id  # type: ignore[attr-defined]
        seq: int = event.seq  # type: ignore[attr-defined]
        self.seen_seq[game_id] = max(seq, self.seen_seq.get(game_id, 0))
        if isinstance(event, Snapshot):
            # A game still open has no events to resume from: it is followed from 0.
            if event.status != "open":
                self.last_seq[game_id] = seq
            return False
        if seq <= self.last_seq.get(game_id, 0):
            return True
        self.last_seq[game_id] = seq
        if isinstance(event, Ended):
            self.last_seq.pop(game_id, None)  # nothing more to resume
            self.watching.discard(game_id)
        return False

    def _refused(self, request: Message, error: Error, internal: bool) -> None:
        if isinstance(request, Watch):
            self.watching.discard(request.game_id)
        if isinstance(request, Resume | Watch) and internal:
            self.forget(request.game_id)
            self._events.append(NotResumed(request.game_id, error))

    # --- greeting and resuming -------------------------------------------------------------

    def _send_hello(self) -> None:
        fields: dict[str, Any] = {
            "version": OLDEST_PROTOCOL_VERSION,  # welcome names the server's
            "name": self.name,
            "bot": self.bot,
            "client": self.client,
        }
        if self.session is not None:
            fields["session"] = self.session
        self._hello_rid = self._internal_request(Hello, **fields)

    def _greeted(self, reply: Message) -> None:
        self._hello_rid = None
        if isinstance(reply, Error) and reply.code == "bad_token" and self.session is not None:
            # The server no longer knows the session (a new database): start afresh.
            self.session = None
            self.seats.clear()
            self._send_hello()
            return
        if not isinstance(reply, Welcome):
            error = reply if isinstance(reply, Error) else Error(code="bad_reply", message="")
            self._events.append(Refused(error))
            return
        self.session, self.welcome = reply.session, reply
        for game in reply.games:
            self.seats[game["game_id"]] = (game["seat"], game["token"])
        again = self._welcomes > 0
        self._welcomes += 1
        if again:
            self._resume_all(reply)
        self._events.append(Welcomed(reply, again))

    def _resume_all(self, welcome: Welcome) -> None:
        """Follow again every game followed before, and every unfinished game of ours the
        welcome names (one still open has no seq yet; only a follower gets the snapshot of
        its start), each from its last seq; then the lobby."""
        played = dict.fromkeys(g for g in self.last_seq if g not in self.watching)
        played.update(dict.fromkeys(g["game_id"] for g in welcome.games))
        for game_id in played:
            self._internal_request(Resume, game_id=game_id, since=self.last_seq.get(game_id, 0))
        for game_id in sorted(self.watching):
            self._internal_request(Watch, game_id=game_id, since=self.last_seq.get(game_id, 0))
        if self.lobby is not None:
            self._internal_request(LobbySubscribe, **self.lobby)

    def _internal_request(self, kind: type[Message], **fields: Any) -> int:
        rid = next(self._rids)
        request = kind(rid=rid, **fields)  # type: ignore[call-arg]
        self._pending[rid] = request
        self._internal.add(rid)
        self._out.append(encode(request))
        return rid

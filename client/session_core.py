"""The client's side of the protocol as a pure state machine: frames in, frames and events out.

``ClientSession`` does no I/O, reads no clock and holds no socket, as websockets'
``Protocol`` and h11's ``Connection``: the I/O layer (``client.connection``) tells it that a
connection opened (``connection_made``) or closed (``connection_lost``), feeds it every
frame received (``receive_frame``), sends what ``data_to_send`` returns and acts on what
``events_received`` returns. It owns what every client needs and once wrote for itself:

- request ids, and which request each reply answers (``Reply``);
- the greeting: ``hello`` with the session of the earlier ``welcome`` (a fresh one when the
  server no longer knows it, ``bad_token``), saying the newest protocol version we speak,
  or version 1 once a server older than us refused it (``version_mismatch``: the I/O layer
  connects once more);
- the seats (game -> seat, token) from ``welcome``, ``seated`` and ``resumed``, and the
  token of every request for a seat's game (a server restored from its database issues new
  tokens in its welcome: a token kept anywhere else would go stale);
- the last ``seq`` seen per game followed, so an event seen already is never delivered
  twice; and in every game request (resign, abort, draw, claim, rematch) to a server that
  takes it, the ``seq`` seen when it was first sent, so that sending it again is harmless
  (PROTOCOL.md, "A request sent again");
- what to send again after a reconnection (PROTOCOL.md, resume): ``resume`` for every game
  played or ours, ``watch`` with ``since`` for every game watched (a ``resume`` would leave
  the server unable to ``unwatch`` it), the lobby subscription; one the server cannot serve
  now (``unavailable``: its database is down; ``rate_limited``) stays followed and is asked
  for again (``ResumeWaiting``: the I/O layer calls ``resume_again`` after a backoff);
- our seeks and quick-pairing entries still standing (``standing``): the server drops them
  with the connection that posted them (PROTOCOL.md, seek), so, as Lichess's clients do, a
  reconnection posts them again (``SeekReposted``: a new id, or the refusal), a quick
  entry's AI still due when it first was; a ``cancel_seek`` naming an earlier id cancels
  the entry as it is now.

Time is passed in (``now``, any monotonic clock), read by no one else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import random
from dataclasses import dataclass
from typing import Any

import msgpack

from protocol import (
    GAME_EVENTS,
    OLDEST_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    REMATCH_CLOSED_SINCE_VERSION,
    SEQ_SINCE_VERSION,
    Abort,
    CancelSeek,
    Claim,
    Draw,
    Ended,
    Error,
    Hello,
    LobbySubscribe,
    Message,
    Offer,
    ProtocolError,
    QuickPair,
    Rematch,
    RematchClosed,
    Resign,
    Resume,
    Resumed,
    Seated,
    Seek,
    SeekDeclined,
    SeekPosted,
    Snapshot,
    Unwatch,
    Watch,
    Welcome,
    decode_server,
    encode,
)

# Refusals of a resume (or watch) after a reconnection that say "not now", not "never": the
# game is kept and asked for again (PROTOCOL.md, Errors: "retry later").
RESUME_LATER = ("unavailable", "rate_limited")

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


@dataclass(frozen=True, slots=True)
class ResumeWaiting:
    """After a reconnection the server cannot resume (or watch) ``game_id`` now (``error``:
    ``unavailable``, ``rate_limited``): it is still followed; the I/O layer calls
    ``resume_again`` after a wait (``attempt``: 0, 1, ... refusals in a row before this one,
    for its backoff). A reconnection meanwhile resumes it too."""

    game_id: str
    error: Error
    attempt: int


@dataclass(frozen=True, slots=True)
class SeekReposted:
    """After a reconnection, a seek or quick-pairing entry of ours (``first_id``: the id its
    request got; ``previous_id``: its id before the drop) was posted again as ``request`` (a
    quick entry's ``ai_after_s``: the seconds left of its first wait) and is ``seek_id`` now;
    or the server refused it (``error``, ``seek_id`` None): it is gone."""

    first_id: str
    previous_id: str
    request: Seek | QuickPair
    seek_id: str | None = None
    error: Error | None = None


SessionEvent = (
    Reply | Received | Welcomed | Refused | Failed | NotResumed | ResumeWaiting | SeekReposted
)


@dataclass(slots=True)
class Standing:
    """A seek or quick-pairing entry of ours: the request that posted it last, its id now,
    and (a quick entry with an AI fallback) when the AI is due, on the caller's clock."""

    request: Seek | QuickPair
    seek_id: str
    ai_due: float | None


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


# How many suffixed names a ``rename_if_taken`` session tries: each is a new session the
# server counts against the address (PROTOCOL.md, Players, names and sessions).
RENAMES = 5


def suffixed(name: str, number: int) -> str:
    """``name`` with ``-number`` after it, within the 20 characters of a name (PROTOCOL.md,
    Names): ``root`` 2 is ``root-2``."""
    suffix = f"-{number}"
    return name[: 20 - len(suffix)].rstrip(" -_.") + suffix


def made_by_create(create: dict[str, Any], record: dict[str, Any], seat: int) -> bool:
    """Whether the game ``record`` (``get``'s), in which we hold ``seat``, may be the one a
    ``create`` with the fields ``create`` made: the same game, parameters, clock, our seat
    (unless drawn by lot) and opponent (the AI with its algorithm and budget, or a human's
    seat); a request whose reply was lost with the connection is looked for so before it
    is sent again (PROTOCOL.md has no idempotency key for ``create``)."""

    def clock(value: Any) -> dict[str, Any]:
        return {k: v for k, v in dict(value or {}).items() if v}

    players = record.get("players") or []
    if len(players) != 2 or create.get("seat", 0) not in (-1, seat):
        return False
    same = (
        record.get("game") == create.get("game")
        and dict(record.get("params") or {}) == dict(create.get("params") or {})
        and clock(record.get("clock")) == clock(create.get("clock"))
    )
    opponent = players[1 - seat] or {}
    if create.get("opponent", "ai") != "ai":
        return same and opponent.get("kind") != "ai"
    algorithm = create.get("algorithm", "")
    return (
        same
        and opponent.get("kind") == "ai"
        and opponent.get("budget_ms") == create.get("budget_ms", 200)
        and algorithm in ("", opponent.get("algorithm"))
    )


def unreadable(frame: bytes | str, exc: ProtocolError) -> Error:
    """An error standing for a server frame the codec refused, with the frame's ``rid`` and
    ``game_id`` when they can be read from it: never dropped in silence (a game's view says
    the errors of its game, and an event of a game has no ``rid``)."""
    rid = game_id = None
    with contextlib.suppress(Exception):
        body = msgpack.unpackb(frame, raw=False, strict_map_key=False)
        if type(body.get("rid")) is int:
            rid = body["rid"]
        if type(body.get("game_id")) is str and 0 < len(body["game_id"]) <= 32:
            game_id = body["game_id"]
    text = f"cannot read a frame from the server: {exc.message}"
    return Error(code=exc.code.value, message=text[:1024], rid=rid, game_id=game_id)


class ClientSession:
    """One player's session with a server, across any number of connections."""

    def __init__(
        self,
        *,
        name: str = "anonymous",
        bot: bool = False,
        client: str = "noughts",
        session: str | None = None,
        rename_if_taken: bool = False,
    ) -> None:
        """``rename_if_taken``: a new session whose name another session holds
        (``name_taken``) takes the name with a suffix instead (``renamed_from``): for a
        server on the user's own database only (an embedded one), where that other session
        is the user's own, its token lost with the sessions file."""
        self.name = name
        self.asked_name = name
        self.rename_if_taken = rename_if_taken
        self.renamed_from: str | None = None  # the name asked for, if this run took another
        self._renames = 0
        self.bot = bot
        self.client = client
        self.session = session  # the token of the last welcome (or one saved from a run before)
        self.welcome: Welcome | None = None
        # The version our hello says: the newest we speak, or the oldest once a server
        # refused that one (an older server); then we speak to every server as to version 2.
        self.version = PROTOCOL_VERSION
        self.connected = False
        self.seats: dict[str, tuple[int, str]] = {}  # game_id -> (seat, token)
        self.last_seq: dict[str, int] = {}  # game_id -> seq of the last event delivered
        # game_id -> the highest seq seen, kept after the game's end (a rematch's ``seq``)
        self.seen_seq: dict[str, int] = {}
        self.watching: set[str] = set()  # games followed as a spectator (``watch``)
        # watched games followed on past their end, for their rematch (watch --rematches):
        # watched again from their last seq after a reconnection, as a live one is
        self.past_end: set[str] = set()
        self.lobby: dict[str, Any] | None = None  # the fields of the lobby subscription
        # game_id -> refusals in a row of its resume (or watch) that said "later"
        self.resume_waiting: dict[str, int] = {}
        self.standing: dict[str, Standing] = {}  # our seeks and quick entries, by first id
        self._seek_ids: dict[str, str] = {}  # every id of a standing entry -> its first id
        self._reposting: dict[int, str] = {}  # rid of a seek posted again -> its first id
        self._repost_due = False  # greeted again: the standing entries are to be posted
        # Games seated without a request of ours (a seek of ours accepted, a quick pairing):
        # their first snapshot says which standing entry each took; reposts wait for it.
        self._taking: set[str] = set()
        self._rematches: set[str] = set()  # rematches agreed: seated, but by no entry
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
        self._reposting.clear()
        self._repost_due = False
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
        if kind is CancelSeek:
            entry = self._drop(str(fields.get("seek_id")))
            if entry is not None:  # named by an earlier id: cancel the entry as it is now
                fields = fields | {"seek_id": entry.seek_id}
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

    @property
    def told_rematch_closed(self) -> bool:
        """The server greeting us tells when a finished game's rematch window closes
        (``rematch_closed``, protocol version 3): it speaks version 3 and so did our hello."""
        return (
            self.welcome is not None
            and self.welcome.version >= REMATCH_CLOSED_SINCE_VERSION
            and self.version >= REMATCH_CLOSED_SINCE_VERSION
        )

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
        self.past_end.discard(game_id)
        self.resume_waiting.pop(game_id, None)

    def watch_past_end(self, game_id: str, seq: int) -> None:
        """Follow a watched game that ended (at ``seq``) on, for its rematch: after a
        reconnection it is watched again from its last seq (the rematch's ``offer`` missed
        meanwhile comes then), until ``unwatch``, or the server refuses it (no longer kept:
        ``NotResumed``)."""
        self.past_end.add(game_id)
        self.watching.add(game_id)
        self.last_seq[game_id] = max(seq, self.last_seq.get(game_id, 0))

    def release(self, game_id: str) -> None:
        """Forget a game for good (its seat, the seqs seen): a client that plays for days
        keeps nothing of its games done with (a bot)."""
        self.forget(game_id)
        self.seats.pop(game_id, None)
        self.seen_seq.pop(game_id, None)

    def resume_again(self, game_id: str) -> None:
        """Ask again for a game whose resume (or watch) the server could not serve
        (``ResumeWaiting``), unless it is no longer waited for, the connection is not greeted
        now (the next welcome resumes it), or a request for it is in flight."""
        if game_id not in self.resume_waiting or not self.connected or self._hello_rid is not None:
            return
        for request in self._pending.values():
            if isinstance(request, Resume | Watch) and request.game_id == game_id:
                return
        kind = Watch if game_id in self.watching else Resume
        self._internal_request(kind, game_id=game_id, since=self.last_seq.get(game_id, 0))

    def receive_frame(self, frame: bytes | str, now: float = 0.0) -> None:
        """A frame from the server, received at ``now``."""
        try:
            message = decode_server(frame)
        except ProtocolError as exc:
            message = unreadable(frame, exc)
        self.receive(message, now)

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

    def receive(self, message: Message, now: float = 0.0) -> None:
        """A decoded message from the server, received at ``now``."""
        rid = getattr(message, "rid", None)
        request = self._pending.pop(rid, None) if rid is not None else None
        internal = rid in self._internal
        self._internal.discard(rid)
        if request is not None and rid == self._hello_rid:
            self._greeted(message, now)
            return
        if request is not None and rid in self._reposting:
            self._reposted(self._reposting.pop(rid), request, message)
            return
        if isinstance(request, Seek | QuickPair) and isinstance(message, SeekPosted):
            ai_after = request.ai_after_s if isinstance(request, QuickPair) else 0
            entry = Standing(request, message.seek_id, now + ai_after if ai_after else None)
            self.standing[message.seek_id] = entry
            self._seek_ids[message.seek_id] = message.seek_id
        self._follow_standing(message, request, now)
        if isinstance(message, Seated):
            self.seats[message.game_id] = (message.seat, message.token)
        elif isinstance(message, Resumed) and message.seat is not None and message.token:
            self.seats[message.game_id] = (message.seat, message.token)
        if isinstance(message, Error) and request is not None:
            self._refused(request, message, internal)
        elif isinstance(request, Resume | Watch) and internal:
            self.resume_waiting.pop(request.game_id, None)  # followed again
        if request is not None and not internal:
            self._events.append(Reply(rid, message))  # type: ignore[arg-type]
        if isinstance(message, GAME_EVENTS) and self._seen(message):
            return  # already delivered before a reconnection
        if isinstance(message, RematchClosed):
            self.forget(message.game_id)  # the server no longer follows it
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
        if isinstance(event, Ended) and game_id not in self.past_end:
            self.last_seq.pop(game_id, None)  # nothing more to resume
            self.watching.discard(game_id)
        return False

    def _refused(self, request: Message, error: Error, internal: bool) -> None:
        if isinstance(request, Resume | Watch) and internal and error.code in RESUME_LATER:
            attempt = self.resume_waiting.get(request.game_id, 0)
            self.resume_waiting[request.game_id] = attempt + 1
            self._events.append(ResumeWaiting(request.game_id, error, attempt))
            return
        if isinstance(request, Watch):
            self.watching.discard(request.game_id)
        if isinstance(request, Resume | Watch) and internal:
            self.forget(request.game_id)
            self._events.append(NotResumed(request.game_id, error))

    # --- our seeks and quick-pairing entries -------------------------------------------------

    def _follow_standing(self, message: Message, request: Message | None, now: float) -> None:
        """What a message says of our standing entries: one declined (a challenge), or taken
        by a game that seated us without a request of ours (PROTOCOL.md: seek, quick), which
        its first snapshot tells (the same game; an AI opponent only for a quick entry); a
        game of which no snapshot comes (its ``resume`` answered or refused) took none."""
        if not self.standing:
            return
        if isinstance(message, SeekDeclined):
            self._drop(message.seek_id)
        elif isinstance(message, Offer | Snapshot) and message.next_game:
            self._rematches.add(message.next_game)  # (its offer comes before its seat)
        told = message.game_id if isinstance(message, Snapshot | Resumed) else None
        if isinstance(request, Resume) and isinstance(message, Error):
            told = request.game_id
        if isinstance(message, Seated) and message.rid is None:
            if message.game_id in self._rematches:
                self._rematches.discard(message.game_id)
            elif message.game_id not in self.seats:
                self._taking.add(message.game_id)
        elif told in self._taking:
            self._taking.discard(told)
            if isinstance(message, Snapshot):
                self._taken(message)
            self._repost(now)

    def _taken(self, start: Snapshot) -> None:
        against_ai = any(p is not None and p.get("kind") == "ai" for p in start.players)
        seat = self.seats.get(start.game_id, (None, ""))[0]

        def could_be(request: Seek | QuickPair) -> bool:
            if isinstance(request, QuickPair):
                return True
            if against_ai:  # (a seek is taken by a player)
                return False
            return seat is None or request.color in ("random", "xo"[seat])

        same = [
            entry
            for entry in self.standing.values()
            if entry.request.game == start.game and could_be(entry.request)
        ]
        exact = [e for e in same if dict(e.request.params) == dict(start.params)]
        for entry in (exact or same)[:1]:
            self._drop(entry.seek_id)

    def _drop(self, seek_id: str) -> Standing | None:
        """Forget the standing entry that is or was ``seek_id``; it, if there was one."""
        first = self._seek_ids.get(seek_id)
        entry = self.standing.pop(first, None) if first is not None else None
        if entry is not None:
            self._seek_ids = {i: f for i, f in self._seek_ids.items() if f != first}
        if not self.standing:  # nothing left to tell apart
            self._taking.clear()
            self._rematches.clear()
        return entry

    def _repost(self, now: float) -> None:
        """Once greeted again and no seat given meanwhile is still to be told apart, post
        every standing entry again (the server dropped them with the connection), a quick
        entry's AI due when it was (at least a second on: 0 would be never)."""
        if not self._repost_due or self._taking:
            return
        self._repost_due = False
        for first, entry in self.standing.items():
            request = entry.request
            if isinstance(request, QuickPair) and entry.ai_due is not None:
                request = dataclasses.replace(
                    request, ai_after_s=max(1, math.ceil(entry.ai_due - now))
                )
            fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
            del fields["rid"]
            self._reposting[self._internal_request(type(request), **fields)] = first

    def _reposted(self, first: str, request: Message, reply: Message) -> None:
        entry = self.standing.get(first)
        if entry is None or not isinstance(request, Seek | QuickPair):
            # Cancelled meanwhile, under its id before: cancelled now.
            if isinstance(reply, SeekPosted):
                self._internal_request(CancelSeek, seek_id=reply.seek_id)
            return
        previous = entry.seek_id
        if isinstance(reply, SeekPosted):
            entry.request, entry.seek_id = request, reply.seek_id
            self._seek_ids[reply.seek_id] = first
            self._events.append(SeekReposted(first, previous, request, seek_id=reply.seek_id))
            return
        self._drop(first)
        error = reply if isinstance(reply, Error) else Error(code="bad_reply", message="")
        self._events.append(SeekReposted(first, previous, request, error=error))

    # --- greeting and resuming -------------------------------------------------------------

    def _send_hello(self) -> None:
        fields: dict[str, Any] = {
            "version": self.version,  # the newest we speak; welcome names the server's
            "name": self.name,
            "bot": self.bot,
            "client": self.client,
        }
        if self.session is not None:
            fields["session"] = self.session
        self._hello_rid = self._internal_request(Hello, **fields)

    def _greeted(self, reply: Message, now: float) -> None:
        self._hello_rid = None
        if isinstance(reply, Error) and reply.code == "bad_token" and self.session is not None:
            # The server no longer knows the session (a new database): start afresh.
            self.session = None
            self.seats.clear()
            self._send_hello()
            return
        if (
            isinstance(reply, Error)
            and reply.code == "name_taken"
            and self.rename_if_taken
            and self.session is None
            and self._renames < RENAMES
        ):
            self._renames += 1
            self.name = suffixed(self.asked_name, self._renames + 1)
            self._send_hello()
            return
        if not isinstance(reply, Welcome):
            error = reply if isinstance(reply, Error) else Error(code="bad_reply", message="")
            if error.code == "version_mismatch" and self.version > OLDEST_PROTOCOL_VERSION:
                # A server older than us (it closes the connection, 4001): the next hello
                # says the oldest version, which every server speaks.
                self.version = OLDEST_PROTOCOL_VERSION
            self._events.append(Refused(error))
            return
        if self._renames and self.welcome is None:
            self.renamed_from = self.asked_name
        self.session, self.welcome = reply.session, reply
        if self.standing:  # a seat given while away may have taken one (_follow_standing)
            self._taking.update(g["game_id"] for g in reply.games if g["game_id"] not in self.seats)
            self._taking -= self._rematches
        for game in reply.games:
            self.seats[game["game_id"]] = (game["seat"], game["token"])
        again = self._welcomes > 0
        self._welcomes += 1
        if again:
            self._resume_all(reply)
            self._repost_due = bool(self.standing)
            self._repost(now)
        self._events.append(Welcomed(reply, again))

    def _resume_all(self, welcome: Welcome) -> None:
        """Follow again every game followed before (one whose resume waits included), and
        every unfinished game of ours the welcome names (one still open has no seq yet; only
        a follower gets the snapshot of its start), each from its last seq; then the lobby."""
        played = dict.fromkeys(g for g in self.last_seq if g not in self.watching)
        played.update(dict.fromkeys(g for g in self.resume_waiting if g not in self.watching))
        played.update(dict.fromkeys(g["game_id"] for g in welcome.games))
        self._taking.intersection_update(played)  # the others tell nothing more
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

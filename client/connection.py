"""The network half of every client: one websocket connection under the session core.

``ServerConnection`` is the thin asyncio layer around ``client.session_core.ClientSession``
(websockets' way: a sans-I/O core, I/O around it). It knows nothing of terminals: the
plain client, the Textual UI, the spectator and bots all drive it. Replies are matched by
``rid``; game events (snapshots, moves, offers, presence, endings, and a finished game's
``rematch_closed``) land in ``events``
and lobby changes (a challenge of ours declined too) in ``lobby_events``, or, with
``deliver``, every message goes to that callback instead.

With ``reconnect=True`` a dropped connection is reopened by itself, after waits drawn by
the one reconnection policy (``Backoff``: exponential, full jitter): hello with the same
session, then what the core sends again (``resume`` of each game played from the last
``seq`` seen, ``watch`` of each game watched, the lobby), so ``events`` carries on
without a gap or a duplicate; our seeks and quick-pairing entries are posted again, each
told as a ``SeekReposted`` (its new id, or the refusal) in ``seek_notices``, or to
``deliver``. A game the server cannot resume now (``unavailable``: its database is down) is
asked for again after waits drawn by the same ``Backoff``, the first refusal told as an
error with its ``game_id`` (in ``errors``, or to ``deliver``). Requests in flight when the
connection dropped fail with ConnectionLost (the caller may send them again). ``start`` does
the same from the first connection on (the UI: it waits for a server that is not up yet).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from client.session_core import (
    Backoff,
    ClientSession,
    Failed,
    NotResumed,
    Received,
    Refused,
    Reply,
    ResumeWaiting,
    SeekReposted,
    SessionEvent,
    Welcomed,
    made_by_create,
)
from protocol import (
    GAME_EVENTS,
    MAX_SERVER_FRAME,
    OLDEST_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    CreateGame,
    Error,
    GetGame,
    LobbyEvent,
    LobbyState,
    Message,
    Ping,
    RematchClosed,
    Seated,
    SeekDeclined,
    Welcome,
)

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
# Errors that mean "the server cannot be reached now": try again later.
UNREACHABLE = (OSError, InvalidHandshake, TimeoutError)
OPEN_TIMEOUT_S = 10.0  # for the websocket's opening handshake
LOST_CREATES_KEPT = 8  # creates whose reply was lost, looked for before one is sent again


class ServerUnreachable(OSError):
    """No connection to ``url``: its reason in words a user can act on (an OSError, as the
    errors it stands for)."""

    def __init__(self, url: str, cause: BaseException) -> None:
        self.url = url
        self.reason = unreachable_reason(cause)
        super().__init__(f"cannot reach {url}: {self.reason}")


def unreachable_reason(exc: BaseException) -> str:
    """Why a connection could not be opened, in one line."""
    import socket
    import ssl

    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is a noughts server running there?)"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    if isinstance(exc, TimeoutError):
        return f"no answer within {OPEN_TIMEOUT_S:g} s"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    if isinstance(exc, InvalidStatus):  # a server that answered the handshake with a refusal
        response = exc.response
        said = (
            response.body.decode("utf-8", "replace").strip().splitlines() if response.body else []
        )
        detail = f": {said[0][:200]}" if said else ""
        return f"the server refused the connection (HTTP {response.status_code}{detail})"
    if isinstance(exc, InvalidHandshake):
        return f"not a websocket server ({exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def server_url(text: str) -> str:
    """A server address as users write it: ``ws://`` or ``wss://`` URLs as they are, and a
    bare ``host:port`` as ``ws://host:port``. ValueError with a one-line reason otherwise."""
    from urllib.parse import urlsplit

    text = text.strip()
    if "://" not in text:
        text = f"ws://{text}"
    parts = urlsplit(text)
    if parts.scheme not in ("ws", "wss"):
        raise ValueError(
            f"{parts.scheme}:// is not a websocket address: give ws://HOST:PORT, wss://HOST:PORT "
            "or HOST:PORT"
        )
    if not parts.hostname:
        raise ValueError(f"no host in {text!r}: give ws://HOST:PORT or HOST:PORT")
    try:
        parts.port  # noqa: B018 - reading it checks it
    except ValueError:
        raise ValueError(f"the port of {text!r} is not a number in 0..65535") from None
    return text


def plain_text_warning(url: str) -> str | None:
    """The warning for a session that would travel unencrypted: a ``ws://`` URL (not
    ``wss://``) to a host that is not this machine's loopback (``localhost``, 127.0.0.0/8,
    ``::1``), where anyone on the way can read the session token of the hello, as good as
    a password there; None otherwise."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".")  # (in lower case)
    except ValueError:
        return None
    if parts.scheme.lower() != "ws" or host == "localhost" or host.endswith(".localhost"):
        return None  # (RFC 6761: localhost names are the loopback's)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address is not None and address.is_loopback:
        return None
    return (
        f"warning: ws:// is not encrypted: your session travels in clear to {host}; "
        "use wss:// if the server offers it"
    )


class RequestFailed(Exception):
    """The server answered a request with an error message."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.code = error.code
        self.message = error.message
        self.error = error


class ConnectionLost(Exception):
    """The connection closed while a request waited for its reply."""


class ServerConnection:
    """A client session with a server over one websocket at a time."""

    def __init__(
        self,
        url: str,
        *,
        name: str = "anonymous",
        bot: bool = False,
        client: str = "noughts",
        session: str | None = None,
        reconnect: bool = False,
        reconnect_for_s: float | None = 300.0,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        deliver: Callable[[Message | SeekReposted], object] | None = None,
        on_status: Callable[[str, str], object] | None = None,
        on_welcome: Callable[[Welcome, bool], object] | None = None,
        rename_if_taken: bool = False,
    ) -> None:
        """``reconnect_for_s``: how long to keep trying after a drop (None: until closed).
        ``deliver``: called with every message (and ``SeekReposted``) instead of queueing
        it. ``on_status``: called with each (status, detail); ``on_welcome`` with each
        welcome and whether it is a reconnection's (the games followed are being followed
        again). ``rename_if_taken``: for an embedded server (``ClientSession``)."""
        self.url = url
        self.core = ClientSession(
            name=name, bot=bot, client=client, session=session, rename_if_taken=rename_if_taken
        )
        self.reconnect = reconnect
        self.reconnect_for_s = reconnect_for_s
        self.backoff = backoff or Backoff()
        self.rng = rng or random.Random()
        self.deliver = deliver
        self.on_status = on_status
        self.on_welcome = on_welcome
        self.websocket: ClientConnection | None = None
        self.events: asyncio.Queue[Message] = asyncio.Queue()
        self.lobby_events: asyncio.Queue[Message] = asyncio.Queue()
        self.errors: asyncio.Queue[Error] = asyncio.Queue()  # errors not tied to a request
        self.seek_notices: asyncio.Queue[SeekReposted] = asyncio.Queue()
        # "connecting", "connected", "reconnecting" or "closed", each change also put on
        # ``status_changes``; ``status_detail`` says why, for a person.
        self.status = "closed"
        self.status_detail = ""
        self.status_changes: asyncio.Queue[str] = asyncio.Queue()
        self.closed = asyncio.Event()
        self.up = asyncio.Event()  # greeted on the connection open now
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._welcomed: asyncio.Future[Welcome] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._resume_retries: set[asyncio.Task[None]] = set()
        # Creates whose reply was lost with the connection: (fields, the seats held before).
        self._lost_creates: list[tuple[dict[str, Any], set[str]]] = []
        self._closing = False

    @classmethod
    async def connect(cls, url: str, **options: Any) -> ServerConnection:
        """Connect and greet the server (errors of the first attempt raise), then, with
        ``reconnect=True``, reconnect after every drop."""
        connection = cls(url, **options)
        await connection._open()
        if connection.reconnect:
            connection._supervisor = asyncio.get_running_loop().create_task(
                connection._supervise(connected=True)
            )
        return connection

    def start(self) -> None:
        """Connect in the background, trying again (``backoff``) until connected, then
        reconnect after every drop, until ``close``: for a client that waits for its
        server (the UI). Progress comes through ``on_status``."""
        self.reconnect = True
        self._supervisor = asyncio.get_running_loop().create_task(self._supervise(connected=False))

    # --- what the core knows -----------------------------------------------------------------

    @property
    def welcome(self) -> Welcome | None:
        return self.core.welcome

    @property
    def session(self) -> str | None:
        return self.core.session

    @property
    def player_id(self) -> str | None:
        return self.core.welcome.player_id if self.core.welcome else None

    @property
    def seats(self) -> dict[str, tuple[int, str]]:
        return self.core.seats

    @property
    def last_seq(self) -> dict[str, int]:
        return self.core.last_seq

    @property
    def seen_seq(self) -> dict[str, int]:
        return self.core.seen_seq

    def token_for(self, game_id: str) -> str | None:
        return self.core.token_for(game_id)

    def forget(self, game_id: str) -> None:
        """Stop following a game after a reconnection (no longer watched, or left)."""
        self.core.forget(game_id)

    def release(self, game_id: str) -> None:
        """Forget a game for good: its seat and the seqs seen (``ClientSession.release``)."""
        self.core.release(game_id)

    # --- opening, greeting, reconnecting -------------------------------------------------------

    def _set_status(self, status: str, detail: str = "") -> None:
        self.status_detail = detail
        if status != self.status:
            self.status = status
            self.status_changes.put_nowait(status)
        if self.on_status is not None:
            self.on_status(status, detail)

    async def _open(self) -> Welcome:
        """Open a connection and greet the server: every connection, the first and each
        reconnection, opens here. A server older than this client refuses the version our
        hello says, the newest we speak (``version_mismatch``, and it closes the connection):
        once, a new connection says hello with version 1 (the core's choice from then on, as
        to a server of version 2); a second refusal is a RequestFailed saying so in a line."""
        said = self.core.version
        try:
            return await self._open_once()
        except RequestFailed as exc:
            if exc.code != "version_mismatch" or self.core.version == said:
                raise
            log.info("%s: %s; saying hello with version %d", self.url, exc, self.core.version)
        if self._reader is not None:  # (its end tells the core: before the new connection)
            await asyncio.wait({self._reader})
        self.closed.clear()
        try:
            return await self._open_once()
        except RequestFailed as exc:
            if exc.code != "version_mismatch":
                raise
            text = (
                f"no protocol version in common with the server (this client speaks "
                f"{OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}): {exc.message}"
            )
            raise RequestFailed(Error(code=exc.code, message=text[:1024])) from exc

    async def _open_once(self) -> Welcome:
        try:
            websocket = await websockets.connect(
                self.url, max_size=MAX_SERVER_FRAME, compression=None, open_timeout=OPEN_TIMEOUT_S
            )
        except UNREACHABLE as exc:
            raise ServerUnreachable(self.url, exc) from exc
        self.websocket = websocket
        self._welcomed = asyncio.get_running_loop().create_future()
        self.core.connection_made()
        self._reader = asyncio.get_running_loop().create_task(self._read(websocket))
        try:
            await self._flush()
            welcome = await asyncio.wait_for(asyncio.shield(self._welcomed), 30)
        except BaseException:
            await websocket.close()
            raise
        return welcome

    async def _supervise(self, *, connected: bool) -> None:
        """Reconnect after every drop (and connect at first unless ``connected``), waiting
        ``backoff`` between attempts, until closed or ``reconnect_for_s`` without success."""
        loop = asyncio.get_running_loop()
        attempt = 0
        down_since = loop.time()
        if not connected:
            self._set_status("connecting", self.url)
        while not self._closing:
            if connected:
                assert self._reader is not None
                await asyncio.shield(self._reader)
                if self._closing:
                    return
                connected, attempt, down_since = False, 0, loop.time()
                self._set_status("reconnecting", "connection lost; reconnecting...")
                await asyncio.sleep(self.backoff.delay(attempt, self.rng))
                attempt += 1
            try:
                await self._open()
                connected = True
                continue
            except RequestFailed as exc:
                self._set_status("closed", f"the server refused us: {exc.message}")
                self.closed.set()
                return
            except (*UNREACHABLE, ConnectionLost) as exc:
                log.info("connecting to %s: %s", self.url, exc)
                if self.reconnect_for_s is not None and loop.time() - down_since > (
                    self.reconnect_for_s
                ):
                    self._set_status("closed", _unreachable(self.url, exc))
                    self.closed.set()
                    return
                wait = self.backoff.delay(attempt, self.rng)
                attempt += 1
                self._set_status(
                    "reconnecting", f"{_unreachable(self.url, exc)}; retrying in {wait:.1f} s"
                )
                await asyncio.sleep(wait)

    # --- requests ------------------------------------------------------------------------

    async def request(self, kind: type[M], *, again: bool = False, **fields: Any) -> Any:
        """Send a request and wait for its reply; raises RequestFailed on an error reply,
        ConnectionLost when not connected or when the connection drops first. With ``again``
        (for requests that change nothing: ``get``, ``list``; and game requests, which carry
        the ``seq`` they were first sent with: PROTOCOL.md, "A request sent again"), a
        request the connection dropped under is sent again once reconnected, until the
        connection closes for good. A ``create`` whose reply was lost with the connection
        may have made its game: one like it sent later is answered by that game instead, if
        a seat the welcome brought back is in it (``made_by_create``), with a ``Seated``
        without ``rid`` (nothing was delivered of it: the caller resumes it)."""
        if kind is CreateGame and self._lost_creates:
            made = await self._made_while_away(fields)
            if made is not None:
                return made
        if again:
            fields = self.core.with_seq(kind, fields)
        while again and self.reconnect:
            try:
                return await self.request(kind, **fields)
            except ConnectionLost:
                await self.reconnected()
        if self.websocket is None or not self.core.connected:
            raise ConnectionLost("not connected to the server")
        held = set(self.core.seats) if kind is CreateGame else set()
        rid = self.core.send_request(kind, **fields)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await self._flush()
            try:
                reply = await future
            except ConnectionLost:
                if kind is CreateGame:  # sent: its game may have been made
                    lost = (fields, held)
                    self._lost_creates = [*self._lost_creates, lost][-LOST_CREATES_KEPT:]
                raise
        finally:
            self._pending.pop(rid, None)
        if isinstance(reply, Error):
            raise RequestFailed(reply)
        return reply

    async def _made_while_away(self, fields: dict[str, Any]) -> Message | None:
        """The game a lost ``create`` with these ``fields`` made, as a ``Seated`` without
        ``rid``: a seat held now, not before it was sent, in a game like the one it asked for
        (its record read with ``get``); None if there is none (it was not made, or its game
        is not listed yet)."""
        for lost in list(self._lost_creates):
            if lost[0] != fields:
                continue
            for game_id, (seat, token) in list(self.core.seats.items()):
                if game_id in lost[1]:
                    continue
                try:
                    record = (await self.request(GetGame, game_id=game_id)).game
                except RequestFailed:
                    continue
                if made_by_create(fields, record, seat) and lost in self._lost_creates:
                    self._lost_creates.remove(lost)
                    for _, held in self._lost_creates:
                        held.add(game_id)  # (taken: no other create made it)
                    return Seated(game_id=game_id, seat=seat, token=token)
        return None

    async def reconnected(self) -> None:
        """Wait until greeted again; ConnectionLost if the connection closes for good."""
        up = asyncio.ensure_future(self.up.wait())
        closed = asyncio.ensure_future(self.closed.wait())
        await asyncio.wait({up, closed}, return_when=asyncio.FIRST_COMPLETED)
        up.cancel()
        closed.cancel()
        if not self.up.is_set():
            raise ConnectionLost(self.status_detail or "the connection to the server closed")

    async def resynced(self) -> None:
        """Reconnected, with every game event missed meanwhile delivered: the session core
        resumes each game at once after the welcome, and the server answers requests in
        order, so a ping's reply comes after them. ConnectionLost if gone for good."""
        while True:
            await self.reconnected()
            try:
                await self.request(Ping)
                return
            except ConnectionLost:
                continue

    async def _flush(self) -> None:
        websocket = self.websocket
        for frame in self.core.data_to_send():
            if websocket is None:
                raise ConnectionLost("not connected to the server")
            try:
                await websocket.send(frame)
            except ConnectionClosed as exc:
                raise ConnectionLost("the connection to the server closed") from exc

    # --- incoming ------------------------------------------------------------------------

    async def _read(self, websocket: ClientConnection) -> None:
        lost = "the connection to the server closed"
        try:
            async for frame in websocket:
                self.core.receive_frame(frame, asyncio.get_running_loop().time())
                with contextlib.suppress(ConnectionLost):
                    await self._flush()  # what the core answers (a resume after a welcome)
                self._dispatch(self.core.events_received())
        except ConnectionClosed as exc:
            lost = f"{lost}: {exc}"
        finally:
            # ``websocket`` stays, closed: its close code and reason say why (1012: reconnect).
            self.up.clear()
            self.core.connection_lost(lost)
            self._dispatch(self.core.events_received())
            if self._welcomed is not None and not self._welcomed.done():
                self._welcomed.set_exception(ConnectionLost(lost))
                self._welcomed.exception()  # retrieved: _open may have stopped waiting
            if not self.reconnect or self._closing:
                self._set_status("closed", lost)
                self.closed.set()

    def _dispatch(self, events: list[SessionEvent]) -> None:
        for event in events:
            if isinstance(event, Reply | Failed):
                future = self._pending.get(event.rid)
                if future is None or future.done():
                    continue
                if isinstance(event, Reply):
                    future.set_result(event.message)
                else:
                    future.set_exception(ConnectionLost(event.reason))
            elif isinstance(event, Received):
                self.received(event.message, event.replied)
            elif isinstance(event, Welcomed):
                self.up.set()
                self._set_status("connected", event.welcome.server)
                if self._welcomed is not None and not self._welcomed.done():
                    self._welcomed.set_result(event.welcome)
                if self.on_welcome is not None:
                    self.on_welcome(event.welcome, event.again)
            elif isinstance(event, Refused):
                if self._welcomed is not None and not self._welcomed.done():
                    self._welcomed.set_exception(RequestFailed(event.error))
            elif isinstance(event, NotResumed):
                log.info("cannot resume %s: %s", event.game_id, event.error.message)
                error = event.error
                self.received(
                    Error(code=error.code, message=error.message, game_id=event.game_id), False
                )
            elif isinstance(event, ResumeWaiting):
                self._resume_later(event)
            elif isinstance(event, SeekReposted):
                log.info("seek %s posted again: %s", event.previous_id, event.seek_id or event)
                if self.deliver is not None:
                    self.deliver(event)
                else:
                    self.seek_notices.put_nowait(event)

    def _resume_later(self, event: ResumeWaiting) -> None:
        """Ask for a game the server could not resume again after a backoff; tell of the
        first refusal in a row (an error with its ``game_id``, no ``rid``)."""
        wait = self.backoff.delay(event.attempt, self.rng)
        log.info("cannot resume %s now (%s): again in %.1f s", event.game_id, event.error, wait)
        if event.attempt == 0:
            text = (
                f"the server cannot resume it now ({event.error.message}); "
                "waiting for it, and trying again until it can"
            )
            self.received(Error(code=event.error.code, message=text, game_id=event.game_id), False)
        retry = asyncio.get_running_loop().create_task(self._resume_again(event.game_id, wait))
        self._resume_retries.add(retry)
        retry.add_done_callback(self._resume_retries.discard)

    async def _resume_again(self, game_id: str, wait: float) -> None:
        await asyncio.sleep(wait)
        self.core.resume_again(game_id)
        with contextlib.suppress(ConnectionLost):  # (a reconnection resumes it then)
            await self._flush()

    def received(self, message: Message, replied: bool) -> None:
        """Every message from the server (duplicates after a reconnection left out), after a
        waiting request got it as its reply (``replied``): to ``deliver`` if given, else
        game events, lobby messages and unrequested errors to their queues."""
        if self.deliver is not None:
            self.deliver(message)
        elif isinstance(message, Error) and not replied:
            self.errors.put_nowait(message)
        elif isinstance(message, (*GAME_EVENTS, RematchClosed)):
            self.events.put_nowait(message)
        elif isinstance(message, LobbyEvent | LobbyState | SeekDeclined):
            self.lobby_events.put_nowait(message)

    async def next_event(self, timeout: float | None = None) -> Message:
        """The next game event; raises ConnectionLost if the connection closes for good."""
        return await self._next(self.events, timeout, "game event")

    async def next_lobby_event(self, timeout: float | None = None) -> Message:
        """The next ``lobby_state`` or ``lobby_event`` (a subscription's reply included);
        raises ConnectionLost if the connection closes for good."""
        return await self._next(self.lobby_events, timeout, "lobby event")

    async def _next(
        self, queue: asyncio.Queue[Message], timeout: float | None, what: str
    ) -> Message:
        if not queue.empty():
            return queue.get_nowait()
        getter = asyncio.ensure_future(queue.get())
        closed = asyncio.ensure_future(self.closed.wait())
        try:
            done, _ = await asyncio.wait(
                {getter, closed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:  # our caller gave up: leave no getter to eat a message
            closed.cancel()
            if getter.done() and not getter.cancelled():
                queue.put_nowait(getter.result())  # taken as we were cancelled: kept
            else:
                getter.cancel()
            raise
        closed.cancel()
        if getter in done:
            return getter.result()
        getter.cancel()
        if not done:
            raise TimeoutError(f"no {what} in time")
        raise ConnectionLost("the connection to the server closed")

    async def game_events(self) -> AsyncIterator[Message]:
        while True:
            try:
                yield await self.next_event()
            except ConnectionLost:
                return

    def drop(self) -> None:
        """Cut the connection as a network failure would: no closing handshake
        (reconnection, if on, follows)."""
        if self.websocket is not None:
            self.websocket.transport.abort()

    async def close(self) -> None:
        self._closing = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        for retry in list(self._resume_retries):
            retry.cancel()
        websocket = self.websocket
        if websocket is not None:
            await websocket.close()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                self._reader.cancel()
        self._set_status("closed")
        self.closed.set()


def _unreachable(url: str, exc: BaseException) -> str:
    """A failed attempt's status line."""
    return str(exc) if isinstance(exc, ServerUnreachable) else f"cannot reach {url} ({exc})"

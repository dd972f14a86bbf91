"""The game server: players, the lobby, games and their events, AI turns, timers.

Order of every change to a game: under the game's lock, validate and apply it in the
GameSession (which raises and changes nothing if refused), commit its events to the
store, then acknowledge and broadcast them. Nothing is sent about an event before its
transaction has committed, and one game's events go out in their ``seq`` order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable
from http import HTTPStatus
from typing import Any, cast

import websockets
from websockets.asyncio.server import Server, ServerConnection
from websockets.http11 import Request, Response
from websockets.typing import Origin

import engine
from protocol import (
    MAX_CLIENT_FRAME,
    Abort,
    AcceptSeek,
    CancelSeek,
    Claim,
    CreateGame,
    Draw,
    Ended,
    Error,
    ErrorCode,
    GameList,
    GetGame,
    Hello,
    JoinGame,
    ListGames,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
    LobbyUpdate,
    Message,
    Move,
    Ok,
    Ping,
    Pong,
    QuickPair,
    Record,
    Rematch,
    Resign,
    Resume,
    Resumed,
    Seated,
    Seek,
    SeekPosted,
    Snapshot,
    Unwatch,
    Watch,
    Welcome,
    encode,
    encode_prepacked,
    pack,
)
from protocol.messages import PROTOCOL_VERSION
from server import names
from server.admission import Admission, Refused, address_key, socket_budget
from server.clock import Now, TimeControl
from server.connection import Connection, PlayerSession
from server.errors import (
    BadName,
    BadRequest,
    BadToken,
    EngineUnavailable,
    LimitExceeded,
    NameTaken,
    NotAllowed,
    RateLimited,
    SeatTaken,
    ServerError,
    StorageError,
    UnknownGame,
    UnknownSeek,
)
from server.limits import TokenBucket
from server.lobby import (
    Changes,
    Lobby,
    SeekEntry,
    Subscription,
    Subscriptions,
    Window,
    new_seek_id,
    top_games,
)
from server.pool import EnginePool, SearchRequest
from server.records import RecordCache
from server.rows import GameRecord, SessionRow
from server.session import Emitted, EventLimits, GameSession, Player, token_hash
from server.settings import ServerSettings
from server.store import Store
from server.transport import (
    GuardedConnection,
    guarded_connections,
    install_descriptor_log,
    storms,
)

log = logging.getLogger(__name__)

# Close code to every client when the server stops: RFC 6455's 1012 "service restart", so
# that clients reconnect (to this server once it is back, or to another node).
CLOSE_RESTART = 1012

VERSION = "noughts/0.2"
# The websocket layer closes a connection (1009) on frames above this; frames between the
# codec's cap (MAX_CLIENT_FRAME) and this get a `too_large` error and the connection lives.
MAX_WEBSOCKET_FRAME = 4 * MAX_CLIENT_FRAME
HEALTH_PATH = "/healthz"
UNFINISHED = ("open", "live")


class GameServer:
    """Everything the server knows, and the handlers for every request."""

    def __init__(
        self,
        store: Store,
        pool: EnginePool | None,
        *,
        settings: ServerSettings | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.pool = pool
        self.settings = settings or ServerSettings()
        # Durations (clocks, grace, deadlines) on the one, timestamps people read on the
        # other (server/clock.py); tests pass their own.
        self._monotonic = monotonic
        self._wall = wall
        self.version = VERSION
        self.games: dict[str, GameSession] = {}
        self.subscribers: dict[str, set[Connection]] = {}
        self.players: dict[str, PlayerSession] = {}  # online players
        self.seats: dict[str, dict[str, int]] = {}  # player_id -> {game_id: seat}, in memory
        self.lobby = Lobby()
        self.lobby_connections = Subscriptions()
        self._lobby_timer: asyncio.TimerHandle | None = None
        self._lobby_games_changed = False
        self.records = RecordCache(self.settings.record_cache_bytes)
        self.connections: set[Connection] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._evictions: dict[str, asyncio.TimerHandle] = {}
        self._quick_timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ai_tasks: dict[str, asyncio.Task[None]] = {}  # game_id -> its AI turn
        self.admission = Admission(
            max_open=self.settings.max_connections,
            max_open_per_address=self.settings.max_connections_per_ip,
            max_handshakes_per_address=self.settings.max_handshakes_per_ip,
            max_sockets=self.settings.max_connections + self.settings.max_handshakes_per_ip,
        )  # its socket budget is set by serve(), from the descriptor limit
        # Players and sessions: who is at each address, new sessions per address, names
        # being claimed by a hello in flight (name key -> player id), the expiry sweep.
        self._address_players: dict[str, set[str]] = {}
        self._new_sessions: dict[str, TokenBucket] = {}
        self._claiming: dict[str, str] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False

    def clock(self) -> Now:
        """The time now: monotonic seconds for durations, wall seconds for timestamps."""
        return Now(self._monotonic(), self._wall())

    # --- start: restore what a restart interrupted ------------------------------------------

    async def restore(self) -> int:
        """Load every open or live game from the store; returns how many. A game whose
        stored rows cannot be read or replayed is quarantined (a log line) and the server
        starts without it."""
        self._schedule_sweep()
        now = self.clock()
        records = await self.store.unfinished_games()
        restored = 0
        for record in records:
            try:
                session = GameSession.restore(record, now)
            except Exception as exc:
                await self.store.quarantine(record.row.id, f"cannot restore it: {exc!r}")
                continue
            self._register(session)
            async with self._lock(session.id):
                await self._commit_quietly(
                    session, session.restored_presence(now, self.settings.grace_s)
                )
            self._maybe_ai_turn(session)
            restored += 1
        if restored:
            log.info("restored %d unfinished games", restored)
        return restored

    # --- connections -----------------------------------------------------------------------

    def route(self, websocket: ServerConnection, request: Request) -> Response | None:
        """Before the handshake: ``GET /healthz`` is answered 200 (a load balancer's or
        orchestrator's health check); every other request goes on to the websocket
        handshake, where websockets answers a plain HTTP request 426, a bad handshake 400
        and a browser origin not allowed 403."""
        if request.path == HEALTH_PATH:
            return websocket.respond(HTTPStatus.OK, "ok\n")
        return None

    def admit(
        self, websocket: ServerConnection, request: Request, response: Response
    ) -> Response | None:
        """After the handshake was checked: an accepted websocket takes an open slot, or
        is refused (HTTP 503, naming the cap). Nothing else takes one; the slot is given
        back when the socket closes, on every path (server/transport.py)."""
        if response.status_code != HTTPStatus.SWITCHING_PROTOCOLS:
            return None
        websocket = cast(GuardedConnection, websocket)  # serve() creates only these
        if websocket.ticket is None:  # refused at accept: the socket is closing
            return websocket.respond(HTTPStatus.SERVICE_UNAVAILABLE, "too_many: refused\n")
        try:
            self.admission.open_websocket(websocket.ticket)
        except Refused as refused:
            storms.warning(
                "refused at handshake",
                "refusing a connection from %s: %s",
                websocket.ticket.address,
                refused.reason,
            )
            return websocket.respond(
                HTTPStatus.SERVICE_UNAVAILABLE, f"too_many: {refused.reason}\n"
            )
        return None

    async def handler(self, websocket: ServerConnection) -> None:
        settings = self.settings
        bucket = TokenBucket(
            settings.rate_per_s, settings.burst, float(settings.burst), time.monotonic()
        )
        guarded = cast(GuardedConnection, websocket)  # serve() creates only these
        connection = Connection(self, guarded, bucket, settings.send_buffer)
        self.connections.add(connection)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)

    async def hello(self, connection: Connection, hello: Hello) -> Welcome:
        """Identify the connection's player: a known session, or a new one."""
        now = self.clock()
        address = _address(connection.websocket)
        if hello.session is not None:
            digest = token_hash(hello.session)
            row = await self.store.load_session(digest)
            if row is None:
                raise BadToken("unknown session: send hello without one to start a new session")
            session_token = hello.session
            if not row.named:
                row.name = await self._bind_legacy_name(row.player_id, row.name)
            player = self.players.get(row.player_id) or PlayerSession(
                row.player_id, row.name, row.bot
            )
            try:
                await self.store.touch_sessions([player.player_id], now.wall, False)
            except StorageError:  # a full or failing disk must not lock a player out
                log.warning("cannot mark session of %s used; the next sweep does", row.player_id)
        else:
            session_token = secrets.token_urlsafe(24)
            player = await self._new_player(hello, address, session_token, now.wall)
        player.address = address
        self._address_players.setdefault(address, set()).add(player.player_id)
        self.players[player.player_id] = player
        player.connections.add(connection)
        connection.player = player
        games = []
        for game_id, seat in list(self.seats.get(player.player_id, {}).items()):
            game = self.games.get(game_id)
            if game is None or game.status not in UNFINISHED:
                continue
            async with self._lock(game_id):
                token = game.tokens[seat]
                if token is None:  # restored: only the hash survived; issue a new secret
                    token = game.issue_token(seat)
                    await self.store.update_game(game.to_row())
                await self._commit_quietly(
                    game, game.set_online(seat, True, now, self.settings.grace_s)
                )
            games.append({"game_id": game_id, "seat": seat, "token": token, "seq": game.seq})
        return Welcome(
            rid=hello.rid,
            version=PROTOCOL_VERSION,
            session=session_token,
            player_id=player.player_id,
            server=self.version,
            name=player.name,
            games=games,
        )

    # --- players, names and sessions ---------------------------------------------------------

    async def _new_player(
        self, hello: Hello, address: str, session_token: str, now: float
    ) -> PlayerSession:
        """A new session: its name checked (server/names.py) and bound to it, charged to
        its address's allowance of new sessions; stored before the welcome."""
        name: str | None = None
        if not names.is_anonymous(hello.name):
            try:
                name = names.check(hello.name)
            except names.NameRefused as exc:
                raise BadName(f"name refused: {exc}") from exc
        self._charge_new_session(address)
        player_id = "p-" + secrets.token_hex(6)
        if name is None:
            name, keys = await self._guest_name()
        else:
            keys = names.name_keys(name)
            await self._check_name_free(name, keys)
        for key in keys:
            self._claiming[key] = player_id
        try:
            # The name is free: claimed here until its row commits (a hello in flight with
            # the same name is refused meanwhile), bound in the store from then on.
            if await self.store.name_holder(keys) is not None:
                raise NameTaken(f"the name {name!r} was taken a moment ago: choose another")
            row = SessionRow(token_hash(session_token), player_id, name, hello.bot, now, now)
            await self.store.save_session(row, keys)
        finally:
            for key in keys:
                if self._claiming.get(key) == player_id:
                    del self._claiming[key]
        return PlayerSession(player_id, name, hello.bot)

    async def _bind_legacy_name(self, player_id: str, name: str) -> str:
        """A session stored before names were bound keeps its name if the rules allow it
        and no one holds it; else it becomes a guest (its games keep the old label)."""
        try:
            name = names.check(name)
            keys = names.name_keys(name)
            await self._check_name_free(name, keys)
        except (names.NameRefused, NameTaken):
            name, keys = await self._guest_name()
        await self.store.bind_name(player_id, name, keys)
        return name

    def _charge_new_session(self, address: str) -> None:
        """Take one new session from ``address``'s token bucket, or refuse (too_many)."""
        settings = self.settings
        rate = settings.new_sessions_per_ip_per_minute / 60.0
        bucket = self._new_sessions.get(address)
        if bucket is None:
            if len(self._new_sessions) > 10_000:  # forget addresses whose bucket is full
                self._prune_new_session_buckets()
            burst = settings.new_sessions_burst_per_ip
            bucket = TokenBucket(rate, burst, float(burst), time.monotonic())
            self._new_sessions[address] = bucket
        if not bucket.take(time.monotonic()):
            raise LimitExceeded(
                f"limit: at most {settings.new_sessions_per_ip_per_minute:g} new sessions a "
                f"minute from one address (bursts of {settings.new_sessions_burst_per_ip}); "
                "reconnect with your session instead"
            )

    def _prune_new_session_buckets(self) -> None:
        now = time.monotonic()
        for address, bucket in list(self._new_sessions.items()):
            if bucket.tokens + (now - bucket.updated) * bucket.rate >= bucket.burst:
                del self._new_sessions[address]

    async def _check_name_free(self, name: str, keys: frozenset[str]) -> None:
        if any(key in self._claiming for key in keys) or await self.store.name_holder(keys):
            raise NameTaken(
                f"the name {name!r}, or one that looks like it, belongs to another player: "
                "choose another (or reconnect with your session)"
            )

    async def _guest_name(self) -> tuple[str, frozenset[str]]:
        """A free ``guest-`` name for a player who gave none (as Lichess's anonymous
        players have no name, but a challenge needs one to address)."""
        while True:
            name = names.guest_name(secrets.token_hex(3))
            keys = names.name_keys(name)
            if not any(k in self._claiming for k in keys) and not await self.store.name_holder(
                keys
            ):
                return name, keys

    def _schedule_sweep(self) -> None:
        if self._sweep is None:
            loop = asyncio.get_running_loop()
            self._sweep = loop.call_later(
                self.settings.session_sweep_s, lambda: self._spawn(self._sweep_sessions())
            )

    async def _sweep_sessions(self) -> None:
        """Keep the sessions in use alive (online, or seated in a game in memory), then
        expire the others: unused for ``session_idle_s`` (``unplayed_session_idle_s`` if
        they never held a seat); their names are free again."""
        self._sweep = None
        if self._closed:
            return
        now = self.clock().wall  # the stored last-use times outlive the process: wall time
        settings = self.settings
        try:
            seated = list(self.seats)
            online = [p for p, player in self.players.items() if player.online]
            await self.store.touch_sessions(seated, now, True)
            await self.store.touch_sessions(online, now, False)
            await self.store.expire_sessions(
                now - settings.unplayed_session_idle_s, now - settings.session_idle_s
            )
        except StorageError:
            log.exception("the session sweep failed; it runs again later")
        for address, ids in list(self._address_players.items()):
            ids.intersection_update(self.players)
            if not ids:
                del self._address_players[address]
        self._schedule_sweep()

    async def disconnected(self, connection: Connection) -> None:
        self.lobby_connections.discard(connection)
        for game_id in connection.games:
            subscribers = self.subscribers.get(game_id)
            if subscribers is not None:
                subscribers.discard(connection)
        for seek in self.lobby.owned_by(connection):
            self._remove_seek(seek)
        player = connection.player
        if player is None:
            return
        player.connections.discard(connection)
        if player.online:
            return
        now = self.clock()
        for game_id, seat in list(self.seats.get(player.player_id, {}).items()):
            game = self.games.get(game_id)
            if game is None:
                continue
            async with self._lock(game_id):
                await self._commit_quietly(
                    game, game.set_online(seat, False, now, self.settings.grace_s)
                )
            if game.status not in UNFINISHED and not any(game.online[s] for s in game.human_seats):
                self._evict(game_id)
        if not self.seats.get(player.player_id):
            self.players.pop(player.player_id, None)

    async def dispatch(self, connection: Connection, message: Message) -> None:
        handler = self._handlers.get(type(message))
        if handler is None:
            raise BadRequest(f"{message.TYPE} is not a request the server accepts")
        await handler(self, connection, message)

    # --- bookkeeping -----------------------------------------------------------------------

    def _lock(self, game_id: str) -> asyncio.Lock:
        lock = self._locks.get(game_id)
        if lock is None:
            lock = self._locks[game_id] = asyncio.Lock()
        return lock

    def _register(self, session: GameSession) -> None:
        session.first_move_s = self.settings.first_move_s
        session.limits = self._event_limits()
        session.abandon_s = self.settings.abandon_s
        session.abandon_unstarted_s = self.settings.abandon_unstarted_s
        self.games[session.id] = session
        for seat, player in enumerate(session.players):
            if player is not None and player.player_id is not None and not player.is_ai:
                self.seats.setdefault(player.player_id, {})[session.id] = seat

    def _event_limits(self) -> EventLimits:
        settings = self.settings
        return EventLimits(
            presence_burst=settings.presence_burst,
            presence_refill_s=settings.presence_refill_s,
            draw_offer_plies=settings.draw_offer_plies,
            rematch_offers=settings.max_rematch_offers,
        )

    def _subscribe(self, game_id: str, connection: Connection) -> None:
        self.subscribers.setdefault(game_id, set()).add(connection)
        connection.games.add(game_id)

    def _game(self, game_id: str) -> GameSession:
        session = self.games.get(game_id)
        if session is None:
            raise UnknownGame(f"no live game {game_id!r}", game_id)
        return session

    def _me(self, connection: Connection) -> PlayerSession:
        assert connection.player is not None  # dispatch runs only after hello
        return connection.player

    def _unfinished(self, player_id: str) -> set[str]:
        held = self.seats.get(player_id, {})
        return {g for g in held if self.games.get(g) and self.games[g].status in UNFINISHED}

    def _check_open_games(self, player_id: str) -> None:
        """Caps on unfinished games: per player, and per address over all its players
        (a client opening a session per connection is still one address)."""
        cap = self.settings.max_open_games_per_player
        if len(self._unfinished(player_id)) >= cap:
            raise LimitExceeded(f"limit: at most {cap} unfinished games per player")
        player = self.players.get(player_id)
        if player is None:
            return
        cap = self.settings.max_open_games_per_ip
        games: set[str] = set()
        for other in self._address_players.get(player.address, ()):
            games |= self._unfinished(other)
            if len(games) >= cap:
                raise LimitExceeded(
                    f"limit: at most {cap} unfinished games per address; finish or abort some"
                )

    def _spawn(self, coroutine: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed", exc_info=task.exception())

    # --- events: commit, then broadcast ------------------------------------------------------

    async def _store(self, session: GameSession, emitted: Emitted) -> None:
        if isinstance(emitted.message, Snapshot):  # the start: the game row changes too
            await self.store.update_game(session.to_row(), emitted.event)
        elif emitted.move is not None:
            await self.store.append_move(emitted.move, emitted.end)
        elif emitted.end is not None:
            await self.store.end_game(session.id, emitted.end)
        elif emitted.event is not None:
            await self.store.append_event(emitted.event)

    async def _commit(
        self,
        session: GameSession,
        emitted: list[Emitted],
        reply_to: Connection | None = None,
        rid: int | None = None,
    ) -> None:
        """Store each event, then send it to every follower (the requester's copy of the
        first carries ``rid``). Call with the game's lock held. If the store refuses (a
        full disk, say), the game goes back to what is stored and the StorageError is
        raised: the requester gets it, every other follower is told (``_not_stored``)."""
        for index, event in enumerate(emitted):
            try:
                await self._store(session, event)
            except StorageError as exc:
                await self._not_stored(session, exc, reply_to if rid is not None else None)
                raise
            session.stored()
            frame = event.frame or encode(event.message)  # encoded once, in the session
            followers = self.subscribers.get(session.id, ())
            for connection in list(followers):
                if connection is reply_to and rid is not None and index == 0:
                    connection.post(encode(event.message, rid=rid))
                else:
                    connection.post(frame)
            if reply_to is not None and rid is not None and index == 0:
                if reply_to not in followers:  # a seat holder that has not resumed yet
                    reply_to.post(encode(event.message, rid=rid))
            if isinstance(event.message, Ended):
                self._game_over(session)
        self._schedule(session)

    async def _commit_quietly(self, session: GameSession, emitted: list[Emitted]) -> bool:
        """``_commit`` for events nobody asked for (presence, timeouts, the AI's move): a
        refusal is handled there (the game reverted, its followers told); False then."""
        try:
            await self._commit(session, emitted)
        except StorageError:
            return False
        return True

    async def _not_stored(
        self, session: GameSession, exc: StorageError, requester: Connection | None
    ) -> None:
        """Storing an event of ``session`` failed: what is in memory but not stored never
        happened. The game goes back to its stored state, in memory and loaded (it goes on
        once the store takes writes again; its timers retry after storage_retry_s), and its
        followers other than ``requester`` are told. A game never stored leaves memory."""
        log.error("game %s: an event could not be stored (%s); back to its stored state",
                  session.id, exc.message)  # fmt: skip
        try:
            record = await self.store.get_game(session.id)
        except StorageError as read_failed:
            log.error("game %s: cannot read it back (%s); unloading it", session.id, read_failed)
            record = None
        notice = Error(
            code=exc.code.value,
            message=f"game {session.id} waits: {exc.message}; it goes on as it was before "
            "the event that could not be stored",
            game_id=session.id,
        )
        frame = encode(notice)
        for connection in list(self.subscribers.get(session.id, ())):
            if connection is not requester:
                connection.post(frame)
        if record is None:
            self._evict(session.id)
            return
        seated = {p.player_id for p in session.players if p is not None and p.player_id}
        session.revert(record)
        for player_id in seated - {p.player_id for p in session.players if p is not None}:
            held = self.seats.get(player_id, {})
            held.pop(session.id, None)  # a seat taken by the event that was not stored
            if not held:
                self.seats.pop(player_id, None)
        self._schedule(session, retry=True)

    def _game_over(self, session: GameSession) -> None:
        ai_turn = self._ai_tasks.pop(session.id, None)
        if ai_turn is not None and ai_turn is not asyncio.current_task():
            ai_turn.cancel()  # its search is dropped, or stopped in its worker
        if self.pool is not None:
            for seat in (0, 1):
                self.pool.forget(f"{session.id}:{seat}")
        self._lobby_push(LobbyEvent(kind="game_removed", game_id=session.id), private=session)
        handle = self._timers.pop(session.id, None)
        if handle is not None:
            handle.cancel()
        loop = asyncio.get_running_loop()
        self._evictions[session.id] = loop.call_later(
            self.settings.keep_finished_s, self._evict, session.id
        )

    def _evict(self, game_id: str) -> None:
        """A finished game leaves memory; its record stays in the store."""
        session = self.games.pop(game_id, None)
        for connection in self.subscribers.pop(game_id, ()):
            connection.games.discard(game_id)
            connection.watching.discard(game_id)
        for handles in (self._timers, self._evictions):
            handle = handles.pop(game_id, None)
            if handle is not None:
                handle.cancel()
        self._locks.pop(game_id, None)
        if session is None:
            return
        for player in session.players:
            if player is None or player.player_id is None:
                continue
            held = self.seats.get(player.player_id)
            if held is not None:
                held.pop(game_id, None)
                if not held:
                    del self.seats[player.player_id]
                    online = self.players.get(player.player_id)
                    if online is not None and not online.online:
                        del self.players[player.player_id]

    # --- timers: flags, first moves, abandoned games ----------------------------------------

    def _schedule(self, session: GameSession, *, retry: bool = False) -> None:
        """Wake up at the game's next deadline (``retry``: not before storage_retry_s,
        after a write that failed)."""
        handle = self._timers.pop(session.id, None)
        if handle is not None:
            handle.cancel()
        deadline = session.next_deadline()
        if deadline is None:
            return
        delay = max(0.0, deadline - self._monotonic()) + 0.001
        if retry:
            delay = max(delay, self.settings.storage_retry_s)
        loop = asyncio.get_running_loop()
        self._timers[session.id] = loop.call_later(
            delay, lambda: self._spawn(self._on_deadline(session.id))
        )

    async def _on_deadline(self, game_id: str) -> None:
        session = self.games.get(game_id)
        if session is None:
            return
        async with self._lock(game_id):
            emitted = session.timeouts(self.clock())
            if emitted:
                await self._commit_quietly(session, emitted)
            else:
                self._schedule(session)

    # --- the lobby -----------------------------------------------------------------------

    def _lobby_push(
        self,
        event: LobbyEvent,
        *,
        seek: SeekEntry | None = None,
        private: GameSession | None = None,
    ) -> None:
        """A change to the lobby (``event`` says which kind; the seeks are already in
        ``self.lobby``): subscribers hear of it at the next tick, coalesced with the rest."""
        if private is not None and private.private:
            return
        if event.kind in ("game_added", "game_removed"):
            self._lobby_games_changed = True
        if self._lobby_timer is not None:
            return
        if not self.lobby_connections and not self.lobby.windows:
            self.lobby.take_journal()  # nobody to tell
            return
        loop = asyncio.get_running_loop()
        self._lobby_timer = loop.call_later(self.settings.lobby_tick_s, self._lobby_flush)

    def _remove_seek(self, seek: SeekEntry) -> None:
        if self.lobby.remove(seek.id) is None:
            return
        handle = self._quick_timers.pop(seek.id, None)
        if handle is not None:
            handle.cancel()
        if not seek.quick:
            self._lobby_push(LobbyEvent(kind="seek_removed", seek_id=seek.id), seek=seek)

    def _listed_games(self, count: int) -> tuple[list[str], int]:
        """The ids of the ``count`` most relevant games the lobby lists, and how many it
        lists in all (live and not private)."""
        listed = [g for g in self.games.values() if g.status == "live" and not g.private]
        return [g.id for g in top_games(listed, count)], len(listed)

    def _summaries(self, game_ids: Iterable[str]) -> list[dict[str, Any]]:
        return [self.games[g].summary() for g in game_ids if g in self.games]

    def _lobby_window(self, limit: int) -> Window:
        games, total = self._listed_games(limit)
        return self.lobby.window(limit, games, total)

    def _lobby_state(
        self, player_id: str | None, rid: int, subscription: Subscription, window: Window
    ) -> LobbyState:
        """A subscriber's first page: the challenges that concern it, then the window."""
        limit = subscription.limit
        challenges = self.lobby.challenges_of(player_id, limit)
        seeks = [s.to_dict() for s in challenges] + [s.to_dict() for s in window.seeks.values()]
        games = self._summaries(window.games)
        if not subscription.paged:
            return LobbyState(rid=rid, seeks=seeks, games=games)
        return LobbyState(
            rid=rid,
            seeks=seeks,
            games=games,
            page=1,
            limit=limit,
            seeks_total=window.seeks_total,
            games_total=window.games_total,
        )

    def _lobby_flush(self) -> None:
        """The tick: send each subscriber what changed on its first page since the last one
        (coalesced: a seek posted and withdrawn meanwhile costs nothing), at most one
        ``lobby_update``, or ``lobby_events_per_tick`` events, a subscriber."""
        self._lobby_timer = None
        journal = self.lobby.take_journal()
        games_changed, self._lobby_games_changed = self._lobby_games_changed, False
        subscribers = self.lobby_connections
        limits = {s.limit for s in subscribers.values()}
        old = {limit: w for limit, w in self.lobby.windows.items() if limit in limits}
        self.lobby.windows = {}
        if not limits:
            return
        ranked: tuple[list[str], int] | None = None
        if games_changed or len(old) < len(limits):
            ranked = self._listed_games(max(limits))
        updates: dict[int, tuple[Window, Changes]] = {}
        for limit in limits:
            previous = old.get(limit)
            if ranked is not None:
                window = self.lobby.window(limit, *ranked)
            else:
                assert previous is not None
                window = self.lobby.window(limit, previous.games, previous.games_total)
            self.lobby.windows[limit] = window
            updates[limit] = (window, Changes.between(previous or window, window))
        frames: dict[tuple[int, bool], list[bytes]] = {}  # shared by every subscriber alike
        for connection, subscription in list(subscribers.items()):
            window, changes = updates[subscription.limit]
            own = subscription.window is not None
            if subscription.window is not None:  # subscribed since the last tick
                changes = Changes.between(subscription.window, window)
                subscription.window = None
            mine = journal.get(connection.player_id or "", {})
            if not changes and not mine and not (subscription.paged and changes.totals):
                continue
            if len(mine) > subscription.limit or (
                not subscription.paged
                and len(changes) + len(mine) > self.settings.lobby_events_per_tick
            ):
                state = self._lobby_state(
                    connection.player_id, subscription.rid, subscription, window
                )
                connection.post(encode(state))
                continue
            key = (subscription.limit, subscription.paged)
            if not mine and not own and key in frames:
                shared = frames[key]
            else:
                shared = self._lobby_frames(subscription.paged, window, changes, mine)
                if not mine and not own:
                    frames[key] = shared
            for frame in shared:
                connection.post(frame)

    def _lobby_frames(
        self,
        paged: bool,
        window: Window,
        changes: Changes,
        challenges: dict[str, SeekEntry | None],
    ) -> list[bytes]:
        """One tick's changes as frames: one ``lobby_update`` for a subscription that asked
        for pages, else one ``lobby_event`` per change."""
        added = [s.to_dict() for s in changes.seeks]
        added += [s.to_dict() for s in challenges.values() if s is not None]
        removed = changes.seeks_removed + [i for i, s in challenges.items() if s is None]
        games = self._summaries(changes.games)
        if paged:
            update = LobbyUpdate(
                seeks=added,
                seeks_removed=removed,
                games=games,
                games_removed=changes.games_removed,
                seeks_total=window.seeks_total,
                games_total=window.games_total,
            )
            return [encode(update)]
        events = [LobbyEvent(kind="seek_removed", seek_id=i) for i in removed]
        events += [LobbyEvent(kind="seek_added", seek=s) for s in added]
        events += [LobbyEvent(kind="game_removed", game_id=g) for g in changes.games_removed]
        events += [LobbyEvent(kind="game_added", game=g) for g in games]
        return [encode(e) for e in events]

    # --- request costs -------------------------------------------------------------------------

    def _charge(self, connection: Connection, cost: float, what: str) -> None:
        """Take an expensive request's tokens (its frame took one) or refuse it."""
        if not connection.bucket.charge(time.monotonic(), cost - 1):
            raise RateLimited(
                f"rate limit: a {what} costs {cost:g} tokens "
                f"({connection.bucket.describe()}); retry later"
            )

    def _send_charged(self, connection: Connection, frame: bytes) -> None:
        """Send an expensive reply and charge its size (``cost_per_kib``), owed if need be."""
        connection.post(frame)
        cost = len(frame) / 1024 * self.settings.cost_per_kib
        connection.bucket.charge(time.monotonic(), cost, owe=True)

    # --- creating and starting games ------------------------------------------------------------

    def _ai_player(
        self,
        algorithm: str,
        budget_ms: int,
        game: str,
        params: dict[str, int],
        player_id: str | None = None,
    ) -> Player:
        """The AI seat of a new game against ``player_id``, refused now (not at the AI's
        turn) for an algorithm that cannot play the game, a budget over the server's
        maximum, no engine worker up, or a player whose AI searches are at their cap."""
        try:
            engine.check_algorithm(algorithm, engine.make_game(game, **params))
        except engine.EngineError as exc:
            raise BadRequest(str(exc)) from exc
        settings = self.settings
        if budget_ms > settings.max_budget_ms:
            raise BadRequest(
                f"limit: budget_ms is at most {settings.max_budget_ms} on this server, "
                f"not {budget_ms}"
            )
        if self.pool is None:
            raise EngineUnavailable("this server runs no engine workers: AI games are off")
        if not self.pool.available:
            raise EngineUnavailable("no engine worker is up (they are restarting): retry soon")
        cap = settings.max_ai_searches_per_player
        if player_id is not None and self.pool.searches_of(player_id) >= cap:
            raise LimitExceeded(
                f"limit: the AI is already thinking in {cap} of your games; wait for its moves"
            )
        return Player(f"{algorithm} {budget_ms}ms", "ai", algorithm=algorithm, budget_ms=budget_ms)

    async def _start_game(
        self,
        session: GameSession,
        seated: Iterable[tuple[Connection, int, int | None]],
    ) -> None:
        """Store a new game whose seats are all taken, tell each seated connection its seat
        (``rid`` if it asked), and start it: the start snapshot goes to everyone seated."""
        self._register(session)
        async with self._lock(session.id):
            await self._create(session)
            for connection, seat, rid in seated:
                self._subscribe(session.id, connection)
                token = session.tokens[seat]
                assert token is not None
                connection.send(Seated(rid=rid, game_id=session.id, seat=seat, token=token))
            await self._commit(session, [session.start(self.clock())])
        self._lobby_push(LobbyEvent(kind="game_added", game=session.summary()), private=session)
        self._maybe_ai_turn(session)

    async def _create(self, session: GameSession) -> None:
        """Store a new (registered) game; if the store refuses, it leaves memory: it never
        existed."""
        try:
            await self.store.create_game(session.to_row())
        except StorageError:
            self._evict(session.id)
            raise

    def _new_session(
        self, game: str, params: dict[str, int], clock: dict[str, int], **kwargs: Any
    ) -> GameSession:
        control = TimeControl.parse(clock)
        return GameSession.new(game, dict(params), self.clock(), control=control, **kwargs)

    # --- requests: games ---------------------------------------------------------------------

    async def on_create(self, connection: Connection, request: CreateGame) -> None:
        me = self._me(connection)
        self._check_open_games(me.player_id)
        session = self._new_session(
            request.game, request.params, request.clock, private=request.private
        )
        seat = request.seat if request.seat >= 0 else secrets.randbelow(2)
        if request.opponent == "ai":
            session.players[1 - seat] = self._ai_player(
                request.algorithm, request.budget_ms, request.game, request.params, me.player_id
            )
            session.take_seat(seat, me.as_player())
            await self._start_game(session, [(connection, seat, request.rid)])
            return
        token = session.take_seat(seat, me.as_player())
        self._register(session)
        await self._create(session)
        self._subscribe(session.id, connection)
        connection.send(Seated(rid=request.rid, game_id=session.id, seat=seat, token=token))
        connection.send(session.snapshot(self.clock()))

    async def on_list(self, connection: Connection, request: ListGames) -> None:
        self._charge(connection, self.settings.cost_list, "list")
        if request.status in UNFINISHED:
            games = [
                s.summary()
                for s in self.games.values()
                if s.status == request.status and not s.private
            ][: request.limit]
        else:
            rows = await self.store.list_games(request.status, request.limit)
            games = [
                {
                    "game_id": r.id,
                    "game": r.game,
                    "params": r.params,
                    "status": r.status,
                    "players": r.players,
                    "result": r.result,
                    "reason": r.reason,
                    "ply": None,
                    "created_at": r.created_at,
                    "clock": r.clock or {},
                }
                for r in rows
            ]
        self._send_charged(connection, encode(GameList(rid=request.rid, games=games)))

    async def on_join(self, connection: Connection, request: JoinGame) -> None:
        me = self._me(connection)
        session = self._game(request.game_id)
        async with self._lock(session.id):
            seat = session.open_seat()
            if seat is None or session.status != "open":
                raise SeatTaken(f"game {session.id} has no open seat", session.id)
            if session.seat_of_player(me.player_id) is not None:
                raise NotAllowed(f"you already hold a seat in game {session.id}", session.id)
            self._check_open_games(me.player_id)
            token = session.take_seat(seat, me.as_player())
            self._register(session)
            self._subscribe(session.id, connection)
            connection.send(Seated(rid=request.rid, game_id=session.id, seat=seat, token=token))
            await self._commit(session, [session.start(self.clock())])
        self._lobby_push(LobbyEvent(kind="game_added", game=session.summary()), private=session)
        self._maybe_ai_turn(session)

    def _seat_request(
        self, connection: Connection, game_id: str, token: str
    ) -> tuple[GameSession, int]:
        session = self._game(game_id)
        return session, session.authorize(token, connection.player_id)

    async def on_move(self, connection: Connection, request: Move) -> None:
        session, seat = self._seat_request(connection, request.game_id, request.token)
        async with self._lock(session.id):
            emitted = session.play(seat, request.action, self.clock(), ply=request.ply)
            await self._commit(session, emitted, connection, request.rid)
        self._maybe_ai_turn(session)

    async def on_resign(self, connection: Connection, request: Resign) -> None:
        session, seat = self._seat_request(connection, request.game_id, request.token)
        async with self._lock(session.id):
            emitted = session.resign(seat, self.clock())
            await self._commit(session, emitted, connection, request.rid)

    async def on_abort(self, connection: Connection, request: Abort) -> None:
        session, seat = self._seat_request(connection, request.game_id, request.token)
        async with self._lock(session.id):
            emitted = session.abort(seat, self.clock())
            await self._commit(session, emitted, connection, request.rid)

    async def on_draw(self, connection: Connection, request: Draw) -> None:
        session, seat = self._seat_request(connection, request.game_id, request.token)
        async with self._lock(session.id):
            now = self.clock()
            emitted = session.draw(seat, request.answer, now)
            await self._commit(session, emitted)
            opponent = session.players[1 - seat]
            if session.status == "live" and opponent is not None and opponent.is_ai:
                # The AI accepts when its last search saw nothing better than a draw.
                value = session.last_value[1 - seat]
                answer = "accept" if value is not None and value <= 0.0 else "decline"
                await self._commit(session, session.draw(1 - seat, answer, now))
        connection.send(Ok(rid=request.rid))

    async def on_claim(self, connection: Connection, request: Claim) -> None:
        session, seat = self._seat_request(connection, request.game_id, request.token)
        async with self._lock(session.id):
            emitted = session.claim(seat, request.outcome, self.clock())
            await self._commit(session, emitted, connection, request.rid)

    async def on_rematch(self, connection: Connection, request: Rematch) -> None:
        session, seat = self._seat_request(connection, request.game_id, request.token)
        async with self._lock(session.id):
            now = self.clock()
            emitted, agreed = session.rematch(seat, request.answer, now)
            await self._commit(session, emitted)
            accepter = seat
            opponent = session.players[1 - seat]
            if not agreed and request.answer == "offer" and opponent is not None and opponent.is_ai:
                emitted, agreed = session.rematch(1 - seat, "accept", now)
                accepter = 1 - seat
            if agreed:
                rematch = self._rematch_of(session)
                await self._commit(session, [session.rematch_started(accepter, rematch.id, now)])
        connection.send(Ok(rid=request.rid))
        if agreed:
            seated = []
            for new_seat, player in enumerate(rematch.players):
                if player is None or player.is_ai:
                    continue
                online = self.players.get(player.player_id or "")
                targets = [
                    c for c in (online.connections if online else ()) if session.id in c.games
                ]
                seated += [(c, new_seat, None) for c in targets]
            await self._start_game(rematch, seated)

    def _rematch_of(self, session: GameSession) -> GameSession:
        rematch = GameSession.new(
            session.game.name,
            dict(session.game.params),
            self.clock(),
            control=session.control,
            rematch_of=session.id,
        )
        for seat, player in enumerate(session.players):
            assert player is not None
            new_seat = 1 - seat
            if player.is_ai:
                rematch.players[new_seat] = player
            else:
                rematch.take_seat(new_seat, player)
        return rematch

    async def on_get(self, connection: Connection, request: GetGame) -> None:
        self._charge(connection, self.settings.cost_get, "get")
        loaded = self.games.get(request.game_id)
        packed = self.records.get(request.game_id, None if loaded is None else loaded.seq)
        if packed is None:
            record = await self.store.get_game(request.game_id)
            if record is None:
                raise UnknownGame(f"no game {request.game_id!r}", request.game_id)
            packed = pack(record.to_dict())
            self.records.put(request.game_id, packed, record.row.seq, final=loaded is None)
        reply = Record(rid=request.rid, game={})
        self._send_charged(connection, encode_prepacked(reply, {"game": packed}))

    # --- requests: following games -------------------------------------------------------------

    def _check_watching(self, connection: Connection, game_id: str) -> None:
        """A connection follows at most ``max_watched_per_connection`` games it holds no
        seat in, by ``watch`` or ``resume``."""
        cap = self.settings.max_watched_per_connection
        if game_id not in connection.watching and len(connection.watching) >= cap:
            raise LimitExceeded(f"limit: at most {cap} games watched")

    async def on_watch(self, connection: Connection, request: Watch) -> None:
        session = self._game(request.game_id)
        self._check_watching(connection, session.id)
        async with self._lock(session.id):
            connection.watching.add(session.id)
            self._subscribe(session.id, connection)
            if request.since is None:
                connection.send(session.snapshot(self.clock(), rid=request.rid))
            else:
                self._send_since(connection, session, request.since)
                connection.send(Resumed(rid=request.rid, game_id=session.id, seq=session.seq))

    async def on_unwatch(self, connection: Connection, request: Unwatch) -> None:
        if request.game_id in connection.watching:
            connection.watching.discard(request.game_id)
            connection.games.discard(request.game_id)
            self.subscribers.get(request.game_id, set()).discard(connection)
        connection.send(Ok(rid=request.rid))

    def _send_since(self, connection: Connection, session: GameSession, since: int) -> None:
        frames = session.events_since(since) if since > 0 else None
        if frames is None:
            connection.send(session.snapshot(self.clock()))
        else:
            for frame in frames:
                connection.post(frame)

    async def on_resume(self, connection: Connection, request: Resume) -> None:
        me = self._me(connection)
        session = self.games.get(request.game_id)
        if session is None:  # from the database: as costly as a get
            self._charge(connection, self.settings.cost_get, "resume of a stored game")
            record = await self.store.get_game(request.game_id)
            if record is None:
                raise UnknownGame(f"no game {request.game_id!r}", request.game_id)
            self._send_charged(connection, encode(_final_snapshot(record)))
            connection.send(Resumed(rid=request.rid, game_id=record.row.id, seq=record.row.seq))
            return
        if session.seat_of_player(me.player_id) is None:
            self._check_watching(connection, session.id)
        async with self._lock(session.id):
            seat = session.seat_of_player(me.player_id)
            token = None
            if seat is None:
                connection.watching.add(session.id)
            else:
                token = session.tokens[seat]
                if token is None:
                    token = session.issue_token(seat)
                    await self.store.update_game(session.to_row())
            self._subscribe(session.id, connection)
            self._send_since(connection, session, request.since)
            connection.send(
                Resumed(
                    rid=request.rid, game_id=session.id, seq=session.seq, seat=seat, token=token
                )
            )

    # --- requests: the lobby -----------------------------------------------------------------

    async def on_lobby(self, connection: Connection, request: LobbySubscribe) -> None:
        if not request.subscribe:
            self.lobby_connections.discard(connection)
            connection.send(Ok(rid=request.rid))
            return
        self._charge(connection, self.settings.cost_lobby, "lobby")
        limit = min(request.limit or self.settings.lobby_page, self.settings.lobby_max_page)
        paged = request.limit is not None or request.page is not None
        page = request.page or 1
        if page > 1:  # read only: the subscription (if any) follows the first page
            games, total = self._listed_games(page * limit)
            state = LobbyState(
                rid=request.rid,
                seeks=[s.to_dict() for s in self.lobby.public_page(limit, page)],
                games=self._summaries(games[(page - 1) * limit :]),
                page=page,
                limit=limit,
                seeks_total=self.lobby.public_count,
                games_total=total,
            )
            self._send_charged(connection, encode(state))
            return
        subscription = Subscription(request.rid, limit, paged)
        window = self.lobby.windows.get(limit)
        if window is None:
            window = self.lobby.windows[limit] = self._lobby_window(limit)
        elif self._lobby_timer is not None:
            # The lobby changed since the others with this page size were sent their
            # window: this one gets the lobby as it is now, and at the tick the difference
            # from that; then it shares the others' window.
            window = subscription.window = self._lobby_window(limit)
        self.lobby_connections[connection] = subscription
        state = self._lobby_state(connection.player_id, request.rid, subscription, window)
        self._send_charged(connection, encode(state))

    def _check_game(self, game: str, params: dict[str, int]) -> None:
        try:
            engine.make_game(game, **params)
        except engine.EngineError as exc:
            raise BadRequest(str(exc)) from exc

    def _check_seeks(self, connection: Connection) -> None:
        cap = self.settings.max_seeks_per_connection
        if len(self.lobby.owned_by(connection)) >= cap:
            raise LimitExceeded(f"limit: at most {cap} open seeks per connection")

    async def _resolve_player(self, who: str) -> str:
        """A player id, or the name (or a look-alike) bound to a player's session, online
        or not: a challenge by name reaches its holder and no one else."""
        if who in self.players:
            return who
        holder = await self.store.name_holder(names.name_keys(names.normalize(who)))
        if holder is None:
            raise BadRequest(f"no player {who!r}: no session holds that name")
        return holder

    async def on_seek(self, connection: Connection, request: Seek) -> None:
        me = self._me(connection)
        self._check_seeks(connection)
        self._check_game(request.game, dict(request.params))
        to = None
        if request.to is not None:
            to = await self._resolve_player(request.to)
            if to == me.player_id:
                raise BadRequest("you cannot challenge yourself")
        seek = SeekEntry(
            id=new_seek_id(),
            game=request.game,
            params=dict(request.params),
            control=TimeControl.parse(request.clock),
            owner=me.as_player(),
            owner_connection=connection,
            created_at=self.clock().wall,
            color=request.color,
            opponents=request.opponents,
            to=to,
        )
        self.lobby.add(seek)
        connection.send(SeekPosted(rid=request.rid, seek_id=seek.id))
        self._lobby_push(LobbyEvent(kind="seek_added", seek_id=seek.id), seek=seek)

    async def on_cancel_seek(self, connection: Connection, request: CancelSeek) -> None:
        seek = self.lobby.seeks.get(request.seek_id)
        if seek is None or seek.owner_connection is not connection:
            raise UnknownSeek(f"you have no seek {request.seek_id!r}")
        self._remove_seek(seek)
        connection.send(Ok(rid=request.rid))

    async def on_accept(self, connection: Connection, request: AcceptSeek) -> None:
        me = self._me(connection)
        seek = self.lobby.seeks.get(request.seek_id)
        if seek is None or not seek.visible_to(me.player_id):
            raise UnknownSeek(f"no seek {request.seek_id!r}: accepted, cancelled or gone")
        if seek.owner.player_id == me.player_id:
            raise NotAllowed("that is your own seek")
        if seek.opponents == "humans" and me.bot:
            raise NotAllowed("that seek is for human players only")
        self._check_open_games(me.player_id)
        self._remove_seek(seek)
        owner_seat = {"x": 0, "o": 1}.get(seek.color, secrets.randbelow(2))
        session = GameSession.new(seek.game, seek.params, self.clock(), control=seek.control)
        session.take_seat(owner_seat, seek.owner)
        session.take_seat(1 - owner_seat, me.as_player())
        await self._start_game(
            session,
            [
                (seek.owner_connection, owner_seat, None),
                (connection, 1 - owner_seat, request.rid),
            ],
        )

    async def on_quick(self, connection: Connection, request: QuickPair) -> None:
        me = self._me(connection)
        self._check_seeks(connection)
        self._check_open_games(me.player_id)
        self._check_game(request.game, dict(request.params))
        if request.ai_after_s:  # refuse a bad fallback now
            self._ai_player(request.algorithm, request.budget_ms, request.game, request.params)
        entry = SeekEntry(
            id=new_seek_id(),
            game=request.game,
            params=dict(request.params),
            control=TimeControl.parse(request.clock),
            owner=me.as_player(),
            owner_connection=connection,
            created_at=self.clock().wall,
            quick=True,
            ai_after_s=request.ai_after_s,
            algorithm=request.algorithm,
            budget_ms=request.budget_ms,
        )
        connection.send(SeekPosted(rid=request.rid, seek_id=entry.id))
        partner = self.lobby.quick_partner(entry)
        while partner is not None and partner.owner_connection.closed:
            self._remove_seek(partner)  # its owner is leaving; its cleanup has not run yet
            partner = self.lobby.quick_partner(entry)
        if partner is None:
            self.lobby.add(entry)
            if entry.ai_after_s:
                loop = asyncio.get_running_loop()
                self._quick_timers[entry.id] = loop.call_later(
                    entry.ai_after_s, lambda: self._spawn(self._quick_ai(entry.id))
                )
            return
        self._remove_seek(partner)
        seat = secrets.randbelow(2)
        session = GameSession.new(entry.game, entry.params, self.clock(), control=entry.control)
        session.take_seat(seat, partner.owner)
        session.take_seat(1 - seat, entry.owner)
        await self._start_game(
            session, [(partner.owner_connection, seat, None), (connection, 1 - seat, None)]
        )

    async def _quick_ai(self, seek_id: str) -> None:
        """No partner came in time: seat the waiting player against the AI."""
        self._quick_timers.pop(seek_id, None)
        entry = self.lobby.remove(seek_id)
        if entry is None or entry.owner_connection.closed:
            return
        seat = secrets.randbelow(2)
        session = GameSession.new(entry.game, entry.params, self.clock(), control=entry.control)
        try:
            ai = self._ai_player(entry.algorithm, entry.budget_ms, entry.game, entry.params)
        except ServerError as exc:  # no engine now: the waiting player is told, not left waiting
            entry.owner_connection.send(Error(code=exc.code.value, message=exc.message))
            return
        session.players[1 - seat] = ai
        session.take_seat(seat, entry.owner)
        await self._start_game(session, [(entry.owner_connection, seat, None)])

    async def on_ping(self, connection: Connection, request: Ping) -> None:
        connection.send(Pong(rid=request.rid))

    _handlers: dict[type[Message], Callable[[Any, Connection, Any], Any]] = {
        CreateGame: on_create,
        ListGames: on_list,
        JoinGame: on_join,
        Move: on_move,
        Resign: on_resign,
        Abort: on_abort,
        Draw: on_draw,
        Claim: on_claim,
        Rematch: on_rematch,
        GetGame: on_get,
        Watch: on_watch,
        Unwatch: on_unwatch,
        Resume: on_resume,
        LobbySubscribe: on_lobby,
        Seek: on_seek,
        CancelSeek: on_cancel_seek,
        AcceptSeek: on_accept,
        QuickPair: on_quick,
        Ping: on_ping,
    }

    # --- AI turns ------------------------------------------------------------------------------

    def _maybe_ai_turn(self, session: GameSession) -> None:
        if session.status != "live":
            return
        seat = session.state.current_player()
        player = session.players[seat] if seat >= 0 else None
        if player is None or not player.is_ai:
            return
        self._ai_tasks[session.id] = self._spawn(self._ai_turn(session, seat, player))

    async def _ai_turn(self, session: GameSession, seat: int, player: Player) -> None:
        """Ask the pool for the AI's move and play it; cancelled if the game ends first."""
        ply = session.state.ply()
        opponent = session.players[1 - seat]
        request = SearchRequest(
            game=session.game.name,
            params=dict(session.game.params),
            actions=tuple(session.state.history()),
            algorithm=player.algorithm or "mcts",
            budget_ms=float(player.budget_ms or 100),
            seed=secrets.randbits(31),
            game_key=f"{session.id}:{seat}",
            owner=None if opponent is None else opponent.player_id,
        )
        try:
            if self.pool is None:
                raise EngineUnavailable("this server runs no engine workers: AI games are off")
            result = await self.pool.search(request, wait_s=self.settings.engine_wait_s)
        except EngineUnavailable as exc:
            await self._engine_failed(session, ply, exc)
            return
        finally:
            if self._ai_tasks.get(session.id) is asyncio.current_task():
                del self._ai_tasks[session.id]
        async with self._lock(session.id):
            if session.status != "live" or session.state.ply() != ply:
                return  # the game moved on (resigned, aborted) while the AI thought
            stats = result.to_dict()
            stats["budget_ms"] = request.budget_ms
            stats["seed"] = request.seed
            try:
                emitted = session.play(seat, result.action, self.clock(), stats=stats)
            except ServerError as exc:
                log.error("AI chose a refused move in game %s: %s", session.id, exc)
                return
            if not await self._commit_quietly(session, emitted):
                # Not stored (a full disk, say): the AI moves again once the store may
                # take it.
                loop = asyncio.get_running_loop()
                loop.call_later(self.settings.storage_retry_s, self._retry_ai_turn, session)

    def _retry_ai_turn(self, session: GameSession) -> None:
        if self.games.get(session.id) is session:  # still loaded
            self._maybe_ai_turn(session)

    async def _engine_failed(self, session: GameSession, ply: int, exc: EngineUnavailable) -> None:
        """No worker could make the AI's move: as Lichess aborts the games its servers could
        not play, the game ends with no result (reason ``engine_unavailable``), and its
        followers get an ``engine_unavailable`` error saying why. A pool shutting down is
        not a failure: the game is restored, its AI to move, when the server starts again."""
        if self.pool is not None and self.pool.closed:
            return
        log.warning("AI move for game %s failed: %s; aborting the game", session.id, exc.message)
        async with self._lock(session.id):
            if session.status != "live" or session.state.ply() != ply:
                return
            error = Error(
                code=ErrorCode.ENGINE_UNAVAILABLE.value,
                message=f"the AI cannot move: {exc.message}; the game is aborted",
                game_id=session.id,
            )
            for connection in self.subscribers.get(session.id, ()):
                connection.send(error)
            await self._commit(session, session.engine_failed(self.clock()))

    async def drain(self) -> None:
        """Wait for the background work in flight (AI turns, timeouts): shutdown and tests."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close(self) -> None:
        """Cancel every timer (the process is stopping; nothing is lost: all is stored)."""
        for handles in (self._timers, self._evictions, self._quick_timers):
            for handle in handles.values():
                handle.cancel()
            handles.clear()
        if self._lobby_timer is not None:
            self._lobby_timer.cancel()
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None


def _address(websocket: ServerConnection) -> str:
    """The key a connection's address is counted under (server/admission.py)."""
    remote = websocket.remote_address
    return address_key(str(remote[0]) if remote else None)


def _final_snapshot(record: GameRecord) -> Snapshot:
    """A stored game's last position, for a client resuming a game the server unloaded."""
    r = record.row
    return Snapshot(
        game_id=r.id,
        seq=r.seq,
        game=r.game,
        params=r.params,
        players=r.players,
        actions=[m.action for m in record.moves],
        status=r.status,  # type: ignore[arg-type]
        to_move=engine.TERMINAL if r.status not in UNFINISHED else -1,
        result=r.result,
        reason=r.reason,
        clock=r.clock or {},
        clocks=record.moves[-1].clocks if record.moves else None,
        at=r.ended_at or r.created_at,
    )


@contextlib.asynccontextmanager
async def running(
    game_server: GameServer,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[Server]:
    """Restore, then listen (``tls``: wss://). On exit (SIGTERM): stop accepting, tell every
    client to reconnect (close code 1012, service restart, as a rolling upgrade needs), stop
    the timers and wait for the work in flight. Nothing is lost: every move is stored."""
    await game_server.restore()
    server = await serve(game_server, host, port, tls)
    try:
        yield server
    finally:
        server.close(close_connections=False)  # no new connections from here on
        await asyncio.gather(
            *(
                c.websocket.close(CLOSE_RESTART, "server restarting: reconnect")
                for c in list(game_server.connections)
            ),
            return_exceptions=True,
        )
        await server.wait_closed()
        game_server.close()
        await game_server.drain()


async def serve(
    game_server: GameServer,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: ssl.SSLContext | None = None,
) -> Server:
    """Start listening; the caller owns the returned websockets Server."""
    settings = game_server.settings
    admission = game_server.admission
    admission.max_sockets = socket_budget(settings.fd_reserve)
    if admission.max_sockets < settings.max_connections + settings.max_handshakes_per_ip:
        log.warning(
            "the file-descriptor limit lets this server hold %d sockets (handshakes "
            "included), under --max-connections %d: raise the hard limit (ulimit -Hn, "
            "systemd LimitNOFILE) to hold more",
            admission.max_sockets,
            settings.max_connections,
        )
    install_descriptor_log(asyncio.get_running_loop(), admission)
    server = await websockets.serve(
        game_server.handler,
        host,
        port,
        create_connection=guarded_connections(admission),
        process_request=game_server.route,
        process_response=game_server.admit,
        # Origin: a browser page on another site must not open a connection with its
        # visitor's address (cross-site websocket hijacking); no header: not a browser.
        origins=[None, *(Origin(origin) for origin in settings.allow_origins)],
        max_size=MAX_WEBSOCKET_FRAME,
        max_queue=settings.receive_queue,
        open_timeout=settings.handshake_timeout_s,
        # Frames are a few dozen bytes: permessage-deflate costs memory per idle connection
        # for no gain, so it is off unless asked for (measured: bench/load.py capacity).
        compression=None if settings.compression == "none" else settings.compression,
        ping_interval=settings.ping_interval_s,
        ping_timeout=settings.ping_timeout_s,
        close_timeout=settings.close_timeout_s,
        ssl=tls,
    )
    return server

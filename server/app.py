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
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import websockets
from websockets.asyncio.server import Server, ServerConnection
from websockets.http11 import Request, Response

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
    GameList,
    GetGame,
    Hello,
    JoinGame,
    ListGames,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
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
)
from protocol.messages import PROTOCOL_VERSION
from server.clock import FIRST_MOVE_S, TimeControl
from server.connection import SEND_QUEUE_FRAMES, Connection
from server.errors import (
    BadRequest,
    BadToken,
    EngineUnavailable,
    LimitExceeded,
    NotAllowed,
    SeatTaken,
    ServerError,
    StorageError,
    UnknownGame,
    UnknownSeek,
)
from server.limits import (
    BURST,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    MAX_OPEN_GAMES_PER_PLAYER,
    MAX_SEEKS_PER_CONNECTION,
    MAX_WATCHED_PER_CONNECTION,
    RATE_PER_S,
    TokenBucket,
)
from server.lobby import Lobby, SeekEntry, new_seek_id
from server.pool import EnginePool, SearchRequest
from server.session import Emitted, GameSession, Player, token_hash
from server.store import GameRecord, SessionRow, Store

log = logging.getLogger(__name__)

VERSION = "noughts/0.2"
# The websocket layer closes a connection (1009) on frames above this; frames between the
# codec's cap (MAX_CLIENT_FRAME) and this get a `too_large` error and the connection lives.
MAX_WEBSOCKET_FRAME = 4 * MAX_CLIENT_FRAME
GRACE_S = 60.0  # a seat is held this long after its player leaves
KEEP_FINISHED_S = 600.0  # a finished game stays in memory (rematch, resume) this long
UNFINISHED = ("open", "live")


@dataclass(slots=True, eq=False)
class PlayerSession:
    """A player known to this server process, and its open connections."""

    player_id: str
    name: str
    bot: bool
    connections: set[Connection] = field(default_factory=set)

    @property
    def online(self) -> bool:
        return bool(self.connections)

    def as_player(self) -> Player:
        return Player(self.name, "bot" if self.bot else "human", self.player_id)


@dataclass(slots=True)
class ServerSettings:
    grace_s: float = GRACE_S
    keep_finished_s: float = KEEP_FINISHED_S
    rate_per_s: float = RATE_PER_S
    burst: int = BURST
    first_move_s: float = FIRST_MOVE_S  # a timed game's first moves, else aborted
    send_queue: int = SEND_QUEUE_FRAMES  # frames queued for a client before it is dropped
    compression: str | None = None  # websocket permessage-deflate ("deflate") or none
    # Keepalive: a client that does not answer a ping within ping_timeout is closed (this
    # also ends a connection stalled in the middle of a frame).
    ping_interval_s: float = 20.0
    ping_timeout_s: float = 20.0
    close_timeout_s: float = 10.0  # a closing handshake not answered in time: the TCP is cut
    max_connections: int = MAX_CONNECTIONS
    max_connections_per_ip: int = MAX_CONNECTIONS_PER_IP


class GameServer:
    """Everything the server knows, and the handlers for every request."""

    def __init__(
        self,
        store: Store,
        pool: EnginePool | None,
        *,
        settings: ServerSettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.pool = pool
        self.settings = settings or ServerSettings()
        self.clock = clock
        self.version = VERSION
        self.games: dict[str, GameSession] = {}
        self.subscribers: dict[str, set[Connection]] = {}
        self.players: dict[str, PlayerSession] = {}  # online players
        self.seats: dict[str, dict[str, int]] = {}  # player_id -> {game_id: seat}, in memory
        self.lobby = Lobby()
        self.lobby_connections: set[Connection] = set()
        self.connections: set[Connection] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._evictions: dict[str, asyncio.TimerHandle] = {}
        self._quick_timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._per_address: dict[str, int] = {}  # open websockets per remote address

    # --- start: restore what a restart interrupted ------------------------------------------

    async def restore(self) -> int:
        """Load every open or live game from the store; returns how many."""
        now = self.clock()
        records = await self.store.unfinished_games()
        for record in records:
            try:
                session = GameSession.restore(record, now)
            except Exception:
                log.exception("cannot restore game %s; leaving it in the database", record.row.id)
                continue
            self._register(session)
            async with self._lock(session.id):
                await self._commit(session, session.restored_presence(now, self.settings.grace_s))
            self._maybe_ai_turn(session)
        if records:
            log.info("restored %d unfinished games", len(records))
        return len(records)

    # --- connections -----------------------------------------------------------------------

    def admit(self, websocket: ServerConnection, request: Request) -> Response | None:
        """Before the handshake: refuse (HTTP 503, naming the limit) a connection over the
        server's cap or over the cap for its address."""
        address = _address(websocket)
        total = sum(self._per_address.values())
        if total >= self.settings.max_connections:
            limit = f"the server holds at most {self.settings.max_connections} connections"
        elif self._per_address.get(address, 0) >= self.settings.max_connections_per_ip:
            limit = f"at most {self.settings.max_connections_per_ip} connections per address"
        else:
            self._per_address[address] = self._per_address.get(address, 0) + 1
            return None
        log.warning("refusing a connection from %s: %s", address, limit)
        return websocket.respond(HTTPStatus.SERVICE_UNAVAILABLE, f"too_many: {limit}\n")

    def released(self, websocket: ServerConnection) -> None:
        """A connection admitted by ``admit`` ended."""
        address = _address(websocket)
        count = self._per_address.get(address, 0) - 1
        if count > 0:
            self._per_address[address] = count
        else:
            self._per_address.pop(address, None)

    async def handler(self, websocket: ServerConnection) -> None:
        bucket = TokenBucket(
            self.settings.rate_per_s, self.settings.burst, updated=time.monotonic()
        )
        connection = Connection(self, websocket, bucket, self.settings.send_queue)
        self.connections.add(connection)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)

    async def hello(self, connection: Connection, hello: Hello) -> Welcome:
        """Identify the connection's player: a known session, or a new one."""
        now = self.clock()
        if hello.session is not None:
            digest = token_hash(hello.session)
            row = await self.store.load_session(digest)
            if row is None:
                raise BadToken("unknown session: send hello without one to start a new session")
            session_token = hello.session
            player = self.players.get(row.player_id) or PlayerSession(
                row.player_id, row.name, row.bot
            )
        else:
            session_token = secrets.token_urlsafe(24)
            player = PlayerSession(
                "p-" + secrets.token_hex(6), hello.name.strip() or "anonymous", hello.bot
            )
            await self.store.save_session(
                SessionRow(
                    token_hash(session_token), player.player_id, player.name, player.bot, now
                )
            )
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
                await self._commit(game, game.set_online(seat, True, now, self.settings.grace_s))
            games.append({"game_id": game_id, "seat": seat, "token": token, "seq": game.seq})
        return Welcome(
            rid=hello.rid,
            version=PROTOCOL_VERSION,
            session=session_token,
            player_id=player.player_id,
            server=self.version,
            games=games,
        )

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
                await self._commit(game, game.set_online(seat, False, now, self.settings.grace_s))
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
        self.games[session.id] = session
        for seat, player in enumerate(session.players):
            if player is not None and player.player_id is not None and not player.is_ai:
                self.seats.setdefault(player.player_id, {})[session.id] = seat

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

    def _check_open_games(self, player_id: str) -> None:
        held = self.seats.get(player_id, {})
        open_games = sum(
            1 for g in held if self.games.get(g) and self.games[g].status in UNFINISHED
        )
        if open_games >= MAX_OPEN_GAMES_PER_PLAYER:
            raise LimitExceeded(
                f"limit: at most {MAX_OPEN_GAMES_PER_PLAYER} unfinished games per player"
            )

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

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
        first carries ``rid``). Call with the game's lock held."""
        for index, event in enumerate(emitted):
            try:
                await self._store(session, event)
            except StorageError:
                # The database refused: the game in memory is ahead of what is durable.
                # Drop it from memory (a restart restores the last committed state).
                log.exception("storing an event of game %s failed; unloading it", session.id)
                self._evict(session.id)
                raise
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

    def _game_over(self, session: GameSession) -> None:
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

    def _schedule(self, session: GameSession) -> None:
        handle = self._timers.pop(session.id, None)
        if handle is not None:
            handle.cancel()
        deadline = session.next_deadline()
        if deadline is None:
            return
        delay = max(0.0, deadline - self.clock()) + 0.001
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
                await self._commit(session, emitted)
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
        if private is not None and private.private:
            return
        frame = encode(event)
        for connection in self.lobby_connections:
            if seek is None or seek.visible_to(connection.player_id):
                connection.post(frame)

    def _remove_seek(self, seek: SeekEntry) -> None:
        if self.lobby.remove(seek.id) is None:
            return
        handle = self._quick_timers.pop(seek.id, None)
        if handle is not None:
            handle.cancel()
        if not seek.quick:
            self._lobby_push(LobbyEvent(kind="seek_removed", seek_id=seek.id), seek=seek)

    def _live_games(self) -> list[dict[str, Any]]:
        return [g.summary() for g in self.games.values() if g.status == "live" and not g.private]

    # --- creating and starting games ------------------------------------------------------------

    def _ai_player(self, algorithm: str, budget_ms: int) -> Player:
        if algorithm not in engine.ALGORITHMS:
            raise BadRequest(
                f"unknown algorithm {algorithm!r}; choose one of {', '.join(engine.ALGORITHMS)}"
            )
        if self.pool is None:
            raise EngineUnavailable("this server runs no engine workers: AI games are off")
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
            await self.store.create_game(session.to_row())
            for connection, seat, rid in seated:
                self._subscribe(session.id, connection)
                token = session.tokens[seat]
                assert token is not None
                connection.send(Seated(rid=rid, game_id=session.id, seat=seat, token=token))
            await self._commit(session, [session.start(self.clock())])
        self._lobby_push(LobbyEvent(kind="game_added", game=session.summary()), private=session)
        self._maybe_ai_turn(session)

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
            session.players[1 - seat] = self._ai_player(request.algorithm, request.budget_ms)
            session.take_seat(seat, me.as_player())
            await self._start_game(session, [(connection, seat, request.rid)])
            return
        token = session.take_seat(seat, me.as_player())
        self._register(session)
        await self.store.create_game(session.to_row())
        self._subscribe(session.id, connection)
        connection.send(Seated(rid=request.rid, game_id=session.id, seat=seat, token=token))
        connection.send(session.snapshot(self.clock()))

    async def on_list(self, connection: Connection, request: ListGames) -> None:
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
        connection.send(GameList(rid=request.rid, games=games))

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
        record = await self.store.get_game(request.game_id)
        if record is None:
            raise UnknownGame(f"no game {request.game_id!r}", request.game_id)
        connection.send(Record(rid=request.rid, game=record.to_dict()))

    # --- requests: following games -------------------------------------------------------------

    async def on_watch(self, connection: Connection, request: Watch) -> None:
        session = self._game(request.game_id)
        if (
            session.id not in connection.watching
            and len(connection.watching) >= MAX_WATCHED_PER_CONNECTION
        ):
            raise LimitExceeded(f"limit: at most {MAX_WATCHED_PER_CONNECTION} games watched")
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
        if session is None:
            record = await self.store.get_game(request.game_id)
            if record is None:
                raise UnknownGame(f"no game {request.game_id!r}", request.game_id)
            connection.send(_final_snapshot(record))
            connection.send(Resumed(rid=request.rid, game_id=record.row.id, seq=record.row.seq))
            return
        async with self._lock(session.id):
            seat = session.seat_of_player(me.player_id)
            token = None
            if seat is not None:
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
        self.lobby_connections.add(connection)
        seeks = [s.to_dict() for s in self.lobby.visible_to(connection.player_id)]
        connection.send(LobbyState(rid=request.rid, seeks=seeks, games=self._live_games()))

    def _check_game(self, game: str, params: dict[str, int]) -> None:
        try:
            engine.make_game(game, **params)
        except engine.EngineError as exc:
            raise BadRequest(str(exc)) from exc

    def _check_seeks(self, connection: Connection) -> None:
        if len(self.lobby.owned_by(connection)) >= MAX_SEEKS_PER_CONNECTION:
            raise LimitExceeded(
                f"limit: at most {MAX_SEEKS_PER_CONNECTION} open seeks per connection"
            )

    def _resolve_player(self, who: str) -> str:
        if who in self.players:
            return who
        named = [p.player_id for p in self.players.values() if p.name == who]
        if len(named) == 1:
            return named[0]
        if not named:
            raise BadRequest(f"no player {who!r} is online")
        raise BadRequest(f"{len(named)} players named {who!r} are online: use a player id")

    async def on_seek(self, connection: Connection, request: Seek) -> None:
        me = self._me(connection)
        self._check_seeks(connection)
        self._check_game(request.game, dict(request.params))
        to = None
        if request.to is not None:
            to = self._resolve_player(request.to)
            if to == me.player_id:
                raise BadRequest("you cannot challenge yourself")
        seek = SeekEntry(
            id=new_seek_id(),
            game=request.game,
            params=dict(request.params),
            control=TimeControl.parse(request.clock),
            owner=me.as_player(),
            owner_connection=connection,
            created_at=self.clock(),
            color=request.color,
            opponents=request.opponents,
            to=to,
        )
        self.lobby.add(seek)
        connection.send(SeekPosted(rid=request.rid, seek_id=seek.id))
        self._lobby_push(LobbyEvent(kind="seek_added", seek=seek.to_dict()), seek=seek)

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
        if request.ai_after_s:
            self._ai_player(request.algorithm, request.budget_ms)  # refuse a bad fallback now
        entry = SeekEntry(
            id=new_seek_id(),
            game=request.game,
            params=dict(request.params),
            control=TimeControl.parse(request.clock),
            owner=me.as_player(),
            owner_connection=connection,
            created_at=self.clock(),
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
        session.players[1 - seat] = self._ai_player(entry.algorithm, entry.budget_ms)
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
        self._spawn(self._ai_turn(session, seat, player))

    async def _ai_turn(self, session: GameSession, seat: int, player: Player) -> None:
        if self.pool is None:
            log.error("game %s has an AI seat but the server runs no engine", session.id)
            return
        seed = secrets.randbits(31)
        ply = session.state.ply()
        request = SearchRequest(
            game=session.game.name,
            params=dict(session.game.params),
            actions=tuple(session.state.history()),
            algorithm=player.algorithm or "mcts",
            budget_ms=float(player.budget_ms or 100),
            seed=seed,
            game_key=f"{session.id}:{seat}",
        )
        try:
            result = await self.pool.search(request)
        except ServerError as exc:
            log.error("AI move for game %s failed: %s", session.id, exc)
            error = Error(code=exc.code.value, message=exc.message, game_id=session.id)
            for connection in self.subscribers.get(session.id, ()):
                connection.send(error)
            return
        async with self._lock(session.id):
            if session.status != "live" or session.state.ply() != ply:
                return  # the game moved on (resigned, aborted) while the AI thought
            stats = dict(result)
            stats["budget_ms"] = request.budget_ms
            stats["seed"] = seed
            try:
                emitted = session.play(seat, int(result["action"]), self.clock(), stats=stats)
            except ServerError as exc:
                log.error("AI chose a refused move in game %s: %s", session.id, exc)
                return
            await self._commit(session, emitted)

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


def _address(websocket: ServerConnection) -> str:
    remote = websocket.remote_address
    return str(remote[0]) if remote else "?"


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
    game_server: GameServer, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[Server]:
    """Restore, then listen; on exit stop listening and cancel the timers."""
    await game_server.restore()
    server = await serve(game_server, host, port)
    try:
        yield server
    finally:
        server.close()
        await server.wait_closed()
        game_server.close()
        await game_server.drain()


async def serve(game_server: GameServer, host: str = "127.0.0.1", port: int = 0) -> Server:
    """Start listening; the caller owns the returned websockets Server."""
    settings = game_server.settings

    async def handler(websocket: ServerConnection) -> None:
        try:
            await game_server.handler(websocket)
        finally:
            game_server.released(websocket)

    server = await websockets.serve(
        handler,
        host,
        port,
        process_request=game_server.admit,
        max_size=MAX_WEBSOCKET_FRAME,
        # Frames are a few dozen bytes: permessage-deflate costs memory per idle connection
        # for no gain, so it is off unless asked for (measured: bench/load.py capacity).
        compression=settings.compression,
        ping_interval=settings.ping_interval_s,
        ping_timeout=settings.ping_timeout_s,
        close_timeout=settings.close_timeout_s,
    )
    return server

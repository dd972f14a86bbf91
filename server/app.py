"""The game server: the request handlers of every topic (server/handlers/) joined in
GameServer, which routes each request to its handler, and the websocket server around it:
health check, admission, restore at start, drain at stop."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import ssl
import time
from collections.abc import AsyncIterator, Callable
from http import HTTPStatus
from typing import Any, cast

import websockets
from websockets.asyncio.server import Server, ServerConnection
from websockets.http11 import Request, Response
from websockets.typing import Origin

from protocol import (
    MAX_CLIENT_FRAME,
    Abort,
    AcceptSeek,
    CancelSeek,
    Claim,
    CreateGame,
    DeclineSeek,
    Draw,
    GetGame,
    JoinGame,
    ListGames,
    LobbySubscribe,
    Message,
    Move,
    Ping,
    Pong,
    QuickPair,
    Rematch,
    Resign,
    Resume,
    Seek,
    Unwatch,
    Watch,
)
from server.admission import Refused, Stage, socket_budget
from server.connection import Connection
from server.errors import BadRequest
from server.handlers import GameRequests, LobbyRequests, RecordRequests, SessionRequests
from server.limits import TokenBucket
from server.rows import GameRecord
from server.session import GameSession
from server.transport import GuardedConnection, guarded_connections, install_descriptor_log, storms

log = logging.getLogger(__name__)

# Close code to every client when the server stops: RFC 6455's 1012 "service restart", so
# that clients reconnect (to this server once it is back, or to another node).
CLOSE_RESTART = 1012

# The websocket layer closes a connection (1009) on frames above this; frames between the
# codec's cap (MAX_CLIENT_FRAME) and this get a `too_large` error and the connection lives.
MAX_WEBSOCKET_FRAME = 4 * MAX_CLIENT_FRAME
HEALTH_PATH = "/healthz"
# Requests about one game: in a cluster, served by the game's owner node.
FORWARDED = frozenset({JoinGame, Move, Resign, Abort, Draw, Claim, Rematch, GetGame, Watch, Resume})


class GameServer(SessionRequests, GameRequests, LobbyRequests, RecordRequests):
    """Everything the server knows, and the handlers for every request: the topics'
    handlers joined (server/handlers/), and the connections' entry points."""

    # --- start: restore what a restart interrupted ------------------------------------------

    async def restore(self) -> int:
        """Load every open or live game from the store; returns how many. A game whose
        stored rows cannot be read or replayed is quarantined (a log line) and the server
        starts without it. None with ``restore_games`` off (a server that only reads):
        the stored games stay as they are, no clock of theirs runs."""
        self._schedule_sweep()
        if self.cluster is not None:
            return 0  # a cluster node restores the games of each shard it takes
        if not self.settings.restore_games:
            return 0
        return await self.adopt(await self.store.unfinished_games())

    async def adopt(self, records: list[GameRecord]) -> int:
        """Serve these stored games from now on (a start, or a cluster node taking a
        shard): each replayed, its seats away until their players come back."""
        now = self.clock()
        restored = 0
        for record in records:
            if record.row.id in self.games:
                continue
            try:
                session = GameSession.restore(record, now)
            except Exception as exc:
                await self.store.quarantine(record.row.id, f"cannot restore it: {exc!r}")
                continue
            self._register(session)
            if self.cluster is not None:
                self.cluster.adopted(session)  # its followers here catch up
            grace_s = self.settings.grace_s
            here = []  # seats whose player is connected here (a cluster node taking a shard)
            for seat, player in enumerate(session.players):
                known = self.players.get(player.player_id or "") if player else None
                if known is not None and known.online:
                    here.append(seat)
            emitted = session.restored_presence(now, grace_s, here)
            async with self._lock(session.id):
                await self._commit_quietly(session, emitted)
            self._maybe_ai_turn(session)
            restored += 1
        if restored:
            log.info("restored %d unfinished games", restored)
        return restored

    # --- connections -----------------------------------------------------------------------

    def route(self, websocket: ServerConnection, request: Request) -> Response | None:
        """Before the handshake: ``GET /healthz`` is answered 200 (a load balancer's or
        orchestrator's health check), from any address, its handshake cap reached or not;
        from an address over it anything else is answered 503. With ``secret_path``
        (--secret-path), any other path is answered 403, before any protocol. Every other
        request goes on to the websocket handshake, where websockets answers a plain HTTP
        request 426, another method 405, a bad handshake 400 and a browser origin not
        allowed 403."""
        # (websockets before 16 parses GET requests only: no ``method``)
        if request.path == HEALTH_PATH and getattr(request, "method", "GET") == "GET":
            return websocket.respond(HTTPStatus.OK, "ok\n")
        ticket = cast(GuardedConnection, websocket).ticket  # serve() creates only these
        if ticket is not None and ticket.stage is Stage.HEALTH_ONLY:
            storms.warning(
                "refused at accept",
                "refusing a connection from %s: %s",
                ticket.address,
                ticket.refused,
            )
            return websocket.respond(
                HTTPStatus.SERVICE_UNAVAILABLE, f"too_many: {ticket.refused}\n"
            )
        if self.secret_path is not None and not hmac.compare_digest(
            request.path.encode("utf-8", "surrogateescape"), self.secret_path.encode()
        ):  # (in constant time, as tokens are compared)
            storms.warning(
                "refused without the secret",
                "refusing a connection from %s: not the secret path (--secret-path)",
                ticket.address if ticket is not None else "?",
            )
            return websocket.respond(
                HTTPStatus.FORBIDDEN, "forbidden: this server is reached at its secret path only\n"
            )
        return None  # another method: websockets answers 405

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
        remote = websocket.remote_address
        peer = str(remote[0]) if remote else None
        forwarded = request.headers.get_all("X-Forwarded-For")
        client = self.admission.proxies.client(peer, forwarded) if forwarded else None
        try:
            self.admission.open_websocket(websocket.ticket, client)
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

    async def dispatch(self, connection: Connection, message: Message) -> None:
        handler = self._handlers.get(type(message))
        if handler is None:
            raise BadRequest(f"{message.TYPE} is not a request the server accepts")
        cluster = self.cluster
        if cluster is not None and connection.node is None and type(message) in FORWARDED:
            if not cluster.serves(message.game_id):  # type: ignore[attr-defined]
                await cluster.forward(connection, message)  # to the game's owner node
                return
        game_id = getattr(message, "game_id", None)
        if game_id in self.waiting and type(message) in FORWARDED:
            await self._serve_again(game_id)  # it waits for the store: back, or unavailable
        await handler(self, connection, message)

    async def on_ping(self, connection: Connection, request: Ping) -> None:
        connection.send(Pong(rid=request.rid))

    _handlers: dict[type[Message], Callable[[Any, Connection, Any], Any]] = {
        CreateGame: GameRequests.on_create,
        ListGames: RecordRequests.on_list,
        JoinGame: GameRequests.on_join,
        Move: GameRequests.on_move,
        Resign: GameRequests.on_resign,
        Abort: GameRequests.on_abort,
        Draw: GameRequests.on_draw,
        Claim: GameRequests.on_claim,
        Rematch: GameRequests.on_rematch,
        GetGame: RecordRequests.on_get,
        Watch: GameRequests.on_watch,
        Unwatch: GameRequests.on_unwatch,
        Resume: GameRequests.on_resume,
        LobbySubscribe: LobbyRequests.on_lobby,
        Seek: LobbyRequests.on_seek,
        CancelSeek: LobbyRequests.on_cancel_seek,
        AcceptSeek: LobbyRequests.on_accept,
        DeclineSeek: LobbyRequests.on_decline,
        QuickPair: LobbyRequests.on_quick,
        Ping: on_ping,
    }

    async def drain(self) -> None:
        """Wait for the background work in flight (AI turns, timeouts): shutdown and tests."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close(self) -> None:
        """Cancel every timer and every AI search in flight (the process is stopping; nothing
        is lost: all is stored, and a game restored with its AI to move asks again)."""
        for ai_turn in self._ai_tasks.values():
            ai_turn.cancel()  # its search is dropped, or stopped in its worker
        self._ai_tasks.clear()
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


@contextlib.asynccontextmanager
async def running(
    game_server: GameServer,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[Server]:
    """Restore, then listen (``tls``: wss://). On exit (SIGTERM): stop accepting, tell every
    client to reconnect (close code 1012, service restart, as a rolling upgrade needs), stop
    the timers and the AI searches, and wait for the rest of the work in flight. Nothing is
    lost: every move is stored, and a game whose AI was thinking is restored, the AI to move."""
    await game_server.restore()
    server = await serve(game_server, host, port, tls)
    try:
        yield server
    finally:
        # Bounded: a drain waits on the games' locks, the shards' hand-over, every close
        # handshake and the work in flight, each slow on a loaded machine.
        game_server.draining = True
        bound = game_server.settings.drain_timeout_s
        try:
            async with asyncio.timeout(bound):
                await _stop(game_server, server)
        except TimeoutError:
            log.warning("the drain took over %g s (--drain-timeout-s): cutting the rest", bound)
            for connection in list(game_server.connections):
                connection.websocket.transport.abort()  # no more closing handshakes
            game_server.close()


async def _stop(game_server: GameServer, server: Server) -> None:
    server.close(close_connections=False)  # no new connections from here on
    if game_server.cluster is not None:
        await game_server.cluster.drain()  # its games to the other nodes, at once
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
    if settings.admin_port is not None:  # the admin port's sockets come out of the same budget
        admission.max_sockets = max(1, admission.max_sockets - settings.admin_max_connections)
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
        create_connection=guarded_connections(admission, settings.health_only_timeout_s),
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
        backlog=settings.listen_backlog,
        reuse_port=settings.reuse_port or settings.processes > 1,
    )
    return server

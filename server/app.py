"""The game server: sessions, seats, AI turns and broadcasts, on one event loop.

Order of every change: validate (GameSession raises and changes nothing), apply
in memory, commit to the store, then acknowledge and broadcast. Nothing is
sent about a move before its transaction has committed.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import websockets
from websockets.asyncio.server import Server, ServerConnection

import engine
from protocol import (
    MAX_CLIENT_FRAME,
    CreateGame,
    Ended,
    Error,
    GameList,
    GetGame,
    JoinGame,
    ListGames,
    Message,
    Move,
    Moved,
    Ping,
    Pong,
    Record,
    Resign,
    Seated,
    Watch,
    encode,
)
from server.connection import Connection
from server.errors import (
    BadRequest,
    BadToken,
    EngineUnavailable,
    LimitExceeded,
    NotYourTurn,
    SeatTaken,
    ServerError,
    UnknownGame,
)
from server.pool import EnginePool, SearchRequest
from server.session import GameSession, MovePlayed, Player
from server.store import GameEnd, Store

log = logging.getLogger(__name__)

VERSION = "noughts/0.1"
MAX_OPEN_GAMES_PER_CONNECTION = 20
# The websocket layer closes a connection (1009) on frames above this; frames between the
# codec's cap (MAX_CLIENT_FRAME) and this get a `too_large` error and the connection lives.
MAX_WEBSOCKET_FRAME = 4 * MAX_CLIENT_FRAME


class GameServer:
    """Everything the server knows, and the handlers for every request."""

    def __init__(
        self,
        store: Store,
        pool: EnginePool | None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.pool = pool
        self.clock = clock
        self.version = VERSION
        self.games: dict[str, GameSession] = {}
        self.subscribers: dict[str, set[Connection]] = {}
        self.connections: set[Connection] = set()
        self._ai_tasks: set[asyncio.Task[None]] = set()

    # --- connections ---------------------------------------------------------------------

    async def handler(self, websocket: ServerConnection) -> None:
        connection = Connection(self, websocket)
        self.connections.add(connection)
        await connection.run()

    def disconnected(self, connection: Connection) -> None:
        self.connections.discard(connection)
        for game_id in list(connection.seats) + list(connection.watching):
            subscribers = self.subscribers.get(game_id)
            if subscribers is not None:
                subscribers.discard(connection)

    async def dispatch(self, connection: Connection, message: Message) -> None:
        handler = self._handlers.get(type(message))
        if handler is None:
            raise BadRequest(f"{message.TYPE} is not a request the server accepts")
        await handler(self, connection, message)

    def _subscribe(self, game_id: str, connection: Connection) -> None:
        self.subscribers.setdefault(game_id, set()).add(connection)

    def broadcast(self, game_id: str, message: Message, exclude: Connection | None = None) -> None:
        frame = encode(message)
        for connection in self.subscribers.get(game_id, ()):
            if connection is not exclude:
                connection.post(frame)

    def _game(self, game_id: str) -> GameSession:
        session = self.games.get(game_id)
        if session is None:
            raise UnknownGame(f"no live game {game_id!r}", game_id)
        return session

    # --- requests --------------------------------------------------------------------------

    async def on_create(self, connection: Connection, request: CreateGame) -> None:
        open_games = sum(
            1 for g in connection.seats if self.games.get(g) and self.games[g].status != "finished"
        )
        if open_games >= MAX_OPEN_GAMES_PER_CONNECTION:
            raise LimitExceeded(
                f"limit: at most {MAX_OPEN_GAMES_PER_CONNECTION} unfinished games per connection"
            )
        now = self.clock()
        session = GameSession.new(request.game, dict(request.params), now)
        seat = request.seat if request.seat >= 0 else secrets.randbelow(2)
        me = Player(
            connection.name or "anonymous",
            "bot" if connection.bot else "human",
            connection.player_id,
        )
        if request.opponent == "ai":
            if request.algorithm not in engine.ALGORITHMS:
                raise BadRequest(
                    f"unknown algorithm {request.algorithm!r}; "
                    f"choose one of {', '.join(engine.ALGORITHMS)}"
                )
            if self.pool is None:
                raise EngineUnavailable("this server runs no engine workers: AI games are off")
            ai = Player(
                f"{request.algorithm} {request.budget_ms}ms",
                "ai",
                algorithm=request.algorithm,
                budget_ms=request.budget_ms,
            )
            session.players[1 - seat] = ai
        token = session.take_seat(seat, me)
        if session.open_seat() is None:
            session.start(now)
        await self.store.create_game(session.to_row())
        self.games[session.id] = session
        connection.seats[session.id] = seat
        self._subscribe(session.id, connection)
        connection.send(Seated(rid=request.rid, game_id=session.id, seat=seat, token=token))
        connection.send(session.snapshot())
        self._maybe_ai_turn(session)

    async def on_list(self, connection: Connection, request: ListGames) -> None:
        if request.status in ("open", "live"):
            games = [s.summary() for s in self.games.values() if s.status == request.status][
                : request.limit
            ]
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
                }
                for r in rows
            ]
        connection.send(GameList(rid=request.rid, games=games))

    async def on_join(self, connection: Connection, request: JoinGame) -> None:
        session = self._game(request.game_id)
        seat = session.open_seat()
        if seat is None or session.status != "open":
            raise SeatTaken(f"game {session.id} has no open seat", session.id)
        me = Player(
            connection.name or "anonymous",
            "bot" if connection.bot else "human",
            connection.player_id,
        )
        token = session.take_seat(seat, me)
        now = self.clock()
        session.start(now)
        await self.store.update_game(
            session.to_row(), {"kind": "started", "seat": seat, "player": me.to_dict(), "at": now}
        )
        connection.seats[session.id] = seat
        self._subscribe(session.id, connection)
        connection.send(Seated(rid=request.rid, game_id=session.id, seat=seat, token=token))
        self.broadcast(session.id, session.snapshot())

    async def on_move(self, connection: Connection, request: Move) -> None:
        session = self._game(request.game_id)
        seat = session.seat_of(request.token)
        if connection.seats.get(session.id) != seat:
            raise BadToken(f"this connection holds no seat in game {session.id}", session.id)
        if session.players[seat] is not None and session.players[seat].kind == "ai":  # type: ignore[union-attr]
            raise NotYourTurn("that seat is played by the AI", session.id)
        played = session.play(seat, request.action, self.clock(), ply=request.ply)
        await self._commit_and_announce(session, played, connection, request.rid)

    async def on_resign(self, connection: Connection, request: Resign) -> None:
        session = self._game(request.game_id)
        seat = session.seat_of(request.token)
        if connection.seats.get(session.id) != seat:
            raise BadToken(f"this connection holds no seat in game {session.id}", session.id)
        end = session.resign(seat, self.clock())
        await self.store.end_game(session.id, end)
        self._announce_end(session, end, request.rid)

    async def on_get(self, connection: Connection, request: GetGame) -> None:
        record = await self.store.get_game(request.game_id)
        if record is None:
            raise UnknownGame(f"no game {request.game_id!r}", request.game_id)
        connection.send(Record(rid=request.rid, game=record.to_dict()))

    async def on_watch(self, connection: Connection, request: Watch) -> None:
        session = self._game(request.game_id)
        connection.watching.add(session.id)
        self._subscribe(session.id, connection)
        connection.send(session.snapshot(rid=request.rid))

    async def on_ping(self, connection: Connection, request: Ping) -> None:
        connection.send(Pong(rid=request.rid))

    _handlers: dict[type[Message], Callable[[Any, Connection, Any], Any]] = {
        CreateGame: on_create,
        ListGames: on_list,
        JoinGame: on_join,
        Move: on_move,
        Resign: on_resign,
        GetGame: on_get,
        Watch: on_watch,
        Ping: on_ping,
    }

    # --- moves, AI turns, endings ------------------------------------------------------------

    async def _commit_and_announce(
        self,
        session: GameSession,
        played: MovePlayed,
        mover: Connection | None,
        rid: int | None,
    ) -> None:
        await self.store.append_move(played.move, played.end)
        m = played.move
        event = Moved(
            game_id=session.id,
            seq=m.seq,
            ply=m.ply,
            seat=m.seat,
            action=m.action,
            to_move=played.to_move,
            at=m.at,
            stats=m.stats,
        )
        frame = encode(event)
        for connection in self.subscribers.get(session.id, ()):
            if connection is mover and rid is not None:
                connection.send(
                    Moved(
                        game_id=session.id,
                        seq=m.seq,
                        ply=m.ply,
                        seat=m.seat,
                        action=m.action,
                        to_move=played.to_move,
                        at=m.at,
                        stats=m.stats,
                        rid=rid,
                    )
                )
            else:
                connection.post(frame)
        if played.end is not None:
            self._announce_end(session, played.end, None)
        else:
            self._maybe_ai_turn(session)

    def _announce_end(self, session: GameSession, end: GameEnd, rid: int | None) -> None:
        self.broadcast(
            session.id,
            Ended(
                game_id=session.id,
                seq=end.seq,
                result=end.result,
                reason=end.reason,
                winner=session.winner,
                rid=rid,
            ),
        )
        if self.pool is not None:
            self.pool.forget(session.id)
        # The finished game leaves memory; its record stays in the store.
        self.games.pop(session.id, None)
        self.subscribers.pop(session.id, None)

    def _maybe_ai_turn(self, session: GameSession) -> None:
        if session.status != "live":
            return
        seat = session.state.current_player()
        player = session.players[seat] if seat >= 0 else None
        if player is None or player.kind != "ai":
            return
        task = asyncio.get_running_loop().create_task(self._ai_turn(session, seat, player))
        self._ai_tasks.add(task)
        task.add_done_callback(self._ai_tasks.discard)

    async def _ai_turn(self, session: GameSession, seat: int, player: Player) -> None:
        assert self.pool is not None  # AI seats exist only with a pool (on_create checks)
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
            self.broadcast(session.id, _error_event(session.id, exc))
            return
        if session.status != "live" or session.state.ply() != ply:
            return  # the game moved on (resigned, aborted) while the AI thought
        stats = dict(result)
        stats["budget_ms"] = request.budget_ms
        stats["seed"] = seed
        try:
            played = session.play(seat, int(result["action"]), self.clock(), stats=stats)
        except ServerError as exc:
            log.error("AI chose a refused move in game %s: %s", session.id, exc)
            return
        await self._commit_and_announce(session, played, None, None)

    async def drain(self) -> None:
        """Wait for the AI turns in flight (used at shutdown and in tests)."""
        while self._ai_tasks:
            await asyncio.gather(*list(self._ai_tasks), return_exceptions=True)


def _error_event(game_id: str, exc: ServerError) -> Message:
    return Error(code=exc.code.value, message=exc.message, game_id=game_id)


async def serve(game_server: GameServer, host: str = "127.0.0.1", port: int = 0) -> Server:
    """Start listening; the caller owns the returned websockets Server."""
    return await websockets.serve(
        game_server.handler,
        host,
        port,
        max_size=MAX_WEBSOCKET_FRAME,
        # Frames are a few dozen bytes: permessage-deflate would cost ~47 KB per idle
        # connection against ~15 KB without it, for no gain (measured; see bench/).
        compression=None,
    )

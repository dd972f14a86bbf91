"""Requests about games: create, join, move, resign, abort, draw, claim, rematch;
following them: watch, unwatch, resume.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import engine
from protocol import (
    Abort,
    Claim,
    CreateGame,
    Draw,
    JoinGame,
    LobbyEvent,
    Move,
    Moved,
    Ok,
    Rematch,
    Resign,
    Resume,
    Resumed,
    Seated,
    Snapshot,
    Unwatch,
    Watch,
    decode_server,
    encode,
    with_rid,
)
from server.connection import Connection
from server.errors import (
    BadToken,
    GameOver,
    LimitExceeded,
    NotAllowed,
    NotYourTurn,
    SeatTaken,
    StaleMove,
    UnknownGame,
)
from server.game_events import GameEvents
from server.hub import UNFINISHED, Reservation
from server.rows import GameRecord
from server.session import (
    Emitted,
    GameSession,
    ai_draw_answer,
    ended_event,
    event_fields,
    made_already,
    token_hash,
)

# The game requests that a client may send again with their ``seq``.
GameRequest = Resign | Abort | Draw | Claim | Rematch
T = TypeVar("T")


class GameRequests(GameEvents):
    """The handlers of requests about games."""

    # --- requests: games ---------------------------------------------------------------------

    async def on_create(self, connection: Connection, request: CreateGame) -> None:
        me = self._me(connection)
        session = self._new_session(
            request.game, request.params, request.clock, private=request.private
        )
        async with self._reserving(session.id) as reservation:
            await self._check_open_games(me, reservation=reservation)
            seat = request.seat if request.seat >= 0 else secrets.randbelow(2)
            if request.opponent == "ai":
                session.players[1 - seat] = self._ai_player(
                    request.algorithm, request.budget_ms, request.game, request.params, me.player_id
                )
                session.take_seat(seat, me.as_player())
                await self._start_game(session, [(connection, seat, request.rid)])
                return
            self._check_ai(request.algorithm, request.budget_ms, request.game, request.params)
            token = session.take_seat(seat, me.as_player())
            self._register(session, [connection])
            async with self._lock(session.id):
                await self._create(session)
        self._subscribe(session.id, connection)
        connection.send(Seated(rid=request.rid, game_id=session.id, seat=seat, token=token))
        connection.send(session.snapshot(self.clock()))

    async def on_join(self, connection: Connection, request: JoinGame) -> None:
        me = self._me(connection)
        session = self._game(request.game_id)
        async with self._lock(session.id):
            seat = session.open_seat()
            if seat is None or session.status != "open":
                raise SeatTaken(f"game {session.id} has no open seat", session.id)
            if session.seat_of_player(me.player_id) is not None:
                raise NotAllowed(f"you already hold a seat in game {session.id}", session.id)
            async with self._reserving(session.id) as reservation:
                await self._check_open_games(me, reservation=reservation)
                token = session.take_seat(seat, me.as_player())
                self._register(session, [connection])
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
            await self._overdue(session)
            try:
                emitted = session.play(seat, request.action, self.clock(), ply=request.ply)
            except (NotYourTurn, StaleMove, GameOver):
                if not await self._acknowledge_again(connection, session, seat, request):
                    raise
                return
            await self._commit(session, emitted, connection, request.rid)
        self._maybe_ai_turn(session)

    async def _acknowledge_again(
        self, connection: Connection, session: GameSession, seat: int, request: Move
    ) -> bool:
        """A move sent again with its ``ply`` (its acknowledgement lost with a connection,
        or a node: a cluster's node sends a forwarded request again to a game's new owner)
        gets its acknowledgement again, the ``moved`` event with this request's ``rid``;
        False if it is not one (the refusal stands)."""
        ply = request.ply
        if ply is None or not session.sent_again(seat, request.action, ply):
            return False
        frame = session.moved_event(ply)
        if frame is None:  # a restored game keeps no event log: its stored move
            record = await self.store.get_game(session.id)
            frame = session.moved_event(ply, None if record is None else record.moves)
        if frame is None:
            return False
        connection.post(with_rid(frame, request.rid))
        return True

    async def _seat_request_again(
        self, connection: Connection, request: GameRequest
    ) -> tuple[GameSession, int] | None:
        """``_seat_request``; for a game no longer in memory (finished and unloaded), a
        request sent again (``seq``) is answered from the store as it was the first time,
        and None returned; any other still gets ``unknown_game``."""
        if request.game_id in self.games or request.seq is None:
            return self._seat_request(connection, request.game_id, request.token)
        self._charge(connection, self.settings.cost_get, f"{request.TYPE} of a stored game")
        record = await self.store.get_game(request.game_id)
        if record is None:
            raise UnknownGame(f"no live game {request.game_id!r}", request.game_id)
        seat = _stored_seat(record, request.token, connection.player_id)
        after = [e for e in record.events if e["seq"] > request.seq]
        event = made_already(request, seat, after)
        if event is None:
            raise UnknownGame(f"no live game {request.game_id!r}", request.game_id)
        self._answer_again(connection, request, event, None)
        return None

    async def _answered_again(
        self, connection: Connection, session: GameSession, seat: int, request: GameRequest
    ) -> bool:
        """A request sent again (its reply lost with a connection, or a node) that was
        applied the first time: answered again as it was then (the ``ended`` event with this
        request's ``rid``, or ``ok``), the game unchanged (PROTOCOL.md, "A request sent
        again"). False if it was never applied (or has no ``seq``): it is served now. Called
        under the game's lock."""
        since = request.seq
        if since is None or since >= session.seq:
            return False
        frames = session.events_since(since)
        if frames is not None:
            events = [event_fields(decode_server(frame)) for frame in frames]
            after = [e for e in events if e is not None]
        else:  # older than the log (or a restored game, which keeps none): the stored events
            self._charge(connection, self.settings.cost_get, f"{request.TYPE} with an old seq")
            record = await self.store.get_game(session.id)
            stored = record.events if record is not None else []
            after = [e for e in stored if e["seq"] > since]
        event = made_already(request, seat, after)
        if event is None:
            return False
        self._answer_again(connection, request, event, session)
        return True

    def _answer_again(
        self,
        connection: Connection,
        request: GameRequest,
        event: dict[str, Any],
        session: GameSession | None,
    ) -> None:
        if isinstance(request, Draw | Rematch):
            connection.send(Ok(rid=request.rid))
            return
        frame = None
        if session is not None:  # the event exactly as first sent, if the log still has it
            frame = next((f for seq, f in session.log if seq == event["seq"]), None)
        if frame is None:
            frame = encode(ended_event(request.game_id, event))
        connection.post(with_rid(frame, request.rid))

    async def _game_request(
        self,
        connection: Connection,
        request: GameRequest,
        act: Callable[[GameSession, int], Awaitable[T]],
    ) -> T | None:
        """A seat's game request (resign, abort, draw, claim, rematch): ``act(session,
        seat)`` under the game's lock, unless the request is one sent again and already
        answered (``_seat_request_again``, ``_answered_again``): then None."""
        seated = await self._seat_request_again(connection, request)
        if seated is None:
            return None
        session, seat = seated
        async with self._lock(session.id):
            if await self._answered_again(connection, session, seat, request):
                return None
            await self._overdue(session)
            return await act(session, seat)

    async def on_resign(self, connection: Connection, request: Resign) -> None:
        async def act(session: GameSession, seat: int) -> None:
            emitted = session.resign(seat, self.clock())
            await self._commit(session, emitted, connection, request.rid)

        await self._game_request(connection, request, act)

    async def on_abort(self, connection: Connection, request: Abort) -> None:
        async def act(session: GameSession, seat: int) -> None:
            emitted = session.abort(seat, self.clock())
            await self._commit(session, emitted, connection, request.rid)

        await self._game_request(connection, request, act)

    async def on_claim(self, connection: Connection, request: Claim) -> None:
        async def act(session: GameSession, seat: int) -> None:
            emitted = session.claim(seat, request.outcome, self.clock())
            await self._commit(session, emitted, connection, request.rid)

        await self._game_request(connection, request, act)

    async def on_draw(self, connection: Connection, request: Draw) -> None:
        async def act(session: GameSession, seat: int) -> bool:
            now = self.clock()
            await self._commit(session, session.draw(seat, request.answer, now))
            opponent = session.players[1 - seat]
            thinking = session.state.current_player() == 1 - seat
            if session.status == "live" and opponent is not None and opponent.is_ai:
                if thinking and request.answer == "offer":
                    return True  # answered when its search is done (GameEvents._ai_turn)
                # The AI accepts when its last search saw nothing better than a draw.
                answer = ai_draw_answer(session.last_value[1 - seat])
                await self._commit(session, session.draw(1 - seat, answer, now))
            return True

        if await self._game_request(connection, request, act):
            connection.send(Ok(rid=request.rid))

    async def on_rematch(self, connection: Connection, request: Rematch) -> None:
        if request.answer == "decline":
            await self._rematch(connection, request, None)
            return
        # A rematch is a new game for both: each under its cap of unfinished games (two
        # players at theirs could rematch past it, game after game), from the offer on.
        game = self.games.get(request.game_id)  # (a private game's rematch is private too)
        private = game is not None and game.private
        async with self._reserving(self._new_game_id(private)) as reservation:
            await self._rematch(connection, request, reservation)

    async def _rematch(
        self, connection: Connection, request: Rematch, reservation: Reservation | None
    ) -> None:
        """A rematch offer or answer; agreed, the new game (``reservation``'s) starts."""

        async def act(session: GameSession, seat: int) -> None:
            now = self.clock()
            opponent = session.players[1 - seat]
            against_ai = opponent is not None and opponent.is_ai
            if reservation is not None:
                await self._check_open_games(self._me(connection), reservation=reservation)
                if opponent is not None and not against_ai:
                    other = self._player_session(opponent)
                    await self._check_open_games(
                        other, whose="your opponent", reservation=reservation
                    )
            if against_ai and request.answer == "offer" and session.offers.get("rematch") == seat:
                # Its offer stands, the rematch the AI agreed to not stored (or the server
                # stopped in between): the AI agrees again.
                emitted: list[Emitted] = []
                agreed = False
            else:
                emitted, agreed = session.rematch(seat, request.answer, now)
            await self._commit(session, emitted)
            if connection.node is not None and request.answer != "decline":
                # Through another node of a cluster: the rematch seats this player there.
                self._rematch_askers.setdefault(session.id, {})[seat] = connection
            accepter = seat
            if not agreed and request.answer == "offer" and against_ai:
                emitted, agreed = session.rematch(1 - seat, "accept", now)
                accepter = 1 - seat
            if not agreed or reservation is None:
                connection.send(Ok(rid=request.rid))
                return
            rematch = self._rematch_of(session, reservation.game_id)
            seated = self._rematch_seated(session, rematch)

            async def named() -> None:
                # Durability: the accept event names a game already stored; the offer
                # stands until then (a retry works if the new game was refused).
                await self._commit(session, [session.rematch_started(accepter, rematch.id, now)])
                self._rematch_askers.pop(session.id, None)
                connection.send(Ok(rid=request.rid))
                # A player's connection that does not follow the old game (another client
                # of the session, one that reconnected since without it) follows it now,
                # from its snapshot, which names the rematch, as the accept did for the
                # others: told before its seat, the seat is known for the rematch's, not
                # taken for a seek's game (the project's client: _follow_standing).
                snapshot: bytes | None = None
                for follower, _, _ in seated:
                    if follower.node is None and session.id not in follower.games:
                        self._subscribe(session.id, follower)
                        snapshot = snapshot or encode(session.snapshot(self.clock()))
                        follower.post(snapshot)

            await self._start_game(rematch, seated, named)

        await self._game_request(connection, request, act)

    def _rematch_seated(
        self, session: GameSession, rematch: GameSession
    ) -> list[tuple[Connection, int, int | None]]:
        """Who takes a seat of ``rematch`` now: each player's connections here (those that
        do not follow the old game are made to, ``_rematch``); in a cluster, a player on
        another node is reached through its request: the one that agreed, or its offer's
        (``_rematch_askers``)."""
        askers = self._rematch_askers.get(session.id, {})
        seated: list[tuple[Connection, int, int | None]] = []
        for new_seat, player in enumerate(rematch.players):
            if player is None or player.is_ai:
                continue
            online = self.players.get(player.player_id or "")
            connections = online.connections if online else ()
            targets = [
                c for c in connections if session.id in c.games or (c.node is None and not c.closed)
            ]
            asker = askers.get(1 - new_seat)  # (its seat in the old game)
            if asker is not None and asker.node is not None and not asker.closed:
                targets.append(asker)
            seated += [(c, new_seat, None) for c in targets]
        return seated

    def _rematch_of(self, session: GameSession, game_id: str) -> GameSession:
        rematch = GameSession.new(
            session.game.name,
            dict(session.game.params),
            self.clock(),
            control=session.control,
            rematch_of=session.id,
            game_id=game_id,
            private=session.private,  # a private game's rematch is private too
        )
        for seat, player in enumerate(session.players):
            assert player is not None
            new_seat = 1 - seat
            if player.is_ai:
                rematch.players[new_seat] = player
            else:
                rematch.take_seat(new_seat, player)
        return rematch

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
                snapshot = session.snapshot(self.clock(), rid=request.rid)
                self._send_charged(connection, encode(snapshot))
            else:
                self._send_since(connection, session, request.since)
                connection.send(Resumed(rid=request.rid, game_id=session.id, seq=session.seq))

    async def on_unwatch(self, connection: Connection, request: Unwatch) -> None:
        if request.game_id in connection.watching:
            connection.watching.discard(request.game_id)
            connection.games.discard(request.game_id)
            followers = self.subscribers.get(request.game_id)
            if followers is not None:
                followers.discard(connection)
                if not followers:  # (a game of another node: nothing else would drop it)
                    del self.subscribers[request.game_id]
        connection.send(Ok(rid=request.rid))

    def _send_since(self, connection: Connection, session: GameSession, since: int) -> None:
        """The events after ``since`` (or a snapshot), charged by their size: up to
        MAX_LOG events, many KiB, for one request. While a clock runs, events holding a
        move are a snapshot instead: a move's clocks are those of its time, and a client
        counts the side to move's time down from when it hears of them (the snapshot's
        are now's)."""
        frames = session.events_since(since) if since > 0 else None
        if frames and session.clock is not None and session.clock.running is not None:
            if any(type(decode_server(frame)) is Moved for frame in frames):
                frames = None
        if frames is None:
            frames = [encode(session.snapshot(self.clock()))]
        self._send_charged(connection, *frames)

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
                    token = await self._new_token(session, seat)
            self._subscribe(session.id, connection)
            self._send_since(connection, session, request.since)
            if seat is not None and connection.node is not None and not session.online[seat]:
                # Connected to another node of the cluster, and back in its game.
                back = session.set_online(seat, True, self.clock(), self.settings.grace_s)
                await self._commit(session, back)
            connection.send(
                Resumed(
                    rid=request.rid, game_id=session.id, seq=session.seq, seat=seat, token=token
                )
            )


def _stored_seat(record: GameRecord, token: str, player_id: str | None) -> int:
    """The seat ``token`` opens in a stored game, if the requesting player holds it; else
    BadToken (as ``GameSession.authorize``, by the token's stored hash)."""
    digest = token_hash(token)
    for seat, held in enumerate(record.row.tokens):
        player = record.row.players[seat]
        if held is not None and secrets.compare_digest(held, digest) and player is not None:
            if player_id is not None and player.get("player_id") == player_id:
                return seat
    raise BadToken(f"you hold no seat with this token in game {record.row.id}", record.row.id)


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

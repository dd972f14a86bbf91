"""A game's events: committed to the store, then sent to its followers; the timers
that end games (flags, first moves, abandoned games); games created and started;
the AI's turns.

Order of every change to a game: under the game's lock, validate and apply it in the
GameSession (which raises and changes nothing if refused), commit its events to the
store, then acknowledge and broadcast them. Nothing is sent about an event before its
transaction has committed, and one game's events go out in their ``seq`` order.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import engine
from protocol import (
    REMATCH_CLOSED_SINCE_VERSION,
    Ended,
    Error,
    ErrorCode,
    LobbyEvent,
    RematchClosed,
    Seated,
    Snapshot,
    encode,
    with_rid,
)
from server.clock import TimeControl
from server.connection import Connection
from server.errors import (
    BadRequest,
    EngineUnavailable,
    LimitExceeded,
    NodeUnavailable,
    Quarantined,
    ServerError,
    StorageError,
)
from server.lobby_feed import LobbyFeed
from server.pool import SearchRequest
from server.rows import GameRecord
from server.session import Emitted, GameSession, Player, ai_draw_answer

log = logging.getLogger(__name__)

# What a request about a game waiting for the store (GameEvents._wait_for_store) is answered.
_WAITS = "game {} waits for the database: retry soon"


async def _stored() -> None:
    """An event with nothing to store."""


class GameEvents(LobbyFeed):
    """Games' events, timers, starts and AI turns."""

    # --- events: commit, then broadcast ------------------------------------------------------

    def _store(self, session: GameSession, emitted: Emitted) -> Awaitable[None]:
        """The write that stores one event (the caller awaits it)."""
        if type(emitted.message) is Snapshot:  # the start: the game row changes too
            return self.store.update_game(session.to_row(), emitted.event)
        if emitted.move is not None:
            return self.store.append_move(emitted.move, emitted.end)
        if emitted.end is not None:
            return self.store.end_game(session.id, emitted.end)
        if emitted.event is not None:
            return self.store.append_event(emitted.event)
        return _stored()

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
        raised: the requester gets it, every other follower is told (``_not_stored``).
        Each event is encoded once, in the session; the requester's copy adds its rid.
        A game waiting for the store (``_wait_for_store``) takes no event: its memory may
        hold one that was never stored."""
        if self.waiting.get(session.id) is session:
            raise StorageError(_WAITS.format(session.id), session.id)
        for index, event in enumerate(emitted):
            try:
                await self._store(session, event)
            except StorageError as exc:
                await self._not_stored(session, exc, reply_to if rid is not None else None)
                raise
            session.stored(getattr(event.message, "seq", session.seq))
            frame = event.frame or encode(event.message)
            reply = None
            if index == 0 and rid is not None and reply_to is not None:
                reply = with_rid(frame, rid)
            followers = self.subscribers.get(session.id)
            if followers:
                for connection in list(followers):
                    connection.post(reply if connection is reply_to and reply else frame)
            if reply is not None and (not followers or reply_to not in followers):
                assert reply_to is not None  # a seat holder not resumed yet
                reply_to.post(reply)
            if self.cluster is not None:  # the followers on other nodes
                seq = getattr(event.message, "seq", session.seq)
                self.cluster.published(session, seq, frame, reply_to if reply is not None else None)
            if type(event.message) is Ended:
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
        followers other than ``requester`` are told. A game never stored leaves memory; one
        whose stored state cannot be read either (the database is down) waits for it."""
        log.error("game %s: an event could not be stored (%s); back to its stored state",
                  session.id, exc.message)  # fmt: skip
        readable = True
        try:
            record = await self.store.get_game(session.id)
        except Quarantined:
            record = None
        except StorageError as read_failed:
            log.error("game %s: cannot read it back (%s); it waits for the database",
                      session.id, read_failed.message)  # fmt: skip
            readable, record = False, None
        notice = Error(
            code=exc.code.value,
            message=f"game {session.id} waits: {exc.message}; it goes on as the database holds it",
            game_id=session.id,
        )
        frame = encode(notice)
        for connection in list(self.subscribers.get(session.id, ())):
            if connection is not requester:
                connection.post(frame)
        if not readable:
            self._wait_for_store(session)
        elif record is None:
            self._evict(session.id)
        else:
            ahead = self._revert(session, record)
            self._schedule(session, retry=True)
            if ahead:
                self._maybe_ai_turn(session)  # (a move stored after all: the AI's turn)

    def _revert(self, session: GameSession, record: GameRecord) -> bool:
        """``session`` back as ``record``, what the store holds, says (GameSession.revert);
        a seat taken by an event not stored is free again. If the store holds events
        nobody was sent (a write whose outcome was unknown was committed: True), the game's
        followers get it as stored, a snapshot (as from a node that restored it, PROTOCOL.md),
        and a game they ended goes through its end (seats freed, unloaded in time)."""
        seated = {p.player_id for p in session.players if p is not None and p.player_id}
        ahead = session.revert(record)
        for player_id in seated - {p.player_id for p in session.players if p is not None}:
            self._unseat(player_id, session.id, seat=True)  # taken by the event not stored
            if self.cluster is not None:
                self.cluster.closed_game(session.id, [player_id], [])
        if ahead:
            log.info("game %s: the database holds events nobody was sent (a write whose "
                     "outcome was unknown): its followers get it as stored",
                     session.id)  # fmt: skip
            frame = encode(session.snapshot(self.clock()))
            for connection in list(self.subscribers.get(session.id, ())):
                connection.post(frame)
            if self.cluster is not None:  # (its other nodes' followers catch up by seq)
                self.cluster.published(session, session.seq, frame, None)
            if session.over:
                self._game_over(session)
        return ahead

    def _wait_for_store(self, session: GameSession) -> None:
        """An event of ``session`` was not stored and what is stored cannot be read (the
        database is down): the game leaves service, its memory kept with its followers,
        seats and lock, until ``_serve_again`` reads it back: at the next request about it,
        or after storage_retry_s, again and again (its AI's move and clocks wait for it)."""
        game_id = session.id
        self.games.pop(game_id, None)
        self.waiting[game_id] = session
        if session.waiting_since is None:
            session.waiting_since = self._monotonic()
        ai_turn = self._ai_tasks.pop(game_id, None)
        if ai_turn is not None and ai_turn is not asyncio.current_task():
            ai_turn.cancel()
        self._retry_serving(game_id)

    def _retry_serving(self, game_id: str) -> None:
        handle = self._timers.pop(game_id, None)
        if handle is not None:
            handle.cancel()
        if not self._closed:
            self._timers[game_id] = asyncio.get_running_loop().call_later(
                self.settings.storage_retry_s,
                lambda: self._spawn(self._serve_again_quietly(game_id)),
            )

    async def _serve_again_quietly(self, game_id: str) -> None:
        try:
            await self._serve_again(game_id)
        except StorageError:
            if game_id in self.waiting:
                self._retry_serving(game_id)

    async def _serve_again(self, game_id: str) -> None:
        """A game waiting for the store (``_wait_for_store``) back in service, as stored,
        its timers and AI going again; StorageError saying it waits if the store still
        cannot be read. Nothing to do for any other game."""
        session = self.waiting.get(game_id)
        if session is None:
            return
        async with self._lock(game_id):
            if self.waiting.get(game_id) is not session:
                return  # served again meanwhile
            try:
                record = await self.store.get_game(game_id)
            except Quarantined:
                record = None
            except StorageError as exc:
                raise StorageError(_WAITS.format(game_id), game_id, detail=exc.detail) from exc
            del self.waiting[game_id]
            if game_id in self.games:
                return  # loaded again meanwhile (a cluster's node took its shard again)
            self.games[game_id] = session  # (so that it leaves as a loaded game leaves)
            if record is None:
                self._evict(game_id)
                return
            if self.cluster is not None and not self.cluster.serves(game_id):
                self.unload(game_id)  # its shard was lost meanwhile: its new owner serves it
                return
            self._revert(session, record)
            session.waited(self._monotonic())  # (the clocks stopped while it waited)
            log.info("game %s: read back from the database; it goes on", game_id)
            if self.cluster is None:  # its players who left or came back meanwhile (in a
                now = self.clock()  # cluster: on the bus)
                for seat in session.human_seats:
                    player = session.players[seat]
                    here = self.players.get(player.player_id or "") if player else None
                    online = here is not None and here.online
                    changed = session.set_online(seat, online, now, self.settings.grace_s)
                    await self._commit_quietly(session, changed)
                if self.waiting.get(game_id) is session:
                    return  # that was not stored either: it waits again
            self._schedule(session)
        self._maybe_ai_turn(session)

    async def _new_token(self, session: GameSession, seat: int) -> str:
        """A new secret for ``seat`` of a restored game (only its hash survived), given
        once its hash is stored; if the store refuses it, the seat keeps the hash it had
        (the token its player holds still opens it) and the StorageError is raised. Call
        with the game's lock held."""
        held = session.token_hashes[seat]
        token = session.issue_token(seat)
        try:
            await self.store.update_game(session.to_row())
        except StorageError:
            session.tokens[seat], session.token_hashes[seat] = None, held
            raise
        return token

    def _game_over(self, session: GameSession) -> None:
        ai_turn = self._ai_tasks.pop(session.id, None)
        if ai_turn is not None and ai_turn is not asyncio.current_task():
            ai_turn.cancel()  # its search is dropped, or stopped in its worker
        if self.pool is not None:
            for seat in (0, 1):
                self.pool.forget(f"{session.id}:{seat}")
        self._lobby_push(LobbyEvent(kind="game_removed", game_id=session.id), private=session)
        for player in session.players:
            if player is not None and player.player_id is not None:
                self._unseat(player.player_id, session.id, seat=False)  # over for good
        if self.cluster is not None:
            self.cluster.closed_game(session.id, *self._open_holders(session))
        handle = self._timers.pop(session.id, None)
        if handle is not None:
            handle.cancel()
        loop = asyncio.get_running_loop()
        self._evictions[session.id] = loop.call_later(
            self.settings.keep_finished_s, self._evict_finished, session.id
        )

    def _evict_finished(self, game_id: str) -> None:
        """A finished game leaves memory, its rematch window closed (``keep_finished_s`` after
        its end, or both its players left): its followers are told (``rematch_closed``); in a
        cluster, its followers on other nodes too."""
        if self.cluster is not None and game_id in self.games:
            self.cluster.evicted(game_id)
        self.rematch_closed(game_id)
        self._evict(game_id)

    def rematch_closed(self, game_id: str) -> None:
        """Tell the followers here of a finished game that leaves memory (here, or on its
        owner node) that its rematch window closed: those that speak protocol version 3, the
        others could not read the message (PROTOCOL.md, Versions)."""
        frame = b""
        for connection in list(self.subscribers.get(game_id, ())):
            if connection.version >= REMATCH_CLOSED_SINCE_VERSION:
                frame = frame or encode(RematchClosed(game_id=game_id))
                connection.post(frame)

    def unload(self, game_id: str) -> int | None:
        """A cluster node hands the game to another (server/cluster.py): it leaves memory
        as an evicted game does, but its followers here stay (they follow it on the bus
        from now on). Returns its seq, None if it was not loaded. A finished game is let go
        for good instead (``_evict_finished``: no node loads one again, so its rematch window
        closes), its followers here and on other nodes told."""
        session = self.games.get(game_id)
        if session is None:
            return None
        if session.over:
            self._evict_finished(game_id)
            return None
        followers = self.subscribers.pop(game_id, set())
        watching = {c for c in followers if game_id in c.watching}
        self._evict(game_id)
        if followers:
            self.subscribers[game_id] = followers
            for connection in followers:
                connection.games.add(game_id)
            for connection in watching:
                connection.watching.add(game_id)
        return session.seq

    async def remote_presence(self, game_id: str, player_id: str, online: bool) -> None:
        """A player of this node's game is connected to another node (``online``), or left
        it (cluster)."""
        session = self.games.get(game_id)
        seat = None if session is None else session.seat_of_player(player_id)
        if session is None or seat is None:
            return
        here = self.players.get(player_id)
        if not online and here is not None and any(game_id in c.games for c in here.connections):
            return  # still connected here
        async with self._lock(game_id):
            await self._commit_quietly(
                session, session.set_online(seat, online, self.clock(), self.settings.grace_s)
            )

    def _evict(self, game_id: str) -> None:
        """A finished game leaves memory; its record stays in the store. An AI turn of a game
        still live (one never stored, or quarantined) is cancelled with it."""
        session = self.games.pop(game_id, None)
        ai_turn = self._ai_tasks.pop(game_id, None)
        if ai_turn is not None and ai_turn is not asyncio.current_task():
            ai_turn.cancel()
        for connection in self.subscribers.pop(game_id, ()):
            connection.games.discard(game_id)
            connection.watching.discard(game_id)
        for handles in (self._timers, self._evictions):
            handle = handles.pop(game_id, None)
            if handle is not None:
                handle.cancel()
        self._locks.pop(game_id, None)
        self._seat_addresses.pop(game_id, None)
        self._rematch_askers.pop(game_id, None)
        if session is None:
            return
        for player in session.players:
            if player is None or player.player_id is None:
                continue
            self._unseat(player.player_id, game_id, seat=False)
            held = self.seats.get(player.player_id)
            if held is not None:
                held.pop(game_id, None)
                if not held:
                    del self.seats[player.player_id]
                    known = self.players.get(player.player_id)
                    if known is not None and not known.online:
                        self._forget_player(known)

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

    async def _overdue(self, session: GameSession) -> None:
        """End the game on a deadline already passed that its timer has not yet woken for
        (a move arriving just after the flag, or after the first move's time): as on
        Lichess, out of time is out of time, whatever the request. Call with the game's
        lock held, before serving a request; a StorageError is the requester's."""
        emitted = session.timeouts(self.clock())
        if emitted:
            await self._commit(session, emitted)

    async def _on_deadline(self, game_id: str) -> None:
        session = self.games.get(game_id)
        if session is None:
            return
        async with self._lock(game_id):
            emitted = session.timeouts(self.clock())
            if not emitted:
                self._schedule(session)
                return
            if not await self._commit_quietly(session, emitted):
                return
        if type(emitted[0].message) is Snapshot:  # a game whose start was not stored, started
            self._lobby_push(LobbyEvent(kind="game_added", game=session.summary()), private=session)
            self._maybe_ai_turn(session)

    # --- creating and starting games ------------------------------------------------------------

    def _check_ai(self, algorithm: str, budget_ms: int, game: str, params: dict[str, int]) -> str:
        """The AI options of a request (``create``, ``quick``), checked whether or not an
        AI plays: an algorithm that cannot play the game or a budget over the server's
        maximum is refused (bad_request), not ignored. Returns the algorithm (none named:
        the game's own, ``engine.default_ai``)."""
        try:
            algorithm = algorithm or engine.default_ai(game)
            engine.check_algorithm(algorithm, engine.make_game(game, **params))
        except engine.EngineError as exc:
            raise BadRequest(str(exc)) from exc
        if budget_ms > self.settings.max_budget_ms:
            raise BadRequest(
                f"limit: budget_ms is at most {self.settings.max_budget_ms} on this server, "
                f"not {budget_ms}"
            )
        return algorithm

    def _ai_player(
        self,
        algorithm: str,
        budget_ms: int,
        game: str,
        params: dict[str, int],
        player_id: str | None = None,
    ) -> Player:
        """The AI seat of a new game against ``player_id``, refused now (not at the AI's
        turn) for an algorithm that cannot play the game (none named: the game's own,
        ``engine.default_ai``), a budget over the server's
        maximum, no engine worker up, or a player whose AI searches are at their cap."""
        algorithm = self._check_ai(algorithm, budget_ms, game, params)
        settings = self.settings
        if self.pool is None:
            raise EngineUnavailable("this server runs no engine workers: AI games are off")
        if not self.pool.available:
            raise EngineUnavailable(self.pool.unavailable)
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
        named: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Store a new game whose seats are all taken, tell each seated connection its seat
        (``rid`` if it asked), and start it: the start snapshot goes to everyone seated.
        ``named`` runs once the game is stored, before anyone is told of it (a rematch: the
        old game's accept event names it, committed then). If that raises StorageError, the
        new game, stored but named nowhere, is aborted (or, that refused too, leaves memory:
        a restart withdraws it, its players away)."""
        seated = list(seated)
        self._register(session, [connection for connection, _, _ in seated])
        if self.cluster is None:  # (in a cluster a player's node reports it: remote_presence)
            now = self.clock()
            for seat in session.human_seats:
                player = session.players[seat]
                here = self.players.get(player.player_id or "") if player else None
                if here is None or not here.online:  # (a rematch's offerer who left)
                    session.set_online(seat, False, now, self.settings.grace_s)
        async with self._lock(session.id):
            await self._create(session)
            if named is not None:
                try:
                    await named()
                except StorageError:
                    if not await self._commit_quietly(session, session.abort(0, self.clock())):
                        self._evict(session.id)
                    raise
            for connection, seat, rid in seated:
                self._subscribe(session.id, connection)
                token = session.tokens[seat]
                assert token is not None
                connection.send(Seated(rid=rid, game_id=session.id, seat=seat, token=token))
            if not await self._commit_quietly(session, [session.start(self.clock())]):
                # Its players told their seats (the request answered), the start not stored:
                # they are told it waits, and it starts once the store takes it
                # (GameSession.next_deadline; the lobby and the AI hear of it then).
                return
        self._lobby_push(LobbyEvent(kind="game_added", game=session.summary()), private=session)
        self._maybe_ai_turn(session)

    async def _create(self, session: GameSession) -> None:
        """Store a new (registered) game, with its lock held; if the store refuses, it
        leaves memory: it never existed. In a cluster, a game whose shard this node is
        handing over is refused (a release takes each game's lock: one stored before it
        is restored by the next owner)."""
        if self.cluster is not None and not self.cluster.serves(session.id):
            self._evict(session.id)
            raise NodeUnavailable("this node is handing its games over: retry")
        try:
            await self.store.create_game(session.to_row())
        except StorageError:
            self._evict(session.id)
            raise

    def _new_session(
        self, game: str, params: dict[str, int], clock: dict[str, int], **kwargs: Any
    ) -> GameSession:
        control = TimeControl.parse(clock)
        return GameSession.new(
            game,
            dict(params),
            self.clock(),
            control=control,
            game_id=self._new_game_id(kwargs.get("private", False)),
            **kwargs,
        )

    # --- AI turns ------------------------------------------------------------------------------

    def _maybe_ai_turn(self, session: GameSession) -> None:
        if session.status != "live":
            return
        seat = session.state.current_player()
        player = session.players[seat] if seat >= 0 else None
        if player is None or not player.is_ai:
            return
        earlier = self._ai_tasks.pop(session.id, None)
        if earlier is not None and earlier is not asyncio.current_task():
            earlier.cancel()  # one AI turn a game: its search is dropped, or stopped
        ply = session.state.ply()
        self._ai_tasks[session.id] = self._spawn(self._ai_turn(session, seat, player, ply))

    async def _ai_turn(self, session: GameSession, seat: int, player: Player, ply: int) -> None:
        """Ask the pool for the AI's move at ``ply`` and play it; cancelled if the game ends
        first. The game is read under its lock before the search starts: an end applied
        meanwhile (a resign from another connection, waiting for the lock while the move
        that made this turn was stored) is being stored under it, and the search for a game
        over would start, and run until that write returned and ended it."""
        async with self._lock(session.id):
            if (
                self.games.get(session.id) is not session
                or session.status != "live"
                or session.state.ply() != ply
            ):
                if self._ai_tasks.get(session.id) is asyncio.current_task():
                    del self._ai_tasks[session.id]
                return  # over, moved on or gone before its search began: none starts
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
            address=self._address_of(None if opponent is None else opponent.player_id),
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
            now = self.clock()
            emitted: list[Emitted] = []
            if session.offers.get("draw") == 1 - seat:  # offered while it thought
                answer = ai_draw_answer(stats.get("value"))
                emitted = session.draw(seat, answer, now)
                if answer == "accept":
                    await self._commit_quietly(session, emitted)
                    return
            try:
                emitted += session.play(seat, result.action, now, stats=stats)
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

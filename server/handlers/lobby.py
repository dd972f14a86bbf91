"""Requests to the lobby: subscribe, seek, cancel, accept, decline, quick pairing."""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

import engine
from protocol import (
    AcceptSeek,
    CancelSeek,
    DeclineSeek,
    Error,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
    Ok,
    QuickPair,
    Seek,
    SeekDeclined,
    SeekPosted,
    encode,
)
from server import names
from server.clock import TimeControl
from server.connection import Connection, PlayerSession
from server.errors import (
    BadRequest,
    LimitExceeded,
    NodeUnavailable,
    NotAllowed,
    SeekTaken,
    ServerError,
    UnknownSeek,
)
from server.game_events import GameEvents
from server.hub import Reservation
from server.lobby import SeekEntry, Subscription, new_seek_id
from server.session import GameSession

log = logging.getLogger(__name__)


class LobbyRequests(GameEvents):
    """The handlers of requests to the lobby."""

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

    async def _challenged(self, who: str) -> PlayerSession:
        """The player a challenge's ``to`` names: a player id, or the name (or a
        look-alike) bound to a player's session; online here, on another node of a
        cluster or not at all (the store, which every node shares, knows them all): a
        challenge reaches its player and no one else."""
        player = await self._player_by_id(who)
        if player is None:
            holder = await self.store.name_holder(names.name_keys(names.normalize(who)))
            player = None if holder is None else await self._player_by_id(holder)
        if player is None:
            raise BadRequest(f"no player {who!r}: no session holds that name or id")
        return player

    async def _player_by_id(self, player_id: str) -> PlayerSession | None:
        """A player online here, or else as its stored session says; None: no session."""
        here = self.players.get(player_id)
        if here is not None:
            return here
        row = await self.store.player_session(player_id)
        return None if row is None else PlayerSession(row.player_id, row.name, row.bot)

    async def on_seek(self, connection: Connection, request: Seek) -> None:
        me = self._me(connection)
        self._check_seeks(connection)
        await self._check_open_games(me)
        self._check_game(request.game, dict(request.params))
        to = None
        if request.to is not None:
            challenged = await self._challenged(request.to)
            if challenged.player_id == me.player_id:
                raise BadRequest("you cannot challenge yourself")
            if request.opponents == "humans" and challenged.bot:
                raise BadRequest(
                    f"{request.to} is a bot, and no bot may accept a challenge for humans "
                    "only: send it with opponents any"
                )
            to = challenged.player_id
        seek = self._seek_entry(
            connection, request, color=request.color, opponents=request.opponents, to=to
        )
        if self.cluster is not None:
            await self.cluster.post_seek(seek, connection)  # on every node's lobby
        self.lobby.add(seek)
        connection.send(SeekPosted(rid=request.rid, seek_id=seek.id))
        self._lobby_push(LobbyEvent(kind="seek_added", seek_id=seek.id), seek=seek)

    async def on_cancel_seek(self, connection: Connection, request: CancelSeek) -> None:
        seek = self.lobby.seeks.get(request.seek_id)
        if seek is None or seek.owner_connection is not connection:
            raise UnknownSeek(f"you have no seek {request.seek_id!r}")
        self._remove_seek(seek)
        connection.send(Ok(rid=request.rid))

    async def _take_seek(self, seek: SeekEntry, gone: str, taken: dict[str, Any]) -> None:
        """Take ``seek`` out of the lobby for an accept or a decline (``taken``: the game
        made of it, or who declined it): of two takers on any nodes of a cluster, one wins
        (the other: unknown_seek, ``gone``)."""
        if self.cluster is not None:
            if not await self.cluster.claim_seek(seek.id, taken):
                raise UnknownSeek(gone)
            self.cluster.seek_removed(seek.id)
        self._remove_seek(seek)

    async def on_accept(self, connection: Connection, request: AcceptSeek) -> None:
        me = self._me(connection)
        seek = self.lobby.seeks.get(request.seek_id)
        if seek is None or not seek.visible_to(me.player_id):
            raise UnknownSeek(f"no seek {request.seek_id!r}: accepted, cancelled or gone")
        if seek.owner.player_id == me.player_id:
            raise NotAllowed("that is your own seek")
        if seek.opponents == "humans" and me.bot:
            raise NotAllowed("that seek is for human players only")
        async with self._reserving(self._new_game_id()) as reservation:
            await self._check_open_games(me, reservation=reservation)
            if seek.owner_connection.player is not None:
                await self._check_open_games(
                    seek.owner_connection.player,
                    whose="the seek's poster",
                    reservation=reservation,
                )
            gone = f"no seek {request.seek_id!r}: accepted, cancelled or gone"
            await self._take_seek(seek, gone, {"game": reservation.game_id})
            owner_seat = {"x": 0, "o": 1}.get(seek.color, secrets.randbelow(2))
            session = self._session_of(seek, reservation.game_id, seek.id)
            session.take_seat(owner_seat, seek.owner)
            session.take_seat(1 - owner_seat, me.as_player())
            await self._start_game(
                session,
                [
                    (seek.owner_connection, owner_seat, None),
                    (connection, 1 - owner_seat, request.rid),
                ],
            )

    async def on_decline(self, connection: Connection, request: DeclineSeek) -> None:
        """A challenge declined by the player it names: gone from the lobby (every node's),
        and its poster told who declined (``seek_declined``)."""
        me = self._me(connection)
        seek = self.lobby.seeks.get(request.seek_id)
        gone = f"no challenge {request.seek_id!r}: accepted, withdrawn or gone"
        if seek is None or not seek.visible_to(me.player_id):
            raise UnknownSeek(gone)
        if seek.owner.player_id == me.player_id:
            raise NotAllowed("that is your own challenge: cancel_seek withdraws it")
        if seek.to != me.player_id:
            raise NotAllowed("only a challenge to you can be declined; an open seek is left")
        declined = {"player": me.as_player().to_dict()}
        await self._take_seek(seek, gone, declined)
        seek.owner_connection.send(SeekDeclined(seek_id=seek.id, **declined))
        connection.send(Ok(rid=request.rid))

    async def on_quick(self, connection: Connection, request: QuickPair) -> None:
        me = self._me(connection)
        self._check_seeks(connection)
        # The game it may be paired into at once (else, waiting, it holds no place).
        async with self._reserving(self._new_game_id()) as reservation:
            await self._check_open_games(me, reservation=reservation)
            self._check_game(request.game, dict(request.params))
            if request.ai_after_s:  # refuse a bad fallback now
                self._ai_player(request.algorithm, request.budget_ms, request.game, request.params)
            else:
                self._check_ai(request.algorithm, request.budget_ms, request.game, request.params)
            entry = self._seek_entry(
                connection,
                request,
                quick=True,
                ai_after_s=request.ai_after_s,
                algorithm=request.algorithm,
                budget_ms=request.budget_ms,
            )
            posted: SeekPosted | None = SeekPosted(rid=request.rid, seek_id=entry.id)
            while True:
                partner = await self._quick_partner(entry, connection, reservation)
                if posted is not None:  # (once, before its seated)
                    connection.send(posted)
                    posted = None
                if partner is None:
                    self.lobby.add(entry)
                    if entry.ai_after_s:
                        loop = asyncio.get_running_loop()
                        self._quick_timers[entry.id] = loop.call_later(
                            entry.ai_after_s, lambda: self._spawn(self._quick_ai(entry.id))
                        )
                    return
                if await self._start_quick_game(entry, connection, partner, reservation):
                    return

    async def _start_quick_game(
        self,
        entry: SeekEntry,
        connection: Connection,
        partner: SeekEntry,
        reservation: Reservation,
    ) -> bool:
        """The game of ``entry`` (``connection``'s) and the waiting ``partner``, made of the
        partner's entry; False if the store refuses it as the second game of that entry
        (SeekTaken: paired already, by a pairing that a Redis which restarted empty forgot,
        and queued again all the same): nothing of it is kept, and the caller looks for the
        next partner, or queues ``entry``."""
        self._remove_seek(partner)
        seat = secrets.randbelow(2)
        session = self._session_of(entry, reservation.game_id, partner.id)
        session.take_seat(seat, partner.owner)
        session.take_seat(1 - seat, entry.owner)
        try:
            await self._start_game(
                session, [(partner.owner_connection, seat, None), (connection, 1 - seat, None)]
            )
        except SeekTaken:
            log.info("quick entry %s was paired already: looking for the next", partner.id)
            return False
        return True

    async def _quick_partner(
        self, entry: SeekEntry, connection: Connection, reservation: Reservation
    ) -> SeekEntry | None:
        """The waiting quick entry ``entry`` pairs with, taken from the queue (this node's,
        or in a cluster the cluster's one queue), or None. A partner whose owner is leaving,
        or has no room for a game, leaves the queue and the next one is tried."""
        while True:
            if self.cluster is not None:  # None: ``entry`` is queued there
                partner = await self.cluster.quick_pair(entry, connection, reservation.game_id)
            else:
                partner = self.lobby.quick_partner(entry)
            if partner is None or (
                not partner.owner_connection.closed and await self._under_cap(partner, reservation)
            ):
                return partner
            self._remove_seek(partner)

    async def _under_cap(self, entry: SeekEntry, reservation: Reservation) -> bool:
        """Whether a waiting quick-pairing entry's player still has room for the game of
        ``reservation`` (it may have reached its cap of unfinished games since it queued):
        then the game holds its place; if not, it is told why, and the caller takes the
        entry out of the queue."""
        owner = entry.owner_connection.player
        if owner is None:
            return True
        try:
            await self._check_open_games(owner, reservation=reservation)
        except LimitExceeded as exc:
            entry.owner_connection.send(Error(code=exc.code.value, message=exc.message))
            return False
        return True

    def _session_of(self, entry: SeekEntry, game_id: str, seek_id: str) -> GameSession:
        """A new game on the terms of a seek or a quick-pairing entry, made of the seek
        ``seek_id`` (taken: the store refuses a second game of it, SeekTaken)."""
        return GameSession.new(
            entry.game,
            entry.params,
            self.clock(),
            control=entry.control,
            game_id=game_id,
            seek_id=seek_id,
        )

    def _seek_entry(
        self, connection: Connection, request: Seek | QuickPair, **options: Any
    ) -> SeekEntry:
        """A new seek or quick-pairing entry of ``connection``'s player."""
        return SeekEntry(
            id=new_seek_id(),
            game=request.game,
            params=dict(request.params),
            control=TimeControl.parse(request.clock),
            owner=self._me(connection).as_player(),
            owner_connection=connection,
            created_at=self.clock().wall,
            **options,
        )

    async def _quick_ai(self, seek_id: str) -> None:
        """No partner came in time: seat the waiting player against the AI."""
        self._quick_timers.pop(seek_id, None)
        entry = self.lobby.seeks.get(seek_id)
        if entry is None:
            return
        if self.cluster is not None:
            try:
                if not await self.cluster.claim_quick(entry):
                    return  # paired on another node meanwhile (its notice removes the entry)
            except NodeUnavailable as exc:  # (it leaves the queue once Redis answers)
                if self.lobby.remove(seek_id) is not None:
                    entry.owner_connection.send(Error(code=exc.code.value, message=exc.message))
                return
        entry = self.lobby.remove(seek_id)
        if entry is None or entry.owner_connection.closed:
            return
        async with self._reserving(self._new_game_id()) as reservation:
            if not await self._under_cap(entry, reservation):
                return
            seat = secrets.randbelow(2)
            session = self._session_of(entry, reservation.game_id, entry.id)
            try:
                ai = self._ai_player(entry.algorithm, entry.budget_ms, entry.game, entry.params)
            except ServerError as exc:  # no engine now: the player is told, not left waiting
                entry.owner_connection.send(Error(code=exc.code.value, message=exc.message))
                return
            session.players[1 - seat] = ai
            session.take_seat(seat, entry.owner)
            await self._start_game(session, [(entry.owner_connection, seat, None)])

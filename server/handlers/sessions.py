"""Players: hello (a known session or a new one), names, the session sweep, and what
a closed connection leaves behind.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from websockets.asyncio.server import ServerConnection

from protocol import Hello, Welcome
from server import names
from server.admission import address_key
from server.connection import Connection, PlayerSession
from server.errors import BadName, BadToken, LimitExceeded, NameTaken, StorageError
from server.game_events import GameEvents
from server.hub import UNFINISHED
from server.limits import TokenBucket
from server.rows import SessionRow
from server.session import token_hash

log = logging.getLogger(__name__)


class SessionRequests(GameEvents):
    """Players' sessions: hello, names, sweep, disconnect."""

    async def hello(self, connection: Connection, hello: Hello) -> Welcome:
        """Identify the connection's player: a known session, or a new one (stored before
        it is acknowledged). A session of a player the server holds in memory (online, or
        seated in a game in memory) is served from memory, the database down or not: it
        was read or stored when that player said hello here, and the session sweep keeps
        it stored (and marks it used) while the player is known here."""
        now = self.clock()
        address = _address(connection.websocket)
        if hello.session is not None:
            self._check_resumes(address)
            session_token = hello.session
            digest = token_hash(session_token)
            known = self.sessions.get(digest)
            try:
                player = known or await self._stored_player(digest, now.wall)
            except BadToken:
                self._failed_resumes_of(address).charge(time.monotonic(), 1.0, owe=True)
                raise
        else:
            session_token = secrets.token_urlsafe(24)
            digest = token_hash(session_token)
            player = await self._new_player(hello, address, session_token, now.wall)
        player.token_hashes.add(digest)
        self.sessions[digest] = player
        self._list_at(player, address)
        self.players[player.player_id] = player
        player.connections.add(connection)
        connection.player = player
        games = await self.seats_of(player.player_id, list(self.seats.get(player.player_id, {})))
        if self.cluster is not None and hello.session is not None:  # games owned elsewhere
            games += await self.cluster.remote_seats(player.player_id, set(self.games))
        return Welcome(
            rid=hello.rid,
            version=self.settings.protocol_version,
            session=session_token,
            player_id=player.player_id,
            server=self.version,
            name=player.name,
            games=games,
        )

    async def _stored_player(self, digest: str, now: float) -> PlayerSession:
        """The player of a session read from the store (BadToken if it holds none), its
        session marked used."""
        row = await self.store.load_session(digest)
        if row is None:
            raise BadToken("unknown session: send hello without one to start a new session")
        if not row.named:
            row.name = await self._bind_legacy_name(row.player_id, row.name)
        player = self.players.get(row.player_id) or PlayerSession(row.player_id, row.name, row.bot)
        try:
            await self.store.touch_sessions([player.player_id], now, False)
        except StorageError:  # a full or failing disk must not lock a player out
            log.warning("cannot mark session of %s used; the next sweep does", row.player_id)
        return player

    async def seats_of(
        self, player_id: str, game_ids: list[str], *, online: bool = True
    ) -> list[dict[str, Any]]:
        """``welcome.games``: the player's seats in these games of this node that are not
        over, each with its token (a new one if only the hash survived a restore) and
        seq; the seats marked online (``online``: the player is connected here). Left
        out: a game waiting for the database (its presence could not be stored nor the
        game read back: ``resume`` it once the database answers), and one whose new
        token could not be stored (a token is given only once its hash is stored)."""
        now = self.clock()
        games = []
        for game_id in game_ids:
            game = self.games.get(game_id)
            seat = self.seats.get(player_id, {}).get(game_id)
            if game is None or seat is None or game.status not in UNFINISHED:
                continue
            async with self._lock(game_id):
                if self.games.get(game_id) is not game:
                    continue  # it left service meanwhile (it waits for the database)
                token = game.tokens[seat]
                if token is None:  # restored: only the hash survived; issue a new secret
                    try:
                        token = await self._new_token(game, seat)
                    except StorageError:
                        continue
                if online:
                    await self._commit_quietly(
                        game, game.set_online(seat, True, now, self.settings.grace_s)
                    )
                    if self.games.get(game_id) is not game:
                        continue  # not stored, nor read back: it waits for the database
            games.append({"game_id": game_id, "seat": seat, "token": token, "seq": game.seq})
        return games

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
        player_id = names.new_player_id()
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
        bucket = _address_bucket(
            self._new_sessions,
            address,
            settings.new_sessions_per_ip_per_minute,
            settings.new_sessions_burst_per_ip,
        )
        if not bucket.take(time.monotonic()):
            raise LimitExceeded(
                f"limit: at most {settings.new_sessions_per_ip_per_minute:g} new sessions a "
                f"minute from one address (bursts of {settings.new_sessions_burst_per_ip}); "
                "reconnect with your session instead"
            )

    def _failed_resumes_of(self, address: str) -> TokenBucket:
        """``address``'s allowance of hellos with an unknown session."""
        settings = self.settings
        return _address_bucket(
            self._failed_resumes,
            address,
            settings.failed_resumes_per_ip_per_minute,
            settings.failed_resumes_burst_per_ip,
        )

    def _check_resumes(self, address: str) -> None:
        """Refuse (too_many) a hello with a session from an address that has used up its
        allowance of unknown sessions, before the session is looked up: any session, known
        or not, so that guessing learns nothing until the allowance refills."""
        bucket = self._failed_resumes.get(address)
        now = time.monotonic()
        if bucket is not None and bucket.next_token_at() > now:
            settings = self.settings
            raise LimitExceeded(
                f"limit: at most {settings.failed_resumes_per_ip_per_minute:g} hellos with an "
                f"unknown session a minute from one address (bursts of "
                f"{settings.failed_resumes_burst_per_ip}); try again in "
                f"{bucket.next_token_at() - now:.0f} s"
            )

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
        except StorageError as exc:  # (the database is down: one line, not a traceback)
            log.error("the session sweep failed (%s); it runs again later", exc.message)
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
        if self.cluster is not None:  # its games owned by other nodes
            self.cluster.disconnected(connection)
        if player.online:
            return
        now = self.clock()
        for game_id, seat in list(self.seats.get(player.player_id, {}).items()):
            game = self.games.get(game_id)
            if game is None:
                continue
            async with self._lock(game_id):
                if player.online:
                    return  # back (a hello while a write below waited)
                await self._commit_quietly(
                    game, game.set_online(seat, False, now, self.settings.grace_s)
                )
            if player.online:
                return  # back meanwhile: her hello marks her games (it waited for the lock)
            if game.status not in UNFINISHED and not any(game.online[s] for s in game.human_seats):
                self._evict_finished(game_id)  # no one left to ask for its rematch
        if not self.seats.get(player.player_id):
            self._forget_player(player)


def _address_bucket(
    buckets: dict[str, TokenBucket], address: str, per_minute: float, burst: int
) -> TokenBucket:
    """``address``'s token bucket in ``buckets`` (``per_minute`` refilled, up to ``burst``),
    made full at its first use. Past 10,000 addresses, those whose bucket has refilled are
    forgotten (a full bucket is what a new one would be)."""
    bucket = buckets.get(address)
    if bucket is None:
        now = time.monotonic()
        if len(buckets) > 10_000:
            for known, held in list(buckets.items()):
                if held.tokens + (now - held.updated) * held.rate >= held.burst:
                    del buckets[known]
        bucket = TokenBucket(per_minute / 60.0, burst, float(burst), now)
        buckets[address] = bucket
    return bucket


def _address(websocket: ServerConnection) -> str:
    """The key a connection's address is counted under (server/admission.py): its
    admission ticket's, which names the client a trusted proxy forwarded."""
    ticket = getattr(websocket, "ticket", None)
    if ticket is not None:
        return str(ticket.address)
    remote = websocket.remote_address
    return address_key(str(remote[0]) if remote else None)

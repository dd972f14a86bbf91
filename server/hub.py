"""The server's state, shared by its request handlers (server/handlers/): games,
players, seats, followers, locks and timers; the clock; bookkeeping; request costs.

GameServer (server/app.py) is a chain of classes, one topic each, every one built on
the ones below it: Hub, LobbyFeed (server/lobby_feed.py), GameEvents
(server/game_events.py), then the request handlers by topic (games, lobby, records,
sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.messages import PROTOCOL_VERSION, SEQ_SINCE_VERSION
from protocol.version import software_version
from server.admission import Admission, Proxies
from server.clock import Now
from server.connection import Connection, PlayerSession
from server.errors import LimitExceeded, RateLimited, UnknownGame
from server.limits import TokenBucket
from server.lobby import Lobby, Subscriptions
from server.pool import EnginePool
from server.records import RecordCache
from server.session import (
    GAME_ID_LENGTH,
    PRIVATE_GAME_ID_LENGTH,
    EventLimits,
    GameSession,
    Player,
    new_game_id,
)
from server.settings import ServerSettings
from server.store import Store

if TYPE_CHECKING:
    from server.cluster import Cluster

log = logging.getLogger(__name__)

VERSION = f"noughts/{software_version()}"  # welcome.server
UNFINISHED = ("open", "live")


@dataclass
class Reservation:
    """A game being made, counted in its players' caps on unfinished games from the check
    that admits each of them (Hub._check_open_games) until it is registered (then its seats
    count) or given up (then nothing): requests at once cannot all pass the check."""

    game_id: str
    held: list[tuple[str, str]] = field(default_factory=list)  # (player id, address) here
    # In a cluster: the players and addresses in whose sets in Redis it is a new entry.
    added_players: set[str] = field(default_factory=set)
    added_addresses: set[str] = field(default_factory=set)


class Hub:
    """What the server knows, and the bookkeeping every handler shares."""

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
        if not SEQ_SINCE_VERSION <= self.settings.protocol_version <= PROTOCOL_VERSION:
            raise ValueError(
                f"protocol_version {self.settings.protocol_version}: this server speaks "
                f"{SEQ_SINCE_VERSION} to {PROTOCOL_VERSION}"
            )
        # Durations (clocks, grace, deadlines) on the one, timestamps people read on the
        # other (server/clock.py); tests pass their own.
        self._monotonic = monotonic
        self._wall = wall
        self.version = VERSION
        self.games: dict[str, GameSession] = {}
        # Games out of service until the store can be read: an event of theirs could not be
        # stored, nor what is stored read back (the database is down). Their followers,
        # seats and lock stay; GameEvents._serve_again puts each back as stored.
        self.waiting: dict[str, GameSession] = {}
        self.subscribers: dict[str, set[Connection]] = {}
        # The players known here: online, or seated in a game in memory (_forget_player).
        self.players: dict[str, PlayerSession] = {}
        # Their sessions, by token hash: a hello with one is served from memory.
        self.sessions: dict[str, PlayerSession] = {}
        self.seats: dict[str, dict[str, int]] = {}  # player_id -> {game_id: seat}, in memory
        # The games of self.seats not over yet, or over but not yet through _game_over: what
        # the caps on unfinished games count (_unfinished), without a player's ended games.
        self._open_seats: dict[str, set[str]] = {}
        # In a cluster: the addresses of each game's seated players when they took their
        # seats, for the caps counted cluster-wide (server/cluster_caps.py OPEN_TTL_S).
        self._seat_addresses: dict[str, set[str]] = {}
        # The games being made (Reservation), by player id and by address, counted as theirs.
        self._reserved_by_player: dict[str, set[str]] = {}
        self._reserved_by_address: dict[str, set[str]] = {}
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
        # game_id -> seat -> the connection that offered a rematch through another node of a
        # cluster: seated there once the rematch is agreed (server/handlers/games.py).
        self._rematch_askers: dict[str, dict[int, Connection]] = {}
        self.admission = Admission(
            max_open=self.settings.max_connections,
            max_open_per_address=self.settings.max_connections_per_ip,
            max_handshakes_per_address=self.settings.max_handshakes_per_ip,
            max_sockets=self.settings.max_connections + self.settings.max_handshakes_per_ip,
            max_health_only=self.settings.max_health_only,
            proxies=Proxies(self.settings.trusted_proxies),
        )  # its socket budget is set by serve(), from the descriptor limit
        # Players and sessions: who is at each address (_list_at), new sessions and failed
        # resumes (hello with an unknown session) per address, names being claimed by a
        # hello in flight (name key -> player id), the expiry sweep.
        self._address_players: dict[str, set[str]] = {}
        self._new_sessions: dict[str, TokenBucket] = {}
        self._failed_resumes: dict[str, TokenBucket] = {}
        self._claiming: dict[str, str] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False
        # --secret-path: the path a websocket handshake must ask for ("/" + the secret), or
        # None: any path (GameServer.route).
        self.secret_path: str | None = None
        self.draining = False  # set at the start of the graceful drain: /readyz says 503
        # A node of a cluster (server/cluster.py), or None: a lone server, and no cost.
        self.cluster: Cluster | None = None

    def clock(self) -> Now:
        """The time now: monotonic seconds for durations, wall seconds for timestamps."""
        return Now(self._monotonic(), self._wall())

    # --- bookkeeping -----------------------------------------------------------------------

    def _lock(self, game_id: str) -> asyncio.Lock:
        lock = self._locks.get(game_id)
        if lock is None:
            lock = self._locks[game_id] = asyncio.Lock()
        return lock

    def _register(self, session: GameSession, seated: Iterable[Connection] = ()) -> None:
        session.first_move_s = self.settings.first_move_s
        session.limits = self._event_limits()
        session.abandon_s = self.settings.abandon_s
        session.abandon_unstarted_s = self.settings.abandon_unstarted_s
        self.games[session.id] = session
        for seat, player in enumerate(session.players):
            if player is not None and player.player_id is not None and not player.is_ai:
                self.seats.setdefault(player.player_id, {})[session.id] = seat
                self._open_seats.setdefault(player.player_id, set()).add(session.id)
        if self.cluster is not None and session.status in UNFINISHED:
            addresses = self._seat_addresses.setdefault(session.id, set())
            for connection in seated:
                if connection.player is not None and connection.player.address != "?":
                    addresses.add(connection.player.address)
            self.cluster.opened(session.id, *self._open_holders(session))
            if session.status == "open" and not session.private and session.open_seat() is not None:
                self.cluster.open_listed(session)

    def _address_of(self, player_id: str | None) -> str | None:
        """The address a player online here is connected from (None: not known here)."""
        here = None if player_id is None else self.players.get(player_id)
        return None if here is None or here.address == "?" else here.address

    def _list_at(self, player: PlayerSession, address: str) -> None:
        """``player`` said hello from ``address``: listed there, and no longer where it said
        hello before (``_address_players``: the players known here whose latest hello came
        from each address, as ``PlayerSession.address`` says and the caps count)."""
        if player.address != address:
            self._unlist(player)
        player.address = address
        self._address_players.setdefault(address, set()).add(player.player_id)

    def _forget_player(self, player: PlayerSession) -> None:
        """``player`` is known here no more (offline, no seat in a game in memory)."""
        if self.players.get(player.player_id) is player:
            del self.players[player.player_id]
            self._unlist(player)
            for token_hash in player.token_hashes:
                self.sessions.pop(token_hash, None)

    def _unlist(self, player: PlayerSession) -> None:
        listed = self._address_players.get(player.address)
        if listed is not None:
            listed.discard(player.player_id)
            if not listed:
                del self._address_players[player.address]

    def _player_session(self, player: Player) -> PlayerSession:
        """The server's record of a game's human player: online here, or as far as known
        (its address unknown: its per-player cap is checked, the address's not)."""
        here = self.players.get(player.player_id or "")
        if here is not None:
            return here
        offline = PlayerSession(player.player_id or "", player.name, player.kind == "bot")
        offline.address = ""  # unknown: _check_open_games checks its player's cap only
        return offline

    def _open_holders(self, session: GameSession) -> tuple[list[str], list[str]]:
        """Who an unfinished game counts against: its human players, and the addresses
        they took their seats from or are connected from here."""
        humans = [
            p.player_id
            for p in session.players
            if p is not None and p.player_id is not None and not p.is_ai
        ]
        addresses = set(self._seat_addresses.get(session.id, ()))
        for player_id in humans:
            here = self.players.get(player_id)
            if here is not None and here.address != "?":
                addresses.add(here.address)
        return humans, sorted(addresses)

    def open_games(self) -> dict[str, tuple[list[str], list[str]]]:
        """This node's unfinished games and who each counts against (cluster caps)."""
        return {
            game_id: self._open_holders(session)
            for game_id, session in self.games.items()
            if session.status in UNFINISHED
        }

    def _event_limits(self) -> EventLimits:
        settings = self.settings
        return EventLimits(
            presence_burst=settings.presence_burst,
            presence_refill_s=settings.presence_refill_s,
            restore_quiet_s=settings.restore_quiet_s,
            draw_offer_plies=settings.draw_offer_plies,
            rematch_offers=settings.max_rematch_offers,
        )

    def _subscribe(self, game_id: str, connection: Connection) -> None:
        if connection.node is not None:  # on another node: it relays the game's channel
            session = self.games.get(game_id)
            connection.follow(game_id, 0 if session is None else session.seq)
            return
        self.subscribers.setdefault(game_id, set()).add(connection)
        connection.games.add(game_id)

    def _new_game_id(self, private: bool = False) -> str:
        """A new game's id (a private game's longer: it is the game's only key); in a
        cluster, in a shard this node owns."""
        length = PRIVATE_GAME_ID_LENGTH if private else GAME_ID_LENGTH
        if self.cluster is None:
            return new_game_id(length)
        return self.cluster.new_game_id(length)

    def _game(self, game_id: str) -> GameSession:
        session = self.games.get(game_id)
        if session is None:
            raise UnknownGame(f"no live game {game_id!r}", game_id)
        return session

    def _me(self, connection: Connection) -> PlayerSession:
        assert connection.player is not None  # dispatch runs only after hello
        return connection.player

    def _unfinished(self, player_id: str) -> set[str]:
        held = self._open_seats.get(player_id, ())
        return {g for g in held if self.games.get(g) and self.games[g].status in UNFINISHED}

    def _unseat(self, player_id: str, game_id: str, *, seat: bool) -> None:
        """``game_id`` leaves ``player_id``'s open seats (``seat``: its seats too)."""
        held = self._open_seats.get(player_id)
        if held is not None:
            held.discard(game_id)
            if not held:
                del self._open_seats[player_id]
        if seat:
            seats = self.seats.get(player_id)
            if seats is not None:
                seats.pop(game_id, None)
                if not seats:
                    del self.seats[player_id]

    async def _check_open_games(
        self, me: PlayerSession, *, whose: str = "", reservation: Reservation | None = None
    ) -> None:
        """Caps on unfinished games: per player, and per address over all its players
        (a client opening a session per connection is still one address); in a cluster,
        over every node's games. Checked for every game that starts, of each player it
        seats, with the game's ``reservation``: the check and the game's place in the
        counts are one step of the event loop (in a cluster, also one script run in Redis,
        Cluster.reserve_open), so requests at once cannot all pass it; without one, a check
        alone (a seek: no game yet). ``whose``: ``me`` is not the requester but the other
        player (the seek's poster, the rematch's opponent), named so in the refusal."""
        game_id = None if reservation is None else reservation.game_id
        held = self._unfinished(me.player_id) | self._reserved_by_player.get(me.player_id, set())
        held.discard(game_id)
        player_cap = self.settings.max_open_games_per_player
        if len(held) >= player_cap:
            raise self._over_cap("player", whose)
        # "": not known here (a rematch's opponent offline): its player's cap only (no
        # connection has "": address_key says "?" for none).
        address = me.address
        at_address = self._held_at(address, held, game_id) if address else set()
        if address and len(at_address) >= self.settings.max_open_games_per_ip:
            raise self._over_cap("address", whose)
        if reservation is not None:
            self._hold(reservation, me.player_id, address)
        if self.cluster is None:
            return
        shared = address if address not in ("", "?") else None  # as _open_holders counts
        refused, added = await self.cluster.reserve_open(
            game_id,
            (me.player_id, player_cap, held),
            None if shared is None else (shared, self.settings.max_open_games_per_ip, at_address),
        )
        if refused is not None:
            if reservation is not None:
                self._unhold(reservation, me.player_id, address)
            raise self._over_cap(refused, whose)
        if reservation is not None and "player" in added:
            reservation.added_players.add(me.player_id)
        if reservation is not None and shared is not None and "address" in added:
            reservation.added_addresses.add(shared)

    def _held_at(self, address: str, held: set[str], game_id: str | None) -> set[str]:
        """The unfinished games (and the games being made) of ``address``'s players here,
        with ``held`` (its player's), but ``game_id`` (the game being made: a game two of
        its players share counts once), as far as the cap needs: no more once at the cap
        (or, on a lone server, below it for sure)."""
        cap = self.settings.max_open_games_per_ip
        counted = held | self._reserved_by_address.get(address, set())
        counted.discard(game_id)
        if self.cluster is None and len(self.games) + len(counted) < cap:
            return counted  # (no address holds more games than there are)
        # Every game start runs this over every player of the address (a NAT, or the
        # load harness's 400 players on 127.0.0.1): one pass, no set per player.
        games, seats = self.games, self._open_seats
        for other in self._address_players.get(address, ()):
            for held_id in seats.get(other, ()):
                game = games.get(held_id)
                if game is not None and game.status in UNFINISHED and held_id != game_id:
                    counted.add(held_id)
            if len(counted) >= cap:
                break
        return counted

    def _over_cap(self, which: str, whose: str) -> LimitExceeded:
        whose = f" ({whose} has as many)" if whose else ""
        if which == "player":
            cap = self.settings.max_open_games_per_player
            return LimitExceeded(f"limit: at most {cap} unfinished games per player{whose}")
        cap = self.settings.max_open_games_per_ip
        return LimitExceeded(
            f"limit: at most {cap} unfinished games per address{whose}; finish or abort some"
        )

    @contextlib.asynccontextmanager
    async def _reserving(self, game_id: str) -> AsyncIterator[Reservation]:
        """A reservation for the game ``game_id`` being made in this block, given up at its
        end: the game registered by then counts by its seats, one not made nowhere. In a
        cluster, a game not made leaves nothing in Redis (its entries in the caps' sets,
        its entry in the open games' index: Cluster.not_made), and a game made no entry
        its reservation added for a player not seated; written after any write this node
        asked before, and before the block's request is over (a create tried again right
        after one refused finds its place free), unless Redis does not answer within
        bus_timeout_s: then once it does."""
        reservation = Reservation(game_id)
        try:
            yield reservation
        finally:
            held = list(reservation.held)
            for player_id, address in held:
                self._unhold(reservation, player_id, address)
            if self.cluster is not None:
                write: asyncio.Task[None] | None = None
                session = self.games.get(game_id)
                if session is None:
                    players = {p for p, _ in held} | reservation.added_players
                    addresses = {a for _, a in held if a not in ("", "?")}
                    addresses |= reservation.added_addresses
                    write = self.cluster.not_made(game_id, players, addresses)
                else:
                    kept: tuple[list[str], list[str]] = ([], [])
                    if session.status in UNFINISHED:
                        kept = self._open_holders(session)
                    players = reservation.added_players - set(kept[0])
                    addresses = reservation.added_addresses - set(kept[1])
                    if players or addresses:
                        write = self.cluster.closed_game(game_id, players, addresses)
                if write is not None:
                    await asyncio.wait({write}, timeout=self.settings.bus_timeout_s)

    def _hold(self, reservation: Reservation, player_id: str, address: str) -> None:
        reservation.held.append((player_id, address))
        self._reserved_by_player.setdefault(player_id, set()).add(reservation.game_id)
        if address:
            self._reserved_by_address.setdefault(address, set()).add(reservation.game_id)

    def _unhold(self, reservation: Reservation, player_id: str, address: str) -> None:
        reservation.held.remove((player_id, address))
        places = [(self._reserved_by_player, player_id)]
        if address and all(a != address for _, a in reservation.held):
            places.append((self._reserved_by_address, address))  # (no other seat there)
        for reserved, key in places:
            games = reserved.get(key)
            if games is not None:
                games.discard(reservation.game_id)
                if not games:
                    del reserved[key]

    def _spawn(self, coroutine: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed", exc_info=task.exception())

    # --- request costs -------------------------------------------------------------------------

    def _charge(self, connection: Connection, cost: float, what: str) -> None:
        """Take an expensive request's tokens (its frame took one) or refuse it."""
        if not connection.bucket.charge(time.monotonic(), cost - 1):
            raise RateLimited(
                f"rate limit: a {what} costs {cost:g} tokens "
                f"({connection.bucket.describe()}); retry later"
            )

    def _send_charged(self, connection: Connection, *frames: bytes) -> None:
        """Send a reply that may be large (a record, a page, a resume's events) and charge
        its size (``cost_per_kib``), owed if need be. A connection on another node of a
        cluster owes it there too (its node charges what the request spent here), and its
        next requests wait there until the debt is paid: what one client makes this node
        publish to the bus is bounded by its rate, as what it is sent."""
        for frame in frames:
            connection.post(frame)
        cost = sum(map(len, frames)) / 1024 * self.settings.cost_per_kib
        connection.bucket.charge(time.monotonic(), cost, owe=True)

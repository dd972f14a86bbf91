"""The server's state, shared by its request handlers (server/handlers/): games,
players, seats, followers, locks and timers; the clock; bookkeeping; request costs.

GameServer (server/app.py) is a chain of classes, one topic each, every one built on
the ones below it: Hub, LobbyFeed (server/lobby_feed.py), GameEvents
(server/game_events.py), then the request handlers by topic (games, lobby, records,
sessions).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from protocol.version import software_version
from server.admission import Admission, Proxies
from server.clock import Now
from server.connection import Connection, PlayerSession
from server.errors import LimitExceeded, RateLimited, UnknownGame
from server.limits import TokenBucket
from server.lobby import Lobby, Subscriptions
from server.pool import EnginePool
from server.records import RecordCache
from server.session import EventLimits, GameSession, Player, new_game_id
from server.settings import ServerSettings
from server.store import Store

if TYPE_CHECKING:
    from server.cluster import Cluster

log = logging.getLogger(__name__)

VERSION = f"noughts/{software_version()}"  # welcome.server
UNFINISHED = ("open", "live")


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
        # Durations (clocks, grace, deadlines) on the one, timestamps people read on the
        # other (server/clock.py); tests pass their own.
        self._monotonic = monotonic
        self._wall = wall
        self.version = VERSION
        self.games: dict[str, GameSession] = {}
        self.subscribers: dict[str, set[Connection]] = {}
        self.players: dict[str, PlayerSession] = {}  # online players
        self.seats: dict[str, dict[str, int]] = {}  # player_id -> {game_id: seat}, in memory
        # The games of self.seats not over yet, or over but not yet through _game_over: what
        # the caps on unfinished games count (_unfinished), without a player's ended games.
        self._open_seats: dict[str, set[str]] = {}
        # In a cluster: the addresses of each game's seated players when they took their
        # seats, for the caps counted cluster-wide (server/cluster.py OPEN_TTL_S).
        self._seat_addresses: dict[str, set[str]] = {}
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
        # Players and sessions: who is at each address, new sessions per address, names
        # being claimed by a hello in flight (name key -> player id), the expiry sweep.
        self._address_players: dict[str, set[str]] = {}
        self._new_sessions: dict[str, TokenBucket] = {}
        self._claiming: dict[str, str] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False
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

    def _new_game_id(self) -> str:
        """A new game's id: in a cluster, in a shard this node owns."""
        return new_game_id() if self.cluster is None else self.cluster.new_game_id()

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

    async def _check_open_games(self, me: PlayerSession, *, whose: str = "") -> None:
        """Caps on unfinished games: per player, and per address over all its players
        (a client opening a session per connection is still one address); in a cluster,
        over every node's games. Checked for every game that starts, of each player it
        seats; ``whose``: ``me`` is not the requester but the other player (the seek's
        poster, the rematch's opponent), named so in the refusal."""
        whose = f" ({whose} has as many)" if whose else ""
        cap = self.settings.max_open_games_per_player
        held = self._unfinished(me.player_id)
        elsewhere: set[str] = set()
        if self.cluster is not None:
            mine, elsewhere = await self.cluster.open_games_of(me.player_id, me.address)
            held |= mine
        if len(held) >= cap:
            raise LimitExceeded(f"limit: at most {cap} unfinished games per player{whose}")
        cap = self.settings.max_open_games_per_ip
        if not me.address:  # (no connection has "": address_key says "?" for none)
            return  # not known here (a rematch's opponent offline): its player's cap only
        if len(self.games) + len(elsewhere) < cap:
            return  # (no address holds more games than there are)
        # Every game start runs this over every player of the address (a NAT, or the
        # load harness's 400 players on 127.0.0.1): one pass, no set per player.
        games, seats = self.games, self._open_seats
        counted = elsewhere | held
        for other in self._address_players.get(me.address, ()):
            for game_id in seats.get(other, ()):
                game = games.get(game_id)
                if game is not None and game.status in UNFINISHED:
                    counted.add(game_id)
            if len(counted) >= cap:
                break
        if len(counted) >= cap:
            raise LimitExceeded(
                f"limit: at most {cap} unfinished games per address{whose}; finish or abort some"
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

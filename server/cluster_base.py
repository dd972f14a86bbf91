"""What the parts of a cluster node share (server/cluster.py's ``Cluster`` and the parts
it inherits, server/cluster_seeks.py and server/cluster_caps.py): the game server's
interface they use (``Host``), what each part uses of the others (``ClusterNode``), a
client of another node as the owner of its game serves it (``RemoteConnection``), a
write's ``Step``, the failures of a Redis command that mean no answer, and the decoding of
what Redis returns."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from protocol import LobbyEvent, Message
from server.bus import RedisBus, unpack
from server.connection import Connection, PlayerSession
from server.limits import TokenBucket
from server.lobby import Lobby, SeekEntry

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from server.clock import Now
    from server.rows import GameRecord
    from server.session import GameSession
    from server.settings import ServerSettings
    from server.store import Store

# A command to Redis that failed this way was not answered: Redis is down, stalled or cut
# off (any other RedisError is an answer: a refusal).
_UNANSWERED = (RedisConnectionError, RedisTimeoutError, OSError)
# A step of a write (Cluster._write): what it writes (a later step of the same name stands
# for it while both wait for Redis), what it adds to a pipeline, and until when (time.time)
# it is still worth writing if the write fails: 0, not again; math.inf, until it is written.
Step = tuple[str, Callable[[Any], object], float]


class Host(Protocol):
    """What a node's cluster part needs from its game server (server/app.py's GameServer),
    defined here so that this module does not import the server."""

    settings: ServerSettings
    store: Store
    games: dict[str, GameSession]
    waiting: dict[str, GameSession]  # games out of service until the store can be read
    subscribers: dict[str, set[Connection]]
    lobby: Lobby

    def clock(self) -> Now: ...
    def _lock(self, game_id: str) -> asyncio.Lock: ...
    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]: ...
    async def dispatch(self, connection: Connection, message: Message) -> None: ...
    async def adopt(self, records: list[GameRecord]) -> int: ...
    def unload(self, game_id: str) -> int | None: ...
    def rematch_closed(self, game_id: str) -> None: ...
    def open_games(self) -> dict[str, tuple[list[str], list[str]]]: ...
    async def seats_of(
        self, player_id: str, game_ids: list[str], *, online: bool = True
    ) -> list[dict[str, Any]]: ...
    async def remote_presence(self, game_id: str, player_id: str, online: bool) -> None: ...
    def _lobby_push(self, event: LobbyEvent, *, seek: SeekEntry | None = None) -> None: ...
    def _remove_seek(self, seek: SeekEntry) -> None: ...
    def _subscribe(self, game_id: str, connection: Connection) -> None: ...


class ClusterNode(Protocol):
    """What the parts of ``Cluster`` use of one another (each part inherits this; Cluster
    implements it all), and what a ``RemoteConnection`` uses of its node."""

    server: Host
    bus: RedisBus
    node: str
    present: dict[str, Any]
    presence_ttl_s: float
    forward_timeout_s: float
    redis_down: str | None
    _pending: dict[int, tuple[asyncio.Future[dict[str, Any]], str, str]]
    _forward_ids: itertools.count[int]

    @property
    def _live_key(self) -> str: ...
    @property
    def _open_key(self) -> str: ...
    @property
    def _open_by_age_key(self) -> str: ...
    def serves(self, game_id: str) -> bool: ...
    def _script(self, source: str) -> Any: ...
    def key_of(self, connection: Connection) -> str: ...
    def send_to(self, node: str, payload: dict[str, Any]) -> None: ...
    def held(self, connection: RemoteConnection) -> None: ...
    def takes_follows_in_out(self, node: str) -> bool: ...
    def owner_of(self, game_id: str) -> str | None: ...
    def open_listed(self, session: GameSession) -> None: ...
    def _publish(self, channel: str, payload: Any) -> None: ...
    def _failed(self, exc: BaseException, what: str) -> None: ...
    def _check_answering(self) -> None: ...
    def _later(self, step: Step, what: str) -> None: ...
    def _follow(self, payload: dict[str, Any]) -> None: ...
    async def _seats_here(
        self, player_id: str, game_ids: list[str], *, online: bool, snapshot: bool = True
    ) -> list[dict[str, Any]]: ...


class RemoteConnection(Connection):
    """A client connected to another node, as the owner of a game serves it: what the
    handlers send it goes back to that node, in order with everything else this node
    publishes (server/bus.py): with the request's ``done``, folded into the game event
    that answers it, or, if anything else is published first, before that."""

    def __init__(self, cluster: ClusterNode, envelope: dict[str, Any], bucket: TokenBucket) -> None:
        # Not Connection.__init__: there is no websocket here, only what handlers use.
        self.cluster = cluster
        self.origin: str = envelope["from"]
        self.node = self.origin
        self.key: str = envelope["conn"]
        player_id, name, bot, address = envelope["player"]
        self.player = PlayerSession(player_id, name, bool(bot))
        self.player.address = address
        self.bucket = bucket
        self.games = set()
        self.watching = set(envelope["watching"])
        self.lobby = False
        self.closed = False
        self.fid: int | None = envelope.get("fid")  # the forwarded request being served
        # Its node receives the game's channel: the reply may ride on the game's event.
        self.subscribed = bool(envelope.get("sub"))
        self.outgoing: list[bytes] = []  # frames not yet sent to its node
        # Games it follows from now on, not yet told its node: they go with its frames.
        self.follows: list[dict[str, Any]] = []
        self.folded = False  # the request's outcome went out with a game event

    def post(self, frame: bytes) -> None:
        self.outgoing.append(frame)
        self.cluster.held(self)

    def follow(self, game_id: str, seq: int) -> None:
        """The handler subscribed this client to ``game_id``: its node relays the game's
        events from now on. Told with the frames that follow (its ``seated``: a bus lost
        between the two left a poster following a game it was never seated in), unless it
        has a request in flight (told at once: its frames go with the request's outcome) or
        its node is of an older version (BUS_VERSION)."""
        if self.fid is None and self.cluster.takes_follows_in_out(self.origin):
            self.follows.append({"game": game_id, "seq": seq, "watching": game_id in self.watching})
            self.cluster.held(self)
            return
        self.cluster.send_to(
            self.origin,
            {
                "op": "follow",
                "conn": self.key,
                "game": game_id,
                "seq": seq,
                "watching": game_id in self.watching,
            },
        )

    def describe(self) -> str:
        return f"{self.player.name if self.player else '?'}@{self.node}"


def _unpack(data: bytes | str) -> Any:
    """A value of the lobby's hashes, as read by the bus's client (bytes)."""
    return unpack(data if isinstance(data, bytes) else data.encode())


def _names(members: list[Any]) -> set[str]:
    return {_name(m) for m in members}


def _name(member: Any) -> str:
    return member.decode() if isinstance(member, bytes) else str(member)

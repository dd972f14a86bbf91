"""The cluster's bus: Redis pub/sub between the nodes of one cluster, and their presence.

Channels and keys, all under the cluster's prefix (``--bus-prefix``):

- ``{prefix}:game:{id}``: a game's committed events, published by its owner node in
  ``seq`` order; a node subscribes to a game's channel only while it has a follower of
  that game (a player or spectator connected to it) or a request about it in flight,
  and relays each event to its followers.
- ``{prefix}:inbox:{node}``: what is sent to one node: requests forwarded to the owner
  of their game, and the replies routed back to the node of the client that asked.
- ``{prefix}:cluster``: notices that the nodes' shards changed (re-read presence now).
- ``{prefix}:lobby``: changes to the cluster's seeks.
- ``{prefix}:presence:{node}``: a node's heartbeat, a key with a lifetime (PX) holding the
  shards it owns; ``{prefix}:nodes`` lists the nodes that ever joined.

Everything one node publishes goes out through one Redis connection, in the order it
was published: a reply routed to a client's node arrives before the game events
published after it (Redis delivers a connection's publications in order). What is
lost while Redis is down is recovered by sequence number (server/cluster.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgpack
import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, RedisError, TimeoutError

from server.errors import ServerError

log = logging.getLogger(__name__)

RECONNECT_S = (0.05, 0.1, 0.2, 0.5, 1.0)  # waits between attempts to reach Redis again
MAX_PAYLOAD = 1 << 20  # a bus message larger than this is a bug or an attack: dropped

# What the node's reader hands on: (kind, name, payload) with kind "game" (name: the
# game id), "inbox", "cluster" or "lobby"; and ("reconnected", "", None) after an outage
# (the game channels are subscribed again by then).
Receiver = Callable[[str, str, Any], None]


class BusUnavailable(ServerError):
    """Redis cannot be reached (at start: one line, and the server does not start)."""


def reraise_cancel(exc: BaseException) -> None:
    """Raise CancelledError if the running task is being cancelled: redis-py and asyncpg
    may turn a cancel that lands in their read timeout into TimeoutError (an OSError in
    Python 3.11), which a loop retrying on OSError would swallow, and a stop would wait
    for that loop forever."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc


def redis_client(url: str) -> aioredis.Redis:
    """A client whose commands are tried again, on a new connection, when the one they
    were sent on turns out dead (Redis restarted: redis-py's default does not retry)."""
    return aioredis.Redis.from_url(
        url,
        socket_connect_timeout=3,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.01), 2),
        retry_on_error=[ConnectionError, TimeoutError],
    )


def pack(payload: Any) -> bytes:
    return msgpack.packb(payload, use_bin_type=True)


def pack_publish(channel: str, data: bytes) -> bytes:
    """``PUBLISH channel data`` in RESP, the Redis protocol's framing (an array of bulk
    strings): what redis-py's pack_command makes of it, without its per-argument
    dispatch, for the publisher's hot path."""
    name = channel.encode()
    return b"*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (
        len(name),
        name,
        len(data),
        data,
    )


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


class RedisBus:
    """One node's end of the bus: a publisher (one connection, in order), a subscriber
    (its inbox, the cluster's channels and the channels of the games it follows) and its
    presence key."""

    def __init__(self, url: str, *, prefix: str, node: str) -> None:
        self.url = url
        self.prefix = prefix
        self.node = node
        self._client: aioredis.Redis | None = None
        self._outgoing: asyncio.Queue[bytes] = asyncio.Queue()  # PUBLISH commands, packed
        self._tasks: list[asyncio.Task[None]] = []
        self._receiver: Receiver | None = None
        self.connected = False  # the subscriber is subscribed (readiness)
        self.lost = 0  # publications dropped while Redis was down
        # Game channels: those wanted, SUBSCRIBEs sent and not yet confirmed (Redis answers
        # them in order on the subscriber's connection), and who waits for a confirmation.
        self.games: set[str] = set()
        self._unconfirmed: dict[str, int] = {}
        self._confirmed: dict[str, asyncio.Future[None]] = {}
        self._pubsub: PubSub | None = None
        self._sending: set[asyncio.Task[None]] = set()

    # --- names ------------------------------------------------------------------------

    def game_channel(self, game_id: str) -> str:
        return f"{self.prefix}:game:{game_id}"

    def inbox(self, node: str) -> str:
        return f"{self.prefix}:inbox:{node}"

    @property
    def cluster_channel(self) -> str:
        return f"{self.prefix}:cluster"

    @property
    def lobby_channel(self) -> str:
        return f"{self.prefix}:lobby"

    def presence_key(self, node: str) -> str:
        return f"{self.prefix}:presence:{node}"

    @property
    def nodes_key(self) -> str:
        return f"{self.prefix}:nodes"

    # --- life -------------------------------------------------------------------------

    async def start(self, receiver: Receiver) -> None:
        """Connect, subscribe, and start the reader and the publisher; BusUnavailable if
        Redis does not answer."""
        self._receiver = receiver
        self._client = redis_client(self.url)
        try:
            await self._client.ping()
        except (RedisError, OSError) as exc:
            await self._client.aclose()
            raise BusUnavailable(f"cannot reach the bus at {self.url}: {exc}") from exc
        subscribed = asyncio.get_running_loop().create_future()
        self._tasks = [
            asyncio.create_task(self._read(subscribed), name="bus-reader"),
            asyncio.create_task(self._publish_loop(), name="bus-publisher"),
        ]
        await subscribed

    async def close(self) -> None:
        tasks = [*self._tasks, *self._sending]
        for task in tasks:
            task.cancel()
        if tasks:  # bounded: a stop must not hang on a client that swallowed a cancel
            await asyncio.wait(tasks, timeout=2)
        self._tasks = []
        if self._client is not None:
            with contextlib.suppress(RedisError, OSError):
                await self._client.delete(self.presence_key(self.node))
            await self._client.aclose()
            self._client = None

    # --- publishing -----------------------------------------------------------------------

    def publish(self, channel: str, payload: Any) -> None:
        """Send ``payload`` on ``channel`` after everything this node published before."""
        self._outgoing.put_nowait(pack_publish(channel, pack(payload)))

    async def _publish_loop(self) -> None:
        """Everything queued goes out as one pipelined write of PUBLISH commands, in order,
        on a connection of its own (held for the node's life: no pool or Pipeline object
        per batch, about half the CPU of a one-command pipeline, measured); while Redis is
        down it is dropped (and counted): sequence numbers recover it."""
        assert self._client is not None
        pool = self._client.connection_pool
        connection: Connection | None = None
        try:
            while True:
                batch = [await self._outgoing.get()]
                while not self._outgoing.empty() and len(batch) < 1024:
                    batch.append(self._outgoing.get_nowait())
                for attempt in (1, 2):  # the second on a new connection (Redis restarted)
                    try:
                        if connection is None:
                            connection = await pool.get_connection()
                        await connection.send_packed_command(batch, check_health=False)
                        for _ in batch:
                            await connection.read_response()
                        break
                    except (RedisError, OSError) as exc:
                        reraise_cancel(exc)
                        if connection is not None:
                            await connection.disconnect()
                            await pool.release(connection)
                            connection = None
                        if attempt == 2:
                            self.lost += len(batch)
                            log.warning("bus: %d messages not published (%s)", len(batch), exc)
        finally:
            if connection is not None:  # maybe mid-reply: not back to the pool as it is
                await connection.disconnect()
                await pool.release(connection)

    # --- game channels -------------------------------------------------------------------

    def subscribed(self, game_id: str) -> bool:
        """This node receives the game's events now (Redis confirmed the subscription)."""
        return game_id in self.games and not self._unconfirmed.get(game_id)

    async def follow_game(self, game_id: str) -> None:
        """Receive the game's events; returns once Redis confirmed it (events published
        from then on arrive). After an outage the reader subscribes again by itself."""
        if game_id not in self.games:
            self.games.add(game_id)
            self._send_subscription("SUBSCRIBE", game_id)
        if self._unconfirmed.get(game_id):
            waiter = self._confirmed.get(game_id)
            if waiter is None or waiter.done():
                waiter = self._confirmed[game_id] = asyncio.get_running_loop().create_future()
            await asyncio.shield(waiter)

    def unfollow_game(self, game_id: str) -> None:
        """Stop receiving the game's events."""
        if game_id in self.games:
            self.games.discard(game_id)
            self._send_subscription("UNSUBSCRIBE", game_id)

    def _send_subscription(self, command: str, game_id: str) -> None:
        """SUBSCRIBE or UNSUBSCRIBE on the subscriber's connection (the reader reads the
        confirmation); while Redis is down, the reader's next subscription includes it."""
        pubsub = self._pubsub
        if pubsub is None:
            if command == "SUBSCRIBE":
                self._unconfirmed[game_id] = 1  # by the reader's next subscription
            return
        channel = self.game_channel(game_id)
        sent: Awaitable[Any]
        if command == "SUBSCRIBE":
            self._unconfirmed[game_id] = self._unconfirmed.get(game_id, 0) + 1
            sent = pubsub.subscribe(channel)
        else:
            sent = pubsub.unsubscribe(channel)

        async def send() -> None:
            try:
                await sent
            except (RedisError, OSError) as exc:  # the reader reconnects and subscribes again
                log.debug("bus: %s %s failed (%s)", command, channel, exc)

        task = asyncio.get_running_loop().create_task(send())
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def _subscription_confirmed(self, game_id: str) -> None:
        left = self._unconfirmed.get(game_id, 0) - 1
        if left > 0:
            self._unconfirmed[game_id] = left
            return
        self._unconfirmed.pop(game_id, None)
        waiter = self._confirmed.pop(game_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- receiving -------------------------------------------------------------------------

    async def _read(self, subscribed: asyncio.Future[None]) -> None:
        """Subscribe and hand every message to the receiver, reconnecting after an outage
        (then the receiver hears ``reconnected``: what it follows may have moved on)."""
        assert self._receiver is not None
        receiver = self._receiver
        game_prefix = f"{self.prefix}:game:"
        game_bytes = game_prefix.encode()
        channels = {
            self.inbox(self.node): "inbox",
            self.cluster_channel: "cluster",
            self.lobby_channel: "lobby",
        }
        kinds = {channel.encode(): kind for channel, kind in channels.items()}
        attempt = 0
        while True:
            # RESP2: a publication is a plain array (RESP3, redis-py 8's default, makes it
            # a push, which its parser logs at debug level, formatting every payload).
            client = aioredis.Redis.from_url(self.url, socket_connect_timeout=3, protocol=2)
            pubsub = client.pubsub()
            try:
                # One SUBSCRIBE for the fixed channels and every game followed; games
                # followed from now on are subscribed on this connection as they come.
                games = set(self.games)
                self._unconfirmed = dict.fromkeys(games, 1)
                self._pubsub = pubsub
                await pubsub.subscribe(*channels, *(self.game_channel(g) for g in games))
                if subscribed.done():
                    log.info("bus: subscribed again to %s", self.url)
                    receiver("reconnected", "", None)
                else:
                    subscribed.set_result(None)
                self.connected = True
                attempt = 0
                while True:
                    # The raw reply, [b"message", channel, data] for a publication (one
                    # a move, at least): handled here; the rest (confirmations) through
                    # redis-py's handle_message, which keeps the PubSub's own state.
                    response = await pubsub.parse_response(block=True)
                    if not (isinstance(response, list) and response[0] == b"message"):
                        message = await pubsub.handle_message(response)
                        if message is not None and message["type"] == "subscribe":
                            channel = message["channel"].decode()
                            if channel.startswith(game_prefix):
                                self._subscription_confirmed(channel[len(game_prefix) :])
                        continue
                    _, channel_bytes, data = response
                    if not isinstance(data, bytes) or len(data) > MAX_PAYLOAD:
                        continue
                    try:
                        payload = unpack(data)
                        if channel_bytes.startswith(game_bytes):
                            receiver("game", channel_bytes[len(game_bytes) :].decode(), payload)
                        else:
                            channel = channel_bytes.decode()
                            receiver(kinds.get(channel_bytes, "?"), channel, payload)
                    except Exception:
                        log.exception("bus: a message on %s could not be handled", channel_bytes)
            except (RedisError, OSError) as exc:
                reraise_cancel(exc)
                self.connected = False
                self._pubsub = None
                if not subscribed.done():
                    subscribed.set_exception(
                        BusUnavailable(f"cannot subscribe to the bus at {self.url}: {exc}")
                    )
                    return
                log.warning("bus: lost %s (%s); reconnecting", self.url, exc)
                await asyncio.sleep(RECONNECT_S[min(attempt, len(RECONNECT_S) - 1)])
                attempt += 1
            finally:
                if self._pubsub is pubsub:
                    self._pubsub = None
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                with contextlib.suppress(Exception):
                    await client.aclose()

    # --- presence ---------------------------------------------------------------------------

    async def heartbeat(self, state: dict[str, Any], ttl_s: float) -> None:
        """This node is alive for ``ttl_s`` more seconds, with ``state`` (its shards)."""
        assert self._client is not None
        pipe = self._client.pipeline(transaction=False)
        pipe.set(self.presence_key(self.node), pack(state), px=int(ttl_s * 1000))
        pipe.sadd(self.nodes_key, self.node)
        await pipe.execute()

    async def nodes(self) -> dict[str, Any]:
        """The live nodes and the state each last announced (this one included); nodes
        whose key expired leave the list."""
        assert self._client is not None
        members = await self._client.smembers(self.nodes_key)
        names = sorted(n.decode() if isinstance(n, bytes) else str(n) for n in members)
        if not names:
            return {}
        values = await self._client.mget([self.presence_key(n) for n in names])
        alive: dict[str, Any] = {}
        dead = []
        for name, value in zip(names, values, strict=True):
            if isinstance(value, bytes):
                alive[name] = unpack(value)
            else:
                dead.append(name)
        if dead:
            await self._client.srem(self.nodes_key, *dead)
        return alive

    @property
    def client(self) -> aioredis.Redis:
        """The publisher's connection, for the lobby's keys (server/cluster.py)."""
        assert self._client is not None
        return self._client

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
lost while Redis is down, or while the subscriber's connection is (found dead by its
PING), is recovered once it is back (server/cluster.py).

The hot path (every move crosses it twice when the mover sits on another node) speaks
RESP itself on two connections of its own: the publisher's, in ``CLIENT REPLY OFF``
mode (nothing to read back), written once per turn of the event loop with every
PUBLISH of that turn; and the subscriber's, its replies parsed by hiredis (redis-py's
own C parser, ``redis[hiredis]``) and each message handed to the receiver at once. Both
are opened by redis-py from the same URL (``open_raw``): TCP, TLS (``rediss://``), a unix
socket, AUTH and the database are whatever redis-py does with that URL; only the bytes
exchanged afterwards are the bus's. Everything else (presence, the lobby's keys) goes
through a redis-py client whose pool is capped (MAX_CONNECTIONS).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import hiredis
import msgpack
import redis
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, RedisError
from redis.retry import Retry as SyncRetry

from server.errors import ServerError
from server.urls import redacted_url

log = logging.getLogger(__name__)

RECONNECT_S = (0.05, 0.1, 0.2, 0.5, 1.0)  # waits between attempts to reach Redis again
MAX_PAYLOAD = 1 << 20  # a bus message larger than this is a bug or an attack: dropped
# Connections of the redis-py client per node (presence, lobby keys, quick pairing, the
# engine queue): commands beyond wait for one (a burst of lobby writes had opened 205).
MAX_CONNECTIONS = 16
POOL_WAIT_S = 10.0  # how long a command waits for a connection of the capped pool
# While the publisher's connection is down, what is published is held this long for the
# next connection (well inside a forwarded request's timeout); older is dropped, counted.
HOLD_S = 1.0
CLIENT_REPLY_OFF = b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n"
PING = b"*1\r\n$4\r\nPING\r\n"  # answered on a subscribed connection too: [b"pong", b""]
# The publisher's liveness probe: replies on for one PING, then off again; answered
# "+OK" (CLIENT REPLY ON) and "+PONG" once every publication written before it reached Redis.
PUBLISHER_PROBE = b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$2\r\nON\r\n" + PING + CLIENT_REPLY_OFF

# What the node's reader hands on: (kind, name, payload) with kind "game" (name: the
# game id), "inbox", "cluster" or "lobby"; ("republishing", "", None) when the publisher
# is connected again after losing its connection (what it wrote on it since its last PING
# answered may be lost); and ("reconnected", "", None) after an outage
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


def redis_client(url: str, *, timeout_s: float) -> aioredis.Redis:
    """A client whose commands each give up after ``timeout_s`` (to connect, and again to
    be answered: TimeoutError, a RedisError), so that a Redis alive but answering nothing
    (stalled, cut off by a partition) fails the request that needs it instead of holding it
    for ever. A command whose connection turns out dead (Redis restarted: ConnectionError)
    is tried again on a new one (redis-py's default does not retry); one that timed out is
    not: it was sent, and may still run when Redis wakes up (the caller undoes it)."""
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=MAX_CONNECTIONS,
        timeout=POOL_WAIT_S,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.01), 2, supported_errors=(ConnectionError,)),
        retry_on_error=[ConnectionError],
        **_timeouts(timeout_s),
    )
    return aioredis.Redis.from_pool(pool)


def blocking_redis_client(url: str, *, timeout_s: float) -> redis.Redis:
    """``redis_client``'s, synchronous (``noughts engine-worker``'s): each command gives up
    after ``timeout_s``, to connect and again to be answered (a Redis stalled, a connection
    whose close was lost), and is tried again on a new connection if its own turns out dead,
    not if it timed out (the caller's loop goes on, its next command on a new connection)."""
    return redis.Redis.from_url(
        url,
        retry=SyncRetry(ExponentialBackoff(cap=0.2, base=0.01), 2, (ConnectionError,)),
        retry_on_error=[ConnectionError],
        **_timeouts(timeout_s),
    )


def _timeouts(timeout_s: float) -> dict[str, float]:
    """A command to the cluster's Redis (--bus-timeout-s): to connect, and to be answered."""
    return {"socket_connect_timeout": timeout_s, "socket_timeout": timeout_s}


async def open_raw(
    url: str, *, timeout_s: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Any]:
    """A connection to the bus's Redis opened by redis-py (TCP or unix socket, TLS for
    ``rediss://`` with the URL's ssl_* options, AUTH, SELECT: exactly what redis-py does
    with ``url``, each step given ``timeout_s``), then handed over as its raw streams,
    RESP2, for the bus to speak RESP itself, with no timeout on its reads (a subscriber
    waits for messages as long as none comes: its PING says whether it is alive,
    ``RedisBus._watch``); close it with ``close_raw``. BusUnavailable-free: raises
    RedisError/OSError."""
    pool = aioredis.ConnectionPool.from_url(url, protocol=2, **_timeouts(timeout_s))
    connection: AbstractConnection = pool.make_connection()
    await connection.connect()
    # redis-py's asyncio connection keeps its streams here (redis-py 5 to 8, pinned <9).
    reader, writer = connection._reader, connection._writer
    if reader is None or writer is None:
        raise ConnectionError(f"no connection to {redacted_url(url)}")
    return reader, writer, connection


async def close_raw(connection: Any) -> None:
    with contextlib.suppress(Exception):
        await connection.disconnect(nowait=True)


def pack_command(*parts: bytes) -> bytes:
    """A command in RESP: an array of bulk strings."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%b\r\n" % (len(part), part))
    return b"".join(out)


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


class Subscription(asyncio.Protocol):
    """The subscriber's connection's protocol once subscribed: bytes parsed by hiredis as
    they are received, each reply handed to ``handle`` at once; ``ended`` is done when
    the connection ends (``error`` says why)."""

    def __init__(self, handle: Callable[[Any], None], transport: asyncio.BaseTransport) -> None:
        self.parser = hiredis.Reader()
        self.handle = handle
        self.transport = transport
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.error: Exception = ConnectionError("Redis closed the subscriber's connection")
        self.received = 0  # reads so far: the connection's sign of life (RedisBus._watch)

    def data_received(self, data: bytes) -> None:
        self.received += 1
        parser = self.parser
        handle = self.handle
        try:
            parser.feed(data)
            while (reply := parser.gets()) is not False:
                handle(reply)
        except hiredis.ProtocolError as exc:  # not RESP: the connection is of no use
            self.error = exc
            self.transport.close()

    def eof_received(self) -> bool:
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and not isinstance(self.error, hiredis.ProtocolError):
            self.error = ConnectionError(f"the subscriber's connection was lost ({exc})")
        if not self.ended.done():
            self.ended.set_result(None)


class RedisBus:
    """One node's end of the bus: a publisher (one connection, in order), a subscriber
    (its inbox, the cluster's channels and the channels of the games it follows) and its
    presence key."""

    def __init__(self, url: str, *, prefix: str, node: str, timeout_s: float) -> None:
        self.url = url
        self.shown = redacted_url(url)  # for messages and logs: no password
        self.prefix = prefix
        self.node = node
        # Each command's (--bus-timeout-s): ``client``'s, connecting, the subscriber's PING.
        self.timeout_s = timeout_s
        self._client: aioredis.Redis | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._receiver: Receiver | None = None
        self.connected = False  # the subscriber is subscribed (readiness)
        self.lost = 0  # publications dropped while Redis was down
        # The publisher: PUBLISH commands of this turn of the loop, packed, written by
        # _flush at its end; the connection (None while down); since when what waits was
        # held for lack of one.
        self._outgoing: list[bytes] = []
        self._flush_soon: asyncio.Handle | None = None
        self._publisher: asyncio.StreamWriter | None = None
        self._held_since: float | None = None
        # Game channels: those wanted, SUBSCRIBEs sent and not yet confirmed (Redis answers
        # them in order on the subscriber's connection), and who waits for a confirmation.
        self.games: set[str] = set()
        self._unconfirmed: dict[str, int] = {}
        self._confirmed: dict[str, asyncio.Future[None]] = {}
        self._subscriber: asyncio.StreamWriter | None = None  # None while down

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
        self._client = redis_client(self.url, timeout_s=self.timeout_s)
        try:
            await self._client.ping()
        except (RedisError, OSError) as exc:
            await self._client.aclose()
            raise BusUnavailable(f"cannot reach the bus at {self.shown}: {exc}") from exc
        loop = asyncio.get_running_loop()
        subscribed, publishing = loop.create_future(), loop.create_future()
        self._tasks = [
            asyncio.create_task(self._read(subscribed), name="bus-reader"),
            asyncio.create_task(self._publish_loop(publishing), name="bus-publisher"),
        ]
        try:
            await asyncio.gather(subscribed, publishing)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        tasks = self._tasks
        for task in tasks:
            task.cancel()
        if tasks:  # bounded: a stop must not hang on a client that swallowed a cancel
            await asyncio.wait(tasks, timeout=2)
        self._tasks = []
        if self._flush_soon is not None:
            self._flush_soon.cancel()
            self._flush_soon = None
        if self._client is not None:
            with contextlib.suppress(RedisError, OSError):
                await self._client.delete(self.presence_key(self.node))
            await self._client.aclose()
            self._client = None

    # --- publishing -----------------------------------------------------------------------

    def publish(self, channel: str, payload: Any) -> None:
        """Send ``payload`` on ``channel`` after everything this node published before:
        with every other publication of this turn of the event loop, in one write."""
        self._outgoing.append(pack_publish(channel, pack(payload)))
        if self._flush_soon is None:
            self._flush_soon = asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_soon = None
        outgoing = self._outgoing
        if not outgoing:
            return
        writer = self._publisher
        if writer is None or writer.is_closing():
            # Down: held for the next connection a little while (HOLD_S), then dropped.
            now = time.monotonic()
            if self._held_since is None:
                self._held_since = now
            elif now - self._held_since > HOLD_S:
                self._drop_held()
            return
        self._outgoing = []
        writer.write(b"".join(outgoing))

    def _drop_held(self) -> None:
        self.lost += len(self._outgoing)
        log.warning("bus: %d messages not published (Redis down)", len(self._outgoing))
        self._outgoing = []
        self._held_since = None

    async def _keep_connected(
        self,
        role: str,
        ready: asyncio.Future[None],
        serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
        served: Callable[[], bool],
        down: Callable[[], None],
    ) -> None:
        """One of the bus's raw connections to Redis (``role``: "publish", "subscribe"):
        opened and handed to ``serve`` until it ends, then opened again, RECONNECT_S apart
        (from the shortest again once ``served`` says the last connection was up). If the
        first connection cannot be made, ``ready`` fails instead. ``down`` forgets the
        connection."""
        attempt = 0
        while True:
            connection = None
            try:
                reader, writer, connection = await open_raw(self.url, timeout_s=self.timeout_s)
                await serve(reader, writer)
            except (RedisError, OSError, hiredis.ProtocolError) as exc:
                reraise_cancel(exc)
                if served():
                    attempt = 0  # it was up: the first wait after an outage is the shortest
                down()
                if not ready.done():
                    ready.set_exception(
                        BusUnavailable(f"cannot {role} to the bus at {self.shown}: {exc}")
                    )
                    return
                if attempt == 0:
                    log.warning("bus: lost %s (%s, %s); reconnecting", self.shown, role, exc)
                await asyncio.sleep(RECONNECT_S[min(attempt, len(RECONNECT_S) - 1)])
                attempt += 1
            finally:
                down()
                if connection is not None:
                    await close_raw(connection)

    async def _publish_loop(self, ready: asyncio.Future[None]) -> None:
        """The publisher's connection, in ``CLIENT REPLY OFF`` mode (Redis answers none of
        its PUBLISH commands: nothing to read, no reply to wait for before the next
        write). Its reads only see the connection end."""

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(CLIENT_REPLY_OFF)
            self._publisher = writer
            if not ready.done():
                ready.set_result(None)
            else:
                log.info("bus: publishing again to %s", self.shown)
            if self._held_since is not None:  # what waited for this connection
                if time.monotonic() - self._held_since > HOLD_S:
                    self._drop_held()
                self._held_since = None
                self._flush()
            if lost[0]:  # what was written on the last one since its last PONG: maybe
                lost[0] = False
                self._tell_receiver("republishing")
            await self._probe_publisher(reader, writer)

        def down() -> None:
            lost[0] = lost[0] or self._publisher is not None
            self._publisher = None

        lost = [False]  # a connection was lost since the last one came up

        await self._keep_connected(
            "publish", ready, serve, lambda: self._publisher is not None, down
        )

    async def _probe_publisher(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Until the publisher's connection ends, or is found dead: every timeout_s it is
        sent a PING (replies on for it alone), which must be answered within timeout_s
        more. Nothing else comes back on it, so its end may never arrive (Redis restarted,
        or cut it, while a partition lost the close; a Redis stalled): without the PING
        every publication would go into the void, unseen, or pile up in memory."""
        while True:
            try:
                await asyncio.wait_for(reader.read(1 << 16), self.timeout_s)
            except TimeoutError:
                pass  # (silent, as it should be)
            else:
                if reader.at_eof():
                    raise ConnectionError("Redis closed the publisher's connection")
                continue  # an old Redis's replies, say: dropped
            writer.write(PUBLISHER_PROBE)
            answer = b""
            try:
                async with asyncio.timeout(self.timeout_s):
                    while b"+PONG\r\n" not in answer:
                        data = await reader.read(1 << 16)
                        if not data:
                            raise ConnectionError("Redis closed the publisher's connection")
                        answer += data
            except TimeoutError:
                writer.transport.abort()
                raise ConnectionError(
                    f"the publisher's PING went unanswered for {self.timeout_s:g} s"
                ) from None

    def _tell_receiver(self, kind: str) -> None:
        if self._receiver is not None:
            self._receiver(kind, "", None)

    # --- game channels -------------------------------------------------------------------

    def subscribed(self, game_id: str) -> bool:
        """This node receives the game's events now (Redis confirmed the subscription)."""
        return game_id in self.games and not self._unconfirmed.get(game_id)

    async def follow_game(self, game_id: str) -> None:
        """Receive the game's events; returns once Redis confirmed it (events published
        from then on arrive). After an outage the reader subscribes again by itself."""
        if game_id not in self.games:
            self.games.add(game_id)
            self._send_subscription(b"SUBSCRIBE", game_id)
        if self._unconfirmed.get(game_id):
            waiter = self._confirmed.get(game_id)
            if waiter is None or waiter.done():
                waiter = self._confirmed[game_id] = asyncio.get_running_loop().create_future()
            await asyncio.shield(waiter)

    def unfollow_game(self, game_id: str) -> None:
        """Stop receiving the game's events."""
        if game_id in self.games:
            self.games.discard(game_id)
            self._send_subscription(b"UNSUBSCRIBE", game_id)

    def _send_subscription(self, command: bytes, game_id: str) -> None:
        """SUBSCRIBE or UNSUBSCRIBE on the subscriber's connection (the reader reads the
        confirmation); while Redis is down, the reader's next subscription includes it."""
        if command == b"SUBSCRIBE":
            self._unconfirmed[game_id] = self._unconfirmed.get(game_id, 0) + 1
        writer = self._subscriber
        if writer is None:
            if command == b"SUBSCRIBE":
                self._unconfirmed[game_id] = 1  # by the reader's next subscription
            return
        writer.write(pack_command(command, self.game_channel(game_id).encode()))

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
        (then the receiver hears ``reconnected``: what it follows may have moved on).
        The connection's bytes are parsed as they are received (``Subscription``), each
        message handed on from there: no task wakes up between Redis and the receiver."""
        assert self._receiver is not None
        receiver = self._receiver
        game_bytes = f"{self.prefix}:game:".encode()
        channels = {
            self.inbox(self.node): "inbox",
            self.cluster_channel: "cluster",
            self.lobby_channel: "lobby",
        }
        kinds = {channel.encode(): kind for channel, kind in channels.items()}
        first = self.inbox(self.node).encode()

        def handle(reply: Any) -> None:
            # A publication: [b"message", channel, data]; a confirmation: [b"subscribe",
            # channel, count] (or unsubscribe).
            if type(reply) is not list or len(reply) != 3:
                if isinstance(reply, Exception):
                    log.warning("bus: Redis answered %s", reply)
                return
            kind, channel_bytes, data = reply
            if kind == b"message":
                if type(data) is not bytes or len(data) > MAX_PAYLOAD:
                    return
                try:
                    payload = unpack(data)
                    if channel_bytes.startswith(game_bytes):
                        receiver("game", channel_bytes[len(game_bytes) :].decode(), payload)
                    else:
                        name = channel_bytes.decode()
                        receiver(kinds.get(channel_bytes, "?"), name, payload)
                except Exception:
                    log.exception("bus: a message on %s could not be handled", channel_bytes)
            elif kind == b"subscribe":
                if channel_bytes.startswith(game_bytes):
                    self._subscription_confirmed(channel_bytes[len(game_bytes) :].decode())
                elif channel_bytes == first:
                    # All of the first SUBSCRIBE's channels (Redis answers a command's
                    # channels together): subscribed.
                    if subscribed.done():
                        log.info("bus: subscribed again to %s", self.shown)
                        receiver("reconnected", "", None)
                    else:
                        subscribed.set_result(None)
                    self.connected = True

        async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # Nothing was sent yet, so nothing waits in redis-py's reader: the connection's
            # bytes go to the parser from now on.
            subscription = Subscription(handle, writer.transport)
            writer.transport.set_protocol(subscription)
            # One SUBSCRIBE for the fixed channels and every game followed; games followed
            # from now on are subscribed on this connection as they come.
            games = set(self.games)
            self._unconfirmed = dict.fromkeys(games, 1)
            names = [*kinds, *(self.game_channel(g).encode() for g in games)]
            writer.write(pack_command(b"SUBSCRIBE", *names))
            self._subscriber = writer
            await self._watch(subscription, writer)
            raise subscription.error

        def down() -> None:
            self.connected = False
            self._subscriber = None

        await self._keep_connected("subscribe", subscribed, serve, lambda: self.connected, down)

    async def _watch(self, subscription: Subscription, writer: asyncio.StreamWriter) -> None:
        """Until the subscriber's connection ends, or is found dead: silent for timeout_s,
        it is sent a PING; silent for timeout_s more, it is dead and closed. Its end may
        never arrive (Redis restarted, or cut it, while a partition lost the close): the
        node would wait for messages on it for ever, hearing nothing of the other nodes."""
        pinged = False
        while True:
            received = subscription.received
            await asyncio.wait({subscription.ended}, timeout=self.timeout_s)
            if subscription.ended.done():
                return
            if subscription.received != received:
                pinged = False
            elif not pinged:
                writer.write(PING)
                pinged = True
            else:
                subscription.error = ConnectionError(
                    f"the subscriber's PING went unanswered for {self.timeout_s:g} s"
                )
                writer.transport.abort()
                return

    # --- presence ---------------------------------------------------------------------------

    async def heartbeat(self, state: dict[str, Any], ttl_s: float) -> bool:
        """This node is alive for ``ttl_s`` more seconds, with ``state`` (its shards).
        Whether it was still alive until then: False when its presence had expired (a
        first beat; a stall longer than ``ttl_s``; Redis restarted without its data)."""
        assert self._client is not None
        pipe = self._client.pipeline(transaction=False)
        pipe.exists(self.presence_key(self.node))
        pipe.set(self.presence_key(self.node), pack(state), px=int(ttl_s * 1000))
        pipe.sadd(self.nodes_key, self.node)
        existed, _, _ = await pipe.execute()
        return bool(existed)

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

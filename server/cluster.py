"""A node of a cluster (``noughts serve --db postgresql://... --bus redis://...``).

Several nodes share one PostgreSQL database and one Redis (server/bus.py). Every game
has one owner node: the node holding its shard's advisory lock (server/shards.py), the
only one that applies its requests and commits its events, as a lone server does.
Clients connect to any node:

- A request about a game owned elsewhere is forwarded to its owner's inbox with the
  client's identity; the owner serves it through a ``RemoteConnection`` whose frames go
  back to the client's node, which posts them to the client. The client's node waits for
  the owner's ``done`` (a client's requests are served in order, as on one node).
- The owner publishes each committed event on the game's channel (after the commit: the
  durability rule is the same); every node posts it to its own followers of the game,
  once, in ``seq`` order. A gap in the sequence (a message lost in a Redis outage, an
  owner that died between commit and publish), an owner that changed, or a bus that
  reconnected: the node asks the owner for the events since the last it relayed (or a
  snapshot), as a reconnecting client resumes.
- Each node claims its fair share of the shards (SHARDS over the live nodes), and any
  shard nobody has held for a whole claim period (a dead node's: its locks dropped with
  its connection). Taking a shard restores its games from the database (the restart
  path); releasing one (rebalancing, drain) unloads them after their work in flight.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import logging
import math
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import asyncpg
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from protocol import (
    PROTOCOL_VERSION,
    SEQ_SINCE_VERSION,
    ErrorCode,
    JoinGame,
    LobbyEvent,
    Message,
    ProtocolError,
    Resume,
    Seated,
    SeekDeclined,
    Watch,
    decode,
    encode,
)
from server.bus import RedisBus, pack, reraise_cancel, unpack
from server.clock import TimeControl
from server.connection import Connection, PlayerSession
from server.errors import NodeUnavailable, ServerError, StorageError
from server.limits import TokenBucket
from server.lobby import Lobby, SeekEntry, game_rank
from server.session import Player, new_game_id
from server.shards import SHARDS, ShardLocks, shard_of

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterable

    from server.clock import Now
    from server.rows import GameRecord
    from server.session import GameSession
    from server.settings import ServerSettings
    from server.store import Store

log = logging.getLogger(__name__)

# What a node's inbox takes, announced in its presence: 2, an "out" message may carry the
# games its client follows from then on ("follow"); 1 (a node of an older version, which
# announces none), a follow is an inbox message of its own.
BUS_VERSION = 2
# Requests after which the client follows the game: its node subscribes to the game's
# channel before forwarding them.
_FOLLOWING = (JoinGame, Watch, Resume)
# Quick pairing (KEYS: the queue, the entries' hash, the pairing's claim key; ARGV: the
# player, the entry's id, its data, how many to look at, the claim key's life in ms, what takes
# a partner, the prefix of the entries' taken marks, then the ids of entries to pass over):
# take the first queued entry of another player whose data is still there, as _CLAIM_SEEK
# takes a seek (its queue item and data kept under the claim key for _UNCLAIM_QUICK; marked
# taken, "pending" until _SETTLE_CLAIM, for its node, which may miss the quick-taken notice:
# _REPOST_QUICK); or queue this one. Run again (tried again on a new connection), the same
# answer; called off before it ran, nothing. Queue items are "ENTRY_ID PLAYER_ID". (The taken
# mark's key is made here, from the entry's id: the bus is one Redis, not a Redis Cluster.)
_QUICK_TAKE = """
if redis.call('EXISTS', KEYS[3]) == 1 then
  return redis.call('HGET', KEYS[3], 'data')
end
local skipped = {}
for i = 8, #ARGV do skipped[ARGV[i]] = true end
local items = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[4]) - 1)
for _, item in ipairs(items) do
  local id, player = string.match(item, '^(%S+) (.*)$')
  if player ~= ARGV[1] and not skipped[id] then
    redis.call('LREM', KEYS[1], 1, item)
    local data = redis.call('HGET', KEYS[2], id)
    if data then
      redis.call('HDEL', KEYS[2], id)
      redis.call('HSET', KEYS[3], 'item', item, 'data', data)
      redis.call('PEXPIRE', KEYS[3], ARGV[5])
      local mark = ARGV[7] .. id
      redis.call('HSET', mark, 'claim', KEYS[3], 'what', ARGV[6], 'state', 'pending')
      redis.call('PEXPIRE', mark, ARGV[5])
      return data
    end
  end
end
redis.call('RPUSH', KEYS[1], ARGV[2] .. ' ' .. ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[3], 'queued', '1')
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return false
"""
# A pairing whose answer was lost, called off (KEYS: those of _QUICK_TAKE; ARGV: the claim
# key's life in ms, the prefixes of the entries' taken and removal marks): the partner it
# took is not taken (its mark goes) and is put back at the head of the queue, unless its
# node removed it since (_unqueue); a pairing that has not run yet does nothing when it does.
_UNCLAIM_QUICK = """
local taken = redis.call('HMGET', KEYS[3], 'item', 'data')
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'off', '1')
redis.call('PEXPIRE', KEYS[3], ARGV[1])
if taken[1] then
  local id = string.match(taken[1], '^(%S+) ')
  local mark = ARGV[2] .. id
  if redis.call('HGET', mark, 'claim') == KEYS[3] then redis.call('DEL', mark) end
  if redis.call('EXISTS', ARGV[3] .. id) == 0
      and redis.call('HSETNX', KEYS[2], id, taken[2]) == 1 then
    redis.call('LPUSH', KEYS[1], taken[1])
  end
end
return 0
"""
# The live games' index (KEYS: the index; ARGV: game id, data, ...): new summaries for the
# games still in it (one that ended meanwhile stays out, whichever write comes first).
_REINDEX = """
for i = 1, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 0
"""
# A page of the open games' index (KEYS: the games by age, their summaries; ARGV: how
# many): the summaries of the oldest, nil for one removed meanwhile. One bounded read,
# however many games the cluster holds open.
_OPEN_PAGE = """
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #ids == 0 then
  return {}
end
return redis.call('HMGET', KEYS[2], unpack(ids))
"""
# The caps on unfinished games, checked and taken at once (KEYS: a player's set of open
# games, and an address's or none; ARGV: now, a new entry's expiry, the sets' TTL in ms, the
# game being made ('' for a check alone), then for each key its cap, n and n games this
# node counts there, which Redis may have lost in a restart): {i}, refused at the i-th
# key; or {0, then 1 for each key that the game is a new entry of, else 0}. The game being
# made is not counted against itself (a game two players of an address share counts once).
_RESERVE_OPEN = """
local now, game = tonumber(ARGV[1]), ARGV[4]
local at = 5
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local count = redis.call('ZCARD', key)
  if game ~= '' and redis.call('ZSCORE', key, game) then count = count - 1 end
  local n = tonumber(ARGV[at + 1])
  for j = at + 2, at + 1 + n do
    if not redis.call('ZSCORE', key, ARGV[j]) then count = count + 1 end
  end
  if count >= tonumber(ARGV[at]) then return {i} end
  at = at + 2 + n
end
local added = {0}
if game ~= '' then
  for _, key in ipairs(KEYS) do
    added[#added + 1] = redis.call('ZADD', key, ARGV[2], game)
    redis.call('PEXPIRE', key, ARGV[3])
  end
end
return added
"""
# A claim of a seek by an accept or a decline (KEYS: the seeks' hash, the claim's own key,
# the seek's taken mark; ARGV: the seek's id, the keys' life in ms, what takes it): the seek
# taken (of two claimers on any nodes, one wins), its data kept under the claim's key for
# _UNCLAIM_SEEK, and marked taken for its owner, which may not hear of it (_REPOST_SEEK):
# "pending" until its claimer has the answer (_SETTLE_CLAIM); run again (tried again on a
# new connection), the same answer; called off before it ran, nothing.
_CLAIM_SEEK = """
local mine = redis.call('GET', KEYS[2])
if mine then
  if mine == '' then return 0 end
  return 1
end
local data = redis.call('HGET', KEYS[1], ARGV[1])
if not data then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], data, 'PX', ARGV[2])
redis.call('HSET', KEYS[3], 'claim', KEYS[2], 'what', ARGV[3], 'state', 'pending')
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 1
"""
# A claim whose answer was lost (it timed out; Redis runs it when it wakes up, or ran it),
# called off (KEYS: those of _CLAIM_SEEK, and the seek's removal mark; ARGV: the seek's id,
# the claim key's life in ms): the seek it took is not taken (its mark goes) and is put back
# on offer, unless it was removed since (cancelled: _unseek); if the claim has not run yet,
# it takes nothing when it does.
_UNCLAIM_SEEK = """
local data = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], '', 'PX', ARGV[2])
if data and data ~= '' then
  if redis.call('HGET', KEYS[3], 'claim') == KEYS[2] then redis.call('DEL', KEYS[3]) end
  if redis.call('EXISTS', KEYS[4]) == 0 then
    redis.call('HSETNX', KEYS[1], ARGV[1], data)
  end
end
return 0
"""
# A claim whose claimer has the answer, won (KEYS: the claim's key, the seek's taken mark;
# ARGV: the mark's life in ms): the seek is taken for good (the mark's state, unless its
# owner removed the seek since, and so its mark).
_SETTLE_CLAIM = """
redis.call('DEL', KEYS[1])
if redis.call('HGET', KEYS[2], 'claim') == KEYS[1] then
  redis.call('HSET', KEYS[2], 'state', 'taken')
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
return 0
"""
# A seek of this node's posted again after its bus came back (KEYS: the seeks' hash, the
# seek's taken mark; ARGV: the seek's id, its data): never one taken meanwhile (its mark's
# what and state, read instead), else posted if missing (1) or left as it is (0).
_REPOST_SEEK = """
local taken = redis.call('HMGET', KEYS[2], 'what', 'state')
if taken[1] then return taken end
return redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
"""
# A quick entry of this node queued again after its bus came back (KEYS: the queue, the
# entries' hash, the entry's taken mark; ARGV: its id, data and queue item): never one taken
# meanwhile (its mark's what and state, read instead), else queued if missing (1) or left (0).
_REPOST_QUICK = """
local taken = redis.call('HMGET', KEYS[3], 'what', 'state')
if taken[1] then return taken end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[3])
return 1
"""
# How long a seek's claim key (_CLAIM_SEEK), its taken mark while the claim is pending, and
# its removal mark (_unseek) last: longer than a claim sent may wait to run, or its calling
# off or settling to be written, in one outage.
SEEK_CLAIM_TTL_S = 600.0
# How long a seek's taken mark lasts at most once settled: its owner deletes it once it knows
# (it removes the seek: _unseek); until then, however long its bus is out, it does not post
# the seek again.
SEEK_TAKEN_TTL_S = 86400.0
# Summaries per index update and lobby message (a few hundred bytes each: a message stays
# far below the bus's 1 MiB cap, MAX_PAYLOAD, whatever the number of games).
PLIES_BATCH = 500
_QUICK_SCAN = 100  # queued entries a pairing looks at (beyond: the same player's)
# What a client is told when Redis refuses a lobby command (NodeUnavailable): the cause,
# which names Redis's address, goes to the log (Cluster._failed), never to a client.
_LOBBY_UNREACHABLE = "the cluster's lobby cannot be reached: retry soon"
# StorageError: the lock connection refused the database's server lock (a server alone took
# the database while this node was cut off): no shards until it is gone.
_LOCK_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError, StorageError)
# The caps on unfinished games count, cluster-wide, sorted sets of game ids per player and
# per address ({prefix}:open:p:{player}, {prefix}:open:a:{address}) scored by when each
# entry expires: a game's entries are added when it is admitted (_RESERVE_OPEN, before it
# is made) and when it is registered (started or restored); its owner refreshes them every
# third of this, and removes them when the game ends (or is not made after all), so an
# owner that dies leaves nothing counted longer than this.
OPEN_TTL_S = 30.0
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
    subscribers: dict[str, set[Connection]]
    lobby: Lobby

    def clock(self) -> Now: ...
    def _lock(self, game_id: str) -> asyncio.Lock: ...
    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]: ...
    async def dispatch(self, connection: Connection, message: Message) -> None: ...
    async def adopt(self, records: list[GameRecord]) -> int: ...
    def unload(self, game_id: str) -> int | None: ...
    def open_games(self) -> dict[str, tuple[list[str], list[str]]]: ...
    async def seats_of(
        self, player_id: str, game_ids: list[str], *, online: bool = True
    ) -> list[dict[str, Any]]: ...
    async def remote_presence(self, game_id: str, player_id: str, online: bool) -> None: ...
    def _lobby_push(self, event: LobbyEvent, *, seek: SeekEntry | None = None) -> None: ...
    def _remove_seek(self, seek: SeekEntry) -> None: ...
    def _subscribe(self, game_id: str, connection: Connection) -> None: ...


def new_node_id() -> str:
    return "n-" + secrets.token_hex(4)


class RemoteConnection(Connection):
    """A client connected to another node, as the owner of a game serves it: what the
    handlers send it goes back to that node, in order with everything else this node
    publishes (server/bus.py): with the request's ``done``, folded into the game event
    that answers it, or, if anything else is published first, before that."""

    def __init__(self, cluster: Cluster, envelope: dict[str, Any], bucket: TokenBucket) -> None:
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


class Cluster:
    """This node's part in the cluster: shards, forwarding, relaying events."""

    def __init__(self, server: Host, bus: RedisBus, locks: ShardLocks) -> None:
        self.server = server
        self.bus = bus
        self.locks = locks
        self.node = bus.node
        settings = server.settings
        self.claim_s = settings.claim_s
        self._lock_trouble: str | None = None  # why the lock connection last failed, if it did
        self.heartbeat_s = settings.heartbeat_s
        self.presence_ttl_s = settings.presence_ttl_s
        self.forward_timeout_s = settings.forward_timeout_s
        self.present: dict[str, Any] = {}  # live node -> its announced state
        self.owners: dict[int, str] = {}  # shard -> the node announcing it
        self.releasing: set[int] = set()
        self.taking: set[int] = set()  # locked, their games being restored: not served yet
        self.draining = False
        self.joined = False  # start() is over: /readyz says "not joined yet" until then
        self._map_changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._free_before: set[int] = set()  # shards unheld at the last claim
        self._keys: dict[Connection, str] = {}
        self._connections: dict[str, Connection] = {}
        self._key_counter = itertools.count(1)
        self._forward_ids = itertools.count(1)
        # forward id -> (its reply, the node asked, the game)
        self._pending: dict[int, tuple[asyncio.Future[dict[str, Any]], str, str]] = {}
        self.relayed: dict[str, int] = {}  # remote game -> last seq relayed here
        self._relay_owner: dict[str, str] = {}  # remote game -> the node it came from
        self._recovering: dict[str, float] = {}  # remote game -> when it was asked
        self._tasks: list[asyncio.Task[None]] = []
        self.forwarded = 0  # requests this node forwarded (metrics, bench)
        # Remote clients' frames not yet sent (RemoteConnection.post), in posting order;
        # sent before anything else this node publishes, so that nothing overtakes them.
        self._held: dict[RemoteConnection, None] = {}
        self._flush_soon: asyncio.Handle | None = None
        self._scripts: dict[str, Any] = {}  # Lua source -> the script, registered once
        # Live public games owned by other nodes, as their owners announced them: rank
        # (server/lobby.py game_rank) and summary, for the lobby and ``list``.
        self.listed: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        # This node's public live games in the index, and the ply their entry shows.
        self._indexed_ply: dict[str, int] = {}
        self._open_refreshed = 0.0  # when this node's open-game entries were last refreshed
        # This node's writes to the sets of open games and the games' indexes (_write:
        # tasks, which start in the order spawned), one at a time in that order: a game's
        # removal is never overtaken by its addition (on two connections of the pool).
        self._open_writes = asyncio.Lock()
        # Steps of writes that did not get through (Redis did not answer), by name, in
        # order, written first by the next write that does: an undo is not lost with the
        # command it undoes, which Redis may still run when it wakes up (a command sent
        # stays in its socket). One a game, seek or entry: bounded however long Redis is out.
        self._unwritten: dict[str, Step] = {}
        # Why the last command to Redis went unanswered (timed out, refused), until a
        # heartbeat gets through again: meanwhile a request that needs Redis is answered
        # unavailable at once, instead of each waiting bus_timeout_s with a connection of
        # the pool held, and this node's writes wait in _unwritten.
        self.redis_down: str | None = None
        # Nodes missing from presence while the bus was coming back (until _unseen_until):
        # their seeks are forgotten only if they are still missing after that.
        self._unseen: set[str] = set()
        self._has_beaten = False  # (its first beat finds no presence of its own)
        self._unseen_until = 0.0
        # The ids the lobby channel named during each reload of the lobby (_reload_lobby).
        self._reloading: list[set[str]] = []
        # This node's seeks taken while its bus was out whose outcome is not known yet, looked
        # at again at each heartbeat (_settle); and those whose poster is being told (_taking).
        self._unsettled: set[str] = set()
        self._settling: asyncio.Task[None] | None = None
        self._taking: set[str] = set()

    # --- life -------------------------------------------------------------------------

    async def start(self) -> None:
        """Join: subscribe, announce this node, load the cluster's seeks, claim a first
        share of the shards."""
        await self.bus.start(self._received)
        await self._heartbeat()
        try:
            await self._load_seeks()
            await self._load_games()
        except (RedisError, OSError) as exc:
            log.warning("cluster: cannot read the lobby (%s)", exc)
        try:
            await self.locks.open(self._lock_lost)
            await self._claim()
        except _LOCK_ERRORS as exc:
            log.warning("cluster: cannot take shards yet (%s); retrying", exc)
            self.locks.abandon()
        self._tasks = [
            asyncio.create_task(self._claim_loop(), name="cluster-claims"),
            asyncio.create_task(self._heartbeat_loop(), name="cluster-heartbeat"),
        ]
        self.joined = True

    async def drain(self) -> None:
        """Graceful stop: hand every shard over now (the others are told at once). The
        heartbeats go on until the shards are free: the requests in flight here are
        answered from here (the other nodes wait for this node while it is present)."""
        self.draining = True
        claims = [t for t in self._tasks if t.get_name() == "cluster-claims"]
        beats = [t for t in self._tasks if t not in claims]
        for task in claims:
            task.cancel()
        await asyncio.gather(*claims, return_exceptions=True)
        try:
            await self._release(set(self.locks.held))
        except _LOCK_ERRORS as exc:
            log.warning("cluster: releasing shards failed (%s); they drop with the connection", exc)
        await self.locks.close()
        for task in beats:
            task.cancel()
        await asyncio.gather(*beats, return_exceptions=True)
        self._tasks = []
        try:
            await self._heartbeat()
        except Exception as exc:
            log.warning("cluster: cannot announce the drain (%s)", exc)
        self._publish(self.bus.cluster_channel, {"op": "shards", "node": self.node})

    async def close(self) -> None:
        if not self.draining:
            await self.drain()
        for task in self._tasks:  # a drain cut short (--drain-timeout-s) left them running
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for future, _, _ in self._pending.values():
            if not future.done():
                future.set_exception(NodeUnavailable("this node is stopping: reconnect"))
        if self._unwritten and self.redis_down is None:  # a last try (bus_timeout_s at most)
            await self._write([], "cannot write what waited for Redis")
        await self.bus.close()

    # --- ownership ----------------------------------------------------------------------

    def serves(self, game_id: str) -> bool:
        """This node owns the game's shard (and is not handing it over)."""
        shard = shard_of(game_id)
        return shard in self.locks.held and shard not in self.releasing | self.taking

    def new_game_id(self) -> str:
        """A new game's id, in a shard this node owns (it will own the game)."""
        if not self.locks.held - self.releasing - self.taking:
            raise NodeUnavailable(
                "this node holds no games right now (the cluster is rebalancing): retry soon"
            )
        while True:
            game_id = new_game_id()
            if self.serves(game_id):
                return game_id

    def owner_of(self, game_id: str) -> str | None:
        """The node serving the game now; None while no node does: its owner is gone, or
        its shard is changing hands here (this node hands it over, or restores its games
        from the database). A shard held here but not served yet is nobody's: asking this
        node for the game's events then would ask it of itself ("catching up game X from"
        this node), before it has the game."""
        shard = shard_of(game_id)
        if shard in self.releasing or shard in self.taking:
            return None
        return self.owners.get(shard)

    async def _claim_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.claim_s)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                if not self.locks.connected:
                    if self.locks.held:  # closed under us (the server cut it, say)
                        self._lose_all(ConnectionError("the lock connection closed"))
                    await self.locks.open(self._lock_lost)
                    if self._lock_trouble is not None:
                        log.info("cluster: the lock connection is back; claiming shards")
                        self._lock_trouble = None
                await self._claim()
            except _LOCK_ERRORS as exc:
                reraise_cancel(exc)
                self._lose_all(exc)
            except Exception as exc:
                reraise_cancel(exc)
                log.exception("cluster: the claim loop failed; it runs again")

    async def _claim(self) -> None:
        """Take the fair share and the orphans; give back what is over the fair share
        while another live node is under it."""
        held = await self.locks.held_by_anyone()
        mine = self.locks.held
        serving = {n: st for n, st in self.present.items() if not st.get("draining")}
        target = math.ceil(SHARDS / len(serving.keys() | {self.node}))
        others = [len(st.get("shards", ())) for n, st in serving.items() if n != self.node]
        if len(mine) > target and any(count < target for count in others):
            extra = sorted(mine, reverse=True)[: len(mine) - target]
            await self._release(set(extra))
            return
        free = [s for s in range(SHARDS) if s not in held]
        offset = hash(self.node) % SHARDS  # nodes starting together try different shards
        free.sort(key=lambda s: (s - offset) % SHARDS)
        taken: set[int] = set()
        try:
            for shard in free:
                # Beyond the fair share: a shard its announced owner no longer locks (dead,
                # or cut off: a node announces a release before it unlocks), or that nobody
                # took for a whole period.
                orphan = (
                    shard in self._free_before or self.owners.get(shard, self.node) != self.node
                )
                if len(mine) >= target and not orphan:
                    continue
                self.taking.add(shard)
                if await self.locks.try_claim(shard):
                    taken.add(shard)
                else:
                    self.taking.discard(shard)
            self._free_before = set(free) - taken
            if taken:
                try:
                    await self._take(taken)
                except ServerError as exc:  # the games cannot be read: not ours after all
                    log.warning("cluster: cannot restore shards %s (%s)", sorted(taken), exc)
                    for shard in taken:
                        await self.locks.release(shard)
        finally:
            self.taking.clear()

    async def _take(self, shards: set[int]) -> None:
        """Restore the games of shards just taken, then tell the cluster."""
        records = await self.server.store.unfinished_games(
            lambda game_id: shard_of(game_id) in shards and game_id not in self.server.games
        )
        restored = await self.server.adopt(records)
        log.info("cluster: took shards %s (%d games)", sorted(shards), restored)
        await self._announce()
        await self._unlist_ended(shards)

    async def _unlist_ended(self, shards: set[int]) -> None:
        """Entries of the indexes of live and open games in shards just taken whose game
        is not live (open) here: its owner died after the game started or ended, before
        updating them. They leave the indexes, and the live ones every node's lobby."""
        stale: dict[str, list[str]] = {}
        try:
            for key, status in ((self._live_key, "live"), (self._open_key, "open")):
                stale[key] = [
                    game_id
                    for game_id in _names(await self.bus.client.hkeys(key))
                    if shard_of(game_id) in shards
                    and getattr(self.server.games.get(game_id), "status", None) != status
                ]
                if stale[key]:
                    await self.bus.client.hdel(key, *stale[key])
            if stale[self._open_key]:
                await self.bus.client.zrem(self._open_by_age_key, *stale[self._open_key])
        except (RedisError, OSError) as exc:
            log.warning("cluster: cannot sweep the games' indexes (%s)", exc)
            return
        for game_id in stale[self._live_key]:
            self._list_remote(game_id, None)
            self._publish(self.bus.lobby_channel, {"op": "game-", "id": game_id, "from": self.node})

    async def _release(self, shards: set[int]) -> None:
        """Hand shards over: no new requests are served for their games, the work in
        flight ends (each game's lock), the games leave memory, the locks go."""
        if not shards:
            return
        self.releasing |= shards
        try:
            for game_id in [g for g in self.server.games if shard_of(g) in shards]:
                async with self.server._lock(game_id):
                    seq = self.server.unload(game_id)
                if seq is not None and self.server.subscribers.get(game_id):
                    self.relayed[game_id] = seq
                    self._relay_owner[game_id] = self.node
                    self._followed_late(game_id)
            if not self.draining:
                await self._heartbeat()  # announced as not ours before they are free
            for shard in shards:
                await self.locks.release(shard)
        finally:
            self.releasing -= shards
        log.info("cluster: released shards %s", sorted(shards))
        if not self.draining:
            await self._announce()

    def _lock_lost(self) -> None:
        """PostgreSQL closed the lock connection: its shards are gone now."""
        if self.locks.held:
            self._lose_all(ConnectionError("PostgreSQL closed the lock connection"))
        self._wake.set()  # claim again as soon as it answers

    def _lose_all(self, exc: BaseException) -> None:
        """The lock connection failed: every shard is lost with it (fencing). Games leave
        memory at once; the claim loop reconnects and claims again."""
        lost = set(self.locks.held)
        self.locks.abandon()
        # Said once for as long as it fails the same way with nothing to drop (a server alone
        # holding the database: each claim period, 0.5 s, would say it again).
        said = not lost and str(exc) == self._lock_trouble
        self._lock_trouble = str(exc)
        log.log(
            logging.DEBUG if said else logging.ERROR,
            "cluster: lost the lock connection (%s); dropping %d shards", exc, len(lost),
        )  # fmt: skip
        for game_id in [g for g in self.server.games if shard_of(g) in lost]:
            seq = self.server.unload(game_id)
            if seq is not None and self.server.subscribers.get(game_id):
                self.relayed[game_id] = seq
                self._relay_owner[game_id] = self.node
                self._followed_late(game_id)

    async def _announce(self) -> None:
        try:
            await self._heartbeat()
        except Exception as exc:
            log.warning("cluster: cannot announce shards (%s)", exc)
        self._publish(self.bus.cluster_channel, {"op": "shards", "node": self.node})

    def adopted(self, session: GameSession) -> None:
        """This node took ``session`` from the database: its followers here, which
        followed it on the bus, get what they missed (the restored game keeps no event
        log to resume from: a snapshot), before its first event from here."""
        last = self.relayed.pop(session.id, None)
        self._relay_owner.pop(session.id, None)
        self._recovering.pop(session.id, None)
        if session.status == "live" and not session.private:
            self._indexed_ply[session.id] = -1  # its entry, as of its old owner: at the next beat
        followers = self.server.subscribers.get(session.id)
        if followers and (last is None or last < session.seq):
            frame = encode(session.snapshot(self.server.clock()))
            for connection in list(followers):
                connection.post(frame)

    # --- presence ------------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        state = {
            "shards": sorted(self.locks.held - self.releasing),
            "draining": self.draining,
            "protocol": PROTOCOL_VERSION,  # what requests forwarded here may carry
            "bus": BUS_VERSION,  # what its inbox takes
            "at": time.time(),  # (when two nodes' states name one shard, the later says)
        }
        alive = await self.bus.heartbeat(state, self.presence_ttl_s)
        if not alive and self._has_beaten:
            # Its presence expired since the last beat (a stall longer than presence_ttl_s):
            # the other nodes took it for dead and dropped its seeks and quick entries
            # (_forget_seeks_of). They are posted again, and announced to every lobby.
            log.warning("cluster: node %s was taken for gone: its seeks posted again", self.node)
            self.server._spawn(self._repost_seeks(announce=True))
        self._has_beaten = True
        await self._refresh()
        self._answered()

    async def _refresh(self) -> None:
        present = await self.bus.nodes()
        owners: dict[int, str] = {}
        # A dead node's last state names its shards until its key expires (presence_ttl_s),
        # while the node that took them over names them too: the later state is the truth
        # (a lock is held by one node at a time, and the new owner announces its shards
        # once it has them). A node of an earlier version, with no "at", counts as oldest.
        for node, state in sorted(present.items(), key=lambda item: _beat_time(item[1])):
            if node == self.node:
                continue
            for shard in state.get("shards", ()):
                owners[int(shard)] = node
        for shard in self.locks.held:
            owners[shard] = self.node
        changed = owners != self.owners or present.keys() != self.present.keys()
        gone = set(self.present) - set(present)
        self.present, self.owners = present, owners
        if time.monotonic() < self._unseen_until:
            # Redis came back without the presence keys: the nodes missing now may only
            # not have beaten yet (their seeks, posted again, would be deleted).
            self._unseen |= gone
        else:
            gone |= self._unseen - set(present)
            self._unseen = set()
            gone.discard(self.node)  # its own beats lapsed: its entries are its live ones
            if gone:
                self._forget_seeks_of(gone)
        if changed:
            self._map_changed.set()
            self._map_changed = asyncio.Event()
            self._owners_changed()

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self._heartbeat()
            except Exception as exc:
                reraise_cancel(exc)
                if isinstance(exc, _UNANSWERED):
                    self._failed(exc, "heartbeat failed")  # (said once while it lasts)
                else:
                    log.warning("cluster: heartbeat failed (%s)", exc)
            self._sweep_channels()
            self._index_plies()
            if self._unsettled and self._settling is None and self.redis_down is None:
                self._settling = self.server._spawn(self._settle())
            if time.monotonic() - self._open_refreshed >= OPEN_TTL_S / 3:
                self._refresh_open()
            now = time.monotonic()
            for game_id, asked in list(self._recovering.items()):
                if now - asked > 2 * self.heartbeat_s:  # the question or its answer was lost
                    self._recover(game_id)

    def _refresh_open(self) -> None:
        """This node's unfinished games, counted again in the caps' sets (their entries'
        lives renewed; any lost written again), after what earlier writes left undone."""
        self._open_refreshed = time.monotonic()
        games = self.server.open_games()
        add = {game_id: self._open_keys(*held) for game_id, held in games.items()}
        self.server._spawn(self._write_open(add))

    # --- Redis not answering ------------------------------------------------------------

    def _failed(self, exc: BaseException, what: str) -> None:
        """A command to Redis failed (``what`` it was for). Unanswered (``_UNANSWERED``:
        down, stalled, cut off): said once, and Redis counts as down until a heartbeat gets
        through (``redis_down``); anything else is said each time."""
        if not isinstance(exc, _UNANSWERED):
            log.warning("cluster: %s (%s)", what, exc)
            return
        if self.redis_down is None:
            log.warning(
                "cluster: Redis does not answer (%s: %s); requests that need it are answered "
                "unavailable until it does",
                what,
                exc,
            )
        self.redis_down = str(exc) or type(exc).__name__

    def _answered(self) -> None:
        """A heartbeat got through: Redis answers again. The writes left undone meanwhile
        are written, with this node's counts in the caps' sets (any skipped, written)."""
        if self.redis_down is None:
            return
        self.redis_down = None
        log.info("cluster: Redis answers again")
        self._refresh_open()

    def _check_answering(self) -> None:
        """NodeUnavailable at once while Redis does not answer (``redis_down``)."""
        if self.redis_down is not None:
            raise NodeUnavailable("the cluster's Redis does not answer: retry soon")

    def _later(self, step: Step, what: str) -> None:
        """A write that must land: an undo of what a failed command may have written (or
        may still write, run by Redis when it wakes up), a removal. Written at once if
        Redis answers, else with the first write that gets through once it does."""
        self.server._spawn(self._write([step], what))

    def _owners_changed(self) -> None:
        """Forwards waiting on a node that died, or whose game another node owns now, are
        sent again; not while the game has no owner (its owner may be draining, still
        serving it: sent again, it would be applied twice, or refused after it was
        applied). Games whose owner changed are caught up (what the old one committed
        last, the new one's restore)."""
        for future, target, game_id in list(self._pending.values()):
            if not future.done() and (
                target not in self.present
                or (game_id != "" and self.owner_of(game_id) not in (None, target))
            ):
                future.set_result({"moved": True})
        for game_id, owner in list(self._relay_owner.items()):
            if self.owner_of(game_id) != owner:
                self._recover(game_id)

    # --- forwarding: the client's node ----------------------------------------------------

    def key_of(self, connection: Connection) -> str:
        key = self._keys.get(connection)
        if key is None:
            key = self._keys[connection] = str(next(self._key_counter))
            self._connections[key] = connection
        return key

    def send_to(self, node: str, payload: dict[str, Any]) -> None:
        payload["from"] = self.node
        self._publish(self.bus.inbox(node), payload)

    def _publish(self, channel: str, payload: Any) -> None:
        """Publish, after the remote clients' frames held until now."""
        if self._held:
            self._flush()
        self.bus.publish(channel, payload)

    def held(self, connection: RemoteConnection) -> None:
        """A frame for a remote client waits (RemoteConnection.post): it goes with its
        request's outcome, or before whatever this node publishes next, or at the end of
        this turn of the event loop (a client this node serves no request of)."""
        self._held[connection] = None
        if connection.fid is None and self._flush_soon is None:
            self._flush_soon = asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_soon = None
        held, self._held = self._held, {}
        for connection in held:
            if connection.outgoing or connection.follows:
                frames, connection.outgoing = connection.outgoing, []
                payload: dict[str, Any] = {"op": "out", "conn": connection.key, "frames": frames}
                if connection.follows:
                    payload["follow"], connection.follows = connection.follows, []
                payload["from"] = self.node
                self.bus.publish(self.bus.inbox(connection.origin), payload)

    async def forward(self, connection: Connection, message: Message) -> None:
        """Serve ``message`` at its game's owner; return once it is served there."""
        game_id: str = message.game_id  # type: ignore[attr-defined]
        player = connection.player
        assert player is not None
        deadline = time.monotonic() + self.forward_timeout_s
        # The client's own bytes when it sent this request (validated here, decoded again
        # by the owner, which validates what it serves): not encoded again, except without
        # its seq for an owner of an older version (a rolling upgrade; PROTOCOL.md).
        sent = connection.request_frame
        frame = plain = sent[1] if sent is not None and sent[0] is message else encode(message)
        if getattr(message, "seq", None) is not None:  # a game request's (PROTOCOL.md)
            plain = encode(dataclasses.replace(message, seq=None))  # type: ignore[type-var]
        unanswered = False  # a copy went to an owner that never answered
        while True:
            if self.serves(game_id):
                await self.server.dispatch(connection, message)  # it came here meanwhile
                return
            owner = self.owner_of(game_id)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if unanswered:  # sent, and maybe served: the client must look before resending
                    raise NodeUnavailable(
                        f"the node serving game {game_id} did not answer in time: the outcome "
                        "is unknown; resume the game to see whether it was applied",
                        game_id,
                    )
                raise NodeUnavailable(
                    f"the node serving game {game_id} does not answer: retry soon", game_id
                )
            if owner is None or owner == self.node:
                changed = self._map_changed
                self._wake.set()
                try:
                    await asyncio.wait_for(changed.wait(), min(remaining, self.heartbeat_s))
                except TimeoutError:
                    await self._refresh_quietly()
                continue
            if not self.bus.subscribed(game_id) and (
                game_id in connection.games or isinstance(message, _FOLLOWING)
            ):
                # Its events (and the reply riding on them) reach this node from now on.
                await self._follow_channel(game_id, min(remaining, self.heartbeat_s))
            fid = next(self._forward_ids)
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self._pending[fid] = (future, owner, game_id)
            tokens = connection.bucket.tokens
            self.send_to(
                owner,
                {
                    "op": "req",
                    "fid": fid,
                    "conn": self.key_of(connection),
                    "player": [player.player_id, player.name, player.bot, player.address],
                    "watching": sorted(connection.watching),
                    "tokens": tokens,
                    "frame": frame if self._takes_seq(owner) else plain,
                    "sub": self.bus.subscribed(game_id),
                },
            )
            self.forwarded += 1
            try:
                done = await asyncio.wait_for(future, remaining)
            except TimeoutError:
                unanswered = True
                continue
            finally:
                self._pending.pop(fid, None)
            if done.get("moved"):  # shards changing hands: once the map says where
                changed = self._map_changed
                try:
                    await asyncio.wait_for(changed.wait(), min(remaining, 0.05))
                except TimeoutError:
                    await self._refresh_quietly()
                continue
            spent = float(done.get("spent", 0.0))
            if spent > 0:
                connection.bucket.charge(time.monotonic(), spent, owe=True)
            return

    def takes_follows_in_out(self, node: str) -> bool:
        """``node`` reads the follows an "out" message carries (BUS_VERSION 2)."""
        state = self.present.get(node) or {}
        return int(state.get("bus", 1)) >= 2

    def _takes_seq(self, node: str) -> bool:
        """``node`` takes the ``seq`` of game requests: a node of an older version (a
        rolling upgrade) announces no protocol, and would refuse the field (bad_field)."""
        state = self.present.get(node) or {}
        return int(state.get("protocol", 1)) >= SEQ_SINCE_VERSION

    async def _follow_channel(self, game_id: str, timeout: float) -> bool:
        """Subscribe to the game's channel; True once Redis confirmed it in ``timeout``."""
        try:
            await asyncio.wait_for(self.bus.follow_game(game_id), timeout)
        except TimeoutError:
            return False
        return True

    def _followed_late(self, game_id: str) -> None:
        """This node has followers of a remote game it did not subscribe to beforehand:
        subscribe, then catch up on what was published meanwhile."""
        if self.bus.subscribed(game_id) or game_id in self.server.games:
            return

        async def subscribe() -> None:
            if await self._follow_channel(game_id, self.forward_timeout_s):
                self._recover(game_id)

        self.server._spawn(subscribe())

    def _sweep_channels(self) -> None:
        """Unsubscribe from the games this node no longer follows (no follower here, no
        request about it in flight) or owns now."""
        asked = {game_id for _, _, game_id in self._pending.values()}
        for game_id in list(self.bus.games):
            if game_id in asked:
                continue
            if game_id in self.server.games or not self.server.subscribers.get(game_id):
                self.bus.unfollow_game(game_id)
                if game_id not in self.server.games:
                    self._forget_relay(game_id)

    def _forget_relay(self, game_id: str) -> None:
        self.relayed.pop(game_id, None)
        self._relay_owner.pop(game_id, None)
        self._recovering.pop(game_id, None)

    def evicted(self, game_id: str) -> None:
        """A finished game of this node leaves memory: its followers on other nodes stop
        following it (as they do here)."""
        self._publish(self.bus.game_channel(game_id), [self.node, None, None, "", None, None])

    async def _refresh_quietly(self) -> None:
        try:
            await self._refresh()
        except Exception as exc:
            log.warning("cluster: cannot read presence (%s)", exc)

    def disconnected(self, connection: Connection) -> None:
        """A client of this node left: forget its key; the owners of the remote games it
        holds a seat in hear that it is away."""
        key = self._keys.pop(connection, None)
        if key is not None:
            self._connections.pop(key, None)
        player = connection.player
        for game_id in connection.games:
            if game_id in self.server.games:
                continue
            followers = self.server.subscribers.get(game_id)
            if followers is not None and not followers:
                del self.server.subscribers[game_id]
                self.relayed.pop(game_id, None)
                self._relay_owner.pop(game_id, None)
            if player is None or game_id in connection.watching or player.online:
                continue
            owner = self.owner_of(game_id)
            if owner is not None and owner != self.node:
                self.send_to(owner, {"op": "away", "game": game_id, "player": player.player_id})

    # --- forwarding: the owner -----------------------------------------------------------------

    async def _serve(self, envelope: dict[str, Any]) -> None:
        settings = self.server.settings
        tokens = float(envelope.get("tokens", settings.burst))
        bucket = TokenBucket(settings.rate_per_s, settings.burst, tokens, time.monotonic())
        proxy = RemoteConnection(self, envelope, bucket)
        moved = False
        rid: int | None = None
        try:
            message = decode(envelope["frame"])
            rid = getattr(message, "rid", None)
            if not self.serves(message.game_id):  # type: ignore[attr-defined]
                moved = True
            else:
                await self.server.dispatch(proxy, message)
        except ProtocolError as exc:  # a frame this node cannot read: the rid the codec read
            proxy.send_error(exc.code, exc.message, rid if rid is not None else exc.rid)
        except ServerError as exc:
            proxy.send_error(exc.code, exc.message, rid, exc.game_id)
        except Exception:
            log.exception("serving a request forwarded by %s failed", proxy.node)
            proxy.send_error(ErrorCode.INTERNAL, "internal server error", rid)
        spent = max(0.0, tokens - bucket.tokens)
        self._held.pop(proxy, None)
        frames, proxy.outgoing = proxy.outgoing, []
        if proxy.folded and not frames and not spent and not moved:
            return  # its node took the outcome from the game's event
        done = {"op": "done", "fid": envelope["fid"], "moved": moved, "spent": spent}
        done["conn"] = proxy.key
        if frames:
            done["frames"] = frames
        self.send_to(proxy.origin, done)

    def published(
        self, session: GameSession, seq: int, frame: bytes, reply_to: Connection | None
    ) -> None:
        """An event of a game this node owns is committed (and sent to its followers
        here): on the game's channel for the other nodes' followers. If it answers a
        request forwarded by a node that receives the channel, the requester's frames
        (its acknowledgement with ``rid``) and the request's outcome ride with it: one
        message instead of a reply and a ``done``."""
        target, reply, fid = "", None, None
        if isinstance(reply_to, RemoteConnection):
            target = f"{reply_to.node}/{reply_to.key}"
            if reply_to.subscribed and reply_to.fid is not None and reply_to.outgoing:
                reply, reply_to.outgoing = reply_to.outgoing, []
                self._held.pop(reply_to, None)
                reply_to.folded = True
                fid = reply_to.fid
        self._publish(
            self.bus.game_channel(session.id), [self.node, seq, frame, target, reply, fid]
        )

    # --- the bus: what this node receives --------------------------------------------------

    def _received(self, kind: str, name: str, payload: Any) -> None:
        if kind == "game":
            self._relay(name, payload)
        elif kind == "inbox":
            self._inbox(payload)
        elif kind == "cluster":
            if payload.get("op") == "unpublished":
                self._publications_lost(str(payload.get("node")))
            elif payload.get("node") != self.node:
                self._wake.set()  # shards changed hands: claim (and refresh) now
                asyncio.get_running_loop().create_task(self._refresh_quietly())
        elif kind == "republishing":  # what this node published lately may be lost
            self._publish(self.bus.cluster_channel, {"op": "unpublished", "node": self.node})
        elif kind == "lobby":
            if payload.get("from") != self.node:
                self._lobby(payload)
        elif kind == "reconnected":  # (Redis restarted, or the subscriber's connection died)
            self._unseen_until = time.monotonic() + self.presence_ttl_s
            for game_id in list(self._relay_owner):
                self._recover(game_id)
            self.server._spawn(self._repost_seeks())
            self.server._spawn(self._reload_lobby())

    def _publications_lost(self, node: str) -> None:
        """``node``'s publisher lost its connection unseen for a while (its PING went
        unanswered): the events of its games relayed here catch up by seq, as after an
        outage."""
        if node == self.node:
            return
        for game_id, owner in list(self._relay_owner.items()):
            if owner == node:
                self._recover(game_id)

    def _relay(self, game_id: str, payload: list[Any]) -> None:
        """An event of a game owned elsewhere: to this node's followers, in order. The
        requester's reply may ride on it (``reply``: its frames, ``fid``: the forwarded
        request it ends); ``seq`` None: the finished game left its owner's memory."""
        node, seq, frame, target, reply, fid = payload
        mine = f"{self.node}/"
        skip = self._connections.get(target[len(mine) :]) if target.startswith(mine) else None
        if reply is not None and target.startswith(mine):
            if skip is not None:
                for reply_frame in reply:
                    skip.post(reply_frame)
            pending = self._pending.get(fid)
            if pending is not None and not pending[0].done():
                pending[0].set_result({"folded": True})
        if node == self.node or game_id in self.server.games:
            return
        if seq is None:
            self._evicted(game_id)
            return
        followers = self.server.subscribers.get(game_id)
        if not followers:
            return
        last = self.relayed.get(game_id)
        if game_id in self._recovering:
            return  # the catch-up being fetched includes it
        if last is not None and seq > last + 1:
            log.debug("cluster: gap in %s: %s after %s", game_id, seq, last)
            self._recover(game_id)
            return
        if last is not None and seq <= last:
            return
        self.relayed[game_id] = seq
        self._relay_owner[game_id] = node
        for connection in list(followers):
            if connection is not skip:
                connection.post(frame)

    def _evicted(self, game_id: str) -> None:
        """A finished remote game left its owner's memory: its followers here stop
        following it, as the owner's own did (server/game_events.py ``_evict``)."""
        for connection in self.server.subscribers.pop(game_id, ()):
            connection.games.discard(game_id)
            connection.watching.discard(game_id)
        self._forget_relay(game_id)
        self.bus.unfollow_game(game_id)

    def _recover(self, game_id: str) -> None:
        """Ask the game's owner for the events after the last one relayed here."""
        if game_id in self.server.games or not self.server.subscribers.get(game_id):
            self._relay_owner.pop(game_id, None)
            return
        owner = self.owner_of(game_id)
        self._recovering[game_id] = time.monotonic()
        if owner is None:
            return  # asked again when an owner is announced
        self._relay_owner[game_id] = owner
        log.info("cluster: catching up game %s from %s", game_id, owner)
        followers = self.server.subscribers.get(game_id, ())
        # The players here (a new owner restored the game with every seat away).
        present = {c.player_id for c in followers if game_id not in c.watching and c.player_id}
        self.send_to(
            owner,
            {
                "op": "since",
                "game": game_id,
                "since": self.relayed.get(game_id, 0),
                "present": sorted(present),
            },
        )

    def _inbox(self, payload: dict[str, Any]) -> None:
        op = payload.get("op")
        if op == "out":
            for follow in payload.get("follow", ()):  # (before its frames: its seated)
                self._follow(follow | {"conn": payload["conn"], "from": payload["from"]})
            connection = self._connections.get(payload["conn"])
            if connection is not None:
                for frame in payload["frames"]:
                    connection.post(frame)
            else:
                log.warning("cluster: a reply from %s for a client gone", payload["from"])
        elif op == "done":
            connection = self._connections.get(payload.get("conn", ""))
            if connection is not None:  # the requester's frames (what no event carried)
                for frame in payload.get("frames", ()):
                    connection.post(frame)
            pending = self._pending.get(payload["fid"])
            if pending is not None and not pending[0].done():
                pending[0].set_result(payload)
        elif op == "follow":
            self._follow(payload)
        elif op == "req":
            self.server._spawn(self._serve(payload))
        elif op == "seats":
            self.server._spawn(self._serve_seats(payload))
        elif op == "since":
            self._send_since(payload)
        elif op == "frames":
            self._caught_up(payload)
        elif op == "quick-taken":  # paired on another node
            entry = self.server.lobby.seeks.get(payload.get("id", ""))
            if entry is not None and entry.quick:
                self.server._remove_seek(entry)
        elif op == "away":
            self.server._spawn(
                self.server.remote_presence(payload["game"], payload["player"], False)
            )

    def _follow(self, payload: dict[str, Any]) -> None:
        connection = self._connections.get(payload["conn"])
        game_id = payload["game"]
        if connection is None or connection.closed:
            return
        connection.games.add(game_id)
        if payload.get("watching"):
            connection.watching.add(game_id)
        self.server.subscribers.setdefault(game_id, set()).add(connection)
        if game_id not in self.relayed or game_id not in self._relay_owner:
            self.relayed[game_id] = int(payload["seq"])
        self._relay_owner[game_id] = payload["from"]
        self._followed_late(game_id)

    def _send_since(self, payload: dict[str, Any]) -> None:
        game_id = payload["game"]
        session = self.server.games.get(game_id)
        reply: dict[str, Any] = {"op": "frames", "game": game_id}
        if session is None or not self.serves(game_id):
            reply["moved"] = True
        else:
            since = int(payload["since"])
            frames = session.events_since(since) if since > 0 else None
            if frames is None:
                frames = [encode(session.snapshot(self.server.clock()))]
            else:
                reply["first"] = since + 1  # the seq of frames[0]: events, not a snapshot
            reply.update(frames=frames, seq=session.seq)
            for player_id in payload.get("present", ()):
                self.server._spawn(self.server.remote_presence(game_id, player_id, True))
        log.info(
            "cluster: since %s for %s: %s", payload["since"], game_id, reply.get("seq", "moved")
        )
        self.send_to(payload["from"], reply)

    def _caught_up(self, payload: dict[str, Any]) -> None:
        game_id = payload["game"]
        log.debug("cluster: caught up %s: %s", game_id, payload.get("seq", "moved"))
        if payload.get("moved"):
            return  # still recovering: asked again once the owners change
        self._recovering.pop(game_id, None)
        self._relay_owner[game_id] = payload["from"]
        followers = self.server.subscribers.get(game_id, ())
        if game_id in self.server.games:
            return
        # Only what was not relayed yet: an answer to an earlier ask may come after events
        # relayed since (two catch-ups crossing), and every event reaches a client once.
        last, seq = self.relayed.get(game_id, 0), int(payload["seq"])
        frames = payload["frames"]
        if "first" in payload:
            frames = frames[max(0, last + 1 - int(payload["first"])) :]
        elif seq <= last:
            frames = []  # a snapshot no newer than the events relayed
        for frame in frames:
            for connection in list(followers):
                connection.post(frame)
        self.relayed[game_id] = max(last, seq)

    # --- the lobby: the cluster's seeks ------------------------------------------------------

    @property
    def _seeks_key(self) -> str:
        return f"{self.bus.prefix}:seeks"

    def _seek_data(self, seek: SeekEntry, connection: Connection) -> dict[str, Any]:
        player = connection.player
        assert player is not None
        return {
            "id": seek.id,
            "game": seek.game,
            "params": dict(seek.params),
            "clock": None if seek.control is None else seek.control.to_dict(),
            "owner": seek.owner.to_dict(),
            "created_at": seek.created_at,
            "color": seek.color,
            "opponents": seek.opponents,
            "to": seek.to,
            "node": self.node,
            "conn": self.key_of(connection),
            "player": [player.player_id, player.name, player.bot, player.address],
        }

    async def post_seek(self, seek: SeekEntry, connection: Connection) -> None:
        """A seek posted here: in the cluster's seeks (what an accepter claims), and on
        every node's lobby."""
        data = self._seek_data(seek, connection)
        self._check_answering()
        try:
            await self.bus.client.hset(self._seeks_key, seek.id, pack(data))
        except (RedisError, OSError) as exc:
            self._failed(exc, f"cannot post seek {seek.id}")
            self._later(self._unseek(seek.id), f"cannot remove seek {seek.id}")  # (it was sent)
            raise NodeUnavailable(_LOBBY_UNREACHABLE) from exc
        self._publish(self.bus.lobby_channel, {"op": "add", "seek": data, "from": self.node})

    async def claim_seek(self, seek_id: str, taken: dict[str, Any]) -> bool:
        """Take a seek for a game (_CLAIM_SEEK: of two accepters on any nodes, one wins),
        marked taken with ``taken`` (the game made of it, or who declined it) for its
        owner, whose bus may be out (it then hears of it from the mark: _missed_take).
        NodeUnavailable if Redis does not answer: the claim, which Redis may run when it
        wakes up, is called off once it answers (_UNCLAIM_SEEK): a seek nobody got is back
        on offer, not listed on every node with nothing left to accept."""
        self._check_answering()
        claim = f"{self.bus.prefix}:seek-claim:{secrets.token_hex(8)}"
        mark = self._seek_taken_key(seek_id)
        keys = [self._seeks_key, claim, mark]
        what = pack(taken | {"node": self.node})
        ttl = int(SEEK_CLAIM_TTL_S * 1000)
        try:
            won = await self._script(_CLAIM_SEEK)(keys=keys, args=[seek_id, ttl, what])
        except (RedisError, OSError) as exc:
            self._failed(exc, f"cannot claim seek {seek_id}")
            if isinstance(exc, _UNANSWERED):
                gone = self._seek_gone_key(seek_id)

                def call_off(pipe: Any) -> None:
                    pipe.eval(_UNCLAIM_SEEK, 4, *keys, gone, seek_id, ttl)

                self._later((claim, call_off, math.inf), f"cannot call off claim of {seek_id}")
            raise NodeUnavailable(_LOBBY_UNREACHABLE) from exc
        if won:  # (its answer came: nothing to give back)

            def settle(pipe: Any) -> None:
                pipe.eval(_SETTLE_CLAIM, 2, claim, mark, int(SEEK_TAKEN_TTL_S * 1000))

            self._later((claim, settle, math.inf), f"cannot settle claim of {seek_id}")
        return bool(won)

    def seek_removed(self, seek_id: str, *, posted_here: bool = False) -> None:
        """A seek is gone (accepted, cancelled, its owner left): from every node's lobby
        (``posted_here``: by its owner, which knows it now: its taken mark goes too)."""
        self._later(self._unseek(seek_id, posted_here), f"cannot remove seek {seek_id}")
        self._publish(self.bus.lobby_channel, {"op": "remove", "id": seek_id, "from": self.node})

    def _unseek(self, seek_id: str, forget_taken: bool = False) -> Step:
        """The step of a write that takes a seek out of the cluster's seeks for good (its
        removal marked: a claim called off does not put it back, _UNCLAIM_SEEK); and, by
        its owner (``forget_taken``), its taken mark, which only the owner reads."""

        def unseek(pipe: Any) -> None:
            pipe.hdel(self._seeks_key, seek_id)
            pipe.set(self._seek_gone_key(seek_id), b"1", px=int(SEEK_CLAIM_TTL_S * 1000))
            if forget_taken:
                pipe.delete(self._seek_taken_key(seek_id))

        return f"seek:{seek_id}", unseek, math.inf

    def _seek_gone_key(self, seek_id: str) -> str:
        return f"{self.bus.prefix}:seek-gone:{seek_id}"

    def _seek_taken_key(self, seek_id: str) -> str:
        return f"{self.bus.prefix}:seek-taken:{seek_id}"

    async def _load_seeks(self) -> None:
        """The other live nodes' seeks, in this node's lobby. The seeks and quick entries
        of this node's name are its earlier life's (killed, then started again, maybe
        before its presence expired): they go now. Those of nodes not present go if they
        are still missing after presence_ttl_s (``_unseen``, as after a bus outage: they
        may only not have beaten yet; or they died with nobody left to see it)."""
        named: set[str] = set()
        for data in await self._entries():
            node = str(data.get("node"))
            named.add(node)
            if node in self.present and node != self.node and not data.get("quick"):
                self._add_seek(data)
        await self._drop_entries_of({self.node})
        self._unseen |= named - set(self.present) - {self.node}
        self._unseen_until = max(self._unseen_until, time.monotonic() + self.presence_ttl_s)

    # --- the caps on unfinished games, cluster-wide --------------------------------------

    def _open_keys(self, players: Iterable[str], addresses: Iterable[str]) -> list[str]:
        prefix = self.bus.prefix
        return [f"{prefix}:open:p:{p}" for p in players] + [
            f"{prefix}:open:a:{a}" for a in addresses
        ]

    def opened(self, game_id: str, players: Iterable[str], addresses: Iterable[str]) -> None:
        """An unfinished game of this node counts in its players' and addresses' caps (if
        Redis does not answer, from the first refresh once it does)."""
        self.server._spawn(self._write_open({game_id: self._open_keys(players, addresses)}))

    def closed_game(
        self, game_id: str, players: Iterable[str], addresses: Iterable[str]
    ) -> asyncio.Task[None]:
        """A game of this node ended (or was not made after all): it no longer counts. The
        write, after every one asked before it, is done when the task returned is."""
        return self.server._spawn(
            self._write_open({}, {game_id: self._open_keys(players, addresses)})
        )

    def not_made(
        self, game_id: str, players: Iterable[str], addresses: Iterable[str]
    ) -> asyncio.Task[None]:
        """A game of this node was not made after all (the store refused it, say): nothing
        of it stays in Redis, neither in the caps' sets nor in the open games' index. The
        write, after every one asked before it, is done when the task returned is (or, if
        Redis does not answer, once it does)."""

        def unlist(pipe: Any) -> None:
            pipe.hdel(self._open_key, game_id)
            pipe.zrem(self._open_by_age_key, game_id)

        removed = self._open_keys(players, addresses)
        more: list[Step] = [(f"index:{game_id}", unlist, math.inf)]
        return self.server._spawn(self._write_open({}, {game_id: removed}, more))

    async def _write_open(
        self,
        add: dict[str, list[str]],
        remove: dict[str, list[str]] | None = None,
        more: list[Step] | None = None,
    ) -> None:
        """Count games in the caps' sets (``add``: game -> its keys) and count them no more
        (``remove``), then ``more`` steps, in one write (``_write``). A count is written
        again by the next refresh (every third of OPEN_TTL_S) if this write fails; a removal
        by the next write that gets through, as long as it matters (an entry written late,
        by Redis waking up, expires at most OPEN_TTL_S after it was sent)."""
        keys: dict[str, list[str]] = {}
        for game_id, game_keys in add.items():
            for key in game_keys:
                keys.setdefault(key, []).append(game_id)

        def count(pipe: Any) -> None:
            now = time.time()  # when written, not when asked (it may wait for Redis)
            for key, members in keys.items():
                pipe.zremrangebyscore(key, "-inf", now)  # a dead owner's entries
                pipe.zadd(key, dict.fromkeys(members, now + OPEN_TTL_S))
                pipe.pexpire(key, int(OPEN_TTL_S * 1000))

        steps: list[Step] = [("count", count, 0.0)] if keys else []
        until = time.time() + OPEN_TTL_S
        for game_id, game_keys in (remove or {}).items():
            for key in game_keys:
                steps.append((f"uncount:{key}:{game_id}", _zrem(key, game_id), until))
        await self._write([*steps, *(more or ())], "cannot count open games")

    async def _write(self, steps: list[Step], what: str) -> None:
        """``steps`` in one pipeline, after the writes this node asked before (one at a
        time, in order), and first the steps earlier writes left undone that still matter.
        If Redis does not answer (or is down: nothing is sent then), the steps that still
        matter wait for the next write that gets through (the heartbeat's refresh once Redis
        answers again: ``_answered``)."""
        async with self._open_writes:  # (the only place _unwritten changes)
            now = time.time()
            waiting = {name: step for name, step in self._unwritten.items() if step[2] > now}
            self._unwritten = {}
            for step in steps:
                waiting.pop(step[0], None)  # (then after the steps asked before it)
                waiting[step[0]] = step
            if not waiting:
                return
            if self.redis_down is None:
                try:
                    async with self.bus.client.pipeline(transaction=False) as pipe:
                        for _, add, _ in waiting.values():
                            add(pipe)
                        await pipe.execute()
                    return
                except (RedisError, OSError) as exc:
                    reraise_cancel(exc)
                    self._failed(exc, what)
                    if not isinstance(exc, _UNANSWERED):
                        return  # refused: written again, it would be refused again
            self._unwritten = {name: step for name, step in waiting.items() if step[2] > now}

    async def reserve_open(
        self,
        game_id: str | None,
        player: tuple[str, int, set[str]],
        address: tuple[str, int, set[str]] | None,
    ) -> tuple[str | None, set[str]]:
        """The caps on unfinished games of a player and of an address (each its id, its cap
        and the games this node counts there) over every node's games, checked and, for
        ``game_id`` (None: a check alone), taken in one script run (_RESERVE_OPEN): of
        requests at once on any nodes, those past the cap see the others' games. Returns
        the cap refused ("player", "address") or None, and where the game is a new entry
        (in "player", "address"); when Redis does not answer (within bus_timeout_s, or is
        down), None: the node's own count holds, and the game may be a new entry anywhere
        (the script was sent: Redis may run it when it wakes up)."""
        holders = [("player", player)] + ([] if address is None else [("address", address)])
        if self.redis_down is not None:
            return None, set()  # (nothing sent)
        keys = self._open_keys([player[0]], [] if address is None else [address[0]])
        now = time.time()
        args: list[Any] = [now, now + OPEN_TTL_S, int(OPEN_TTL_S * 1000), game_id or ""]
        for _, (_, cap, counted) in holders:
            args += [cap, len(counted), *counted]
        try:
            answer = await self._script(_RESERVE_OPEN)(keys=keys, args=args)
        except (RedisError, OSError) as exc:
            self._failed(exc, "cannot count the open games")
            return None, set() if game_id is None else {kind for kind, _ in holders}
        if answer[0]:
            return holders[int(answer[0]) - 1][0], set()
        if game_id is None:
            return None, set()
        return None, {kind for (kind, _), new in zip(holders, answer[1:], strict=True) if new}

    async def open_games_of(self, player_id: str) -> set[str]:
        """The unfinished games of a player on every node (entries not expired); none when
        Redis does not answer."""
        if self.redis_down is not None:
            return set()
        now = time.time()
        try:
            games = await self.bus.client.zrangebyscore(
                self._open_keys([player_id], [])[0], now, "+inf"
            )
        except (RedisError, OSError) as exc:
            self._failed(exc, "cannot read the open games")
            return set()
        return _names(games)

    async def remote_seats(self, player_id: str, here: set[str]) -> list[dict[str, Any]]:
        """``welcome.games`` from other nodes: the player's seats in unfinished games
        owned elsewhere (found in its open-games set), asked of their owners at once; a
        game whose owner does not answer within forward_timeout_s is left out (the
        client resumes it by id)."""
        games = await self.open_games_of(player_id)
        by_owner: dict[str, list[str]] = {}
        for game_id in sorted(games - here):
            owner = self.owner_of(game_id)
            if owner is not None and owner != self.node:
                by_owner.setdefault(owner, []).append(game_id)
        if not by_owner:
            return []
        loop = asyncio.get_running_loop()
        asked: dict[int, asyncio.Future[dict[str, Any]]] = {}
        for owner, game_ids in by_owner.items():
            fid = next(self._forward_ids)
            asked[fid] = loop.create_future()
            self._pending[fid] = (asked[fid], owner, game_ids[0])
            self.send_to(owner, {"op": "seats", "fid": fid, "player": player_id, "games": game_ids})
        try:
            await asyncio.wait(asked.values(), timeout=self.forward_timeout_s)
        finally:
            for fid in asked:
                self._pending.pop(fid, None)
        seats: list[dict[str, Any]] = []
        for future in asked.values():
            if future.done() and not future.cancelled() and future.exception() is None:
                seats += future.result().get("seats", ())  # (none if the owner changed)
        return seats

    async def _serve_seats(self, payload: dict[str, Any]) -> None:
        """The owner's part of ``remote_seats`` (and of _missed_take, with each game's
        snapshot; "moved" if a game is not served here): not marked online here (the
        client's resume does that, and its node then reports its leaving)."""
        player_id, game_ids = str(payload["player"]), [str(g) for g in payload["games"]]
        done = {"op": "done", "fid": payload["fid"]}
        if not all(self.serves(g) for g in game_ids):
            done["moved"] = True
        try:
            seats = await self._seats_here(
                player_id, game_ids, online=False, snapshot=bool(payload.get("snapshot"))
            )
        except ServerError as exc:
            log.warning("cluster: cannot list the seats of %s (%s)", player_id, exc.message)
            seats = []
        self.send_to(payload["from"], done | {"seats": seats})

    async def _seats_here(
        self, player_id: str, game_ids: list[str], *, online: bool, snapshot: bool = True
    ) -> list[dict[str, Any]]:
        """The player's seats in those of ``game_ids`` this node serves (``seats_of``),
        each with the game's snapshot (``snapshot``; its seq then the seat's)."""
        seats = await self.server.seats_of(
            player_id, [g for g in game_ids if self.serves(g)], online=online
        )
        if snapshot:
            now = self.server.clock()
            for seat in seats:
                frame = self.server.games[seat["game_id"]].snapshot(now)
                seat.update(seq=frame.seq, snapshot=encode(frame))
        return seats

    # --- the lobby: the cluster's live games -------------------------------------------------

    @property
    def _live_key(self) -> str:
        return f"{self.bus.prefix}:live"

    @property
    def _open_key(self) -> str:
        return f"{self.bus.prefix}:open-games"

    @property
    def _open_by_age_key(self) -> str:
        """The open games' ids, scored by their creation (``list open`` pages it)."""
        return f"{self.bus.prefix}:open-games:by-age"

    def game_listed(self, session: GameSession, live: bool) -> None:
        """A public game of this node started (``live``) or ended: in the cluster's index
        of live games, and in every node's lobby; out of the index of open games."""
        if live:
            data = {"rank": list(game_rank(session)), "summary": session.summary()}
            self._indexed_ply[session.id] = session.state.ply()
            self.server._spawn(self._index_game(session.id, pack(data)))
            message = {"op": "game+", "id": session.id, "data": data, "from": self.node}
        else:
            self._indexed_ply.pop(session.id, None)
            self.server._spawn(self._index_game(session.id, None))
            message = {"op": "game-", "id": session.id, "from": self.node}
        self._publish(self.bus.lobby_channel, message)

    def _index_plies(self) -> None:
        """Every heartbeat, not every move: this node's live games whose ply moved since
        their entry was written get a new summary, in the index (a script run) and in
        every node's lobby (a message) per PLIES_BATCH games, without a lobby event (as on
        one node, a game's moves change only its summary)."""
        changed: dict[str, dict[str, Any]] = {}
        for game_id, ply in list(self._indexed_ply.items()):
            session = self.server.games.get(game_id)
            if session is None or session.status != "live":  # handed over, or ended
                del self._indexed_ply[game_id]
            elif session.state.ply() != ply:
                self._indexed_ply[game_id] = session.state.ply()
                changed[game_id] = {"rank": list(game_rank(session)), "summary": session.summary()}
                if len(changed) == PLIES_BATCH:
                    self._send_plies(changed)
                    changed = {}
        if changed:
            self._send_plies(changed)

    def _send_plies(self, changed: dict[str, dict[str, Any]]) -> None:
        self.server._spawn(self._write_plies(changed))
        self._publish(self.bus.lobby_channel, {"op": "games~", "games": changed, "from": self.node})

    async def _write_plies(self, changed: dict[str, dict[str, Any]]) -> None:
        script = self._script(_REINDEX)
        entries = [x for game_id, data in changed.items() for x in (game_id, pack(data))]
        try:
            await script(keys=[self._live_key], args=entries)
        except (RedisError, OSError) as exc:
            log.warning("cluster: cannot index %d games' plies (%s)", len(changed), exc)

    def open_listed(self, session: GameSession) -> None:
        """A public game of this node waits for its opponent (created, or restored): in
        the cluster's index of open games (``list open``) until it starts or ends (if Redis
        does not answer, once it does, if it still waits then)."""

        def index(pipe: Any) -> None:
            if self.server.games.get(session.id) is session and session.status == "open":
                pipe.hset(self._open_key, session.id, pack(session.summary()))
                pipe.zadd(self._open_by_age_key, {session.id: session.created_at})

        step: Step = (f"index:{session.id}", index, math.inf)
        self.server._spawn(self._write([step], f"cannot index game {session.id}"))

    async def open_elsewhere(self, count: int) -> list[dict[str, Any]]:
        """The open public games of the other nodes among the ``count`` oldest of the
        index. The index's games of this node are its open public games, which ``list``
        takes from memory first: a page of ``count`` needs no more of the index than that,
        however many games the cluster holds open (it read the whole index: 17 kB a
        request for a page of one, with 100 games open on another node)."""
        if self.redis_down is not None:
            return []
        script = self._script(_OPEN_PAGE)
        try:
            entries = await script(keys=[self._open_by_age_key, self._open_key], args=[count])
        except (RedisError, OSError) as exc:
            self._failed(exc, "cannot read the open games' index")
            return []
        summaries = [
            unpack(data if isinstance(data, bytes) else data.encode())
            for data in entries
            if data is not None
        ]
        return [s for s in summaries if s["game_id"] not in self.server.games]

    async def _index_game(self, game_id: str, data: bytes | None) -> None:
        """``data`` for the game in the live games' index, and out of the open games';
        None: out of both (if Redis does not answer, once it does)."""

        def index(pipe: Any) -> None:
            if data is not None:
                pipe.hset(self._live_key, game_id, data)
            pipe.hdel(self._open_key, game_id)
            pipe.zrem(self._open_by_age_key, game_id)
            if data is None:
                pipe.hdel(self._live_key, game_id)

        await self._write([(f"index:{game_id}", index, math.inf)], f"cannot index game {game_id}")

    def _list_remote(self, game_id: str, data: dict[str, Any] | None) -> None:
        if data is None:
            if self.listed.pop(game_id, None) is None:
                return
            event = LobbyEvent(kind="game_removed", game_id=game_id)
        else:
            self.listed[game_id] = (tuple(data["rank"]), data["summary"])
            event = LobbyEvent(kind="game_added", game=data["summary"])
        self.server._lobby_push(event)

    async def _load_games(self) -> None:
        entries = await self.bus.client.hgetall(self._live_key)
        for game_id, data in entries.items():
            name = game_id.decode() if isinstance(game_id, bytes) else str(game_id)
            if name not in self.server.games:
                self._list_remote(name, unpack(data if isinstance(data, bytes) else data.encode()))

    async def _reload_lobby(self) -> None:
        """After the bus came back: what the lobby channel said while this node heard
        nothing (the other nodes' seeks posted or taken, their public games started or
        ended) is read from Redis, and this node's lobby lists what Redis holds of the
        other nodes'. What the channel says while Redis is read is newer, and stands."""
        touched: set[str] = set()
        self._reloading.append(touched)
        try:
            seeks = await self.bus.client.hgetall(self._seeks_key)
            live = await self.bus.client.hgetall(self._live_key)
        except (RedisError, OSError) as exc:
            reraise_cancel(exc)
            self._failed(exc, "cannot read the lobby again")
            return
        finally:
            self._reloading.remove(touched)
        posted = {_name(seek_id): _unpack(data) for seek_id, data in seeks.items()}
        for seek in list(self.server.lobby.seeks.values()):
            remote = seek.owner_connection.node is not None
            if remote and not seek.quick and seek.id not in posted and seek.id not in touched:
                self.server._remove_seek(seek)
        for seek_id, data in posted.items():
            node = data.get("node")
            if node in self.present and node != self.node and not data.get("quick"):
                if seek_id not in touched:
                    self._add_seek(data)
        listed = {_name(game_id): data for game_id, data in live.items()}
        for game_id in list(self.listed):
            if game_id not in listed and game_id not in touched:
                self._list_remote(game_id, None)
        for game_id, data in listed.items():
            known = game_id in self.server.games or game_id in self.listed
            if not known and game_id not in touched:
                self._list_remote(game_id, _unpack(data))

    def _lobby(self, payload: dict[str, Any]) -> None:
        op = payload.get("op")
        for touched in self._reloading:  # (newer than what _reload_lobby reads)
            touched |= _lobby_ids(payload)
        if op == "game+":
            self._list_remote(payload["id"], payload["data"])
        elif op == "game-":
            self._list_remote(payload["id"], None)
        elif op == "games~":  # their plies moved: only their summaries change
            for game_id, data in payload["games"].items():
                if game_id in self.listed:
                    self.listed[game_id] = (tuple(data["rank"]), data["summary"])
        elif op == "add":
            self._add_seek(payload["seek"])
        elif payload.get("op") == "remove":
            seek = self.server.lobby.seeks.get(payload["id"])
            if seek is not None and payload.get("gone") and seek.owner_connection.node is None:
                # This node's own seek, dropped by a node that took this one for gone (a
                # stall longer than presence_ttl_s): it is alive, so the seek stays.
                self.server._spawn(self._keep_seek(seek))
            elif seek is not None:
                self.server._remove_seek(seek)

    def _add_seek(self, data: dict[str, Any]) -> None:
        """A seek posted on another node, in this node's lobby (an accepter here seats
        its owner through its node)."""
        if data["id"] in self.server.lobby.seeks:
            return
        seek = self._remote_seek(data)
        self.server.lobby.add(seek)
        self.server._lobby_push(LobbyEvent(kind="seek_added", seek_id=seek.id), seek=seek)

    def _remote_seek(self, data: dict[str, Any]) -> SeekEntry:
        """A seek or quick-pairing entry posted on another node (``_seek_data``): its
        owner's connection is a RemoteConnection."""
        envelope = {"from": data["node"], "conn": data["conn"], "player": data["player"]}
        settings = self.server.settings
        bucket = TokenBucket(settings.rate_per_s, settings.burst, 0.0, time.monotonic())
        owner = RemoteConnection(self, envelope | {"watching": []}, bucket)
        return SeekEntry(
            id=data["id"],
            game=data["game"],
            params=dict(data["params"]),
            control=None if data["clock"] is None else TimeControl.parse(data["clock"]),
            owner=Player.from_dict(data["owner"]),
            owner_connection=owner,
            created_at=float(data["created_at"]),
            color=data["color"],
            opponents=data["opponents"],
            to=data["to"],
            quick=bool(data.get("quick")),
        )

    # --- quick pairing: one queue per pairing key, for the whole cluster ---------------------

    def _quick_keys(self, entry: SeekEntry) -> list[str]:
        """The entry's queue (one list per game, parameters and clock: ``SeekEntry.key``)
        and the hash of every queued entry's data, by id."""
        key = hashlib.sha1(repr(entry.key).encode()).hexdigest()[:20]
        return [f"{self.bus.prefix}:quick:{key}", self._quick_key]

    @property
    def _quick_key(self) -> str:
        return f"{self.bus.prefix}:quick-entries"

    async def quick_pair(
        self, entry: SeekEntry, connection: Connection, game_id: str
    ) -> SeekEntry | None:
        """The longest-waiting quick entry of another player with ``entry``'s key, on any
        node, taken from the queue for the game ``game_id``; or None, and ``entry`` is
        queued. One script run, so of two nodes pairing at once neither queues beside a
        partner (Redis runs a script atomically). The partner is marked taken, as a claimed
        seek is (its node may miss the quick-taken notice: _post_again). A partner whose node
        this node does not see among the live ones (only late, maybe: a stall longer than
        presence_ttl_s) is looked for in Redis's presence again, and if it is missing there
        too, put back at the head of its queue (_UNCLAIM_QUICK; its entries leave the queue
        with the rest of a dead node's, _drop_entries_of) and passed over. NodeUnavailable
        if Redis does not answer: the pairing, which Redis may run when it wakes up, is
        called off once it answers (_UNCLAIM_QUICK: a partner it took is queued again)."""
        data = self._seek_data(entry, connection) | {"quick": True}
        player = connection.player
        assert player is not None
        what = pack({"game": game_id, "node": self.node})
        ttl = int(SEEK_CLAIM_TTL_S * 1000)
        self._check_answering()
        passed_over: list[str] = []  # partners whose node is missing: put back, not taken
        while True:
            keys = [
                *self._quick_keys(entry),
                f"{self.bus.prefix}:pairing-claim:{secrets.token_hex(8)}",
            ]
            args = [player.player_id, entry.id, pack(data), _QUICK_SCAN, ttl, what]
            partner = None
            try:
                raw = await self._script(_QUICK_TAKE)(
                    keys=keys, args=[*args, self._seek_taken_key(""), *passed_over]
                )
                partner = None if raw is None else unpack(raw)
                late = partner is not None and not await self._node_alive(partner["node"])
            except (RedisError, OSError) as exc:
                self._failed(exc, "cannot pair quickly")
                self._later(self._unqueue(entry), f"cannot unqueue {entry.id}")  # (it was sent)
                if isinstance(exc, _UNANSWERED) or partner is not None:  # (it may have run)
                    self._later(self._call_off_pairing(keys), "cannot call off a pairing")
                raise NodeUnavailable(_LOBBY_UNREACHABLE) from exc
            if partner is None:
                return None
            if late:  # (its node is missing from Redis's presence too)
                self._later(self._call_off_pairing(keys), "cannot call off a pairing")
                passed_over.append(partner["id"])
                continue
            self._later(self._settle_pairing(keys[2], partner["id"]), "cannot settle a pairing")
            node = partner["node"]
            if node == self.node:
                mine = self.server.lobby.seeks.get(partner["id"])
                if mine is not None and not mine.owner_connection.closed:
                    return mine
                continue  # its owner is leaving: the next one
            # Its node drops it from its lobby (and its AI fallback) before anything else.
            self.send_to(node, {"op": "quick-taken", "id": partner["id"]})
            return self._remote_seek(partner)

    async def _node_alive(self, node: str) -> bool:
        """Whether ``node`` is alive: among the live nodes as this node last saw them, or
        else (late, maybe: this node's view is one heartbeat old, and a node stalled longer
        than presence_ttl_s drops out of it until its next beat) in Redis's presence now."""
        return node == self.node or node in self.present or node in await self.bus.nodes()

    def _call_off_pairing(self, keys: list[str]) -> Step:
        """The step of a write that calls off a pairing whose answer was lost
        (_UNCLAIM_QUICK)."""
        ttl = int(SEEK_CLAIM_TTL_S * 1000)
        marks = (self._seek_taken_key(""), self._seek_gone_key(""))

        def call_off(pipe: Any) -> None:
            pipe.eval(_UNCLAIM_QUICK, 3, *keys, ttl, *marks)

        return keys[2], call_off, math.inf

    def _settle_pairing(self, claim: str, partner_id: str) -> Step:
        """The step of a write that settles a pairing whose answer came (_SETTLE_CLAIM)."""
        mark, ttl = self._seek_taken_key(partner_id), int(SEEK_TAKEN_TTL_S * 1000)

        def settle(pipe: Any) -> None:
            pipe.eval(_SETTLE_CLAIM, 2, claim, mark, ttl)

        return claim, settle, math.inf

    async def claim_quick(self, entry: SeekEntry) -> bool:
        """Take this node's own quick entry out of the queue (its AI fallback is due):
        False if another node paired it first (one whose notice was lost: its taken mark
        says so, and its poster gets what it missed, _missed_take). NodeUnavailable if Redis
        does not answer: the entry leaves the queue once it does (whoever took it
        meanwhile)."""
        self._check_answering()
        try:
            pipe = self.bus.client.pipeline(transaction=True)
            pipe.hmget(self._seek_taken_key(entry.id), "what", "state")
            self._unqueue(entry)[1](pipe)
            taken, won, *_ = await pipe.execute()
        except (RedisError, OSError) as exc:
            self._failed(exc, f"cannot take quick entry {entry.id}")
            self._later(self._unqueue(entry), f"cannot unqueue {entry.id}")
            raise NodeUnavailable(_LOBBY_UNREACHABLE) from exc
        what, state = taken
        if not won and what is not None and entry.owner_connection.node is None:
            self.server._spawn(self._missed_take(entry, _unpack(what), state == b"taken"))
        return bool(won)

    def _unqueue(self, entry: SeekEntry) -> Step:
        """The step of a write that takes this node's quick entry out of its queue for good
        (its removal marked: a pairing called off does not queue it again, _UNCLAIM_QUICK;
        its taken mark, which only its node reads, gone)."""
        queue, entries = self._quick_keys(entry)
        item = f"{entry.id} {entry.owner.player_id or ''}"

        def unqueue(pipe: Any) -> None:
            pipe.hdel(entries, entry.id)
            pipe.lrem(queue, 0, item)
            pipe.set(self._seek_gone_key(entry.id), b"1", px=int(SEEK_CLAIM_TTL_S * 1000))
            pipe.delete(self._seek_taken_key(entry.id))

        return f"quick:{entry.id}", unqueue, math.inf

    def quick_removed(self, entry: SeekEntry) -> None:
        """A quick entry of this node is gone (paired, cancelled, its owner left)."""
        self._later(self._unqueue(entry), f"cannot unqueue {entry.id}")

    def _script(self, source: str) -> Any:
        """A Lua script on the bus's Redis, registered once (run by its SHA1 after)."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self.bus.client.register_script(source)
        return script

    async def _repost_seeks(self, announce: bool = False) -> None:
        """After the bus came back (Redis restarted, maybe without its data), or this node
        was taken for gone (``announce``: its seeks left the other nodes' lobbies): its
        seeks, quick entries, open and live games are posted again where they are missing."""
        for session in list(self.server.games.values()):
            if session.status == "open" and not session.private and session.open_seat() is not None:
                self.open_listed(session)  # (``list open`` on the other nodes)
            elif session.status == "live" and not session.private:
                entry = {"rank": list(game_rank(session)), "summary": session.summary()}
                try:
                    await self.bus.client.hsetnx(self._live_key, session.id, pack(entry))
                except (RedisError, OSError) as exc:
                    log.warning("cluster: cannot index game %s again (%s)", session.id, exc)
                    return
        for seek in list(self.server.lobby.seeks.values()):
            connection = seek.owner_connection
            if connection.node is not None or connection.closed:
                continue
            try:
                await self._post_again(seek, announce=announce)
            except (RedisError, OSError) as exc:
                log.warning("cluster: cannot post seek %s again (%s)", seek.id, exc)
                return

    async def _keep_seek(self, seek: SeekEntry) -> None:
        """This node's ``seek``, which a node that took this one for gone dropped: posted
        again and announced to every lobby."""
        try:
            await self._post_again(seek, announce=True)
        except (RedisError, OSError) as exc:
            reraise_cancel(exc)
            self._failed(exc, f"cannot post seek {seek.id} again")

    async def _post_again(self, seek: SeekEntry, announce: bool = False) -> None:
        """One of this node's seeks, after its bus came back: posted again where Redis lost
        it (``announce``: on every node's lobby in any case), unless it was taken meanwhile
        (_REPOST_SEEK): this node may have missed the news, and its poster what it was
        owed (_missed_take). One whose claimer does not know yet whether it took it (and
        may call it off: _UNCLAIM_SEEK) is looked at again at the next heartbeats."""
        if self.server.lobby.seeks.get(seek.id) is not seek or seek.owner_connection.closed:
            return
        if await self._made_of(seek):
            return
        data = pack(self._seek_data(seek, seek.owner_connection) | {"quick": seek.quick})
        mark = self._seek_taken_key(seek.id)
        if seek.quick:  # (back in its queue, at its end: its place there was lost)
            item = f"{seek.id} {seek.owner.player_id or ''}"
            keys = [*self._quick_keys(seek), mark]
            posted = await self._script(_REPOST_QUICK)(keys=keys, args=[seek.id, data, item])
        else:
            keys = [self._seeks_key, mark]
            posted = await self._script(_REPOST_SEEK)(keys=keys, args=[seek.id, data])
        if isinstance(posted, list):
            what, state = posted
            self.server._spawn(self._missed_take(seek, _unpack(what), state == b"taken"))
        elif (posted or announce) and not seek.quick:
            message = {"op": "add", "seek": unpack(data), "from": self.node}
            self._publish(self.bus.lobby_channel, message)

    async def _made_of(self, seek: SeekEntry) -> bool:
        """Whether the store holds a game made of this node's ``seek``: its taken mark may
        be gone with a Redis that restarted empty, the game's row is not (games name their
        seek). Then its poster gets what it missed (_missed_take) and it is not posted
        again; a store that does not answer: looked at again at the next heartbeat."""
        try:
            game_id = await self.server.store.game_of_seek(seek.id)
        except StorageError as exc:
            log.warning("cluster: cannot tell whether seek %s was taken (%s)", seek.id, exc.detail)
            self._unsettled.add(seek.id)
            return True
        if game_id is None:
            return False
        self.server._spawn(self._missed_take(seek, {"game": game_id}, True))
        return True

    async def _missed_take(self, seek: SeekEntry, taken: dict[str, Any], settled: bool) -> None:
        """This node's seek was taken (``taken``: the claim's mark) while its bus was out:
        the seek leaves its lobby, and its poster gets what it missed, as the claimer sent
        it: ``seated`` (no rid) in the game made of it, then the game's snapshot; or
        ``seek_declined``. The game's owner (the decliner's node) is asked first: its
        answer comes after everything it published before, so that, heard meanwhile (the
        seek's removal), nothing is sent twice. A claim not ``settled`` yet may still be
        called off: unless the game made of it has the poster seated, the seek stays, and
        is looked at again later (_settle), as when no answer comes."""
        if seek.id in self._taking or (not settled and "game" not in taken):
            if not settled:
                self._unsettled.add(seek.id)
            return
        self._taking.add(seek.id)
        try:
            connection = seek.owner_connection
            player_id = seek.owner.player_id or ""
            game_id, owner = taken.get("game"), None
            if game_id is None:  # declined
                node = str(taken.get("node"))
                barrier = {"op": "seats", "player": player_id, "games": []}  # (asks nothing)
                if (
                    node != self.node
                    and node in self.present
                    and not await self._ask(node, barrier)
                ):
                    self._unsettled.add(seek.id)
                    return
                seat = None
            else:
                owner = self.owner_of(game_id)
                if owner == self.node:
                    seats = await self._seats_here(player_id, [game_id], online=True)
                else:
                    asked = {"op": "seats", "player": player_id, "games": [game_id], "snapshot": 1}
                    answer = None if owner is None else await self._ask(owner, asked, game_id)
                    if answer is None or answer.get("moved"):
                        self._unsettled.add(seek.id)
                        return
                    seats = answer.get("seats", [])
                seat = seats[0] if seats else None
                if seat is None and not settled:
                    self._unsettled.add(seek.id)
                    return
            if self.server.lobby.seeks.get(seek.id) is not seek:
                return  # heard meanwhile: removed, or cancelled
            self.server._remove_seek(seek)
            if connection.closed:
                return
            if game_id is None:
                connection.send(SeekDeclined(seek_id=seek.id, player=dict(taken["player"])))
            elif seat is not None and game_id not in connection.games:
                log.info("cluster: seek %s was taken unheard: seating its poster", seek.id)
                connection.send(Seated(game_id=game_id, seat=seat["seat"], token=seat["token"]))
                snapshot = seat.get("snapshot")  # (none from a node of an older version)
                if owner == self.node:
                    self.server._subscribe(game_id, connection)
                else:  # (without a snapshot, from seq 0: the catch-up is one)
                    follow = {"conn": self.key_of(connection), "game": game_id, "from": owner}
                    self._follow(follow | {"seq": seat["seq"] if snapshot else 0})
                if snapshot:
                    connection.post(snapshot)
        finally:
            self._taking.discard(seek.id)

    async def _ask(
        self, node: str, payload: dict[str, Any], game_id: str = ""
    ) -> dict[str, Any] | None:
        """``payload`` sent to ``node``'s inbox; its ``done``, or None if it gives none in
        forward_timeout_s (or {"moved": True}: ``node`` left, or ``game_id`` moved)."""
        fid = next(self._forward_ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[fid] = (future, node, game_id)
        self.send_to(node, payload | {"fid": fid})
        try:
            return await asyncio.wait_for(future, self.forward_timeout_s)
        except TimeoutError:
            return None
        finally:
            self._pending.pop(fid, None)

    async def _settle(self) -> None:
        """The seeks of this node whose claim was not settled (_post_again), looked at
        again."""
        unsettled, self._unsettled = self._unsettled, set()
        try:
            while unsettled:
                seek = self.server.lobby.seeks.get(unsettled.pop())
                if seek is not None and seek.owner_connection.node is None:
                    await self._post_again(seek, announce=True)
        except (RedisError, OSError) as exc:
            reraise_cancel(exc)
            self._unsettled |= unsettled
            if seek is not None:
                self._unsettled.add(seek.id)
            self._failed(exc, "cannot look at a taken seek again")
        finally:
            self._settling = None

    def _forget_seeks_of(self, nodes: set[str]) -> None:
        """Nodes gone without a word (killed: their presence expired): their seeks leave
        every lobby, and their seeks and quick entries leave Redis."""
        for seek in list(self.server.lobby.seeks.values()):
            if seek.owner_connection.node in nodes:
                self.server._remove_seek(seek)
        self.server._spawn(self._drop_entries_of(nodes))

    async def _entries(self) -> list[dict[str, Any]]:
        """The data of every seek and quick entry in Redis (``_seek_data``)."""
        client = self.bus.client
        hashes = [await client.hgetall(self._seeks_key), await client.hgetall(self._quick_key)]
        return [
            unpack(data if isinstance(data, bytes) else data.encode())
            for entries in hashes
            for data in entries.values()
        ]

    async def _drop_entries_of(self, nodes: set[str]) -> None:
        """The seeks and quick entries of ``nodes`` leave Redis (and the seeks every lobby:
        the node whose HDEL wins tells the others). A node that is present again once they
        are read keeps them (started again under its name: they are its new life's; it
        announced itself before posting any), except this node at its start."""
        try:
            entries = await self._entries()
            others = nodes - {self.node}
            if others:
                nodes = nodes - (others & set(await self.bus.nodes()))
            for data in entries:
                if data.get("node") not in nodes:
                    continue
                if data.get("quick"):
                    pipe = self.bus.client.pipeline(transaction=True)
                    self._unqueue(self._remote_seek(data))[1](pipe)  # (its queue's item)
                    await pipe.execute()
                    continue
                pipe = self.bus.client.pipeline(transaction=True)
                self._unseek(data["id"])[1](pipe)
                removed, _ = await pipe.execute()
                if removed:  # ("gone": should its node be alive, it keeps the seek)
                    message = {"op": "remove", "id": data["id"], "from": self.node, "gone": True}
                    self._publish(self.bus.lobby_channel, message)
        except (RedisError, OSError, NodeUnavailable) as exc:
            log.warning("cluster: cannot drop the seeks of %s (%s)", sorted(nodes), exc)


def _zrem(key: str, member: str) -> Callable[[Any], object]:
    return lambda pipe: pipe.zrem(key, member)


def _names(members: list[Any]) -> set[str]:
    return {_name(m) for m in members}


def _name(member: Any) -> str:
    return member.decode() if isinstance(member, bytes) else str(member)


def _unpack(data: bytes | str) -> Any:
    """A value of the lobby's hashes, as read by the bus's client (bytes)."""
    return unpack(data if isinstance(data, bytes) else data.encode())


def _lobby_ids(payload: dict[str, Any]) -> set[str]:
    """The seeks' and games' ids a lobby channel's message names."""
    if payload.get("op") == "add":
        return {str(payload["seek"]["id"])}
    if payload.get("op") == "games~":
        return set(payload["games"])
    return {str(payload["id"])} if "id" in payload else set()


def _beat_time(state: Any) -> float:
    """When a node's presence state was written (its "at"), 0 if it does not say."""
    at = state.get("at") if isinstance(state, dict) else None
    return float(at) if isinstance(at, int | float) else 0.0

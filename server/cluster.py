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

``Cluster`` inherits two parts: the lobby's seeks and quick pairing
(server/cluster_seeks.py) and the caps on unfinished games (server/cluster_caps.py); what
the parts share is in server/cluster_base.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import math
import secrets
import time
from typing import TYPE_CHECKING, Any

import asyncpg
from redis.exceptions import RedisError

from protocol import (
    SEQ_SINCE_VERSION,
    ErrorCode,
    JoinGame,
    LobbyEvent,
    Message,
    ProtocolError,
    Resume,
    Watch,
    decode,
    encode,
)
from server.bus import RedisBus, pack, reraise_cancel, unpack
from server.cluster_base import _UNANSWERED, Host, RemoteConnection, Step, _name, _names, _unpack
from server.cluster_caps import OPEN_TTL_S, ClusterCaps
from server.cluster_seeks import _QUICK_TAKE as _QUICK_TAKE  # (tests/server/test_cluster.py)
from server.cluster_seeks import ClusterSeeks
from server.connection import Connection
from server.errors import NodeUnavailable, ServerError, StorageError
from server.limits import TokenBucket
from server.lobby import game_rank
from server.session import new_game_id
from server.shards import SHARDS, ShardLocks, shard_of

if TYPE_CHECKING:
    from server.session import GameSession

log = logging.getLogger(__name__)

# What a node's inbox takes, announced in its presence: 2, an "out" message may carry the
# games its client follows from then on ("follow"); 1 (a node of an older version, which
# announces none), a follow is an inbox message of its own.
BUS_VERSION = 2
# Requests after which the client follows the game: its node subscribes to the game's
# channel before forwarding them.
_FOLLOWING = (JoinGame, Watch, Resume)
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
# Summaries per index update and lobby message (a few hundred bytes each: a message stays
# far below the bus's 1 MiB cap, MAX_PAYLOAD, whatever the number of games).
PLIES_BATCH = 500
# StorageError: the lock connection refused the database's server lock (a server alone took
# the database while this node was cut off): no shards until it is gone.
_LOCK_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError, StorageError)


def new_node_id() -> str:
    return "n-" + secrets.token_hex(4)


class Cluster(ClusterSeeks, ClusterCaps):
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
        # And the lock connection open: its shards drop with it now, not at the process's end.
        await self.locks.close()
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

    def new_game_id(self, length: int) -> str:
        """A new game's id of ``length`` characters, in a shard this node owns (it will own
        the game)."""
        if not self.locks.held - self.releasing - self.taking:
            raise NodeUnavailable(
                "this node holds no games right now (the cluster is rebalancing): retry soon"
            )
        while True:
            game_id = new_game_id(length)
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
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancel that meets
            # the wake (the drain's, as another node's "shards" wakes it), and the drain
            # then waited for this loop until --drain-timeout-s cut it.
            try:
                async with asyncio.timeout(self.claim_s):
                    await self._wake.wait()
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
            # what requests forwarded here may carry
            "protocol": self.server.settings.protocol_version,
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
        following it, as the owner's own did (server/game_events.py ``_evict_finished``),
        told that its rematch window closed."""
        self.server.rematch_closed(game_id)
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
            reply["moved"] = True  # (all a node of an older version reads: it asks again)
            if self.serves(game_id) and game_id not in self.server.waiting:
                # Ours, and not loaded: a finished game, which no node loads again (its
                # owner died with it, or its eviction was lost): its followers let it go.
                reply["gone"] = True
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
        if payload.get("gone") and game_id not in self.server.games:
            self._evicted(game_id)  # its rematch window closed: told as at its eviction
            return
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

"""The cluster's lobby of seeks (server/cluster.py): seeks posted in Redis and claimed
there by an accept or a decline, quick pairing's queues, their Lua scripts, and what a
node does about the seeks taken or dropped while its bus was out (``ClusterSeeks``, a part
of ``Cluster``)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import secrets
import time
from typing import Any

from redis.exceptions import RedisError

from protocol import LobbyEvent, Seated, SeekDeclined
from server.bus import pack, reraise_cancel, unpack
from server.clock import TimeControl
from server.cluster_base import _UNANSWERED, ClusterNode, RemoteConnection, Step, _unpack
from server.connection import Connection
from server.errors import NodeUnavailable, StorageError
from server.limits import TokenBucket
from server.lobby import SeekEntry, game_rank
from server.session import Player

log = logging.getLogger("server.cluster")  # (these lines are the cluster's, as before)

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
_QUICK_SCAN = 100  # queued entries a pairing looks at (beyond: the same player's)
# What a client is told when Redis refuses a lobby command (NodeUnavailable): the cause,
# which names Redis's address, goes to the log (Cluster._failed), never to a client.
_LOBBY_UNREACHABLE = "the cluster's lobby cannot be reached: retry soon"


class ClusterSeeks(ClusterNode):
    """A node's part in the cluster's lobby of seeks and quick pairing."""

    # Its state (set in Cluster.__init__, which says what each holds): declared here, where
    # it is written (mypy takes a write in a subclass of ClusterNode for a new attribute).
    _scripts: dict[str, Any]
    _unseen: set[str]
    _unseen_until: float
    _unsettled: set[str]
    _settling: asyncio.Task[None] | None
    _taking: set[str]

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

"""The caps on unfinished games, counted cluster-wide (server/cluster.py): each player's
and address's unfinished games as sorted sets in Redis, checked and taken at once by a Lua
script; this node's writes to Redis, in order, kept while Redis does not answer
(``_write``); and a player's seats in the games other nodes own (``ClusterCaps``, a part
of ``Cluster``)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from redis.exceptions import RedisError

from protocol import encode
from server.bus import reraise_cancel
from server.cluster_base import _UNANSWERED, ClusterNode, Step, _names
from server.errors import ServerError

log = logging.getLogger("server.cluster")  # (these lines are the cluster's, as before)

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
# The caps on unfinished games count, cluster-wide, sorted sets of game ids per player and
# per address ({prefix}:open:p:{player}, {prefix}:open:a:{address}) scored by when each
# entry expires: a game's entries are added when it is admitted (_RESERVE_OPEN, before it
# is made) and when it is registered (started or restored); its owner refreshes them every
# third of this, and removes them when the game ends (or is not made after all), so an
# owner that dies leaves nothing counted longer than this.
OPEN_TTL_S = 30.0


class ClusterCaps(ClusterNode):
    """A node's part in the caps on unfinished games, cluster-wide."""

    # Its state (set in Cluster.__init__, which says what each holds): declared here, where
    # it is written (mypy takes a write in a subclass of ClusterNode for a new attribute).
    _open_writes: asyncio.Lock
    _unwritten: dict[str, Step]

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


def _zrem(key: str, member: str) -> Callable[[Any], object]:
    return lambda pipe: pipe.zrem(key, member)

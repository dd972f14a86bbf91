"""A cluster of real nodes (`noughts serve --db postgresql://... --bus redis://...`) sharing
one PostgreSQL schema and one Redis prefix of the test's own: games whose players and
spectators sit on different nodes, an owner killed mid-game, a seek raced for, Redis
restarted, PostgreSQL connections cut."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import asyncpg
import msgpack
import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from client.connection import RequestFailed, ServerConnection
from protocol import (
    PROTOCOL_VERSION,
    Abort,
    AcceptSeek,
    CreateGame,
    DeclineSeek,
    Draw,
    Ended,
    Error,
    Hello,
    JoinGame,
    ListGames,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
    Message,
    Move,
    Moved,
    Offer,
    Ok,
    Ping,
    Presence,
    QuickPair,
    Rematch,
    Resign,
    Resume,
    Resumed,
    Seated,
    Seek,
    SeekDeclined,
    SeekPosted,
    Snapshot,
    Unwatch,
    Watch,
    Welcome,
    decode,
    decode_server,
)
from server.app import GameServer, running
from server.bus import RedisBus, pack, unpack
from server.cluster import _QUICK_TAKE
from server.cluster import Cluster as NodeCluster
from server.pgstore import PostgresStore
from server.settings import ServerSettings
from server.shards import ShardLocks
from tests.server.cluster_nodes import Cluster, Node, cluster_of, create_schema, schema_url
from tests.server.conftest import RawClient, admin_get, http_get, next_event
from tests.server.redis_proxy import ClosesLosingProxy
from tests.services import PG_URL, REDIS_SERVER_HINT, REDIS_URL

# Moves of a 5x5 game (four in a row) that never end it early: a long game to kill nodes in.
LONG_GAME = [0, 1, 2, 3, 11, 10, 13, 12, 20, 21, 22, 23]


@pytest.fixture
async def two_nodes(pg_schema: str, redis_prefix: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    """Nodes a and b of a cluster of the test's own, each holding shards."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        await cluster.start_pair()
        yield cluster


async def _play(mover: ServerConnection, token: str, game_id: str, action: int) -> Moved:
    moved = await mover.request(Move, game_id=game_id, token=token, action=action)
    assert isinstance(moved, Moved) and moved.action == action
    return moved


async def _heard(client: ServerConnection, ply: int) -> Moved:
    """The move of ``ply`` as ``client`` hears of it (its own earlier moves skipped); a
    move heard twice or out of order fails."""
    while True:
        moved = await next_event(client, Moved)
        if moved.ply >= ply:
            assert moved.ply == ply, f"heard ply {moved.ply} before {ply}"
            return moved


async def _stored_moves(schema: str, game_id: str) -> list[int]:
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": schema})
    try:
        rows = await conn.fetch("SELECT action FROM moves WHERE game_id = $1 ORDER BY ply", game_id)
    finally:
        await conn.close()
    return [r[0] for r in rows]


async def _two_player_game(
    cluster: Cluster,
) -> tuple[ServerConnection, ServerConnection, str, str, str]:
    """ada on the first node creates a 5x5 game, bo on the second joins it."""
    first, second = cluster.nodes[0], cluster.nodes[1]
    ada = await first.connect("ada")
    bo = await second.connect("bo")
    created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    joined = await bo.request(JoinGame, game_id=created.game_id)
    return ada, bo, created.game_id, created.token, joined.token


async def _seats(cluster: Cluster) -> tuple[dict[str, tuple[ServerConnection, str]], str]:
    """``_two_player_game``: each player's connection and token by name, and the game."""
    ada, bo, game_id, ada_token, bo_token = await _two_player_game(cluster)
    return {"ada": (ada, ada_token), "bo": (bo, bo_token)}, game_id


async def test_players_and_a_spectator_on_three_nodes(two_nodes: Cluster, pg_schema: str) -> None:
    cluster = two_nodes
    ada, bo, game_id, ada_token, bo_token = await _two_player_game(cluster)
    players = [(ada, ada_token), (bo, bo_token)]
    for ply, action in enumerate(LONG_GAME[:4]):
        mover, token = players[ply % 2]
        await _play(mover, token, game_id, action)
        # The other player, on the other node, hears of it, once, in order.
        other = players[1 - ply % 2][0]
        heard = await _heard(other, ply)
        assert (heard.ply, heard.action) == (ply, action)
    # A spectator on a third node joins mid-game: a snapshot, then every move.
    third = await cluster.start("c")
    eve = await third.connect("eve")
    snapshot = await eve.request(Watch, game_id=game_id)
    assert isinstance(snapshot, Snapshot) and list(snapshot.actions) == LONG_GAME[:4]
    for ply, action in enumerate(LONG_GAME[4:8], start=4):
        mover, token = players[ply % 2]
        await _play(mover, token, game_id, action)
        seen = await _heard(eve, ply)
        assert (seen.ply, seen.action) == (ply, action)
    assert await _stored_moves(pg_schema, game_id) == LONG_GAME[:8]
    for client in (ada, bo, eve):
        await client.close()
    for node in cluster.nodes:
        assert await node.stop() == 0


async def test_the_owner_killed_mid_game_the_game_goes_on_elsewhere(
    two_nodes: Cluster, pg_schema: str
) -> None:
    cluster = two_nodes
    seats, game_id = await _seats(cluster)
    order = ["ada", "bo"]
    acknowledged = []
    for ply, action in enumerate(LONG_GAME[:5]):
        mover, token = seats[order[ply % 2]]
        await _play(mover, token, game_id, action)
        acknowledged.append(action)
    owner = await cluster.owner_of(game_id)
    survivor = next(n for n in cluster.nodes if n.name != owner)
    cluster.node(owner).kill()
    await cluster.node(owner).process.wait()
    # The player of the dead node reconnects to the survivor and resumes by seq.
    name = "ada" if owner == cluster.nodes[0].name else "bo"
    lost, token = seats[name]
    back = await survivor.connect(name, session=lost.session)
    resumed = await back.request(Resume, game_id=game_id, since=lost.last_seq[game_id])
    assert isinstance(resumed, Resumed) and resumed.seat == order.index(name)
    seats[name] = (back, resumed.token or token)
    await cluster.wait_owned(game_id, {survivor.name})
    for ply, action in enumerate(LONG_GAME[5:], start=5):
        mover, token = seats[order[ply % 2]]
        await _play(mover, token, game_id, action)
        acknowledged.append(action)
    assert await _stored_moves(pg_schema, game_id) == acknowledged == LONG_GAME
    for client, _ in seats.values():
        await client.close()
    await lost.close()
    assert await survivor.stop() == 0


async def test_a_node_restoring_a_game_never_asks_itself_for_its_events(
    two_nodes: Cluster, pg_schema: str
) -> None:
    """The owner killed, the survivor locks the game's shard and restores it from the
    database, slowly here (the games table is locked meanwhile): while it restores, the
    shard is its own in no one's eyes, its own included; it once asked itself for the
    events its player there missed ("catching up game X from" itself), before it had the
    game. The game goes on once restored."""
    cluster = two_nodes
    seats, game_id = await _seats(cluster)
    for ply, action in enumerate(LONG_GAME[:2]):
        mover, token = seats[["ada", "bo"][ply % 2]]
        await _play(mover, token, game_id, action)
    owner = await cluster.owner_of(game_id)
    survivor = next(n for n in cluster.nodes if n.name != owner)
    name = "ada" if owner == cluster.nodes[0].name else "bo"  # the player of the dead node
    blocker = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
    try:
        restoring = blocker.transaction()
        await restoring.start()
        await blocker.execute("LOCK TABLE games IN ACCESS EXCLUSIVE MODE")
        cluster.node(owner).kill()
        await cluster.node(owner).process.wait()
        await cluster.wait_owned(game_id, {survivor.name})
        await asyncio.sleep(2.0)  # four heartbeats of the survivor's, its restore blocked
        await restoring.rollback()
    finally:
        await blocker.close()
    lost, _ = seats[name]
    back = await survivor.connect(name, session=lost.session)
    resumed = await back.request(Resume, game_id=game_id, since=lost.last_seq[game_id])
    assert isinstance(resumed, Resumed) and resumed.token
    await _play(back, resumed.token, game_id, LONG_GAME[2])
    assert await _stored_moves(pg_schema, game_id) == LONG_GAME[:3]
    log = survivor.log.read_text()
    assert f"catching up game {game_id} from {survivor.name}" not in log, log[-3000:]
    for client in (back, lost, *(c for c, _ in seats.values())):
        await client.close()
    assert await survivor.stop() == 0


async def test_a_catch_up_answered_late_repeats_no_event_to_the_followers(
    two_nodes: Cluster, redis_prefix: str
) -> None:
    """Two catch-ups crossing: the owner's answer to an ask from before events that were
    relayed since. The node posts only what its followers have not had."""
    cluster = two_nodes
    ada, bo, game_id, ada_token, bo_token = await _two_player_game(cluster)
    players = [(ada, ada_token), (bo, bo_token)]
    owner = await cluster.owner_of(game_id)
    other = next(node for node in cluster.nodes if node.name != owner)
    # A spectator on the node that relays the game, speaking frames: no client-side dedupe.
    eve = await RawClient.connect(other.url, name="eve")
    await eve.send_message(Watch(rid=7, game_id=game_id))
    snapshot = await _reply(eve, 7)
    assert isinstance(snapshot, Snapshot)
    # A few moves, until the player to move sits on eve's node: that move is forwarded to
    # the owner through its inbox, after the asks below, so the answers reach eve's node
    # before the move's event does (one Redis connection delivers in publication order).
    on_other = 0 if other is cluster.nodes[0] else 1
    ply = 0
    while ply < 3 or ply % 2 != on_other:
        mover, token = players[ply % 2]
        await _play(mover, token, game_id, LONG_GAME[ply])
        moved = await eve.receive()
        assert isinstance(moved, Moved) and moved.ply == ply
        ply += 1
    # The owner is asked, as by that node, for everything after the game's first event and
    # for the whole game (a snapshot): both answers hold only what eve has seen already.
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        for since in (1, 0):
            ask = {"op": "since", "game": game_id, "since": since, "present": []}
            await client.publish(f"{redis_prefix}:inbox:{owner}", pack({**ask, "from": other.name}))
    finally:
        await client.aclose()
    mover, token = players[on_other]
    await _play(mover, token, game_id, LONG_GAME[ply])
    # The next frame eve gets is that move: nothing of the game repeated before it.
    moved = await eve.receive()
    assert isinstance(moved, Moved) and moved.ply == ply, moved
    for client_ in (ada, bo, eve):
        await client_.close()


async def test_a_spectator_on_a_third_node_follows_the_game_through_a_failover(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """eve watches from node c a game owned by node a between players on a and b; a is
    killed: eve gets what it missed (b restored the game: a snapshot), then every move
    played at b, once and in order, and the lobby on c lists the game with its ply."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a, b, c = [await cluster.start(name) for name in "abc"]
        await cluster.wait_balanced()
        ada, bo = await a.connect("ada"), await b.connect("bo")
        created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
        joined = await bo.request(JoinGame, game_id=created.game_id)
        game_id = created.game_id
        assert await cluster.owner_of(game_id) == a.name
        eve = await c.connect("eve")
        watched = await eve.request(Watch, game_id=game_id)
        assert isinstance(watched, Snapshot) and watched.status == "live"
        players = [(ada, created.token), (bo, joined.token)]
        for ply, action in enumerate(LONG_GAME[:3]):
            mover, token = players[ply % 2]
            await _play(mover, token, game_id, action)
            assert (await _heard(eve, ply)).action == action
        a.kill()
        await a.process.wait()
        owner = await cluster.wait_owned(game_id, {b.name, c.name})
        node = b if owner == b.name else c
        back = await node.connect("ada", session=ada.session)
        resumed = await back.request(Resume, game_id=game_id, since=ada.last_seq[game_id])
        assert isinstance(resumed, Resumed) and resumed.token is not None
        players[0] = (back, resumed.token)
        for ply, action in enumerate(LONG_GAME[3:7], start=3):
            mover, token = players[ply % 2]
            await _play_retrying(mover, token, game_id, action)
            assert (await _heard(eve, ply)).action == action  # after the snapshot, if any
        give_up = asyncio.get_running_loop().time() + 10
        while True:
            listed = await eve.request(ListGames, status="live")
            plies = [g["ply"] for g in listed.games if g["game_id"] == game_id]
            if plies == [7]:
                break
            assert asyncio.get_running_loop().time() < give_up, plies
            await asyncio.sleep(0.05)
        for client in (ada, bo, back, eve):
            await client.close()


async def _game_owned_elsewhere(
    cluster: Cluster, owner: Node, ada_on: Node, bo_on: Node
) -> tuple[list[tuple[ServerConnection, str]], str]:
    """A 5x5 game ``owner`` owns, ada playing it from ``ada_on`` and bo from ``bo_on``:
    each player's connection and seat token, and the game's id."""
    ada = await owner.connect("ada")
    created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    game_id = created.game_id
    assert await cluster.owner_of(game_id) == owner.name
    await ada.close()
    ada = await ada_on.connect("ada", session=ada.session)
    assert isinstance(await ada.request(Resume, game_id=game_id, since=0), Resumed)
    bo = await bo_on.connect("bo")
    joined = await bo.request(JoinGame, game_id=game_id)
    return [(ada, created.token), (bo, joined.token)], game_id


@pytest.mark.parametrize("replaced", [False, True], ids=["survivor", "replaced"])
async def test_the_owner_killed_while_both_players_sit_elsewhere_the_game_goes_on(
    two_nodes: Cluster, pg_schema: str, replaced: bool
) -> None:
    """Both players on the node that does not own their game (every move forwarded, the
    replies riding on the game's events); the owner is killed: the survivor takes the
    game and it moves again; ``replaced``: a node started in the dead one's place takes
    its share of the shards back meanwhile, and the game goes on whichever owns it."""
    cluster = two_nodes
    a, b = cluster.nodes
    players, game_id = await _game_owned_elsewhere(cluster, a, b, b)
    ada, bo = players[0][0], players[1][0]
    for ply, action in enumerate(LONG_GAME[:5]):
        mover, token = players[ply % 2]
        await _play(mover, token, game_id, action)
        await _heard(players[1 - ply % 2][0], ply)
    a.kill()
    await a.process.wait()
    await cluster.wait_owned(game_id, {b.name})
    if replaced:
        c = await cluster.start("c")
        await cluster.wait_balanced(names={b.name, c.name})
    for ply, action in enumerate(LONG_GAME[5:], start=5):
        mover, token = players[ply % 2]
        await _play(mover, token, game_id, action)
        await _heard(players[1 - ply % 2][0], ply)
    assert await _stored_moves(pg_schema, game_id) == LONG_GAME
    for client in (ada, bo):
        await client.close()


async def test_a_node_taking_a_game_over_announces_nobody_away(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """The owner killed while ada sits on one surviving node and bo on the other: the node
    that restores the game holds each seat away until its player is found, here or through
    the node it is connected to (``--restore-quiet-s``, 5 s), so neither player is told
    that anyone left (the adopter's own player was told it had left, and came back, at
    once). The test waits past the default quiet: the other node reports its player when
    the new owner announces its shards, or at its next ask (every 2 heartbeats) if the
    ask and the restore cross."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a, b, c = [await cluster.start(name) for name in "abc"]
        await cluster.wait_balanced()
        players, game_id = await _game_owned_elsewhere(cluster, a, b, c)
        bo = players[1][0]
        for ply, action in enumerate(LONG_GAME[:2]):
            mover, token = players[ply % 2]
            await _play(mover, token, game_id, action)
            await _heard(players[1 - ply % 2][0], ply)
        await _heard(bo, 1)  # (each hears its own move too)
        a.kill()
        await a.process.wait()
        await cluster.wait_owned(game_id, {b.name, c.name})
        await asyncio.sleep(6)  # past the quiet: an absence found would be announced by now
        for ply, action in enumerate(LONG_GAME[2:4], start=2):
            mover, token = players[ply % 2]
            await _play(mover, token, game_id, action)
        for client, _token in players:
            heard: list[Message] = []
            while not heard or not (isinstance(heard[-1], Moved) and heard[-1].ply == 3):
                heard.append(await client.next_event(timeout=10))
            assert [e for e in heard if isinstance(e, Presence)] == []
            assert [e.ply for e in heard if isinstance(e, Moved)] == [2, 3]
        for client, _token in players:
            await client.close()


async def test_a_dead_nodes_last_word_does_not_outweigh_the_new_owners(
    two_nodes: Cluster, redis_prefix: str
) -> None:
    """A node killed -9 keeps naming its shards in its presence key until that expires
    (presence_ttl_s), while the node that took them names them too. Here a stale key
    claims node a's shards (as a dead former owner's would: an older state), under a name
    that sorts after a's: node b still forwards the moves of a's game to a (the later
    state), where it took the stale name for the owner and its forwards went unanswered
    until the forward timeout (``unavailable``)."""
    cluster = two_nodes
    a, b = cluster.nodes
    ada = await a.connect("ada")
    created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    assert await cluster.owner_of(created.game_id) == a.name
    bo = await b.connect("bo")
    joined = await bo.request(JoinGame, game_id=created.game_id)
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        held = unpack(await client.get(f"{redis_prefix}:presence:{a.name}"))
        stale = "zz-dead-" + redis_prefix
        state = {**held, "at": float(held.get("at", 1.0)) - 1.0}  # older than a's
        await client.set(f"{redis_prefix}:presence:{stale}", pack(state), px=60_000)
        await client.sadd(f"{redis_prefix}:nodes", stale)
        await asyncio.sleep(2 * 0.5 + 0.2)  # b reads presence at its next heartbeats
        await _play(ada, created.token, created.game_id, LONG_GAME[0])
        moved = await asyncio.wait_for(
            bo.request(Move, game_id=created.game_id, token=joined.token, action=LONG_GAME[1]),
            4,  # under forward_timeout_s (5 s): answered by a, not timed out
        )
        assert isinstance(moved, Moved) and moved.action == LONG_GAME[1]
    finally:
        await client.delete(f"{redis_prefix}:presence:zz-dead-{redis_prefix}")
        await client.aclose()
        await ada.close()
        await bo.close()


async def _raw_back(node: Node, session: str | None) -> RawClient:
    """A client back with its session on ``node``, speaking frames (it picks its rids)."""
    client = await RawClient.connect(node.url, hello=False)
    await client.send_message(Hello(rid=1, version=PROTOCOL_VERSION, session=session))
    assert isinstance(await client.receive(), Welcome)
    return client


async def _reply(client: RawClient, rid: int) -> Message:
    """The frame answering ``rid`` (the game's events before it skipped)."""
    while True:
        message = await client.receive()
        if getattr(message, "rid", None) == rid:
            return message


async def test_a_move_sent_again_through_another_node_is_acknowledged_again(
    two_nodes: Cluster, pg_schema: str
) -> None:
    """bo's move is committed but its acknowledgement lost with its connection; bo comes
    back on the other node (its requests forwarded to the game's owner) and sends the
    move again, with its rid and ply, as a client does that never saw the reply: the same
    acknowledgement (the move's ``moved``, with the new copy's rid), before and after the
    opponent's reply, and after a failover (from the stored move), and the move stored once.
    A different move at that ply is refused."""
    a, b = two_nodes.nodes
    ada, bo = await a.connect("ada"), await a.connect("bo")  # both on the owner
    created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    joined = await bo.request(JoinGame, game_id=created.game_id)
    game_id = created.game_id
    assert await two_nodes.owner_of(game_id) == a.name
    await _play(ada, created.token, game_id, LONG_GAME[0])
    first = await _play(bo, joined.token, game_id, LONG_GAME[1])
    await bo.close()  # as if the acknowledgement had been lost with the connection
    back = await _raw_back(b, bo.session)
    again = Move(rid=7, game_id=game_id, token=joined.token, action=LONG_GAME[1], ply=1)
    await back.send_message(again)
    reply = await _reply(back, 7)
    assert reply == replace(first, rid=7), reply  # not not_your_turn
    await _play(ada, created.token, game_id, LONG_GAME[2])
    await back.send_message(replace(again, rid=8))
    assert await _reply(back, 8) == replace(first, rid=8)  # not stale_move
    await back.send_message(replace(again, rid=9, action=LONG_GAME[3]))
    refused = await _reply(back, 9)
    assert isinstance(refused, Error) and refused.code == "stale_move", refused
    # The owner dies: b restores the game (no event log) and acknowledges from the record.
    a.kill()
    await two_nodes.wait_owned(game_id, {b.name})
    await back.send_message(replace(again, rid=10))
    assert await _reply(back, 10) == replace(first, rid=10)
    assert await _stored_moves(pg_schema, game_id) == LONG_GAME[:3]
    await back.close()
    await ada.close()


async def test_a_draw_offer_and_a_resign_sent_again_through_another_node_count_once(
    two_nodes: Cluster, pg_schema: str
) -> None:
    """Game requests carry the seq their client had seen (PROTOCOL.md, "A request sent
    again"): ada's draw offer, made on the owner, sent again from the other node after the
    opponent moved, is answered ``ok`` from the owner's memory, and after a failover from
    the store (a restored game keeps no event log), never offered twice; her resign, its
    reply lost, likewise gets its ``ended`` again."""
    a, b = two_nodes.nodes
    ada, bo = await a.connect("ada"), await a.connect("bo")
    created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    joined = await bo.request(JoinGame, game_id=created.game_id)
    game_id = created.game_id
    assert await two_nodes.owner_of(game_id) == a.name
    await _play(ada, created.token, game_id, LONG_GAME[0])
    await _heard(bo, 0)
    seen = ada.seen_seq[game_id]
    offer = Draw(rid=7, game_id=game_id, token=created.token, seq=seen)
    assert isinstance(await ada.request(Draw, game_id=game_id, seq=seen), Ok)
    await _play(bo, joined.token, game_id, LONG_GAME[1])  # declines the offer
    await ada.close()
    back = await _raw_back(b, ada.session)
    await back.send_message(offer)
    assert await _reply(back, 7) == Ok(rid=7)
    a.kill()
    await two_nodes.wait_owned(game_id, {b.name})
    await back.send_message(replace(offer, rid=8))
    assert await _reply(back, 8) == Ok(rid=8)
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
    try:
        kinds = await conn.fetch("SELECT kind FROM events WHERE game_id = $1", game_id)
    finally:
        await conn.close()
    assert [r[0] for r in kinds].count("offer") == 1
    await back.close()
    resumed = await (back2 := await b.connect("ada", session=ada.session)).request(
        Resume, game_id=game_id, since=0
    )
    resign = Resign(rid=9, game_id=game_id, token=resumed.token, seq=resumed.seq)
    ended = await back2.request(Resign, game_id=game_id, seq=resumed.seq)
    assert isinstance(ended, Ended) and ended.reason == "resign"
    await back2.close()
    last = await _raw_back(b, ada.session)
    await last.send_message(resign)
    again = await _reply(last, 9)
    assert isinstance(again, Ended) and (again.seq, again.result) == (ended.seq, ended.result)
    await last.close()
    await bo.close()


async def test_a_forwarded_frame_its_owner_cannot_read_is_refused_with_its_rid(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """Nodes of two versions (a rolling upgrade): a request forwarded with a field its owner
    does not know is refused ``bad_field`` with the request's ``rid`` (without it, the client
    waited for a reply forever). A node sends the owner's inbox the envelope a newer node
    would; its own inbox hears the answer."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        owner = await cluster.start("a")
        await cluster.wait_balanced()
        client = aioredis.Redis.from_url(cluster.bus)
        listener = client.pubsub()
        try:
            await listener.subscribe(f"{redis_prefix}:inbox:newer")
            frame = msgpack.packb(
                {"type": "draw", "rid": 5, "game_id": "g", "token": "t", "future": 1}
            )
            envelope = {
                "op": "req", "fid": 1, "conn": "k1", "player": ["p-x", "eve", False, "::1"],
                "watching": [], "tokens": 10.0, "frame": frame, "sub": False, "from": "newer",
            }  # fmt: skip
            await client.publish(f"{redis_prefix}:inbox:{owner.name}", pack(envelope))
            async with asyncio.timeout(10):
                while True:
                    message = await listener.get_message(ignore_subscribe_messages=True, timeout=1)
                    if message is not None:
                        break
            done = unpack(message["data"])
            assert done["op"] == "done" and done["fid"] == 1, done
            (error,) = [decode_server(f) for f in done["frames"]]
            assert isinstance(error, Error) and (error.code, error.rid) == ("bad_field", 5), error
        finally:
            await listener.aclose()
            await client.aclose()
        assert await owner.stop() == 0


async def test_the_caps_on_unfinished_games_count_every_nodes_games(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A player at its cap on node a is refused on node b with the error of one node; the
    address's cap counts the games of its players on both; a game ended on a frees its
    place on b."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a, b = await cluster.start_pair("--max-games-per-player", "2", "--max-games-per-ip", "3")
        ada = await a.connect("ada")
        games = [
            await ada.request(CreateGame, game="tictactoe", opponent="human") for _ in range(2)
        ]
        ada_b = await b.connect("ada", session=ada.session)
        with pytest.raises(RequestFailed, match="too_many.*2 unfinished games per player"):
            await ada_b.request(CreateGame, game="tictactoe", opponent="human")
        bo = await b.connect("bo")
        await bo.request(CreateGame, game="tictactoe", opponent="human")
        with pytest.raises(RequestFailed, match="too_many.*3 unfinished games per address"):
            await bo.request(CreateGame, game="tictactoe", opponent="human")
        await ada.request(Abort, game_id=games[0].game_id, token=games[0].token)
        # The owner takes the ended game out of the counts just after its commit.
        assert ada.welcome is not None
        held = f"{redis_prefix}:open:p:{ada.welcome.player_id}"
        redis = aioredis.from_url(REDIS_URL)
        try:
            while games[0].game_id.encode() in await redis.zrange(held, 0, -1):
                await asyncio.sleep(0.05)
        finally:
            await redis.aclose()
        await ada_b.request(CreateGame, game="tictactoe", opponent="human")  # its place freed
        for client in (ada, ada_b, bo):
            await client.close()


async def test_a_player_back_on_another_node_is_welcomed_with_every_nodes_games(
    two_nodes: Cluster,
) -> None:
    """welcome.games lists the player's seats in games other nodes own, with tokens that
    work from its new node."""
    a, b = two_nodes.nodes
    ada, bo = await a.connect("ada"), await a.connect("bo")
    created = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
    await bo.request(JoinGame, game_id=created.game_id)
    assert await two_nodes.owner_of(created.game_id) == a.name
    await ada.close()
    back = await b.connect("ada", session=ada.session)
    assert back.welcome is not None
    (seat,) = back.welcome.games
    assert (seat["game_id"], seat["seat"]) == (created.game_id, 0) and seat["seq"] >= 1
    resumed = await back.request(Resume, game_id=created.game_id, since=seat["seq"])
    assert isinstance(resumed, Resumed)
    await _play(back, seat["token"], created.game_id, 4)
    assert (await _heard(bo, 0)).action == 4
    for client in (back, bo):
        await client.close()


async def _subscribers(prefix: str, game_id: str) -> int:
    """How many Redis connections (nodes) receive the game's channel."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        [(_, count)] = await client.pubsub_numsub(f"{prefix}:game:{game_id}")
    finally:
        await client.aclose()
    return int(count)


async def _until_subscribers(prefix: str, game_id: str, count: int) -> None:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 10
    while await _subscribers(prefix, game_id) != count:
        assert loop.time() < give_up, f"game {game_id}: not {count} subscribers in 10 s"
        await asyncio.sleep(0.02)


async def test_a_node_receives_a_game_only_while_it_follows_it(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        await cluster.start_pair("--keep-finished-s", "0.3")
        first, second = cluster.nodes
        ada, bo = await first.connect("ada"), await second.connect("bo")
        created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
        game_id = created.game_id
        assert await cluster.owner_of(game_id) == first.name  # created in a shard of its own
        assert await _subscribers(redis_prefix, game_id) == 0  # nobody elsewhere follows it
        joined = await bo.request(JoinGame, game_id=game_id)
        # bo's node subscribed before forwarding the join; the owner publishes only.
        assert await _subscribers(redis_prefix, game_id) == 1
        players = [(ada, created.token), (bo, joined.token)]
        # A win in a row (0, 1, 2, 3): the forwarded moves are acknowledged from the event.
        for ply, action in enumerate([0, 5, 1, 6, 2, 7, 3]):
            mover, token = players[ply % 2]
            await _play(mover, token, game_id, action)
            await _heard(players[1 - ply % 2][0], ply)
        # Over, and evicted by its owner: bo's node stops following it (bo still connected).
        await _until_subscribers(redis_prefix, game_id, 0)
        await ada.close()
        await bo.close()


async def test_quick_pairing_pairs_players_of_two_nodes(two_nodes: Cluster) -> None:
    first, second = two_nodes.nodes
    ada, bo = await first.connect("ada"), await second.connect("bo")
    waiting = await ada.request(QuickPair, game="tictactoe", ai_after_s=0)
    assert isinstance(waiting, SeekPosted) and not ada.seats
    posted = await bo.request(QuickPair, game="tictactoe", ai_after_s=0)
    assert isinstance(posted, SeekPosted)
    # Paired through the cluster's one queue: both seated in one game, on bo's node.
    ada_seat = await asyncio.wait_for(_seated(ada), 10)
    bo_seat = await asyncio.wait_for(_seated(bo), 10)
    assert ada_seat.game_id == bo_seat.game_id and {ada_seat.seat, bo_seat.seat} == {0, 1}
    game_id = ada_seat.game_id
    assert await two_nodes.owner_of(game_id) == second.name
    for client in (ada, bo):
        start = await next_event(client, Snapshot)
        assert start.game_id == game_id and start.status == "live"
    players = {ada_seat.seat: (ada, ada_seat.token), bo_seat.seat: (bo, bo_seat.token)}
    for ply, action in enumerate([4, 0]):
        mover, token = players[ply % 2]
        await _play(mover, token, game_id, action)
        await _heard(players[1 - ply % 2][0], ply)
    # The queue kept nothing of theirs: the next two players are paired with each other.
    cy, dee = await first.connect("cy"), await second.connect("dee")
    await cy.request(QuickPair, game="tictactoe", ai_after_s=0)
    await dee.request(QuickPair, game="tictactoe", ai_after_s=0)
    await asyncio.wait_for(_seated(cy), 10)
    start = await next_event(dee, Snapshot)
    assert {p["name"] for p in start.players if p} == {"cy", "dee"}
    for client in (ada, bo, cy, dee):
        await client.close()


async def test_quick_pairing_across_nodes_skips_a_partner_at_its_cap(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A quick entry taken from the cluster's queue is paired only if its player still has
    room for a game, as on one node (5a86599): ada queued on node a, then reached her cap;
    bo's entry on node b is not paired with hers (she is told too_many) and waits for the
    next player. The cluster's pairing skipped the check: ada had 3 unfinished games of 2."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a, b = await cluster.start_pair("--max-games-per-player", "2")
        ada, bo = await a.connect("ada"), await b.connect("bo")
        await ada.request(QuickPair, game="5x5", ai_after_s=0)
        for _ in range(2):
            await ada.request(CreateGame, game="tictactoe", opponent="human")
        await bo.request(QuickPair, game="5x5", ai_after_s=0)
        await bo.request(Ping)  # answered after the seated a pairing would have sent
        assert not bo.seats
        told = await asyncio.wait_for(ada.errors.get(), 10)
        assert told.code == "too_many" and "2 unfinished games per player" in told.message
        assert len(ada.seats) == 2
        # ada's entry left the queue; bo's waits in it, for the next player.
        cy = await a.connect("cy")
        await cy.request(QuickPair, game="5x5", ai_after_s=0)
        cy_seat = await asyncio.wait_for(_seated(cy), 10)
        bo_seat = await asyncio.wait_for(_seated(bo), 10)
        assert cy_seat.game_id == bo_seat.game_id and len(ada.seats) == 2
        for client in (ada, bo, cy):
            await client.close()


async def test_quick_pairing_pairs_a_partner_whose_node_this_node_saw_late(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """a stalls longer than presence_ttl_s (a loaded machine: SIGSTOP here) and b's
    heartbeat meanwhile finds it missing; a is back, but b sees it again only at its next
    beat. bo on b was paired with ada's waiting entry then: b did not see a among the live
    nodes and dropped the entry for good (ada waited for ever, bo was queued beside nobody:
    test_quick_pairing_pairs_players_of_two_nodes failed so now and then). b now looks for
    a in Redis's presence: a is alive, and bo and ada are paired. (b beats once an hour
    here, when the test says: its view of the live nodes stays the one it last read.)"""
    settings = replace(ServerSettings(), heartbeat_s=3600.0, presence_ttl_s=7200.0)
    b_name = f"b-{redis_prefix}"
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a = await cluster.start("a")
        async with _node_in_process(b_name, pg_schema, redis_prefix, settings) as (b, b_url):
            await cluster.wait_balanced(names={a.name, b_name})
            assert b.cluster is not None
            admin = aioredis.from_url(REDIS_URL)
            try:
                a.process.send_signal(signal.SIGSTOP)
                try:  # a's presence expires (as after presence_ttl_s), and b beats
                    await admin.delete(f"{redis_prefix}:presence:{a.name}")
                    await b.cluster._heartbeat()
                finally:
                    a.process.send_signal(signal.SIGCONT)
                async with asyncio.timeout(10):  # a beats again
                    while not await admin.exists(f"{redis_prefix}:presence:{a.name}"):
                        await asyncio.sleep(0.05)
            finally:
                await admin.aclose()
            assert a.name not in b.cluster.present  # (until b's next beat)
            ada = await a.connect("ada")
            bo = await ServerConnection.connect(b_url, name="bo")
            await ada.request(QuickPair, game="tictactoe", ai_after_s=0)
            await bo.request(QuickPair, game="tictactoe", ai_after_s=0)
            bo_seat = await asyncio.wait_for(_seated(bo), 10)
            ada_seat = await asyncio.wait_for(_seated(ada), 10)
            assert ada_seat.game_id == bo_seat.game_id
            assert {ada_seat.seat, bo_seat.seat} == {0, 1}
            for client in (ada, bo):
                await client.close()


async def test_a_node_taken_for_gone_posts_its_seeks_again_when_it_beats(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """a stalls longer than presence_ttl_s (SIGSTOP here) and b's heartbeat finds it
    missing: b takes a for gone, its seeks leave b's lobby and Redis. a was back at its
    next beat, but its seek was on no other node for good (no one there could see or take
    it: a test's seek on a loaded machine could vanish so). a's beat now finds that its
    presence had expired, and its seeks are posted again and announced."""
    settings = replace(ServerSettings(), heartbeat_s=3600.0, presence_ttl_s=7200.0)
    b_name = f"b-{redis_prefix}"
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a = await cluster.start("a")
        async with _node_in_process(b_name, pg_schema, redis_prefix, settings) as (b, b_url):
            await cluster.wait_balanced(names={a.name, b_name})
            assert b.cluster is not None
            ada = await a.connect("ada")
            bo = await ServerConnection.connect(b_url, name="bo")
            await bo.request(LobbySubscribe)
            posted = await ada.request(Seek, game="tictactoe")
            await _sees_seek(bo, posted.seek_id)
            admin = aioredis.from_url(REDIS_URL)
            try:
                a.process.send_signal(signal.SIGSTOP)
                try:  # a's presence expires (as after presence_ttl_s), and b beats
                    await admin.delete(f"{redis_prefix}:presence:{a.name}")
                    b.cluster._unseen_until = 0.0  # (b's start is presence_ttl_s behind it)
                    await b.cluster._heartbeat()
                    async with asyncio.timeout(10):  # gone from b's lobby and from Redis
                        while posted.seek_id in b.lobby.seeks or await admin.hexists(
                            f"{redis_prefix}:seeks", posted.seek_id
                        ):
                            await asyncio.sleep(0.05)
                finally:
                    a.process.send_signal(signal.SIGCONT)
                async with asyncio.timeout(10):  # (before: never again)
                    while posted.seek_id not in b.lobby.seeks:
                        await asyncio.sleep(0.05)
                assert await admin.hexists(f"{redis_prefix}:seeks", posted.seek_id)
            finally:
                await admin.aclose()
            await b.cluster._heartbeat()  # (b sees a alive again: a's seek can be taken)
            cy = await ServerConnection.connect(b_url, name="cy")
            listed = (await cy.request(LobbySubscribe)).seeks
            assert posted.seek_id in {seek["seek_id"] for seek in listed}
            await cy.close()
            seated = await bo.request(AcceptSeek, seek_id=posted.seek_id)
            assert isinstance(seated, Seated)
            assert (await next_event(ada, Snapshot)).game_id == seated.game_id
            for client in (ada, bo):
                await client.close()


async def test_a_node_taken_for_gone_queues_its_quick_entries_again_when_it_beats(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """As above, for a quick-pairing entry: b dropped it from Redis's queue, and a, back,
    never queued it again: bo, asking next, was queued alone and ada waited. a's beat
    finds that its presence had expired and queues its entries again: they are paired."""
    settings = replace(ServerSettings(), heartbeat_s=3600.0, presence_ttl_s=7200.0)
    b_name = f"b-{redis_prefix}"
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a = await cluster.start("a")
        async with _node_in_process(b_name, pg_schema, redis_prefix, settings) as (b, b_url):
            await cluster.wait_balanced(names={a.name, b_name})
            assert b.cluster is not None
            ada = await a.connect("ada")
            await ada.request(QuickPair, game="tictactoe", ai_after_s=0)
            entries = f"{redis_prefix}:quick-entries"
            admin = aioredis.from_url(REDIS_URL)
            try:
                assert await admin.hlen(entries) == 1
                a.process.send_signal(signal.SIGSTOP)
                try:  # a's presence expires (as after presence_ttl_s), and b beats
                    await admin.delete(f"{redis_prefix}:presence:{a.name}")
                    b.cluster._unseen_until = 0.0  # (b's start is presence_ttl_s behind it)
                    await b.cluster._heartbeat()
                    async with asyncio.timeout(10):  # ada's entry out of Redis
                        while await admin.hlen(entries):
                            await asyncio.sleep(0.05)
                finally:
                    a.process.send_signal(signal.SIGCONT)
                async with asyncio.timeout(10):  # (before: never again)
                    while not await admin.hlen(entries):
                        await asyncio.sleep(0.05)
            finally:
                await admin.aclose()
            await b.cluster._heartbeat()  # (b sees a alive again)
            bo = await ServerConnection.connect(b_url, name="bo")
            await bo.request(QuickPair, game="tictactoe", ai_after_s=0)
            bo_seat = await asyncio.wait_for(_seated(bo), 10)
            ada_seat = await asyncio.wait_for(_seated(ada), 10)
            assert ada_seat.game_id == bo_seat.game_id
            for client in (ada, bo):
                await client.close()


async def test_a_challenge_by_player_id_reaches_a_player_of_another_node_or_offline(
    two_nodes: Cluster,
) -> None:
    """A challenge's ``to`` is a player id or a name, and reaches its player on any node,
    online or not, as by name it did: by id it reached only a player online on the
    challenger's node (bad_request: no player, for bo on the other node, cy offline)."""
    a, b = two_nodes.nodes
    ada, bo = await a.connect("ada"), await b.connect("bo")
    await bo.request(LobbySubscribe)
    posted = await ada.request(Seek, game="tictactoe", to=bo.player_id)
    await _sees_seek(bo, posted.seek_id)
    seated = await bo.request(AcceptSeek, seek_id=posted.seek_id)
    assert isinstance(seated, Seated)
    start = await next_event(ada, Snapshot)
    assert start.game_id == seated.game_id and start.status == "live"
    robot, cy = await b.connect("robot", bot=True), await b.connect("cy")
    with pytest.raises(RequestFailed, match="bad_request: p-.* is a bot.*humans only"):
        await ada.request(Seek, game="5x5", to=robot.player_id, opponents="humans")
    cy_id, cy_session = cy.player_id, cy.session
    await cy.close()  # offline: it sees the challenge when it is back
    posted = await ada.request(Seek, game="5x5", to=cy_id)
    back = await b.connect("cy", session=cy_session)
    assert posted.seek_id in {s["seek_id"] for s in (await back.request(LobbySubscribe)).seeks}
    for client in (ada, bo, robot, back):
        await client.close()


async def test_the_lobby_and_list_show_the_live_games_of_every_node(two_nodes: Cluster) -> None:
    first, second = two_nodes.nodes
    ada, bo = await first.connect("ada"), await first.connect("bo")  # both on node a
    created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    await bo.request(JoinGame, game_id=created.game_id)
    game_id = created.game_id
    cy = await second.connect("cy")
    give_up = asyncio.get_running_loop().time() + 10
    while True:  # until node b heard of the game's start (the lobby channel)
        listed = await cy.request(ListGames, status="live")
        if any(g["game_id"] == game_id for g in listed.games):
            break
        assert asyncio.get_running_loop().time() < give_up, "the game is not listed on node b"
        await asyncio.sleep(0.02)
    state = await cy.request(LobbySubscribe)
    assert isinstance(state, LobbyState) and [g["game_id"] for g in state.games] == [game_id]
    await ada.request(Resign, game_id=game_id, token=created.token)
    while True:  # and its end: it leaves node b's lobby
        event = await asyncio.wait_for(cy.lobby_events.get(), 10)
        if isinstance(event, LobbyEvent) and event.kind == "game_removed":
            assert event.game_id == game_id
            break
    for client in (ada, bo, cy):
        await client.close()


async def test_a_game_listed_on_another_node_shows_its_current_ply(
    two_nodes: Cluster, redis_prefix: str
) -> None:
    """The summary of a live game owned elsewhere (``list``, the lobby, the live games'
    index) follows its moves, as the owner's own does, not its start (ply 0)."""
    first, second = two_nodes.nodes
    ada, bo = await first.connect("ada"), await first.connect("bo")  # both on node a
    created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    joined = await bo.request(JoinGame, game_id=created.game_id)
    game_id = created.game_id
    players = [(ada, created.token), (bo, joined.token)]
    for ply, action in enumerate(LONG_GAME[:3]):
        mover, token = players[ply % 2]
        await _play(mover, token, game_id, action)
    cy = await second.connect("cy")
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 10
    while True:  # the owner updates the summaries of its games every heartbeat (0.5 s)
        listed = await cy.request(ListGames, status="live")
        plies = [g["ply"] for g in listed.games if g["game_id"] == game_id]
        if plies == [3]:
            break
        assert loop.time() < give_up, f"game {game_id} listed on node b with plies {plies}"
        await asyncio.sleep(0.05)
    state = await cy.request(LobbySubscribe)
    assert isinstance(state, LobbyState)
    assert [(g["game_id"], g["ply"]) for g in state.games] == [(game_id, 3)]
    redis = aioredis.from_url(REDIS_URL)
    try:  # and in the index, for the nodes to come
        while True:
            entry = await redis.hget(f"{redis_prefix}:live", game_id)
            assert isinstance(entry, bytes), entry
            if unpack(entry)["summary"]["ply"] == 3:
                break
            assert loop.time() < give_up, f"game {game_id} indexed at ply {unpack(entry)}"
            await asyncio.sleep(0.05)
    finally:
        await redis.aclose()
    for client in (ada, bo, cy):
        await client.close()


async def test_an_ended_games_index_entry_left_by_a_dead_owner_is_swept(
    two_nodes: Cluster, redis_prefix: str
) -> None:
    """The owner of a game died after the game ended, before it took the game out of the
    live-games index: the node taking its shard removes the entry."""
    a, b = two_nodes.nodes
    ada, bo = await a.connect("ada"), await a.connect("bo")
    created = await ada.request(CreateGame, game="tictactoe", opponent="human")
    await bo.request(JoinGame, game_id=created.game_id)
    live = f"{redis_prefix}:live"
    redis = aioredis.from_url(REDIS_URL)
    try:
        while (entry := await redis.hget(live, created.game_id)) is None:
            await asyncio.sleep(0.05)
        await ada.request(Resign, game_id=created.game_id, token=created.token)
        while await redis.hexists(live, created.game_id):
            await asyncio.sleep(0.05)
        await redis.hset(live, created.game_id, entry)  # as if the owner died before its HDEL
        a.kill()
        await two_nodes.wait_owned(created.game_id, {b.name})
        while await redis.hexists(live, created.game_id):
            await asyncio.sleep(0.05)
    finally:
        await redis.aclose()
    carol = await b.connect("carol")
    listed = await carol.request(ListGames, status="live")
    assert created.game_id not in {g["game_id"] for g in listed.games}
    for client in (ada, bo, carol):
        await client.close()


async def test_list_open_shows_the_open_games_of_every_node(two_nodes: Cluster) -> None:
    a, b = two_nodes.nodes
    ada, bo = await a.connect("ada"), await b.connect("bo")
    created = await ada.request(CreateGame, game="tictactoe", opponent="human")
    hidden = await ada.request(CreateGame, game="tictactoe", opponent="human", private=True)
    while True:  # indexed by its owner just after its creation
        listed = {g["game_id"] for g in (await bo.request(ListGames, status="open")).games}
        if created.game_id in listed:
            break
        await asyncio.sleep(0.1)
    assert hidden.game_id not in listed
    await bo.request(JoinGame, game_id=created.game_id)
    while created.game_id in {
        g["game_id"] for g in (await bo.request(ListGames, status="open")).games
    }:
        await asyncio.sleep(0.1)  # out of the index once started
    for client in (ada, bo):
        await client.close()


async def _redis_stat(port: int, field: str) -> int:
    """A counter of ``INFO stats`` of the redis-server on ``port`` (bytes in or out)."""
    client = aioredis.Redis(host="127.0.0.1", port=port)
    try:
        return int((await client.info("stats"))[field])
    finally:
        await client.aclose()


async def test_resumes_through_another_node_are_charged_by_size_and_bound_the_bus(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A spectator on node b resuming a long game owned by node a paid one token a resume:
    209 resumes in 1.5 s made a publish 7 MB into Redis for it. Its reply's size is charged
    at the owner and owed on its node, which refuses its next requests until it is paid:
    the owner publishes no reply that node did not let through."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        rate, burst = 0.5, 60
        a, b = await cluster.start_pair("--rate", str(rate), "--burst", str(burst))
        ada, bo = await a.connect("ada"), await b.connect("bo")
        created = await ada.request(
            CreateGame, game="mnk", params={"m": 10, "n": 10, "k": 10}, opponent="human", seat=0
        )
        game_id = created.game_id
        joined = await bo.request(JoinGame, game_id=game_id)
        assert await cluster.owner_of(game_id) == a.name
        players = [(ada, created.token), (bo, joined.token)]
        for ply in range(60):  # cells 0..59 in order: no row, column or diagonal of 10
            mover, token = players[ply % 2]
            await _play(mover, token, game_id, ply)
        loop = asyncio.get_running_loop()
        started = loop.time()
        eve = await RawClient.connect(b.url)
        await eve.send_message(Resume(rid=1, game_id=game_id, since=1))
        answers, reply_bytes = await eve.answers({1})
        assert isinstance(answers[1], Resumed)
        reply_kib = reply_bytes / 1024
        assert reply_kib > 4  # 60 moves' events
        published = await _redis_stat(redis.port, "total_net_input_bytes")
        rids = set(range(2, 32))
        for rid in sorted(rids):
            await eve.send_message(Resume(rid=rid, game_id=game_id, since=1))
        answers, _ = await eve.answers(rids)
        elapsed = loop.time() - started
        published = await _redis_stat(redis.port, "total_net_input_bytes") - published
        served = sum(isinstance(m, Resumed) for m in answers.values())
        refused = [m for m in answers.values() if isinstance(m, Error)]
        assert refused and {m.code for m in refused} == {"rate_limited"}
        # What eve's bucket held (a burst, and its refill), and the last reply's debt.
        assert (1 + served) * reply_kib <= burst + rate * elapsed + reply_kib
        # Into Redis: the replies served (with their requests), and the nodes' heartbeats.
        assert published <= (served + 2) * reply_bytes + 32 * 1024, (published, served)
        for client in (ada, bo):
            await client.close()
        await eve.close()


async def test_list_open_reads_from_redis_what_its_page_needs(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """`list open limit=1` on a node holding no open game read the whole cluster's index
    of open games from Redis (16.9 kB a request with 100 games on another node), its cost
    growing with every open game, unseen by the rate limit. It reads what its page needs."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        a, b = await cluster.start_pair()
        posters = [await b.connect(f"poster{i}") for i in range(3)]
        created = {
            (await poster.request(CreateGame, game="gomoku", opponent="human")).game_id
            for poster in posters
            for _ in range(20)
        }
        index = aioredis.Redis(host="127.0.0.1", port=redis.port)
        try:
            while await index.hlen(f"{redis_prefix}:open-games") < len(created):
                await asyncio.sleep(0.05)  # indexed by their owner just after their creation
            index_bytes = sum(
                map(len, (await index.hgetall(f"{redis_prefix}:open-games")).values())
            )
        finally:
            await index.aclose()
        carol = await a.connect("carol")
        everything = await carol.request(ListGames, status="open", limit=100)
        assert {g["game_id"] for g in everything.games} == created
        requests = 20
        sent = await _redis_stat(redis.port, "total_net_output_bytes")
        for _ in range(requests):
            page = await carol.request(ListGames, status="open", limit=1)
            assert len(page.games) == 1 and page.games[0]["game_id"] in created
        sent = await _redis_stat(redis.port, "total_net_output_bytes") - sent
        # A page of one game, not the index's 60 (and the nodes' heartbeats meanwhile).
        assert sent < requests * index_bytes / 5, (sent, index_bytes)
        for client in (*posters, carol):
            await client.close()


async def _sees_seek(client: ServerConnection, seek_id: str) -> None:
    """Wait until ``client``'s lobby lists ``seek_id`` (it subscribed before)."""
    while True:
        event = await asyncio.wait_for(client.lobby_events.get(), 10)
        if isinstance(event, LobbyState) and any(s["seek_id"] == seek_id for s in event.seeks):
            return
        if isinstance(event, LobbyEvent) and event.kind == "seek_added":
            if event.seek is not None and event.seek["seek_id"] == seek_id:
                return


async def test_two_accepters_on_two_nodes_race_for_one_seek(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a, b, c = [await cluster.start(name) for name in "abc"]
        await cluster.wait_balanced()
        ada = await a.connect("ada")
        bo, cy = await b.connect("bo"), await c.connect("cy")
        for accepter in (bo, cy):
            await accepter.request(LobbySubscribe)
        posted = await ada.request(Seek, game="tictactoe")
        assert isinstance(posted, SeekPosted)
        for accepter in (bo, cy):  # the seek reached both nodes' lobbies
            await _sees_seek(accepter, posted.seek_id)
        results = await asyncio.gather(
            bo.request(AcceptSeek, seek_id=posted.seek_id),
            cy.request(AcceptSeek, seek_id=posted.seek_id),
            return_exceptions=True,
        )
        won = [r for r in results if isinstance(r, Seated)]
        lost = [r for r in results if isinstance(r, RequestFailed)]
        assert len(won) == 1 and len(lost) == 1, results
        assert lost[0].code == "unknown_seek"
        # The seek's owner, on a third node, is seated in the game and hears its start.
        seated = await asyncio.wait_for(_seated(ada), 10)
        assert seated.game_id == won[0].game_id and seated.seat == 1 - won[0].seat
        start = await next_event(ada, Snapshot)
        assert start.game_id == won[0].game_id and start.status == "live"
        for client in (ada, bo, cy):
            await client.close()


async def test_the_seeks_of_a_killed_node_leave_the_other_nodes_lobbies(
    two_nodes: Cluster, redis_prefix: str
) -> None:
    a, b = two_nodes.nodes
    ada, bo = await a.connect("ada"), await b.connect("bo")
    await bo.request(LobbySubscribe)
    posted = await ada.request(Seek, game="tictactoe")
    await _sees_seek(bo, posted.seek_id)
    a.kill()
    while True:  # once a's presence expired (presence_ttl_s)
        event = await asyncio.wait_for(bo.lobby_events.get(), 10)
        if isinstance(event, LobbyEvent) and event.kind == "seek_removed":
            assert event.seek_id == posted.seek_id
            break
    redis = aioredis.from_url(REDIS_URL)
    try:  # and out of the cluster's seeks
        give_up = asyncio.get_running_loop().time() + 10
        while await redis.hexists(f"{redis_prefix}:seeks", posted.seek_id):
            assert asyncio.get_running_loop().time() < give_up, "the seek stayed in Redis"
            await asyncio.sleep(0.05)
    finally:
        await redis.aclose()
    for client in (ada, bo):
        await client.close()


async def _lobby_keys(redis: aioredis.Redis, prefix: str) -> set[str]:
    """The cluster's quick-pairing keys (a queue per game, parameters and clock, and the
    entries' data) and its seeks' hash, as they are in Redis now."""
    keys = [k async for k in redis.scan_iter(match=f"{prefix}:quick*")]
    keys += [k async for k in redis.scan_iter(match=f"{prefix}:seeks")]
    return {k.decode() for k in keys}


async def _until_no_lobby_keys(redis: aioredis.Redis, prefix: str) -> None:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 10
    while keys := await _lobby_keys(redis, prefix):
        assert loop.time() < give_up, f"still in Redis 10 s after the node died: {keys}"
        await asyncio.sleep(0.05)


def _clock(initial_s: int) -> dict[str, int]:
    return {"initial_ms": initial_s * 1000, "increment_ms": 0}


async def test_the_quick_entries_of_a_killed_node_leave_redis_and_pair_nobody(
    two_nodes: Cluster, redis_prefix: str
) -> None:
    """A node killed -9 leaves its quick-pairing entries in Redis: they go once its
    presence expired (presence_ttl_s), as its seeks do, and a player asking later, with
    the node started again under its name, is queued, not seated against a player who is
    gone. A probe found every entry in Redis for good (a clock nobody else asks for keeps
    its queue), and a later player seated against the dead entry's player."""
    a, b = two_nodes.nodes
    ada = await a.connect("ada")
    for initial_s in (61, 62):  # two queues
        await ada.request(QuickPair, game="tictactoe", clock=_clock(initial_s), ai_after_s=0)
    redis = aioredis.from_url(REDIS_URL)
    try:
        assert len(await _lobby_keys(redis, redis_prefix)) == 3  # the queues, the entries
        a.kill()
        await _until_no_lobby_keys(redis, redis_prefix)
        assert not await redis.exists(f"{redis_prefix}:presence:{a.name}")
    finally:
        await redis.aclose()
    await a.process.wait()
    again = await two_nodes.start("a")
    await two_nodes.wait_balanced()
    # b forwards to the new a (a join of a game of a's): b holds a among the live nodes.
    cy, dee = await again.connect("cy"), await b.connect("dee")
    created = await cy.request(CreateGame, game="tictactoe", opponent="human")
    await dee.request(JoinGame, game_id=created.game_id)
    bo = await b.connect("bo")
    posted = await bo.request(QuickPair, game="tictactoe", clock=_clock(61), ai_after_s=0)
    assert isinstance(posted, SeekPosted)
    await bo.request(Ping)  # answered after the seated a pairing would have sent
    assert not bo.seats
    for client in (ada, bo, cy, dee):
        await client.close()


async def test_a_node_started_again_under_its_name_drops_what_its_earlier_life_left(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A lone node killed -9 (nobody saw its presence expire) and started again under its
    name drops the seeks and quick entries its earlier life left in Redis as it joins;
    and a node starting when nobody of the cluster is left drops what the dead left once
    their presence expired. Both stayed in Redis for good."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a = await cluster.start("a")
        ada = await a.connect("ada")
        await ada.request(QuickPair, game="tictactoe", clock=_clock(61), ai_after_s=0)
        await ada.request(Seek, game="tictactoe")
        redis = aioredis.from_url(REDIS_URL)
        try:
            assert len(await _lobby_keys(redis, redis_prefix)) == 3
            a.kill()
            await a.process.wait()
            a = await cluster.start("a")
            assert await _lobby_keys(redis, redis_prefix) == set()  # gone as it joined
            bo = await a.connect("bo")
            await bo.request(QuickPair, game="tictactoe", clock=_clock(61), ai_after_s=0)
            await bo.request(Ping)
            assert not bo.seats  # queued
            await bo.request(Seek, game="tictactoe")
            a.kill()
            await a.process.wait()
            await cluster.start("b")
            await _until_no_lobby_keys(redis, redis_prefix)
        finally:
            await redis.aclose()
        for client in (ada, bo):
            await client.close()


async def _seated(client: ServerConnection) -> Seated:
    """The ``seated`` a client gets without asking (its seek accepted)."""
    while True:
        if client.seats:
            game_id, (seat, token) = next(iter(client.seats.items()))
            return Seated(game_id=game_id, seat=seat, token=token)
        await asyncio.sleep(0.01)


async def _redis_server(port: int, directory: Path) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", str(directory),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    client = aioredis.Redis(host="127.0.0.1", port=port)
    try:
        for _ in range(200):
            try:
                await client.ping()
                return process
            except (RedisError, OSError):
                await asyncio.sleep(0.05)
    finally:
        await client.aclose()
    process.kill()
    raise TimeoutError(f"redis-server on port {port} did not start")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class OwnRedis:
    """A redis-server of the test's own, on a free port, to stop and start again."""

    directory: Path
    port: int = field(default_factory=lambda: _free_port())
    process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await _redis_server(self.port, self.directory)

    async def pause_writes(self, ms: int) -> None:
        """Hold every write (a script too) for ``ms`` (CLIENT PAUSE WRITE); reads go on."""
        client = aioredis.Redis(host="127.0.0.1", port=self.port)
        try:
            await client.client_pause(ms, all=False)
        finally:
            await client.aclose()

    @contextlib.asynccontextmanager
    async def stalled(self) -> AsyncIterator[None]:
        """Redis alive but answering nothing in the block (SIGSTOP: a hung host, a network
        partition); it answers again at its end (SIGCONT), however the block ends."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.process.send_signal(signal.SIGCONT)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


@contextlib.asynccontextmanager
async def _cluster_on_own_redis(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> AsyncIterator[tuple[Cluster, OwnRedis]]:
    """A cluster (no node started yet) whose bus is a redis-server of the test's own."""
    if shutil.which("redis-server") is None:
        pytest.skip(REDIS_SERVER_HINT)
    redis = OwnRedis(tmp_path)
    await redis.start()
    try:
        async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
            cluster.bus = f"redis://127.0.0.1:{redis.port}/0"
            yield cluster, redis
    finally:
        await redis.stop()


async def _until_open_listed(client: ServerConnection, game_id: str) -> None:
    """Until ``client``'s node lists the open game (10 s at most)."""
    async with asyncio.timeout(10):
        while game_id not in {
            game["game_id"] for game in (await client.request(ListGames, status="open")).games
        }:
            await asyncio.sleep(0.2)  # (a list costs 10 tokens: under the rate limit)


async def _creates_at_once(clients: list[ServerConnection], each: int) -> tuple[set[str], set[str]]:
    """``each`` creates from every client, all sent at once: the games seated, and the
    refusals (every other answer fails)."""
    answers = await asyncio.gather(
        *(
            client.request(CreateGame, game="tictactoe", opponent="human", private=True)
            for client in clients
            for _ in range(each)
        ),
        return_exceptions=True,
    )
    seated = {a.game_id for a in answers if isinstance(a, Seated)}
    refused = {a.message for a in answers if isinstance(a, RequestFailed) and a.code == "too_many"}
    assert all(isinstance(a, Seated | RequestFailed) for a in answers), answers
    assert all(isinstance(a, Seated) or a.code == "too_many" for a in answers), answers
    return seated, refused


async def _open_in_redis(url: str, prefix: str, key: str) -> set[str]:
    """The games a cap's sorted set in Redis counts (``key``: ``p:PLAYER``, ``a:ADDRESS``)."""
    redis = aioredis.from_url(url)
    try:
        return {g.decode() for g in await redis.zrange(f"{prefix}:open:{key}", 0, -1)}
    finally:
        await redis.aclose()


async def test_one_sessions_creates_sent_at_once_to_two_nodes_stop_at_its_cap(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A probe's finding: a node read the counts in Redis, and a new game was counted only
    once created, so creates at once all passed the check (one session's 10 connections on
    two nodes held 22 unfinished games of 20). The check and the new game's place in the
    counts are one script run in Redis now. Redis holds its writes for a second (as one
    slow to answer would) while one session's creates are sent at once through 16
    connections on both nodes: the cap held, the rest refused, and Redis counts exactly
    the games seated (a refused create left nothing there, nor one refused after the
    check, against an AI that these nodes have no engine for)."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        a, b = await cluster.start_pair("--max-games-per-player", "3")
        ada = await a.connect("ada")
        with pytest.raises(RequestFailed, match="engine_unavailable"):
            await ada.request(CreateGame, game="tictactoe", opponent="ai")
        clients = [ada] + [
            await (a, b)[i % 2].connect("ada", session=ada.session) for i in range(15)
        ]
        await redis.pause_writes(1000)
        seated, refused = await _creates_at_once(clients, 2)
        assert len(seated) == 3 and refused == {"limit: at most 3 unfinished games per player"}
        assert ada.welcome is not None
        held = await _open_in_redis(cluster.bus, redis_prefix, f"p:{ada.welcome.player_id}")
        assert held == seated
        for client in clients:
            await client.close()


async def test_an_addresss_creates_sent_at_once_to_two_nodes_stop_at_its_cap(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """The same per address (a probe held 107 unfinished games of 100 on 127.0.0.1): 20
    players of one address on both nodes, their creates sent at once."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        a, b = await cluster.start_pair("--max-games-per-ip", "5")
        clients = [await (a, b)[i % 2].connect(f"p{i}") for i in range(20)]
        await redis.pause_writes(1000)
        seated, refused = await _creates_at_once(clients, 2)
        assert len(seated) == 5, seated
        assert refused == {"limit: at most 5 unfinished games per address; finish or abort some"}
        assert await _open_in_redis(cluster.bus, redis_prefix, "a:127.0.0.1") == seated
        for client in clients:
            await client.close()


async def test_redis_restarted_mid_game_what_it_lost_is_recovered_by_seq(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        await cluster.start_pair()
        ada, bo, game_id, ada_token, bo_token = await _two_player_game(cluster)
        players = [(ada, ada_token), (bo, bo_token)]
        owner = await cluster.owner_of(game_id)
        local = 0 if owner == cluster.nodes[0].name else 1  # the seat on the owner node
        ply = 0
        while ply % 2 != local or ply < 2:  # a few moves, then the local player's turn
            mover, token = players[ply % 2]
            await _play(mover, token, game_id, LONG_GAME[ply])
            ply += 1
        await _heard(players[1 - local][0], ply - 1)
        # A seek of ada's, in both nodes' lobbies (and in the Redis about to be lost).
        await bo.request(LobbySubscribe)
        posted = await ada.request(Seek, game="tictactoe")
        await _sees_seek(bo, posted.seek_id)
        # And an open game of ada's node, in bo's node's list of open games.
        waiting = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        await _until_open_listed(bo, waiting.game_id)
        await redis.stop()
        # Redis is down: the owner's player moves (stored, acknowledged, not published).
        mover, token = players[local]
        await _play(mover, token, game_id, LONG_GAME[ply])
        await redis.start()
        # Back: the other node asks the owner for what it missed, by seq.
        other, other_token = players[1 - local]
        heard = await _heard(other, ply)
        assert heard.action == LONG_GAME[ply]
        # And the game goes on across the nodes.
        await _play_retrying(other, other_token, game_id, LONG_GAME[ply + 1])
        await _heard(mover, ply + 1)
        assert await _stored_moves(pg_schema, game_id) == LONG_GAME[: ply + 2]
        # The new Redis started empty: ada's node posted the seek again, and bo takes it.
        client = aioredis.Redis(host="127.0.0.1", port=redis.port)
        try:
            give_up = asyncio.get_running_loop().time() + 10
            while not await client.hexists(f"{redis_prefix}:seeks", posted.seek_id):
                assert asyncio.get_running_loop().time() < give_up, "seek not posted again"
                await asyncio.sleep(0.02)
        finally:
            await client.aclose()
        # The open game is posted again too: bo's node lists it (it did not).
        await _until_open_listed(bo, waiting.game_id)
        # bo's node learns of the seek through the bus, a moment after Redis has it.
        give_up = asyncio.get_running_loop().time() + 10
        while True:
            try:
                seated = await bo.request(AcceptSeek, seek_id=posted.seek_id)
                break
            except RequestFailed as exc:
                assert exc.code == "unknown_seek", exc
                assert asyncio.get_running_loop().time() < give_up, "seek not seen again"
                await asyncio.sleep(0.05)
        assert isinstance(seated, Seated)
        await ada.close()
        await bo.close()


async def _play_retrying(
    mover: ServerConnection, token: str, game_id: str, action: int, errors: list[str] | None = None
) -> Moved:
    """A move, sent again while the cluster answers ``unavailable`` (a service coming back);
    the errors seen go to ``errors``."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 20
    while True:
        try:
            return await _play(mover, token, game_id, action)
        except RequestFailed as exc:
            if errors is not None:
                errors.append(exc.code)
            if exc.code != "unavailable" or loop.time() > give_up:
                raise
            await asyncio.sleep(0.1)  # a client's pause before it retries


# How long a request may take while Redis stalls, at most: beyond, it is left unanswered.
# (Each command to Redis gives up after --bus-timeout-s, 2 s; a request makes two at most.)
STALLED_S = 20


async def _lobby_entries(url: str, prefix: str) -> dict[str, set[str]]:
    """What the cluster's seeks, quick-pairing queues, open games' index and caps' sets
    hold in Redis: key (without the prefix) -> members, for the keys not empty."""
    client = aioredis.from_url(url)
    try:
        found: dict[str, set[str]] = {}
        for key in ("seeks", "quick-entries", "open-games"):
            found[key] = _names(await client.hkeys(f"{prefix}:{key}"))
        async for name in client.scan_iter(match=f"{prefix}:*"):
            key = name.decode()[len(prefix) + 1 :]
            if key.startswith(("open:", "open-games:")):
                found[key] = _names(await client.zrange(name, 0, -1))
            elif key.startswith("quick:"):
                found[key] = _names(await client.lrange(name, 0, -1))
    finally:
        await client.aclose()
    return {key: members for key, members in found.items() if members}


async def _until_lobby_entries(url: str, prefix: str, expected: dict[str, set[str]]) -> None:
    """Until ``_lobby_entries`` is ``expected`` (10 s at most)."""
    try:
        async with asyncio.timeout(10):
            while await _lobby_entries(url, prefix) != expected:
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"{await _lobby_entries(url, prefix)} != {expected}") from None


def _names(members: list[bytes]) -> set[str]:
    return {m.decode() for m in members}


async def test_a_stalled_redis_fails_what_needs_it_in_time_and_leaves_nothing_behind(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """Redis stalls (alive, answering nothing: SIGSTOP). A request that needs it (a quick
    pairing, a seek) gets ``unavailable`` with its ``rid`` once its command times out (it
    waited for ever: the caps check and the queue had no timeout); one that can do
    without it is served (a move of a game the node owns; a create, counted by the node's
    own games); the bus survives a stall longer than the commands' timeout. Once Redis
    answers again, what the failed requests may have written there (a command sent stays
    in its socket, and Redis runs it when it wakes up) is undone, and the node serves
    them again by itself."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        a, _ = await cluster.start_pair()
        ada, bo, game_id, ada_token, _ = await _two_player_game(cluster)  # ada on a, its owner
        pat = await a.connect("pat")
        assert pat.welcome is not None
        async with redis.stalled():
            with pytest.raises(RequestFailed) as failed:
                await asyncio.wait_for(
                    pat.request(QuickPair, game="tictactoe", ai_after_s=0), STALLED_S
                )
            assert failed.value.code == "unavailable" and failed.value.error.rid is not None
            refusals = [failed.value.message]
            with pytest.raises(RequestFailed) as failed:
                await asyncio.wait_for(pat.request(Seek, game="tictactoe"), STALLED_S)
            assert failed.value.code == "unavailable" and failed.value.error.rid is not None
            refusals.append(failed.value.message)
            # Probe: each named Redis's address ("Timeout reading from 127.0.0.1:PORT"): a
            # client is told one generic line, the cause goes to the node's log.
            assert not [m for m in refusals if "127.0.0.1" in m or str(redis.port) in m]
            created = await asyncio.wait_for(
                pat.request(CreateGame, game="tictactoe", opponent="human", private=True),
                STALLED_S,
            )
            await asyncio.wait_for(_play(ada, ada_token, game_id, LONG_GAME[0]), STALLED_S)
        # The bus's subscriptions lived through it: bo, on b, hears ada's move.
        await asyncio.wait_for(_heard(bo, 0), STALLED_S)
        # Of pat's requests, only its game counts (the quick pairing's reserved place, its
        # queue entry and its seek are gone, not left to expire).
        assert ada.welcome is not None and bo.welcome is not None
        counted = {
            f"open:p:{ada.welcome.player_id}": {game_id},
            f"open:p:{bo.welcome.player_id}": {game_id},
            f"open:p:{pat.welcome.player_id}": {created.game_id},
            "open:a:127.0.0.1": {game_id, created.game_id},
        }
        await _until_lobby_entries(cluster.bus, redis_prefix, counted)
        posted = await pat.request(QuickPair, game="tictactoe", ai_after_s=0)
        assert isinstance(posted, SeekPosted)
        await pat.request(Seek, game="tictactoe")
        assert "Traceback" not in a.log.read_text()
        for client in (ada, bo, pat):
            await client.close()


async def test_a_create_the_store_refuses_leaves_nothing_in_redis(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A public game the store refuses to create (a trigger of the test's raises) was
    written to the cluster's index of open games, and stayed listed there on every node
    (``list open``) with no game behind it: the refusal undoes what it wrote (and the
    caps' sets count nothing for it), before it is answered."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        a, b = await cluster.start_pair()
        ada, bo = await a.connect("ada"), await b.connect("bo")
        conn = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
        try:
            await conn.execute(
                "CREATE FUNCTION refuse_games() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$"
            )
            await conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON games "
                "FOR EACH ROW EXECUTE FUNCTION refuse_games()"
            )
            with pytest.raises(RequestFailed) as failed:
                await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
            assert failed.value.code == "unavailable", failed.value
            assert await _lobby_entries(cluster.bus, redis_prefix) == {}
            assert not (await bo.request(ListGames, status="open")).games
            await conn.execute("DROP TRIGGER refuse ON games")
        finally:
            await conn.close()
        created = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        await _until_open_listed(bo, created.game_id)
        for client in (ada, bo):
            await client.close()


async def test_a_decline_redis_does_not_answer_in_time_leaves_the_challenge_on_offer(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """bo declines ada's challenge while Redis stalls: ``unavailable``, and the challenge
    stands. Its claim (an HDEL) ran when Redis woke up: the challenge stayed listed on both
    nodes with nothing behind it, and bo's accept got ``unknown_seek`` until ada withdrew
    it. The claim is called off once Redis answers: the challenge is back in Redis, and bo
    takes it. (a, ada's node, waits long for Redis: its subscriber lives through the stall,
    so that a does not post the challenge again, as it does after the bus comes back.)"""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        a, b = await cluster.start("a", "--bus-timeout-s", "60"), await cluster.start("b")
        await cluster.wait_balanced()
        ada, bo = await a.connect("ada"), await b.connect("bo")
        await bo.request(LobbySubscribe)
        # A first challenge declined (Redis learns the claim's script: one sent while it
        # stalls then runs when it wakes up, as the HDEL did).
        first = await ada.request(Seek, game="tictactoe", to="bo")
        await _sees_seek(bo, first.seek_id)
        assert isinstance(await bo.request(DeclineSeek, seek_id=first.seek_id), Ok)
        challenge = await ada.request(Seek, game="tictactoe", to="bo")
        await _sees_seek(bo, challenge.seek_id)
        async with redis.stalled():
            with pytest.raises(RequestFailed) as failed:
                await asyncio.wait_for(
                    bo.request(DeclineSeek, seek_id=challenge.seek_id), STALLED_S
                )
            assert failed.value.code == "unavailable", failed.value
        seeks = aioredis.Redis(host="127.0.0.1", port=redis.port)
        try:
            async with asyncio.timeout(10):
                while not await seeks.hexists(f"{redis_prefix}:seeks", challenge.seek_id):
                    await asyncio.sleep(0.05)
        finally:
            await seeks.aclose()
        refused = 0
        while True:  # (b refuses at once until its heartbeat gets through)
            try:
                seated = await bo.request(AcceptSeek, seek_id=challenge.seek_id)
                break
            except RequestFailed as exc:
                assert exc.code == "unavailable" and refused < 200, exc
                refused += 1
                await asyncio.sleep(0.05)  # a client's pause before it retries
        assert isinstance(seated, Seated)
        assert (await asyncio.wait_for(_seated(ada), 10)).game_id == seated.game_id
        for client in (ada, bo):
            await client.close()


async def _listed_again(client: ServerConnection, seek_ids: set[str]) -> str:
    """The first of ``seek_ids`` that ``client``'s lobby lists from now on (its lobby events
    read until then; bounded by the caller)."""
    while True:
        event = await client.lobby_events.get()
        if isinstance(event, LobbyState):
            listed = {s["seek_id"] for s in event.seeks} & seek_ids
            if listed:
                return listed.pop()
        if isinstance(event, LobbyEvent) and event.kind == "seek_added" and event.seek:
            if event.seek["seek_id"] in seek_ids:
                return str(event.seek["seek_id"])


async def test_a_challenge_removed_posted_again_and_removed_in_one_tick_is_said_removed(
    two_nodes: Cluster, redis_prefix: str
) -> None:
    """b hears, within one lobby tick, that ada's challenge to bo was removed, posted again
    (a node announces its seeks again once its bus is back) and removed again (that node
    then finds it taken): bo's lobby was told nothing, and listed the challenge for good,
    gone from b's lobby (a challenge added and removed within a tick is nothing to say, but
    one its subscribers listed when the tick began is a removal). bo is told it is gone."""
    a, b = two_nodes.nodes
    ada, bo = await a.connect("ada"), await b.connect("bo")
    await bo.request(LobbySubscribe)
    challenge = (await ada.request(Seek, game="tictactoe", to="bo")).seek_id
    await _sees_seek(bo, challenge)
    admin = aioredis.from_url(REDIS_URL)
    try:
        posted = await admin.hget(f"{redis_prefix}:seeks", challenge)
        assert posted is not None
        channel, seek = f"{redis_prefix}:lobby", unpack(posted)
        pipe = admin.pipeline(transaction=True)  # (one read for b's subscriber)
        for message in ({"op": "remove", "id": challenge}, {"op": "add", "seek": seek}):
            pipe.publish(channel, pack(message | {"from": a.name}))
        pipe.publish(channel, pack({"op": "remove", "id": challenge, "from": a.name}))
        await pipe.execute()
    finally:
        await admin.aclose()
    while True:
        event = await asyncio.wait_for(bo.lobby_events.get(), 10)
        if isinstance(event, LobbyEvent) and event.kind == "seek_removed":
            assert event.seek_id == challenge
            break
    for client in (ada, bo):
        await client.close()


async def test_a_seek_taken_while_its_node_heard_nothing_is_not_offered_again(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """While a's subscriber is dead unseen (its close lost), bo on b accepts ada's seek and
    declines her challenge: a misses the seek's removal, ada's ``seated`` and her
    ``seek_declined``. Once a's bus came back, it posted its seeks again: the seek taken
    was on offer again, and cy got a second game of it (the challenge came back too). Now
    a sees that they were taken: nothing is offered again, ada is seated in bo's game (then
    its snapshot: she plays in it) and hears that bo declined."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        proxy = ClosesLosingProxy(redis.port)
        await proxy.start()
        admin = aioredis.Redis(host="127.0.0.1", port=redis.port)
        try:
            direct, cluster.bus = cluster.bus, proxy.url
            # (a's subscriber is ended by the test, not found dead by its PING)
            a = await cluster.start("a", "--bus-timeout-s", "60")
            cluster.bus = direct
            b = await cluster.start("b")
            await cluster.wait_balanced()
            ada, bo, cy = await a.connect("ada"), await b.connect("bo"), await b.connect("cy")
            for client in (bo, cy):
                await client.request(LobbySubscribe)
            seek = (await ada.request(Seek, game="tictactoe")).seek_id
            challenge = (await ada.request(Seek, game="tictactoe", to="bo")).seek_id
            for client in (bo, cy):
                await _sees_seek(client, seek)
            await _sees_seek(bo, challenge)
            # Redis cuts a's subscriber, and a never hears of it.
            proxy.losing_closes = True
            subscribers = await admin.client_list(_type="pubsub")
            (mine,) = [
                c for c in subscribers if int(c["addr"].rsplit(":")[1]) in proxy.upstream_ports
            ]
            await admin.client_kill_filter(_id=mine["id"])
            await proxy.until_silent(1)
            proxy.losing_closes = False
            seated = await bo.request(AcceptSeek, seek_id=seek)
            assert isinstance(await bo.request(DeclineSeek, seek_id=challenge), Ok)
            proxy.end_silent()  # a's subscriber ends: it subscribes again
            again = {
                asyncio.create_task(_listed_again(cy, {seek})): cy,
                asyncio.create_task(_listed_again(bo, {challenge})): bo,
            }
            told = asyncio.create_task(_seated(ada))
            done, _ = await asyncio.wait({*again, told}, timeout=30, return_when="FIRST_COMPLETED")
            for task in (*again, told):
                task.cancel()
            for task, client in again.items():
                if task in done:
                    taken = task.result()
                    second = await client.request(AcceptSeek, seek_id=taken)
                    raise AssertionError(f"seek {taken} on offer again once taken: {second}")
            assert told in done, "ada never heard that bo accepted her seek"
            assert told.result().game_id == seated.game_id
            assert told.result().seat == 1 - seated.seat
            snapshot = await next_event(ada, Snapshot)
            assert snapshot.game_id == seated.game_id and snapshot.status == "live"
            declined = await asyncio.wait_for(ada.lobby_events.get(), 10)
            assert isinstance(declined, SeekDeclined) and declined.seek_id == challenge
            first, second_player = (ada, bo) if told.result().seat == 0 else (bo, ada)
            tokens = {ada: told.result().token, bo: seated.token}
            await _play(first, tokens[first], seated.game_id, 4)
            assert (await _heard(second_player, 0)).action == 4
            assert not await admin.hexists(f"{redis_prefix}:seeks", seek)
            assert not await admin.hexists(f"{redis_prefix}:seeks", challenge)
            for client, taken in ((cy, seek), (bo, challenge)):
                with pytest.raises(RequestFailed, match="unknown_seek"):
                    await client.request(AcceptSeek, seek_id=taken)
            for client in (ada, bo, cy):
                await client.close()
        finally:
            await admin.aclose()
            await proxy.close()


async def test_a_seek_taken_before_redis_lost_everything_makes_one_game(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """While a's subscriber is dead unseen, bo on b accepts ada's seek; then Redis loses
    everything (as one that restarted empty: the seek's taken mark with it). a posted the
    seek again once its bus came back, and cy got a second game of it. Now a finds the game
    made of it in the database (games name their seek): nothing is offered again and ada is
    seated in bo's game. And should a seek be offered again all the same (a posted it just
    before the game was stored), a second taker is refused by the database, in one line
    (unknown_seek: already taken), and nothing of its game is kept."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        proxy = ClosesLosingProxy(redis.port)
        await proxy.start()
        admin = aioredis.Redis(host="127.0.0.1", port=redis.port)
        try:
            direct, cluster.bus = cluster.bus, proxy.url
            a = await cluster.start("a", "--bus-timeout-s", "60")
            cluster.bus = direct
            b = await cluster.start("b")
            await cluster.wait_balanced()
            ada, bo, cy = await a.connect("ada"), await b.connect("bo"), await b.connect("cy")
            await cy.request(LobbySubscribe)
            seek = (await ada.request(Seek, game="tictactoe")).seek_id
            await _sees_seek(cy, seek)
            posted = await admin.hget(f"{redis_prefix}:seeks", seek)
            proxy.losing_closes = True
            subscribers = await admin.client_list(_type="pubsub")
            (mine,) = [
                c for c in subscribers if int(c["addr"].rsplit(":")[1]) in proxy.upstream_ports
            ]
            await admin.client_kill_filter(_id=mine["id"])
            await proxy.until_silent(1)
            proxy.losing_closes = False
            seated = await bo.request(AcceptSeek, seek_id=seek)
            await admin.flushall()  # Redis lost everything: the seek's taken mark too
            proxy.end_silent()  # a's subscriber ends: it subscribes again, posts its seeks
            again = asyncio.create_task(_listed_again(cy, {seek}))
            told = asyncio.create_task(_seated(ada))
            done, _ = await asyncio.wait({again, told}, timeout=30, return_when="FIRST_COMPLETED")
            for task in (again, told):
                task.cancel()
            if again in done:
                second = await cy.request(AcceptSeek, seek_id=seek)
                raise AssertionError(f"seek {seek} on offer again once taken: {second}")
            assert told in done, "ada never heard that bo accepted her seek"
            assert told.result().game_id == seated.game_id
            assert not await admin.hexists(f"{redis_prefix}:seeks", seek)
            # The seek offered again all the same (as a would have, just before bo's game was
            # stored): cy's take is refused, and leaves cy free to play.
            assert posted is not None
            await admin.hset(f"{redis_prefix}:seeks", seek, posted)
            await admin.publish(
                f"{redis_prefix}:lobby", pack({"op": "add", "seek": unpack(posted), "from": a.name})
            )
            # (b lists it: an accept gets past "no seek", to the claim and the store)
            refused = None
            async with asyncio.timeout(10):
                while refused is None:
                    try:
                        await cy.request(AcceptSeek, seek_id=seek)
                    except RequestFailed as exc:
                        if "already taken" in exc.message:
                            refused = exc
                        else:
                            assert "accepted, cancelled or gone" in exc.message, exc
                            await asyncio.sleep(0.05)
            assert refused.code == "unknown_seek"
            assert "Traceback" not in refused.message
            conn = await asyncpg.connect(schema_url(pg_schema))
            try:
                games = await conn.fetch("SELECT id FROM games WHERE seek_id = $1", seek)
                assert [g["id"] for g in games] == [seated.game_id]
                assert await conn.fetchval("SELECT count(*) FROM games") == 1
            finally:
                await conn.close()
            ours = await cy.request(Seek, game="tictactoe")
            made = await bo.request(AcceptSeek, seek_id=ours.seek_id)
            assert isinstance(made, Seated) and made.game_id != seated.game_id
            for client in (ada, bo, cy):
                await client.close()
        finally:
            await admin.aclose()
            await proxy.close()


async def _cut_unseen(proxy: ClosesLosingProxy, admin: aioredis.Redis) -> None:
    """Redis cuts the subscriber that goes through ``proxy``, and its node never hears of it
    (until ``proxy.end_silent``)."""
    proxy.losing_closes = True
    subscribers = await admin.client_list(_type="pubsub")
    (mine,) = [c for c in subscribers if int(c["addr"].rsplit(":")[1]) in proxy.upstream_ports]
    await admin.client_kill_filter(_id=mine["id"])
    await proxy.until_silent(1)
    proxy.losing_closes = False


async def test_a_quick_entry_paired_while_its_node_heard_nothing_is_not_queued_again(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """While a's subscriber is dead unseen, cy on b is paired with ada's waiting quick entry:
    a misses the quick-taken notice and ada's ``seated``. Once a's bus came back it queued
    the entry again: dee was paired with ada a second time (refused by the database since
    games name their seek: dee got unknown_seek), and ada waited for a game she never heard
    of. Now the pairing marks ada's entry taken, as an accept marks a seek: a queues nothing
    again, ada is seated in cy's game, and dee waits in the queue."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        proxy = ClosesLosingProxy(redis.port)
        await proxy.start()
        admin = aioredis.Redis(host="127.0.0.1", port=redis.port)
        try:
            direct, cluster.bus = cluster.bus, proxy.url
            a = await cluster.start("a", "--bus-timeout-s", "60")
            cluster.bus = direct
            b = await cluster.start("b")
            await cluster.wait_balanced()
            ada, cy, dee = await a.connect("ada"), await b.connect("cy"), await b.connect("dee")
            await ada.request(QuickPair, game="tictactoe", ai_after_s=0)
            await _cut_unseen(proxy, admin)
            await cy.request(QuickPair, game="tictactoe", ai_after_s=0)
            paired = await asyncio.wait_for(_seated(cy), 10)
            proxy.end_silent()  # a's subscriber ends: it subscribes again, queues its entries
            told = await asyncio.wait_for(_seated(ada), 30)
            assert told.game_id == paired.game_id and told.seat == 1 - paired.seat
            waiting = await dee.request(QuickPair, game="tictactoe", ai_after_s=0)
            entries = await admin.hkeys(f"{redis_prefix}:quick-entries")
            assert [e.decode() for e in entries] == [waiting.seek_id], "dee was paired"
            assert not dee.seats
            for client in (ada, cy, dee):
                await client.close()
        finally:
            await admin.aclose()
            await proxy.close()


async def test_a_quick_entry_paired_already_is_passed_over_not_an_unknown_seek(
    two_nodes: Cluster, redis_prefix: str
) -> None:
    """ada's quick entry is paired with cy's, and then queued again all the same (as by a
    node whose Redis restarted empty, just before the game made of it was stored): dee was
    paired with it a second time, the database refused that game (games name their seek),
    and dee's quick ended in unknown_seek "seek already taken". dee's pairing now passes
    over it: dee is queued, and the next player, eve, is paired with dee."""
    a, b = two_nodes.nodes
    admin = aioredis.from_url(REDIS_URL)
    try:
        ada, cy = await a.connect("ada"), await b.connect("cy")
        waiting = await ada.request(QuickPair, game="tictactoe", ai_after_s=0)
        entries = f"{redis_prefix}:quick-entries"
        data = await admin.hget(entries, waiting.seek_id)
        (queue,) = [k async for k in admin.scan_iter(match=f"{redis_prefix}:quick:*")]
        (item,) = await admin.lrange(queue, 0, -1)
        await cy.request(QuickPair, game="tictactoe", ai_after_s=0)
        paired = await asyncio.wait_for(_seated(cy), 10)
        assert (await asyncio.wait_for(_seated(ada), 10)).game_id == paired.game_id
        assert data is not None
        await admin.hset(entries, waiting.seek_id, data)  # queued again all the same
        await admin.rpush(queue, item)
        dee, eve = await b.connect("dee"), await a.connect("eve")
        posted = await dee.request(QuickPair, game="tictactoe", ai_after_s=0)
        assert isinstance(posted, SeekPosted)
        await dee.request(Ping)  # answered after anything its quick sent
        assert not dee.seats and dee.errors.empty(), dee.errors.get_nowait()
        assert [e.decode() for e in await admin.hkeys(entries)] == [posted.seek_id]
        await eve.request(QuickPair, game="tictactoe", ai_after_s=0)
        dee_seat = await asyncio.wait_for(_seated(dee), 10)
        assert (await asyncio.wait_for(_seated(eve), 10)).game_id == dee_seat.game_id
        for client in (ada, cy, dee, eve):
            await client.close()
    finally:
        await admin.aclose()


async def test_a_partner_taken_by_a_pairing_whose_answer_was_lost_is_queued_again(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """bo asks for a quick game and Redis's answer to the pairing is lost (it ran): bo gets
    ``unavailable``. The pairing had taken ada's waiting entry, which nobody got: ada waited
    for ever, out of the queue, and cy was queued beside nobody. The pairing is called off
    once Redis answers: ada's entry is back at the head of the queue, and cy is paired with
    her."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        proxy = ClosesLosingProxy(redis.port)
        await proxy.start()
        try:
            a = await cluster.start("a")
            direct, cluster.bus = cluster.bus, proxy.url
            b = await cluster.start("b")
            cluster.bus = direct
            await cluster.wait_balanced()
            ada, bo, cy = await a.connect("ada"), await b.connect("bo"), await b.connect("cy")
            # A first pairing (Redis learns the script: an EVALSHA then runs at once).
            await ada.request(QuickPair, game="tictactoe", ai_after_s=0)
            await bo.request(QuickPair, game="tictactoe", ai_after_s=0)
            await asyncio.wait_for(_seated(ada), 10)
            for client in (ada, bo):
                client.seats.clear()
            waiting = await ada.request(QuickPair, game="tictactoe", ai_after_s=0, clock=_clock(60))
            proxy.losing_answers_to = hashlib.sha1(_QUICK_TAKE.encode()).hexdigest().encode()
            with pytest.raises(RequestFailed) as failed:
                await bo.request(QuickPair, game="tictactoe", ai_after_s=0, clock=_clock(60))
            assert failed.value.code == "unavailable", failed.value
            assert proxy.losing_answers_to is None  # (the pairing was sent, and ran)
            entries = aioredis.Redis(host="127.0.0.1", port=redis.port)
            try:
                async with asyncio.timeout(10):  # (called off: ada's entry is queued again)
                    while not await entries.hexists(
                        f"{redis_prefix}:quick-entries", waiting.seek_id
                    ):
                        await asyncio.sleep(0.05)
            finally:
                await entries.aclose()
            refused = 0
            while True:  # (b refuses at once until its heartbeat gets through)
                try:
                    await cy.request(QuickPair, game="tictactoe", ai_after_s=0, clock=_clock(60))
                    break
                except RequestFailed as exc:
                    assert exc.code == "unavailable" and refused < 200, exc
                    refused += 1
                    await asyncio.sleep(0.05)
            paired = await asyncio.wait_for(_seated(cy), 10)
            assert (await asyncio.wait_for(_seated(ada), 10)).game_id == paired.game_id
            for client in (ada, bo, cy):
                await client.close()
        finally:
            await proxy.close()


async def test_a_publisher_whose_close_was_lost_is_found_dead_and_its_events_caught_up(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """Redis cuts a's publisher (in CLIENT REPLY OFF: nothing ever comes back on it) and
    a partition loses the close: a published into the void, unseen, and bo on b never heard
    ada's moves. Now its PING, unanswered, finds it dead: a publishes again, and b catches
    up the games a owns by seq: bo hears the move."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        proxy = ClosesLosingProxy(redis.port)
        await proxy.start()
        admin = aioredis.Redis(host="127.0.0.1", port=redis.port)
        try:
            direct, cluster.bus = cluster.bus, proxy.url
            a = await cluster.start("a", "--bus-timeout-s", "0.5")
            cluster.bus = direct
            await cluster.start("b")
            await cluster.wait_balanced()
            ada, bo, game_id, ada_token, bo_token = await _two_player_game(cluster)
            assert await cluster.owner_of(game_id) == a.name
            await _play(ada, ada_token, game_id, LONG_GAME[0])
            await _heard(bo, 0)
            await _play(bo, bo_token, game_id, LONG_GAME[1])
            proxy.losing_closes = True
            clients = await admin.client_list(_type="normal")
            (publisher,) = [
                c
                for c in clients
                if int(c["addr"].rsplit(":")[1]) in proxy.upstream_ports
                and c["cmd"] in ("publish", "client|reply")
            ]
            await admin.client_kill_filter(_id=publisher["id"])
            await proxy.until_silent(1)
            proxy.losing_closes = False
            await _play(ada, ada_token, game_id, LONG_GAME[2])  # (stored: published unseen)
            heard = await asyncio.wait_for(_heard(bo, 2), 10)
            assert heard.action == LONG_GAME[2]
            for client in (ada, bo):
                await client.close()
        finally:
            await admin.aclose()
            await proxy.close()


async def test_a_poster_whose_node_lost_its_bus_after_the_follow_is_seated(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """bo on b accepts ada's seek; b tells a to have ada follow the game, and a's subscriber
    dies unseen right after (the rest of what b sends is lost): ada followed the game but
    never got her ``seated``, and once a's bus came back and a saw her seek taken it did not
    seat her (she followed the game already). The follow now travels with the frames
    that go with it (her ``seated``): both reach her, or neither and she is seated late."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        proxy = ClosesLosingProxy(redis.port)
        await proxy.start()
        try:
            direct, cluster.bus = cluster.bus, proxy.url
            a = await cluster.start("a", "--bus-timeout-s", "0.5")
            cluster.bus = direct
            b = await cluster.start("b")
            await cluster.wait_balanced()
            ada, bo = await a.connect("ada"), await b.connect("bo")
            await bo.request(LobbySubscribe)
            seek = (await ada.request(Seek, game="tictactoe")).seek_id
            await _sees_seek(bo, seek)
            proxy.silent_after = b"\xa6follow"  # (msgpack: the word "follow")
            seated = await bo.request(AcceptSeek, seek_id=seek)
            await proxy.until_silent(1)
            proxy.end_silent()  # (a would find it dead by its PING: sooner)
            told = await asyncio.wait_for(_seated(ada), 20)
            assert told.game_id == seated.game_id and told.seat == 1 - seated.seat
            for client in (ada, bo):
                await client.close()
        finally:
            await proxy.close()


async def test_a_subscriber_whose_close_was_lost_is_found_dead_and_catches_up(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """Redis cuts the nodes' subscriptions (CLIENT KILL TYPE pubsub) and the close never
    reaches them (a partition lost it: the proxy's doing): each node found out only if it
    wrote on the connection, and heard nothing of the others for ever. Now a silent
    subscriber is sent a PING, and not answered, the node subscribes again and catches up:
    bo, on b, hears the move ada made meanwhile on a, and sees the seek ada posted."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        proxy = ClosesLosingProxy(redis.port)
        await proxy.start()
        try:
            cluster.bus = proxy.url
            await cluster.start_pair()
            ada, bo, game_id, ada_token, bo_token = await _two_player_game(cluster)
            assert await cluster.owner_of(game_id) == cluster.nodes[0].name  # a, ada's node
            await bo.request(LobbySubscribe)
            proxy.losing_closes = True
            admin = aioredis.Redis(host="127.0.0.1", port=redis.port)
            try:
                assert await admin.execute_command("CLIENT KILL TYPE pubsub") == 2
            finally:
                await admin.aclose()
            await proxy.until_silent(2)
            await _play(ada, ada_token, game_id, LONG_GAME[0])
            posted = await ada.request(Seek, game="tictactoe")
            await asyncio.wait_for(_heard(bo, 0), STALLED_S)
            await asyncio.wait_for(_sees_seek(bo, posted.seek_id), STALLED_S)
            # And the other way: ada hears bo's move (its request reaches a's inbox).
            await _play_retrying(bo, bo_token, game_id, LONG_GAME[1])
            await asyncio.wait_for(_heard(ada, 1), STALLED_S)
            for node in cluster.nodes:
                assert "PING went unanswered" in node.log.read_text()
            for client in (ada, bo):
                await client.close()
        finally:
            await proxy.close()


async def test_postgresql_connections_cut_clear_errors_then_the_game_goes_on(
    two_nodes: Cluster, pg_schema: str
) -> None:
    cluster = two_nodes
    ada, bo, game_id, ada_token, bo_token = await _two_player_game(cluster)
    players = [(ada, ada_token), (bo, bo_token)]
    acknowledged = []
    for ply, action in enumerate(LONG_GAME[:3]):
        mover, token = players[ply % 2]
        await _play(mover, token, game_id, action)
        acknowledged.append(action)
    owner, pid = await cluster.lock_holder(game_id)
    # Every connection of the owner node, and only its own, is cut.
    conn = await asyncpg.connect(PG_URL)
    try:
        cut = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1",
            f"noughts {owner}",
        )
    finally:
        await conn.close()
    assert cut >= 2  # its writer and its lock connection at least
    errors: list[str] = []
    mover, token = players[1]
    await _play_retrying(mover, token, game_id, LONG_GAME[3], errors)
    acknowledged.append(LONG_GAME[3])
    # The owner lost its shards with its lock connection; one node holds them again.
    await cluster.wait_new_holder(game_id, pid)
    for ply, action in enumerate(LONG_GAME[4:], start=4):
        mover, token = players[ply % 2]
        await _play_retrying(mover, token, game_id, action, errors)
        acknowledged.append(action)
    assert set(errors) <= {"unavailable"}, errors  # what failed said why, and was retried
    assert await _stored_moves(pg_schema, game_id) == acknowledged == LONG_GAME
    await ada.close()
    await bo.close()
    for node in cluster.nodes:
        assert await node.stop() == 0


async def test_a_draining_node_hands_its_games_over_and_says_reconnect(
    two_nodes: Cluster, pg_schema: str
) -> None:
    cluster = two_nodes
    seats, game_id = await _seats(cluster)
    order = ["ada", "bo"]
    for ply, action in enumerate(LONG_GAME[:3]):
        mover, token = seats[order[ply % 2]]
        await _play(mover, token, game_id, action)
    owner, pid = await cluster.lock_holder(game_id)
    survivor = next(n for n in cluster.nodes if n.name != owner)
    name = "ada" if owner == cluster.nodes[0].name else "bo"
    leaving, _ = seats[name]
    assert await cluster.node(owner).stop() == 0  # SIGTERM: drain
    await asyncio.wait_for(leaving.closed.wait(), 10)
    # The close, as the client saw it: 1012 (service restart), and a reconnect hint.
    assert "1012" in leaving.status_detail, leaving.status_detail
    assert "reconnect" in leaving.status_detail, leaving.status_detail
    assert await cluster.wait_new_holder(game_id, pid) == survivor.name
    back = await survivor.connect(name, session=leaving.session)
    resumed = await back.request(Resume, game_id=game_id, since=leaving.last_seq[game_id])
    assert isinstance(resumed, Resumed) and resumed.token is not None
    seats[name] = (back, resumed.token)
    for ply, action in enumerate(LONG_GAME[3:], start=3):
        mover, token = seats[order[ply % 2]]
        await _play(mover, token, game_id, action)
    assert await _stored_moves(pg_schema, game_id) == LONG_GAME
    for client, _ in seats.values():
        await client.close()


async def test_a_forwarded_request_in_flight_when_its_owner_drains_is_answered_once(
    two_nodes: Cluster, pg_schema: str
) -> None:
    """bo's resignation, forwarded to the game's owner, is being committed there (its write
    held up by a lock the test holds) when the owner gets SIGTERM: the drain waits for it
    longer than a node's presence lasts without heartbeats (presence_ttl_s, 2 s). bo gets
    the ``ended`` it asked for, and nothing else: its node does not send the request again
    to the game's next owner (that copy was answered ``unknown_game``). A second SIGTERM
    meanwhile changes nothing (it logged a traceback)."""
    cluster = two_nodes
    a, b = cluster.nodes
    ada, bo = await a.connect("ada"), await b.connect("bo")
    created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    joined = await bo.request(JoinGame, game_id=created.game_id)
    game_id = created.game_id
    assert await cluster.owner_of(game_id) == a.name
    await _play(ada, created.token, game_id, LONG_GAME[0])
    await _play(bo, joined.token, game_id, LONG_GAME[1])  # (before, a resign aborts)
    blocker = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
    try:
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute("LOCK TABLE games IN ACCESS EXCLUSIVE MODE")
        resign = asyncio.create_task(bo.request(Resign, game_id=game_id, token=joined.token))
        await _until_waiting_on_a_lock(blocker, f"noughts {a.name}")
        a.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(3.0)  # longer than presence_ttl_s
        assert not resign.done(), resign
        a.process.send_signal(signal.SIGTERM)  # an impatient operator: the drain goes on
        await holding.rollback()
    finally:
        await blocker.close()
    ended = await asyncio.wait_for(resign, 20)
    assert isinstance(ended, Ended) and ended.reason == "resign", ended
    await bo.request(Ping)  # answered after whatever bo's node still did for the resignation
    assert bo.errors.empty(), bo.errors.get_nowait()
    assert await asyncio.wait_for(a.process.wait(), 30) == 0
    assert "Traceback" not in a.log.read_text()
    for client in (ada, bo):
        await client.close()


async def test_a_drain_cut_while_a_commit_hangs_stops_the_nodes_heartbeats(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A drain cut at --drain-timeout-s while a move's commit hangs (a lock the test holds):
    the node exits 0, its heartbeats stop with it (none tried on a closed bus)."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        node = await cluster.start("a", "--drain-timeout-s", "1")
        await cluster.wait_balanced()
        ada, bo = await node.connect("ada"), await node.connect("bo")
        created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
        await bo.request(JoinGame, game_id=created.game_id)
        blocker = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
        try:
            holding = blocker.transaction()
            await holding.start()
            await blocker.execute("LOCK TABLE moves IN ACCESS EXCLUSIVE MODE")
            move = asyncio.create_task(
                ada.request(Move, game_id=created.game_id, token=created.token, action=0)
            )
            await _until_waiting_on_a_lock(blocker, f"noughts {node.name}")
            node.process.send_signal(signal.SIGTERM)
            await asyncio.sleep(4.0)  # the cut (1 s), then a few heartbeats' time
            await holding.rollback()
        finally:
            await blocker.close()
        assert await node.stop() == 0
        log = node.log.read_text()
        assert "the drain took over 1 s" in log
        assert "heartbeat failed" not in log, log[-3000:]
        move.cancel()
        for client in (ada, bo):
            await client.close()


async def _until_waiting_on_a_lock(conn: asyncpg.Connection, application: str) -> None:
    """Until a query of ``application`` waits on a lock (the test's)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 10
    while not await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
        "AND wait_event_type = 'Lock'",
        application,
    ):
        assert loop.time() < give_up, f"no query of {application} waits on the lock"
        await asyncio.sleep(0.02)


async def test_a_stopping_node_cuts_its_drain_at_its_bound(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A client that never answers the closing handshake would hold a stop for the close
    timeout (10 s); the node cuts its drain at --drain-timeout-s and exits 0."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        node = await cluster.start("a", "--drain-timeout-s", "0.5")
        mute = await node.connect("mute")
        assert mute.websocket is not None
        mute.websocket.transport.pause_reading()  # the server's close is never read
        assert await node.stop() == 0
        assert "the drain took over 0.5 s" in node.log.read_text()
        mute.websocket.transport.resume_reading()
        await mute.close()


async def test_a_node_is_ready_when_its_bus_and_locks_answer(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        node = await cluster.start("a", "--admin-port", "0")
        await cluster.wait_balanced()
        port = await _admin_port(node)
        ready = await http_get(port, "/readyz")
        assert ready.startswith("HTTP/1.1 200") and "bus: ok" in ready, ready
        metrics = await http_get(port, "/metrics")
        assert "noughts_cluster_shards 64.0" in metrics and "noughts_cluster_nodes" in metrics
        assert await node.stop() == 0


async def test_a_node_is_not_ready_while_redis_is_down_and_ready_again_after(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """/readyz answers 503 naming the bus while the node's Redis is down (a load balancer
    then sends no new clients there), within its own time bound, and 200 once it is back."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        node = await cluster.start("a", "--admin-port", "0")
        await cluster.wait_balanced()
        admin = await _admin_port(node)
        assert (await http_get(admin, "/readyz")).startswith("HTTP/1.1 200")
        await redis.stop()
        ready = await _until_http(admin, "/readyz", "HTTP/1.1 503")
        assert "bus: " in ready and "bus: ok" not in ready, ready
        await redis.start()
        ready = await _until_http(admin, "/readyz", "HTTP/1.1 200")
        assert "bus: ok" in ready, ready
        assert await node.stop() == 0


async def _until_http(port: int, path: str, status: str) -> str:
    """GET ``path`` until its answer starts with ``status`` (20 s at most); the answer."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 20
    while not (answer := await http_get(port, path)).startswith(status):
        assert loop.time() < give_up, answer
        await asyncio.sleep(0.1)
    return answer


async def test_processes_share_one_port_each_a_node(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        node = await cluster.start("a", "--processes", "2")
        await cluster.wait_balanced(names={node.name, f"{node.name}-1"})
        ada, bo = await node.connect("ada"), await node.connect("bo")
        created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
        joined = await bo.request(JoinGame, game_id=created.game_id)
        players = [(ada, created.token), (bo, joined.token)]
        for ply, action in enumerate(LONG_GAME[:4]):
            mover, token = players[ply % 2]
            await _play(mover, token, created.game_id, action)
        assert await _stored_moves(pg_schema, created.game_id) == LONG_GAME[:4]
        await ada.close()
        await bo.close()
        assert await node.stop() == 0  # and its other process with it


async def _started_pids(log: Path, name: str, count: int) -> list[int]:
    """The pids of the first ``count`` starts of node ``name`` its supervisor logged (30 s
    at most)."""
    async with asyncio.timeout(30):
        while True:
            found = re.findall(rf"node {re.escape(name)} started \(pid (\d+)\)", log.read_text())
            if len(found) >= count:
                return [int(pid) for pid in found[:count]]
            await asyncio.sleep(0.1)


def _running(pid: int) -> bool:
    """``pid`` is a process that has not ended (a zombie has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


async def test_processes_a_node_that_dies_is_started_again_and_ends_with_its_supervisor(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """``--processes 2``: the second node killed -9 is logged and started again, and takes
    its share of the shards again; the first (its supervisor) killed -9, the second ends
    too (PR_SET_PDEATHSIG: it drains as on SIGTERM) instead of serving on unsupervised."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        node = await cluster.start("a", "--processes", "2")
        other = f"{node.name}-1"
        await cluster.wait_balanced(names={node.name, other})
        (first,) = await _started_pids(node.log, other, 1)
        # One log, each line naming its node; the engine's cores shared between them.
        log = node.log.read_text()
        assert re.search(rf"INFO {re.escape(other)} root: node {re.escape(other)} of the", log)
        assert re.search(rf"INFO {re.escape(node.name)} server.supervisor: node ", log)
        pids = [first]
        try:
            os.kill(first, signal.SIGKILL)
            pids = await _started_pids(node.log, other, 2)
            assert pids[1] != first
            assert re.search(
                rf"node {re.escape(other)} \(pid {first}\) was killed by SIGKILL; starting it "
                r"again in [0-9.]+ s",
                node.log.read_text(),
            )
            await cluster.wait_balanced(names={node.name, other})
            node.kill()
            await node.process.wait()
            async with asyncio.timeout(30):
                while _running(pids[1]):
                    await asyncio.sleep(0.1)
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _two_ports_second_taken() -> tuple[int, socket.socket]:
    """A free port P whose next, P + 1, a socket of this test listens on (returned)."""
    for _ in range(50):
        taker = socket.socket()
        taker.bind(("127.0.0.1", 0))
        taker.listen()
        port = taker.getsockname()[1] - 1
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                taker.close()
                continue
        return port, taker
    raise AssertionError("no free port below a taken one")


async def test_processes_a_node_that_cannot_start_is_not_started_again_for_ever(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """``--processes 2 --admin-port P`` with P + 1 held by another program: the second node
    fails before it listens at every start; after BOOT_TRIES starts in a row it is left
    stopped, said once as an error, and the first node serves on. (It was started again
    every 30 s for ever, a warning each time.)"""
    from server.supervisor import BOOT_TRIES

    admin, taker = _two_ports_second_taken()
    with taker:
        async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
            node = await cluster.start("a", "--processes", "2", "--admin-port", str(admin))
            other = f"{node.name}-1"
            gave_up = f"node {other} failed to start {BOOT_TRIES} times in a row"
            async with asyncio.timeout(60):
                while gave_up not in node.log.read_text():
                    await asyncio.sleep(0.1)
            log = node.log.read_text()
            assert f"cannot listen on the admin address 127.0.0.1:{admin + 1}" in log
            assert len(re.findall(rf"node {re.escape(other)} started \(pid", log)) == BOOT_TRIES
            assert re.search(rf"node {re.escape(other)} \(pid \d+\) failed to start", log)
            ada = await node.connect("ada")
            created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
            assert created.game_id
            await ada.close()
            assert await node.stop() == 0


async def test_readyz_says_not_joined_until_the_node_has_joined_the_bus(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """The admin port opens before the node joins the cluster; while its Redis stalls
    (stopped: connections are accepted, nothing is answered) the join waits, and /readyz
    answers 503 "bus: not joined yet" (/healthz 200). Redis going on, the node joins,
    listens and is ready."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        assert redis.process is not None
        redis.process.send_signal(signal.SIGSTOP)
        try:
            starting = asyncio.create_task(cluster.start("a", "--admin-port", "0"))
            port = await _admin_port_of(cluster.directory / "a.log")
            status, body = await admin_get(port, "/readyz")
            assert status == 503 and "bus: not joined yet\n" in body, body
            assert await admin_get(port, "/healthz") == (200, "ok\n")
            assert not starting.done()
        finally:
            redis.process.send_signal(signal.SIGCONT)
        node = await starting
        async with asyncio.timeout(30):
            while (answer := await admin_get(port, "/readyz"))[0] != 200:
                await asyncio.sleep(0.1)
        assert "bus: ok\n" in answer[1], answer
        assert await node.stop() == 0


async def test_a_node_refused_its_lock_connection_says_so_once_not_each_claim_period(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A node's connections cut while a server alone takes the database (its exclusive
    server lock, held here by the test): the node's lock connection is refused at each claim
    (0.5 s) for as long as that lasts. It said so as an error each time; now once, and once
    more when the lock connection is back and it claims again."""
    from server.pgstore import SERVER_LOCK

    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        node = await cluster.start("a")
        await cluster.wait_balanced()
        holder = await asyncpg.connect(PG_URL, server_settings={"search_path": pg_schema})
        try:
            async with asyncio.timeout(30):  # the cut, then the lock before the node is back
                while True:
                    await holder.fetchval(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = $1",
                        f"noughts {node.name}",
                    )
                    if await holder.fetchval(
                        "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))", SERVER_LOCK
                    ):
                        break
                    await asyncio.sleep(0.05)
            refused = "a noughts server alone (no --bus) is using"
            async with asyncio.timeout(30):
                while refused not in node.log.read_text():
                    await asyncio.sleep(0.05)
            await asyncio.sleep(10 * ServerSettings().claim_s)  # ten claims refused
            said = re.findall(r"ERROR .*lost the lock connection \((.*)\)", node.log.read_text())
            assert sum(refused in reason for reason in said) == 1, said
        finally:
            await holder.close()  # the server alone is gone
        async with asyncio.timeout(30):
            while "the lock connection is back" not in node.log.read_text():
                await asyncio.sleep(0.05)
        await cluster.wait_balanced()
        assert await node.stop() == 0


async def test_a_signal_while_a_stalled_redis_holds_the_join_stops_the_node(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """SIGTERM to a node whose join waits on a stalled Redis: it stops at once, exit 0,
    without listening. (It waited for the join to end, for as long as Redis stalled.) The
    join's commands wait a long --bus-timeout-s here (then it would fail, exit 1)."""
    async with _cluster_on_own_redis(pg_schema, redis_prefix, tmp_path) as (cluster, redis):
        assert redis.process is not None
        redis.process.send_signal(signal.SIGSTOP)
        log = tmp_path / "joining.log"
        try:
            with log.open("wb") as stderr:
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "server", "--port", "0", "--workers", "0",
                    "--db", schema_url(cluster.schema), "--bus", cluster.bus,
                    "--bus-prefix", cluster.prefix, "--node", f"j-{cluster.prefix}",
                    "--admin-port", "0", "--log-level", "INFO", "--bus-timeout-s", "60",
                    stdout=asyncio.subprocess.PIPE, stderr=stderr,
                    env={k: v for k, v in os.environ.items() if not k.startswith("NOUGHTS_")},
                )  # fmt: skip
            try:
                port = await _admin_port_of(log)
                status, body = await admin_get(port, "/readyz")
                assert status == 503 and "bus: not joined yet\n" in body, body
                process.send_signal(signal.SIGTERM)
                stdout, _ = await asyncio.wait_for(process.communicate(), 30)
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        finally:
            redis.process.send_signal(signal.SIGCONT)
        assert process.returncode == 0, log.read_text()
        assert b"listening" not in stdout
        assert "stopped while joining the cluster" in log.read_text()


async def _admin_port(node: Node) -> int:
    return await _admin_port_of(node.log)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--node", "no spaces"], "--node 'no spaces': 1 to 32 letters, digits and '-'"),
        (
            ["--processes", "2", "--node", "n" * 31],
            f"--node '{'n' * 31}': with --processes 2 the nodes are named up to "
            f"{'n' * 31}-1, over 32 characters",
        ),
        (
            ["--processes", "3", "--admin-port", "65534"],
            "--admin-port 65534: with --processes 3 the nodes' admin ports go past 65535",
        ),
    ],
)
async def test_node_names_and_admin_ports_its_processes_cannot_take_are_refused_at_once(
    args: list[str], error: str
) -> None:
    """A name or admin port that would be fine for the first node but not for the others of
    --processes was refused by each of them, which its supervisor started again for ever."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server", "--port", "0", "--db", PG_URL, "--bus", REDIS_URL,
        *args, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert err.decode().strip().splitlines() == [f"noughts serve: {error}"]


async def _admin_port_of(log: Path) -> int:
    """A node's admin port, from the log line naming it (30 s at most)."""
    async with asyncio.timeout(30):
        while not log.exists() or "admin endpoints on http://" not in log.read_text():
            await asyncio.sleep(0.05)
    line = log.read_text().split("admin endpoints on http://", 1)[1]
    return int(line.split("/", 1)[0].rsplit(":", 1)[1])


async def test_readyz_says_draining_for_the_whole_drain(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """SIGTERM: /readyz answers 503 "draining" while a client holds the drain open (it never
    answers the closing handshake), /healthz stays 200; the port closes with the process."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        node = await cluster.start("a", "--admin-port", "0", "--drain-timeout-s", "60")
        port = await _admin_port(node)
        host, ws_port = node.url.removeprefix("ws://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(ws_port))
        writer.write(
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        assert b" 101 " in await reader.readuntil(b"\r\n\r\n")
        async with asyncio.timeout(30):
            while (await admin_get(port, "/readyz"))[0] != 200:
                await asyncio.sleep(0.1)
        node.process.send_signal(signal.SIGTERM)
        await reader.readexactly(2)  # the server's close frame: the drain is under way
        status, body = await admin_get(port, "/readyz")
        assert status == 503 and "drain: draining: its games go to the other nodes\n" in body
        assert await admin_get(port, "/healthz") == (200, "ok\n")
        assert node.process.returncode is None
        writer.close()  # the drain ends; so does the process, and its admin port with it
        assert await node.stop() == 0
        with pytest.raises(OSError):
            await admin_get(port, "/healthz")


@pytest.mark.parametrize("first", ["ada", "bo"])
async def test_a_rematch_between_players_of_two_nodes(two_nodes: Cluster, first: str) -> None:
    """A rematch agreed on the owner seats the player connected to another node too (it
    got neither its seat nor the new game, as it would on one node): through the request
    that agreed, or through its earlier offer."""
    ada, bo, game_id, ada_token, bo_token = await _two_player_game(two_nodes)
    assert await two_nodes.owner_of(game_id) == two_nodes.nodes[0].name  # ada's node
    await ada.request(Resign, game_id=game_id, token=ada_token)
    asks = [(ada, ada_token), (bo, bo_token)]
    for client, token in asks if first == "ada" else asks[::-1]:
        await client.request(Rematch, game_id=game_id, token=token)
    for client, seat in ((ada, 1), (bo, 0)):  # colours swapped
        start = await next_event(client, Snapshot)
        while start.game_id == game_id:
            start = await next_event(client, Snapshot)
        assert start.status == "live" and client.seats[start.game_id][0] == seat
    moved = await bo.request(Move, game_id=start.game_id, action=12)
    assert isinstance(moved, Moved) and moved.seat == 0
    assert (await _heard(ada, 0)).action == 12
    await ada.close()
    await bo.close()


async def test_a_rematch_whose_game_the_database_refuses_is_named_nowhere(
    two_nodes: Cluster,
) -> None:
    """Durability in a cluster: the rematch's new game is stored before the accept event
    naming it and the ok go out. bo, on the other node, offers; ada's accept, on the owner,
    finds the new game refused by PostgreSQL: ada gets the error, nobody hears of a game,
    bo's offer stands; accepted again, it seats bo through that offer."""
    ada, bo, game_id, ada_token, bo_token = await _two_player_game(two_nodes)
    assert await two_nodes.owner_of(game_id) == two_nodes.nodes[0].name  # ada's node
    await ada.request(Resign, game_id=game_id, token=ada_token)
    await bo.request(Rematch, game_id=game_id, token=bo_token)
    for client in (ada, bo):
        offer = await next_event(client, Offer)
        assert (offer.kind, offer.answer, offer.seat) == ("rematch", "offer", 1)
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": two_nodes.schema})
    try:
        await conn.execute(
            "CREATE FUNCTION refuse_rematch() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'no new games here'; END $$;"
            " CREATE TRIGGER refuse_rematches BEFORE INSERT ON games FOR EACH ROW"
            " WHEN (NEW.rematch_of IS NOT NULL) EXECUTE FUNCTION refuse_rematch()"
        )
        with pytest.raises(RequestFailed, match="the database could not store it"):
            await ada.request(Rematch, game_id=game_id, token=ada_token, answer="accept")
        assert await conn.fetch("SELECT id FROM games WHERE rematch_of = $1", game_id) == []
        await conn.execute("DROP TRIGGER refuse_rematches ON games")
        ok = await ada.request(Rematch, game_id=game_id, token=ada_token, answer="accept")
        assert isinstance(ok, Ok)
        for client in (ada, bo):
            agreed = await next_event(client, Offer)  # nothing since the offer: this
            assert (agreed.kind, agreed.answer, agreed.seat) == ("rematch", "accept", 0)
            stored = await conn.fetch("SELECT id FROM games WHERE id = $1", agreed.next_game)
            assert [row["id"] for row in stored] == [agreed.next_game]
    finally:
        await conn.close()
    for client, seat in ((ada, 1), (bo, 0)):  # colours swapped
        start = await next_event(client, Snapshot)
        assert (start.game_id, start.status) == (agreed.next_game, "live")
        assert client.seats[start.game_id][0] == seat
    await ada.close()
    await bo.close()


async def _refused(*args: str) -> list[str]:
    """`noughts serve ARGS` expected to refuse to start: its stderr's lines (exit 1)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOUGHTS_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server", "--port", "0", "--workers", "0", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(process.communicate(), 60)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"noughts serve {' '.join(args)} started (not refused)") from None
    assert (process.returncode, out) == (1, b""), err
    return err.decode().splitlines()


async def test_a_server_alone_and_a_node_on_one_database_refuse_each_other(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """An operator's probe: a node (--bus) took no server lock, and a server alone looked at
    no shard lock, so a node started beside a server alone on one database (either order)
    claimed every shard and restored the other's live games. Each now refuses to start
    beside the other in one line saying which kind holds the database; the one running
    serves on."""
    from tests.server.cluster_nodes import schema_url

    db = schema_url(pg_schema)
    cluster_only = "several servers on one database must be the nodes of one cluster (--bus)"
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOUGHTS_")}
        alone = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server", "--port", "0", "--workers", "0", "--db", db,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env,
        )  # fmt: skip
        try:
            assert alone.stdout is not None
            line = (await asyncio.wait_for(alone.stdout.readline(), 60)).decode()
            assert line.startswith("noughts server listening on "), line
            node_args = ["--db", db, "--bus", REDIS_URL, "--bus-prefix", redis_prefix]
            assert await _refused(*node_args, "--node", f"x-{redis_prefix}") == [
                f"noughts serve: a noughts server alone (no --bus) is using {db}: {cluster_only}"
            ]
            ada = await ServerConnection.connect(line.split()[4], name="ada")
            await ada.request(Ping)
            await ada.close()
        finally:
            alone.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(alone.wait(), 60) == 0
        a, b = await cluster.start_pair()
        assert await _refused("--db", db) == [
            f"noughts serve: a noughts cluster's nodes (--bus) or noughts migrate are using "
            f"{db}: {cluster_only}"
        ]
        await cluster.wait_balanced()
        for node in (a, b):
            assert await node.stop() == 0


@contextlib.asynccontextmanager
async def _node_in_process(
    name: str, schema: str, prefix: str, settings: ServerSettings | None = None
) -> AsyncIterator[tuple[GameServer, str]]:
    """A node of the cluster in this process, as `noughts serve --node NAME` builds it (no
    engine; ``settings``, or the defaults): its GameServer, whose tables a test reads, and
    its address."""
    store = PostgresStore(schema_url(schema), node=name)
    await store.open()
    game_server = GameServer(store, None, settings=settings)
    try:
        timeout_s = game_server.settings.bus_timeout_s
        bus = RedisBus(REDIS_URL, prefix=prefix, node=name, timeout_s=timeout_s)
        game_server.cluster = NodeCluster(game_server, bus, ShardLocks(store.connect_locked))
        await game_server.cluster.start()
        async with running(game_server) as ws_server:
            port = next(iter(ws_server.sockets)).getsockname()[1]
            yield game_server, f"ws://127.0.0.1:{port}"
    finally:
        if game_server.cluster is not None:
            await game_server.cluster.close()
        await store.close()


async def test_spectators_that_unwatch_a_remote_game_leave_nothing_behind(
    pg_schema: str, redis_prefix: str
) -> None:
    """A soak probe's finding: a spectator on node b that unwatched a game of node a left
    an empty set of followers for it in b's table, for ever (b stopped following the
    game's channel, so the game's end never reached it: 100 cycles, 100 entries)."""
    await create_schema(pg_schema)
    async with (
        _node_in_process(f"a-{redis_prefix}", pg_schema, redis_prefix) as (a, a_url),
        _node_in_process(f"b-{redis_prefix}", pg_schema, redis_prefix) as (b, b_url),
    ):
        ada = await ServerConnection.connect(a_url, name="ada")
        bo = await ServerConnection.connect(a_url, name="bo")
        spectator = await ServerConnection.connect(b_url, name="cy")
        for _ in range(5):
            created = await ada.request(CreateGame, game="tictactoe", opponent="human")
            await bo.request(JoinGame, game_id=created.game_id)
            await spectator.request(Watch, game_id=created.game_id)
            await spectator.request(Unwatch, game_id=created.game_id)
            await ada.request(Resign, game_id=created.game_id, token=created.token)
        assert b.subscribers == {}
        for client in (ada, bo, spectator):
            await client.close()


async def test_a_drain_cut_at_drain_timeout_s_still_closes_the_lock_connection(
    pg_schema: str, redis_prefix: str
) -> None:
    """A node's drain cut at --drain-timeout-s (here a game's hand-over waits on its lock)
    left its lock connection open: the close that followed skipped the drain it had begun,
    and the connection kept the node's shards locked in PostgreSQL until the process ended
    (a node in the tests' process: until the garbage collector found it, a ResourceWarning
    failing whichever test ran then). The close now closes it, whatever the drain did."""
    await create_schema(pg_schema)
    name = f"a-{redis_prefix}"
    settings = replace(ServerSettings(), drain_timeout_s=0.2)
    held, free = asyncio.Event(), asyncio.Event()

    async def hold(game_server: GameServer, game_id: str) -> None:
        async with game_server._lock(game_id):
            held.set()
            await free.wait()

    async with _node_in_process(name, pg_schema, redis_prefix, settings) as (a, a_url):
        assert a.cluster is not None and a.cluster.locks.connected
        ada = await ServerConnection.connect(a_url, name="ada")
        created = await ada.request(CreateGame, game="tictactoe", opponent="human")
        await ada.close()
        holding = asyncio.create_task(hold(a, created.game_id))
        await held.wait()
    # Stopped: the drain was cut at 0.2 s, waiting for the game's lock; then the close.
    free.set()
    await holding
    assert a.cluster is not None and a.cluster.draining
    assert not a.cluster.locks.connected  # (before: open, every shard still locked)
    conn = await asyncpg.connect(PG_URL)
    try:
        async with asyncio.timeout(30):  # (its backend ends just after the goodbye)
            while await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                f"noughts {name}",
            ):
                await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def test_a_drain_that_meets_a_claim_being_woken_is_not_held(
    pg_schema: str, redis_prefix: str
) -> None:
    """A node told to claim (another node's "shards": the other node stopping, say) as its
    drain began: the claim loop's wait_for took the wake and dropped the drain's cancel
    (Python 3.11's wait_for returns a result that came with the cancel), and went on
    claiming; the drain waited for it until --drain-timeout-s cut it (20 s: no shard
    handed over; the cut drain then left the lock connection open, the test above). The
    loop now waits with asyncio.timeout, which keeps the cancel."""
    await create_schema(pg_schema)
    # The claim loop waits an hour between claims: parked in its wait when the drain begins.
    settings = replace(ServerSettings(), claim_s=3600.0, heartbeat_s=3600.0)
    async with _node_in_process(f"a-{redis_prefix}", pg_schema, redis_prefix, settings) as (
        a,
        _,
    ):
        assert a.cluster is not None
        for _ in range(5):
            await asyncio.sleep(0)
        a.cluster._wake.set()  # a claim asked for, as a drain begins
        async with asyncio.timeout(30):  # (before: for ever, the claim loop still running)
            await a.cluster.drain()
        assert not a.cluster.locks.held and not a.cluster.locks.connected


# --- a rolling upgrade: a node of the older version beside this one -----------------------


@contextlib.asynccontextmanager
async def _two_settled_nodes(
    schema: str, prefix: str
) -> AsyncIterator[tuple[GameServer, str, GameServer, str]]:
    """Nodes a and b in this process, each holding half the shards, that beat once an hour:
    what the test writes in a's presence stays there until b reads it (``_as_older``)."""
    await create_schema(schema)
    settings = replace(ServerSettings(), heartbeat_s=3600.0, presence_ttl_s=7200.0)
    a_name, b_name = f"a-{prefix}", f"b-{prefix}"
    async with (
        _node_in_process(a_name, schema, prefix, settings) as (a, a_url),
        _node_in_process(b_name, schema, prefix, settings) as (b, b_url),
    ):
        admin = aioredis.from_url(REDIS_URL)
        try:
            # a took every shard before b came, and b, holding none, said nothing: a
            # reads the nodes' presence again (as at a beat), and gives b its share.
            await admin.publish(f"{prefix}:cluster", pack({"op": "shards", "node": "test"}))
            async with asyncio.timeout(20):  # the shards split, and each node said so
                while True:
                    said = {}
                    for node in (a, b):
                        assert node.cluster is not None
                        data = await admin.get(f"{prefix}:presence:{node.cluster.node}")
                        said[node] = set(unpack(data)["shards"]) if data else None
                    if all(
                        node.cluster is not None
                        and len(node.cluster.locks.held) == 32
                        and not node.cluster.releasing | node.cluster.taking
                        and said[node] == node.cluster.locks.held
                        for node in (a, b)
                    ):
                        break
                    await asyncio.sleep(0.05)
        finally:
            await admin.aclose()
        yield a, a_url, b, b_url


async def _as_older(prefix: str, older: GameServer, reader: GameServer, **fields: int) -> None:
    """``older``'s presence, as ``reader`` reads it at its next beat (now), says what a
    node of the older version says: ``fields`` changed, "bus" gone unless given (a field
    the older version did not write)."""
    assert older.cluster is not None and reader.cluster is not None
    key = f"{prefix}:presence:{older.cluster.node}"
    admin = aioredis.from_url(REDIS_URL)
    try:
        data = await admin.get(key)
        assert data is not None
        state = unpack(data)
        state.pop("bus", None)
        state.update(fields)
        await admin.set(key, pack(state), keepttl=True)
    finally:
        await admin.aclose()
    await reader.cluster._heartbeat()
    assert reader.cluster.present[older.cluster.node] == state


class _Inbox:
    """What the nodes send to one node, read beside it on the bus."""

    def __init__(self, prefix: str, node: str) -> None:
        self.channel = f"{prefix}:inbox:{node}"
        self.redis = aioredis.from_url(REDIS_URL)
        self.pubsub = self.redis.pubsub()

    async def __aenter__(self) -> _Inbox:
        await self.pubsub.subscribe(self.channel)
        async with asyncio.timeout(10):  # subscribed before anything is sent
            while True:
                message = await self.pubsub.get_message(timeout=1)
                if message is not None and message["type"] == "subscribe":
                    break
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.pubsub.aclose()
        await self.redis.aclose()

    async def until(self, wanted: Any) -> list[dict[str, Any]]:
        """The payloads received, up to the first of which ``wanted`` is true."""
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            while True:
                message = await self.pubsub.get_message(timeout=1)
                if message is None or message["type"] != "message":
                    continue
                seen.append(unpack(message["data"]))
                if wanted(seen[-1]):
                    return seen


async def test_a_request_forwarded_to_a_node_of_protocol_version_1_goes_without_its_seq(
    pg_schema: str, redis_prefix: str
) -> None:
    """A rolling upgrade: bo on b resigns a game of a, whose presence says protocol
    version 1 (no "seq" on game requests: a node of that version refuses the field, and
    the resign would fail with bad_field). b forwards the resign without its seq; to a
    node of version 2, with it."""
    async with _two_settled_nodes(pg_schema, redis_prefix) as (a, a_url, b, b_url):
        assert a.cluster is not None
        ada = await ServerConnection.connect(a_url, name="ada")
        bo = await ServerConnection.connect(b_url, name="bo")
        decoded = []
        async with _Inbox(redis_prefix, a.cluster.node) as inbox:
            for protocol in (PROTOCOL_VERSION, 1):
                if protocol == 1:
                    await _as_older(redis_prefix, a, b, protocol=1)
                created = await ada.request(CreateGame, game="tictactoe", opponent="human")
                game_id = created.game_id
                joined = await bo.request(JoinGame, game_id=game_id)
                await _play(ada, created.token, game_id, 4)
                await _heard(bo, 0)  # (a seq seen: the resign carries it)
                await bo.request(Resign, game_id=game_id, token=joined.token, again=True)
                seen = await inbox.until(lambda p: p.get("op") == "req" and b"resign" in p["frame"])
                decoded.append(decode(seen[-1]["frame"]))  # (a, older or not, served it)
        assert all(isinstance(message, Resign) for message in decoded)
        assert decoded[0].seq is not None  # type: ignore[attr-defined]  # (the client's)
        assert decoded[1].seq is None  # type: ignore[attr-defined]
        for client in (ada, bo):
            await client.close()


async def _seated_in(client: ServerConnection, game_id: str) -> None:
    """Wait until ``client`` holds a seat in ``game_id`` (its seek accepted)."""
    async with asyncio.timeout(10):
        while game_id not in client.seats:
            await asyncio.sleep(0.01)


def _seats_in(payload: dict[str, Any], game_id: str) -> bool:
    """``payload`` is an "out" message whose frames seat a client in ``game_id``."""
    if payload.get("op") != "out":
        return False
    frames = [decode_server(frame) for frame in payload["frames"]]
    return any(isinstance(m, Seated) and m.game_id == game_id for m in frames)


async def test_a_seek_posters_follow_goes_on_its_own_to_a_node_of_bus_version_1(
    pg_schema: str, redis_prefix: str
) -> None:
    """A rolling upgrade: bo on b accepts ada's seek, posted on a; b owns the game, and a
    relays it to ada once b tells it to (the follow). A node of bus version 2 takes the
    follow with ada's frames (her seated) in one "out" message; a node whose presence
    names no bus version (1) reads no follow there: it gets it in a message of its own,
    before them, and ada hears the game all the same."""
    async with _two_settled_nodes(pg_schema, redis_prefix) as (a, a_url, b, b_url):
        assert a.cluster is not None
        ada = await ServerConnection.connect(a_url, name="ada")
        bo = await ServerConnection.connect(b_url, name="bo")
        await bo.request(LobbySubscribe)
        async with _Inbox(redis_prefix, a.cluster.node) as inbox:
            for older in (False, True):
                if older:
                    await _as_older(redis_prefix, a, b)
                seek = (await ada.request(Seek, game="tictactoe", color="o")).seek_id
                await _sees_seek(bo, seek)
                seated = await bo.request(AcceptSeek, seek_id=seek)
                game_id = seated.game_id
                seen = await inbox.until(lambda p, g=game_id: _seats_in(p, g))
                follows = [p for p in seen if p.get("op") == "follow" and p["game"] == game_id]
                if older:
                    assert "follow" not in seen[-1]
                    assert len(follows) == 1 and follows[0]["conn"] == seen[-1]["conn"]
                else:
                    assert [f["game"] for f in seen[-1]["follow"]] == [game_id]
                    assert follows == []
                await _seated_in(ada, game_id)  # and she hears the game through a
                await _play(bo, seated.token, game_id, 4)
                assert (await _heard(ada, 0)).action == 4
        for client in (ada, bo):
            await client.close()

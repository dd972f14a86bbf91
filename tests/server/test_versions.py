"""Protocol versions (PROTOCOL.md, Versions): a server of version 3 serves clients of every
version, and sends a message of version 3 (``rematch_closed``) only to the connections whose
``hello`` said 3."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from protocol import (
    PROTOCOL_VERSION,
    CreateGame,
    Draw,
    Ended,
    Error,
    Hello,
    JoinGame,
    Message,
    Ok,
    Ping,
    Pong,
    RematchClosed,
    Resign,
    Seated,
    Snapshot,
    Watch,
    Welcome,
)
from server.app import GameServer
from server.pool import EnginePool
from server.settings import ServerSettings
from server.shards import shard_of
from server.store import SQLiteStore
from tests.server.cluster_nodes import cluster_of
from tests.server.conftest import RawClient, RunningServer, serving
from tests.server.test_cluster import _two_settled_nodes


async def _greeted(url: str, version: int, name: str) -> tuple[RawClient, Welcome]:
    """A raw client whose hello says ``version``, and its welcome."""
    client = await RawClient.connect(url, hello=False)
    await client.send_message(Hello(rid=1, version=version, name=name))
    welcome = await client.receive()
    assert isinstance(welcome, Welcome), welcome
    return client, welcome


async def _until(client: RawClient, kind: type[Message]) -> list[Message]:
    """The frames received up to the first of ``kind`` (10 s each: only catches a hang)."""
    seen = [await client.receive()]
    while not isinstance(seen[-1], kind):
        seen.append(await client.receive())
    return seen


async def _live_game(
    url: str, versions: tuple[int, int]
) -> tuple[RawClient, RawClient, str, tuple[str, str]]:
    """ada (X) and bo (O), whose hellos say ``versions``, in a live game: its id, and their
    seats' tokens."""
    ada, _ = await _greeted(url, versions[0], "ada")
    bo, _ = await _greeted(url, versions[1], "bo")
    await ada.send_message(CreateGame(rid=2, game="tictactoe", opponent="human", seat=0))
    created = (await _until(ada, Seated))[-1]
    assert isinstance(created, Seated)
    await bo.send_message(JoinGame(rid=2, game_id=created.game_id))
    joined = (await _until(bo, Seated))[-1]
    assert isinstance(joined, Seated)
    for client in (ada, bo):
        await _until(client, Snapshot)  # (the live game's)
    return ada, bo, created.game_id, (created.token, joined.token)


async def _watchers(url: str, game_id: str) -> tuple[RawClient, RawClient]:
    """Two spectators of ``game_id`` at ``url``, each past its snapshot: one whose hello
    said 3, one whose hello said 1 (a client of version 1 or 2)."""
    new, _ = await _greeted(url, 3, "new")
    old, _ = await _greeted(url, 1, "old")
    for watcher in (new, old):
        await watcher.send_message(Watch(rid=2, game_id=game_id))
        await _until(watcher, Snapshot)
    return new, old


async def test_a_server_of_version_3_serves_clients_of_versions_1_2_and_3(
    server: RunningServer,
) -> None:
    """hello.version is the newest version the client speaks: a server of version 3 takes 1
    (a client of version 1, or of version 2, which sends ``seq`` to a server of version 2 or
    more), 2 and 3, and names its own in welcome; 4 is refused."""
    for version in (1, 2, 3):
        client, welcome = await _greeted(server.url, version, f"v{version}")
        assert welcome.version == PROTOCOL_VERSION == 3
        await client.close()
    # A client of version 2 (hello 1, seq on game requests) and one of version 1 (no seq).
    ada, bo, game_id, (ada_token, bo_token) = await _live_game(server.url, (1, 1))
    await bo.send_message(Draw(rid=3, game_id=game_id, token=bo_token, seq=1))
    assert isinstance((await _until(bo, Ok))[-1], Ok)
    await ada.send_message(Resign(rid=3, game_id=game_id, token=ada_token))
    ended = (await _until(ada, Ended))[-1]
    assert (
        isinstance(ended, Ended) and ended.rid == 3 and ended.result == "*"
    )  # (before both moved: an abort)
    newer = await RawClient.connect(server.url, hello=False)
    await newer.send_message(Hello(rid=1, version=4, name="v4"))
    refused = await newer.receive()
    assert isinstance(refused, Error) and refused.code == "version_mismatch"
    assert "protocol versions 1 to 3, not 4" in refused.message
    for client in (ada, bo, newer):
        await client.close()


@pytest.mark.parametrize("why", ["kept-long-enough", "both-players-left"])
async def test_a_watcher_of_version_3_is_told_the_rematch_window_closed_one_of_1_is_not(
    tmp_path: Path, pool: EnginePool, why: str
) -> None:
    """The server lets a finished game go (keep_finished_s after its end, or once both its
    players left): no rematch can be agreed in it any more. A watcher whose hello said 3 gets
    ``rematch_closed``; one whose hello said 1 (a client of version 1 or 2, which could not
    read it) gets nothing, and the game is gone for both (unknown_game)."""
    keep = 0.3 if why == "kept-long-enough" else 600.0
    async with serving(tmp_path, pool, ServerSettings(keep_finished_s=keep)) as server:
        ada, bo, game_id, (token, _) = await _live_game(server.url, (3, 3))
        new, old = await _watchers(server.url, game_id)
        await ada.send_message(Resign(rid=3, game_id=game_id, token=token))
        await _until(ada, Ended)
        if why == "both-players-left":
            await ada.close()
            await bo.close()
        closed = (await _until(new, RematchClosed))[-1]
        assert closed == RematchClosed(game_id=game_id)
        # The server told every follower at once: whatever old was sent, it came before this.
        await old.send_message(Ping(rid=9))
        seen = await _until(old, Pong)
        assert not any(isinstance(m, RematchClosed) for m in seen), seen
        assert any(isinstance(m, Ended) for m in seen)  # (it did follow the game)
        for watcher in (new, old):
            await watcher.send_message(Watch(rid=10, game_id=game_id))
            refused = (await _until(watcher, Error))[-1]
            assert isinstance(refused, Error) and refused.code == "unknown_game"
            await watcher.close()
        if why == "kept-long-enough":
            await ada.close()
            await bo.close()


async def test_a_server_set_to_protocol_version_2_serves_as_one(
    tmp_path: Path, pool: EnginePool
) -> None:
    """``protocol_version`` (a setting) makes a server of this code serve as one of an older
    version: a hello of version 3 is refused (version_mismatch, then the connection closes
    with 4001), one of version 1 is welcomed with version 2."""
    settings = ServerSettings(protocol_version=2)
    async with serving(tmp_path, pool, settings) as server:
        newer = await RawClient.connect(server.url, hello=False)
        await newer.send_message(Hello(rid=1, version=3, name="v3"))
        refused = await newer.receive()
        assert isinstance(refused, Error) and refused.code == "version_mismatch"
        assert refused.rid == 1 and "protocol versions 1 to 2, not 3" in refused.message
        with pytest.raises(ConnectionClosed) as closed:
            await newer.receive()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4001
        client, welcome = await _greeted(server.url, 1, "v1")
        assert welcome.version == 2
        await client.close()
    with pytest.raises(ValueError, match="protocol_version 4"):
        GameServer(
            SQLiteStore(tmp_path / "unopened.db"),
            None,
            settings=replace(settings, protocol_version=4),
        )


async def test_a_watcher_on_another_node_is_told_the_rematch_window_closed(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A cluster: the game is owned by node a, where both its players are; its watchers are
    on node b. When a lets the finished game go (both players left), b tells its watcher
    whose hello said 3 (the owner's eviction reaches b on the game's channel), and not the
    one whose hello said 1."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a, b = await cluster.start_pair()
        ada, bo, game_id, (token, _) = await _live_game(a.url, (3, 3))
        assert await cluster.owner_of(game_id) == a.name
        new, old = await _watchers(b.url, game_id)
        await ada.send_message(Resign(rid=3, game_id=game_id, token=token))
        for watcher in (new, old):
            await _until(watcher, Ended)
        await ada.close()
        await bo.close()
        assert (await _until(new, RematchClosed))[-1] == RematchClosed(game_id=game_id)
        await old.send_message(Ping(rid=9))
        seen = await _until(old, Pong)
        assert not any(isinstance(m, RematchClosed) for m in seen), seen
        for watcher in (new, old):
            await watcher.close()


async def test_a_finished_game_handed_to_another_node_closes_its_rematch_window(
    pg_schema: str, redis_prefix: str
) -> None:
    """A node that hands its shard to another (a rebalance, a drain) lets its finished games
    go: no node loads a finished game again, so no rematch can be agreed in it. Its watchers,
    on that node and on the other, are told (rematch_closed), as when it is kept long enough;
    before, they followed it on the bus, where nothing came any more."""
    async with _two_settled_nodes(pg_schema, redis_prefix) as (a, a_url, b, b_url):
        ada, bo, game_id, (token, _) = await _live_game(a_url, (3, 3))
        assert a.cluster is not None and game_id in a.games
        here, _ = await _greeted(a_url, 3, "here")
        there, _ = await _greeted(b_url, 3, "there")
        for watcher in (here, there):
            await watcher.send_message(Watch(rid=2, game_id=game_id))
            await _until(watcher, Snapshot)
        await ada.send_message(Resign(rid=3, game_id=game_id, token=token))
        for watcher in (here, there):
            await _until(watcher, Ended)
        await a.cluster._release({shard_of(game_id)})
        for watcher in (here, there):
            assert (await _until(watcher, RematchClosed))[-1] == RematchClosed(game_id=game_id)
        for client in (ada, bo, here, there):
            await client.close()


async def test_a_watcher_on_another_node_is_told_when_the_owner_of_a_finished_game_dies(
    pg_schema: str, redis_prefix: str, tmp_path: Path
) -> None:
    """Node a owns a finished game and dies (kill -9) before letting it go: no node loads a
    finished game again, so its rematch window is closed. Its watcher on node b, which asks
    the game's new owner for what it missed, is told (rematch_closed) once that owner says
    the game is no longer served; before, it was asked again and again, and the watcher, of
    version 3, never told."""
    async with cluster_of(pg_schema, redis_prefix, tmp_path) as cluster:
        a, b = await cluster.start_pair()
        ada, bo, game_id, (token, _) = await _live_game(a.url, (3, 3))
        assert await cluster.owner_of(game_id) == a.name
        watcher, _ = await _greeted(b.url, 3, "eve")
        await watcher.send_message(Watch(rid=2, game_id=game_id))
        await _until(watcher, Snapshot)
        await ada.send_message(Resign(rid=3, game_id=game_id, token=token))
        await _until(watcher, Ended)
        a.kill()
        await cluster.wait_owned(game_id, {b.name})
        assert (await _until(watcher, RematchClosed))[-1] == RematchClosed(game_id=game_id)
        await watcher.close()

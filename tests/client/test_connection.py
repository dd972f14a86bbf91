"""ServerConnection's reconnection (reconnect=True), against a real server; what it says when
there is no server to reach."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from client.connection import ServerConnection
from protocol import AcceptSeek, CreateGame, JoinGame, Seek, Snapshot
from server.pool import EnginePool
from tests.client.ui_support import UIServer, next_event


async def test_a_port_that_is_not_a_websocket_server_is_named_so() -> None:
    from client.connection import ServerUnreachable

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the client's opening handshake
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")  # not HTTP
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ServerUnreachable) as caught:
            await ServerConnection.connect(f"ws://127.0.0.1:{port}", name="ada")
    finally:
        server.close()
        await server.wait_closed()
    assert isinstance(caught.value, OSError)  # what the commands catch
    assert str(caught.value).startswith(f"cannot reach ws://127.0.0.1:{port}: not a websocket ")


async def test_a_seek_is_posted_again_when_the_connection_drops(ui_server: UIServer) -> None:
    """The server removes a connection's seeks when it closes (server: disconnected), so a
    dropped connection lost its seek while the server stayed up. After the reconnection it is
    posted again (SeekReposted: its new id) and can be accepted."""
    ada = await ServerConnection.connect(ui_server.url, name="ada", reconnect=True)
    bob = await ui_server.connect("bob")
    try:
        posted = await ada.request(Seek, game="tictactoe", color="x")
        ada.drop()
        notice = await asyncio.wait_for(ada.seek_notices.get(), 60)
        assert (notice.first_id, notice.previous_id) == (posted.seek_id, posted.seek_id)
        assert notice.seek_id is not None and notice.seek_id != posted.seek_id
        seated = await bob.request(AcceptSeek, seek_id=notice.seek_id)
        assert seated.seat == 1
        event = await next_event(ada, Snapshot)
        assert event.game_id == seated.game_id and ada.seats[seated.game_id][0] == 0
        assert not ada.core.standing  # taken: not posted again after another drop
    finally:
        await ada.close()
        await bob.close()


async def test_a_game_still_open_when_the_connection_dropped_starts_after_it(
    ui_server: UIServer,
) -> None:
    """The creator of an open game drops before anyone joins: after the reconnection it
    follows the game again, so the snapshot of its start reaches it."""
    ada = await ServerConnection.connect(ui_server.url, name="ada", reconnect=True)
    bob = await ui_server.connect("bob")
    try:
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        opened = await ada.next_event(timeout=30)
        assert isinstance(opened, Snapshot) and opened.status == "open"
        ada.drop()
        assert await asyncio.wait_for(ada.status_changes.get(), 30) == "connected"  # (initial)
        assert await asyncio.wait_for(ada.status_changes.get(), 30) == "reconnecting"
        assert await asyncio.wait_for(ada.status_changes.get(), 30) == "connected"
        await bob.request(JoinGame, game_id=seated.game_id)
        while True:
            event = await ada.next_event(timeout=30)
            assert isinstance(event, Snapshot) and event.game_id == seated.game_id
            if event.status == "live":
                break
            assert event.status == "open"  # the resume's own snapshot, before bob joined
        assert [p["name"] for p in event.players] == ["ada", "bob"]
        assert ada.token_for(seated.game_id) == seated.token
    finally:
        await ada.close()
        await bob.close()


async def test_clients_come_back_to_a_server_restarted_on_the_same_port(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """The server stops (port 0 first), then starts again on the same port and database:
    both players reconnect by themselves, with their seats, each with its own jittered
    waits, and the game goes on without a gap or a duplicate."""
    import random

    from client.connection import ConnectionLost
    from client.session_core import Backoff
    from protocol import Move, Moved
    from server.app import GameServer, running
    from server.store import SQLiteStore

    backoff = Backoff(base_s=0.05, cap_s=0.5)
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    async with running(GameServer(store, ui_pool)) as ws_server:
        port = next(iter(ws_server.sockets)).getsockname()[1]
        url = f"ws://127.0.0.1:{port}"
        ada, bob = [
            await ServerConnection.connect(
                url, name=name, reconnect=True, backoff=backoff, rng=random.Random(seed)
            )
            for name, seed in (("ada", 1), ("bob", 2))
        ]
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        await bob.request(JoinGame, game_id=seated.game_id)
        await ada.request(Move, game_id=seated.game_id, token=seated.token, action=4, ply=0)
    await store.close()
    try:
        for client in (ada, bob):
            while client.status != "reconnecting":
                await asyncio.wait_for(client.status_changes.get(), 30)
        with pytest.raises(ConnectionLost):  # a request while the server is down fails
            await ada.request(Move, game_id=seated.game_id, token=seated.token, action=0, ply=1)
        store = SQLiteStore(tmp_path / "games.db")
        await store.open()
        async with running(GameServer(store, ui_pool), port=port):
            for client in (ada, bob):
                while client.status != "connected":
                    await asyncio.wait_for(client.status_changes.get(), 30)
            # The seats are theirs again (a restarted server gives new tokens).
            assert ada.seats[seated.game_id][0] == 0 and bob.seats[seated.game_id][0] == 1
            token = bob.token_for(seated.game_id)
            await bob.request(Move, game_id=seated.game_id, token=token, action=0, ply=1)
            seen: list[int] = []
            while True:
                event = await ada.next_event(timeout=30)
                if getattr(event, "seq", None) is not None:
                    seen.append(event.seq)  # type: ignore[attr-defined]
                if isinstance(event, Moved) and event.ply == 1:
                    break
            assert seen == sorted(set(seen)), "events in order, none twice"
            token = ada.token_for(seated.game_id)
            await ada.request(Move, game_id=seated.game_id, token=token, action=8, ply=2)
            await ada.close()
            await bob.close()
    finally:
        await store.close()


async def test_a_game_against_the_ai_whose_reply_was_lost_is_not_created_twice(
    ui_server: UIServer,
) -> None:
    """Probe: a "play the AI" request whose reply was lost with the connection (the server
    made the game, its `seated` never arrived) failed, and trying again made a second game.
    Now the plain client sends it again once reconnected, after looking at the seats the
    welcome brought back: the game the lost request made is played, no second one is made;
    a create of another game is sent as usual."""
    from client.plain import PlainGame
    from client.session_core import Backoff
    from tests.client.ui_support import live_games_of
    from tests.services import PostgresLink

    relay = PostgresLink(target=("127.0.0.1", int(ui_server.url.rsplit(":", 1)[1])))
    await relay.open()
    ada = await ServerConnection.connect(
        f"ws://127.0.0.1:{relay.port}", name="ada", reconnect=True,
        backoff=Backoff(base_s=0.05, cap_s=0.5),
    )  # fmt: skip
    bob = await ui_server.connect("bob")

    async def adas_games() -> list[str]:
        return await live_games_of(bob, "ada")

    try:
        game = PlainGame(ada, write=lambda text: None)
        relay.hold_answers()  # the server's answers no longer reach ada
        creating = asyncio.ensure_future(
            game.create(game="tictactoe", opponent="ai", seat=0, budget_ms=50)
        )
        async with asyncio.timeout(30):
            while not (made := await adas_games()):  # the server made it
                await asyncio.sleep(0.02)
        await relay.cut()  # its reply lost with the connection
        await relay.restore()
        await asyncio.wait_for(creating, 60)
        assert game.game_id == made[0] and game.seat == 0
        assert await adas_games() == made
        other = await ada.request(CreateGame, game="tictactoe", opponent="ai", seat=1, budget_ms=50)
        assert other.rid is not None and sorted(await adas_games()) == sorted(
            [*made, other.game_id]
        )
    finally:
        await ada.close()
        await bob.close()
        await relay.close()

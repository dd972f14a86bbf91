"""The client's side of protocol versions (PROTOCOL.md, Versions): its hello says the newest
version it speaks; a server older than it refuses that, and the client connects once more
saying version 1, in the one place every client connects (``ServerConnection._open``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgpack
import pytest
import websockets
from websockets.asyncio.server import ServerConnection as StandIn

from client.connection import RequestFailed, ServerConnection
from client.session_core import Backoff
from protocol import PROTOCOL_VERSION, CreateGame, Resign
from server.pool import EnginePool
from server.settings import ServerSettings
from tests.server.conftest import serving


async def test_a_client_says_the_newest_version_and_meets_an_older_server_with_version_1(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """To a server of version 3 the client says 3 (it is told rematch_closed). A server that
    speaks only 2 (``protocol_version``: as an older server does) refuses 3 and closes; the
    client connects again at once saying 1, and from then on speaks to it as to a server of
    version 2 (seq on game requests, no rematch_closed), a reconnection after a drop too."""
    (tmp_path / "new").mkdir()
    async with serving(tmp_path / "new", ui_pool, ServerSettings()) as server:
        ada = await ServerConnection.connect(server.url, name="ada")
        assert ada.core.version == PROTOCOL_VERSION == 3
        assert ada.welcome is not None and ada.welcome.version == 3
        assert ada.core.told_rematch_closed and ada.core.takes_seq
        (spoken,) = [c.version for c in server.game_server.players[ada.player_id].connections]
        assert spoken == 3
        await ada.close()
    (tmp_path / "old").mkdir()
    settings = ServerSettings(protocol_version=2)
    async with serving(tmp_path / "old", ui_pool, settings) as server:
        fast = Backoff(base_s=0.05, cap_s=0.2)
        bo = await ServerConnection.connect(server.url, name="bo", reconnect=True, backoff=fast)
        try:
            assert bo.welcome is not None and bo.welcome.version == 2
            assert bo.core.version == 1
            assert bo.core.takes_seq and not bo.core.told_rematch_closed
            seated = await bo.request(CreateGame, game="tictactoe", opponent="ai")
            bo.drop()
            async with asyncio.timeout(30):  # (only catches a hang)
                while await bo.status_changes.get() != "reconnecting":
                    pass
                await bo.reconnected()
            assert bo.core.version == 1 and bo.welcome.version == 2
            player = server.game_server.players[bo.player_id]
            assert [c.version for c in player.connections] == [1]
            # A game request carries its seq (a server of version 2 takes it).
            ended = await bo.request(Resign, game_id=seated.game_id, again=True)
            assert ended.reason == "abort"  # (a resign before both sides moved)
        finally:
            await bo.close()


async def test_a_second_refusal_of_the_hello_is_one_line_and_not_tried_again() -> None:
    """A server that speaks none of the client's versions (a stand-in for one of a far newer
    protocol: it refuses every hello, version_mismatch, and closes 4001 as ours does) gets
    two hellos, the newest version and then 1, and no third: connect raises RequestFailed
    with a one-line message saying so."""
    hellos: list[int] = []

    async def refuse(websocket: StandIn) -> None:
        hello = msgpack.unpackb(await websocket.recv(), raw=False)
        hellos.append(hello["version"])
        error = {
            "type": "error",
            "rid": hello["rid"],
            "code": "version_mismatch",
            "message": f"this server speaks protocol versions 7 to 9, not {hello['version']}: "
            "upgrade your client",
        }
        await websocket.send(msgpack.packb(error))
        await websocket.close(4001, "protocol version mismatch")

    async with websockets.serve(refuse, "127.0.0.1", 0, compression=None) as stand_in:
        port = next(iter(stand_in.sockets)).getsockname()[1]
        with pytest.raises(RequestFailed) as refused:
            await ServerConnection.connect(f"ws://127.0.0.1:{port}", name="ada")
        await asyncio.sleep(0)
    assert hellos == [PROTOCOL_VERSION, 1]
    message = refused.value.message
    assert refused.value.code == "version_mismatch" and "\n" not in message
    assert message == (
        "no protocol version in common with the server (this client speaks 1 to 3): "
        "this server speaks protocol versions 7 to 9, not 1: upgrade your client"
    )

"""Bad input gets a clear error naming the problem; the connection stays open; nothing is stored."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
import websockets

from client.connection import RequestFailed, ServerConnection
from protocol import (
    MAX_CLIENT_FRAME,
    Abort,
    Claim,
    CreateGame,
    Draw,
    Error,
    GetGame,
    Hello,
    JoinGame,
    Move,
    Ping,
    Pong,
    Rematch,
    Resign,
    Snapshot,
    Watch,
    Welcome,
)
from server.app import MAX_WEBSOCKET_FRAME
from server.pool import EnginePool
from server.settings import ServerSettings
from tests.server.conftest import RawClient, RunningServer, serving


async def _refused(connection: ServerConnection, kind: type, code: str, **fields: object) -> str:
    with pytest.raises(RequestFailed) as failure:
        await connection.request(kind, **fields)
    assert failure.value.code == code, failure.value
    # The connection is still served.
    assert isinstance(await connection.request(Ping), Pong)
    return failure.value.message


async def _two_player_game(server: RunningServer) -> tuple:
    ada = await server.connect("ada")
    bo = await server.connect("bo")
    a = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
    b = await bo.request(JoinGame, game_id=a.game_id)
    return ada, bo, a, b


def _moves(server: RunningServer, game_id: str) -> list[tuple[int, int]]:
    return server.query("SELECT ply, action FROM moves WHERE game_id = ? ORDER BY ply", game_id)


async def test_illegal_moves_are_refused_and_not_stored(server: RunningServer) -> None:
    ada, bo, a, b = await _two_player_game(server)
    gid = a.game_id
    message = await _refused(bo, Move, "not_your_turn", game_id=gid, token=b.token, action=4)
    assert "turn" in message
    await ada.request(Move, game_id=gid, token=a.token, action=4)
    message = await _refused(bo, Move, "illegal_move", game_id=gid, token=b.token, action=4)
    assert "occupied" in message
    message = await _refused(bo, Move, "illegal_move", game_id=gid, token=b.token, action=9)
    assert "9" in message
    message = await _refused(bo, Move, "stale_move", game_id=gid, token=b.token, action=0, ply=0)
    assert "ply" in message
    assert _moves(server, gid) == [(0, 4)]
    await bo.request(Move, game_id=gid, token=b.token, action=0, ply=1)
    assert _moves(server, gid) == [(0, 4), (1, 0)]


async def test_tokens_and_seats_are_checked(server: RunningServer) -> None:
    ada, bo, a, b = await _two_player_game(server)
    gid = a.game_id
    message = await _refused(ada, Move, "bad_token", game_id=gid, token="x" * 32, action=4)
    assert gid in message
    # Another seat's token, from the wrong connection.
    await _refused(bo, Move, "bad_token", game_id=gid, token=a.token, action=4)
    # A stranger holding a copied token cannot move or resign either.
    stranger = await server.connect("mallory")
    await _refused(stranger, Move, "bad_token", game_id=gid, token=a.token, action=4)
    await _refused(stranger, Resign, "bad_token", game_id=gid, token=a.token)
    await _refused(stranger, Draw, "bad_token", game_id=gid, token=a.token)
    await _refused(stranger, Abort, "bad_token", game_id=gid, token=b.token)
    await _refused(stranger, Claim, "bad_token", game_id=gid, token=b.token)
    await _refused(stranger, Rematch, "bad_token", game_id=gid, token=b.token)
    # Nor can a spectator.
    watched = await stranger.request(Watch, game_id=gid)
    assert isinstance(watched, Snapshot) and watched.status == "live"
    await _refused(stranger, Move, "bad_token", game_id=gid, token=b.token, action=4)
    assert _moves(server, gid) == []


async def test_unknown_and_finished_games(server: RunningServer) -> None:
    ada, bo, a, b = await _two_player_game(server)
    await _refused(ada, Move, "unknown_game", game_id="nosuchid", token=a.token, action=0)
    await _refused(ada, JoinGame, "unknown_game", game_id="nosuchid")
    await _refused(ada, GetGame, "unknown_game", game_id="nosuchid")
    await _refused(ada, Watch, "unknown_game", game_id="nosuchid")
    # A full game cannot be joined.
    carol = await server.connect("carol")
    await _refused(carol, JoinGame, "seat_taken", game_id=a.game_id)
    await ada.request(Resign, game_id=a.game_id, token=a.token)  # (no move yet: an abort)
    # After the end nothing more is accepted for it.
    message = await _refused(bo, Move, "game_over", game_id=a.game_id, token=b.token, action=4)
    assert a.game_id in message and "abort" in message
    await _refused(ada, Resign, "game_over", game_id=a.game_id, token=a.token)
    record = (await ada.request(GetGame, game_id=a.game_id)).game
    assert (record["result"], record["reason"], record["moves"]) == ("*", "abort", [])


async def test_bad_requests_name_the_problem(server: RunningServer) -> None:
    client = await server.connect()
    message = await _refused(client, CreateGame, "bad_request", game="chess")
    assert "chess" in message
    message = await _refused(client, CreateGame, "bad_request", game="mnk", params={"m": 5})
    assert "n" in message
    message = await _refused(
        client, CreateGame, "bad_request", game="tictactoe", algorithm="deepblue"
    )
    assert "deepblue" in message
    # The AI's seat cannot be played by the human.
    seated = await client.request(
        CreateGame, game="tictactoe", opponent="ai", seat=0, algorithm="random", budget_ms=5
    )
    assert seated.seat == 0
    assert server.query("SELECT COUNT(*) FROM games")[0][0] == 1


async def test_malformed_frames_get_protocol_errors(server: RunningServer) -> None:
    raw = await RawClient.connect(server.url)
    cases: list[tuple[bytes | str, str]] = [
        (b"\xc1", "bad_frame"),  # never used by msgpack
        (b"\x92\x01\x02", "bad_frame"),  # an array, not a map
        (msgpack.packb({"type": "ping", "rid": 1}) + b"\x00", "bad_frame"),  # trailing bytes
        ("a text frame", "bad_frame"),
        (msgpack.packb({"type": "castle", "rid": 1}), "unknown_type"),
        (msgpack.packb({"rid": 1}), "unknown_type"),
        (msgpack.packb({"type": "ping"}), "bad_field"),  # missing rid
        (msgpack.packb({"type": "ping", "rid": "1"}), "bad_field"),
        (msgpack.packb({"type": "ping", "rid": 1, "extra": 0}), "bad_field"),
        (
            msgpack.packb({"type": "move", "rid": 1, "game_id": "g", "token": "t", "action": -1}),
            "bad_field",
        ),
        (
            msgpack.packb({"type": "move", "rid": 1, "game_id": "g", "token": "t", "action": True}),
            "bad_field",
        ),
        (msgpack.packb({"type": "ping", "rid": 1, "pad": "x" * 100})[:-10], "bad_frame"),
        (msgpack.packb({"type": "ping", "rid": 1, "pad": "x" * MAX_CLIENT_FRAME}), "too_large"),
    ]
    for frame, code in cases:
        await raw.send(frame)
        reply = await raw.receive()
        assert isinstance(reply, Error) and reply.code == code, (frame[:40], reply)
        assert reply.message
    await raw.send_message(Ping(rid=9))
    assert await raw.receive() == Pong(rid=9)
    await raw.close()


async def test_oversized_frames_close_only_that_connection(server: RunningServer) -> None:
    bystander = await server.connect("bystander")
    raw = await RawClient.connect(server.url)
    await raw.send(b"\x80" + b"x" * MAX_WEBSOCKET_FRAME)
    with pytest.raises(websockets.ConnectionClosed) as closed:
        await raw.receive()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert isinstance(await bystander.request(Ping), Pong)


async def test_a_compressed_bomb_is_refused_before_it_is_inflated(
    tmp_path: Path, pool: EnginePool
) -> None:
    """With --compression deflate, a message of 16 MiB of zeros crosses the wire in a few
    KiB: the frame cap must hold for the message inflated (websockets' max_size bounds the
    decompression), or one client makes the server allocate what it likes."""
    bomb = bytes(16 * 2**20)
    async with serving(tmp_path, pool, ServerSettings(compression="deflate")) as server:
        bystander = await server.connect("bystander")
        websocket = await websockets.connect(server.url, compression="deflate")
        assert websocket.protocol.extensions  # permessage-deflate negotiated
        await websocket.send(bomb)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await websocket.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        assert isinstance(await bystander.request(Ping), Pong)
        await bystander.close()


async def test_hello_first_and_version_mismatch(server: RunningServer) -> None:
    raw = await RawClient.connect(server.url, hello=False)
    await raw.send_message(Ping(rid=1))
    reply = await raw.receive()
    assert isinstance(reply, Error) and reply.code == "not_ready"
    await raw.send_message(Hello(rid=2, version=99))
    reply = await raw.receive()
    assert isinstance(reply, Error) and reply.code == "version_mismatch"
    assert "1" in reply.message and "99" in reply.message
    with pytest.raises(websockets.ConnectionClosed) as closed:
        await raw.receive()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4001

    raw = await RawClient.connect(server.url, hello=False)
    await raw.send_message(Hello(rid=1, version=1, name="ok"))
    welcome = await raw.receive()
    assert isinstance(welcome, Welcome) and len(welcome.session) >= 32
    await raw.send_message(Hello(rid=2, version=1))
    reply = await raw.receive()
    assert isinstance(reply, Error) and reply.rid == 2
    await raw.close()

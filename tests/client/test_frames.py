"""A frame the client cannot read is an error it reports, never one it drops in silence
(issue 11, findings 5 and 7: the client's own decoder dropped a 2.25 MB lobby_state).

The server here is a real websockets server that sends exactly the frames under test: what a
newer, buggy or hostile server might send."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgpack
import pytest
import websockets

from client.connection import ConnectionLost, RequestFailed, ServerConnection
from protocol import (
    MAX_SERVER_FRAME,
    PROTOCOL_VERSION,
    LobbySubscribe,
    Ping,
    Welcome,
    decode,
    encode,
)

Reply = Callable[[dict[str, Any]], list[bytes]]


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[[Reply], Any]]:
    """Start a server that answers hello with a welcome and every other request with what
    ``reply(request)`` returns; yields a function that starts it and returns its URL."""
    servers = []

    async def start(reply: Reply) -> str:
        async def handler(websocket: Any) -> None:
            with contextlib.suppress(websockets.ConnectionClosed):
                await serve(websocket)

        async def serve(websocket: Any) -> None:
            async for frame in websocket:
                request = msgpack.unpackb(frame)
                if request["type"] == "hello":
                    decode(frame)  # a well-formed hello
                    welcome = Welcome(
                        rid=request["rid"], version=PROTOCOL_VERSION, session="s", player_id="p-1"
                    )
                    await websocket.send(encode(welcome))
                    continue
                for out in reply(request):
                    await websocket.send(out)

        server = await websockets.serve(handler, "127.0.0.1", 0, max_size=None, compression=None)
        servers.append(server)
        return f"ws://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def _lobby_state(rid: int, games: int) -> bytes:
    game = {"game_id": "g", "game": "tictactoe", "params": {}, "status": "live", "players": []}
    body = {"type": "lobby_state", "rid": rid, "seeks": [], "games": [game] * games}
    return msgpack.packb(body)


async def test_a_reply_the_client_cannot_decode_fails_its_request(
    scripted: Callable[[Reply], Any],
) -> None:
    # More games than the client's decoder takes (its cap is 10,000): the reply to `lobby`.
    url = await scripted(lambda request: [_lobby_state(request["rid"], 10_001)])
    client = await ServerConnection.connect(url)
    try:
        with pytest.raises(RequestFailed) as failed:
            await asyncio.wait_for(client.request(LobbySubscribe), 10)
        assert failed.value.code == "bad_field" and "games" in failed.value.message
        assert "server" in failed.value.message  # says whose frame it could not read
    finally:
        await client.close()


async def test_an_undecodable_push_is_reported_on_the_error_queue(
    scripted: Callable[[Reply], Any],
) -> None:
    # A pushed frame (no rid) of a type this client does not know, then the real reply.
    def reply(request: dict[str, Any]) -> list[bytes]:
        return [msgpack.packb({"type": "from_the_future"}), msgpack.packb(
            {"type": "pong", "rid": request["rid"]}
        )]  # fmt: skip

    client = await ServerConnection.connect(await scripted(reply))
    try:
        await asyncio.wait_for(client.request(Ping), 10)
        error = client.errors.get_nowait()
        assert error.code == "unknown_type" and "from_the_future" in error.message
    finally:
        await client.close()


async def test_a_frame_over_the_size_cap_is_reported_with_the_reason(
    scripted: Callable[[Reply], Any],
) -> None:
    url = await scripted(lambda request: [b"\x00" * (MAX_SERVER_FRAME + 1)])
    client = await ServerConnection.connect(url)
    try:
        with pytest.raises(ConnectionLost, match="too big|1009"):
            await asyncio.wait_for(client.request(Ping), 10)
    finally:
        await client.close()

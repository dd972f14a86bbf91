"""Limits that protect everyone answer with an error naming the limit before closing
anything, and only the offending connection is affected."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
import websockets

from client.connection import RequestFailed
from protocol import CreateGame, Error, Ping, Pong, Watch, encode
from server.settings import ServerSettings
from tests.server.conftest import RawClient, RunningServer


@pytest.fixture
def settings() -> ServerSettings:
    return ServerSettings(rate_per_s=20.0, burst=30)


async def test_the_rate_limit_answers_then_closes_a_client_that_keeps_on(
    server: RunningServer,
) -> None:
    bystander = await server.connect("bystander")
    raw = await RawClient.connect(server.url)  # its hello took one token
    for rid in range(1, 30):
        await raw.send_message(Ping(rid=rid))
    replies = [await raw.receive() for _ in range(29)]
    assert all(isinstance(r, Pong) for r in replies)  # within the burst
    await raw.send_message(Ping(rid=99))
    limited = await raw.receive()
    assert isinstance(limited, Error) and limited.code == "rate_limited"
    assert "20 messages/s" in limited.message and "bursts of 30" in limited.message
    await asyncio.sleep(0.2)  # the bucket refills: 4 tokens
    await raw.send_message(Ping(rid=100))
    assert await raw.receive() == Pong(rid=100)
    # A client that ignores the errors and floods on is closed with 4029.
    for rid in range(200, 300):
        await raw.send_message(Ping(rid=rid))
    with pytest.raises(websockets.ConnectionClosed) as closed:
        while True:
            await raw.receive()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4029
    assert isinstance(await bystander.request(Ping), Pong)


async def test_a_client_that_sends_on_while_closed_still_reads_why(server: RunningServer) -> None:
    """A probe's finding: a flooder that keeps sending after the server stopped reading got
    a reset (1006), never the close frame (4029): closing a socket with unread input sends
    RST, and the peer drops what it had not read. The server now half-closes (FIN after
    the close frame) and cuts the connection only after the grace."""
    raw = await RawClient.connect(server.url)
    frame = encode(Ping(rid=1))

    async def flood() -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            while True:
                await raw.websocket.send(frame)
                await asyncio.sleep(0)

    flooding = asyncio.create_task(flood())
    with pytest.raises(websockets.ConnectionClosed) as closed:
        while True:
            await raw.receive()
    flooding.cancel()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4029


async def test_open_games_per_player_are_capped(server: RunningServer) -> None:
    cap = ServerSettings().max_open_games_per_player
    assert server.game_server.settings.max_open_games_per_player == cap == 20  # PROTOCOL.md
    ada = await server.connect("ada")
    for _ in range(cap):
        await ada.request(CreateGame, game="tictactoe", opponent="human")
        await asyncio.sleep(0.06)  # stay under this test's rate limit
    with pytest.raises(RequestFailed, match=f"too_many.*{cap} unfinished"):
        await ada.request(CreateGame, game="tictactoe", opponent="human")


async def test_watching_is_capped(server: RunningServer) -> None:
    assert server.game_server.settings.max_watched_per_connection == 100  # PROTOCOL.md
    server.game_server.settings.max_watched_per_connection = 2
    ada = await server.connect("ada")
    games = []
    for _ in range(3):
        games.append((await ada.request(CreateGame, game="tictactoe", opponent="human")).game_id)
    carol = await server.connect("carol")
    await carol.request(Watch, game_id=games[0])
    await carol.request(Watch, game_id=games[1])
    with pytest.raises(RequestFailed, match="too_many.*2 games watched"):
        await carol.request(Watch, game_id=games[2])

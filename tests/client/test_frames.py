"""A frame the client cannot read is an error it reports, never one it drops in silence
(issue 11, findings 5 and 7: the client's own decoder dropped a 2.25 MB lobby_state).

The server here is a real websockets server that sends exactly the frames under test: what a
newer, buggy or hostile server might send."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
import websockets

import client.bot
from client.bot import Bot
from client.connection import ConnectionLost, RequestFailed, ServerConnection
from protocol import (
    MAX_SERVER_FRAME,
    PROTOCOL_VERSION,
    Ended,
    Error,
    LobbySubscribe,
    Moved,
    Offer,
    Ok,
    Ping,
    Seated,
    SeekPosted,
    Snapshot,
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


def _watched(game: str, actions: list[int], moved: list[tuple[int, int]]) -> Reply:
    """Answer watch (and join, seating O first) with a snapshot of ``game`` after
    ``actions``, then a moved event for each (seat, action) of ``moved``."""

    def reply(request: dict[str, Any]) -> list[bytes]:
        if request["type"] not in ("watch", "join"):
            return []
        game_id = request["game_id"]
        seated = []
        if request["type"] == "join":  # seated as O, then the game's events
            seated = [encode(Seated(rid=request["rid"], game_id=game_id, seat=1, token="t"))]
            request = {**request, "rid": None}
        players: list[dict[str, Any] | None] = [{"name": "ada"}, {"name": "bob"}]
        snapshot = Snapshot(rid=request["rid"], game_id=game_id, seq=len(actions) + 1,
                            game=game, params={}, players=players, actions=actions,
                            status="live", to_move=len(actions) % 2)  # fmt: skip
        frames = [encode(snapshot)]
        for ply, (seat, action) in enumerate(moved, start=len(actions)):
            frames.append(encode(Moved(game_id=game_id, seq=ply + 2, ply=ply, seat=seat,
                                       action=action, to_move=1 - seat)))  # fmt: skip
        return seated + frames

    return reply


@pytest.mark.parametrize(
    ("game", "actions", "moved", "why"),
    [
        ("connect4", [3], [], "unknown game 'connect4'"),
        ("tictactoe", [4, 4], [], "move 2: cell b2 is occupied by X"),
        ("tictactoe", [4], [(1, 4)], "move 2: cell b2 is occupied by X"),
        ("tictactoe", [4], [(1, 0), (0, 99)], "move 3: move 99 is out of range 0..8"),
        ("tictactoe", [4], [(0, 0)], "move 2: seat 0 moved, not the side to move"),
    ],
)
async def test_a_game_that_breaks_the_rules_is_one_line_from_watch_and_play(
    scripted: Callable[[Reply], Any],
    tmp_path: Path,
    game: str,
    actions: list[int],
    moved: list[tuple[int, int]],
    why: str,
) -> None:
    """noughts watch and play --plain of a game this client does not know (a newer
    server's) ended in an EngineError traceback; a snapshot or a move on an occupied cell
    (a hostile server) was drawn over the piece there, and one off the board ended in an
    IndexError. The game's model now checks each by the rules, and both say in one line
    why they cannot follow the game."""
    url = await scripted(_watched(game, actions, moved))
    for command, args in (("watch", ()), ("play", ("--plain", "--name", "bob", "--join"))):
        await _one_line(command, [*args, "g1", "--server", url], why, tmp_path)


@pytest.mark.parametrize(
    ("game", "actions", "moved", "why"),
    [
        ("connect4", [3], [], "unknown game 'connect4'"),
        ("tictactoe", [4], [(0, 4)], "move 2: cell b2 is occupied by X"),
    ],
)
async def test_a_bots_game_that_breaks_the_rules_is_ended_in_one_line(
    scripted: Callable[[Reply], Any],
    tmp_path: Path,
    game: str,
    actions: list[int],
    moved: list[tuple[int, int]],
    why: str,
) -> None:
    """noughts bot seated in a game this client does not know (a newer server's), or sent
    a move against the rules, ended in a GameDataError traceback. It says why in one line,
    ends that game as a stop ends one (aborted, else resigned) and counts it aborted."""
    asked: list[str] = []
    watched = _watched(game, actions, moved)

    def reply(request: dict[str, Any]) -> list[bytes]:
        asked.append(request["type"])
        if request["type"] == "seek":  # taken at once: seated as O in that game
            seated = Seated(game_id="g1", seat=1, token="t")
            frames = watched({"type": "watch", "rid": None, "game_id": "g1"})
            return [encode(SeekPosted(rid=request["rid"], seek_id="s1")), encode(seated), *frames]
        return [encode(Ok(rid=request["rid"]))]

    url = await scripted(reply)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "bot", "--server", url, "--name", "robo",
        "--seek", "tictactoe", "--games", "1", "--engine", "random",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NOUGHTS_SESSIONS": str(tmp_path / "sessions.json")},
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(process.communicate(), 120)  # (a hang guard)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, (out, err)
    said = [line for line in err.decode().splitlines() if "g1" in line]
    assert len(said) == 1 and said[0].startswith("game g1 cannot be played: "), err
    assert why in said[0] and "Traceback" not in err.decode()
    assert "1 aborted" in out.decode() and asked[-1] == "abort"


async def test_a_bot_logs_the_errors_the_server_pushes_once_each_and_keeps_none(
    scripted: Callable[[Reply], Any], caplog: pytest.LogCaptureFixture
) -> None:
    """noughts bot never read its connection's queue of errors no request got (a game that
    waits for its database, an AI that could not move): over days it grew with each one, and
    none was said. Each is now logged in one line, the same code again within a minute only
    counted (the count said later), and the queue is left empty."""
    waits = Error(code="unavailable", game_id="g0", message="game g0 waits:\nthe database is down")
    failed = Error(code="engine_unavailable", game_id="g2", message="the AI cannot move")

    def reply(request: dict[str, Any]) -> list[bytes]:
        if request["type"] != "seek":
            return [encode(Ok(rid=request["rid"]))]
        players: list[dict[str, Any] | None] = [{"name": "ada"}, {"name": "robo"}]
        start = Snapshot(game_id="g1", seq=1, game="tictactoe", params={}, players=players,
                         actions=[], status="live", to_move=0)  # fmt: skip
        return [
            encode(SeekPosted(rid=request["rid"], seek_id="s1")),
            *[encode(waits)] * 200,
            encode(failed),
            encode(Seated(game_id="g1", seat=1, token="t")),
            encode(start),
            encode(Ended(game_id="g1", seq=2, result="1-0", reason="resign", winner=0)),
        ]

    bot = Bot(await scripted(reply), lambda turn: turn.state.legal_actions()[0], name="robo")
    with caplog.at_level(logging.WARNING, logger="client.bot"):
        (result,) = await asyncio.wait_for(bot.play(1, seek="tictactoe"), 30)
    assert result.outcome == "loss"
    assert bot.connection is not None and bot.connection.errors.empty()
    said = [r.getMessage() for r in caplog.records if "server error" in r.getMessage()]
    assert said == [
        "server error unavailable: game g0 waits: the database is down",
        "server error engine_unavailable: game g2: the AI cannot move",
        "server error unavailable: 199 more held back",
    ]


async def test_a_bot_that_took_a_rematch_plays_on_and_keeps_no_old_game(
    scripted: Callable[[Reply], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rematch's offer (naming its game) and its start come in one burst; a bot that
    looked at the start first took it for its seek's game, kept the rematch among those
    agreed for ever and had one slot less from then on: with one slot it played no more
    and never ended its run. Now it withdraws its seek for the rematch, plays it, and
    seeks again. And it kept every game it finished (its seat, token and seqs), and a game
    with a rematch offer after its end was resumed after every reconnection: over days,
    thousands; it now keeps the last MAX_FINISHED (1 here), none to resume."""
    monkeypatch.setattr(client.bot, "MAX_FINISHED", 1)
    asked: list[str] = []
    players: list[dict[str, Any] | None] = [{"name": "ada"}, {"name": "robo"}]

    def game(game_id: str, seat: int, rid: int | None = None) -> list[bytes]:
        start = Snapshot(game_id=game_id, seq=1, game="tictactoe", params={},
                         players=players, actions=[], status="live", to_move=0)  # fmt: skip
        return [
            encode(Seated(game_id=game_id, seat=seat, token="t")),
            encode(start),
            encode(Ended(game_id=game_id, seq=2, result="1-0", reason="resign", winner=0)),
        ]

    def reply(request: dict[str, Any]) -> list[bytes]:
        asked.append(request["type"])
        rid = request["rid"]
        if request["type"] == "seek":
            seeks = asked.count("seek")
            posted = [encode(SeekPosted(rid=rid, seek_id=f"s{seeks}"))]
            if seeks == 1:  # taken at once: game g1 (lost), after which ada asks a rematch
                return posted + game("g1", 1)
            if seeks == 2:
                offer = Offer(game_id="g1", seq=3, kind="rematch", seat=0, answer="offer")
                return [*posted, encode(offer)]
            return posted
        if request["type"] == "rematch":  # agreed: its offer, the ok, the game, at once
            agreed = Offer(
                game_id="g1", seq=4, kind="rematch", seat=1, answer="accept", next_game="g2"
            )
            return [encode(agreed), encode(Ok(rid=rid)), *game("g2", 1)]
        return [encode(Ok(rid=rid))]

    bot = Bot(await scripted(reply), lambda turn: turn.state.legal_actions()[0], name="robo")
    playing = asyncio.create_task(bot.play(3, seek="tictactoe"))
    try:
        async with asyncio.timeout(30):
            while asked.count("seek") < 3:  # its third game's seek
                await asyncio.sleep(0.01)
        assert bot.stop()
        results = await asyncio.wait_for(playing, 30)
    finally:
        playing.cancel()
    assert [r.game_id for r in results] == ["g1", "g2"]
    assert asked[asked.index("rematch") :] == ["rematch", "cancel_seek", "seek", "cancel_seek"]
    assert not bot.rematches
    assert bot.connection is not None and list(bot.finished) == ["g2"]
    assert "g1" not in bot.connection.seats and "g1" not in bot.connection.seen_seq
    assert not bot.connection.last_seq


async def _one_line(command: str, args: list[str], why: str, tmp_path: Path) -> None:
    """``noughts COMMAND ARGS`` exits 1 saying in one line that it cannot follow the game."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", command, *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NOUGHTS_SESSIONS": str(tmp_path / "sessions.json")},
    )  # fmt: skip
    try:  # (before: the occupied cells were drawn over, and the watcher waited on)
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 1, (out, err)
    lines = err.decode().splitlines()
    said = {"watch": "noughts watch: game g1 cannot be followed: ",
            "play": "noughts play: the game cannot be followed: "}  # fmt: skip
    assert len(lines) == 1 and lines[0].startswith(said[command]), lines
    assert why in lines[0], lines[0]


@pytest.mark.parametrize(
    ("game", "actions", "moved", "why"),
    [
        ("connect4", [3], [], "unknown game 'connect4'"),
        ("tictactoe", [4], [(1, 4)], "move 2: cell b2 is occupied by X"),
    ],
)
async def test_the_interface_says_why_it_cannot_follow_a_game_and_goes_on(
    scripted: Callable[[Reply], Any],
    game: str,
    actions: list[int],
    moved: list[tuple[int, int]],
    why: str,
) -> None:
    """noughts play --watch of a game this client does not know (a newer server's) ended
    the interface in an EngineError traceback; a move on an occupied cell was drawn over
    the piece there. A notification now says why, and the game's screen closes."""
    from client.ui import NoughtsApp, Start
    from client.ui.game import GameScreen
    from tests.client.ui_support import until

    url = await scripted(_watched(game, actions, moved))
    app = NoughtsApp(url, name="viewer", start=Start("watch", game_id="g1"))
    async with app.run_test(size=(110, 36)) as pilot:
        await until(pilot, lambda: bool(app._notifications), "a notification")
        said = [(n.title, n.message) for n in app._notifications]
        assert [title for title, _ in said] == ["Cannot follow"]
        assert said[0][1].startswith("Game g1 cannot be followed: ") and why in said[0][1]
        await pilot.pause()
        assert not isinstance(app.screen, GameScreen) and "g1" not in app.games

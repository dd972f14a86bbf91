"""Every command reconnects: the plain client, games, replay and export, against a real
server stopped and started again on the same port and database."""

from __future__ import annotations

import asyncio
import os
import random
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from client.bot import Bot
from client.connection import ServerConnection
from client.session_core import Backoff
from client.ui import NoughtsApp, Start
from client.ui.game import GameScreen
from protocol import (
    AcceptSeek,
    CreateGame,
    Ended,
    GetGame,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
    Move,
    Moved,
    Resign,
    Resume,
    Seek,
    Snapshot,
)
from server.app import GameServer, running
from server.pool import EnginePool
from server.store import SQLiteStore
from tests.client.ui_support import next_event, open_lobby, until

FAST = Backoff(base_s=0.05, cap_s=0.5)


@asynccontextmanager
async def server_on(db: Path, pool: EnginePool, port: int = 0) -> AsyncIterator[int]:
    """A real server on ``port`` (0: a free one) and the SQLite file ``db``; stopped as
    SIGTERM stops it (close code 1012: reconnect)."""
    store = SQLiteStore(db)
    await store.open()
    try:
        async with running(GameServer(store, pool), port=port) as ws_server:
            yield next(iter(ws_server.sockets)).getsockname()[1]
    finally:
        await store.close()


class Output:
    """A child's stream read as it comes."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream
        self.text = ""

    async def until(self, wanted: str, count: int = 1) -> None:
        async def read() -> None:
            while self.text.count(wanted) < count:
                assert "hold no seat" not in self.text, self.text
                chunk = await self.stream.read(4096)
                assert chunk, f"the child ended before {wanted!r}: {self.text}"
                self.text += chunk.decode()

        try:
            await asyncio.wait_for(read(), 120)
        except TimeoutError:
            raise AssertionError(f"no {wanted!r} in: {self.text}") from None


async def ada_plays(url: str, *options: str) -> tuple[asyncio.subprocess.Process, Output]:
    """ada's plain client with ``options`` (pipes for its input and output), and its output
    read as it comes."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "play", "--plain", "--server", url, "--name", "ada",
        *options,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ},
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    assert child.stderr is not None
    return child, Output(child.stdout)


async def ada_joins(url: str, game_id: str) -> tuple[asyncio.subprocess.Process, Output]:
    """ada's plain client joining ``game_id``."""
    return await ada_plays(url, "--join", game_id)


async def seek_of(connection: ServerConnection, name: str) -> str:
    """The id of the first seek of player ``name`` in the lobby, as ``connection`` (subscribed
    to it) is told of it."""
    while True:
        message = await connection.next_lobby_event(timeout=60)
        if isinstance(message, LobbyState):
            seeks = list(message.seeks)
        elif isinstance(message, LobbyEvent) and message.seek is not None:
            seeks = [message.seek]
        else:
            continue
        for seek in seeks:
            if seek["player"]["name"] == name:
                return str(seek["seek_id"])


async def test_the_plain_client_plays_on_across_a_server_restart(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """The cause of "you hold no seat with this token" after a restart: a restored server
    keeps only the hash of a seat's token and gives a new one in its welcome, and the plain
    client kept the first one. Now the session core adds the seat's current token to every
    request (client/session_core.py)."""
    db = tmp_path / "games.db"
    async with server_on(db, ui_pool) as port:
        url = f"ws://127.0.0.1:{port}"
        bob = await ServerConnection.connect(url, name="bob", reconnect=True, backoff=FAST)
        seated = await bob.request(CreateGame, game="tictactoe", opponent="human", seat=1)
        child, out = await ada_joins(url, seated.game_id)
        await out.until("X to move> ")
        child.stdin.write(b"b2\n")
        assert (await next_event(bob, Moved)).action == 4
        await bob.request(Move, game_id=seated.game_id, action=0, ply=1)  # a3
        await out.until("X to move> ", 2)
    async with server_on(db, ui_pool, port):
        while bob.status != "connected":
            await asyncio.wait_for(bob.status_changes.get(), 60)
        err = Output(child.stderr)
        await err.until("noughts: reconnected")  # on stderr, as each retry was
        child.stdin.write(b"a1\n")  # with the token of before the restart, refused
        moved = await next_event(bob, Moved)
        while moved.ply < 2:  # bob's own, and those the resume repeated
            moved = await next_event(bob, Moved)
        assert (moved.ply, moved.action) == (2, 6)
        await bob.request(Move, game_id=seated.game_id, action=1, ply=3)  # b3
        await out.until("(O) played b3.")
        child.stdin.write(b"c3\n")  # a1, b2, c3: X wins
        await out.until("Replay it with:")
        assert await asyncio.wait_for(child.wait(), 60) == 0, err.text
        await bob.close()
    assert "Game over: You win: a line was completed." in out.text


async def test_the_plain_client_shows_the_end_of_a_game_that_ended_while_it_was_away(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """ada's plain client is away (its server stopped) while bob, on another server on the
    same database, resigns; back, ada's resume finds the game over: the client said the
    board and waited for ever. It says the end and leaves."""
    db = tmp_path / "games.db"
    async with server_on(db, ui_pool) as port:
        url = f"ws://127.0.0.1:{port}"
        bob = await ServerConnection.connect(url, name="bob")
        seated = await bob.request(CreateGame, game="tictactoe", opponent="human", seat=1)
        child, out = await ada_joins(url, seated.game_id)
        await out.until("X to move> ")
        child.stdin.write(b"b2\n")
        assert (await next_event(bob, Moved)).action == 4
    session = bob.session
    await bob.close()
    async with server_on(db, ui_pool) as other:  # ada's client knows nothing of this one
        bob = await ServerConnection.connect(f"ws://127.0.0.1:{other}", name="bob", session=session)
        await bob.request(Resume, game_id=seated.game_id)
        await bob.request(Move, game_id=seated.game_id, action=0, ply=1)  # (then it counts)
        await bob.request(Resign, game_id=seated.game_id)
        await bob.close()
    async with server_on(db, ui_pool, port):
        await out.until("Replay it with:")
        assert await asyncio.wait_for(child.wait(), 60) == 0
    assert "Game over: You win: resignation." in out.text, out.text


async def test_a_read_sent_while_the_server_is_down_is_answered_once_it_is_back(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """``games``, ``replay`` and ``export`` read with ``again=True``: a request the
    connection dropped under (or sent while it is down) is sent again once reconnected."""
    db = tmp_path / "games.db"
    async with server_on(db, ui_pool) as port:
        url = f"ws://127.0.0.1:{port}"
        ada = await ServerConnection.connect(
            url, name="ada", reconnect=True, backoff=FAST, rng=random.Random(3)
        )
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
    while ada.status != "reconnecting":
        await asyncio.wait_for(ada.status_changes.get(), 60)
    reading = asyncio.ensure_future(ada.request(GetGame, again=True, game_id=seated.game_id))
    await asyncio.sleep(0.2)
    assert not reading.done()  # waiting for the server, not failed
    async with server_on(db, ui_pool, port):
        record = await asyncio.wait_for(reading, 60)
        assert record.game["id"] == seated.game_id
        await ada.close()


async def test_a_plain_clients_seek_is_posted_again_after_a_server_restart(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """A seek lives as long as the connection that posted it (PROTOCOL.md, seek): after a
    restart `play --seek` waited for ever for a seek no one could see. The session core
    posts it again once reconnected (client/session_core.py) and the client says its new id;
    another player accepts it."""
    db = tmp_path / "games.db"
    async with server_on(db, ui_pool) as port:
        url = f"ws://127.0.0.1:{port}"
        child, out = await ada_plays(url, "--seek", "--game", "tictactoe", "--seat", "x")
        await out.until("Waiting for someone to accept your seek")
    async with server_on(db, ui_pool, port):
        bob = await ServerConnection.connect(url, name="bob")
        await bob.request(LobbySubscribe)
        seek_id = await seek_of(bob, "ada")
        seated = await bob.request(AcceptSeek, seek_id=seek_id)
        await out.until("You play X.")
        assert f"posted again ({seek_id})" in out.text, out.text
        child.stdin.write(b"resign\n")
        await next_event(bob, Ended)
        await out.until("Replay it with:")
        assert await asyncio.wait_for(child.wait(), 60) == 0
        assert seated.seat == 1
        await bob.close()


async def test_a_quick_pairing_entry_meets_the_ai_after_a_server_restart(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """`play --quick --ai-after N`: the server's queue and its AI timer went with the restart
    and the client waited for ever. The entry is queued again once reconnected, with the
    seconds left of its first N (client/session_core.py), and the AI steps in. (N is 15 s:
    the server's stop and start must come first, also on a slow machine.)"""
    db = tmp_path / "games.db"
    async with server_on(db, ui_pool) as port:
        url = f"ws://127.0.0.1:{port}"
        child, out = await ada_plays(url, "--quick", "--game", "tictactoe", "--ai-after", "15")
        await out.until("Waiting for another")
    assert "You play" not in out.text  # (the AI came within the 15 s: no restart tested)
    async with server_on(db, ui_pool, port):
        await out.until("You play ")
        assert "queued again" in out.text.split("You play ")[0], out.text
        child.stdin.write(b"resign\n")
        await out.until("Replay it with:")
        assert await asyncio.wait_for(child.wait(), 60) == 0


async def test_a_bots_seek_is_posted_again_after_a_server_restart(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """`noughts bot --seek` sat idle after a restart: its seek went with the server. The
    session core posts it again; bob accepts it and the bot plays the game."""
    db = tmp_path / "games.db"
    async with server_on(db, ui_pool) as port:
        url = f"ws://127.0.0.1:{port}"
        bot = Bot(url, lambda turn: turn.state.legal_actions()[0], name="robo")
        playing = asyncio.create_task(bot.play(1, seek="tictactoe", color="x"))
        cy = await ServerConnection.connect(url, name="cy")
        await cy.request(LobbySubscribe)
        before = await seek_of(cy, "robo")
        await cy.close()
    async with server_on(db, ui_pool, port):
        bob = await ServerConnection.connect(url, name="bob")
        await bob.request(LobbySubscribe)
        seek_id = await seek_of(bob, "robo")
        seated = await bob.request(AcceptSeek, seek_id=seek_id)
        await next_event(bob, Snapshot)
        await next_event(bob, Moved)  # robo's first move (cell 0)
        await bob.request(Move, game_id=seated.game_id, action=4, ply=1)  # (then it counts)
        await bob.request(Resign, game_id=seated.game_id)
        [result] = await asyncio.wait_for(playing, 60)
        assert (result.game_id, result.outcome) == (seated.game_id, "win")
        assert seek_id != before
        await bob.close()


async def test_the_terminal_interfaces_seek_is_posted_again_after_a_server_restart(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """The lobby said "Seek posted: waiting…" over an empty seek list after a restart. The
    seek is posted again; the lobby follows its new id and says so; bob accepts it."""
    db = tmp_path / "games.db"
    first = server_on(db, ui_pool)
    port = await first.__aenter__()
    url = f"ws://127.0.0.1:{port}"
    app = NoughtsApp(url, name="ada", start=Start("pairing", request=Seek, fields={"game": "5x5"}))
    async with app.run_test(size=(110, 36)) as pilot:
        lobby = await open_lobby(pilot, app)
        await until(pilot, lambda: bool(lobby.my_seeks), "the seek posted")
        (before,) = lobby.my_seeks
        await first.__aexit__(None, None, None)
        async with server_on(db, ui_pool, port):
            await until(pilot, lambda: lobby.my_seeks and before not in lobby.my_seeks, "again")
            (seek_id,) = lobby.my_seeks
            status = str(lobby.query_one("#lobby-status").render())
            assert "posted again" in status, status
            bob = await ServerConnection.connect(url, name="bob")
            await bob.request(LobbySubscribe)
            assert await seek_of(bob, "ada") == seek_id
            await bob.request(AcceptSeek, seek_id=seek_id)
            await until(pilot, lambda: isinstance(app.screen, GameScreen), "the game")
            await bob.close()

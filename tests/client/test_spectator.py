"""`noughts watch GAME_ID` across a server restart: the moves made while it was away are
printed, not skipped."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from client.connection import ServerConnection
from client.session_core import Backoff
from client.spectator import follow
from protocol import CreateGame, JoinGame, Move, Rematch, Resign, Resume, Watch
from server.app import GameServer, running
from server.pool import EnginePool
from server.settings import ServerSettings
from server.store import SQLiteStore

FAST = Backoff(base_s=0.05, cap_s=0.5)


@contextlib.asynccontextmanager
async def _server(
    db: Path, pool: EnginePool, port: int = 0, settings: ServerSettings | None = None
) -> AsyncIterator[str]:
    store = SQLiteStore(db)
    await store.open()
    try:
        game_server = GameServer(store, pool, settings=settings or ServerSettings())
        async with running(game_server, port=port) as ws_server:
            yield f"ws://127.0.0.1:{next(iter(ws_server.sockets)).getsockname()[1]}"
    finally:
        await store.close()


async def _printed(lines: list[str], prefix: str) -> None:
    """Until a line starting with ``prefix`` is printed (30 s: only catches a hang)."""
    for _ in range(600):
        if any(line.startswith(prefix) for line in lines):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no line {prefix!r} in {lines}")


async def _move(client: ServerConnection, game_id: str, action: int) -> None:
    await client.request(Move, game_id=game_id, token=client.token_for(game_id), action=action)


async def test_a_watcher_back_from_a_restart_prints_the_moves_it_missed(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """A walk's finding: after a restart the watcher printed the game's header again and
    went on from the next move; the moves made meanwhile never had their line. Here the
    server stops, a second one (on another port) takes two moves, and a third on the
    watcher's port brings it back: it prints them."""
    db, lines = tmp_path / "games.db", []
    async with _server(db, ui_pool) as url:
        port = int(url.rsplit(":", 1)[1])
        ada, bo = (
            await ServerConnection.connect(url, name="ada"),
            await ServerConnection.connect(url, name="bo"),
        )
        seated = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
        gid = seated.game_id
        await bo.request(JoinGame, game_id=gid)
        watcher = await ServerConnection.connect(url, name="eve", reconnect=True)
        await watcher.request(Watch, game_id=gid)
        following = asyncio.create_task(follow(watcher, gid, lines.append))
        await _move(ada, gid, 12)
        await _move(bo, gid, 6)
        await _printed(lines, "2. ")
        sessions = (ada.session, bo.session)
        await ada.close()
        await bo.close()
    async with _server(db, ui_pool) as elsewhere:  # the watcher does not know this one
        ada = await ServerConnection.connect(elsewhere, name="ada", session=sessions[0])
        bo = await ServerConnection.connect(elsewhere, name="bo", session=sessions[1])
        for client in (ada, bo):
            await client.request(Resume, game_id=gid, since=0)
        await _move(ada, gid, 13)
        await _move(bo, gid, 7)
        await ada.close()
        await bo.close()
    async with _server(db, ui_pool, port) as url:
        ada = await ServerConnection.connect(url, name="ada", session=sessions[0])
        await _printed(lines, "4. ")
        await ada.request(Resume, game_id=gid, since=0)
        await ada.request(Resign, game_id=gid, token=ada.token_for(gid))
        await asyncio.wait_for(following, 30)
        await ada.close()
        await watcher.close()
    played = [line.split(" played ")[1] for line in lines if " played " in line]
    assert played == ["c3", "b4", "d3", "c4"], lines
    assert sum(line.startswith(f"Game {gid}:") for line in lines) == 1  # one header


async def test_a_watcher_of_an_open_game_is_told_who_takes_the_seat(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """A probe's finding: watching a game still open, the joining player's snapshot printed
    the empty board a second time and nothing else; who took the open seat (the header said
    "O = (open seat)") was never said. Now a line says the game starts, and who plays."""
    lines: list[str] = []
    async with _server(tmp_path / "games.db", ui_pool) as url:
        ada = await ServerConnection.connect(url, name="ada")
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        gid = seated.game_id
        watcher = await ServerConnection.connect(url, name="eve")
        await watcher.request(Watch, game_id=gid)
        following = asyncio.create_task(follow(watcher, gid, lines.append))
        await _printed(lines, f"Game {gid}:")
        bo = await ServerConnection.connect(url, name="bo")
        await bo.request(JoinGame, game_id=gid)
        await _printed(lines, "The game starts")
        await _move(ada, gid, 4)
        await _move(bo, gid, 0)  # (before both sides moved a resign aborts)
        await ada.request(Resign, game_id=gid, token=ada.token_for(gid))
        await asyncio.wait_for(following, 30)
        for client in (ada, bo, watcher):
            await client.close()
    said = [line for line in lines if not line.startswith(("  ", "1 ", "2 ", "3 "))]
    assert said == [
        f"Game {gid}: tictactoe, X = ada, O = (open seat), open, 0 moves played",
        "The game starts: X = ada, O = bo",
        "1. ada (X) played b2",
        "2. bo (O) played a3",
        "Game over: 0-1. O wins: resignation.",
    ], lines


async def test_a_watcher_follows_the_players_into_their_rematch(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """`noughts watch` stopped at the game's end; the players' rematch, which the `offer`
    event names to spectators too, went unseen. With ``rematches`` (watch --rematches) the
    watcher waits after the end and follows the rematch, as Lichess moves its spectators."""
    lines: list[str] = []
    async with _server(tmp_path / "games.db", ui_pool) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        gid = seated.game_id
        await bo.request(JoinGame, game_id=gid)
        watcher = await ServerConnection.connect(url, name="eve")
        await watcher.request(Watch, game_id=gid)
        following = asyncio.create_task(follow(watcher, gid, lines.append, rematches=True))
        await _printed(lines, f"Game {gid}:")
        await _move(ada, gid, 4)
        await _move(bo, gid, 0)  # (before both sides moved a resign aborts)
        await ada.request(Resign, game_id=gid, token=ada.token_for(gid))
        await ada.request(Rematch, game_id=gid, token=ada.token_for(gid))
        await bo.request(Rematch, game_id=gid, token=bo.token_for(gid), answer="accept")
        await _printed(lines, "Rematch: game ")
        new = next(line for line in lines if line.startswith("Rematch: ")).split()[2].rstrip(",")
        await _printed(lines, f"Game {new}: tictactoe, X = bo, O = ada, live")
        await _move(bo, new, 4)
        await _printed(lines, "1. bo (X) played b2")
        assert not following.done()
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        assert watcher.core.watching == {new}
        for client in (ada, bo, watcher):
            await client.close()
    said = [line for line in lines if not line.startswith(("  ", "1 ", "2 ", "3 "))]
    assert said == [
        f"Game {gid}: tictactoe, X = ada, O = bo, live, 0 moves played",
        "1. ada (X) played b2",
        "2. bo (O) played a3",
        "Game over: 0-1. O wins: resignation.",
        "Waiting for a rematch (Ctrl-C leaves).",
        "ada (X) offers a rematch.",
        f"Rematch: game {new}, colours swapped.",
        f"Game {new}: tictactoe, X = bo, O = ada, live, 0 moves played",
        "1. bo (X) played b2",
    ], lines


async def test_a_watcher_back_from_a_drop_after_the_end_still_follows_the_rematch(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """watch --rematches: the game that ended was no longer followed after a reconnection
    (its end had dropped it from the games watched again), so the rematch its players
    agreed went unseen and the watcher waited on. Now it watches the finished game again
    from its last seq and goes on into the rematch."""
    lines: list[str] = []
    async with _server(tmp_path / "games.db", ui_pool) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        gid = seated.game_id
        await bo.request(JoinGame, game_id=gid)
        watcher = await ServerConnection.connect(url, name="eve", reconnect=True, backoff=FAST)
        await watcher.request(Watch, game_id=gid)
        following = asyncio.create_task(follow(watcher, gid, lines.append, rematches=True))
        await _printed(lines, f"Game {gid}:")
        await _move(ada, gid, 4)
        await _move(bo, gid, 0)  # (before both sides moved a resign aborts)
        await ada.request(Resign, game_id=gid, token=ada.token_for(gid))
        await _printed(lines, "Waiting for a rematch")
        assert watcher.websocket is not None
        dropped = watcher.websocket
        dropped.transport.abort()
        async with asyncio.timeout(30):  # (only catches a hang)
            while watcher.websocket is dropped or not watcher.up.is_set():
                await asyncio.sleep(0.01)
        await ada.request(Rematch, game_id=gid, token=ada.token_for(gid))
        await bo.request(Rematch, game_id=gid, token=bo.token_for(gid), answer="accept")
        await _printed(lines, "Rematch: game ")
        new = next(line for line in lines if line.startswith("Rematch: ")).split()[2].rstrip(",")
        await _printed(lines, f"Game {new}: tictactoe, X = bo, O = ada, live")
        await _move(bo, new, 4)
        await _printed(lines, "1. bo (X) played b2")
        assert not following.done()
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        assert watcher.core.watching == {new}
        for client in (ada, bo, watcher):
            await client.close()


@pytest.mark.parametrize("version", [2, 3])
async def test_a_watcher_waiting_for_a_rematch_stops_when_the_window_closes(
    tmp_path: Path, ui_pool: EnginePool, version: int
) -> None:
    """watch --rematches waited after the end until Ctrl-C: a server older than protocol
    version 3 does not tell spectators when it lets the finished game go (keep_finished_s, 10
    minutes by default), after which no rematch can come. Against one (a server set to
    protocol_version 2) the watcher asks every ``check_s`` whether the game is still kept;
    a server of version 3 says it (rematch_closed), and the watcher, which then asks nothing
    (``check_s`` an hour), stops at once. Either way it says so in one line."""
    lines: list[str] = []
    settings = ServerSettings(keep_finished_s=0.3, protocol_version=version)
    check_s = 0.1 if version == 2 else 3600.0
    async with _server(tmp_path / "games.db", ui_pool, settings=settings) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        gid = seated.game_id
        await bo.request(JoinGame, game_id=gid)
        watcher = await ServerConnection.connect(url, name="eve")
        await watcher.request(Watch, game_id=gid)
        following = asyncio.create_task(
            follow(watcher, gid, lines.append, rematches=True, check_s=check_s)
        )
        assert watcher.core.told_rematch_closed == (version == 3)
        await _printed(lines, f"Game {gid}:")
        await _move(ada, gid, 4)
        await _move(bo, gid, 0)  # (before both sides moved a resign aborts)
        await ada.request(Resign, game_id=gid, token=ada.token_for(gid))
        async with asyncio.timeout(30):  # (only catches a hang)
            ended = await following
        assert ended.result == "0-1"
        for client in (ada, bo, watcher):
            await client.close()
    said = [line for line in lines if not line.startswith(("  ", "1 ", "2 ", "3 "))]
    assert said[-3:] == [
        "Game over: 0-1. O wins: resignation.",
        "Waiting for a rematch (Ctrl-C leaves).",
        f"No rematch: the rematch window of game {gid} is over.",
    ], lines


async def test_a_watcher_of_a_game_just_over_is_told_its_end(
    tmp_path: Path, ui_pool: EnginePool
) -> None:
    """noughts watch GAME of a game just over (the server keeps it a while, for a rematch)
    printed its header and board and then waited for ever: the end it waits for came before
    it watched. Now the snapshot of a game over is its end: said, and the ending returned."""
    lines: list[str] = []
    async with _server(tmp_path / "games.db", ui_pool) as url:
        ada = await ServerConnection.connect(url, name="ada")
        bo = await ServerConnection.connect(url, name="bo")
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        gid = seated.game_id
        await bo.request(JoinGame, game_id=gid)
        await _move(ada, gid, 4)
        await _move(bo, gid, 0)  # (before both sides moved a resign aborts)
        await ada.request(Resign, game_id=gid, token=ada.token_for(gid))
        watcher = await ServerConnection.connect(url, name="eve")
        await watcher.request(Watch, game_id=gid)
        async with asyncio.timeout(30):  # (only catches a hang)
            ended = await follow(watcher, gid, lines.append)
        assert (ended.result, ended.reason) == ("0-1", "resign")
        for client in (ada, bo, watcher):
            await client.close()
    said = [line for line in lines if not line.startswith(("  ", "1 ", "2 ", "3 "))]
    assert said == [
        f"Game {gid}: tictactoe, X = ada, O = bo, finished, 2 moves played",
        "Game over: 0-1. O wins: resignation.",
    ], lines

"""Games survive a server restart: kill -9 mid-game, start again on the same database,
reconnect with the session, resume, finish. Nothing acknowledged is lost."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from client.connection import RequestFailed, ServerConnection
from client.embedded import EmbeddedServer
from protocol import (
    CreateGame,
    Draw,
    Ended,
    GetGame,
    JoinGame,
    Move,
    Moved,
    Presence,
    Resume,
    Resumed,
    Snapshot,
)
from server.pool import EnginePool
from server.settings import ServerSettings
from tests.server.conftest import human_game, next_event, serving


async def _play(client: ServerConnection, game_id: str, action: int) -> Moved:
    return await client.request(  # type: ignore[no-any-return]
        Move, game_id=game_id, token=client.token_for(game_id), action=action
    )


async def test_a_game_continues_after_the_server_is_killed(tmp_path: Path) -> None:
    db = tmp_path / "games.db"
    first = EmbeddedServer(db, workers=1)
    url = await first.start()
    ada = await ServerConnection.connect(url, name="ada")
    bo = await ServerConnection.connect(url, name="bo")
    clock = {"initial_ms": 600_000, "increment_ms": 2000}
    seated = await ada.request(CreateGame, game="5x5", opponent="human", seat=0, clock=clock)
    await bo.request(JoinGame, game_id=seated.game_id)
    gid = seated.game_id
    acknowledged = [await _play(ada, gid, 12), await _play(bo, gid, 6), await _play(ada, gid, 13)]
    vs_ai = await ada.request(
        CreateGame, game="tictactoe", opponent="ai", seat=1, algorithm="alphabeta", budget_ms=5
    )
    ai_first = await next_event(ada, Moved)
    while ai_first.game_id != vs_ai.game_id:
        ai_first = await next_event(ada, Moved)
    sessions = (ada.session, bo.session)
    assert first.process is not None
    first.process.kill()  # kill -9: no shutdown, no flush beyond what was committed
    await first.process.wait()
    await ada.close()
    await bo.close()

    db_check = sqlite3.connect(db)
    assert db_check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = db_check.execute(
        "SELECT ply, action, clocks FROM moves WHERE game_id = ? ORDER BY ply", (gid,)
    ).fetchall()
    db_check.close()
    assert [(p, a) for p, a, _ in stored] == [(m.ply, m.action) for m in acknowledged]

    second = EmbeddedServer(db, workers=1)
    url = await second.start()
    try:
        ada = await ServerConnection.connect(url, name="ada", session=sessions[0])
        bo = await ServerConnection.connect(url, name="bo", session=sessions[1])
        assert ada.welcome is not None and bo.welcome is not None
        held = {g["game_id"]: g for g in ada.welcome.games}
        assert held.keys() == {gid, vs_ai.game_id} and held[gid]["seat"] == 0
        # Resuming from the last acknowledged move: both players came back before the
        # restart's absences were announced (restore_quiet_s), so nothing followed it.
        resumed = await ada.request(Resume, game_id=gid, since=acknowledged[-1].seq)
        assert isinstance(resumed, Resumed) and resumed.seat == 0
        assert resumed.seq == acknowledged[-1].seq
        # A client with nothing asks from 0 and gets the game as a snapshot.
        await bo.request(Resume, game_id=gid, since=0)
        snapshot = await next_event(bo, Snapshot)
        assert list(snapshot.actions) == [12, 6, 13] and snapshot.status == "live"
        # The clocks stand as after the last committed move; the downtime was not charged.
        assert snapshot.clocks[0] == acknowledged[-1].clocks[0]
        assert snapshot.clocks[1] > acknowledged[-1].clocks[1] - 5_000
        # Play on to the end: X completes four in a row on the middle row.
        for client, action in ((bo, 7), (ada, 14), (bo, 8), (ada, 11)):
            await _play(client, gid, action)
        ended = await next_event(ada, Ended)
        assert (ended.result, ended.reason) == ("1-0", "line")
        record = (await ada.request(GetGame, game_id=gid)).game
        assert [m["action"] for m in record["moves"]] == [12, 6, 13, 7, 14, 8, 11]
        assert record["status"] == "finished"

        # The game against the AI carries on too: the human moves, the AI answers.
        await ada.request(Resume, game_id=vs_ai.game_id, since=0)
        cells = [c for c in range(9) if c != ai_first.action]
        await _play(ada, vs_ai.game_id, cells[0])
        reply = await next_event(ada, Moved)
        while reply.game_id != vs_ai.game_id or reply.seat != 0:
            reply = await next_event(ada, Moved)
        assert reply.ply == 2 and reply.stats is not None
    finally:
        await second.stop()


async def test_after_a_restart_only_a_player_who_stays_away_is_announced_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted server holds every seat away until its player comes back, but announces
    an absence only after ``restore_quiet_s``: a player who reconnects meanwhile is never
    told that they, or anyone who also came back, left. bo stays away: ada hears that once
    the quiet is over, with bo's grace counted from the restart."""
    monkeypatch.setenv("NOUGHTS_RESTORE_QUIET_S", "1.0")
    db = tmp_path / "games.db"
    first = EmbeddedServer(db, workers=0)
    url = await first.start()
    ada = await ServerConnection.connect(url, name="ada")
    bo = await ServerConnection.connect(url, name="bo")
    created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    await bo.request(JoinGame, game_id=created.game_id)
    game_id = created.game_id
    moved = await _play(ada, game_id, 12)
    assert first.process is not None
    first.process.kill()  # kill -9: both players are still seated as far as the store knows
    await first.process.wait()
    await ada.close()
    await bo.close()

    restarted = time.monotonic()
    second = EmbeddedServer(db, workers=0)
    url = await second.start()
    try:
        ada = await ServerConnection.connect(url, name="ada", session=ada.session)
        resumed = await ada.request(Resume, game_id=game_id, since=moved.seq)
        assert isinstance(resumed, Resumed) and resumed.seq == moved.seq  # nothing yet
        away = await ada.next_event(timeout=10)
        assert isinstance(away, Presence), away
        assert (away.seat, away.online, away.seq) == (1, False, moved.seq + 1)
        assert time.monotonic() - restarted >= 1.0  # not before the quiet was over
        assert away.claim_at is not None and away.claim_at < time.time() + 60.0
        await ada.close()
    finally:
        await second.stop()


async def test_a_stop_does_not_wait_for_the_ai_and_its_turn_comes_back(tmp_path: Path) -> None:
    """`q` while the AI thinks: the embedded server stops without finishing the search (the
    player waited for the whole budget before), and the game, restored, asks the AI again."""
    db = tmp_path / "games.db"
    first = EmbeddedServer(db, workers=1)
    url = await first.start()
    ada = await ServerConnection.connect(url, name="ada")
    seated = await ada.request(
        CreateGame, game="gomoku", opponent="ai", seat=0, algorithm="alphabeta", budget_ms=3000
    )
    await _play(ada, seated.game_id, 112)  # h8; the AI's search of 3 s starts
    session = ada.session
    await ada.close()
    await first.stop()
    db_check = sqlite3.connect(db)
    stored = db_check.execute("SELECT ply FROM moves WHERE game_id = ?", (seated.game_id,))
    assert [ply for (ply,) in stored.fetchall()] == [0]  # the AI's move was not waited for
    db_check.close()

    second = EmbeddedServer(db, workers=1)
    url = await second.start()
    try:
        ada = await ServerConnection.connect(url, name="ada", session=session)
        await ada.request(Resume, game_id=seated.game_id, since=0)
        reply = await next_event(ada, Moved, timeout=30)
        assert reply.ply == 1 and reply.seat == 1 and reply.stats is not None
        await ada.close()
    finally:
        await second.stop()


async def test_a_standing_draw_offer_survives_a_restart(
    tmp_path: Path, pool: EnginePool, settings: ServerSettings
) -> None:
    """A probe's finding: the offer was gone after a restart (the snapshot's offers empty,
    the opponent's accept refused), though a copy of the request sent again was answered
    ok; and its maker could offer again without a move between."""
    async with serving(tmp_path, pool, settings) as first:
        ada, bo, a, b = await human_game(first, game="5x5")
        await _play(ada, a.game_id, 12)
        await _play(bo, a.game_id, 6)
        await ada.request(Draw, game_id=a.game_id, token=a.token)
        sessions = (ada.session, bo.session)
        await ada.close()
        await bo.close()
    async with serving(tmp_path, pool, settings) as second:
        ada = await second.connect("ada", session=sessions[0])
        bo = await second.connect("bo", session=sessions[1])
        await bo.request(Resume, game_id=a.game_id, since=0)
        snapshot = await next_event(bo, Snapshot)
        assert snapshot.offers == {"draw": 0}
        await ada.request(Resume, game_id=a.game_id, since=0)
        with pytest.raises(RequestFailed, match="not_allowed.*already offered"):
            await ada.request(Draw, game_id=a.game_id, token=ada.token_for(a.game_id))
        await bo.request(Draw, game_id=a.game_id, token=bo.token_for(a.game_id), answer="accept")
        ended = await next_event(bo, Ended)
        assert (ended.result, ended.reason) == ("1/2-1/2", "agreement")
        await ada.close()
        await bo.close()

"""Time on the server (issue 11, finding 10): every duration on the monotonic clock, wall
time only for the timestamps people read. The test owns both clocks and steps the wall
clock as NTP, a resumed VM or an operator would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from client.connection import RequestFailed, ServerConnection
from protocol import (
    Claim,
    CreateGame,
    Draw,
    Ended,
    JoinGame,
    Move,
    Moved,
    Presence,
    Resume,
    Resumed,
    Snapshot,
)
from server.app import GameServer, running
from server.settings import ServerSettings
from server.store import SQLiteStore
from tests.server.conftest import RunningServer, next_event


class ManualClock:
    """A clock that moves only when the test moves it (either way)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def monotonic() -> ManualClock:
    return ManualClock(5_000.0)


@pytest.fixture
def wall() -> ManualClock:
    return ManualClock(1_800_000_000.0)


@pytest.fixture
async def timed_server(
    tmp_path: Path, monotonic: ManualClock, wall: ManualClock
) -> AsyncIterator[RunningServer]:
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    game_server = GameServer(
        store, None, settings=ServerSettings(grace_s=60.0), monotonic=monotonic, wall=wall
    )
    try:
        async with running(game_server) as ws_server:
            port = next(iter(ws_server.sockets)).getsockname()[1]
            yield RunningServer(f"ws://127.0.0.1:{port}", game_server, tmp_path / "games.db")
    finally:
        await store.close()


async def _play(client: ServerConnection, game_id: str, action: int) -> Any:
    return await client.request(
        Move, game_id=game_id, token=client.token_for(game_id), action=action
    )


async def test_wall_clock_steps_charge_and_credit_nobody(
    timed_server: RunningServer, monotonic: ManualClock, wall: ManualClock
) -> None:
    """A +120 s step of the system clock charged a player 60 s; a -1 h step credited
    3,659,798 ms. Now a move is charged what the monotonic clock says it took, and its
    timestamp is the wall clock's."""
    ada = await timed_server.connect("ada")
    bo = await timed_server.connect("bo")
    seated = await ada.request(
        CreateGame, game="5x5", opponent="human", seat=0, clock={"initial_ms": 60_000}
    )
    await bo.request(JoinGame, game_id=seated.game_id)
    gid = seated.game_id
    await _play(ada, gid, 0)
    await _play(bo, gid, 1)  # both have moved: X's clock runs from here
    monotonic.now += 2.0
    wall.now += 120.0  # the system clock jumps forward while X thinks
    moved = await _play(ada, gid, 2)
    assert list(moved.clocks) == [58_000, 60_000]
    assert moved.at == wall.now
    monotonic.now += 1.0
    wall.now -= 3600.0  # and back an hour while O thinks
    moved = await _play(bo, gid, 3)
    assert list(moved.clocks) == [58_000, 59_000]
    assert moved.at == wall.now
    stored = timed_server.query("SELECT at, clocks FROM moves WHERE game_id = ? AND ply = 3", gid)
    assert stored == [(wall.now, "[58000,59000]")]
    await ada.close()
    await bo.close()


async def test_grace_runs_on_the_monotonic_clock_and_is_announced_in_wall_time(
    timed_server: RunningServer, monotonic: ManualClock, wall: ManualClock
) -> None:
    ada = await timed_server.connect("ada")
    bo = await timed_server.connect("bo")
    seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
    await bo.request(JoinGame, game_id=seated.game_id)
    gid = seated.game_id
    await _play(ada, gid, 4)
    await _play(bo, gid, 0)  # (nothing to claim before both sides moved)
    await bo.close()
    away = await next_event(ada, Presence)
    assert away.online is False and away.claim_at == wall.now + 60.0
    wall.now += 3600.0  # a clock step is not time passing: the seat is still held
    with pytest.raises(RequestFailed, match="held for 60 s more"):
        await ada.request(Claim, game_id=gid, token=ada.token_for(gid), outcome="win")
    monotonic.now += 60.0
    ended = await ada.request(Claim, game_id=gid, token=ada.token_for(gid), outcome="win")
    assert (ended.result, ended.reason) == ("1-0", "abandoned")
    assert ended.at == wall.now
    await ada.close()


async def test_a_wall_clock_step_back_does_not_hold_off_a_flag(
    timed_server: RunningServer, monotonic: ManualClock, wall: ManualClock
) -> None:
    """The flag falls when the monotonic time runs out, whatever the wall clock did."""
    ada = await timed_server.connect("ada")
    bo = await timed_server.connect("bo")
    seated = await ada.request(
        CreateGame, game="5x5", opponent="human", seat=0, clock={"move_ms": 1000}
    )
    await bo.request(JoinGame, game_id=seated.game_id)
    gid = seated.game_id
    await _play(ada, gid, 0)
    moved = await _play(bo, gid, 1)  # X's 1 s per move starts now
    assert isinstance(moved, Moved)
    wall.now -= 86_400.0
    monotonic.now += 1.5
    # The server's timer wakes on the event loop's clock about 1 s later and finds X's
    # time gone on the monotonic clock (a day back on the wall clock changes nothing).
    ended = await next_event(ada, Ended)
    assert (ended.result, ended.reason) == ("0-1", "flag")
    await ada.close()
    await bo.close()


async def test_a_move_arriving_after_the_flag_loses_on_time(
    timed_server: RunningServer, monotonic: ManualClock
) -> None:
    """Probe: a move that came in after its side's time ran out, but before the server's
    timer woke, was played (and a move clock reset: 60 s more), as was a draw accepted by a
    side already out of time. As on Lichess, time out is time out: the game ends on the flag
    first, and the late move gets game_over."""
    ada = await timed_server.connect("ada")
    bo = await timed_server.connect("bo")
    seated = await ada.request(
        CreateGame, game="5x5", opponent="human", seat=0, clock={"initial_ms": 60_000}
    )
    await bo.request(JoinGame, game_id=seated.game_id)
    gid = seated.game_id
    await _play(ada, gid, 0)
    await _play(bo, gid, 1)  # X's clock runs from here; the timer wakes in 60 s real time
    monotonic.now += 61.0
    with pytest.raises(RequestFailed) as late:
        await _play(ada, gid, 2)
    assert late.value.code == "game_over"
    for client in (ada, bo):
        ended = await next_event(client, Ended)
        assert (ended.result, ended.reason, list(ended.clocks)) == ("0-1", "flag", [0, 60_000])
    assert timed_server.query("SELECT COUNT(*) FROM moves WHERE game_id = ?", gid) == [(2,)]
    await ada.close()
    await bo.close()


async def test_a_draw_accepted_after_ones_own_flag_is_a_loss_on_time(
    timed_server: RunningServer, monotonic: ManualClock
) -> None:
    ada = await timed_server.connect("ada")
    bo = await timed_server.connect("bo")
    seated = await ada.request(
        CreateGame, game="5x5", opponent="human", seat=0, clock={"move_ms": 60_000}
    )
    await bo.request(JoinGame, game_id=seated.game_id)
    gid = seated.game_id
    await _play(ada, gid, 0)
    await _play(bo, gid, 1)
    await bo.request(Draw, game_id=gid, token=bo.token_for(gid))
    monotonic.now += 61.0  # X thinks past its minute, then accepts
    with pytest.raises(RequestFailed) as late:
        await ada.request(Draw, game_id=gid, token=ada.token_for(gid), answer="accept")
    assert late.value.code == "game_over"
    ended = await next_event(bo, Ended)
    assert (ended.result, ended.reason) == ("0-1", "flag")
    await ada.close()
    await bo.close()


async def test_a_first_move_after_its_time_is_not_played(
    timed_server: RunningServer, monotonic: ManualClock
) -> None:
    """The first move's allowance (first_move_ms, 30 s) holds as the flag does: a first
    move arriving after it finds the game ended, no_start."""
    ada = await timed_server.connect("ada")
    bo = await timed_server.connect("bo")
    seated = await ada.request(
        CreateGame, game="5x5", opponent="human", seat=0, clock={"move_ms": 60_000}
    )
    await bo.request(JoinGame, game_id=seated.game_id)
    gid = seated.game_id
    monotonic.now += 31.0
    with pytest.raises(RequestFailed) as late:
        await _play(ada, gid, 0)
    assert late.value.code == "game_over"
    ended = await next_event(bo, Ended)
    assert (ended.result, ended.reason) == ("*", "no_start")
    await ada.close()
    await bo.close()


async def test_a_player_resuming_after_the_opponents_move_sees_the_clock_as_charged(
    timed_server: RunningServer, monotonic: ManualClock
) -> None:
    """Probe: bo's connection dropped, ada moved, bo came back 3 s later and resumed from
    the last event he had seen: the replayed ``moved`` carried the clocks of its time, and a
    client counting down from when it received it (its only reference: the project's
    client, its bot's time budget) showed him 3 s more than the server charged. A resume
    (or a watch) whose events include a move while a clock runs is answered with the game's
    snapshot instead: its clocks are now's."""
    ada = await timed_server.connect("ada")
    bo = await timed_server.connect("bo", reconnect=False)
    seated = await ada.request(
        CreateGame, game="5x5", opponent="human", seat=0, clock={"move_ms": 60_000}
    )
    await bo.request(JoinGame, game_id=seated.game_id)
    gid = seated.game_id
    await _play(ada, gid, 0)
    seen = await _play(bo, gid, 1)
    session = bo.session
    await bo.close()
    await next_event(ada, Presence)
    await _play(ada, gid, 2)  # bo's minute starts while he is away
    monotonic.now += 3.0
    bo = await timed_server.connect("bo", session=session, reconnect=False)
    resumed = await bo.request(Resume, game_id=gid, since=seen.seq)
    assert isinstance(resumed, Resumed)
    caught_up = await bo.next_event(timeout=10)
    assert isinstance(caught_up, Snapshot), caught_up
    assert list(caught_up.clocks) == [60_000, 57_000] and caught_up.actions == (0, 1, 2)
    await ada.close()
    await bo.close()

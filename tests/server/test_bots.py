"""Bots across the network: two `noughts bot` processes play each other to the end, and the
Python bot API plays a challenge."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import engine
from client.bot import (
    ROUND_TRIP_MS,
    Bot,
    GameResult,
    Turn,
    engine_draw,
    engine_player,
    engine_plays,
)
from protocol import (
    AcceptSeek,
    CancelSeek,
    Draw,
    Ended,
    LobbySubscribe,
    Move,
    Moved,
    Offer,
    Rematch,
    Resign,
    Seek,
    SeekDeclined,
    Snapshot,
)
from server.pool import EnginePool
from server.settings import ServerSettings
from tests.server.conftest import RunningServer, next_event, next_lobby, serving


async def _run(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "client",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_two_bot_processes_play_each_other(server: RunningServer) -> None:
    seeker = _run(
        "bot", "--server", server.url, "--name", "seeker", "--seek", "tictactoe",
        "--games", "2", "--engine", "alphabeta", "--budget-ms", "5",
    )  # fmt: skip
    accepter = _run(
        "bot", "--server", server.url, "--name", "accepter", "--accept", "seeks",
        "--games", "2", "--engine", "mcts", "--budget-ms", "5",
    )  # fmt: skip
    (code_s, out_s, err_s), (code_a, out_a, err_a) = await asyncio.gather(seeker, accepter)
    assert code_s == 0, err_s
    assert code_a == 0, err_a
    assert "game 2/2" in out_s and "game 2/2" in out_a
    assert "against accepter" in out_s and "against seeker" in out_a
    rows = server.query("SELECT id, status, result, players FROM games ORDER BY created_at")
    assert len(rows) == 2 and all(status == "finished" for _, status, _, _ in rows)
    for _, _, result, players in rows:
        kinds = {p["name"]: p["kind"] for p in json.loads(players)}
        assert kinds == {"seeker": "bot", "accepter": "bot"}
        assert result in ("1-0", "0-1", "1/2-1/2")
    for game_id, *_ in rows:
        moves = server.query("SELECT COUNT(*) FROM moves WHERE game_id = ?", game_id)[0][0]
        assert moves >= 5


async def _challenged(server: RunningServer, bot: Bot) -> tuple[asyncio.Task[Any], Any]:
    """``bot`` playing one game, accepting challenges, and ada in the lobby to challenge it,
    once the bot is online."""
    playing = asyncio.create_task(bot.play(games=1, accept="challenges"))
    ada = await server.connect("ada")
    await ada.request(LobbySubscribe)
    await next_lobby(ada)
    while bot.name not in {p.name for p in server.game_server.players.values()}:
        await asyncio.sleep(0.05)
    return playing, ada


async def test_the_bot_api_accepts_a_challenge_and_plays_it(server: RunningServer) -> None:
    rng = random.Random(5)
    turns: list[Turn] = []

    def on_turn(turn: Turn) -> int:
        turns.append(turn)
        return rng.choice(turn.state.legal_actions())

    bot = Bot(server.url, on_turn, name="randy")
    playing, ada = await _challenged(server, bot)
    await ada.request(Seek, game="tictactoe", to="randy", color="x")
    start = await next_event(ada, Snapshot)
    gid = start.game_id
    state = engine.replay(("tictactoe", {}), start.actions)
    while not state.is_terminal():
        if state.current_player() == 0:
            await ada.request(
                Move, game_id=gid, token=ada.token_for(gid), action=state.legal_actions()[0]
            )
        event = await next_event(ada, Moved)
        state.apply_action(event.action)
    (result,) = await playing
    assert result.game_id == gid and result.seat == 1 and result.opponent == "ada"
    assert turns and all(t.seat == 1 and t.state.current_player() == 1 for t in turns)
    assert result.outcome in ("win", "loss", "draw")


async def test_a_bot_declines_a_challenge_its_engine_cannot_play(server: RunningServer) -> None:
    """A walk's finding: `noughts bot --engine perfect` took a gomoku game and died in its
    first move (perfect solves boards of at most 16 cells): a traceback, its opponent left
    waiting. It now declines such a challenge and plays the next it can."""
    bot = Bot(
        server.url,
        engine_player("perfect", 10),
        name="solver",
        plays=engine_plays("perfect"),
    )
    playing, ada = await _challenged(server, bot)
    await ada.request(Seek, game="gomoku", to="solver")
    declined = await next_lobby(ada)
    while not isinstance(declined, SeekDeclined):
        declined = await next_lobby(ada)
    assert declined.player["name"] == "solver"
    await ada.request(Seek, game="tictactoe", to="solver", color="x")
    start = await next_event(ada, Snapshot)
    await _resign(server, ada, start.game_id)
    (result,) = await asyncio.wait_for(playing, 60)
    assert result.game_id == start.game_id and result.outcome == "win"


async def _resign(server: RunningServer, person: Any, game_id: str) -> None:
    """``person`` resigns once both sides have moved (before that a resign aborts, as on
    Lichess: no win for the bot), moving first if it is her turn."""
    session = server.game_server.games[game_id]
    async with asyncio.timeout(30):
        while session.state.ply() < 2:
            state = session.state
            if session.players[state.current_player()].player_id == person.player_id:  # type: ignore[union-attr]
                action = state.legal_actions()[0]
                await person.request(Move, game_id=game_id, action=action, ply=state.ply())
            else:
                await asyncio.sleep(0.02)
    await person.request(Resign, game_id=game_id, token=person.token_for(game_id))


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_a_bot_plays_up_to_its_concurrency_at_once(
    server: RunningServer, concurrency: int
) -> None:
    """Two people challenge the bot: with concurrency 2 both games start at once; with 1
    the second challenge waits in the lobby until the first game is over. Both people
    resign; the bot counts two wins."""
    rng = random.Random(7)
    bot = Bot(server.url, lambda turn: rng.choice(turn.state.legal_actions()), name="duo")
    playing = asyncio.create_task(bot.play(games=2, accept="challenges", concurrency=concurrency))
    while "duo" not in {p.name for p in server.game_server.players.values()}:
        await asyncio.sleep(0.05)
    people = [await server.connect(name) for name in ("ada", "bo")]
    for person in people:
        await person.request(Seek, game="5x5", to="duo", color="x")
    first = await next_event(people[0], Snapshot)
    assert first.status == "live"
    if concurrency == 1:
        with pytest.raises(TimeoutError):  # not while ada's game is on
            await next_event(people[1], Snapshot, timeout=1.0)
        await _resign(server, people[0], first.game_id)
    second = await next_event(people[1], Snapshot)
    assert second.status == "live"
    if concurrency == 2:
        await _resign(server, people[0], first.game_id)
    await _resign(server, people[1], second.game_id)
    results = await asyncio.wait_for(playing, 30)
    assert sorted(r.game_id for r in results) == sorted([first.game_id, second.game_id])
    assert [r.outcome for r in results] == ["win", "win"]
    for person in people:
        await person.close()


async def test_a_bot_takes_as_many_waiting_seeks_as_it_has_room_for(
    server: RunningServer,
) -> None:
    """Two seeks wait in the lobby when a bot with concurrency 2 arrives: the lobby's state
    lists both, and it accepts both at once (it took one, and waited for news of another)."""
    people = [await server.connect(name) for name in ("ada", "bo")]
    for person in people:
        await person.request(Seek, game="5x5", color="x")
    rng = random.Random(11)
    bot = Bot(server.url, lambda turn: rng.choice(turn.state.legal_actions()), name="pair")
    playing = asyncio.create_task(bot.play(games=2, accept="seeks", concurrency=2))
    starts = [await next_event(person, Snapshot) for person in people]
    assert [start.status for start in starts] == ["live", "live"]
    for person, start in zip(people, starts, strict=True):
        await _resign(server, person, start.game_id)
    results = await asyncio.wait_for(playing, 30)
    assert [r.outcome for r in results] == ["win", "win"]
    for person in people:
        await person.close()


async def test_a_bot_takes_the_seeks_open_when_it_came_as_its_slots_free(
    server: RunningServer,
) -> None:
    """A probe's finding: with three seeks open, `bot --accept seeks --games 3` played one
    and idled with two still open (it took only as many of the lobby's list as it had room
    for, and waited for news of others). The list is now kept, oldest first, as later seeks
    are: a freed slot takes the next, skipping one withdrawn meanwhile."""
    people = [await server.connect(name) for name in ("ada", "bo", "cy")]
    seeks = [await person.request(Seek, game="5x5", color="x") for person in people]
    rng = random.Random(13)
    bot = Bot(server.url, lambda turn: rng.choice(turn.state.legal_actions()), name="solo")
    playing = asyncio.create_task(bot.play(games=2, accept="seeks"))
    ada, bo, cy = people
    first = await next_event(ada, Snapshot)  # the oldest first
    await bo.request(CancelSeek, seek_id=seeks[1].seek_id)
    await _resign(server, ada, first.game_id)
    second = await next_event(cy, Snapshot, timeout=30)
    assert second.status == "live"
    await _resign(server, cy, second.game_id)
    results = await asyncio.wait_for(playing, 30)
    assert [(r.game_id, r.opponent, r.outcome) for r in results] == [
        (first.game_id, "ada", "win"), (second.game_id, "cy", "win")
    ]  # fmt: skip
    for person in people:
        await person.close()


async def test_a_bot_with_no_room_declines_a_rematch(server: RunningServer) -> None:
    """Concurrency 1: ada's game over, the bot plays bo's challenge; ada's rematch offer is
    declined at once (it has no room), not left to wait for the end of bo's game."""
    rng = random.Random(9)
    bot = Bot(server.url, lambda turn: rng.choice(turn.state.legal_actions()), name="solo")
    playing = asyncio.create_task(bot.play(games=3, accept="challenges"))
    try:
        while "solo" not in {p.name for p in server.game_server.players.values()}:
            await asyncio.sleep(0.05)
        ada, bo = await server.connect("ada"), await server.connect("bo")
        await ada.request(Seek, game="5x5", to="solo", color="x")
        first = await next_event(ada, Snapshot)
        await bo.request(Seek, game="5x5", to="solo", color="x")
        await _resign(server, ada, first.game_id)
        second = await next_event(bo, Snapshot)
        assert second.status == "live"
        await ada.request(Rematch, game_id=first.game_id, answer="offer")
        answer = await next_event(ada, Offer)
        while answer.seat == 0:  # (ada's own offer, as announced)
            answer = await next_event(ada, Offer)
        assert (answer.kind, answer.answer, answer.seat) == ("rematch", "decline", 1)
        await ada.close()
        await bo.close()
    finally:
        playing.cancel()


async def test_a_person_seeks_from_the_plain_client_and_a_bot_accepts(
    server: RunningServer,
) -> None:
    bot = asyncio.create_task(
        _run(
            "bot",
            "--server",
            server.url,
            "--name",
            "robo",
            "--accept",
            "seeks",
            "--games",
            "1",
            "--engine",
            "alphabeta",
            "--budget-ms",
            "5",
        )  # fmt: skip
    )
    moves = "\n".join(str(cell) for _ in range(5) for cell in range(9)) + "\n"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "play", "--plain", "--server", server.url, "--name",
        "ada", "--seek", "--game", "tictactoe", "--seat", "x", "--clock", "5+0",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(moves.encode()), 300)
    assert process.returncode == 0, err.decode()
    text = out.decode()
    assert "Waiting for someone to accept your seek" in text
    assert "X = ada, O = robo" in text and "Game over:" in text
    code, bot_out, bot_err = await bot
    assert code == 0, bot_err
    assert "against ada" in bot_out


async def test_a_bot_whose_opponent_moves_at_once_still_plays(server: RunningServer) -> None:
    """On a loaded machine the accepter's first move can be queued before the seeking bot
    looks at the start of the game; the bot must play from the start snapshot and that
    move, in order (it once queued the snapshot again behind the move and waited for ever)."""

    class LateSeeker(Bot):
        async def _play_game(self, game_id: str) -> GameResult:
            # The game's loop starts once the opponent's move is in its queue, behind the
            # start snapshot. (This overrode a method the bot no longer had since ea78795,
            # so the test waited for nothing.)
            while self.playing[game_id].qsize() < 2:
                await asyncio.sleep(0.01)
            waited.append(game_id)
            return await super()._play_game(game_id)

    waited: list[str] = []

    rng = random.Random(1)

    def on_turn(turn: Turn) -> int:
        return rng.choice(turn.state.legal_actions())

    seeker = LateSeeker(server.url, on_turn, name="late")
    accepter = Bot(server.url, on_turn, name="quick")
    accepting = asyncio.create_task(accepter.play(1, accept="seeks"))
    results = await asyncio.wait_for(seeker.play(1, seek="tictactoe", color="o"), 60)
    await asyncio.wait_for(accepting, 60)
    assert len(results) == 1 and results[0].seat == 1 and results[0].plies >= 5
    assert waited == [results[0].game_id]


async def _randy_challenged_by_ada(
    server: RunningServer, games: int, **options: Any
) -> tuple[asyncio.Task[list[GameResult]], Any, Snapshot]:
    """A bot, randy (``options`` for Bot), playing ``games`` games of the challenges to it,
    and ada's challenge (she plays X): the task playing, ada, and the game's start."""
    first = options.pop("on_turn", lambda turn: turn.state.legal_actions()[0])
    bot = Bot(server.url, first, name="randy", **options)
    playing = asyncio.create_task(bot.play(games=games, accept="challenges"))
    ada = await server.connect("ada")
    while "randy" not in {p.name for p in server.game_server.players.values()}:
        await asyncio.sleep(0.05)
    await ada.request(Seek, game="tictactoe", to="randy", color="x")
    return playing, ada, await next_event(ada, Snapshot)


async def test_a_bot_claims_the_game_once_its_opponent_is_past_the_grace_period(
    tmp_path: Path, pool: EnginePool
) -> None:
    """The bot's claim timer is the game model's (GameModel.claim_in): the opponent leaves,
    and the bot claims when the server's grace period (1 s here) is over, not before."""
    async with serving(tmp_path, pool, ServerSettings(grace_s=1.0)) as server:
        playing, ada, start = await _randy_challenged_by_ada(server, games=1)
        await ada.request(Move, game_id=start.game_id, action=4, ply=0)
        while (await next_event(ada, Moved)).seat != 1:
            pass  # our own move, then the bot's
        left = time.monotonic()
        await ada.close()
        (result,) = await asyncio.wait_for(playing, 60)
        assert (result.outcome, result.reason) == ("win", "abandoned")
        assert time.monotonic() - left >= 1.0  # not before the seat was free


async def test_a_bot_aborts_a_game_its_opponent_left_before_both_sides_moved(
    tmp_path: Path, pool: EnginePool
) -> None:
    """Before both sides have moved there is nothing to claim (the server refuses it, as
    Lichess does): the bot whose opponent left then aborts the game once the grace period
    is over, as lichess-bot aborts a game whose opponent makes no first move."""
    async with serving(tmp_path, pool, ServerSettings(grace_s=1.0)) as server:
        playing, ada, start = await _randy_challenged_by_ada(server, games=1)
        left = time.monotonic()
        await ada.close()  # before her first move
        (result,) = await asyncio.wait_for(playing, 60)
        assert (result.outcome, result.reason) == ("aborted", "abort")
        assert time.monotonic() - left >= 1.0  # not before the seat was free


async def _resign_then_ask_a_rematch(server: RunningServer, ada: Any, start: Snapshot) -> Snapshot:
    """ada resigns the game that ``start`` began and offers a rematch; the rematch's start."""
    await _resign(server, ada, start.game_id)
    await ada.request(Rematch, game_id=start.game_id, answer="offer")
    while True:
        event = await next_event(ada, Snapshot)
        if event.game_id != start.game_id and event.status == "live":
            return event


async def test_a_bot_accepts_a_rematch(server: RunningServer) -> None:
    """A person who asks a bot for a rematch waited for ever: the bot had gone back to the
    lobby. It now accepts one while it has games to play (lichess-bot takes a rematch as
    any challenge)."""
    playing, ada, first = await _randy_challenged_by_ada(server, games=2)
    second = await _resign_then_ask_a_rematch(server, ada, first)
    assert [p["name"] for p in second.players] == ["randy", "ada"]  # colours swapped
    await _resign(server, ada, second.game_id)
    results = await asyncio.wait_for(playing, 60)
    assert [(r.game_id, r.seat, r.outcome) for r in results] == [
        (first.game_id, 1, "win"), (second.game_id, 0, "win")
    ]  # fmt: skip
    await ada.close()


async def test_a_seeking_bot_takes_the_rematch_and_withdraws_its_seek(
    server: RunningServer,
) -> None:
    bot = Bot(server.url, lambda turn: turn.state.legal_actions()[0], name="randy")
    playing = asyncio.create_task(bot.play(games=2, seek="tictactoe", color="o"))
    ada = await server.connect("ada")
    await ada.request(LobbySubscribe)
    seek_id = None
    while seek_id is None:
        lobby = await next_lobby(ada)
        seeks = list(getattr(lobby, "seeks", ())) + [getattr(lobby, "seek", None) or {}]
        seek_id = next((s["seek_id"] for s in seeks if s.get("game") == "tictactoe"), None)
    await ada.request(AcceptSeek, seek_id=seek_id)
    first = await next_event(ada, Snapshot)
    second = await _resign_then_ask_a_rematch(server, ada, first)
    assert [p["name"] for p in second.players] == ["randy", "ada"]
    # The seek it posted after the first game is withdrawn before the rematch is played.
    deadline = time.monotonic() + 30
    while server.game_server.lobby.seeks and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not server.game_server.lobby.seeks
    await _resign(server, ada, second.game_id)
    results = await asyncio.wait_for(playing, 60)
    assert [r.outcome for r in results] == ["win", "win"]
    await ada.close()


async def test_a_bot_answers_a_draw_offer_at_once(server: RunningServer) -> None:
    """A draw offered to a bot was never answered: it stood until the bot's next move, and
    an offer made on the offerer's own turn kept its maker waiting. Without ``on_draw`` the
    bot declines at once; with ``engine_draw`` (next test) it accepts where the engine sees
    a draw (3x3's opening, by perfect play), as the server's AI seats do."""
    playing, ada, start = await _randy_challenged_by_ada(server, games=1)
    await ada.request(Draw, game_id=start.game_id)  # before her first move
    answer = await next_event(ada, Offer)
    while answer.seat != 1:
        answer = await next_event(ada, Offer)
    assert (answer.kind, answer.answer) == ("draw", "decline")
    await ada.request(Resign, game_id=start.game_id)
    await asyncio.wait_for(playing, 60)
    await ada.close()


async def test_an_engine_bot_accepts_a_draw_where_its_engine_sees_one(
    server: RunningServer,
) -> None:
    playing, ada, start = await _randy_challenged_by_ada(
        server, games=1, on_draw=engine_draw("perfect", 50)
    )
    await ada.request(Draw, game_id=start.game_id)
    (result,) = await asyncio.wait_for(playing, 60)
    assert (result.outcome, result.reason) == ("draw", "agreement")
    await ada.close()


async def test_a_draw_offered_with_the_opponents_move_is_answered_before_the_bots_move(
    server: RunningServer,
) -> None:
    """An offer made after one's move (FIDE 9.1.2.1) reaches the bot on its turn, often while
    it searches: its move then declined it before its engine was asked. The bot now plays
    its move only once caught up with what came meanwhile."""

    def slow(turn: Turn) -> int:  # a search that takes a while
        time.sleep(0.5)
        return turn.state.legal_actions()[0]

    playing, ada, start = await _randy_challenged_by_ada(
        server, games=1, on_turn=slow, on_draw=engine_draw("perfect", 50)
    )
    await ada.request(Move, game_id=start.game_id, action=4, ply=0)
    await ada.request(Draw, game_id=start.game_id)  # with her move, on randy's turn
    (result,) = await asyncio.wait_for(playing, 60)
    assert (result.outcome, result.reason, result.plies) == ("draw", "agreement", 1)
    await ada.close()


async def test_an_engine_bot_moves_within_its_clock(server: RunningServer) -> None:
    """A probe's finding: `bot --clock 5s --budget-ms 6000` lost on time at ply 2 (its
    engine searched its whole budget whatever the clock said). Each search is now capped by
    the time its clock leaves: here 1 s a move against 3 s of budget, and ada, who moves at
    once, resigns once the bot has played three moves, two of them on its running clock."""
    bot = Bot(server.url, engine_player("mcts", 3000), name="clocky")
    playing = asyncio.create_task(bot.play(games=1, accept="challenges", warm=_warm))
    ada = await server.connect("ada")
    while "clocky" not in {p.name for p in server.game_server.players.values()}:
        await asyncio.sleep(0.05)
    await ada.request(Seek, game="uttt", to="clocky", color="x", clock={"move_ms": 1000})
    start = await next_event(ada, Snapshot, timeout=30)
    state = engine.replay(("uttt", {}), start.actions)
    event: Any = None
    while not isinstance(event, Ended):
        if state.ply() == 6:  # the bot has moved three times
            await _resign(server, ada, start.game_id)
        elif state.current_player() == 0:
            action = state.legal_actions()[0]
            await ada.request(Move, game_id=start.game_id, action=action, ply=state.ply())
        event = await next_event(ada, (Moved, Ended), timeout=30)
        if isinstance(event, Moved):
            state.apply_action(event.action)
    (result,) = await asyncio.wait_for(playing, 60)
    assert (result.outcome, result.reason, result.plies) == ("win", "resign", 6)
    await ada.close()


@pytest.mark.parametrize(
    ("stop", "bot_moves", "ending", "tally"),
    [
        (signal.SIGINT, 1, ("*", "abort"), "0 won, 0 drawn, 0 lost, 1 aborted"),
        (signal.SIGTERM, 2, ("0-1", "resign"), "0 won, 0 drawn, 1 lost"),
    ],
    ids=["ctrl-c-aborts", "sigterm-resigns"],
)
async def test_a_bot_stopped_mid_game_ends_it(
    server: RunningServer,
    stop: signal.Signals,
    bot_moves: int,
    ending: tuple[str, str],
    tally: str,
) -> None:
    """A probe's finding: Ctrl-C right after a move left the game live (its opponent told
    that the bot left, its seat held) and the bot's tally counted nothing. A stopped bot
    (SIGINT or SIGTERM) now takes no new game and ends those in play: aborted where the
    rules allow (before both sides have moved), else resigned; its tally counts them."""
    bot = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "bot", "--server", server.url, "--name", "robo",
        "--engine", "random",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    ada = await server.connect("ada")
    try:
        while "robo" not in {p.name for p in server.game_server.players.values()}:
            await asyncio.sleep(0.05)
        await ada.request(Seek, game="5x5", to="robo", color="o")  # the bot moves first
        start = await next_event(ada, Snapshot, timeout=60)
        state = engine.replay(("5x5", {}), start.actions)
        moved = 0
        while moved < bot_moves:
            event = await next_event(ada, Moved, timeout=60)
            state.apply_action(event.action)
            if event.seat == 0:
                moved += 1
                if moved < bot_moves:
                    await ada.request(Move, game_id=start.game_id, action=state.legal_actions()[0])
        bot.send_signal(stop)
        ended = await next_event(ada, Ended, timeout=60)
        assert (ended.result, ended.reason) == ending
        out, err = await asyncio.wait_for(bot.communicate(), 60)
        assert bot.returncode == 130, err.decode()
        assert out.decode().endswith(f"robo: {tally}\n"), out.decode()
    finally:
        await ada.close()
        if bot.returncode is None:
            bot.kill()
            await bot.wait()


LONG_BUDGET_MS = 20_000


def _cpu_s(pid: int) -> float:
    """The CPU time (user and system, seconds) process ``pid`` has used (Linux's /proc)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def _bot_searching(
    server: RunningServer,
) -> AsyncIterator[tuple[asyncio.subprocess.Process, Any, Snapshot]]:
    """A `noughts bot` (mcts, LONG_BUDGET_MS a move) searching its first move of a game of
    ultimate tic-tac-toe against ada: (the bot's process, ada, the game's start). The bot
    says nothing as it searches: its CPU time since the game began says it is searching
    (it does nothing else then)."""
    bot = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "bot", "--server", server.url, "--name", "robo",
        "--engine", "mcts", "--budget-ms", str(LONG_BUDGET_MS),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    ada = await server.connect("ada")
    try:
        while "robo" not in {p.name for p in server.game_server.players.values()}:
            await asyncio.sleep(0.05)
        await ada.request(Seek, game="uttt", to="robo", color="o")  # the bot moves first
        start = await next_event(ada, Snapshot, timeout=60)
        began = _cpu_s(bot.pid)  # (its engine warmed up before it took the challenge)
        while _cpu_s(bot.pid) - began < 0.5:
            assert bot.returncode is None
            await asyncio.sleep(0.05)
        yield bot, ada, start
    finally:
        await ada.close()
        if bot.returncode is None:
            bot.kill()
            await bot.wait()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
async def test_a_bot_stopped_while_it_searches_stops_its_search(
    server: RunningServer, stop: signal.Signals
) -> None:
    """A bot stopped while its engine searched went on searching: Ctrl-C (or a container's
    SIGTERM) waited up to --budget-ms, 20 s here, before the game was ended and the tally
    printed. Its search now stops with it (Turn.stopped: the brain's END), the move found so
    far is not played, and the game is aborted at once (a generous bound: half the budget)."""
    async with _bot_searching(server) as (bot, ada, start):
        stopped = time.monotonic()
        bot.send_signal(stop)
        ended = await next_event(ada, Ended, timeout=60)
        assert (ended.game_id, ended.result, ended.reason) == (start.game_id, "*", "abort")
        out, err = await asyncio.wait_for(bot.communicate(), 60)
        assert time.monotonic() - stopped < LONG_BUDGET_MS / 1000 / 2, err.decode()
        assert bot.returncode == 130, err.decode()
        assert out.decode().endswith("robo: 0 won, 0 drawn, 0 lost, 1 aborted\n"), out.decode()
        assert "Traceback" not in err.decode(), err.decode()


async def test_a_second_ctrl_c_while_the_bot_stops_quits_at_once(server: RunningServer) -> None:
    """The first Ctrl-C ends the games in play; a second one, while the server has not yet
    answered (the game's lock held here: the abort waits), quits at once as the command's
    help says, with the tally, status 130 and no traceback (the search stopped too)."""
    from tests.client.ui_support import ArrivalLock

    async with _bot_searching(server) as (bot, ada, start):
        lock = server.game_server._locks[start.game_id] = ArrivalLock()
        async with lock:
            await lock.arrivals.get()  # the test's own
            bot.send_signal(signal.SIGINT)
            await asyncio.wait_for(lock.arrivals.get(), 60)  # the bot's abort waits
            stopped = time.monotonic()
            bot.send_signal(signal.SIGINT)
            out, err = await asyncio.wait_for(bot.communicate(), 60)
        assert time.monotonic() - stopped < LONG_BUDGET_MS / 1000 / 2, err.decode()
        assert bot.returncode == 130, err.decode()
        assert out.decode().endswith("robo: 0 won, 0 drawn, 0 lost\n"), out.decode()
        assert "Traceback" not in err.decode(), err.decode()


def test_a_bots_search_time_under_a_clock() -> None:
    """Turn.budget_ms, the rule of engine.time_control: a fixed time per move caps each
    search at 90% of it less the margins; Fischer spends a share of what is left plus the
    increment, so a whole game of ultimate tic-tac-toe at 1+0 with a 3 s budget (the
    probe's, lost on time in both games) ends with time left."""
    uttt = engine.make_game("uttt").new_initial_state()
    second = uttt.clone()
    for action in (40, 36):  # (the clocks run from each side's second move)
        second.apply_action(action)
    per_move = Turn("g", 0, second.clone(), [None, None], [5000, 5000], {"move_ms": 5000}, 0.0)
    assert per_move.budget_ms(6000, now=0.0) == 5000 * 0.9 - 50 - ROUND_TRIP_MS
    assert per_move.budget_ms(6000, now=1.0) == 4000 * 0.9 - 50 - ROUND_TRIP_MS  # a second on
    assert per_move.budget_ms(100, now=0.0) == 100  # within the clock: the bot's own budget
    untimed = Turn("g", 1, uttt.clone(), [None, None])
    assert untimed.budget_ms(6000, now=100.0) == 6000
    rng = random.Random(3)
    state, left = uttt.clone(), 60_000.0
    while not state.is_terminal():
        if state.current_player() == 0:
            clocks = [round(left), 60_000]
            turn = Turn("g", 0, state.clone(), [None, None], clocks, {"initial_ms": 60_000})
            spent = turn.budget_ms(3000, now=turn.began) + ROUND_TRIP_MS  # (the round trip)
            if state.ply() >= 2:  # (the first move's clock does not run)
                assert spent < left
                left -= spent
        state.apply_action(rng.choice(state.legal_actions()))
    assert left > 0


@pytest.mark.parametrize(
    "control", [{"move_ms": 5000}, {"initial_ms": 60_000}, {"initial_ms": 1_800_000}]
)
def test_a_bots_first_move_has_the_first_moves_time(control: dict[str, int]) -> None:
    """The bot's budget counted its first move as if its clock ran: 4.25 s at 5 s a move,
    2.75 s at 1+0 (a share of the minute), though the server gives each side's first move
    30 s whatever the control, its clock not running until each side has moved (PROTOCOL.md,
    Clocks); and that 30 s was not shortened by the time the turn had already taken (27 s
    searched 10 s into it, at 30+0). It is now a turn of 30 s from when the turn began."""
    uttt = engine.make_game("uttt").new_initial_state()
    clocks = [control.get("move_ms") or control["initial_ms"]] * 2
    first = Turn("g", 0, uttt.clone(), [None, None], list(clocks), control, 0.0)
    assert first.budget_ms(20_000, now=0.0) == 20_000
    assert first.budget_ms(60_000, now=10.0) == 20_000 * 0.9 - 50 - ROUND_TRIP_MS
    uttt.apply_action(40)
    second_seat = Turn("g", 1, uttt, [None, None], clocks, control, 0.0)  # its first move too
    assert second_seat.budget_ms(20_000, now=0.0) == 20_000


def test_a_bots_first_move_is_timed_from_the_move_that_gave_it_the_turn() -> None:
    """A first move's 30 s run from when the turn began: a Turn built after a draw offer
    was answered (its search took the bot's budget) begins when the move came, not then."""
    from client.bot import _turn
    from client.game_view import GameModel

    model = GameModel("g", seat=1)
    clock = {"initial_ms": 60_000, "increment_ms": 0}
    players: list[dict[str, Any] | None] = [{"name": "ada"}, {"name": "robo"}]
    start = Snapshot(
        game_id="g", seq=1, game="uttt", params={}, players=players, actions=[],
        status="live", to_move=0, clock=clock, clocks=[60_000, 60_000],
    )  # fmt: skip
    model.apply(start, 100.0)
    model.apply(Moved(game_id="g", seq=2, ply=0, seat=0, action=40, to_move=1,
                      clocks=[60_000, 60_000]), 105.0)  # fmt: skip
    turn = _turn("g", 1, model, threading.Event())
    assert turn.began == 105.0
    assert turn.budget_ms(60_000, now=115.0) == 20_000 * 0.9 - 50 - ROUND_TRIP_MS
    # A server whose first moves have 12 s says so in its snapshots (first_move_ms).
    model.apply(dataclasses.replace(start, seq=3, actions=[40], to_move=1, first_move_ms=12_000),
                105.0)  # fmt: skip
    turn = _turn("g", 1, model, threading.Event())
    assert turn.budget_ms(60_000, now=107.0) == 10_000 * 0.9 - 50 - ROUND_TRIP_MS


def test_a_resumed_bots_first_move_has_what_is_left_of_its_time() -> None:
    """A bot resuming a game during its first move took its whole 30 s from the snapshot,
    though part of it had gone (its drop, its reconnection): the server then flagged it
    no_start with its search still running. The snapshot now says what is left."""
    from client.bot import _turn
    from client.game_view import GameModel

    model = GameModel("g", seat=1)
    clock = {"initial_ms": 60_000, "increment_ms": 0}
    players: list[dict[str, Any] | None] = [{"name": "ada"}, {"name": "robo"}]
    resumed = Snapshot(
        game_id="g", seq=2, game="uttt", params={}, players=players, actions=[40],
        status="live", to_move=1, clock=clock, clocks=[60_000, 60_000],
        first_move_left_ms=4_000,
    )  # fmt: skip
    model.apply(resumed, 100.0)
    turn = _turn("g", 1, model, threading.Event())
    assert turn.began == 100.0
    assert turn.budget_ms(60_000, now=101.0) == 3_000 * 0.9 - 50 - ROUND_TRIP_MS
    # A move gives the next first move its whole time again.
    model.seat = 0
    model.apply(Moved(game_id="g", seq=3, ply=1, seat=1, action=36, to_move=0,
                      clocks=[60_000, 60_000]), 110.0)  # fmt: skip
    assert model.first_move_left_ms is None


async def _warm() -> None:
    await asyncio.to_thread(engine.warm_up)


async def test_a_bot_whose_server_goes_for_good_says_so(tmp_path: Path, pool: EnginePool) -> None:
    """Without reconnecting, the server gone: ``play`` ends with ConnectionLost (the
    command prints it and exits 1), whether the bot waits for a game or plays one."""
    from client.connection import ConnectionLost

    async with serving(tmp_path, pool, ServerSettings()) as server:
        bot = Bot(server.url, lambda turn: turn.state.legal_actions()[0], reconnect=False)
        playing = asyncio.create_task(bot.play(accept="challenges"))
        while "bot" not in {p.name for p in server.game_server.players.values()}:
            await asyncio.sleep(0.05)
    with pytest.raises(ConnectionLost):
        await asyncio.wait_for(playing, 20)

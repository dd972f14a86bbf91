"""Whole games through a real server: a human against the AI, two websocket clients, replays."""

from __future__ import annotations

import asyncio
import random

import engine
from client.connection import ServerConnection
from protocol import (
    Abort,
    CreateGame,
    Ended,
    GetGame,
    JoinGame,
    ListGames,
    Move,
    Moved,
    Ping,
    Resign,
    Snapshot,
)
from tests.server.conftest import RunningServer

AI_STATS = ("algorithm", "budget_ms", "iterations", "value", "pv", "seed", "elapsed_ms")


async def play_out(
    connection: ServerConnection,
    game_id: str,
    seat: int,
    token: str,
    rng: random.Random,
) -> tuple[list[int], Ended]:
    """Follow one game's events, answering each of our turns with a random legal move."""
    state: engine.State | None = None
    seen: list[int] = []
    while True:
        event = await connection.next_event(timeout=30)
        assert getattr(event, "game_id", None) == game_id
        if isinstance(event, Snapshot):
            state = engine.replay((event.game, dict(event.params)), event.actions)
            seen = list(event.actions)
        elif isinstance(event, Moved):
            assert state is not None and event.ply == state.ply() == len(seen)
            state.apply_action(event.action)
            seen.append(event.action)
        elif isinstance(event, Ended):
            return seen, event
        assert state is not None
        if not state.is_terminal() and state.current_player() == seat:
            action = rng.choice(state.legal_actions())
            reply = await connection.request(
                Move, game_id=game_id, token=token, action=action, ply=state.ply()
            )
            assert isinstance(reply, Moved) and reply.action == action and reply.seat == seat


async def test_human_against_the_ai_is_played_stored_and_replayed(server: RunningServer) -> None:
    ada = await server.connect("ada")
    seated = await ada.request(
        CreateGame, game="tictactoe", opponent="ai", seat=0, algorithm="alphabeta", budget_ms=20
    )
    actions, ended = await play_out(
        ada, seated.game_id, seated.seat, seated.token, random.Random(1)
    )
    state = engine.replay(engine.make_game("tictactoe"), actions)
    assert state.is_terminal()
    # alphabeta never loses 3x3; random play by X usually loses, never wins.
    assert ended.winner in (None, 1)
    assert ended.result == {None: "1/2-1/2", 1: "0-1"}[state.winner()]

    record = (await ada.request(GetGame, game_id=seated.game_id)).game
    assert [m["action"] for m in record["moves"]] == actions
    assert (record["status"], record["result"], record["reason"]) == (
        "finished",
        ended.result,
        ended.reason,
    )
    assert record["players"][0]["name"] == "ada" and record["players"][1]["kind"] == "ai"
    for move in record["moves"]:
        if move["seat"] == 0:
            assert "stats" not in move
        else:
            stats = move["stats"]
            assert all(key in stats for key in AI_STATS), stats
            assert stats["algorithm"] == "alphabeta" and stats["budget_ms"] == 20
            assert stats["pv"][0] == move["action"]
    # The database itself holds the statistics in their own columns.
    rows = server.query(
        "SELECT ply, action, algorithm, iterations, seed FROM moves WHERE game_id = ? ORDER BY ply",
        seated.game_id,
    )
    assert [r[1] for r in rows] == actions
    assert all((r[2] is None) == (r[0] % 2 == 0) for r in rows)
    await ada.close()


async def test_the_ai_moves_first_when_the_human_takes_o(server: RunningServer) -> None:
    bo = await server.connect("bo")
    seated = await bo.request(
        CreateGame, game="tictactoe", opponent="ai", seat=1, algorithm="mcts", budget_ms=20
    )
    assert seated.seat == 1
    actions, ended = await play_out(bo, seated.game_id, 1, seated.token, random.Random(2))
    assert len(actions) >= 5 and ended.winner in (None, 0)
    await bo.close()


async def test_an_ai_game_without_an_algorithm_gets_the_games_own(
    server: RunningServer,
) -> None:
    """A create or quick request that names no search is played by the game's own
    (engine.default_ai): perfect on tic-tac-toe, alphabeta on gomoku (0.98 against mcts);
    before, every game got mcts."""
    client = await server.connect()
    for game in ("tictactoe", "gomoku", "uttt"):
        seated = await client.request(CreateGame, game=game, opponent="ai", budget_ms=10)
        snapshot = await client.next_event(timeout=10)
        assert isinstance(snapshot, Snapshot) and snapshot.game_id == seated.game_id
        ai = snapshot.players[1]
        assert ai is not None and ai["algorithm"] == engine.default_ai(game), (game, ai)
        await client.request(Resign, game_id=seated.game_id, token=seated.token)
        ended = await client.next_event(timeout=10)
        while not isinstance(ended, Ended):  # the AI's first moves may come before it
            ended = await client.next_event(timeout=10)
        assert ended.game_id == seated.game_id  # (no move of ours yet: aborted)
        assert (ended.result, ended.reason) == ("*", "abort")
    assert engine.default_ai("gomoku") == "alphabeta"
    await client.close()


async def test_every_algorithm_plays_through_the_pool(server: RunningServer) -> None:
    client = await server.connect()
    for algorithm in ("random", "flat", "mcts", "uct", "alphabeta", "minimax", "perfect"):
        seated = await client.request(
            CreateGame, game="tictactoe", opponent="ai", seat=1, algorithm=algorithm, budget_ms=10
        )
        moved = await client.next_event(timeout=30)
        while isinstance(moved, Snapshot):
            moved = await client.next_event(timeout=30)
        assert isinstance(moved, Moved) and moved.seat == 0, algorithm
        assert moved.stats is not None and moved.stats["algorithm"] == algorithm
        await client.request(Resign, game_id=seated.game_id, token=seated.token)
        assert isinstance(await client.next_event(timeout=10), Ended)
    await client.close()


async def test_two_clients_play_a_whole_game(server: RunningServer) -> None:
    ada = await server.connect("ada")
    bo = await server.connect("bo")
    seated_a = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    assert isinstance(await ada.next_event(timeout=5), Snapshot)  # the open game
    listed = await bo.request(ListGames, status="open")
    assert [g["game_id"] for g in listed.games] == [seated_a.game_id]
    seated_b = await bo.request(JoinGame, game_id=seated_a.game_id)
    assert seated_b.seat == 1 and seated_b.token != seated_a.token
    assert (await bo.request(ListGames, status="open")).games == ()

    (a_actions, a_end), (b_actions, b_end) = await asyncio.gather(
        play_out(ada, seated_a.game_id, 0, seated_a.token, random.Random(3)),
        play_out(bo, seated_b.game_id, 1, seated_b.token, random.Random(4)),
    )
    # Both seats saw the same game and the same ending.
    assert a_actions == b_actions and a_end == b_end
    state = engine.replay(engine.make_game("5x5"), a_actions)
    assert state.is_terminal()
    record = (await bo.request(GetGame, game_id=seated_a.game_id)).game
    assert [m["action"] for m in record["moves"]] == a_actions
    assert [p["name"] for p in record["players"]] == ["ada", "bo"]
    assert all("stats" not in m for m in record["moves"])
    finished = await ada.request(ListGames, status="finished")
    assert seated_a.game_id in [g["game_id"] for g in finished.games]
    await ada.close()
    await bo.close()


async def test_a_move_is_committed_before_it_is_acknowledged(server: RunningServer) -> None:
    ada = await server.connect("ada")
    bo = await server.connect("bo")
    seated_a = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
    seated_b = await bo.request(JoinGame, game_id=seated_a.game_id)
    seats = [(ada, seated_a.token), (bo, seated_b.token)]
    for ply, action in enumerate([4, 0, 8, 2]):
        mover, token = seats[ply % 2]
        ack = await mover.request(Move, game_id=seated_a.game_id, token=token, action=action)
        # The acknowledgement arrived: a separate SQLite connection already sees the move.
        rows = server.query("SELECT ply, action FROM moves WHERE game_id = ?", seated_a.game_id)
        assert (ply, action) in rows and len(rows) == ply + 1
        assert ack.ply == ply and ack.seq == ply + 2  # seq 1 was the start
    await ada.close()
    await bo.close()


async def test_a_running_search_does_not_delay_other_clients(server: RunningServer) -> None:
    thinker = await server.connect("thinker")
    other = await server.connect("other")
    # The AI moves first with a long budget; meanwhile another client is served at once.
    seated = await thinker.request(
        CreateGame, game="uttt", opponent="ai", seat=1, algorithm="mcts", budget_ms=8_000
    )
    assert isinstance(await thinker.next_event(timeout=30), Snapshot)
    for _ in range(20):
        await other.request(Ping)
    # All twenty pings were answered while the AI's first move was still being searched.
    assert _drain(thinker) == []
    # The game aborted, its search stops: the AI never moves in it.
    await thinker.request(Abort, game_id=seated.game_id, token=seated.token)
    ended = await thinker.next_event(timeout=30)
    assert isinstance(ended, Ended) and ended.reason == "abort", ended
    await thinker.close()
    await other.close()


def _drain(connection: ServerConnection) -> list[object]:
    events = []
    while not connection.events.empty():
        events.append(connection.events.get_nowait())
    return events

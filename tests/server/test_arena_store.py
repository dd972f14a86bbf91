"""``server.arena_store``: arena games written as finished games, read back through the store,
and refused (nothing written) when a record does not replay to its stated result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import engine
from engine import Budget
from server.arena_store import ArenaRecordError, game_rows
from server.store import SQLiteStore

SPEC_A = {"text": "mcts:300it", "algorithm": "mcts", "budget_ms": None, "iterations": 300}
SPEC_B = {"text": "random:1ms", "algorithm": "random", "budget_ms": 1.0, "iterations": None}


def _record(index: int, a_first: bool, seed: int) -> dict[str, Any]:
    """One real game (mcts against random on 3x3), as the arena's worker records it."""
    state = engine.make_game("tictactoe").new_initial_state()
    a_seat = 0 if a_first else 1
    stats, times = [], []
    while not state.is_terminal():
        a_moves = state.current_player() == a_seat
        result = engine.search(
            state,
            "mcts" if a_moves else "random",
            Budget(time_ms=None if a_moves else 1.0, iterations=300 if a_moves else None),
            seed=seed + state.ply(),
        )
        state.apply_action(result.action)
        stats.append(result.to_dict())
        times.append(2000.0 + state.ply())
    ret = state.returns()[a_seat]
    return {
        "index": index,
        "seed": seed,
        "a_first": a_first,
        "result": "win" if ret > 0 else "loss" if ret < 0 else "draw",
        "forfeit": None,
        "actions": state.history(),
        "move_stats": stats,
        "move_at": times,
        "started_at": 2000.0,
    }


def _document(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"game": "tictactoe", "params": {}, "seed": 77, "a": SPEC_A, "b": SPEC_B,
            "records": records}  # fmt: skip


def _run(db: Path, document: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "server.arena_store", "--db", str(db)],
        input=json.dumps(document).encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )


async def test_arena_games_are_stored_as_finished_games(tmp_path: Path) -> None:
    records = [_record(0, True, 10), _record(1, False, 20)]
    done = _run(tmp_path / "a.db", _document(records))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["db"] == str(tmp_path / "a.db")
    ids = answer["game_ids"]
    assert len(ids) == 2 and len(set(ids)) == 2
    store = SQLiteStore(tmp_path / "a.db")
    await store.open()
    try:
        listed = await store.list_games("finished")
        assert {g.id for g in listed} == set(ids)
        for game_id, record in zip(ids, records, strict=True):
            stored = await store.get_game(game_id)
            assert stored is not None
            row = stored.row
            assert row.game == "tictactoe" and row.status == "finished"
            a_seat = 0 if record["a_first"] else 1
            assert row.players[a_seat]["name"] == "mcts:300it (A)"
            assert row.players[1 - a_seat]["name"] == "random:1ms (B)"
            assert all(p["kind"] == "ai" for p in row.players)
            assert row.players[a_seat]["algorithm"] == "mcts"
            assert row.players[a_seat]["arena"] == {"seed": 77, "game": record["index"],
                                                    "side": "A"}  # fmt: skip
            state = engine.replay(engine.make_game("tictactoe"), record["actions"])
            winner = state.winner()
            assert row.result == {0: "1-0", 1: "0-1", None: "1/2-1/2"}[winner]
            assert row.reason == ("draw" if winner is None else "line")
            assert [m.action for m in stored.moves] == record["actions"]
            assert [m.seat for m in stored.moves] == [p & 1 for p in range(len(stored.moves))]
            for move, stats in zip(stored.moves, record["move_stats"], strict=True):
                assert move.stats is not None
                assert move.stats["algorithm"] == stats["algorithm"]
                assert move.stats["iterations"] == stats["iterations"]
            assert row.ended_at == record["move_at"][-1]
    finally:
        await store.close()


def test_a_record_that_does_not_replay_to_its_result_stores_nothing(tmp_path: Path) -> None:
    good = _record(0, True, 10)
    bad = dict(_record(1, True, 30))
    bad["result"] = {"win": "loss", "loss": "win", "draw": "win"}[bad["result"]]
    done = _run(tmp_path / "b.db", _document([good, bad]))
    assert done.returncode == 1
    assert b"game 1" in done.stderr
    assert not (tmp_path / "b.db").exists()  # refused before the database was opened


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"actions": [0, 0]}, "do not replay"),
        ({"actions": [0, 4]}, "do not end the game"),
        ({"move_stats": [None]}, "one statistic"),
    ],
)
def test_malformed_records_are_refused(change: dict[str, Any], message: str) -> None:
    record = {**_record(0, True, 10), **change}
    with pytest.raises(ArenaRecordError, match=message):
        game_rows(_document([record]))


def test_input_that_is_not_a_match_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path / "c.db", [1, 2, 3])
    assert done.returncode == 1 and b"not a JSON object" in done.stderr
    with pytest.raises(ArenaRecordError, match="not an arena match"):
        game_rows({"game": "tictactoe"})

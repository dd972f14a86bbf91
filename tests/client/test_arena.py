"""`noughts arena` run through the real CLI and the real engine (no mocks)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from client.cli import main
from client.commands.arena import (
    STARTUP_S_PER_BUILD,
    ArenaError,
    GameTask,
    PlayerSpec,
    _stall_timeout,
    parse_budget,
    parse_player,
    parse_sprt,
)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main(["arena", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_alphabeta_never_loses_to_random_on_3x3(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(
        capsys,
        *("--game", "tictactoe", "--a", "alphabeta:5ms", "--b", "random:1ms"),
        *("--games", "6", "--seed", "11"),
    )
    assert report["games_played"] == 6
    assert report["losses"] == 0
    assert report["wins"] + report["draws"] == 6
    assert report["score"] >= 0.5
    # Colours alternate: A moved first in games 0, 2, 4.
    assert report["by_colour"]["a_first"]["games"] == 3
    assert report["by_colour"]["a_second"]["games"] == 3
    records = report["records"]
    assert [r["index"] for r in records] == list(range(6))
    assert [r["a_first"] for r in records] == [True, False] * 3
    assert report["opening_plies"] == 0 and all(r["opening"] == [] for r in records)
    for record in records:  # enough to archive: every game's moves replay to its result
        import engine

        state = engine.replay(engine.make_game("tictactoe"), record["actions"])
        assert state.is_terminal()
        a_player = 0 if record["a_first"] else 1
        expected = {1.0: "win", 0.0: "draw", -1.0: "loss"}[state.returns()[a_player]]
        assert record["result"] == expected
    assert report["ms_per_move"]["a"] > 0 and report["games_per_second"] > 0
    # Games 2p and 2p+1 are a pair: the interval counts 3 pairs (pentanomial), by A's points.
    assert report["interval"] == "pentanomial" and sum(report["pairs"]) == 3
    points = [{"win": 1.0, "draw": 0.5, "loss": 0.0}[r["result"]] for r in records]
    by_pair = [round(2 * (points[i] + points[i + 1])) for i in range(0, 6, 2)]
    assert report["pairs"] == [by_pair.count(k) for k in range(5)]


def test_balanced_openings_pair_the_games_and_end_the_repeats(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On a k >= 5 board each pair of games starts from the same 4 random plies near the centre,
    with the colours swapped, every game differs, and the same seed replays the same match."""
    argv = ["--game", "mnk", "--param", "m=9", "--param", "n=9", "--param", "k=5"]
    argv += ["--a", "alphabeta:200it", "--b", "alphabeta:120it"]
    argv += ["--seed", "8", "--workers", "1", "--quiet", "--games"]
    report = run_json(capsys, *argv, "6")
    assert report["opening_plies"] == 4
    records = report["records"]
    openings = [tuple(r["opening"]) for r in records]
    assert openings[0::2] == openings[1::2]  # one opening per pair ...
    assert len(set(openings)) == 3  # ... and a new one for each pair
    assert [r["a_first"] for r in records] == [True, False] * 3  # colours swapped in a pair
    for record in records:
        assert record["actions"][:4] == record["opening"]
        assert all(abs(a // 9 - 4) <= 2 and abs(a % 9 - 4) <= 2 for a in record["opening"])
    assert len({tuple(r["actions"]) for r in records}) == 6
    assert [r["actions"] for r in run_json(capsys, *argv, "6")["records"]] == [
        r["actions"] for r in records
    ]
    # --opening-plies 0: every game from the empty board.
    plain = run_json(capsys, *argv, "2", "--opening-plies", "0")
    assert plain["opening_plies"] == 0
    assert all(r["opening"] == [] for r in plain["records"])


def test_text_report_and_progress(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["arena", "--game", "tictactoe", "--a", "alphabeta:2ms", "--b", "random:1ms"]
    assert main([*argv, "--games", "4", "--workers", "1", "--progress-every", "2"]) == 0
    captured = capsys.readouterr()
    assert "A = alphabeta:2ms  B = random:1ms" in captured.out
    assert "losses" in captured.out and "Elo difference" in captured.out
    assert "A first (X): 2 games" in captured.out
    assert "95% intervals over 2 game pairs (colours swapped; pentanomial)" in captured.out
    # Not a terminal: a plain progress line every 2 games.
    assert captured.err.count("arena: ") == 2


def test_same_seed_and_iteration_budgets_replay_the_same_match(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--game", "5x5", "--a", "mcts:300it", "--b", "flat:300it", "--games", "2"]
    argv += ["--seed", "5", "--workers", "1", "--quiet"]
    first = run_json(capsys, *argv)
    second = run_json(capsys, *argv)
    assert [r["actions"] for r in first["records"]] == [r["actions"] for r in second["records"]]
    assert first["a"]["iterations"] == 300 and first["a"]["budget_ms"] is None


def test_sprt_stops_a_lopsided_match_early(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(
        capsys,
        *("--game", "tictactoe", "--a", "alphabeta:2ms", "--b", "random:1ms"),
        *("--games", "400", "--sprt", "0,50", "--workers", "1", "--seed", "3", "--quiet"),
    )
    assert report["sprt"]["verdict"] == "H1"
    assert report["stopped_early"] and report["games_played"] < 400
    assert report["losses"] == 0


def test_unavailable_algorithm_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arena", "--game", "tictactoe", "--a", "deepblue:5ms"]) == 2
    err = capsys.readouterr().err
    assert "'deepblue' is not available" in err and "available: " in err


def test_bad_game_and_budget_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arena", "--game", "chess"]) == 2
    assert "bad game" in capsys.readouterr().err
    assert main(["arena", "--game", "tictactoe", "--b", "random:fast"]) == 2
    assert "bad budget" in capsys.readouterr().err
    assert main(["arena", "--game", "tictactoe", "--opening-plies", "9"]) == 2
    assert "--opening-plies must be within 0..8" in capsys.readouterr().err
    for every in ("0", "-1"):  # a walk's finding: accepted
        assert main(["arena", "--game", "tictactoe", "--progress-every", every]) == 2
        assert "--progress-every must be at least 1" in capsys.readouterr().err


def test_mnk_params(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(
        capsys,
        *("--game", "mnk", "--param", "m=4", "--param", "n=4", "--param", "k=3"),
        *("--a", "random:1ms", "--b", "random:1ms", "--games", "2", "--workers", "1"),
        "--quiet",
    )
    assert report["game"] == {"name": "mnk", "requested": "mnk", "params": {"m": 4, "n": 4, "k": 3}}


def test_player_specs() -> None:
    spec = parse_player("mcts:100ms:c=1.2,reuse=false")
    assert (spec.algorithm, spec.budget_ms, spec.iterations) == ("mcts", 100.0, None)
    assert spec.options == {"c": 1.2, "reuse": False}
    spec = parse_player("alphabeta:5000it:depth=4")
    assert (spec.budget_ms, spec.iterations, spec.options) == (None, 5000, {"depth": 4})
    assert parse_player("random").budget_ms == 100.0
    assert parse_budget("0.5s") == (500.0, None)
    assert parse_sprt("0,10") == (0.0, 10.0)
    for bad in ("mcts:-5ms", "mcts:10xs", ":5ms", "mcts:5ms:c"):
        with pytest.raises(ArenaError):
            parse_player(bad)
    with pytest.raises(ArenaError):
        parse_sprt("10,0")


def test_stall_timeout_allows_each_build_a_cold_compile() -> None:
    """A worker's first game compiles every engine build it plays (a cold compile of uttt's
    mcts took ~64 CPU s, minutes at load 8): the wait scales with the builds and with the
    workers sharing a core, on top of 3x the longest game."""
    here = parse_player("mcts:100ms")
    ref = dataclasses.replace(here, ref="c0f7043", tree="/tmp/build")

    def task(a: PlayerSpec, b: PlayerSpec) -> GameTask:
        return GameTask(0, "uttt", {}, a, b, 0)

    longest = 3.0 * 81 * 0.1
    assert _stall_timeout(task(here, here), 1, 2) == pytest.approx(STARTUP_S_PER_BUILD + longest)
    assert _stall_timeout(task(here, ref), 1, 2) == pytest.approx(2 * STARTUP_S_PER_BUILD + longest)
    assert _stall_timeout(task(here, ref), 4, 2) == pytest.approx(4 * STARTUP_S_PER_BUILD + longest)
    assert STARTUP_S_PER_BUILD >= 600.0


def test_db_stores_the_games_with_their_moves(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--db hands the games to server.arena_store (a child process); they are then in the
    database as finished games, one move row per move with its search statistics."""
    db = tmp_path / "arena.db"
    report = run_json(
        capsys,
        *("--game", "tictactoe", "--a", "mcts:200it", "--b", "random:1ms"),
        *("--games", "3", "--seed", "4", "--workers", "1", "--quiet", "--db", str(db)),
    )
    stored = report["stored"]
    assert stored["db"] == str(db) and len(stored["game_ids"]) == 3
    with sqlite3.connect(db) as connection:
        games = connection.execute(
            "SELECT id, status, players FROM games ORDER BY created_at"
        ).fetchall()
        assert {g[0] for g in games} == set(stored["game_ids"])
        assert all(g[1] == "finished" for g in games)
        for game_id, record in zip(stored["game_ids"], report["records"], strict=True):
            moves = connection.execute(
                "SELECT action, algorithm, iterations FROM moves WHERE game_id = ? ORDER BY ply",
                (game_id,),
            ).fetchall()
            assert [m[0] for m in moves] == record["actions"]
            a_plies = range(0 if record["a_first"] else 1, len(moves), 2)
            assert {moves[p][1] for p in a_plies} == {"mcts"}
            assert all(m[2] is not None for m in moves)
    # --db alone: $NOUGHTS_DB; the text report says where the games went.
    monkeypatch.setenv("NOUGHTS_DB", str(tmp_path / "env.db"))
    argv = ["arena", "--game", "tictactoe", "--a", "random:1ms", "--b", "random:1ms"]
    assert main([*argv, "--games", "2", "--workers", "1", "--quiet", "--db"]) == 0
    out = capsys.readouterr().out
    assert f"stored: 2 games in {tmp_path / 'env.db'}" in out
    assert "\nhost: " in out  # the machine the figures came from (its CPU where Linux says)
    assert (tmp_path / "env.db").exists()
    # A --db in a missing directory is refused before the match (a walk's finding: after it).
    typo = tmp_path / "typo" / "arena.db"
    assert main([*argv, "--games", "2", "--workers", "1", "--quiet", "--db", str(typo)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"noughts arena: cannot open database {typo}: no directory {typo.parent}"
    )


def test_a_side_played_by_the_engine_of_a_git_ref(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--b-ref: B's moves come from the engine of that commit, in a child process with its own
    tree (extracted into the cache directory); the same seed and node budgets replay the same
    games as when both sides run in this process."""
    import subprocess

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    common = ("--game", "5x5", "--a", "alphabeta:300it", "--games", "2", "--seed", "5")
    ref = run_json(capsys, *common, "--b", "random:1it", "--b-ref", "HEAD", "--workers", "1")
    assert ref["b"]["text"] == f"random:1it@{head[:12]}" and ref["b"]["ref"] == head[:12]
    assert (tmp_path / "noughts" / "engines" / head / "engine" / "__init__.py").exists()
    here = run_json(capsys, *common, "--b", "random:1it", "--workers", "1")
    assert [r["actions"] for r in ref["records"]] == [r["actions"] for r in here["records"]]
    assert main(["arena", *common, "--b-ref", "no-such-ref"]) == 2
    assert "no commit 'no-such-ref'" in capsys.readouterr().err


def test_sigterm_stops_a_match_as_ctrl_c_does(tmp_path: Path) -> None:
    """A walk's finding: SIGTERM ended arena at once with no result (rc -15), its pool's
    workers printing BrokenPipeError tracebacks. It now stops as Ctrl-C does."""
    import signal
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "client", "arena", "--game", "tictactoe", "--a", "random:1ms",
         "--b", "random:1ms", "--games", "1000000", "--workers", "1", "--json",
         "--progress-every", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    assert process.stderr.readline()  # a first progress line: the match runs
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    report = json.loads(out)
    assert report["interrupted"] is True and report["games_played"] >= 1


def test_ctrl_c_stops_a_match_against_a_git_ref_without_a_traceback(tmp_path: Path) -> None:
    """--b-ref's child (the engine of that commit) did not ignore Ctrl-C as arena's workers
    do: a terminal's SIGINT to the process group printed its KeyboardInterrupt traceback
    beside the summary so far, and a child ignoring it printed a BrokenPipeError one when
    its search outlasted arena. Now only the parent handles it, and the child ends quietly."""
    import os
    import signal
    import subprocess
    import sys
    import time

    # B searches 2 s a move from the 7th ply on: Ctrl-C comes during one of its searches.
    process = subprocess.Popen(
        [sys.executable, "-m", "client", "arena", "--game", "tictactoe", "--a", "random:1ms",
         "--b", "flat:2000ms", "--b-ref", "HEAD", "--opening-plies", "6", "--games", "1000000",
         "--workers", "1", "--json", "--progress-every", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
    )  # fmt: skip
    assert process.stderr is not None
    assert process.stderr.readline()  # a first progress line: the ref's child plays
    time.sleep(0.5)  # the second game's first search has begun (B has X in odd games)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)  # the child's stderr included: it is theirs
    assert process.returncode == 130, err
    assert "Traceback" not in err, err
    report = json.loads(out)
    assert report["interrupted"] is True and report["games_played"] >= 1


def test_an_engine_before_the_typed_front_door_is_refused_before_the_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk's finding: --b-ref of a commit older than c0f7043 was launched, and failed
    with the child's traceback (module 'engine' has no attribute 'Searcher')."""
    import subprocess

    from client.git_engine import GitEngineError, extract

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repository = tmp_path / "old"
    (repository / "engine").mkdir(parents=True)
    (repository / "engine" / "__init__.py").write_text("def search(state): ...\n")
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "old engine"]):
        subprocess.run(
            ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t", *command],
            check=True,
        )
    with pytest.raises(GitEngineError, match="predates the typed front door"):
        extract("HEAD", repository)


def test_alpha_or_beta_without_sprt_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """--alpha and --beta are the SPRT's error rates: without --sprt they were ignored in
    silence and the match ran as if they had not been given."""
    argv = ["arena", "--game", "tictactoe", "--a", "random:1ms", "--b", "random:1ms"]
    argv += ["--games", "1", "--workers", "1", "--quiet"]
    for given in (["--alpha", "0.1"], ["--beta", "0.2"], ["--alpha", "0.1", "--beta", "0.2"]):
        assert main([*argv, *given]) == 2
        captured = capsys.readouterr()
        assert captured.err.strip().splitlines() == [
            "noughts arena: --alpha and --beta are the SPRT's error rates: they need --sprt"
        ]
        assert not captured.out
    # With --sprt they are taken, and reported.
    report = run_json(capsys, *argv[1:], "--sprt", "0,50", "--alpha", "0.1", "--beta", "0.2")
    assert (report["sprt"]["alpha"], report["sprt"]["beta"]) == (0.1, 0.2)


def test_an_iteration_budget_past_the_maximum_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Time budgets stop at an hour; an iteration budget had no bound, and a match of
    mcts:1000000000it started (hours a move). It is refused before the match, as a time
    budget past its maximum is."""
    with pytest.raises(ArenaError, match="iteration budget"):
        parse_player("mcts:1000000000it")
    assert parse_player("mcts:100000000it").iterations == 100_000_000
    argv = ["arena", "--game", "tictactoe", "--games", "1", "--workers", "1", "--quiet"]
    assert main([*argv, "--a", "mcts:1000000000it"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "noughts arena: an iteration budget is 1..100000000, not 1000000000"
    ]
    assert not captured.out


@pytest.mark.parametrize("param", ["m", "m=x", "=5", "m=-1"])
def test_a_malformed_param_is_a_usage_error(capsys: pytest.CaptureFixture[str], param: str) -> None:
    """A malformed --param exited 1, the other usage errors (an unknown parameter among
    them) 2: it is now 2 as well, with its one line."""
    argv = ["arena", "--game", "mnk", "--games", "1", "--workers", "1", "--quiet"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--param", param])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"noughts arena: --param wants KEY=N, got {param!r}"
    ]
    assert main([*argv, "--param", "q=3"]) == 2  # unknown: the game's own one line
    assert capsys.readouterr().err.strip().splitlines() == [
        "noughts arena: bad game: mnk takes parameters m, n, k, not ['q']"
    ]

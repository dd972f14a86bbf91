"""`noughts bench --quick` through the real CLI and engine: the report has every part."""

from __future__ import annotations

import json
import os

import pytest

from client.cli import main
from client.commands.bench import percentile


def test_quick_bench_json_has_the_expected_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert captured.err  # progress went to stderr
    assert {"host", "settings", "algorithms", "games", "warm_up_s", "elapsed_s"} <= set(report)
    host = report["host"]
    assert {"cpus", "cpu", "machine", "python", "load_average_at_start"} <= set(host)
    if os.path.exists("/proc/cpuinfo"):  # Linux names the CPU the figures were measured on
        assert host["cpu"]
    assert report["quick"] is True
    assert report["games"] == ["tictactoe", "5x5", "gomoku", "uttt"]

    rates = [r for r in report["rates"] if r["available"]]
    assert {r["game"] for r in rates} == set(report["games"])
    for row in rates:
        assert row["position"] in ("opening", "middle")
        assert {"rate_median", "runs", "unit", "target", "budget_ms"} <= set(row)
        assert row["rate_median"] is None or row["rate_median"] >= 0
    mcts_openings = {
        r["game"]: r for r in rates if r["algorithm"] == "mcts" and r["position"] == "opening"
    }
    assert mcts_openings["uttt"]["target"] == 250_000

    solve = report["solve"]
    assert solve["target_nodes"] == 1200 and solve["target_nodes_symmetry"] == 320
    if solve["available"]:
        assert solve["value"] == 0  # 3x3 is a draw
        assert solve["median_ms"] > 0
    for row in solve["from_scratch"]:  # present once the perfect player offers its bench hook
        assert row["value"] == 0 and row["nodes"] > 0
        assert row["target_nodes"] == (320 if row["symmetry"] else 1200)

    assert report["overrun"]
    for row in report["overrun"]:
        if row["moves"]:
            assert row["budget_ms"] == 10.0
            assert row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
            assert 0.0 <= row["within_target"] <= 1.0

    trip = report["round_trip"]
    for transport in ("pipe", "run_in_executor"):
        assert trip[transport]["samples"] > 0
        assert 0 < trip[transport]["p50_ms"] <= trip[transport]["p99_ms"]


def test_quick_bench_table(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--quick", "--games", "tictactoe", "--skip", "overrun", "round-trip"]
    assert main([*argv, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Search speed" in out and "2,000,000" in out  # the target beside the figure
    assert "3x3 solved" in out


def test_percentile() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 50) == 1.5
    assert percentile(list(map(float, range(101))), 99) == 99.0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--runs", "0"], "noughts bench: --runs must be at least 1, not 0"),
        (
            ["--budget-ms", "0"],
            "noughts bench: --budget-ms wants milliseconds in 1..3600000, got 0",
        ),
        (
            ["--budget-ms", "nan"],
            "noughts bench: --budget-ms wants milliseconds in 1..3600000, got nan",
        ),
    ],
)
def test_a_run_count_or_budget_out_of_range_is_refused_before_measuring(
    capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    # Before, they were raised to 1 in silence and the whole bench ran (about 70 s).
    assert main(["bench", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == said and not captured.out


def test_bench_against_a_git_ref_gives_each_rate_its_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--ref: each run of this build is followed by the same run of that commit's engine (in a
    child process), and each rate row carries that build's runs and the ratio run by run."""
    argv = ["bench", "--quick", "--json", "--games", "tictactoe", "--algorithms", "minimax"]
    skip = ["--skip", "solve", "overrun", "round-trip"]
    assert main([*argv, *skip, "--runs", "3", "--ref", "HEAD"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["reference"]) == 40  # the commit HEAD names
    rows = [row for row in report["rates"] if row["available"]]
    assert {(row["algorithm"], row["position"]) for row in rows} == {
        ("minimax", "opening"),
        ("minimax", "middle"),
    }
    for row in rows:
        theirs = row["reference"]
        assert theirs["ref"] == report["reference"] and "error" not in theirs
        assert len(theirs["runs"]) == len(row["runs"]) == 3
        assert all(run["iterations"] > 0 for run in theirs["runs"])
        pairs = zip(row["runs"], theirs["runs"], strict=True)
        ratios = [ours["rate"] / run["rate"] for ours, run in pairs]
        assert theirs["ratios"] == pytest.approx(ratios)
        assert theirs["ratio_median"] == pytest.approx(sorted(ratios)[1])


def test_bench_with_a_ref_that_is_no_commit_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "--quick", "--games", "tictactoe", "--algorithms", "minimax"]
    assert main([*argv, "--ref", "no-such-ref"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("noughts bench: --ref: no commit 'no-such-ref'")


def test_bench_with_a_ref_but_no_rates_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--ref only compares rates: with them skipped it would compare nothing, in silence."""
    assert main(["bench", "--quick", "--skip", "rates", "--ref", "HEAD"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["noughts bench: --ref compares the rates: do not skip them"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--games", "gomoku", "--algorithms", "perfect"],
            "noughts bench: --algorithms perfect measure nothing on gomoku (minimax and perfect "
            "are for tictactoe only)",
        ),
        (
            ["--games", "5x5", "uttt", "--algorithms", "minimax", "perfect"],
            "noughts bench: --algorithms minimax perfect measure nothing on 5x5, uttt (minimax "
            "and perfect are for tictactoe only)",
        ),
        (
            ["--skip", "rates", "solve", "overrun", "round-trip"],
            "noughts bench: --skip leaves nothing to measure",
        ),
    ],
)
def test_a_selection_that_measures_nothing_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    """--games gomoku --algorithms perfect printed no rate table at all (perfect play is for
    3x3 only), and the rest of the bench ran as if that was what was asked."""
    assert main(["bench", "--quick", "--quiet", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [said] and not captured.out


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_stops_the_bench_with_the_figures_so_far(signal_name: str) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) printed nothing
    and SIGTERM killed it (rc -15): it now stops as arena does, prints the rates measured
    so far and says it was interrupted, exit 130."""
    import signal
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "client", "bench", "--json", "--games", "tictactoe",
         "--algorithms", "alphabeta", "mcts", "--skip", "solve", "overrun", "round-trip",
         "--runs", "1000", "--budget-ms", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert process.stderr is not None
    seen = []
    for line in process.stderr:  # plain progress lines: stderr is not a terminal
        seen.append(line)
        if line.startswith("bench: tictactoe alphabeta from the middle"):
            break  # the opening's row is measured
    else:
        pytest.fail(f"the bench ended before its second row: {''.join(seen)}")
    os.killpg(process.pid, getattr(signal, signal_name))
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    report = json.loads(out)
    assert report["interrupted"] is True
    measured = [(row["algorithm"], row["position"]) for row in report["rates"]]
    assert measured[0] == ("alphabeta", "opening") and ("mcts", "middle") not in measured
    assert len(report["rates"][0]["runs"]) == 1000

"""bench/fit_gomoku_windows.py end to end on a tiny budget: self-play games generated, the
default and the window evaluations fitted, their held-out errors reported."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "bench" / "fit_gomoku_windows.py"


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stderr


def test_the_tool_generates_games_and_fits_window_weights(tmp_path: Path) -> None:
    games = tmp_path / "games.jsonl"
    _run("generate", "--games", "5", "--nodes", "300", "--seed", "3", "--out", str(games))
    records = [json.loads(line) for line in games.read_text().splitlines()]
    assert len(records) == 5
    assert all(r["winner"] in (-1, 0, 1) and len(r["moves"]) > r["opening"] for r in records)
    report = _run("fit", "--data", str(games))
    # one held-out game (index 4), both fits reported with errors in [0, 1]
    assert re.search(r"quiet positions from 5 games", report), report
    errors = [float(e) for e in re.findall(r"held out (\d\.\d+)", report)]
    assert len(errors) >= 3 and all(0.0 <= e <= 1.0 for e in errors), report
    assert "mover windows of 3" in report and "tempo with X to move" in report

"""bench/fit_gomoku_eval.py end to end on a tiny budget: games generated, weights fitted and
written as a module the engine could load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.kernels import alphabeta_mnk as K

TOOL = Path(__file__).resolve().parents[2] / "bench" / "fit_gomoku_eval.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_tool_generates_games_and_fits_weights(tmp_path: Path) -> None:
    games = tmp_path / "games.jsonl"
    _run("generate", "--games", "4", "--nodes", "300", "--seed", "3", "--out", str(games))
    records = [json.loads(line) for line in games.read_text().splitlines()]
    assert len(records) == 4
    assert all(r["winner"] in (-1, 0, 1) and len(r["moves"]) > r["opening"] for r in records)
    module = tmp_path / "weights.py"
    done = _run("fit", "--data", str(games), "--write", str(module))
    assert "Texel error" in done.stderr
    space: dict[str, object] = {}
    exec(module.read_text(), space)  # noqa: S102 (the tool's own output)
    weights = space["FITTED_WEIGHTS"]
    assert isinstance(weights, tuple) and len(weights) == 2 * K.FIT_WIDTH and any(weights)

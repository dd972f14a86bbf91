"""bench/mcts_ab.py: a build is the engine under its own package name (no import of the
original left), kept in the cache by its content; and the whole A/B on a tiny budget reports
every build and no differing search when both builds are the same; with a time budget it
reports wall-clock rates."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "mcts_ab.py"


def _python(code: str, *path: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_build_is_the_engine_under_its_own_name(tmp_path: Path) -> None:
    _python(
        "import sys; sys.path.insert(0, sys.argv[1]); import mcts_ab, pathlib;"
        " mcts_ab.build(sys.argv[2], 'abcopy', pathlib.Path(sys.argv[3]))",
        ROOT / "bench",
        ROOT,
        tmp_path,
    )
    copied = list((tmp_path / "abcopy").rglob("*.py"))
    assert len(copied) > 20
    assert not any(re.search(r"\b(from|import) engine\b", p.read_text()) for p in copied)
    out = _python(
        "import sys; sys.path.insert(0, sys.argv[1]); import abcopy;"
        " game = abcopy.make_game('uttt'); state = abcopy.replay(game, [40, 36]);"
        " print(game.name, state.history(), 'engine' in sys.modules)",
        tmp_path,
    )
    assert out.split() == ["uttt", "[40,", "36]", "False"]


def test_a_build_is_kept_in_the_cache_by_its_content(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(
        ROOT / "engine", source / "engine", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import mcts_ab;"
        " print(mcts_ab.cached_build(sys.argv[2], 'abx'))"
    )
    first = Path(_python(code, ROOT / "bench", source, env=env).strip())
    assert first.parent == tmp_path / "cache" / "noughts" / "mcts_ab"
    built = first / "abx" / "game.py"
    stamp = built.stat().st_mtime_ns
    (first / "abx" / "__pycache__").mkdir()  # what a run's compiled code leaves there
    again = Path(_python(code, ROOT / "bench", source, env=env).strip())
    assert again == first
    assert built.stat().st_mtime_ns == stamp
    assert (first / "abx" / "__pycache__").is_dir()  # kept, not built again
    edited = source / "engine" / "game.py"
    edited.write_text(edited.read_text() + "\n# an edit\n")
    changed = Path(_python(code, ROOT / "bench", source, env=env).strip())
    assert changed != first
    assert (changed / "abx" / "game.py").read_text().endswith("# an edit\n")
    assert sorted(p.name for p in first.parent.iterdir()) == sorted([first.name, changed.name])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["HEAD", "--rounds", "0"], "argument --rounds: a whole number of at least 1, not '0'"),
        (["no/such/ref"], "'no/such/ref' is neither a directory holding engine/ nor a git ref"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path: Path, args: list[str], said: str) -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"mcts_ab.py: error: {said}", done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_tool_runs_two_builds_and_finds_the_same_searches(tmp_path: Path) -> None:
    # Two copies of this checkout's engine, each compiled in its own package (in a cache of
    # the test's own).
    done = subprocess.run(
        [sys.executable, str(TOOL), str(ROOT), str(ROOT), "--game", "5x5", "--rounds", "2"]
        + ["--iterations", "300"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "differ" not in done.stdout, done.stdout
    rows = re.findall(r"^(opening|middle)\s+(build\d)\s+median\s+[\d,]+", done.stdout, re.M)
    assert sorted(rows) == sorted(
        (w, b) for w in ("opening", "middle") for b in ("build0", "build1")
    ), done.stdout


@pytest.mark.slow
def test_the_tool_times_searches_of_a_time_budget_by_the_wall_clock() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), str(ROOT), "--game", "5x5", "--rounds", "2", "--fresh"]
        + ["--time-ms", "5"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "iterations per wall-clock second, 5 ms searches" in done.stdout, done.stdout
    rows = re.findall(r"^(opening|middle)\s+build0\s+median\s+[\d,]+", done.stdout, re.M)
    assert sorted(rows) == ["middle", "opening"], done.stdout

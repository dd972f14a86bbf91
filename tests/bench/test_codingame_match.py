"""bench/codingame_match.py with tiny bots as real processes: whole games, a garbled answer
and a late one lost by forfeit. Checks the referee, never strength."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

MATCH = Path(__file__).resolve().parents[2] / "bench" / "codingame_match.py"

# Reads the referee's turn and plays the first (or last) valid action.
BOT = """
import sys
while True:
    line = sys.stdin.readline()
    if not line:
        break
    actions = [sys.stdin.readline().strip() for _ in range(int(sys.stdin.readline()))]
    print(actions[{pick}], flush=True)
"""

# Answers its first turn, then garbage (as X) or too late (as O).
BAD = """
import sys, time
turn, x = 0, False
while True:
    line = sys.stdin.readline()
    if not line:
        break
    actions = [sys.stdin.readline().strip() for _ in range(int(sys.stdin.readline()))]
    turn += 1
    if turn == 1:
        x = line.split() == ["-1", "-1"]
    elif x:
        print("e5", flush=True)
        continue
    else:
        time.sleep(0.5)
    print(actions[0], flush=True)
"""


def bot(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def match(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(MATCH), "--games", "2", "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[2/2]" in done.stderr
    return json.loads(done.stdout)


def test_two_bots_play_whole_games_with_the_colours_swapped(tmp_path: Path) -> None:
    first = bot(tmp_path, "first", BOT.format(pick=0))
    last = bot(tmp_path, "last", BOT.format(pick=-1))
    result = match("--a", first, "--b", last)
    assert result["games"] == 2 and result["forfeits"] == []
    assert result["a_wins"] + result["draws"] + result["a_losses"] == 2
    records = result["records"]
    assert isinstance(records, list)
    assert [r["a_colour"] for r in records] == ["X", "O"]
    for record in records:
        assert record["plies"] == len(record["moves"]) >= 17  # 3 boards in a row: 17 plies
        assert record["winner"] in ("A", "B", None)
    assert result["worst_later_turn_ms"]["A"] < 150  # type: ignore[index]


def test_a_garbled_answer_and_a_late_one_lose_by_forfeit(tmp_path: Path) -> None:
    first = bot(tmp_path, "first", BOT.format(pick=0))
    bad = bot(tmp_path, "bad", BAD)
    result = match("--a", first, "--b", bad, "--turn-ms", "100", "--grace-ms", "50")
    assert (result["a_wins"], result["a_losses"]) == (2, 0)
    forfeits = result["forfeits"]
    assert isinstance(forfeits, list)
    reasons = {f["colour"]: f["reason"] for f in forfeits}
    assert [f["side"] for f in forfeits] == ["B", "B"]
    assert reasons["X"].startswith("garbled answer 'e5' (turn 2")  # B is X in game 1
    assert reasons["O"].startswith("no answer in time (turn 2")  # B is O in game 0

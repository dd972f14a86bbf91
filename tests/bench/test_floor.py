"""bench/floor.py, shrunk: the bare server stores every move it acknowledges and reports a
figure. Checks correctness, never speed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

FLOOR = Path(__file__).resolve().parents[2] / "bench" / "floor.py"


def test_the_bare_server_commits_every_move_it_acknowledges() -> None:
    done = subprocess.run(
        [sys.executable, str(FLOOR), "--games", "3", "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"([\d,]+) moves stored, ([\d,]+) acknowledged", done.stdout)
    assert found, done.stdout
    stored, acked = (int(group.replace(",", "")) for group in found.groups())
    assert acked > 0 and stored >= acked
    assert "server CPU" in done.stdout

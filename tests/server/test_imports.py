"""The server's game core is sans-I/O: the game session and the rows it produces and
restores from load no store, no database driver and no event loop (issue 13)."""

from __future__ import annotations

import json
import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_game_core_and_its_rows_load_no_store() -> None:
    modules = _modules_after("import server.session, server.rows")
    assert {"server.session", "server.rows"} <= modules
    io = {"server.store", "server.pgstore", "asyncio", "sqlite3", "aiosqlite", "asyncpg"}
    io |= {"websockets"}
    assert not modules & io, modules & io

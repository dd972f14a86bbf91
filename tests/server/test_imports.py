"""The server's import graph has no cycle, and its game core is sans-I/O (issue 13).

app.py and connection.py imported each other (connection.py for the GameServer type):
now connection.py defines the interface it needs (``Handler``) and app.py implements
it. The game session and the rows it produces and restores from load no store, no
database driver and no event loop.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import server
from tests.import_graph import find_cycle, import_graph, modules_after

ROOT = Path(server.__file__).resolve().parent


def test_the_server_has_no_import_cycle() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 20 and "server.connection" in graph["server.app"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or ())


def test_every_server_module_imports_alone() -> None:
    """Each module imported first, in a fresh interpreter (an import cycle that the graph
    misses, through ``importlib`` say, fails here by the module it starts from)."""
    names = sorted(import_graph(ROOT))
    runs = {
        name: subprocess.Popen(
            [sys.executable, "-c", f"import {name}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    }
    failed = {name: run.communicate()[1] for name, run in runs.items()}
    assert {name: err for name, err in failed.items() if runs[name].returncode} == {}


def test_the_game_core_and_its_rows_load_no_store() -> None:
    modules = modules_after("import server.session, server.rows")
    assert {"server.session", "server.rows"} <= modules
    io = {"server.store", "server.pgstore", "asyncio", "sqlite3", "aiosqlite", "asyncpg"}
    io |= {"websockets"}
    assert not modules & io, modules & io

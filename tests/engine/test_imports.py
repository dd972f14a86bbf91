"""The engine's import graph has no cycle, and ``import engine`` loads the rules only.

Issue 14: search.py imported every algorithm, which imported search.py back, and the
kernels (a nine-file cycle); ``import engine`` loaded numpy and numba, so every command's
``--help`` paid for them. The graph here holds every ``import`` statement in engine/, at
module level or inside a function (a lazy import is a dependency too).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import engine

ROOT = Path(engine.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the engine modules it imports (a ``from X import name`` of a submodule
    counts as importing the submodule)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
                targets += [f"{node.module}.{alias.name}" for alias in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_import_graph_finds_a_cycle_when_there_is_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_engine_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 20 and "engine.kernels.alphabeta" in graph["engine.alphabeta_driver"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or ())


def test_searches_never_import_the_front_door() -> None:
    """Algorithms and kernels sit below the registry and the front door (search.py)."""
    front = {"engine", "engine.search", "engine.algorithms", "engine.worker", "engine.warmup"}
    graph = import_graph()
    below = [name for name in graph if name.startswith("engine.kernels")]
    below += [f"engine.{n}" for n in ("mcts", "flat", "alphabeta", "minimax", "perfect")]
    below += ["engine.random_search", "engine.alphabeta_driver"]
    for name in below:
        assert not graph[name] & front, (name, graph[name] & front)


def _modules_after(code: str) -> set[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_import_engine_loads_the_rules_but_no_numpy() -> None:
    modules = _modules_after("import engine; engine.make_game('gomoku').new_initial_state()")
    assert {"engine.games", "engine.search", "engine.algorithms"} <= modules
    assert not {m for m in modules if m.split(".")[0] in ("numpy", "numba")}
    searched = _modules_after(
        "import engine\n"
        "state = engine.make_game('tictactoe').new_initial_state()\n"
        "engine.search(state, 'random', engine.Budget(iterations=1))"
    )
    assert not {m for m in searched if m.split(".")[0] in ("numpy", "numba")}


def test_noughts_help_loads_no_numpy() -> None:
    modules = _modules_after("import client.cli\nclient.cli.build_parser()")
    assert not {m for m in modules if m.split(".")[0] in ("numpy", "numba", "textual")}

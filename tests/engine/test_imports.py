"""The engine's import graph has no cycle, and ``import engine`` loads the rules only.

Issue 14: search.py imported every algorithm, which imported search.py back, and the
kernels (a nine-file cycle); ``import engine`` loaded numpy and numba, so every command's
``--help`` paid for them. The graph here holds every ``import`` statement in engine/, at
module level or inside a function (a lazy import is a dependency too): tests/import_graph.py.
"""

from __future__ import annotations

from pathlib import Path

import engine
from tests.import_graph import find_cycle, import_graph, modules_after

ROOT = Path(engine.__file__).resolve().parent


def test_the_import_graph_finds_a_cycle_when_there_is_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_engine_has_no_import_cycle() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 20 and "engine.kernels.alphabeta" in graph["engine.alphabeta_driver"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or ())


def test_searches_never_import_the_front_door() -> None:
    """Algorithms and kernels sit below the registry and the front door (search.py)."""
    front = {"engine", "engine.search", "engine.algorithms", "engine.worker", "engine.warmup"}
    graph = import_graph(ROOT)
    below = [name for name in graph if name.startswith("engine.kernels")]
    below += [f"engine.{n}" for n in ("mcts", "flat", "alphabeta", "minimax", "perfect")]
    below += ["engine.random_search", "engine.alphabeta_driver"]
    for name in below:
        assert not graph[name] & front, (name, graph[name] & front)


def test_import_engine_loads_the_rules_but_no_numpy() -> None:
    modules = modules_after("import engine; engine.make_game('gomoku').new_initial_state()")
    assert {"engine.games", "engine.search", "engine.algorithms"} <= modules
    assert not {m for m in modules if m.split(".")[0] in ("numpy", "numba")}
    # nor importlib.metadata (40% of the import's time): only a warm-up reads numba's version
    assert "importlib.metadata" not in modules
    searched = modules_after(
        "import engine\n"
        "state = engine.make_game('tictactoe').new_initial_state()\n"
        "engine.search(state, 'random', engine.Budget(iterations=1))"
    )
    assert not {m for m in searched if m.split(".")[0] in ("numpy", "numba")}


def test_noughts_help_loads_no_numpy() -> None:
    modules = modules_after("import client.cli\nclient.cli.build_parser()")
    assert not {m for m in modules if m.split(".")[0] in ("numpy", "numba", "textual")}


def test_a_named_command_imports_its_own_module_only() -> None:
    """`noughts brain ...` builds the brain's parser alone: the other commands' modules (and
    the protocol they import) would add about 0.1 s to a harness's first turn."""
    modules = modules_after("import client.cli\nclient.cli.build_parser('brain')")
    commands = {m for m in modules if m.startswith("client.commands.")}
    assert commands == {"client.commands.brain"}
    assert not {m for m in modules if m.split(".")[0] in ("protocol", "numpy", "numba")}
    every = modules_after("import client.cli\nclient.cli.build_parser('no-such-command')")
    assert "client.commands.play" in every and "client.commands.brain" in every

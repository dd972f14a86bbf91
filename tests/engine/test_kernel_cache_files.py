"""numba keeps a cached kernel in files named after its module, qualified name and first line
(``uttt._playout_avoid-503.py311.nbi`` and its numbered ``.nbc``). Closures made by one factory
share those files, and two processes compiling different closures at once can swap their code
(numba numbers a function's compiled versions within its files): while uttt's two playout loops
were closures of one name, the fresh-clone suite failed the plain loop's test (policies 0 and
1), once. So each kernel has its own files: the playout's closures are given their own names."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

from numba.core.dispatcher import Dispatcher

import engine.kernels

ROOT = Path(__file__).resolve().parents[2]


def _kernels() -> dict[str, Dispatcher]:
    """Every compiled kernel of the engine, once (a kernel imported elsewhere too, by its
    first name)."""
    modules = [
        importlib.import_module(f"engine.kernels.{info.name}")
        for info in pkgutil.iter_modules(engine.kernels.__path__)
    ]
    modules.append(importlib.import_module("engine.perfect"))
    found: dict[int, tuple[str, Dispatcher]] = {}
    for module in modules:
        for name, value in vars(module).items():
            if isinstance(value, Dispatcher):
                found.setdefault(id(value), (f"{module.__name__}.{name}", value))
    return dict(found.values())


def test_each_kernel_has_its_own_cache_file_name() -> None:
    kernels = _kernels()
    assert "engine.kernels.uttt._playout_avoid" in kernels  # the walk sees the kernels
    bases: dict[tuple[str, str, int], list[str]] = {}
    for name, kernel in kernels.items():
        func = kernel.py_func
        key = (func.__module__, func.__qualname__, func.__code__.co_firstlineno)
        bases.setdefault(key, []).append(name)
    shared = {key: names for key, names in bases.items() if len(names) > 1}
    assert shared == {}


# Compile the three playout loops into an empty cache and name the index files written.
PROBE = """
import numpy as np
import engine
from engine.kernels import kernel_game, root_state
from engine.kernels.layout import PLAYOUT_AVOID, PLAYOUT_CAPTURE, seed_rng
from engine.kernels.uttt import uttt_playout

game = engine.make_game("uttt")
state = root_state(game.new_initial_state(), kernel_game(game))
buf = np.empty(81, dtype=np.int32)
for policy in (1, 1 | PLAYOUT_AVOID, 1 | PLAYOUT_AVOID | PLAYOUT_CAPTURE):
    uttt_playout(state.copy(), seed_rng(1), policy, buf)
"""


def test_numba_files_the_playout_loops_apart(tmp_path: Path) -> None:
    # Fails if numba stops naming cache files after the kernel's qualified name: the loops
    # would share files again (see the module's docstring).
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, check=True, timeout=600)
    indexes = sorted(path.name for path in tmp_path.rglob("uttt.*playout*.nbi"))
    assert [name.split("-")[0] for name in indexes] == [
        "uttt._playout_avoid",
        "uttt._playout_avoid_take",
        "uttt._playout_plain",
        "uttt.uttt_playout",
    ]

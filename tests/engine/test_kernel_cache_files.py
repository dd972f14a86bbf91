"""numba keeps a cached kernel in files named after its module, qualified name and first line
(``uttt._playout_avoid-636.py311.nbi`` and its numbered ``.nbc``). Closures made by one factory
share those files, and two processes compiling different closures at once can swap their code
(numba numbers a function's compiled versions within its files): while uttt's two playout loops
were closures, the fresh-clone suite failed the plain loop's test (policies 0 and 1), once. So
no kernel is a closure, and each has its own files."""

from __future__ import annotations

import importlib
import pkgutil

from numba.core.dispatcher import Dispatcher

import engine.kernels


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


def test_no_kernel_is_a_closure() -> None:
    kernels = _kernels()
    assert "engine.kernels.uttt._playout_avoid" in kernels  # the walk sees the kernels
    closures = sorted(
        name for name, kernel in kernels.items() if "<locals>" in kernel.py_func.__qualname__
    )
    assert closures == []


def test_each_kernel_has_its_own_cache_files() -> None:
    # the files' base name: module, qualified name (numba drops "<locals>") and first line
    bases: dict[tuple[str, str, int], list[str]] = {}
    for name, kernel in _kernels().items():
        code = kernel.py_func.__code__
        key = (
            kernel.py_func.__module__,
            kernel.py_func.__qualname__.replace("<locals>.", ""),
            code.co_firstlineno,
        )
        bases.setdefault(key, []).append(name)
    shared = {key: names for key, names in bases.items() if len(names) > 1}
    assert shared == {}

"""In-process A/B of the compiled searches of several builds of the engine: each build's
``engine/`` (from a git ref or a directory) is copied under its own package name into a
temporary directory, and the builds search alternately in one process, search by search, with
the same seed in a round (the order reversed every other round), from the opening and from
the middle position of bench/mcts_speed.py. Prints iterations per CPU second: each build's
median and best round, and against the first build the ratio of the medians, of the best
rounds and the median (and quartiles) of the paired ratios of a round. A round whose builds
return different searches (move, iterations, value, visits) is reported: a speed-only change
must return the same ones. With ``--time-ms`` the searches have a time budget instead and the
rates are iterations per wall-clock second of the whole ``search`` call, as ``noughts bench``
times them (such searches may differ, and are not compared).

A build is kept under the user's cache directory (``mcts_ab/``), keyed by its engine's content
and package name, with the kernels numba compiled for it: a later run of the same build loads
them instead of compiling again (15-45 s a build). ``--fresh`` builds in a temporary directory.

    nice -n 5 .venv/bin/python bench/mcts_ab.py main HEAD [--rounds 30] [--iterations 150000]
    nice -n 5 .venv/bin/python bench/mcts_ab.py main HEAD --time-ms 200
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from arguments import iterations, positive_int, time_budget
from mcts_speed import POSITIONS

ROOT = Path(__file__).resolve().parent.parent
# game -> the middle-game moves of bench/mcts_speed.py (3x3 is proven too soon to time)
MIDDLES = {game: moves for _, game, _, moves in POSITIONS if game != "tictactoe"}
WHERE = ("opening", "middle")
_IMPORTS = re.compile(r"\b(from engine\b|import engine\b|engine\.)")


def build(source: str, name: str, into: Path) -> None:
    """``engine/`` of ``source`` (a git ref, or a directory holding engine/) as package ``name``."""
    target = into / name
    if Path(source, "engine").is_dir():
        shutil.copytree(
            Path(source, "engine"), target, ignore=shutil.ignore_patterns("__pycache__")
        )
    else:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", source, "engine"], check=True, capture_output=True
        ).stdout
        unpacked = into / f"{name}.src"
        unpacked.mkdir()
        subprocess.run(["tar", "-x", "-C", str(unpacked)], input=archive, check=True)
        shutil.move(unpacked / "engine", target)
    for path in target.rglob("*.py"):
        text = path.read_text()
        path.write_text(_IMPORTS.sub(lambda m: m.group(0).replace("engine", name), text))


def build_key(source: str, name: str) -> str:
    """What a build's copy depends on: its engine's content (a directory's files, or a ref's
    tree id), the package name and the renaming rule."""
    digest = hashlib.sha256(f"{name}\0{_IMPORTS.pattern}\0".encode())
    engine = Path(source, "engine")
    if engine.is_dir():
        for path in sorted(engine.rglob("*.py")):
            digest.update(f"{path.relative_to(engine)}\0".encode() + path.read_bytes() + b"\0")
    else:
        tree = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", f"{source}:engine"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        digest.update(f"tree {tree}".encode())
    return digest.hexdigest()[:20]


def cached_build(source: str, name: str) -> Path:
    """The directory holding ``build(source, name)`` in the cache, built there on first use
    (in a staging directory renamed into place, so a run stopped half-way leaves nothing)."""
    from platformdirs import user_cache_dir

    cache = Path(user_cache_dir("noughts", appauthor=False)) / "mcts_ab"
    where = cache / f"{name}-{build_key(source, name)}"
    if (where / name / "__init__.py").is_file():
        return where
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{where.name}-", dir=cache))
    build(source, name, staging)
    try:
        staging.rename(where)
    except OSError:  # another run built it first
        shutil.rmtree(staging, ignore_errors=True)
    return where


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "builds", nargs="+", help="git refs or directories holding engine/; the first is the base"
    )
    parser.add_argument("--rounds", type=positive_int, default=30, help="rounds (default 30)")
    parser.add_argument(
        "--iterations",
        type=iterations,
        default=150_000,
        help="iterations a search (default 150000)",
    )
    parser.add_argument(
        "--time-ms",
        type=time_budget,
        default=None,
        help="a time budget instead: iterations per wall-clock second (as noughts bench)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="build in a temporary directory (every kernel compiled), not in the cache",
    )
    parser.add_argument("--game", default="uttt", choices=sorted(MIDDLES), help="default uttt")
    parser.add_argument("--algorithm", default="mcts", help="mcts, uct or flat (default mcts)")
    args = parser.parse_args()
    names = [f"build{i}" for i in range(len(args.builds))]
    fresh = Path(tempfile.mkdtemp(prefix="mcts_ab_")) if args.fresh else None
    for source, name in zip(args.builds, names, strict=True):
        try:
            if fresh is not None:
                build(source, name, fresh)
            else:
                where = cached_build(source, name)
                print(f"{name}: {where}", flush=True)
                sys.path.insert(0, str(where))
        except subprocess.CalledProcessError:
            parser.error(f"{source!r} is neither a directory holding engine/ nor a git ref")
    if fresh is not None:
        sys.path.insert(0, str(fresh))
    mods: list[ModuleType] = [importlib.import_module(name) for name in names]
    positions: dict[tuple[str, str], Any] = {}
    for mod in mods:
        game = mod.make_game(args.game)
        positions[mod.__name__, "opening"] = mod.replay(game, [])
        positions[mod.__name__, "middle"] = mod.replay(game, MIDDLES[args.game])
        budget = mod.Budget(iterations=2000)
        mod.search(positions[mod.__name__, "opening"], args.algorithm, budget, seed=0)  # compile

    wall = args.time_ms is not None
    clock = time.perf_counter if wall else time.process_time

    def run(mod: ModuleType, where: str, seed: int) -> tuple[float, str]:
        if wall:
            budget = mod.Budget(time_ms=args.time_ms)
        else:
            budget = mod.Budget(iterations=args.iterations)
        start = clock()
        result = mod.search(positions[mod.__name__, where], args.algorithm, budget, seed=seed)
        elapsed = clock() - start
        found = (result.action, result.iterations, result.value, result.visits, result.proven)
        return result.iterations / elapsed, "" if wall else repr(found)

    print("builds:", ", ".join(f"{n} = {s}" for n, s in zip(names, args.builds, strict=True)))
    unit = f"wall-clock second, {args.time_ms:g} ms searches" if wall else "CPU second"
    print(f"iterations per {unit}; 1-minute load {os.getloadavg()[0]:.2f} at the start", flush=True)
    rates: dict[tuple[str, str], list[float]] = {(n, w): [] for n in names for w in WHERE}
    for k in range(args.rounds):
        for where in WHERE:
            found = set()
            for mod in mods if k % 2 == 0 else mods[::-1]:
                rate, result = run(mod, where, 1000 + k)
                rates[mod.__name__, where].append(rate)
                found.add(result)
            if len(found) > 1:
                print(f"round {k + 1}, {where}: the builds' searches differ", flush=True)
    print(f"1-minute load {os.getloadavg()[0]:.2f} at the end")
    for where in WHERE:
        base = rates[names[0], where]
        for name in names:
            r = rates[name, where]
            ratios = [x / y - 1 for x, y in zip(r, base, strict=True)]
            medians = statistics.median(r) / statistics.median(base) - 1
            quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [0.0, 0.0, 0.0]
            print(
                f"{where:8} {name:7} median {statistics.median(r):11,.0f} best {max(r):11,.0f}"
                f"  against {names[0]}: median {medians:+.2%}"
                f" best {max(r) / max(base) - 1:+.2%} paired {statistics.median(ratios):+.2%}"
                f" (quartiles {quartiles[0]:+.2%}..{quartiles[2]:+.2%})"
            )
    if fresh is not None:
        shutil.rmtree(fresh, ignore_errors=True)


if __name__ == "__main__":
    main()

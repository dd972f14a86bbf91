"""Nodes per CPU second of the gomoku `alphabeta` on fixed positions with a node budget: a
load-insensitive speed figure (the CPU time of this process, not the wall time), for this
build or an earlier one (``--tree``: a build's extracted tree, e.g. the arena's cache
``~/.cache/noughts/engines/COMMIT``).

    .venv/bin/python bench/gomoku_nodes.py [--nodes 20000] [--positions 12] [--runs 3]
        [--options vct=false,defence=false] [--tree DIR]

The positions: ``--positions`` seeded random clusters of 6 to 28 stones within 4 rows and
columns of the centre, X and O alternating, none with a four or a win on the board (so the
search has work to do); the same for every build. Each search is a fresh ``engine.search``.
Prints, per position, the median over ``--runs`` of nodes / CPU second, then the median over
positions and the rate over the positions searched to the node budget (the others end early
on a forced win found at the root: a handful of nodes).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from arguments import iterations, positive_int

N, K = 15, 5
RADIUS = 4


def positions(count: int) -> list[list[int]]:
    """``count`` move lists (actions row * 15 + col), the same on every build."""
    out: list[list[int]] = []
    rng = random.Random(1414)
    box = [r * N + c for r in range(7 - RADIUS, 8 + RADIUS) for c in range(7 - RADIUS, 8 + RADIUS)]
    while len(out) < count:
        stones = 6 + 2 * (len(out) % 12)
        moves = rng.sample(box, stones)
        if not _has_four(moves):
            out.append(moves)
    return out


def _has_four(moves: list[int]) -> bool:
    """Does a window of 5 hold 4 stones of one player and none of the other?"""
    owner = {m: i & 1 for i, m in enumerate(moves)}
    for r in range(N):
        for c in range(N):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + i * dr, c + i * dc) for i in range(K)]
                if not all(0 <= y < N and 0 <= x < N for y, x in cells):
                    continue
                seen = [owner.get(y * N + x) for y, x in cells]
                for p in (0, 1):
                    if seen.count(p) >= K - 1 and (1 - p) not in seen:
                        return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=iterations, default=20_000)
    parser.add_argument("--positions", type=positive_int, default=12)
    parser.add_argument("--runs", type=positive_int, default=3)
    parser.add_argument("--options", default="", help="alphabeta options, NAME=VALUE,...")
    parser.add_argument("--tree", help="import the engine from this build's tree")
    args = parser.parse_args()
    root = Path(args.tree) if args.tree else Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    import engine

    options: dict[str, Any] = {}
    for item in filter(None, args.options.split(",")):
        name, eq, value = item.partition("=")
        if not eq:
            parser.error(f"--options: NAME=VALUE,..., not {item!r}")
        options[name] = {"true": True, "false": False}.get(value, value)
        if value.lstrip("-").isdigit():  # an integer option (width)
            options[name] = int(value)
    try:
        engine.parse_options(engine.AlphaBetaOptions, options, "alphabeta")
    except engine.EngineError as exc:
        parser.error(f"--options: {exc}")
    engine.warm_up([("gomoku", "alphabeta")])
    game = engine.make_game("gomoku")
    rates = []
    full = []  # (nodes, CPU) of the searches that used the whole budget
    print(f"build {root}  nodes {args.nodes}  options {options or '-'}")
    print(f"{'pos':>3} {'stones':>6} {'nodes':>8} {'depth':>5} {'CPU ms':>8} {'nodes/CPU-s':>12}")
    for index, moves in enumerate(positions(args.positions)):
        state = engine.replay(game, moves)
        runs = []
        for run in range(args.runs):
            cpu = time.process_time()
            result = engine.search(
                state, "alphabeta", engine.Budget(iterations=args.nodes), seed=run, options=options
            )
            cpu = time.process_time() - cpu
            runs.append((result.iterations / max(cpu, 1e-9), result.iterations, cpu, result.depth))
        rate, nodes, cpu, depth = sorted(runs)[len(runs) // 2]
        rates.append(rate)
        if nodes >= args.nodes:
            full.append((nodes, cpu))
        print(f"{index:>3} {len(moves):>6} {nodes:>8} {depth:>5} {cpu * 1e3:>8.1f} {rate:>12,.0f}")
    print(f"median nodes/CPU-s: {statistics.median(rates):,.0f}")
    if full:
        rate = sum(n for n, _ in full) / sum(c for _, c in full)
        print(f"positions searched to the node budget: {len(full)}, nodes/CPU-s {rate:,.0f}")


if __name__ == "__main__":
    main()

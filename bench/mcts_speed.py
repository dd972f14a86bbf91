"""Iterations per second of the compiled Monte Carlo searches, per game, from the opening and
from a middle-game position (median of 5 runs of a fixed time budget each), per second of
wall-clock time and per second of this process's CPU time (the per-core figure when other
work shares the machine).

    .venv/bin/python bench/mcts_speed.py [--budget-ms 200] [--runs 5] [--algorithms mcts,uct,flat]

A search that proves its root stops early (3x3 from the opening is a proven draw after ~17,000
iterations); its rate is still iterations / time spent.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from arguments import positive_int, time_budget

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine  # noqa: E402

# (label, game name, params, middle-game moves)
POSITIONS = [
    ("3x3", "tictactoe", {}, [4, 0]),
    ("5x5 k=4", "5x5", {}, [19, 18, 24, 6, 23, 21]),
    ("uttt", "uttt", {}, [30, 29, 23, 52, 64, 9, 7, 68, 48, 28, 17, 80, 79, 67, 38, 21]),
    ("gomoku", "gomoku", {}, [67, 95, 68, 159, 139, 127, 114, 143, 140, 124, 158, 64]),
]


def rate(algorithm: str, state, budget_ms: float, seed: int) -> tuple[float, float, int]:  # noqa: ANN001
    cpu = time.process_time()
    start = time.perf_counter()
    result = engine.search(state, algorithm, engine.Budget(time_ms=budget_ms), seed=seed)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    return result.iterations / elapsed, result.iterations / max(cpu, 1e-9), result.iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-ms", type=time_budget, default=200.0)
    parser.add_argument("--runs", type=positive_int, default=5)
    parser.add_argument("--algorithms", default="mcts,uct,flat")
    args = parser.parse_args()
    engine.warm_up([(name, a) for _, name, _, _ in POSITIONS for a in args.algorithms.split(",")])
    print(
        f"{'game':<9} {'position':<8} {'search':<6} {'wall it/s':>11} {'CPU it/s':>11} {'its':>9}"
    )
    for label, name, params, middle in POSITIONS:
        game = engine.make_game(name, **params)
        for where, moves in (("opening", []), ("middle", middle)):
            state = engine.replay(game, moves)
            for algorithm in args.algorithms.split(","):
                runs = [rate(algorithm, state, args.budget_ms, seed) for seed in range(args.runs)]
                wall = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                its = statistics.median(r[2] for r in runs)
                row = f"{label:<9} {where:<8} {algorithm:<6} {wall:>11,.0f} {cpu:>11,.0f}"
                print(f"{row} {its:>9,.0f}")


if __name__ == "__main__":
    main()

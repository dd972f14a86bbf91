"""The engine queue's own overhead: one ``noughts engine-worker`` on a Redis Streams queue
of its own, searches sent one after another through ``RemoteEngine`` (what a node uses
with ``--engine queue``), and the time each took beyond its search's own ``elapsed_ms``
(submit, pick-up, reply) and beyond its budget. Figures, not a test.

    python bench/queue_overhead.py --bus redis://127.0.0.1:6379/0 --budget-ms 50 --searches 100
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from server.pool import SearchRequest  # noqa: E402
from server.remote_engine import RemoteEngine  # noqa: E402


def _at(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


async def run(args: argparse.Namespace) -> None:
    prefix = "qb" + secrets.token_hex(4)
    worker = subprocess.Popen(
        [sys.executable, "-m", "server.engine_worker", "--bus", args.bus, "--prefix", prefix,
         "--log-level", "WARNING"],
        cwd=ROOT,
    )  # fmt: skip
    engine = RemoteEngine(args.bus, prefix=prefix, node="bench")
    await engine.start()
    try:
        while await engine.refresh() < 1:  # the worker warmed up and beats
            await asyncio.sleep(0.1)
        beyond_budget, beyond_search = [], []
        for seed in range(args.searches):
            request = SearchRequest(
                game="gomoku", params={}, actions=(112, 113), budget_ms=args.budget_ms, seed=seed
            )
            sent = time.perf_counter()
            result = await engine.search(request)
            took = (time.perf_counter() - sent) * 1000
            beyond_budget.append(took - args.budget_ms)
            beyond_search.append(took - result.elapsed_ms)
        print(
            f"{args.searches} searches of {args.budget_ms:g} ms: beyond the search's own time "
            f"p50 {_at(beyond_search, 0.5)} p99 {_at(beyond_search, 0.99)} ms; beyond the "
            f"budget p50 {_at(beyond_budget, 0.5)} p99 {_at(beyond_budget, 0.99)} ms"
        )
    finally:
        await engine.close()
        worker.terminate()
        worker.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bus", default="redis://127.0.0.1:6379/0", help="Redis URL")
    parser.add_argument("--budget-ms", type=float, default=50.0)
    parser.add_argument("--searches", type=int, default=100)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

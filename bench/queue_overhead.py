"""The engine queue's own overhead: one ``noughts engine-worker`` on a Redis Streams queue
of its own, searches sent one after another through ``RemoteEngine`` (what a node uses
with ``--engine queue``), and the time each took beyond its search's own ``elapsed_ms``
(submit, pick-up, reply) and beyond its budget. Figures, not a test.

    python bench/queue_overhead.py --bus redis://127.0.0.1:6379/0 --budget-ms 50 --searches 100

``--split`` also prints where that time goes, from timestamps taken on both sides (the
worker is then this script's own subclass of the real one, which notes when it picked each
job, started and ended its search, and sent the answer; ``time.perf_counter`` is one clock
for every process on a Linux machine): submit -> picked by the worker -> search start ->
search end -> answer sent -> answer seen by the node -> ``search`` returned.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from arguments import positive_int, time_budget  # noqa: E402
from load import delete_keys  # noqa: E402

from engine.result import SearchResult  # noqa: E402
from engine.search import Searcher  # noqa: E402
from server.engine_worker import Worker  # noqa: E402
from server.pool import SearchRequest  # noqa: E402
from server.remote_engine import RemoteEngine  # noqa: E402


def _at(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


class _StampingSearcher(Searcher):
    def __init__(self, stamps: list[dict[str, Any]]) -> None:
        super().__init__()
        self.stamps = stamps

    def search(self, *args: Any, **kwargs: Any) -> SearchResult:
        self.stamps[-1]["start"] = time.perf_counter()
        try:
            return super().search(*args, **kwargs)
        finally:
            self.stamps[-1]["end"] = time.perf_counter()


class _StampingWorker(Worker):
    """The real worker, noting when each job was picked, searched and answered."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.stamps: list[dict[str, Any]] = []
        self.searcher = _StampingSearcher(self.stamps)

    def step(self) -> None:
        if self.stamps and "sent" not in self.stamps[-1]:
            self.stamps[-1]["sent"] = time.perf_counter()  # the answer goes with this read
        super().step()

    def handle(self, entry_id: bytes, fields: dict[bytes, bytes], spent_ms: float) -> None:
        self.stamps.append({"job": fields[b"job"].decode(), "picked": time.perf_counter()})
        super().handle(entry_id, fields, spent_ms)


def _stamping_worker(bus: str, prefix: str, out: str) -> None:
    worker = _StampingWorker(bus, prefix, "bench")

    def stop(signum: int, frame: Any) -> None:
        worker.stop = True

    signal.signal(signal.SIGTERM, stop)
    worker.run()
    Path(out).write_text(json.dumps(worker.stamps))


class _StampingEngine(RemoteEngine):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: dict[str, float] = {}

    def _settle(self, fields: dict[bytes, bytes]) -> None:
        self.seen[fields[b"job"].decode()] = time.perf_counter()
        super()._settle(fields)


def _print_split(
    rows: list[tuple[float, float]], stamps: list[dict[str, Any]], seen: dict[str, float]
) -> None:
    steps = [
        ("submit -> picked", "submit", "picked"),
        ("picked -> search start", "picked", "start"),
        ("search end -> answer sent", "end", "sent"),
        ("answer sent -> seen by the node", "sent", "seen"),
        ("seen -> search returned", "seen", "returned"),
    ]
    times = [
        {**stamp, "submit": sent, "returned": returned, "seen": seen[stamp["job"]]}
        for (sent, returned), stamp in zip(rows, stamps, strict=True)
    ]
    for label, start, end in steps:
        ms = [(t[end] - t[start]) * 1000 for t in times if start in t and end in t]
        mean = round(sum(ms) / len(ms), 3)
        print(f"  {label:32s} mean {mean} p50 {_at(ms, 0.5)} p99 {_at(ms, 0.99)} ms")


async def run(args: argparse.Namespace) -> None:
    prefix = "qb" + secrets.token_hex(4)
    stamps_file = Path(tempfile.mkdtemp()) / "stamps.json"
    command = [sys.executable, "-m", "server.engine_worker", "--bus", args.bus,
               "--bus-prefix", prefix, "--log-level", "WARNING"]  # fmt: skip
    if args.split:
        command = [sys.executable, __file__, "--bus", args.bus, "--stamping-worker",
                   f"{prefix}:{stamps_file}"]  # fmt: skip
    worker = subprocess.Popen(command, cwd=ROOT)
    engine = _StampingEngine(args.bus, prefix=prefix, node="bench")
    await engine.start()
    rows: list[tuple[float, float]] = []
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
            returned = time.perf_counter()
            rows.append((sent, returned))
            took = (returned - sent) * 1000
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
        delete_keys(args.bus, prefix)
    if args.split:
        _print_split(rows, json.loads(stamps_file.read_text()), engine.seen)
        stamps_file.unlink()
        stamps_file.parent.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bus", default="redis://127.0.0.1:6379/0", help="Redis URL")
    parser.add_argument("--budget-ms", type=time_budget, default=50.0)
    parser.add_argument("--searches", type=positive_int, default=100)
    parser.add_argument("--split", action="store_true", help="where the time goes, step by step")
    parser.add_argument("--stamping-worker", help=argparse.SUPPRESS)  # PREFIX:FILE (--split)
    args = parser.parse_args()
    if args.stamping_worker:
        prefix, _, out = args.stamping_worker.partition(":")
        _stamping_worker(args.bus, prefix, out)
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()

"""`python -m server.engine_worker` (also `noughts engine-worker`): engine workers that take AI
searches from the Redis Streams queue of ``server.remote_engine``, on any machine.

Each worker process is one consumer of the ``workers`` group: it renews its heartbeat
key, claims the pending jobs of workers whose heartbeat has expired (they died), reads
a new job, searches, answers on the asking node's reply stream, and acknowledges the
job. A job is acknowledged only after its answer is written, so a worker killed in
the middle of a search leaves the job pending for another worker to re-run with what
is left of its budget. ``--processes N`` runs N such workers (one per core).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from typing import Any

import msgpack
import redis

from engine.search import Searcher
from engine.warmup import warm_up
from engine.worker import run
from server.remote_engine import (
    GROUP,
    HEARTBEAT_S,
    MAX_REPLIES,
    QUICK_RETRY_MS,
    decode_request,
    jobs_key,
    worker_key,
)

log = logging.getLogger("noughts.engine_worker")


class Worker:
    """One consumer of the jobs stream; ``run`` loops until ``stop`` is set."""

    def __init__(self, url: str, prefix: str, name: str, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.client = redis.Redis.from_url(url)
        self.heartbeat_s = heartbeat_s
        self.prefix = prefix
        self.name = name
        self.stop = False
        self.jobs_done = 0
        self.searcher = Searcher()
        self.alive_until = 0.0  # (monotonic) when this worker's key expires, as last renewed
        self.due = 0.0  # (monotonic) when the next heartbeat and reclaim are due
        # Answers not yet sent: each goes with the read of the next job (``step``).
        self.answers: Any = self.client.pipeline(transaction=False)

    def heartbeat(self, extra_s: float = 0.0, pipe: Any = None) -> None:
        """Renew this worker's key for two heartbeats (plus ``extra_s``, a search's budget),
        now or as part of ``pipe``, a pipeline about to be executed."""
        lifetime_s = 2 * self.heartbeat_s + extra_s
        (pipe or self.client).set(
            worker_key(self.prefix, self.name), b"1", px=int(lifetime_s * 1000)
        )
        self.alive_until = time.monotonic() + lifetime_s

    def ensure_group(self) -> None:
        try:
            self.client.xgroup_create(jobs_key(self.prefix), GROUP, id="0", mkstream=True)
        except redis.ResponseError:
            pass  # BUSYGROUP: it exists

    def run(self) -> None:
        self.ensure_group()
        # Compile (or load from numba's cache) every kernel before taking a job, so that no
        # job's budget pays for it.
        warm_up(progress=lambda what: log.info("engine worker %s warming up: %s", self.name, what))
        self.heartbeat()
        log.info("engine worker %s ready", self.name)
        pause = 0.0  # after a failure of the queue: seconds before the next try
        while not self.stop:
            try:
                self.step()
                pause = 0.0
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                # Redis restarted without its data: the stream and group are gone.
                log.warning("engine worker %s: the jobs' group is gone; creating it", self.name)
                self.ensure_group()
                self.due = 0.0
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                # Redis is down or restarting: try again, backing off up to 5 s. The job in
                # hand, if any, is lost with the queue; the asking node submits it again.
                pause = min(5.0, max(0.1, 2 * pause))
                log.warning(
                    "engine worker %s: lost the queue (%s); trying again in %.1f s",
                    self.name,
                    exc,
                    pause,
                )
                time.sleep(pause)
                self.due = 0.0
        with contextlib.suppress(redis.RedisError):
            self.answers.execute()  # stopped during a search: its answer
            self.client.delete(worker_key(self.prefix, self.name))

    def step(self) -> None:
        """Heartbeat and reclaim when due (every half heartbeat, not around every job); then
        wait for a job until the next heartbeat is due, and run it. A job costs one round
        trip to Redis: the answer to the last one (written, acknowledged and deleted, in
        that order) goes in one pipeline with the blocking read of the next, so a worker
        that has just searched is woken once, by its next job, not first by the reply to
        its answer (on a busy machine each wake-up of a process that has used its share of
        the CPU may wait milliseconds for it)."""
        if time.monotonic() >= self.due:
            self.reclaim()
            self.due = time.monotonic() + self.heartbeat_s / 2
        self.answers.xreadgroup(
            GROUP,
            self.name,
            {jobs_key(self.prefix): ">"},
            count=1,
            block=max(1, int((self.due - time.monotonic()) * 1000)),
        )
        entries: Any = self.answers.execute()[-1]
        for _, messages in entries or []:
            for entry_id, fields in messages:
                self.handle(entry_id, fields, spent_ms=0.0)

    def reclaim(self) -> None:
        """Renew this worker's heartbeat and take over the pending jobs of consumers whose
        heartbeat has expired: one round trip to Redis (two if other consumers have jobs
        pending), so that a job arriving meanwhile waits little. The answer not yet sent,
        if any, goes first in it: it does not wait for the re-run of a dead worker's job."""
        beat = self.answers
        self.heartbeat(pipe=beat)
        beat.xpending_range(jobs_key(self.prefix), GROUP, min="-", max="+", count=100)
        pending: Any = beat.execute()[-1]
        others = [item for item in pending if item["consumer"].decode() != self.name]
        if not others:
            return
        check = self.client.pipeline(transaction=False)
        for item in others:
            check.exists(worker_key(self.prefix, item["consumer"].decode()))
        alive = check.execute()
        for item, owner_alive in zip(others, alive, strict=True):
            if owner_alive:
                continue
            owner = item["consumer"].decode()
            claimed: Any = self.client.xclaim(
                jobs_key(self.prefix),
                GROUP,
                self.name,
                min_idle_time=0,
                message_ids=[item["message_id"]],
            )
            for entry_id, fields in claimed:
                if fields:
                    log.warning("re-running job %s of dead worker %s", entry_id, owner)
                    self.handle(entry_id, fields, spent_ms=float(item["time_since_delivered"]))
                    self.answers.execute()

    def handle(self, entry_id: bytes, fields: dict[bytes, bytes], spent_ms: float) -> None:
        request = decode_request(fields[b"request"])
        budget = request.budget_ms
        if budget is not None:
            budget = max(QUICK_RETRY_MS, budget - spent_ms)
        # The heartbeat outlives the search: a long search is not taken for a death.
        search_s = (budget or 60_000.0) / 1000
        if time.monotonic() + search_s + self.heartbeat_s > self.alive_until:
            self.heartbeat(search_s)
        reply: dict[str, Any]
        try:
            retry = replace(request, budget_ms=budget)
            reply = {"result": run(self.searcher, retry.for_worker()).to_dict()}
        except Exception as exc:  # reported to the asking node; the worker carries on
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        # Queued for the next round trip, in this order: the answer is written before the
        # job is acknowledged.
        self.answers.xadd(
            fields[b"reply"],
            {"job": fields[b"job"], "reply": msgpack.packb(reply, use_bin_type=True)},
            maxlen=MAX_REPLIES,
            approximate=True,
        )
        self.answers.xack(jobs_key(self.prefix), GROUP, entry_id)
        self.answers.xdel(jobs_key(self.prefix), entry_id)
        self.jobs_done += 1


def _work(url: str, prefix: str, name: str, heartbeat_s: float) -> None:
    worker = Worker(url, prefix, name, heartbeat_s)

    def stop(signum: int, frame: Any) -> None:
        worker.stop = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        worker.run()
    except redis.RedisError as exc:
        log.error("engine worker %s: the queue failed: %s", name, exc)
        sys.exit(1)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="noughts engine-worker",
        description="Run engine workers that take AI searches from a noughts cluster's Redis "
        "queue. Every option can also be set as NOUGHTS_<OPTION>.",
    )
    parser.add_argument(
        "--bus",
        default=os.environ.get("NOUGHTS_BUS"),
        help="the cluster's Redis, redis://HOST:PORT/N ($NOUGHTS_BUS; required)",
    )
    parser.add_argument(
        "--prefix",
        default=os.environ.get("NOUGHTS_PREFIX", "noughts"),
        help="key prefix the cluster uses in Redis (default: noughts; $NOUGHTS_PREFIX)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=int(os.environ.get("NOUGHTS_PROCESSES", "1")),
        help="worker processes, one search each at a time (default: 1; $NOUGHTS_PROCESSES)",
    )
    parser.add_argument(
        "--heartbeat-s",
        type=float,
        default=float(os.environ.get("NOUGHTS_HEARTBEAT_S", HEARTBEAT_S)),
        help="seconds between heartbeats; a worker silent for two is taken for dead and its "
        f"jobs are re-run (default: {HEARTBEAT_S:g}; $NOUGHTS_HEARTBEAT_S)",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("NOUGHTS_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity (default: INFO; $NOUGHTS_LOG_LEVEL)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.bus:
        parser.error("--bus redis://HOST:PORT/N is required (or set NOUGHTS_BUS)")
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s")
    try:
        redis.Redis.from_url(args.bus).ping()
    except (redis.RedisError, ValueError) as exc:
        print(f"noughts engine-worker: cannot reach {args.bus}: {exc}", file=sys.stderr)
        return 1
    base = f"{socket.gethostname()}-{os.getpid()}"
    if args.processes == 1:
        _work(args.bus, args.prefix, base, args.heartbeat_s)
        return 0
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_work, args=(args.bus, args.prefix, f"{base}-{i}", args.heartbeat_s))
        for i in range(args.processes)
    ]
    for process in processes:
        process.start()
    try:
        for process in processes:
            process.join()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

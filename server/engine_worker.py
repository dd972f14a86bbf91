"""`python -m server.engine_worker` (also `noughts engine-worker`): engine workers that take AI
searches from the Redis Streams queue of ``server.remote_engine``, on any machine.

Each worker process is one consumer of the ``workers`` group: it renews its heartbeat
key, claims the pending jobs of workers whose heartbeat has expired (they died), reads
a new job, searches, answers on the asking node's reply stream, and acknowledges the
job. A job is acknowledged only after its answer is written, so a worker killed in
the middle of a search leaves the job pending for another worker to re-run with what
is left of its budget. ``--processes N`` runs N such workers (one per core), kept running
by this process as ``noughts serve --processes`` keeps its nodes (server/supervisor.py):
a worker that dies is started again, and they all end with it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from typing import Any

import msgpack
import redis

from engine.command_line import CommandParser
from engine.search import Searcher
from engine.warmup import warm_up
from engine.worker import run
from server.bus import blocking_redis_client
from server.logs import configure
from server.remote_engine import (
    GROUP,
    HEARTBEAT_S,
    MAX_REPLIES,
    QUICK_RETRY_MS,
    REPLIES_TTL_S,
    decode_request,
    jobs_key,
    worker_key,
)
from server.settings import MOST_PROCESSES, ServerSettings, bounded, bus_url
from server.supervisor import PARENT_ENV, die_with_supervisor, exit_text, next_pause
from server.urls import redacted_url

log = logging.getLogger("noughts.engine_worker")

BUS_TIMEOUT_S = ServerSettings().bus_timeout_s  # noughts serve's --bus-timeout-s default


class Worker:
    """One consumer of the jobs stream; ``run`` loops until ``stop`` is set."""

    def __init__(
        self,
        url: str,
        prefix: str,
        name: str,
        heartbeat_s: float = HEARTBEAT_S,
        timeout_s: float = BUS_TIMEOUT_S,
    ) -> None:
        # Each command gives up after timeout_s (--bus-timeout-s); the read of the next job
        # blocks up to half a heartbeat (``step``) on top, on a client of its own.
        self.client = blocking_redis_client(url, timeout_s=timeout_s)
        reader = blocking_redis_client(url, timeout_s=timeout_s + heartbeat_s / 2)
        self.heartbeat_s = heartbeat_s
        self.prefix = prefix
        self.name = name
        self.stop = False
        self.jobs_done = 0
        self.searcher = Searcher()
        self.alive_until = 0.0  # (monotonic) when this worker's key expires, as last renewed
        self.due = 0.0  # (monotonic) when the next heartbeat and reclaim are due
        # Answers not yet sent: each goes with the read of the next job (``step``).
        self.answers: Any = reader.pipeline(transaction=False)

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
        regroup = False  # the jobs' group is to be made again
        while not self.stop:
            try:
                if regroup:
                    self.ensure_group()
                    regroup = False
                self.step()
                if pause:
                    log.info("engine worker %s: the queue answers again", self.name)
                pause = 0.0
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                # Redis restarted without its data: the stream and group are gone.
                log.warning("engine worker %s: the jobs' group is gone; creating it", self.name)
                regroup = True
                self.due = 0.0
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                # Redis is down, restarting, stalled, or the connection died unseen (timed
                # out: --bus-timeout-s): said once, then tried again on a new connection,
                # backing off up to 5 s. The job in hand, if any, is lost with the queue;
                # the asking node submits it again.
                if not pause:
                    log.warning(
                        "engine worker %s: lost the queue (%s); trying again until it answers",
                        self.name,
                        exc,
                    )
                pause = min(5.0, max(0.1, 2 * pause))
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
        self.answers.pexpire(fields[b"reply"], int(REPLIES_TTL_S * 1000))
        self.answers.xack(jobs_key(self.prefix), GROUP, entry_id)
        self.answers.xdel(jobs_key(self.prefix), entry_id)
        self.jobs_done += 1


def _work(args: argparse.Namespace) -> None:
    """One worker, named after its host and pid (a worker started again is a new consumer:
    the jobs its predecessor left pending are re-run once its heartbeat expires). A
    process of its own (--processes) logs as its supervisor does."""
    configure(args.log_level, args.log_format)
    die_with_supervisor()
    url, prefix, heartbeat_s = args.bus, args.prefix, args.heartbeat_s
    name = f"{socket.gethostname()}-{os.getpid()}"
    worker = Worker(url, prefix, name, heartbeat_s, args.bus_timeout_s)

    def stop(signum: int, frame: Any) -> None:
        worker.stop = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        worker.run()
    except redis.RedisError as exc:
        log.error("engine worker %s: the queue failed: %s", name, exc)
        sys.exit(1)


def _supervise(args: argparse.Namespace) -> int:
    """``--processes N``: N workers, each started again when it dies (after the pause of
    ``next_pause``); SIGTERM or SIGINT stops them all."""
    os.environ[PARENT_ENV] = str(os.getpid())  # (read by each worker: die_with_supervisor)
    context = multiprocessing.get_context("spawn")
    stopping = False
    processes: dict[int, Any] = {}

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for process in processes.values():
            if process.exitcode is None:
                process.terminate()

    def start(index: int) -> None:
        process = context.Process(target=_work, args=(args,))
        process.start()
        processes[index] = process
        started[index] = time.monotonic()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    started: dict[int, float] = {}
    pauses: dict[int, float | None] = dict.fromkeys(range(args.processes))
    for index in range(args.processes):
        start(index)
    while not stopping:
        multiprocessing.connection.wait([p.sentinel for p in processes.values()], timeout=1.0)
        for index, process in list(processes.items()):
            if process.exitcode is None or stopping:
                continue
            pause = pauses[index] = next_pause(pauses[index], time.monotonic() - started[index])
            log.warning(
                "engine worker (pid %d) %s; starting it again in %g s",
                process.pid, exit_text(process.exitcode), pause,
            )  # fmt: skip
            time.sleep(pause)
            if not stopping:
                start(index)
    for process in processes.values():
        process.join()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="noughts engine-worker",
        description="Run engine workers that take AI searches from a noughts cluster's Redis "
        "queue. Every option can also be set as NOUGHTS_<OPTION>.",
    )
    parser.add_argument(
        "--bus",
        type=bus_url,
        default=os.environ.get("NOUGHTS_BUS"),
        help="the cluster's Redis, redis://HOST:PORT/N ($NOUGHTS_BUS; required)",
    )
    # The prefix is noughts serve's --bus-prefix ($NOUGHTS_BUS_PREFIX: one environment
    # for both); --prefix and $NOUGHTS_PREFIX, its first names, still work.
    parser.add_argument(
        "--bus-prefix",
        "--prefix",
        dest="prefix",
        default=os.environ.get("NOUGHTS_BUS_PREFIX", os.environ.get("NOUGHTS_PREFIX", "noughts")),
        help="key prefix the cluster uses in Redis, as noughts serve --bus-prefix (default: "
        "noughts; $NOUGHTS_BUS_PREFIX)",
    )
    # Defaults from the environment as strings: argparse converts them as it does the
    # command line's, so a bad value is a usage error naming the option, not a traceback.
    parser.add_argument(
        "--processes",
        type=bounded(int, 1, MOST_PROCESSES, positive=False),
        default=os.environ.get("NOUGHTS_PROCESSES", "1"),
        help="worker processes, one search each at a time (default: 1, at most "
        f"{MOST_PROCESSES}; $NOUGHTS_PROCESSES)",
    )
    parser.add_argument(
        "--heartbeat-s",
        type=bounded(float, 0, None, positive=True),
        default=os.environ.get("NOUGHTS_HEARTBEAT_S", str(HEARTBEAT_S)),
        help="seconds between heartbeats; a worker silent for two is taken for dead and its "
        f"jobs are re-run (default: {HEARTBEAT_S:g}; $NOUGHTS_HEARTBEAT_S)",
    )
    parser.add_argument(
        "--bus-timeout-s",
        type=bounded(float, 0, None, positive=True),
        default=os.environ.get("NOUGHTS_BUS_TIMEOUT_S", str(BUS_TIMEOUT_S)),
        help="seconds a command to the queue's Redis may take to connect, and again to be "
        "answered (the read of the next job: its block on top), as noughts serve's; then it "
        "fails, and the worker tries again on a new connection until Redis answers "
        f"(default: {BUS_TIMEOUT_S:g}; $NOUGHTS_BUS_TIMEOUT_S)",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("NOUGHTS_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity (default: INFO; $NOUGHTS_LOG_LEVEL)",
    )
    parser.add_argument(
        "--log-format",
        default=os.environ.get("NOUGHTS_LOG_FORMAT", "text"),
        choices=["text", "json"],
        help="text, or one JSON object a line for log collectors, as noughts serve's "
        "(default: text; $NOUGHTS_LOG_FORMAT)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.bus:
        parser.error("--bus redis://HOST:PORT/N is required (or set NOUGHTS_BUS)")
    configure(args.log_level, args.log_format)
    try:
        blocking_redis_client(args.bus, timeout_s=args.bus_timeout_s).ping()
    except redis.RedisError as exc:  # (a malformed URL is refused by bus_url)
        print(
            f"noughts engine-worker: cannot reach {redacted_url(args.bus)}: {exc}", file=sys.stderr
        )
        return 1
    if args.processes == 1:
        _work(args)
        return 0
    return _supervise(args)


if __name__ == "__main__":
    sys.exit(main())

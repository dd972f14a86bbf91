"""``noughts serve --processes N``: the N - 1 other nodes of this machine, kept running.

The first process is a node itself and the others' supervisor, as gunicorn's arbiter is its
workers': each other node is ``python -m server`` with the same options on the same port
(SO_REUSEPORT: the kernel spreads new connections over them). A node that dies is logged
and started again after ``PAUSE_S``, a pause that doubles (up to ``PAUSE_MAX_S``) while it
keeps dying within ``YOUNG_S`` of its start (a crash loop). A node that fails before it
listens exits with ``BOOT_ERROR`` (gunicorn's WORKER_BOOT_ERROR); after ``BOOT_TRIES`` such
starts in a row it is not started again (gunicorn halts its arbiter; here the other nodes
go on serving): its cause (an admin port another program holds, say) is not one a pause
mends, and a restart of the server tries again. SIGTERM to the supervisor
drains them all. A node started so dies with its supervisor: on Linux it asks the kernel
for SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``), so a supervisor killed
-9 leaves no node behind, each draining as on SIGTERM. The nodes share the machine's cores
for their engine workers, and each names itself in the log they share.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time

log = logging.getLogger(__name__)

PARENT_ENV = "NOUGHTS_SUPERVISOR_PID"  # set for a supervised node: its supervisor's pid
PAUSE_S = 0.5  # before starting a dead node again
PAUSE_MAX_S = 30.0
YOUNG_S = 10.0  # a node dying younger than this is crash-looping: the pause doubles
BOOT_ERROR = 3  # a supervised node's exit status when it failed before listening
BOOT_TRIES = 3  # starts in a row that fail so, before a node is left stopped


def exit_text(code: int) -> str:
    """A process's end as its ``returncode`` says it: "was killed by SIGKILL", "exited
    with status 1"."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    if code == BOOT_ERROR:
        return f"failed to start (exit status {code})"
    return f"exited with status {code}"


def next_pause(pause: float | None, ran_s: float) -> float:
    """The pause before starting again a process that ran ``ran_s`` and died, after
    ``pause`` before its last start (None: its first death)."""
    if pause is None or ran_s >= YOUNG_S:
        return PAUSE_S
    return min(pause * 2, PAUSE_MAX_S)


def supervised() -> bool:
    """This process is a node another's ``--processes`` started."""
    return PARENT_ENV in os.environ


def engine_workers(processes: int) -> int:
    """Engine workers per node when ``--workers`` is not given: the machine's cores shared
    between its ``processes`` nodes (each takes its share of the connections, and so of
    the AI searches), one at least, and at most what --workers takes (each node is started
    with --workers this many)."""
    from server.settings import MOST_PROCESSES

    return min(MOST_PROCESSES, max(1, (os.cpu_count() or 1) // processes))


def die_with_supervisor() -> None:
    """In a supervised node (``PARENT_ENV`` set): SIGTERM to itself when its supervisor
    dies (Linux's PR_SET_PDEATHSIG), and at once if it has died already."""
    parent = os.environ.get(PARENT_ENV, "")
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1  # <linux/prctl.h>
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("cannot follow the supervisor's end: errno %d", ctypes.get_errno())
        return
    if os.getppid() != int(parent):  # it died before the request
        os.kill(os.getpid(), signal.SIGTERM)


class Nodes:
    """The other nodes of ``--processes N``: ``argv`` for each, by index (1 to N - 1)."""

    def __init__(self, argv: dict[int, list[str]], names: dict[int, str]) -> None:
        self._argv = argv
        self._names = names
        self._processes: dict[int, asyncio.subprocess.Process] = {}
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False

    async def start(self) -> None:
        for index in self._argv:
            self._processes[index] = await self._spawn(index)
            self._watchers.append(asyncio.create_task(self._watch(index)))

    async def _spawn(self, index: int) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *self._argv[index],
            stdout=asyncio.subprocess.DEVNULL,  # its stderr (the log) is this one's
            env={**os.environ, PARENT_ENV: str(os.getpid())},
        )
        log.info("node %s started (pid %d)", self._names[index], process.pid)
        return process

    async def _watch(self, index: int) -> None:
        pause: float | None = None
        failed_boots = 0
        while True:
            process = self._processes[index]
            started = time.monotonic()
            code = await process.wait()
            if self._stopping:
                return
            failed_boots = failed_boots + 1 if code == BOOT_ERROR else 0
            if failed_boots >= BOOT_TRIES:
                log.error(
                    "node %s failed to start %d times in a row (its error above); it is not "
                    "started again: restart the server to try again",
                    self._names[index], failed_boots,
                )  # fmt: skip
                return
            pause = next_pause(pause, time.monotonic() - started)
            log.warning(
                "node %s (pid %d) %s; starting it again in %g s",
                self._names[index], process.pid, exit_text(code), pause,
            )  # fmt: skip
            await asyncio.sleep(pause)
            try:
                self._processes[index] = await self._spawn(index)
            except OSError as exc:  # (no memory, no process slot: the next try waits longer)
                log.error("cannot start node %s: %s", self._names[index], exc)

    async def stop(self) -> None:
        """SIGTERM to each node (they drain as this one does), and wait for their ends."""
        self._stopping = True
        for watcher in self._watchers:
            watcher.cancel()
        for process in self._processes.values():
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
        for process in self._processes.values():
            await process.wait()

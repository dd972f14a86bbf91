"""Stopping a long measurement (`noughts arena`, `noughts bench`): Ctrl-C or SIGTERM stops it,
the command prints what it has measured so far and exits INTERRUPTED (130, as a shell reports a
command ended by SIGINT). And work that cannot be stopped midway (the bot's engine warm-up)
that a Ctrl-C must not wait for (``on_daemon_thread``)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C: 128 + SIGINT


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While the block runs, SIGTERM (kill's default, a container's stop) raises
    KeyboardInterrupt as Ctrl-C does, so that the command stops the same way, with its partial
    result, rather than dying with nothing."""

    def terminated(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def on_daemon_thread(work: Callable[[], T], name: str) -> T:
    """``work()`` on a daemon thread, awaited: cancelled (Ctrl-C), the await ends at once and
    the process may exit without waiting for it. (``asyncio.to_thread``'s executor thread is
    waited for by ``asyncio.run`` and at exit: a Ctrl-C during the bot's engine warm-up, which
    cannot be stopped midway, waited for the whole warm-up, 30 s and more on a cold cache.)"""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def run() -> None:
        try:
            result = work()
        except BaseException as exc:  # told to the awaiting task, as to_thread does
            outcome = functools.partial(done.set_exception, exc)
        else:
            outcome = functools.partial(done.set_result, result)
        with contextlib.suppress(RuntimeError):  # the loop is closed: no one waits
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await done


def ignore_ctrl_c() -> None:
    """A worker process's initializer (or a child's ``preexec_fn``, so that it starts
    ignoring it: arena's git-ref engine): Ctrl-C in a terminal reaches the whole process
    group, and the parent, which stops the workers, is the one to handle it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

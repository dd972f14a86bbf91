"""Stopping a long measurement (`noughts arena`, `noughts bench`): Ctrl-C or SIGTERM stops it,
the command prints what it has measured so far and exits INTERRUPTED (130, as a shell reports a
command ended by SIGINT)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

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


def ignore_ctrl_c() -> None:
    """A worker process's initializer (or a child's ``preexec_fn``, so that it starts
    ignoring it: arena's git-ref engine): Ctrl-C in a terminal reaches the whole process
    group, and the parent, which stops the workers, is the one to handle it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

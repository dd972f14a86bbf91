"""The lock a running server holds on its database, so that a second one is refused.

Two servers on one database file would both run the same games (their sequence numbers
collide, one overwrites the other's seat tokens). So ``noughts serve`` takes an exclusive
``fcntl.flock`` on ``<db path>.lock`` before it opens the database and holds it for its
whole life, the path being the real file's (``lock_path``: symlinks and ``..`` resolved, so
that every path to the file names one lock); the kernel releases it when the process ends,
however it ends (kill -9 included), so a lock is never stale. Once the server listens it
writes one JSON line into that file, ``{"pid": PID, "url": "ws://HOST:PORT"}`` (with
``/SECRET`` after the port for a ``--secret-path`` server: the file is its user's alone, 0600,
and the line is how that user's own commands reach it): a second
``noughts serve`` names the running one in its refusal, and a client (``noughts play``)
finding the lock held reuses the running server instead of starting another. The file stays
empty while the server starts, and the server removes it when it stops, still holding the
lock: a process that opened the file just before takes the lock on a file no longer there,
so a lock is held only once the file locked is still the one at the path (else it is
opened again).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any

from protocol.paths import NoDirectory, is_data_dir
from server.errors import ServerError
from server.urls import without_secret_path


class DatabaseInUse(ServerError):
    """Another server holds the database's lock: ``holder`` says which (its pid and
    address, or that it is still starting); ``pid`` and ``url`` once it listens;
    ``reusable`` False for the server of a command that only reads (it took up none of
    the stored games: --restore-games false), which no other noughts may use. The message
    is for ``noughts serve``; ``noughts migrate`` says its own."""

    def __init__(
        self,
        message: str,
        holder: str,
        pid: int | None = None,
        url: str | None = None,
        reusable: bool = True,
    ) -> None:
        super().__init__(message)
        self.holder = holder
        self.pid = pid
        self.url = url
        self.reusable = reusable


def make_db_directory(db_path: str | os.PathLike[str]) -> None:
    """The directory of a database file (and of its lock), made if it is the user's data
    directory; NoDirectory if any other is missing (protocol.paths.is_data_dir)."""
    parent = Path(db_path).parent
    if parent.is_dir():
        return
    if not is_data_dir(parent):
        raise NoDirectory(db_path)
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # (the client's sessions live here)


def make_db_file(db_path: str | os.PathLike[str]) -> None:
    """A new database file made readable and writable by its owner only (0600), before
    SQLite would make it 0644 less the umask, readable by every user of the machine: it
    holds the players' sessions (their tokens' hashes), names and private games, whose id
    is their invite. SQLite gives its -wal and -shm files the database's mode. An existing
    file keeps the mode its owner gave it."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))


def lock_path(db_path: str | os.PathLike[str]) -> Path:
    """The real file's lock, beside it: every path to one file (a symlink, a relative path
    through ``..``) names the same lock, so two servers cannot each lock a path of their own.
    (A hard link is a second name no path resolves to; it is not caught.)"""
    return Path(f"{os.path.realpath(db_path)}.lock")


class ServerLock:
    """``ServerLock.acquire(db)``: the lock held; ``announce(url)`` once listening;
    ``release()`` at exit."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, db_path: str | os.PathLike[str]) -> ServerLock:
        """Take the lock without waiting; DatabaseInUse naming the holder (pid, url) if
        another server has it, ServerError if the lock file cannot be opened."""
        path = lock_path(db_path)
        try:
            make_db_directory(db_path)
        except NoDirectory as exc:
            raise ServerError(str(exc)) from None
        except OSError as exc:
            raise ServerError(f"cannot open database {db_path}: {exc}") from exc
        while True:
            fd = cls._lock(db_path, path)
            try:
                held = os.fstat(fd)
                current = os.stat(path)
            except FileNotFoundError:  # removed by the server that held it: open it again
                os.close(fd)
                continue
            except OSError as exc:
                os.close(fd)
                raise ServerError(f"cannot lock {path}: {exc.strerror}") from exc
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                break
            os.close(fd)  # removed and made again meanwhile: lock the one there now
        os.ftruncate(fd, 0)  # what a server killed earlier wrote is stale
        return cls(path, fd)

    @staticmethod
    def _lock(db_path: str | os.PathLike[str], path: Path) -> int:
        """The lock file at ``path`` opened and locked (``acquire``'s errors)."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise ServerError(f"cannot open database {db_path}: {path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            if holder.get("url"):
                # (its secret path is not shown: the message may go to a log)
                who = f"pid {holder.get('pid')}, listening on {without_secret_path(holder['url'])}"
            else:
                who = "still starting"
            url = holder.get("url")
            raise DatabaseInUse(
                f"database {db_path} is in use by another noughts server ({who}); "
                "connect to that one, or stop it first",
                who,
                pid=holder.get("pid") if isinstance(holder.get("pid"), int) else None,
                url=url if isinstance(url, str) and url else None,
                reusable=holder.get("reusable") is not False,
            ) from None
        except OSError as exc:
            os.close(fd)
            raise ServerError(f"cannot lock {path}: {exc.strerror}") from exc
        return fd

    def announce(self, url: str, reusable: bool = True) -> None:
        """Write the JSON line naming this server (once it listens); ``reusable`` False: a
        server no other noughts may use (DatabaseInUse.reusable)."""
        if self._fd is None:
            return
        holder: dict[str, Any] = {"pid": os.getpid(), "url": url}
        if not reusable:
            holder["reusable"] = False
        line = json.dumps(holder) + "\n"
        with contextlib.suppress(OSError):  # (made 0600; one left by a killed server may not be)
            os.fchmod(self._fd, 0o600)  # the URL may hold the secret path (--secret-path)
        # Written at offset 0 of the empty file, in one call: a reader sees the whole
        # line or nothing.
        os.pwrite(self._fd, line.encode(), 0)

    def release(self) -> None:
        """Remove the lock file (emptied if it cannot be), then release the lock."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)  # closing the descriptor releases the lock
        self._fd = None


def _read_holder(fd: int) -> dict[str, Any]:
    """What the lock's holder wrote: {"pid", "url"}, or {} while it starts."""
    try:
        text = os.pread(fd, 4096, 0).decode()
        holder = json.loads(text)
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}

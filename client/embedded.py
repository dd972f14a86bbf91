"""Start a server as a child process (`python -m server`) for local play and tools.

The client never imports ``server``: it runs it like any program and connects
to the address the server prints on its first line of output.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import TextIO

from client.terminal import moves_its_cursor
from protocol.paths import NoDirectory, is_data_dir

STARTUP_TIMEOUT_S = 600.0  # the first start compiles the engine's kernels
PROGRESS = "warming up the engine: "  # the server's --progress lines, before its address
REUSED = "noughts server already running on "  # --reuse-running: another server's address


class EmbeddedServerError(Exception):
    pass


def _private(path: str, flags: int) -> int:
    """``open``'s opener for a file made readable by its owner only."""
    return os.open(path, flags, 0o600)


def _without_path(url: str) -> str:
    """The server's address without its secret path (--secret-path), for a status line."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.partition('/')[0]}"


def log_beside(db: Path) -> Path:
    """Where an embedded server on ``db`` logs: beside it (the commands name it when the
    server fails to start)."""
    return db.with_name(db.name + ".server.log")


class StatusLine:
    """One line of status on a terminal, rewritten in place (``\\r``); elsewhere each new
    step on a line of its own. ``done()`` ends it."""

    def __init__(self, stream: TextIO = sys.stderr, prefix: str = "") -> None:
        self.stream = stream
        self.prefix = prefix
        self.tty = moves_its_cursor(stream)  # (on TERM=dumb, \x1b[K is noise)
        self.last_step = ""
        self.shown = False

    def __call__(self, text: str) -> None:
        if self.tty:
            self.stream.write(f"\r\x1b[K{self.prefix}{text}")
            self.shown = True
        else:
            step = text.rsplit(" (", 1)[0]  # without the seconds
            if step == self.last_step:
                return
            self.last_step = step
            self.stream.write(f"{self.prefix}{text}\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


class EmbeddedServer:
    """``async with EmbeddedServer(db) as url:`` runs a private server on a free port of
    127.0.0.1, reached at the secret path of ``url`` only (``serve --secret-path``).

    ``warm``: the (game, algorithm) pairs to have compiled before the server listens (the
    others are compiled in the background); None: every one. While it starts, ``status``
    gets a line a second saying what it waits for and for how long. ``keep_log=False`` (a
    command that only reads): a ``log_path`` it made is removed when it stops, unless the
    server failed to start (the error names it); the server removes its database's lock
    itself when it stops. ``reads_only`` (games, replay, export) also starts it with
    ``--mark-quarantined false``: a game whose rows cannot be read is left as it is, not
    marked quarantined in the file; and ``--restore-games false``: the open and live games
    stored are not taken up, so none is ended on time, abandoned or moved by its AI while
    the command reads (a running server reused keeps its own policy and games)."""

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        *,
        workers: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
        warm: list[tuple[str, str]] | None = None,
        status: StatusLine | None = None,
        keep_log: bool = True,
        reads_only: bool = False,
    ) -> None:
        self.db = db
        self.workers = workers
        self.log_path = Path(log_path) if log_path else None
        self.warm = warm
        self.status = status
        self.keep_log = keep_log
        self.reads_only = reads_only
        self.made_log = False  # ``log_path`` was made by this server's start
        self.process: asyncio.subprocess.Process | None = None
        self.url: str | None = None
        self.reused = False  # True: the server of another noughts on the same database

    async def start(self) -> str:
        args = [
            sys.executable,
            "-m",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--log-level",
            "WARNING",
            "--progress",
            "true",
            # A server already on this database (another noughts play) is used, not fought.
            "--reuse-running",
            "true",
            # Only this user may connect (other users of the machine reach 127.0.0.1 too):
            # the server makes a secret path and says it on stdout, a pipe to us, and in
            # the database's lock file (0600), where a reused server's address comes from.
            "--secret-path",
            "true",
        ]
        if self.reads_only:
            # Stored games stay as stored: none restored, so no clock, abandonment or AI
            # turn of theirs runs while the command reads (games --status live reads them).
            args += ["--mark-quarantined", "false", "--restore-games", "false"]
        if self.db is not None:
            args += ["--db", str(self.db)]
        if self.workers is not None:
            args += ["--workers", str(self.workers)]
        if self.warm is not None:
            args += ["--warm-up", ",".join(f"{game}:{algorithm}" for game, algorithm in self.warm)]
        stderr: int | object = asyncio.subprocess.DEVNULL
        log_file = None
        if self.db is not None:  # its log goes beside it: the server's own rule for its directory
            parent = Path(self.db).parent
            if not parent.is_dir() and not is_data_dir(parent):
                raise NoDirectory(self.db)
            parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # (as the server makes it)
        if self.log_path is not None:
            self.made_log = not self.log_path.exists()
            # Its owner's alone, as the database beside it (0600 whatever the umask).
            log_file = open(self.log_path, "ab", opener=_private)  # noqa: SIM115 - closed with the child
            stderr = log_file
        self.process = await asyncio.create_subprocess_exec(
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,  # type: ignore[arg-type]
        )
        if log_file is not None:
            log_file.close()  # the child holds its own descriptor
        try:
            text = await asyncio.wait_for(self._read_until_address(), STARTUP_TIMEOUT_S)
        except TimeoutError as exc:
            await self.stop()
            raise EmbeddedServerError("the embedded server did not start in time") from exc
        finally:
            if self.status is not None:
                self.status.done()
        if "://" not in text:
            code = await self.process.wait()
            why = self._why_not_started()
            where = f" (see {self.log_path})" if self.log_path else ""
            raise EmbeddedServerError(
                f"the embedded server failed to start: {why}{where}"
                if why
                else f"the embedded server failed to start, exit {code}{where}"
            )
        self.url = text[text.index("ws://") :].split()[0]
        if text.startswith(REUSED):
            self.reused = True
            if self.status is not None:
                pid = text.partition("(pid ")[2].rstrip(")")
                self.status.stream.write(
                    f"{self.status.prefix}another noughts (pid {pid}) serves {self.db} on "
                    f"{_without_path(self.url)}: using that server (it stops when that "
                    "noughts exits)\n"
                )
        return self.url

    def _why_not_started(self) -> str | None:
        """The one line a server that refused to start ends its log with ("noughts serve:
        cannot open database ...: file is not a database"), if it did."""
        if self.log_path is None:
            return None
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, os.fstat(log.fileno()).st_size - 4096))
                lines = log.read().decode(errors="replace").splitlines()
        except OSError:
            return None
        last = lines[-1].strip() if lines else ""
        prefix = "noughts serve: "
        return last[len(prefix) :] if last.startswith(prefix) else None

    async def _read_until_address(self) -> str:
        """The server's address line; its progress lines before it go to ``status``, with the
        time waited, refreshed every second."""
        assert self.process is not None and self.process.stdout is not None
        started = time.monotonic()
        doing = "starting the engine"

        async def tick() -> None:
            while True:
                await asyncio.sleep(1.0)
                if self.status is not None:
                    self.status(f"{doing} ({time.monotonic() - started:.0f} s)")

        ticker = asyncio.get_running_loop().create_task(tick())
        try:
            while True:
                line = (await self.process.stdout.readline()).decode(errors="replace").strip()
                if not line.startswith(PROGRESS):
                    return line  # the address, or "" if the server exited
                doing = "preparing the engine: " + line[len(PROGRESS) :]
                if self.status is not None:
                    self.status(f"{doing} ({time.monotonic() - started:.0f} s)")
        finally:
            ticker.cancel()

    async def stop(self) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self.made_log and not self.keep_log and self.url is not None:
            assert self.log_path is not None
            self.log_path.unlink(missing_ok=True)
            self.made_log = False

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

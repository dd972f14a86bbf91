"""Start a server as a child process (`python -m server`) for local play and tools.

The client never imports ``server``: it runs it like any program and connects
to the address the server prints on its first line of output.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from types import TracebackType

STARTUP_TIMEOUT_S = 600.0  # the first start compiles the engine's kernels


class EmbeddedServerError(Exception):
    pass


class EmbeddedServer:
    """``async with EmbeddedServer(db) as url:`` runs a private server on a free port."""

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        *,
        workers: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.db = db
        self.workers = workers
        self.log_path = Path(log_path) if log_path else None
        self.process: asyncio.subprocess.Process | None = None
        self.url: str | None = None

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
        ]
        if self.db is not None:
            args += ["--db", str(self.db)]
        if self.workers is not None:
            args += ["--workers", str(self.workers)]
        stderr: int | object = asyncio.subprocess.DEVNULL
        log_file = None
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed with the child
            stderr = log_file
        self.process = await asyncio.create_subprocess_exec(
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,  # type: ignore[arg-type]
        )
        if log_file is not None:
            log_file.close()  # the child holds its own descriptor
        assert self.process.stdout is not None
        try:
            line = await asyncio.wait_for(self.process.stdout.readline(), STARTUP_TIMEOUT_S)
        except TimeoutError as exc:
            await self.stop()
            raise EmbeddedServerError("the embedded server did not start in time") from exc
        text = line.decode(errors="replace").strip()
        if "ws://" not in text:
            code = await self.process.wait()
            where = f" (see {self.log_path})" if self.log_path else ""
            raise EmbeddedServerError(f"the embedded server failed to start, exit {code}{where}")
        self.url = text[text.index("ws://") :].split()[0]
        return self.url

    async def stop(self) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

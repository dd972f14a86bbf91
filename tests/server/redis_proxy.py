"""A TCP proxy in front of a Redis of the test's own, that can lose the closes Redis sends:
a connection Redis closes while ``losing_closes`` is set stays open on the client's side and
goes silent (nothing more reaches the client, what it sends goes nowhere), as one whose end
a network partition lost (Redis restarted, or cut it, meanwhile): only a client that checks
its connection finds out. ``end_silent`` then ends them, as a client that checks at last does.
``losing_answers_to`` (bytes): the next command sent holding them runs, but nothing more of
Redis reaches that client (its answer lost in a partition). ``silent_after`` (bytes): once
what Redis sends a client holds them, that connection goes silent right after (as one whose
close was lost: ``end_silent`` ends it)."""

from __future__ import annotations

import asyncio
import contextlib


class ClosesLosingProxy:
    def __init__(self, redis_port: int) -> None:
        self.redis_port = redis_port
        self.losing_closes = False
        self.losing_answers_to: bytes | None = None
        self.silent_after: bytes | None = None
        self.silent = 0  # connections whose close was lost
        self._silenced = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._silent: set[asyncio.StreamWriter] = set()  # clients' sides of those connections
        # The local ports of the proxy's connections to Redis (as CLIENT LIST's addr shows
        # them): what the proxy's clients are, for Redis.
        self.upstream_ports: set[int] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}/0"

    async def until_silent(self, count: int) -> None:
        """Until ``count`` connections' closes were lost (10 s at most)."""
        async with asyncio.timeout(10):
            while self.silent < count:
                self._silenced.clear()
                await self._silenced.wait()

    def end_silent(self) -> None:
        """The connections whose close was lost end now, on the client's side too."""
        for writer in self._silent:
            writer.close()
        self._silent.clear()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.close()

    async def _serve(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        self._writers.add(to_client)
        try:
            redis, to_redis = await asyncio.open_connection("127.0.0.1", self.redis_port)
        except OSError:
            to_client.close()
            return
        self._writers.add(to_redis)
        self.upstream_ports.add(to_redis.get_extra_info("sockname")[1])
        silent = asyncio.Event()
        answers_lost = asyncio.Event()

        async def down() -> None:  # Redis -> the client
            cut = False
            with contextlib.suppress(OSError):
                while data := await redis.read(1 << 16):
                    if not answers_lost.is_set():
                        to_client.write(data)
                    if self.silent_after is not None and self.silent_after in data:
                        self.silent_after = None
                        cut = True
                        break
            if self.losing_closes or cut:
                self.silent += 1
                self._silent.add(to_client)
                self._silenced.set()
                silent.set()  # the client's side stays open, silent
            else:
                to_client.close()

        async def up() -> None:  # the client -> Redis
            with contextlib.suppress(OSError):
                while data := await client.read(1 << 16):
                    if self.losing_answers_to is not None and self.losing_answers_to in data:
                        self.losing_answers_to = None
                        answers_lost.set()
                    if not silent.is_set():
                        to_redis.write(data)
            to_redis.close()
            to_client.close()

        for pump in (down(), up()):
            task = asyncio.create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

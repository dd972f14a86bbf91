"""The rate-limited log: a burst of lines of each kind, then one per period, and the
next line written says how many were held back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.logs import MAX_KINDS, RateLimitedLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_storm_writes_a_burst_then_one_line_a_period(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    storms = RateLimitedLog(logging.getLogger("storm"), period_s=10.0, burst=3, clock=clock)
    with caplog.at_level(logging.WARNING, "storm"):
        written = [storms.warning("refused", "refusing %s", n) for n in range(10_000)]
        assert written.count(True) == 3
        # Another kind has its own bucket.
        assert storms.warning("too slow", "dropping a client")
        clock.now += 10.0
        assert storms.warning("refused", "refusing %s", "later")
        assert not storms.warning("refused", "refusing %s", "again")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refusing 0",
        "refusing 1",
        "refusing 2",
        "dropping a client",
        "refusing later (and 9997 more like it, not logged)",
    ]


def test_kinds_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    storms = RateLimitedLog(logging.getLogger("storm"), burst=1, clock=Clock())
    with caplog.at_level(logging.WARNING, "storm"):
        for n in range(MAX_KINDS * 3):
            storms.warning(f"kind {n}", "line %s", n)
    assert len(storms._kinds) == MAX_KINDS
    assert len(caplog.records) == MAX_KINDS  # the overflow shares one bucket


@contextlib.asynccontextmanager
async def _debug_server(tmp_path: Path, *flags: str) -> AsyncIterator[tuple[str, Path]]:
    """A real ``noughts serve`` process at --log-level DEBUG (with ``flags``): the URL its
    first line names, and its log file, complete once the server has stopped."""
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "server", "--port", "0", "--workers", "0", *flags,
             "--log-level", "DEBUG", "--db", str(tmp_path / "g.db")],
            stdout=subprocess.PIPE, stderr=log, text=True,
        )  # fmt: skip
    try:
        assert server.stdout is not None
        line = await asyncio.to_thread(server.stdout.readline)
        assert line.startswith("noughts server listening on ws://"), line
        yield line.split()[4], log_path
    finally:
        server.terminate()
        await asyncio.to_thread(server.communicate, timeout=60)


async def test_a_debug_log_shows_no_part_of_a_token(tmp_path: Path) -> None:
    """At --log-level DEBUG, websockets logged each frame a client sent with its first 16
    and last 8 bytes, and an abort or a resign ends with the seat's token: the log held a
    quarter of every such token (8 of its 32 characters). Now a data frame's line keeps
    its type and size only; handshake and control lines are as they were."""
    import websockets

    from protocol import PROTOCOL_VERSION, Abort, CreateGame, Hello, decode_server, encode

    async with _debug_server(tmp_path) as (url, log_path):
        async with websockets.connect(url, compression=None) as websocket:
            await websocket.send(encode(Hello(rid=1, version=PROTOCOL_VERSION, name="ada")))
            welcome = decode_server(await websocket.recv())
            await websocket.send(encode(Hello(rid=2, version=PROTOCOL_VERSION)))  # (refused)
            await websocket.recv()
            await websocket.send(encode(CreateGame(rid=3, game="tictactoe", opponent="human")))
            seated = decode_server(await websocket.recv())
            await websocket.send(encode(Abort(rid=4, game_id=seated.game_id, token=seated.token)))
            while getattr(decode_server(await websocket.recv()), "rid", None) != 4:
                pass
        async with websockets.connect(url, compression=None) as websocket:
            again = Hello(rid=1, version=PROTOCOL_VERSION, name="ada", session=welcome.session)
            await websocket.send(encode(again))
            assert decode_server(await websocket.recv()).session == welcome.session
    text = log_path.read_text()
    for secret in (welcome.session, seated.token):
        for part in (secret[:8], secret[-8:]):
            assert " ".join(f"{byte:02x}" for byte in part.encode()) not in text, part
    assert "< BINARY [" in text and "< CLOSE 1000" in text, text[-2000:]


async def test_a_debug_log_shows_no_secret_path(tmp_path: Path) -> None:
    """At --log-level DEBUG, websockets logs each handshake's request line, whose path is a
    --secret-path server's secret (noughts play's): the log would hand it to whoever reads
    it. A path other than / is logged as /***; a refusal says why, without the path."""
    from urllib.parse import urlsplit

    import websockets
    from websockets.exceptions import InvalidStatus

    async with _debug_server(tmp_path, "--secret-path", "true") as (url, log_path):
        secret = urlsplit(url).path.lstrip("/")
        assert len(secret) == 32, url
        async with websockets.connect(url, compression=None):
            pass  # (served)
        with pytest.raises(InvalidStatus):
            async with websockets.connect(f"{url}x", compression=None):
                pass
    text = log_path.read_text()
    assert secret not in text and secret[:8] not in text, text[-2000:]
    assert text.count("< GET /*** HTTP/1.1") == 2, text[-2000:]
    assert "refusing a connection from 127.0.0.1: not the secret path" in text

"""The admin port: health, readiness of the store and the engine, Prometheus metrics."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol import CreateGame, Ping, Pong
from server.admin import MAX_REQUEST_BYTES, AdminServer
from server.pool import EnginePool
from server.settings import ServerSettings
from tests.server.conftest import RunningServer, serving


@pytest.fixture
async def admin(server: RunningServer) -> AsyncIterator[tuple[AdminServer, int]]:
    admin = AdminServer(server.game_server)
    listening = await admin.start("127.0.0.1", 0)
    try:
        yield admin, next(iter(listening.sockets)).getsockname()[1]
    finally:
        listening.close()
        await listening.wait_closed()


async def _get(port: int, request: bytes, source: str = "127.0.0.1") -> tuple[int, str]:
    """The status and body of the answer to ``request``, sent from the address ``source``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write(request)
    await writer.drain()
    response = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def _request(path: str, method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


async def test_health_and_readiness(admin: tuple[AdminServer, int]) -> None:
    _, port = admin
    assert await _get(port, _request("/healthz")) == (200, "ok\n")
    status, body = await _get(port, _request("/readyz"))
    assert status == 200 and body == "drain: ok\nstore: ok\nengine: ok\n"


async def test_not_ready_when_the_store_fails(
    server: RunningServer, admin: tuple[AdminServer, int]
) -> None:
    _, port = admin
    await server.game_server.store.close()
    status, body = await _get(port, _request("/readyz"))
    assert status == 503
    assert "store: StorageError" in body and "engine: ok" in body


async def test_metrics_read_the_servers_state(
    server: RunningServer, admin: tuple[AdminServer, int]
) -> None:
    _, port = admin
    ada = await server.connect("ada")
    await ada.request(CreateGame, game="tictactoe", opponent="human")
    status, body = await _get(port, _request("/metrics"))
    assert status == 200
    assert "noughts_connections 1.0" in body
    assert 'noughts_games{status="open"} 1.0' in body
    assert "noughts_engine_workers_alive" in body


async def test_hostile_requests_get_short_answers(admin: tuple[AdminServer, int]) -> None:
    _, port = admin
    assert (await _get(port, _request("/nope")))[0] == 404
    assert (await _get(port, _request("/metrics", "POST")))[0] == 405
    assert (await _get(port, b"garbage\r\n\r\n"))[0] == 400
    huge = b"GET /healthz HTTP/1.1\r\nX: " + b"a" * MAX_REQUEST_BYTES + b"\r\n\r\n"
    assert (await _get(port, huge))[0] == 431


async def test_connections_are_capped_per_address_and_in_all(
    tmp_path: Path, pool: EnginePool
) -> None:
    """An operator's probe: 1,100 idle connections to the admin port were all held, until
    the process ran out of file descriptors (its game port and its database with it). Past
    its caps the admin port answers 503 at once and closes; the game is served throughout,
    and the admin port again once the idle ones go."""
    settings = ServerSettings(admin_max_per_ip=2, admin_max_connections=3)
    async with serving(tmp_path, pool, settings) as server:
        admin = AdminServer(server.game_server)
        listening = await admin.start("127.0.0.1", 0)
        port = next(iter(listening.sockets)).getsockname()[1]
        idle = []
        try:

            async def hold(source: str) -> None:
                idle.append(
                    await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
                )
                for _ in range(200):  # until the server has taken it
                    if admin.admission.sockets == len(idle):
                        return
                    await asyncio.sleep(0.02)
                raise AssertionError(f"{admin.admission.sockets} admin connections held")

            await hold("127.0.0.1")
            await hold("127.0.0.1")
            # A third from one address is answered at once, before it asks anything. (One
            # that asked first may see its connection reset instead: closed unread.)
            status, body = await _get(port, b"")
            assert (status, body) == (
                503,
                "too_many: the admin port holds at most 2 connections per address and 3 in all\n",
            )
            assert await _get(port, _request("/healthz"), "127.0.0.2") == (200, "ok\n")
            await hold("127.0.0.2")
            assert (await _get(port, b"", "127.0.0.3"))[0] == 503  # 3 in all
            ada = await server.connect("ada")  # the game is not the admin port's business
            assert isinstance(await ada.request(Ping), Pong)
            await ada.close()
            for _reader, writer in idle:
                writer.close()
            for _ in range(200):
                if admin.admission.sockets == 0:
                    break
                await asyncio.sleep(0.02)
            assert await _get(port, _request("/healthz")) == (200, "ok\n")
        finally:
            for _reader, writer in idle:
                writer.close()
            listening.close()
            await listening.wait_closed()


def _serve_with_admin(tmp_path: Path, *admin: str) -> subprocess.CompletedProcess[str]:
    """`noughts serve` on port 0 with these admin options, run to its end."""
    command = [sys.executable, "-m", "server", "--port", "0", "--workers", "0"]
    command += ["--db", str(tmp_path / "games.db"), *admin]
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


def test_an_admin_address_it_cannot_listen_on_is_named(tmp_path: Path) -> None:
    """An operator's probe: --admin-port in use, or a bad --admin-host, was reported as
    'cannot listen on 127.0.0.1:0', the game's address. One line naming the admin address,
    exit 1, the database's lock released."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        in_use = _serve_with_admin(tmp_path, "--admin-port", str(busy))
    bad_host = _serve_with_admin(tmp_path, "--admin-host", "999.9.9.9", "--admin-port", "0")
    for result, where in ((in_use, f"127.0.0.1:{busy}"), (bad_host, "999.9.9.9:0")):
        assert result.returncode == 1, result.stderr
        assert result.stdout == ""
        said = [line for line in result.stderr.splitlines() if "noughts serve:" in line]
        assert len(said) == 1, result.stderr  # (the rest: the log)
        assert said[0].startswith(f"noughts serve: cannot listen on the admin address {where}: ")
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "games.db.lock").exists()

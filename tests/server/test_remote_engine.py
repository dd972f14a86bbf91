"""AI searches on the Redis Streams queue, with real `noughts engine-worker` processes: a
search is answered, a worker killed mid-search has its job re-run by another with what is left
of the budget, no worker at all is a clear `engine_unavailable`, a search survives Redis
restarting without its data, and a game server plays its AI through the queue."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

import engine
from client.connection import RequestFailed, ServerConnection
from protocol import CreateGame, Moved
from server.admin import AdminServer
from server.app import GameServer, running
from server.engine_worker import build_parser
from server.errors import EngineUnavailable
from server.pool import SearchRequest
from server.remote_engine import COUNT_S, GROUP, RemoteEngine, jobs_key
from server.store import SQLiteStore
from tests.server.conftest import admin_get, next_event
from tests.services import REDIS_SERVER_HINT, REDIS_URL

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]


@pytest.fixture
async def spawn_worker(redis_prefix: str) -> AsyncIterator[Spawn]:
    """Start `python -m server.engine_worker` processes (a short heartbeat); killed after."""
    started: list[asyncio.subprocess.Process] = []

    async def spawn(url: str = REDIS_URL) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server.engine_worker", "--bus", url,
            "--bus-prefix", redis_prefix, "--heartbeat-s", "0.5",
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        started.append(process)
        assert process.stderr is not None
        line = b""
        while b"ready" not in line:  # after its warm-up lines
            line = await asyncio.wait_for(process.stderr.readline(), 600)
            assert line, "the worker exited before it was ready"
        return process

    yield spawn
    for process in started:
        if process.returncode is None:
            process.kill()
        await process.wait()


@pytest.fixture
async def remote(redis_prefix: str) -> AsyncIterator[RemoteEngine]:
    queue = RemoteEngine(REDIS_URL, prefix=redis_prefix)
    await queue.start()
    yield queue
    await queue.close()


def _request(game: str, budget_ms: float, actions: tuple[int, ...] = ()) -> SearchRequest:
    return SearchRequest(game=game, params={}, actions=actions, algorithm="mcts",
                         budget_ms=budget_ms, seed=3)  # fmt: skip


async def test_a_worker_answers_a_search(remote: RemoteEngine, spawn_worker: Spawn) -> None:
    await spawn_worker()
    assert await remote.refresh() == 1
    result = await remote.search(_request("tictactoe", 20, (4,)))
    assert result.action in engine.replay(engine.make_game("tictactoe"), [4]).legal_actions()
    assert result.algorithm == "mcts"


async def test_a_job_of_a_killed_worker_is_rerun_by_another(
    remote: RemoteEngine, spawn_worker: Spawn, redis_prefix: str
) -> None:
    doomed = await spawn_worker()
    search = asyncio.create_task(remote.search(_request("uttt", 1500)))
    client = aioredis.Redis.from_url(REDIS_URL)
    for _ in range(200):  # the doomed worker took the job
        summary = await client.xpending(jobs_key(redis_prefix), GROUP)
        if summary["pending"]:
            break
        await asyncio.sleep(0.02)
    assert summary["pending"] == 1
    doomed.send_signal(signal.SIGKILL)
    await doomed.wait()
    await spawn_worker()
    result = await asyncio.wait_for(search, 30)
    assert result.action in engine.make_game("uttt").new_initial_state().legal_actions()
    # What was left of the budget, not the whole of it again (nor less than a quick search).
    assert 10 <= result.budget_ms < 1500
    for _ in range(200):  # acknowledged just after the answer was written
        if (await client.xpending(jobs_key(redis_prefix), GROUP))["pending"] == 0:
            break
        await asyncio.sleep(0.02)
    assert (await client.xpending(jobs_key(redis_prefix), GROUP))["pending"] == 0
    await client.aclose()


async def test_a_search_queued_behind_a_busy_worker_waits_its_turn(
    remote: RemoteEngine, spawn_worker: Spawn
) -> None:
    """As the server's own pool (test_engine_pool): the wait in the queue counted toward
    the deadline (budget + wait_s), so a second search behind one worker's was failed."""
    await spawn_worker()
    assert await remote.refresh() == 1
    searches = [remote.search(_request("uttt", 2500), wait_s=1.0) for _ in range(2)]
    results = await asyncio.wait_for(asyncio.gather(*searches), 60)
    assert all(r.algorithm == "mcts" for r in results)


async def test_no_worker_is_a_clear_engine_unavailable(
    remote: RemoteEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import server.remote_engine

    monkeypatch.setattr(server.remote_engine, "REPLY_GRACE_S", 0.3)
    assert await remote.refresh() == 0
    with pytest.raises(EngineUnavailable, match="no engine worker answered"):
        await remote.search(_request("tictactoe", 10))


async def test_a_game_server_plays_its_ai_through_the_queue(
    tmp_path: Path, remote: RemoteEngine, spawn_worker: Spawn
) -> None:
    """Before any worker serves the queue, a game against the AI is refused at once (not
    started to end without a move) and the admin port says not ready; once a worker's
    heartbeat is counted (``COUNT_S``), the AI plays through the queue."""
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    try:
        game_server = GameServer(store, remote)  # type: ignore[arg-type]
        async with running(game_server) as ws_server:
            url = f"ws://127.0.0.1:{next(iter(ws_server.sockets)).getsockname()[1]}"
            admin = AdminServer(game_server)
            listening = await admin.start("127.0.0.1", 0)
            admin_port = next(iter(listening.sockets)).getsockname()[1]
            ada = await ServerConnection.connect(url, name="ada")
            vs_ai = {"game": "tictactoe", "opponent": "ai", "seat": 1, "budget_ms": 20}
            with pytest.raises(RequestFailed) as refused:
                await ada.request(CreateGame, **vs_ai)
            assert refused.value.code == "engine_unavailable"
            assert "noughts engine-worker" in refused.value.message
            status, body = await admin_get(admin_port, "/readyz")
            assert status == 503 and "engine: no engine worker is alive" in body, body
            await spawn_worker()
            async with asyncio.timeout(3 * COUNT_S + 5):
                while remote.alive != 1:  # counted by the node itself, not asked here
                    await asyncio.sleep(0.05)
            status, body = await admin_get(admin_port, "/readyz")
            assert status == 200, body
            seated = await ada.request(CreateGame, **vs_ai)
            moved = await next_event(ada, Moved)
            assert moved.game_id == seated.game_id and moved.seat == 0
            assert moved.stats is not None and moved.stats["algorithm"] == "perfect"
            await ada.close()
            listening.close()
    finally:
        await store.close()


async def test_serve_with_the_queue_needs_a_bus(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server", "--engine", "queue", "--port", "0",
        "--db", str(tmp_path / "g.db"), stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert err.decode().strip() == "noughts serve: --engine queue needs --bus redis://HOST:PORT/N"


class OwnRedis:
    """A redis-server of this test's own on a free port, without persistence, so that a
    restart loses every stream and group, as a crash of a cache-only Redis would."""

    def __init__(self, workdir: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
            stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        client = aioredis.Redis.from_url(self.url)
        try:
            for _ in range(200):
                try:
                    await client.ping()
                    return
                except OSError:
                    await asyncio.sleep(0.05)
                except aioredis.ConnectionError:
                    await asyncio.sleep(0.05)
            raise RuntimeError("redis-server did not start")
        finally:
            await client.aclose()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


@pytest.fixture
async def own_redis(tmp_path: Path) -> AsyncIterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip(REDIS_SERVER_HINT)
    server = OwnRedis(tmp_path)
    await server.start()
    yield server
    await server.stop()


async def test_a_search_survives_redis_restarting_without_its_data(
    own_redis: OwnRedis, spawn_worker: Spawn, redis_prefix: str
) -> None:
    """Redis killed while a worker searches and started again empty: the worker comes back
    (and makes the group again), the node submits the lost job again, the search is
    answered; the next one too."""
    await spawn_worker(own_redis.url)
    queue = RemoteEngine(own_redis.url, prefix=redis_prefix)  # the worker's prefix
    await queue.start()
    try:
        search = asyncio.create_task(queue.search(_request("uttt", 1500)))
        client = aioredis.Redis.from_url(own_redis.url)
        for _ in range(200):  # the worker took the job
            summary = await client.xpending(jobs_key(redis_prefix), GROUP)
            if summary["pending"]:
                break
            await asyncio.sleep(0.02)
        assert summary["pending"] == 1
        await client.aclose()
        await own_redis.stop()
        await asyncio.sleep(0.5)
        await own_redis.start()
        result = await asyncio.wait_for(search, 30)
        assert result.action in engine.make_game("uttt").new_initial_state().legal_actions()
        again = await asyncio.wait_for(queue.search(_request("tictactoe", 20, (4,))), 30)
        assert again.action in engine.replay(engine.make_game("tictactoe"), [4]).legal_actions()
    finally:
        await queue.close()


async def _stderr_until(process: asyncio.subprocess.Process, pattern: str) -> re.Match[str]:
    """Read ``process``'s stderr until a line matches ``pattern`` (60 s at most)."""
    assert process.stderr is not None
    async with asyncio.timeout(60):
        while True:
            line = (await process.stderr.readline()).decode()
            assert line, f"stderr ended before {pattern!r}"
            found = re.search(pattern, line)
            if found:
                return found


def _ended(pid: int) -> bool:
    """``pid`` is gone or a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except FileNotFoundError:
        return True


async def test_processes_a_worker_that_dies_is_started_again_and_ends_with_the_rest(
    redis_prefix: str,
) -> None:
    """``noughts engine-worker --processes 2``: a worker killed -9 is logged and started
    again (a new consumer, serving the queue); the supervisor killed -9, its workers end
    (PR_SET_PDEATHSIG) instead of serving on unsupervised."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server.engine_worker", "--bus", REDIS_URL,
        "--bus-prefix", redis_prefix, "--heartbeat-s", "0.5", "--processes", "2",
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    ready = r"engine worker \S+-(\d+) ready"
    pids = [int((await _stderr_until(process, ready))[1]) for _ in range(2)]
    try:
        os.kill(pids[0], signal.SIGKILL)
        await _stderr_until(
            process, rf"engine worker \(pid {pids[0]}\) was killed by SIGKILL; starting it again"
        )
        pids.append(int((await _stderr_until(process, ready))[1]))
        assert pids[2] not in pids[:2]
        remote = RemoteEngine(REDIS_URL, prefix=redis_prefix)
        await remote.start()
        try:
            result = await remote.search(_request("tictactoe", 20, (4,)))
            assert result.algorithm == "mcts"
        finally:
            await remote.close()
        process.kill()
        await process.wait()
        async with asyncio.timeout(30):
            while not (_ended(pids[1]) and _ended(pids[2])):
                await asyncio.sleep(0.1)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ({"NOUGHTS_PROCESSES": "abc"}, "argument --processes: invalid int value: 'abc'"),
        ({"NOUGHTS_HEARTBEAT_S": "0"}, "argument --heartbeat-s: must be above 0, not 0"),
    ],
)
async def test_a_bad_setting_from_the_environment_is_a_usage_error(
    env: dict[str, str], error: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server.engine_worker", "--bus", REDIS_URL,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **env},
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert (
        err.decode()
        == f"noughts engine-worker: error: {error} (see noughts engine-worker --help)\n"
    )


def test_the_prefix_is_serves_bus_prefix_and_keeps_its_first_name() -> None:
    parser = build_parser()
    assert parser.parse_args(["--bus-prefix", "a"]).prefix == "a"
    assert parser.parse_args(["--prefix", "b"]).prefix == "b"

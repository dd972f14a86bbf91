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
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

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
from server.remote_engine import (
    COUNT_S,
    GROUP,
    RemoteEngine,
    decode_request,
    jobs_key,
    replies_key,
)
from server.store import SQLiteStore
from tests.server.conftest import admin_get, next_event
from tests.services import REDIS_SERVER_HINT, REDIS_URL

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]


@pytest.fixture
async def spawn_worker(redis_prefix: str) -> AsyncIterator[Spawn]:
    """Start `python -m server.engine_worker` processes (a short heartbeat); killed after."""
    started: list[asyncio.subprocess.Process] = []

    async def spawn(url: str = REDIS_URL, *args: str) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server.engine_worker", "--bus", url,
            "--bus-prefix", redis_prefix, "--heartbeat-s", "0.5", *args,
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


async def test_a_node_leaves_no_reply_stream_behind(redis_prefix: str, spawn_worker: Spawn) -> None:
    """A soak probe's finding: each run of a node through the queue left its reply stream
    (up to MAX_REPLIES answers, no expiry) in Redis for ever: 20 runs, 20 streams. A node
    that stops deletes it; one killed leaves it with the lifetime each answer gives it."""
    await spawn_worker()
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        for _ in range(3):
            queue = RemoteEngine(REDIS_URL, prefix=redis_prefix)
            await queue.start()
            await queue.search(_request("tictactoe", 20, (4,)))
            assert 0 < await client.pttl(replies_key(redis_prefix, queue.node))
            await queue.close()
        assert [k async for k in client.scan_iter(match=replies_key(redis_prefix, "*"))] == []
    finally:
        await client.aclose()


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


class Put(NamedTuple):
    owner: str | None
    noted: Any  # what the test's ``note()`` said as the job was seen
    entry: bytes  # its id in the stream (Redis's clock in ms, then a sequence number)


@contextlib.asynccontextmanager
async def jobs_put(prefix: str, note: Callable[[], Any]) -> AsyncIterator[list[Put]]:
    """While inside: each job put on the stream, as soon as it is there, in the stream's
    order (the order workers take them in): a plain XREAD, beside the workers' group."""
    client = aioredis.Redis.from_url(REDIS_URL)
    seen: list[Put] = []

    async def watch() -> None:
        last: Any = "0-0"
        while True:
            replies: Any = await client.xread({jobs_key(prefix): last}, block=1000)
            for _, entries in replies or []:
                for entry_id, fields in entries:
                    last = entry_id
                    seen.append(Put(decode_request(fields[b"request"]).owner, note(), entry_id))

    watcher = asyncio.create_task(watch())
    try:
        yield seen
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await client.aclose()


def _search_of(queue: RemoteEngine, owner: str, address: str) -> asyncio.Task[engine.SearchResult]:
    request = replace(_request("uttt", 300), owner=owner, address=address)
    return asyncio.create_task(queue.search(request))


async def test_an_address_with_many_players_takes_one_turn_among_the_others(
    remote: RemoteEngine, spawn_worker: Spawn, redis_prefix: str
) -> None:
    """The queue served its jobs in the order they came: one address's many players, each
    with an AI game, put theirs all ahead of another address's player (a probe: 150 s of
    waiting for an AI move, 30 sessions on 2 workers). As in the server's own pool,
    addresses take turns: the node puts a job on the stream only while fewer of its own
    are unanswered than workers are alive, the next in the turn order (server/turns.py)."""
    workers = 2
    for _ in range(workers):
        await spawn_worker()
    assert await remote.refresh() == workers
    searches: list[asyncio.Task[engine.SearchResult]] = []
    async with jobs_put(redis_prefix, lambda: sum(s.done() for s in searches)) as put:
        searches += [_search_of(remote, f"a{i}", "10.0.0.1") for i in range(8)]
        searches.append(_search_of(remote, "b", "10.0.0.2"))
        results = await asyncio.wait_for(asyncio.gather(*searches), 120)
        while len(put) < len(searches):
            await asyncio.sleep(0.01)
    assert all(r.algorithm == "mcts" for r in results)
    owners = [p.owner for p in put]
    assert sorted(map(str, owners)) == sorted([f"a{i}" for i in range(8)] + ["b"])
    # At most a job per worker unanswered (before: all nine put at once) ...
    assert all(i + 1 - p.noted <= workers for i, p in enumerate(put)), put
    # ... and b's the first put once a place is free (one more of a's may go before it,
    # freed by an answer that came with the first).
    assert owners.index("b") <= workers + 1, put
    assert remote.pending == 0


async def test_through_the_queue_a_players_searches_run_one_at_a_time(
    remote: RemoteEngine, spawn_worker: Spawn, redis_prefix: str
) -> None:
    """As in the pool, ``ai_running_per_player`` (1) of a player's searches run at once, the
    rest waiting at the node, counted for the player's cap (``searches_of``) until answered;
    one cancelled while it waits (its game ended) never reaches the queue."""
    for _ in range(2):
        await spawn_worker()
    assert await remote.refresh() == 2
    ada: list[asyncio.Task[engine.SearchResult]] = []
    async with jobs_put(redis_prefix, lambda: ada[0].done()) as put:
        ada += [_search_of(remote, "ada", "10.0.0.1") for _ in range(3)]
        bo = _search_of(remote, "bo", "10.0.0.1")
        await asyncio.sleep(0)  # every search has joined
        assert remote.searches_of("ada") == 3 and remote.pending == 4
        ada[1].cancel()  # waiting: a worker is free, but ada's first search runs
        await asyncio.wait_for(asyncio.gather(ada[0], ada[2], bo), 60)
        while len(put) < 3:
            await asyncio.sleep(0.01)
    assert ada[1].cancelled()
    # ada's first and bo's at once (in either order), ada's next once her first is answered.
    # Before: all four at once.
    seen = [(p.owner, p.noted) for p in put]
    assert sorted(seen[:2]) == [("ada", False), ("bo", False)], put
    assert seen[2:] == [("ada", True)], put
    assert remote.searches_of("ada") == 0 and remote.pending == 0


async def test_a_search_cancelled_on_the_queue_keeps_its_place_until_answered(
    remote: RemoteEngine, spawn_worker: Spawn, redis_prefix: str
) -> None:
    """A search whose game ends once its job is on the stream is not stopped there: its
    worker runs it to its budget, so the next job goes only once it has answered, not into
    the stream behind it (where the turn order no longer holds)."""
    await spawn_worker()
    assert await remote.refresh() == 1
    async with jobs_put(redis_prefix, lambda: None) as put:
        first = _search_of(remote, "ada", "10.0.0.1")
        while not put:
            await asyncio.sleep(0.01)
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        assert remote.pending == 1  # (its place)
        second = await asyncio.wait_for(_search_of(remote, "bo", "10.0.0.2"), 60)
    assert second.algorithm == "mcts" and remote.pending == 0
    client = aioredis.Redis.from_url(REDIS_URL)
    (answer, _), *_ = await client.xrange(replies_key(redis_prefix, remote.node), count=1)
    await client.aclose()
    # The first one's answer, then bo's job, by Redis's clock (ms). Before: bo's job went
    # while the first one ran.
    assert [p.owner for p in put] == ["ada", "bo"]
    assert int(put[1].entry.split(b"-")[0]) >= int(answer.split(b"-")[0]), (put, answer)


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


async def test_a_worker_says_in_one_line_that_redis_stalls_and_goes_on_after(
    own_redis: OwnRedis, spawn_worker: Spawn, redis_prefix: str
) -> None:
    """Redis stalls (alive, answering nothing: SIGSTOP). The worker's commands give up
    after its --bus-timeout-s (noughts serve's setting; its read of the next job: its block
    on top): it says so in one line, no traceback, however long the stall, tries again on
    new connections, and once Redis answers says so and serves the next search. (It had
    no such setting: redis-py's own timeout, none before redis-py 8, 5 s and three tries
    since, and a line at each failure of those.)"""
    worker = await spawn_worker(own_redis.url, "--bus-timeout-s", "0.5")
    assert worker.stderr is not None and own_redis.process is not None
    said: list[str] = []

    async def until_said(text: str) -> None:
        assert worker.stderr is not None
        async with asyncio.timeout(60):
            while not said or text not in said[-1]:
                line = (await worker.stderr.readline()).decode()
                assert line, f"the worker ended before saying {text!r}: {said}"
                said.append(line)

    own_redis.process.send_signal(signal.SIGSTOP)
    try:
        await until_said("lost the queue")
        # Long enough for the worker's further tries to fail too (they say nothing more).
        await asyncio.sleep(3)
    finally:
        own_redis.process.send_signal(signal.SIGCONT)
    await until_said("the queue answers again")
    queue = RemoteEngine(own_redis.url, prefix=redis_prefix)
    await queue.start()
    try:
        result = await asyncio.wait_for(queue.search(_request("tictactoe", 20, (4,))), 30)
        assert result.action in engine.replay(engine.make_game("tictactoe"), [4]).legal_actions()
    finally:
        await queue.close()
    worker.send_signal(signal.SIGTERM)
    _, rest = await asyncio.wait_for(worker.communicate(), 30)
    log = "".join(said) + rest.decode()
    assert "Traceback" not in log, log
    assert log.count("lost the queue") == 1, log


async def test_a_queue_that_fails_tells_the_player_so_without_its_address(
    own_redis: OwnRedis, redis_prefix: str, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Redis gone while a search waits: the search ends engine_unavailable saying the queue
    failed, not Redis's address (the player reads it: it said "Error 111 connecting to
    127.0.0.1:PORT"); the cause goes to the log, once however many times it fails."""
    import server.remote_engine

    monkeypatch.setattr(server.remote_engine, "REPLY_GRACE_S", 3.0)
    queue = RemoteEngine(own_redis.url, prefix=redis_prefix)
    await queue.start()
    try:
        await own_redis.stop()
        with pytest.raises(EngineUnavailable) as refused:
            await asyncio.wait_for(queue.search(_request("tictactoe", 10)), 30)
    finally:
        await queue.close()
    port = own_redis.url.rsplit(":", 1)[1].split("/")[0]
    assert "the engine queue failed" in str(refused.value)
    assert port not in str(refused.value) and "127.0.0.1" not in str(refused.value)
    causes = [r.getMessage() for r in caplog.records if "engine queue failed:" in r.getMessage()]
    assert len(causes) == 1 and port in causes[0], causes


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

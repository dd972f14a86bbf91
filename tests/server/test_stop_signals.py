"""A real `noughts serve` stopped by a signal: SIGTERM, SIGINT and SIGHUP (a closed terminal)
each stop it gracefully -- its clients told to reconnect (1012), its database's lock
released, its engine workers ended -- whether it serves or is still warming up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import websockets

from client.embedded import EmbeddedServer
from protocol import PROTOCOL_VERSION, Hello, encode

WORKERS = 8  # enough that their warm-up outlasts the test's signal


def _workers(pid: int) -> set[int]:
    """The engine worker processes ``pid`` started (from any of its threads): spawned by
    multiprocessing (its resource tracker, which ends on its own, is not one)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue  # a thread that ended meanwhile
        for child in children:
            with contextlib.suppress(OSError):
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.add(int(child))
    return found


def _alive(pid: int) -> bool:
    """A process that runs (a zombie, dead and not yet reaped, does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
async def test_a_signal_stops_a_serving_server_with_its_drain(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """An operator's probe: SIGHUP (the terminal of a foreground server closed) killed it
    with no drain, its clients cut (1006) and its lock file left."""
    server = EmbeddedServer(tmp_path / "games.db", workers=0)
    url = await server.start()
    try:
        client = await websockets.connect(url)
        await client.send(encode(Hello(rid=1, version=PROTOCOL_VERSION, name="ada")))
        await client.recv()
        assert server.process is not None
        server.process.send_signal(stop)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(client.recv(), 30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        assert await asyncio.wait_for(server.process.wait(), 30) == 0
    finally:
        await server.stop()
    assert not (tmp_path / "games.db.lock").exists()  # released, as at any clean stop


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_during_the_engine_warm_up_stops_it_and_its_workers(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """An operator's probe: SIGTERM before the server listened (with --workers 300, a long
    warm-up) killed it at once, its workers left warming up, orphaned, for 30-50 s and its
    lock file left. Now it stops the warm-up: the workers are gone when the server exits
    (0, as for a stop once serving) and the lock is released."""
    db = tmp_path / "games.db"
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    command = [sys.executable, "-m", "server", "--port", "0", "--db", str(db)]
    server = subprocess.Popen(
        [*command, "--workers", str(WORKERS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        workers: set[int] = set()
        for _ in range(1200):  # the first worker started: the server is warming up
            workers = _workers(server.pid)
            if workers or server.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert workers, "no engine worker started"
        server.send_signal(stop)
        stdout, stderr = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert "listening" not in stdout, "the signal came after the warm-up: nothing tested"
    assert server.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert not [pid for pid in workers if _alive(pid)], "engine workers left running"
    assert not (tmp_path / "games.db.lock").exists()

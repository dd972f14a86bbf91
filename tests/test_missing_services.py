"""On a machine without PostgreSQL or Redis, a run says in one line per service how many
tests did not run and how to install what they need (issue 13)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_run_without_the_services_says_what_did_not_run_and_how_to_install() -> None:
    port = closed_port()
    env = dict(os.environ)
    env["NOUGHTS_TEST_PG"] = f"postgresql://postgres@127.0.0.1:{port}/test"
    env["NOUGHTS_TEST_REDIS"] = f"redis://127.0.0.1:{port}/0"
    tests = ["tests/server/test_pgstore.py", "tests/server/test_remote_engine.py"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    lines = [line for line in run.stdout.splitlines() if "did not run" in line]
    assert len(lines) == 2, run.stdout[-3000:]
    (pg,) = [line for line in lines if "PostgreSQL is missing here" in line]
    (redis,) = [line for line in lines if "Redis is missing here" in line]
    assert "apt-get install postgresql" in pg and "apt-get install redis-server" in redis
    skipped = int(pg.split()[0]) + int(redis.split()[0])
    assert skipped >= 10  # every test of those files that needs a service

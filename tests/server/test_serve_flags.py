"""`noughts serve` given careless or hostile option values: a usage error (one line, exit
2), never a traceback, a hang, or a server in a silly state.
Each runs the real command in a subprocess, as an operator does."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from tests.client.test_cli import noughts
from tests.server.cluster_nodes import schema_url
from tests.services import PG_URL, REDIS_URL


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``noughts serve ARGS`` to its end (a hang fails the test at the timeout)."""
    return subprocess.run(
        [sys.executable, "-m", "server", "--port", "0", "--workers", "0", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def assert_usage_error(result: subprocess.CompletedProcess[str], error: str) -> None:
    """Exit 2 with argparse's error as one line, as every bad option."""
    assert (result.returncode, result.stderr) == (
        2, f"noughts serve: error: {error} (see noughts serve --help)\n"
    )  # fmt: skip


SEE_MIGRATE = " (see noughts migrate --help)"
SEE_WORKER = " (see noughts engine-worker --help)"
EMPTY_HOST = "empty: name the address to listen on (0.0.0.0 or :: for every interface)"


@pytest.mark.parametrize(
    ("args", "env", "error"),
    [
        (["--host", ""], {}, f"argument --host: {EMPTY_HOST}"),
        (["--host", " "], {}, f"argument --host: {EMPTY_HOST}"),
        ([], {"NOUGHTS_HOST": ""}, f"$NOUGHTS_HOST='': {EMPTY_HOST}"),
        (["--admin-port", "0", "--admin-host", ""], {}, f"argument --admin-host: {EMPTY_HOST}"),
    ],
)
def test_an_empty_host_is_refused(
    tmp_path: Path, args: list[str], env: dict[str, str], error: str
) -> None:
    """It bound every interface, IPv4 and IPv6 (a server made public by a blank variable),
    and announced ws://:PORT, which `noughts games --db` could not parse (a traceback)."""
    db = tmp_path / "g.db"
    assert_usage_error(serve("--db", str(db), *args, env=env), error)
    assert not db.exists()


def test_an_ipv6_host_is_announced_in_brackets(tmp_path: Path) -> None:
    """--host ::1 announced ws://::1:PORT (not a URL) on stdout and in PATH.lock, where
    `noughts games --db PATH` read it and ended in websockets' InvalidURI traceback."""
    db = tmp_path / "g.db"
    server = subprocess.Popen(
        [sys.executable, "-m", "server", "--port", "0", "--workers", "0", "--host", "::1",
         "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("noughts server listening on ws://[::1]:"), line
        url = line.split()[4]
        assert f'"url": "{url}"' in Path(f"{db}.lock").read_text()
        listed = noughts("games", "--db", str(db), timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.startswith("No finished games"), listed.stdout
    finally:
        server.terminate()
        server.communicate(timeout=60)


DB_CAP = "argument --db-max-mb: must be above 0 and at most 268435456"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--db-max-mb", "inf"], f"{DB_CAP}, not inf"),
        (["--db-max-mb", "1e308"], f"{DB_CAP}, not 1e308"),
        (["--db-max-mb", "nan"], f"{DB_CAP}, not nan"),
        (["--db-max-mb", "0"], f"{DB_CAP}, not 0"),
        (["--grace-s", "inf"], "argument --grace-s: must be a finite number, not inf"),
        (["--rate", "inf"], "argument --rate: must be a finite number, not inf"),
        # A server that says it is ready and refuses every AI game, or aborts every AI move
        # queued behind a busy worker ("could not start within 0s"):
        (["--max-ai-searches", "0"], "argument --max-ai-searches: must be 1 or more, not 0"),
        (["--engine-wait-s", "0"], "argument --engine-wait-s: must be above 0, not 0"),
    ],
)
def test_a_number_that_is_not_finite_or_past_its_bound_is_refused(
    tmp_path: Path, args: list[str], error: str
) -> None:
    """--db-max-mb inf (or 1e308) ended in an OverflowError traceback from the store; 0 made a
    server whose every write failed with storage_full; an infinite rate or time is no
    setting either."""
    db = tmp_path / "g.db"
    assert_usage_error(serve("--db", str(db), *args), error)
    assert not db.exists()


def test_the_largest_database_cap_is_taken(tmp_path: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "server", "--port", "0", "--workers", "0",
         "--db-max-mb", str(2**28), "--db", str(tmp_path / "g.db")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        assert server.stdout.readline().startswith("noughts server listening on ws://")
    finally:
        server.terminate()
        server.communicate(timeout=60)


NOT_REDIS = (
    "argument --bus: not a Redis URL redis://HOST:PORT/N: Redis URL must specify one of the "
    "following schemes (redis://, rediss://, unix://)"
)
NOT_POSTGRES = (
    "argument --db: not a PostgreSQL URL postgresql://USER@HOST/DB: invalid literal for int() "
    "with base 10: '::'"
)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--engine", "queue", "--bus", "http://x"], NOT_REDIS),
        (["--bus", "nonsense", "--db", PG_URL], NOT_REDIS),
        (["--bus", "redis://127.0.0.1:99999/0", "--db", PG_URL],
         "argument --bus: not a Redis URL redis://HOST:PORT/N: Port out of range 0-65535"),
        (["--db", "postgres://:::/"], NOT_POSTGRES),
        (["--db", "postgresql://ada:secret@dbhost:abc/games"],
         "argument --db: not a PostgreSQL URL postgresql://USER@HOST/DB: invalid literal for "
         "int() with base 10: 'abc'"),
    ],
)  # fmt: skip
def test_a_url_that_cannot_be_read_is_refused_before_anything_starts(
    tmp_path: Path, args: list[str], error: str
) -> None:
    """--engine queue --bus http://x ended in redis-py's ValueError traceback, and then the
    process hung holding the database's lock until SIGTERM; --bus nonsense with a PostgreSQL
    --db the same traceback; --db postgres://:::/ asyncpg's ValueError traceback."""
    result = serve("--db", str(tmp_path / "g.db"), *args)
    assert_usage_error(result, error)
    assert "secret" not in result.stderr
    assert not (tmp_path / "g.db").exists()


def test_migrate_and_engine_worker_refuse_such_urls_too() -> None:
    migrated = noughts("migrate", "--db", "postgres://:::/", timeout=60)
    assert migrated.returncode == 2 and "Traceback" not in migrated.stderr
    assert migrated.stderr == f"noughts migrate: error: {NOT_POSTGRES}{SEE_MIGRATE}\n"
    empty = noughts("migrate", env={"NOUGHTS_DB": ""}, timeout=60)
    assert empty.stderr == (
        "noughts migrate: error: argument --db: empty: a SQLite file or a postgresql:// URL"
        f"{SEE_MIGRATE}\n"
    )
    # (it said "cannot reach http://x: Redis URL must ...", exit 1: the same check now)
    worker = noughts("engine-worker", "--bus", "http://x", timeout=60)
    assert worker.returncode == 2
    assert worker.stderr == f"noughts engine-worker: error: {NOT_REDIS}{SEE_WORKER}\n"


@pytest.mark.parametrize(
    ("args", "env"), [(["--db", ""], {}), ([], {"NOUGHTS_DB": ""})], ids=["flag", "environment"]
)
def test_an_empty_database_is_refused(tmp_path: Path, args: list[str], env: dict[str, str]) -> None:
    """It fell back to the default database (in the user's data directory) without a word."""
    result = serve(*args, env={**env, "XDG_DATA_HOME": str(tmp_path)})
    where = "argument --db" if args else "$NOUGHTS_DB=''"
    assert_usage_error(result, f"{where}: empty: a SQLite file or a postgresql:// URL")
    assert not (tmp_path / "noughts").exists()


def _holding_a_port() -> socket.socket:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


async def test_a_cluster_node_whose_admin_port_is_in_use_is_one_line(
    pg_schema: str, redis_prefix: str
) -> None:
    """A node opens its admin port before it joins: a port in use was OSError's traceback
    (a single server's: tests/server/test_admin.py)."""
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f'CREATE SCHEMA "{pg_schema}"')
    finally:
        await conn.close()
    with _holding_a_port() as holder:
        port = holder.getsockname()[1]
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server", "--port", "0", "--workers", "0",
            "--db", schema_url(pg_schema), "--bus", REDIS_URL, "--bus-prefix", redis_prefix,
            "--admin-port", str(port), stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1, err.decode()
    assert "Traceback" not in err.decode()
    said = err.decode().strip().splitlines()[-1]
    assert said.startswith(
        f"noughts serve: cannot listen on the admin address 127.0.0.1:{port}: "
    ), said


@pytest.mark.parametrize("option", ["--workers", "--processes"])
def test_more_processes_than_one_machine_runs_are_refused(tmp_path: Path, option: str) -> None:
    """--workers 2000 was taken: each worker a process (300 spawned ~77 before anything
    else happened); --processes the same with server nodes."""
    db = tmp_path / "g.db"
    result = serve("--db", str(db), option, "2000")
    assert_usage_error(
        result, f"argument {option}: must be {0 if option == '--workers' else 1}..128, not 2000"
    )
    assert not db.exists()


def test_an_engine_worker_of_more_processes_than_one_machine_runs_is_refused() -> None:
    """noughts engine-worker --processes had no upper bound (serve's: 128)."""
    result = noughts("engine-worker", "--processes", "2000", timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == (
        "noughts engine-worker: error: argument --processes: must be 1..128, not 2000"
        f"{SEE_WORKER}\n"
    )


def test_a_bus_that_would_do_nothing_is_refused(tmp_path: Path) -> None:
    """--bus with a SQLite --db and the local engine was taken and did nothing: a bus serves
    a PostgreSQL server's cluster, or --engine queue (README, "Running a cluster")."""
    db = tmp_path / "g.db"
    result = serve("--db", str(db), "--bus", REDIS_URL)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "noughts serve: --bus needs --db postgresql://... (a node of the cluster) or "
        "--engine queue (AI searches on its queue)"
    ]
    assert not db.exists()


def test_a_secret_path_is_refused_with_more_processes(tmp_path: Path) -> None:
    """--secret-path makes a secret per process: the processes of --processes sharing the
    port would each answer the others' clients 403. Refused in one line, before anything
    starts."""
    db = tmp_path / "g.db"
    result = serve("--db", str(db), "--processes", "2", "--secret-path", "true")
    assert (result.returncode, result.stderr) == (
        2, "noughts serve: --secret-path is for one process, not --processes\n"
    )  # fmt: skip
    assert not db.exists()

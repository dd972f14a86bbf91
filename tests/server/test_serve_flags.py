"""`noughts serve` given careless or hostile option values: a usage error (argparse's usage
block and one error line, exit 2), never a traceback, a hang, or a server in a silly state.
Each runs the real command in a subprocess, as an operator does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.client.test_cli import noughts


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``noughts serve ARGS`` to its end (a hang fails the test at the timeout)."""
    return subprocess.run(
        [sys.executable, "-m", "server", "--port", "0", "--workers", "0", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def assert_usage_error(result: subprocess.CompletedProcess[str], error: str) -> None:
    """Exit 2 with argparse's usage block and the error line last, as every bad option."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("usage: noughts serve"), lines
    assert lines[-1] == f"noughts serve: error: {error}"


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

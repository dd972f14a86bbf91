"""Fixtures for every test package: the real services (PostgreSQL, Redis) the cluster tests
use; a sessions file of each test's own; and, at the end of a run on a machine without the
services, one line per missing service saying how many tests did not run and how to install
what they need."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.services import MISSING, pg_link, pg_schema, redis_prefix

__all__ = ["pg_link", "pg_schema", "redis_prefix"]


@pytest.fixture(autouse=True)
def own_sessions_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients a test runs (`noughts play`, `bot`, `games`, ...) save their sessions in
    the test's own file, never in the user's data directory."""
    monkeypatch.setenv("NOUGHTS_SESSIONS", str(tmp_path / "own-sessions.json"))


def pytest_configure(config: Any) -> None:
    # Tests press Ctrl-C (SIGINT) on the clients they start. A shell starts a background job
    # (`make test &`) with SIGINT ignored, an ignored signal stays ignored across exec, and
    # Python then never raises KeyboardInterrupt: caught here, the children start with the
    # default (three client tests waited out their timeouts in such a run).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        for service, hint in MISSING.items():
            if hint in reason:
                counts[service] = counts.get(service, 0) + 1
    for service, count in counts.items():
        tests = "test" if count == 1 else "tests"
        terminalreporter.write_line(
            f"{count} {tests} did not run: {service} is missing here ({MISSING[service]})",
            yellow=True,
        )

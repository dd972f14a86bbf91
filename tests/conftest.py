"""Fixtures for every test package: the real services (PostgreSQL, Redis) the cluster tests
use; and, at the end of a run on a machine without them, one line per missing service
saying how many tests did not run and how to install what they need."""

from __future__ import annotations

from typing import Any

from tests.services import MISSING, pg_schema, redis_prefix

__all__ = ["pg_schema", "redis_prefix"]


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

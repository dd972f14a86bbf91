"""Fixtures of the client tests: the in-process server of the UI tests, and a sessions file
of the test's own (the clients save their sessions: never in the user's data directory)."""

from pathlib import Path

import pytest

from tests.client.ui_support import ui_pool, ui_server

__all__ = ["ui_pool", "ui_server"]


@pytest.fixture(autouse=True)
def own_sessions_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOUGHTS_SESSIONS", str(tmp_path / "own-sessions.json"))

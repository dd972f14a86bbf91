"""Fixtures of the client tests: the in-process server of the UI tests (each test's own
sessions file: tests/conftest.py)."""

from tests.client.ui_support import ui_pool, ui_server

__all__ = ["ui_pool", "ui_server"]

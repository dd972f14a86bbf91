"""The client's import graph has no cycle (issue 12: app <-> game, lobby, replay), and the
screens never import the app: they talk to it through client/ui/messages.py."""

from __future__ import annotations

from pathlib import Path

import client
from tests.import_graph import find_cycle, import_graph

ROOT = Path(client.__file__).resolve().parent


def test_the_client_has_no_import_cycle() -> None:
    graph = import_graph(ROOT)
    assert "client.session_core" in graph["client.connection"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or ())


def test_no_screen_imports_the_app() -> None:
    graph = import_graph(ROOT)
    for screen in ("client.ui.game", "client.ui.lobby", "client.ui.replay", "client.ui.dialogs"):
        assert "client.ui.app" not in graph[screen], screen
    assert "client.ui.game" in graph["client.ui.app"]  # the app knows its screens

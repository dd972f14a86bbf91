"""ServerConnection's own reconnection (reconnect=True), against a real server."""

from __future__ import annotations

import asyncio

from client.connection import ServerConnection
from protocol import CreateGame, JoinGame, Snapshot
from tests.client.ui_support import UIServer


async def test_a_game_still_open_when_the_connection_dropped_starts_after_it(
    ui_server: UIServer,
) -> None:
    """The creator of an open game drops before anyone joins: after the reconnection it
    follows the game again, so the snapshot of its start reaches it."""
    ada = await ServerConnection.connect(ui_server.url, name="ada", reconnect=True)
    bob = await ui_server.connect("bob")
    try:
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        opened = await ada.next_event(timeout=30)
        assert isinstance(opened, Snapshot) and opened.status == "open"
        ada.drop()
        assert await asyncio.wait_for(ada.status_changes.get(), 30) == "connected"  # (initial)
        assert await asyncio.wait_for(ada.status_changes.get(), 30) == "reconnecting"
        assert await asyncio.wait_for(ada.status_changes.get(), 30) == "connected"
        await bob.request(JoinGame, game_id=seated.game_id)
        while True:
            event = await ada.next_event(timeout=30)
            assert isinstance(event, Snapshot) and event.game_id == seated.game_id
            if event.status == "live":
                break
            assert event.status == "open"  # the resume's own snapshot, before bob joined
        assert [p["name"] for p in event.players] == ["ada", "bob"]
        assert ada.token_for(seated.game_id) == seated.token
    finally:
        await ada.close()
        await bob.close()

"""PROTOCOL.md, "nil": a field whose value would be nil is left out, at every depth.

The one nil the wire carries is an open seat in `players` (a pair whose empty side is nil).
Every server frame a game's whole life produces is read raw (msgpack, not the codec's
classes) and walked for nils.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack

from protocol import (
    PROTOCOL_VERSION,
    CreateGame,
    GetGame,
    Hello,
    JoinGame,
    ListGames,
    LobbySubscribe,
    Move,
    Resign,
    Seek,
    Watch,
)
from tests.server.conftest import RawClient, RunningServer


def nils(value: Any, path: str = "") -> list[str]:
    """The paths of the nil values inside ``value``, an open seat in `players` excepted."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += nils(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if item is None and path.endswith(".players"):
                continue
            found += nils(item, f"{path}[{index}]")
    elif value is None:
        found.append(path)
    return found


class Frames:
    """A raw client that keeps every frame it receives, decoded by msgpack alone."""

    def __init__(self, client: RawClient) -> None:
        self.client = client
        self.seen: list[dict[str, Any]] = []

    async def until(self, type_: str, **fields: Any) -> dict[str, Any]:
        while True:
            frame = msgpack.unpackb(await asyncio.wait_for(self.client.websocket.recv(), 10))
            self.seen.append(frame)
            if frame["type"] == type_ and all(frame.get(k) == v for k, v in fields.items()):
                return frame

    async def ask(self, message: Any, reply: str, **fields: Any) -> dict[str, Any]:
        await self.client.send_message(message)
        return await self.until(reply, rid=message.rid, **fields)


async def test_no_nil_at_any_depth(server: RunningServer) -> None:
    ada = Frames(await RawClient.connect(server.url, hello=False))
    welcome = await ada.ask(Hello(rid=1, version=PROTOCOL_VERSION, name="ada"), "welcome")

    # A game against the AI: snapshot, the human's move, the AI's move with its stats.
    create = CreateGame(
        rid=2, game="tictactoe", opponent="ai", seat=0, algorithm="alphabeta", budget_ms=20
    )
    seated = await ada.ask(create, "seated")
    game_id, token = seated["game_id"], seated["token"]
    await ada.until("snapshot", game_id=game_id)
    await ada.ask(Move(rid=3, game_id=game_id, token=token, action=4, ply=0), "moved")
    await ada.until("moved", game_id=game_id, ply=1)

    # An open game with an empty seat, and a seek, both in the lobby.
    opened = await ada.ask(CreateGame(rid=4, game="5x5", opponent="human"), "seated")
    await ada.until("snapshot", game_id=opened["game_id"])
    await ada.ask(Seek(rid=5, game="gomoku"), "posted")
    await ada.ask(LobbySubscribe(rid=6), "lobby_state")
    await ada.ask(ListGames(rid=7, status="open"), "games")

    # Reconnecting: welcome.games lists the unfinished games.
    again = Frames(await RawClient.connect(server.url, hello=False))
    hello = Hello(rid=8, version=PROTOCOL_VERSION, session=welcome["session"])
    rejoined = await again.ask(hello, "welcome")
    assert {g["game_id"] for g in rejoined["games"]} >= {game_id, opened["game_id"]}

    # A second player joins the open game (snapshot to both), then the games end.
    bo = Frames(await RawClient.connect(server.url, hello=False))
    await bo.ask(Hello(rid=1, version=PROTOCOL_VERSION, name="bo"), "welcome")
    await bo.ask(JoinGame(rid=2, game_id=opened["game_id"]), "seated")
    await bo.until("snapshot", game_id=opened["game_id"], status="live")
    await ada.ask(Resign(rid=9, game_id=game_id, token=token), "ended")
    await ada.ask(GetGame(rid=10, game_id=game_id), "record")
    await ada.ask(ListGames(rid=11, status="finished"), "games")

    found = {(f["type"], path) for c in (ada, again, bo) for f in c.seen for path in nils(f)}
    assert not found, "; ".join(f"{t} {p}" for t, p in sorted(found))


# The keys of a snapshot a client of protocol 2 built before first_move_ms (2026-12-07)
# decodes: its decoder refuses any other with bad_field, so it could neither play nor
# watch a timed game (PROTOCOL.md, Versions).
SNAPSHOT_KEYS_BEFORE_FIRST_MOVE_MS = frozenset(
    "type game_id seq game params players actions status to_move result reason clock "
    "clocks at online offers next_game rid".split()
)


async def test_a_timed_game_at_default_settings_sends_what_older_clients_read(
    server: RunningServer,
) -> None:
    """A server at the default first move's time (30 s) leaves first_move_ms out of its
    snapshots, its absence meaning 30 s: a client of before that field plays and watches
    timed games on it. Only a watch or resume while a first move is due carries more: what
    is left of that move's time (first_move_left_ms; the start's snapshot leaves it out)."""
    ada = Frames(await RawClient.connect(server.url, hello=False))
    await ada.ask(Hello(rid=1, version=1, name="ada"), "welcome")
    bo = Frames(await RawClient.connect(server.url, hello=False))
    await bo.ask(Hello(rid=1, version=1, name="bo"), "welcome")
    create = CreateGame(rid=2, game="tictactoe", opponent="human", clock={"move_ms": 60_000})
    created = await ada.ask(create, "seated")
    game_id = created["game_id"]
    joined = await bo.ask(JoinGame(rid=2, game_id=game_id), "seated")
    await bo.until("snapshot", game_id=game_id, status="live")
    await ada.until("snapshot", game_id=game_id, status="live")
    early = Frames(await RawClient.connect(server.url, hello=False))
    await early.ask(Hello(rid=1, version=1, name="dee"), "welcome")
    during = await early.ask(Watch(rid=2, game_id=game_id), "snapshot")
    assert 0 < during["first_move_left_ms"] <= 30_000
    assert set(during) - SNAPSHOT_KEYS_BEFORE_FIRST_MOVE_MS == {"first_move_left_ms"}
    move = Move(rid=3, game_id=game_id, token=created["token"], action=4, ply=0)
    await ada.ask(move, "moved")
    move = Move(rid=3, game_id=game_id, token=joined["token"], action=0, ply=1)
    await bo.ask(move, "moved")
    watcher = Frames(await RawClient.connect(server.url, hello=False))
    await watcher.ask(Hello(rid=1, version=1, name="cy"), "welcome")
    await watcher.ask(Watch(rid=2, game_id=game_id), "snapshot")

    snapshots = [f for c in (ada, bo, watcher) for f in c.seen if f["type"] == "snapshot"]
    assert any(f["clock"] for f in snapshots)
    extra = {k for f in snapshots for k in f} - SNAPSHOT_KEYS_BEFORE_FIRST_MOVE_MS
    assert not extra

"""Issue 11, finding 5 (lobby poisoning), measured against a running server.

N connections from this address, each a new session (``hello`` without one) creating up
to 20 AI games; then the size of the ``lobby_state`` a bystander gets, and how long the
games stay listed after the attackers leave. The bystander connects before the attack.

    python bench/lobby_poison.py ws://127.0.0.1:8765 --connections 510 --watch-s 150

Run it against a server of your own on loopback only (``noughts serve --port 0``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import msgpack
import websockets
from arguments import non_negative_float, positive_int

from client.connection import RequestFailed, ServerConnection
from protocol import PROTOCOL_VERSION, CreateGame, Hello, LobbySubscribe, encode

GAMES_PER_CONNECTION = 20


class Bystander:
    """One connection opened before the attack: a lobby_state on request."""

    async def open(self, url: str) -> Bystander:
        self.ws = await websockets.connect(url, compression=None, max_size=None)
        await self.ws.send(encode(Hello(rid=1, version=PROTOCOL_VERSION, name="anonymous")))
        await self.ws.recv()
        self.rid = 10
        return self

    async def lobby(self) -> tuple[int, int]:
        """(bytes of the lobby_state frame, games it lists)."""
        self.rid += 1
        await self.ws.send(encode(LobbySubscribe(rid=self.rid)))
        while True:
            frame = await self.ws.recv()
            message = msgpack.unpackb(frame, raw=False)
            if message.get("rid") == self.rid:
                if message.get("type") != "lobby_state":
                    raise RuntimeError(f"the lobby was refused: {message}")
                return len(frame), len(message.get("games", []))


async def attacker(url: str, stats: dict[str, Any]) -> ServerConnection | None:
    try:
        connection = await ServerConnection.connect(url, name="anonymous")
    except RequestFailed as exc:
        stats["hello_refused"] += 1
        stats["codes"].add(exc.code)
        return None
    for _ in range(GAMES_PER_CONNECTION):
        try:
            await connection.request(
                CreateGame, game="tictactoe", opponent="ai", seat=0, budget_ms=1
            )
        except RequestFailed as exc:
            stats["game_refused"] += 1
            stats["codes"].add(exc.code)
            break
        stats["games"] += 1
    return connection


async def main(url: str, connections: int, watch_s: float) -> None:
    bystander = await Bystander().open(url)
    stats: dict[str, Any] = {"games": 0, "hello_refused": 0, "game_refused": 0, "codes": set()}
    started = time.monotonic()
    clients: list[ServerConnection | None] = []
    for first in range(0, connections, 50):
        batch = range(first, min(connections, first + 50))
        clients += await asyncio.gather(*(attacker(url, stats) for _ in batch))
    took = time.monotonic() - started
    size, listed = await bystander.lobby()
    print(
        f"{connections} connections: {stats['games']} games created, "
        f"{stats['hello_refused']} hellos and {stats['game_refused']} creates refused "
        f"({', '.join(sorted(stats['codes'])) or 'no error'}) in {took:.1f} s; "
        f"lobby_state {size:,} bytes listing {listed} games",
        flush=True,
    )
    for client in clients:
        if client is not None:
            await client.close()
    left = time.monotonic()
    while listed and time.monotonic() - left < watch_s:
        await asyncio.sleep(5)
        size, listed = await bystander.lobby()
        print(f"  +{time.monotonic() - left:.0f} s after the attackers left: "
              f"lobby_state {size:,} bytes listing {listed} games", flush=True)  # fmt: skip
    await bystander.ws.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the server, e.g. ws://127.0.0.1:8765")
    parser.add_argument(
        "--connections", type=positive_int, default=510, help="attacking connections"
    )
    parser.add_argument(
        "--watch-s",
        type=non_negative_float,
        default=150.0,
        help="seconds to watch the lobby afterwards",
    )
    args = parser.parse_args()
    asyncio.run(main(args.url, args.connections, args.watch_s))

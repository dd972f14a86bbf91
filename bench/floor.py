"""The floor under ``bench/load.py throughput``: a bare websockets + msgpack + SQLite server.

Issue 13 measures the server's CPU per committed move against "a bare
websockets+msgpack+SQLite prototype on this machine". This is that prototype, kept in the
repository so the ratio can be measured again on whatever machine runs the figures (the
absolute microseconds move with the CPU; the ratio does not). The bare server does only what
every move must: decode one msgpack frame, append the move to SQLite in a group commit on a
writer thread (WAL, ``synchronous=NORMAL``, as ``server.store``), and after the commit send
an acknowledgement to the mover and the move to the opponent. No validation, no rules, no
clocks, no tokens. Its players are bench/load.py's minimal websocket client, so the load
costs what it costs there.

    python bench/floor.py --games 200 --duration 10     # against the bare server
    python bench/load.py throughput --games 200         # against noughts, to compare
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import msgpack

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from arguments import positive_float, positive_int  # noqa: E402
from load import WebSocketLink, _cpu_s, _free_port, _load_average, stop_on_sigterm  # noqa: E402

CELLS = 225  # gomoku's board, as load.py's default game


# --- the bare server ------------------------------------------------------------------------


def serve(port: int, db: str) -> None:
    """Run the bare server until killed."""
    import websockets.asyncio.server as ws_server

    connection = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("CREATE TABLE moves (game INTEGER, ply INTEGER, action INTEGER)")
    jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        games: dict[int, list[Any]] = {}
        pending: deque[tuple[tuple[int, int, int], asyncio.Future[None]]] = deque()
        flushing = False

        def committed(batch: list[Any]) -> None:
            nonlocal flushing
            flushing = False
            for _, done in batch:
                done.set_result(None)
            flush()

        def flush() -> None:
            nonlocal flushing
            if flushing or not pending:
                return
            batch = list(pending)
            pending.clear()
            flushing = True
            jobs.put(batch)

        def writer() -> None:  # one transaction a batch: SQLite's group commit
            while True:
                batch = jobs.get()
                connection.execute("BEGIN")
                connection.executemany(
                    "INSERT INTO moves VALUES (?, ?, ?)", [row for row, *_ in batch]
                )
                connection.execute("COMMIT")
                loop.call_soon_threadsafe(committed, batch)

        threading.Thread(target=writer, daemon=True).start()

        async def handler(websocket: Any) -> None:
            async for frame in websocket:
                message = msgpack.unpackb(frame, raw=False, strict_map_key=True)
                game, seat = message["g"], message["s"]
                seats = games.setdefault(game, [None, None])
                seats[seat] = websocket
                if "a" not in message:
                    continue
                opponent = seats[1 - seat]
                if opponent is None:
                    continue
                done = loop.create_future()
                pending.append(((game, message["p"], message["a"]), done))
                flush()
                await done  # commit before acknowledge
                await websocket.send(msgpack.packb({"t": "ok", "p": message["p"]}))
                await opponent.send(
                    msgpack.packb({"t": "moved", "p": message["p"], "a": message["a"]})
                )

        async with ws_server.serve(handler, "127.0.0.1", port, compression=None):
            await asyncio.Future()

    asyncio.run(main())


# --- the players ----------------------------------------------------------------------------


async def play(port: int, games: int, duration: float) -> tuple[int, int, list[float]]:
    """Each game's two seats alternate moves as fast as the acknowledgements come: the
    moves acknowledged in the measured window, in all, and their round trips."""
    moves = 0
    round_trips: list[float] = []
    sent_at: dict[tuple[int, int], float] = {}
    links: dict[tuple[int, int], WebSocketLink] = {}
    ply: dict[int, int] = {}
    stop_at = 0.0

    def mover(game: int) -> None:
        if time.perf_counter() >= stop_at:
            return
        seat = ply[game] % 2
        sent_at[(game, seat)] = time.perf_counter()
        body = {"g": game, "s": seat, "p": ply[game], "a": ply[game] % CELLS}
        links[(game, seat)].send(msgpack.packb(body))

    def on_message(game: int, seat: int, data: bytes) -> None:
        nonlocal moves
        message = msgpack.unpackb(data)
        if message["t"] == "ok":
            moves += 1
            round_trips.append(time.perf_counter() - sent_at[(game, seat)])
            ply[game] += 1
        elif message["t"] == "moved":
            mover(game)

    for game in range(games):
        for seat in (0, 1):
            links[(game, seat)] = await WebSocketLink.connect(
                "127.0.0.1",
                port,
                lambda data, g=game, s=seat: on_message(g, s, data),
                lambda link: None,
            )
            links[(game, seat)].send(msgpack.packb({"g": game, "s": seat}))
        ply[game] = 0
    await asyncio.sleep(0.2)  # every seat registered
    stop_at = time.perf_counter() + duration
    started = moves
    for game in range(games):
        mover(game)
    await asyncio.sleep(duration + 0.5)
    for link in links.values():
        link.close()
    return moves - started, moves, round_trips


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The bare websockets+msgpack+SQLite server under bench/load.py's players: "
        "moves/s and server CPU per move, the floor to compare noughts against."
    )
    parser.add_argument(
        "--games", type=positive_int, default=200, help="concurrent games (default 200)"
    )
    parser.add_argument(
        "--duration", type=positive_float, default=10.0, help="seconds (default 10)"
    )
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(int(args.serve[0]), args.serve[1])
        return 0
    stop_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="noughts-floor-") as tmp:
        port = _free_port()
        db = os.path.join(tmp, "floor.db")
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port), db],
            start_new_session=True,  # a session of its own, as bench/load.py runs its server
        )
        try:
            time.sleep(1.0)
            cpu_before = _cpu_s(server.pid)
            moves, acked, round_trips = asyncio.run(play(port, args.games, args.duration))
            cpu = _cpu_s(server.pid) - cpu_before
        finally:
            server.kill()
            server.wait()
        with sqlite3.connect(db) as check:  # every acknowledged move was committed first
            (stored,) = check.execute("SELECT count(*) FROM moves").fetchone()
    round_trips.sort()
    p50 = round_trips[len(round_trips) // 2] * 1000 if round_trips else float("nan")
    print(
        f"bare server, {args.games} games, {args.duration:g} s, load average {_load_average()}:"
        f" {moves / args.duration:,.0f} moves/s, server CPU {cpu / max(moves, 1) * 1e6:.1f} us"
        f" a move, round trip p50 {p50:.2f} ms; {stored:,} moves stored, {acked:,} acknowledged"
    )
    return 0 if stored >= acked else 1


if __name__ == "__main__":
    sys.exit(main())

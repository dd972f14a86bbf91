"""`python -m server`: run the noughts game server (also `noughts serve`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys

from server.store import default_db_path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="noughts serve",
        description="Run the noughts game server: websocket + msgpack, games logged to SQLite.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("NOUGHTS_PORT", 8765)),
        help="port to listen on; 0 picks a free one (default: $NOUGHTS_PORT or 8765)",
    )
    parser.add_argument(
        "--db",
        default=None,
        help=f"SQLite database file (default: $NOUGHTS_DB or {default_db_path()})",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="engine worker processes for AI moves; 0 disables AI games (default: CPU count)",
    )
    parser.add_argument(
        "--grace-s",
        type=float,
        default=60.0,
        help="seconds a seat is held after its player leaves; then the opponent may claim "
        "the game (default: %(default)s)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=200.0,
        help="messages per second a connection may send, sustained (default: %(default)s)",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=400,
        help="messages a connection may send in a burst (default: %(default)s)",
    )
    parser.add_argument(
        "--compression",
        choices=["none", "deflate"],
        default="none",
        help="websocket permessage-deflate: none (the default: frames are a few dozen bytes "
        "and deflate costs memory per connection) or deflate",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=20_000,
        help="connections held at most; more are refused with HTTP 503 (default: %(default)s)",
    )
    parser.add_argument(
        "--max-per-ip",
        type=int,
        default=2_000,
        help="connections held at most from one address (default: %(default)s)",
    )
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="event loop: the standard asyncio loop, or uvloop if you installed it (no "
        "measurable difference in bench/load.py on this class of machine; see the "
        "README's figures) (default: %(default)s)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity (default: %(default)s)",
    )
    return parser


async def run(args: argparse.Namespace) -> int:
    from server.app import GameServer, ServerSettings, running
    from server.errors import ServerError
    from server.pool import EnginePool
    from server.store import SQLiteStore

    db_path = args.db or default_db_path()
    store = SQLiteStore(db_path)
    try:
        await store.open()
    except ServerError as exc:
        print(f"noughts serve: {exc}", file=sys.stderr)
        return 1
    pool = None
    if args.workers != 0:
        pool = EnginePool(args.workers)
        logging.info("starting %d engine workers", pool.size)
        await pool.start_async()
    settings = ServerSettings(
        grace_s=args.grace_s,
        rate_per_s=args.rate,
        burst=args.burst,
        compression=None if args.compression == "none" else args.compression,
        max_connections=args.max_connections,
        max_connections_per_ip=args.max_per_ip,
    )
    game_server = GameServer(store, pool, settings=settings)
    try:
        async with running(game_server, args.host, args.port) as ws_server:
            port = next(iter(ws_server.sockets)).getsockname()[1]
            # Everything alive now (modules, numba's tables, restored games) leaves the
            # collector's generations: full collections then walk only what games
            # allocate later, which keeps their pauses short (Python docs, gc.freeze).
            gc.freeze()
            # The first line on stdout is the address: the embedded client reads it.
            print(
                f"noughts server listening on ws://{args.host}:{port} (db: {db_path})", flush=True
            )
            stop = asyncio.get_running_loop().create_future()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError):
                    asyncio.get_running_loop().add_signal_handler(sig, stop.set_result, None)
            await stop
            logging.info("shutting down")
    except OSError as exc:
        print(f"noughts serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    except ServerError as exc:
        print(f"noughts serve: {exc}", file=sys.stderr)
        return 1
    finally:
        await store.close()
        if pool:
            pool.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            print("noughts serve: uvloop is not installed (pip install uvloop)", file=sys.stderr)
            return 2
        return int(uvloop.run(run(args)))
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())

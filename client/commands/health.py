"""`noughts health`: check that a server answers (hello, ping); exit 0 if it does."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "health",
        help="check that a server answers",
        description="Connect, say hello, ping, and report the round trip. Exit 0 if healthy.",
    )
    parser.add_argument(
        "--server",
        default=os.environ.get("NOUGHTS_SERVER", "ws://127.0.0.1:8765"),
        metavar="URL",
        help="server to check (default: $NOUGHTS_SERVER or %(default)s)",
    )
    parser.add_argument(
        "--timeout", type=_seconds, default=5.0, help="seconds, above 0 (default: 5)"
    )
    parser.set_defaults(func=run)


def _seconds(text: str) -> float:
    """A time in seconds above 0 (0, a negative time or NaN reported every server
    unhealthy at once; infinity waited for ever)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be seconds above 0, not {text}")
    return value


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_health(args))


async def _health(args: argparse.Namespace) -> int:
    from client.connection import ServerUnreachable
    from client.sessions import SessionStore, connect_as_guest
    from protocol import Ping

    try:
        async with asyncio.timeout(args.timeout) as deadline:
            # As a guest: a name is bound to the session that first used it (PROTOCOL.md,
            # Sessions), so a fixed name would be refused to every check after the first.
            connection = await connect_as_guest(SessionStore.default(), args.server, args.server)
            started = time.perf_counter()
            await connection.request(Ping)
            elapsed = (time.perf_counter() - started) * 1000
            await connection.close()
    except Exception as exc:
        reason: object = exc.reason if isinstance(exc, ServerUnreachable) else exc
        if deadline.expired():  # (a TimeoutError says nothing)
            reason = f"timed out after {args.timeout:g} s"
        print(f"unhealthy: {args.server}: {reason}", file=sys.stderr)
        return 1
    server = connection.welcome.server if connection.welcome else "?"
    print(f"healthy: {args.server} ({server}), ping {elapsed:.2f} ms")
    return 0

"""`noughts serve`: run the game server (this process becomes `python -m server`)."""

from __future__ import annotations

import argparse
import os
import sys


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "serve",
        help="run the game server",
        description="Run the noughts game server. Options: --host (default 127.0.0.1), "
        "--port (default 8765, 0 = free port), --db PATH (default $NOUGHTS_DB or your data "
        "directory), --workers N (engine processes).",
        add_help=False,
    )
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The client never imports the server: hand over to `python -m server`.
    argv = [sys.executable, "-m", "server", *args.args]
    os.execv(sys.executable, argv)
    return 0  # not reached

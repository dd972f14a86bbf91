"""`noughts serve`: run the game server (this process becomes `python -m server`)."""

from __future__ import annotations

import argparse
import os
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
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
    return exec_server(args.args)


def exec_server(argv: list[str]) -> int:
    """Become `python -m server ARGV` (the client never imports the server)."""
    os.execv(sys.executable, [sys.executable, "-m", "server", *argv])
    return 0  # not reached

"""The commands that become a server process: `noughts serve` (`python -m server`),
`noughts migrate` and `noughts engine-worker`. The client never imports the server: the
process execs the server module, whose own parser owns every option, `--help` included."""

from __future__ import annotations

import argparse
import os
import sys

# command -> (server module, help line)
SERVER_COMMANDS = {
    "serve": ("server", "run the game server"),
    "migrate": ("server.migrate", "create or upgrade a database's schema"),
    "engine-worker": (
        "server.engine_worker",
        "run engine workers for a cluster (AI searches from its Redis queue)",
    ),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    for command, (module, help_line) in SERVER_COMMANDS.items():
        parser = subparsers.add_parser(
            command,
            help=help_line,
            description=f"{help_line[0].upper()}{help_line[1:]}: `noughts {command} --help` "
            "lists the options.",
            add_help=False,
        )
        parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(func=lambda args, module=module: exec_server(args.args, module))


def exec_server(argv: list[str], module: str = "server") -> int:
    """Become `python -m MODULE ARGV`."""
    os.execv(sys.executable, [sys.executable, "-m", module, *argv])

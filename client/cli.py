"""The `noughts` console command: one parser, one subcommand per module.

Each module named in COMMANDS exposes ``register(subparsers)``, which adds its
parser and sets ``func`` to a callable taking the parsed namespace and
returning an exit code. Heavy imports stay inside those callables so that
``noughts --help`` is instant.

The client never imports ``server``: ``noughts serve`` replaces this process
with ``python -m server``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Modules that register subcommands, in the order `noughts --help` lists them.
COMMANDS = [
    "client.commands.serve",
    "client.commands.play",
    "client.commands.games",
    "client.commands.seeks",
    "client.commands.replay",
    "client.commands.watch",
    "client.commands.bot",
    "client.commands.export",
    "client.commands.arena",
    "client.commands.bench",
    "client.commands.brain",
    "client.commands.health",
]

DB_ENV = "NOUGHTS_DB"
SERVER_ENV = "NOUGHTS_SERVER"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone when it is one of them: a
    command's run then imports only its own module (the others cost a bot's or a brain's
    start-up about 0.1 s of imports)."""
    from engine.command_line import CommandParser

    parser = CommandParser(
        prog="noughts",
        description="noughts: tic-tac-toe, m,n,k games and ultimate tic-tac-toe over the network.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = [name for name in COMMANDS if name.rpartition(".")[2] == command] or COMMANDS
    for name in names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a command still being built is simply not offered
        module.register(subparsers)
    return parser


class _Version(argparse.Action):
    """--version, importing the version's module only when it is asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from protocol.version import software_version

        print(f"noughts {software_version()}")
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names; its exit code. Output that cannot be written (a full
    disk, ``>/dev/full``) is one line on stderr and exit 1, whatever the command."""
    from client.terminal import discard_output, unwritable

    argv = sys.argv[1:] if argv is None else argv
    try:
        code = _main(argv)
        sys.stdout.flush()  # (what is still buffered fails here, not at the exit)
    except OSError as exc:
        if not unwritable(exc):
            raise
        discard_output()
        command = next((a for a in argv if not a.startswith("-")), "")
        where = f"noughts {command}" if command else "noughts"
        print(f"{where}: cannot write the output: {exc.strerror}", file=sys.stderr)
        return 1
    return code


def _main(argv: list[str]) -> int:
    from client.commands.serve import SERVER_COMMANDS, exec_server
    from client.terminal import tolerant_streams

    tolerant_streams()  # a closed stream, an ASCII locale: never a traceback

    if argv[:1] and argv[0] in SERVER_COMMANDS:
        # Every option, --help included, belongs to the server's own parser.
        return exec_server(argv[1:], SERVER_COMMANDS[argv[0]][0])
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "server", None):
        from client.connection import plain_text_warning, server_url

        try:
            args.server = server_url(args.server)
        except ValueError as exc:
            print(f"noughts {args.command}: --server: {exc}", file=sys.stderr)
            return 2
        # Once, before anything connects (the interface would hide a line written later).
        if warning := plain_text_warning(args.server):
            print(f"noughts {args.command}: {warning}", file=sys.stderr)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        from client.commands.interrupts import INTERRUPTED

        return INTERRUPTED
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

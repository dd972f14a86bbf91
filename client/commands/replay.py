"""`noughts replay GAME_ID`: step through a stored game, move by move."""

from __future__ import annotations

import argparse
import asyncio
import sys

from client.commands.common import add_server_arguments, fetch_record


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="step through a stored game",
        description="Step through a stored game: n(ext), p(revious), f(irst), l(ast), a move "
        "number, q(uit). With --all (or when stdin is not a terminal and no commands come), "
        "print every position.",
    )
    parser.add_argument("game_id", metavar="GAME_ID", help="the game's id (see: noughts games)")
    add_server_arguments(parser, name=False)
    parser.add_argument("--all", action="store_true", help="print every position and exit")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_replay(args))


async def _replay(args: argparse.Namespace) -> int:
    from client.plain import read_stdin, write_prompt
    from client.replay import RecordError, ReplayCursor, print_all, step_through

    record = await fetch_record(args, "replay")
    if record is None:
        return 1
    try:
        cursor = ReplayCursor(record)
    except RecordError as exc:
        why = f"{exc} (noughts export {args.game_id} shows it as stored)"
        print(f"noughts replay: {why}", file=sys.stderr)
        return 1
    if args.all:
        print_all(cursor, print)
        return 0
    await step_through(
        cursor,
        read_stdin,
        print,
        prompt=write_prompt,
        all_without_commands=not sys.stdin.isatty(),
    )
    return 0

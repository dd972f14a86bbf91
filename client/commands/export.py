"""`noughts export GAME_ID --format json|sgf|svg`: a stored game as a file to share."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from client.commands.common import add_server_arguments, fetch_record


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a stored game as JSON, SGF or an SVG picture",
        description="Export a stored game: json (every stored field, AI statistics included), "
        "sgf (m,n,k games: tictactoe, mnk, 5x5, gomoku; Gomoku GM[4], X as Black) or svg (a "
        "picture of the final position, or of --ply N).",
    )
    parser.add_argument("game_id", metavar="GAME_ID", help="the game's id (see: noughts games)")
    parser.add_argument(
        "--format",
        default="json",
        choices=("json", "sgf", "svg"),
        help="output format (default: %(default)s)",
    )
    parser.add_argument(
        "--ply",
        type=int,
        metavar="N",
        help="svg only: draw the position after N moves (default: the final position)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE instead of standard output"
    )
    add_server_arguments(parser, name=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_export(args))


async def _export(args: argparse.Namespace) -> int:
    from client.export import ExportError, export

    if args.ply is not None and args.format != "svg":
        print("noughts export: --ply applies to --format svg only", file=sys.stderr)
        return 2
    record = await fetch_record(args, "export")
    if record is None:
        return 1
    try:
        text = export(record, args.format, args.ply)
    except ExportError as exc:
        print(f"noughts export: {exc}", file=sys.stderr)
        return 1
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"noughts export: cannot write {args.output}: {exc}", file=sys.stderr)
            return 1
    else:
        # A file's bytes, UTF-8 as JSON, SGF (CA[UTF-8]) and SVG declare, whatever the
        # terminal's encoding (an ASCII locale's stdout raised UnicodeEncodeError on a name).
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
    return 0

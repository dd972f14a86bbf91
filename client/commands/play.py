"""`noughts play`: play a game from the terminal, against the AI by default.

On a terminal it opens the Textual UI (lobby, game, watch, replay); with --plain, or
when stdout is not a terminal, the line-oriented client of client/plain.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from client.commands.common import add_server_arguments, connect

GAME_CHOICES = ("tictactoe", "5x5", "gomoku", "uttt", "mnk")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "play",
        help="play a game (against the AI unless told otherwise)",
        description="Play a game in the terminal. Without --server, an embedded server is "
        "started on a free local port and stopped on exit.",
    )
    add_server_arguments(parser)
    parser.add_argument(
        "--game", default="tictactoe", choices=GAME_CHOICES, help="game (default: %(default)s)"
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=N",
        help="game parameter for --game mnk, e.g. --param m=7 --param n=7 --param k=5",
    )
    parser.add_argument(
        "--ai",
        default="mcts",
        metavar="ALGORITHM",
        help="the AI's search: mcts, alphabeta, perfect, flat, minimax, random "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--budget-ms", type=int, default=500, help="the AI's time per move (default: %(default)s)"
    )
    parser.add_argument(
        "--seat",
        choices=("x", "o", "random"),
        default="x",
        help="play X (moves first), O, or random (default: %(default)s)",
    )
    parser.add_argument(
        "--human",
        action="store_true",
        help="open a seat for another player instead of playing the AI",
    )
    parser.add_argument("--join", metavar="GAME_ID", help="join another player's open game")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--lobby",
        action="store_true",
        help="open the lobby (seeks, live games, recent games) instead of a game against the AI",
    )
    where.add_argument("--watch", metavar="GAME_ID", help="watch a live game as a spectator")
    where.add_argument("--replay", metavar="GAME_ID", help="open a stored game in the replay view")
    parser.add_argument(
        "--plain",
        action="store_true",
        help="line-oriented client (the default when stdout is not a terminal)",
    )
    parser.set_defaults(func=run)


def parse_params(items: list[str]) -> dict[str, int]:
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise SystemExit(f"noughts play: --param wants KEY=N, got {item!r}")
        params[key.strip()] = int(value)
    return params


def run(args: argparse.Namespace) -> int:
    if args.plain or not sys.stdout.isatty() or not sys.stdin.isatty():
        if args.lobby or args.watch or args.replay:
            print(
                "noughts play: --lobby, --watch and --replay need the terminal UI "
                "(use noughts replay GAME_ID for a plain replay)",
                file=sys.stderr,
            )
            return 2
        return asyncio.run(_play(args))
    return asyncio.run(_play_ui(args))


def ui_start(args: argparse.Namespace) -> Any:
    """What the Textual app opens first, from the command line."""
    from client.ui import Start

    if args.lobby:
        return Start("lobby")
    if args.watch:
        return Start("watch", game_id=args.watch)
    if args.replay:
        return Start("replay", game_id=args.replay)
    if args.join:
        return Start("join", game_id=args.join)
    seat = {"x": 0, "o": 1, "random": -1}[args.seat]
    return Start(
        "ai",
        fields={
            "game": args.game,
            "params": parse_params(args.param),
            "opponent": "human" if args.human else "ai",
            "seat": seat,
            "algorithm": args.ai,
            "budget_ms": args.budget_ms,
        },
    )


async def _play_ui(args: argparse.Namespace) -> int:
    from client.commands.common import default_db_path
    from client.embedded import EmbeddedServer, EmbeddedServerError
    from client.ui import NoughtsApp

    start = ui_start(args)
    name = args.name[:32]
    if args.server:
        await NoughtsApp(args.server, name=name, start=start).run_async()
        return 0
    db = Path(args.db) if args.db else default_db_path()
    print("Starting a local server (the first start compiles the engine)...", file=sys.stderr)
    try:
        async with EmbeddedServer(db, log_path=db.with_name(db.name + ".server.log")) as url:
            await NoughtsApp(url, name=name, start=start).run_async()
    except (EmbeddedServerError, OSError) as exc:
        print(f"noughts play: {exc}", file=sys.stderr)
        return 1
    return 0


async def _play(args: argparse.Namespace) -> int:
    from client.connection import ConnectionLost, RequestFailed
    from client.embedded import EmbeddedServerError
    from client.plain import PlainGame

    seat = {"x": 0, "o": 1, "random": -1}[args.seat]
    try:
        if not args.server:
            print(
                "Starting a local server (the first start compiles the engine)...", file=sys.stderr
            )
        async with connect(args) as connection:
            game = PlainGame(connection)
            if args.join:
                await game.join(args.join)
            else:
                await game.create(
                    game=args.game,
                    params=parse_params(args.param),
                    opponent="human" if args.human else "ai",
                    seat=seat,
                    algorithm=args.ai,
                    budget_ms=args.budget_ms,
                )
            ended = await game.run()
            return 0 if ended is not None or game.game_id else 1
    except RequestFailed as exc:
        print(f"noughts play: the server refused: {exc.message}", file=sys.stderr)
        return 1
    except (ConnectionLost, OSError, EmbeddedServerError) as exc:
        print(f"noughts play: {exc}", file=sys.stderr)
        return 1

"""`noughts play`: play a game from the terminal, against the AI by default."""

from __future__ import annotations

import argparse
import asyncio
import sys

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
    return asyncio.run(_play(args))


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

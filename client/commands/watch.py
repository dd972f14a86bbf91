"""`noughts watch`: follow a live game as a spectator, move by move."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from client.commands.common import SERVER_ENV


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "watch",
        help="follow a live game as a spectator",
        description="Follow a live game from its current position until it ends. Without "
        "GAME_ID, list the live games to choose from.",
    )
    parser.add_argument("game_id", nargs="?", metavar="GAME_ID", help="the game to follow")
    parser.add_argument(
        "--server",
        default=os.environ.get(SERVER_ENV),
        metavar="URL",
        help="the server the game is played on (default: $NOUGHTS_SERVER)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.server:
        print(
            "noughts watch: give the game's server (--server URL or $NOUGHTS_SERVER)",
            file=sys.stderr,
        )
        return 2
    return asyncio.run(_watch(args))


async def _watch(args: argparse.Namespace) -> int:
    from client.commands.games import format_games
    from client.connection import ConnectionLost, RequestFailed, ServerConnection
    from client.spectator import follow
    from protocol import ListGames, Watch

    try:
        connection = await ServerConnection.connect(
            args.server, name="spectator", client="noughts-watch", reconnect=True
        )
    except OSError as exc:
        print(f"noughts watch: {exc}", file=sys.stderr)
        return 1
    try:
        if not args.game_id:
            reply = await connection.request(ListGames, status="live", limit=100)
            print(format_games(list(reply.games)))
            return 0
        await connection.request(Watch, game_id=args.game_id)
        await follow(connection, args.game_id, print)
        return 0
    except RequestFailed as exc:
        print(f"noughts watch: {exc.message}", file=sys.stderr)
        return 1
    except ConnectionLost as exc:
        print(f"noughts watch: {exc}", file=sys.stderr)
        return 1
    finally:
        await connection.close()

"""`noughts watch`: follow a live game as a spectator, move by move, or the lobby's live
games as they start and end."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from client.commands.common import SERVER_ENV, status_lines

if TYPE_CHECKING:
    from client.connection import RequestFailed, ServerConnection


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "watch",
        help="follow a live game as a spectator",
        description="Follow a live game from its current position until it ends. Without "
        "GAME_ID, follow the lobby: the live games now, then each game as it starts (+) "
        "and ends (-), until Ctrl-C. The lobby sends its changes four times a second: a "
        "game begun and over between two (a quick game of bots) is not shown; noughts "
        "games lists it.",
    )
    parser.add_argument(
        "game_id", nargs="?", metavar="GAME_ID", help="the game to follow (default: the lobby)"
    )
    parser.add_argument(
        "--rematches",
        action="store_true",
        help="after the game's end, wait for its rematch and follow it, and each rematch "
        "after it, as Lichess moves its spectators (until Ctrl-C, or until the server lets "
        "the game go without one: 10 minutes after its end by default, or once both players "
        "have left: a server of protocol version 3 says so, an older one is asked every 30 s)",
    )
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
    from client.connection import ConnectionLost, RequestFailed
    from client.game_view import GameDataError
    from client.sessions import SessionStore, connect_as_guest
    from client.spectator import follow
    from protocol import Watch

    # Flushed a line at a time: a follower is read live, often through a pipe.
    write = functools.partial(print, flush=True)

    try:
        # As a guest: a spectator needs no name, and a fixed one would be bound to the first
        # watcher's session and refused to every other (PROTOCOL.md, Sessions).
        connection = await connect_as_guest(
            SessionStore.default(),
            args.server,
            args.server,
            client="noughts-watch",
            reconnect=True,
            on_status=status_lines(),  # its drops and returns on stderr, as every command's
        )
    except OSError as exc:
        print(f"noughts watch: {exc}", file=sys.stderr)
        return 1
    except RequestFailed as exc:
        print(f"noughts watch: the server refused: {exc.message}", file=sys.stderr)
        return 1
    try:
        if not args.game_id:
            await follow_lobby(connection, write)
            return 1  # the connection closed for good (follow_lobby raises ConnectionLost)
        try:
            await connection.request(Watch, game_id=args.game_id)
        except RequestFailed as exc:
            why = await _why_not_live(connection, args.game_id, exc)
            print(f"noughts watch: {why}", file=sys.stderr)
            return 1
        await follow(connection, args.game_id, write, rematches=args.rematches)
        return 0
    except GameDataError as exc:  # a game this noughts does not know, a move it refuses
        print(f"noughts watch: game {args.game_id} cannot be followed: {exc}", file=sys.stderr)
        return 1
    except RequestFailed as exc:
        print(f"noughts watch: {exc.message}", file=sys.stderr)
        return 1
    except ConnectionLost as exc:
        print(f"noughts watch: {exc}", file=sys.stderr)
        return 1
    finally:
        await connection.close()


async def _why_not_live(connection: ServerConnection, game_id: str, refused: RequestFailed) -> str:
    """The server's refusal of ``watch``; for a game that is over, where to see it instead."""
    from client.connection import RequestFailed
    from protocol import GetGame

    if refused.code != "unknown_game":
        return refused.message
    try:
        record = (await connection.request(GetGame, game_id=game_id)).game
    except RequestFailed:
        return refused.message
    result = f"{record.get('result')} ({record.get('reason')})" if record.get("result") else ""
    over = f"game {game_id} is over{', ' + result if result else ''}"
    return f"{over}: noughts replay {game_id} --server {connection.url}"


async def follow_lobby(connection: ServerConnection, write: Callable[[str], None]) -> None:
    """Print the lobby's live games, then a line for each that starts (+) or ends (-), until
    the connection closes for good (ConnectionLost). A fresh ``lobby_state`` (a busy tick,
    a reconnection) prints the list again."""
    from client.commands.games import format_games, game_row
    from protocol import LobbyEvent, LobbyState, LobbySubscribe

    def line(sign: str, game: dict[str, Any]) -> str:
        return f"{sign} " + "  ".join(game_row(game)[:4])

    live: dict[str, dict[str, Any]] = {}
    await connection.request(LobbySubscribe)  # its reply comes as the first lobby event
    while True:
        message = await connection.next_lobby_event()
        if isinstance(message, LobbyState):
            live = {g["game_id"]: g for g in message.games}
            write(f"Live games on {connection.url} (+ started, - ended; Ctrl-C quits):")
            write(format_games(list(live.values()), "No games in play."))
        elif isinstance(message, LobbyEvent):
            if message.kind == "game_added" and message.game:
                live[message.game["game_id"]] = message.game
                write(line("+", message.game))
            elif message.kind == "game_removed" and message.game_id:
                gone = live.pop(message.game_id, None)
                write(line("-", gone) if gone else f"- {message.game_id}")

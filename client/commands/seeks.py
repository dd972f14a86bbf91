"""`noughts seeks`: the lobby's open seeks and the challenges to you, with the ids that
`noughts play --accept SEEK_ID` takes (the terminal interface's lobby shows the same)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from client.commands.common import add_server_arguments, connect
from client.commands.games import text_table
from client.game_view import clock_title, game_title, player_name


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "seeks",
        help="list the open seeks and the challenges to you",
        description="List the lobby's open seeks, and the challenges addressed to you, with "
        "the ids that `noughts play --accept SEEK_ID` takes. Connects as --name, as `noughts "
        "play` does, to see its challenges.",
    )
    add_server_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_seeks(args))


def format_seeks(seeks: list[dict[str, Any]], me: str | None) -> str:
    """The seeks as a table: who posted it, the game, the clock, the colour the one who
    accepts it plays, and whom it is for."""
    if not seeks:
        return "No open seeks: noughts play --seek posts one."
    rows = [("ID", "PLAYER", "GAME", "CLOCK", "YOU PLAY", "FOR")]
    for seek in seeks:
        owner = seek.get("player") or {}
        mine = owner.get("player_id") == me
        to = seek.get("to")
        audience = (
            "you" if to and to == me else "a challenge" if to else
            "humans" if seek.get("opponents") == "humans" else "anyone"
        )  # fmt: skip
        rows.append(
            (
                str(seek.get("seek_id", "?")),
                player_name(owner) + (" (you)" if mine else ""),
                game_title(seek.get("game", "?"), seek.get("params") or {}),
                clock_title(seek.get("clock") or {}),
                {"x": "O", "o": "X"}.get(seek.get("color", "random"), "random"),
                audience,
            )
        )
    return text_table(rows)


async def _seeks(args: argparse.Namespace) -> int:
    from client.commands.play import where_option
    from client.connection import ConnectionLost, RequestFailed
    from client.embedded import EmbeddedServerError
    from client.sessions import SessionInUse, SessionStore
    from protocol import LobbySubscribe

    async def read(as_guest: bool) -> tuple[Any, str | None]:
        sessions = None if as_guest else SessionStore.default()
        async with connect(args, workers=0, sessions=sessions, reads_only=as_guest) as connection:
            state = await connection.request(LobbySubscribe, again=True)
            welcome = connection.welcome
            return state, None if as_guest or welcome is None else welcome.player_id

    note = ""
    try:
        try:
            state, me = await read(as_guest=False)
        except SessionInUse:  # another noughts plays as --name: read as a guest
            note = f"(another noughts plays as {args.name!r}: the challenges to it are not shown)"
            state, me = await read(as_guest=True)
    except (RequestFailed, ConnectionLost, EmbeddedServerError, OSError) as exc:
        print(f"noughts seeks: {exc}", file=sys.stderr)
        return 1
    seeks = sorted(state.seeks, key=lambda seek: seek.get("created_at", 0))
    print(format_seeks(seeks, me))
    if seeks:
        where = where_option(args)
        print(f"noughts play{' ' + where if where else ''} --accept ID accepts one.")
    if note:
        print(note, file=sys.stderr)
    return 0

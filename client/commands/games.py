"""`noughts games`: list stored (or live) games."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from client.commands.common import add_server_arguments, connect, out_of_range
from client.game_view import player_name


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "games",
        help="list games",
        description="List games: finished ones from the database, or open/live ones on a "
        "running server.",
    )
    add_server_arguments(parser, name=False)
    parser.add_argument(
        "--status",
        default="finished",
        choices=("finished", "aborted", "open", "live"),
        help="which games (default: %(default)s)",
    )
    parser.add_argument("--limit", type=int, default=30, help="at most this many (default: 30)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from protocol import ListGames

    problem = out_of_range(ListGames, "limit", args.limit, "--limit wants a count", "noughts games")
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    return asyncio.run(_games(args))


def game_row(g: dict[str, Any]) -> tuple[str, str, str, str, str, str]:
    """A game list entry as the columns of ``format_games``."""
    names = [player_name(p) for p in g["players"]]  # "[bot]", "[AI]", "(open seat)"
    params = ",".join(f"{k}={v}" for k, v in sorted(g["params"].items()))
    kind = g["game"] + (f" {params}" if params else "")
    result = f"{g.get('result')} {g.get('reason')}" if g.get("result") else g["status"]
    when = datetime.fromtimestamp(g["created_at"], UTC).strftime("%Y-%m-%d %H:%M")
    return (g["game_id"], kind, names[0], names[1], result, when)


# What `noughts games` says when there are none, by --status: where else to look.
EMPTY = {
    "finished": "No finished games (--status live: games in play; open: waiting for a player).",
    "aborted": "No aborted games.",
    "open": "No open games: noughts play --human opens one.",
    "live": "No games in play.",
}


def format_games(games: list[dict[str, Any]], empty: str = "No games.") -> str:
    if not games:
        return empty
    return text_table(
        [("ID", "GAME", "X", "O", "RESULT", "STARTED")] + [game_row(g) for g in games]
    )


def text_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as columns of plain text, each as wide as its widest cell (the first row: the
    headings)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


async def _games(args: argparse.Namespace) -> int:
    from client.connection import ConnectionLost, RequestFailed
    from client.embedded import EmbeddedServerError
    from protocol import ListGames

    try:
        async with connect(args, workers=0, reads_only=True) as connection:
            reply = await connection.request(
                ListGames, again=True, status=args.status, limit=args.limit
            )
    except (RequestFailed, ConnectionLost, EmbeddedServerError, OSError) as exc:
        print(f"noughts games: {exc}", file=sys.stderr)
        return 1
    print(format_games(list(reply.games), EMPTY[args.status]))
    return 0

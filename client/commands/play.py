"""`noughts play`: play a game from the terminal, against the AI by default.

On a terminal it opens the Textual UI (lobby, game, watch, replay); with --plain, when
stdin or stdout is not a terminal, or on a terminal that cannot show the UI
(client/terminal.py), the line-oriented client of client/plain.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from client.commands.common import (
    DB_ENV,
    add_server_arguments,
    check_budget,
    connect,
    parse_clock,
    parse_params,
    session_key,
)
from client.game_view import AI_BUDGET_MS
from engine.algorithms import ALGORITHMS
from engine.games import GAME_NAMES, GAMES, default_ai
from protocol import Message

# The embedded server of one player searches one move at a time: one engine worker. It
# starts sooner than two on a loaded 2-core machine (cached make play to the first board,
# medians of 3 at load 5.4: 6.7 s with two workers, 5.1 s with one).
EMBEDDED_WORKERS = 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "play",
        help="play a game (against the AI unless told otherwise)",
        description="Play a game in the terminal. Without --server, an embedded server is "
        "started on a free local port and stopped on exit.",
    )
    add_server_arguments(parser)
    parser.add_argument(
        "--game", default="tictactoe", choices=GAME_NAMES, help="game (default: %(default)s)"
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
        default=None,
        metavar="ALGORITHM",
        help=f"the AI's search: {', '.join(ALGORITHMS)} (default: the game's own: "
        f"{', '.join(f'{name} {game.ai}' for name, game in GAMES.items())})",
    )
    parser.add_argument(
        "--budget-ms",
        type=int,
        default=AI_BUDGET_MS,
        help="the AI's time per move (default: %(default)s; servers allow up to 10000 unless "
        "configured otherwise)",
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
    parser.add_argument(
        "--private",
        action="store_true",
        help="with --human: an unlisted game; your friend joins with --join GAME_ID",
    )
    parser.add_argument(
        "--clock",
        default=None,
        help="time control: none, MINUTES+SECONDS (Fischer, e.g. 3+2) or SECONDSs per move "
        "(e.g. 10s); AI seats never run out of time (default: none)",
    )
    parser.add_argument("--join", metavar="GAME_ID", help="join another player's open game")
    pairing = parser.add_mutually_exclusive_group()
    pairing.add_argument(
        "--quick",
        action="store_true",
        help="quick pairing: play the next player who asks for the same game and clock; after "
        "--ai-after seconds without one, play the AI instead",
    )
    pairing.add_argument(
        "--seek",
        action="store_true",
        help="post a seek in the lobby (--game, --clock, --seat for your colour) and wait",
    )
    pairing.add_argument(
        "--challenge",
        metavar="PLAYER",
        help="challenge one player or bot by name or id (online or not: it sees it when it comes)",
    )
    pairing.add_argument("--accept", metavar="SEEK_ID", help="accept a seek from the lobby")
    parser.add_argument(
        "--ai-after",
        type=int,
        default=20,
        metavar="SECONDS",
        help="with --quick: seconds to wait for a player before the AI steps in; 0 waits "
        "forever (default: %(default)s)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--lobby",
        action="store_true",
        help="open the lobby (seeks, live games, recent games) instead of a game against the AI",
    )
    where.add_argument("--watch", metavar="GAME_ID", help="watch a live game as a spectator")
    where.add_argument("--replay", metavar="GAME_ID", help="open a stored game in the replay view")
    parser.add_argument(
        "--no-bell",
        dest="bell",
        action="store_false",
        help="no terminal bell when the opponent moves, a game starts or your clock runs low "
        "(ctrl+g turns it off and on in the game)",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="line-oriented client (the default when stdin or stdout is not a terminal, or the "
        "terminal cannot show the full-screen interface: TERM=dumb, a non-UTF-8 encoding)",
    )
    parser.set_defaults(func=run)


def pairing_request(args: argparse.Namespace) -> tuple[type[Message], dict[str, Any]] | None:
    """The lobby request --quick, --seek, --challenge or --accept asks for, if any."""
    from protocol import AcceptSeek, QuickPair, Seek

    game = {"game": args.game, "params": parse_params(args.param, "noughts play")}
    clock = parse_clock(args.clock, "noughts play")
    if args.quick:
        return QuickPair, {
            **game,
            "clock": clock,
            "ai_after_s": args.ai_after,
            "algorithm": args.ai,
            "budget_ms": args.budget_ms,
        }
    if args.seek or args.challenge:
        fields: dict[str, Any] = {**game, "clock": clock, "color": args.seat}
        if args.challenge:
            fields["to"] = args.challenge
        return Seek, fields
    if args.accept:
        return AcceptSeek, {"seek_id": args.accept}
    return None


def run(args: argparse.Namespace) -> int:
    if args.ai is None:
        args.ai = default_ai(args.game)
    problem = check_budget(args.budget_ms, "noughts play")
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    from client.terminal import interface_problem

    plain = args.plain or not sys.stdout.isatty() or not sys.stdin.isatty()
    cannot_draw = None if plain else interface_problem()
    if plain or cannot_draw:
        if args.lobby or args.watch or args.replay:
            print(f"noughts play: {plain_instead(args, cannot_draw)}", file=sys.stderr)
            return 2
        if cannot_draw:
            print(
                f"noughts play: the terminal interface cannot be drawn: {cannot_draw}; "
                "the line client plays instead",
                file=sys.stderr,
            )
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
    pairing = pairing_request(args)
    if pairing is not None:
        return Start("pairing", request=pairing[0], fields=pairing[1])
    return Start("ai", fields=create_fields(args))


def create_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The `create` request for a game against the AI, or with an open seat (--human)."""
    return {
        "game": args.game,
        "params": parse_params(args.param, "noughts play"),
        "opponent": "human" if args.human else "ai",
        "seat": {"x": 0, "o": 1, "random": -1}[args.seat],
        "algorithm": args.ai,
        "budget_ms": args.budget_ms,
        "clock": parse_clock(args.clock, "noughts play"),
        "private": args.private,
    }


def warm_targets(args: argparse.Namespace) -> list[tuple[str, str]] | None:
    """What the embedded server compiles before the first board: the game and the AI asked
    for (the rest compiles in the background); everything for the lobby and the like."""
    if args.lobby or args.watch or args.replay:
        return None
    if args.game not in GAME_NAMES or args.ai not in ALGORITHMS:
        return []  # the server refuses the game: nothing to wait for
    return [(args.game, args.ai)]


def plain_instead(args: argparse.Namespace, problem: str | None = None) -> str:
    """Why --lobby, --watch or --replay did not open (``problem``: why the terminal cannot
    show the interface, if that was it), and the line command that does it."""
    where = f"{where_option(args)} " if where_option(args) else ""
    # noughts watch takes no --db: it follows a server, the game's (an embedded one lives
    # as long as the noughts play that started it).
    server = f"--server {shlex.quote(args.server)} " if args.server else "--server URL "
    if args.watch:
        option, instead = "--watch", f"noughts watch {server}{args.watch}"
    elif args.replay:
        option, instead = "--replay", f"noughts replay {where}{args.replay}"
    else:
        option = "--lobby"
        instead = (
            f"noughts watch {server}lists the live games; play --quick, --seek or --challenge "
            "pairs you"
        )
    if problem:
        return f"{option} needs the terminal interface, which cannot be drawn: {problem}: {instead}"
    return f"{option} needs the terminal interface (no --plain, in a terminal): {instead}"


def where_option(args: argparse.Namespace) -> str:
    """The option naming this server in a command suggested to the user: ``--server URL``,
    ``--db PATH`` for an embedded server on another database than the default, or none."""
    if args.server:
        return f"--server {shlex.quote(args.server)}"
    if args.db and os.environ.get(DB_ENV) != args.db:
        return f"--db {shlex.quote(args.db)}"
    return ""


async def _play_ui(args: argparse.Namespace) -> int:
    from client.commands.common import default_db_path
    from client.embedded import EmbeddedServer, EmbeddedServerError, StatusLine, log_beside
    from client.sessions import SessionInUse, SessionStore, embedded_session_key
    from client.terminal import ui_output
    from client.ui import NoughtsApp

    start = ui_start(args)
    name = args.name[:32]
    # The session is kept between runs (client/sessions.py), so unfinished games come back.
    sessions = SessionStore.default()
    try:
        sessions.claim(session_key(args), name)
    except (SessionInUse, OSError) as exc:
        print(f"noughts play: {exc}", file=sys.stderr)
        return 1
    if args.server:
        app = NoughtsApp(args.server, name=name, start=start, sessions=sessions, bell=args.bell)
        with ui_output():
            await app.run_async()
        return app.return_code or 0  # 1: the server refused us (the app said why)
    db = Path(args.db) if args.db else default_db_path()
    print("Starting a local server (the first start compiles the engine)...", file=sys.stderr)
    status = StatusLine(prefix="noughts: ")
    try:
        async with EmbeddedServer(
            db,
            workers=EMBEDDED_WORKERS,
            log_path=log_beside(db),
            warm=warm_targets(args),
            status=status,
        ) as url:
            key = embedded_session_key(db)
            app = NoughtsApp(
                url,
                name=name,
                start=start,
                sessions=sessions,
                session_key=key,
                bell=args.bell,
                rename_if_taken=True,  # the user's own database (EmbeddedServer)
            )
            with ui_output():
                await app.run_async()
    except (EmbeddedServerError, OSError) as exc:
        print(f"noughts play: {exc}", file=sys.stderr)
        return 1
    return app.return_code or 0


async def _play(args: argparse.Namespace) -> int:
    from client.connection import ConnectionLost, RequestFailed
    from client.embedded import EmbeddedServerError
    from client.game_view import GameDataError
    from client.plain import PlainGame
    from client.sessions import SessionInUse, SessionStore
    from client.terminal import unwritable

    fields = create_fields(args)
    pairing = pairing_request(args)
    sessions = SessionStore.default()
    try:
        sessions.claim(session_key(args), args.name[:32])  # before a server starts
        if not args.server:
            print(
                "Starting a local server (the first start compiles the engine)...", file=sys.stderr
            )
        async with connect(
            args, workers=EMBEDDED_WORKERS, warm=warm_targets(args), sessions=sessions
        ) as connection:
            typing = sys.stdin.isatty()
            game = PlainGame(connection, where=where_option(args), rematch=typing, echo=not typing)
            if args.join:
                await game.join(args.join)
            elif pairing is not None:
                paired = await game.pair(*pairing)
                if paired is not True:
                    return 1 if paired is False else 0  # declined, or the user left
            else:
                await game.create(**fields)
            game.unfinished()
            ended = await game.run()
            return 0 if ended is not None or game.game_id else 1
    except RequestFailed as exc:
        print(f"noughts play: the server refused: {exc.message}", file=sys.stderr)
        return 1
    except GameDataError as exc:  # a game this noughts does not know, a move it refuses
        print(f"noughts play: the game cannot be followed: {exc}", file=sys.stderr)
        return 1
    except (ConnectionLost, OSError, EmbeddedServerError, SessionInUse) as exc:
        if unwritable(exc):
            raise  # said as for every command (client.cli.main)
        print(f"noughts play: {exc}", file=sys.stderr)
        return 1

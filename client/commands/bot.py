"""`noughts bot`: a bot account that plays unattended with the local engine."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import signal
import sys

from client.commands.common import (
    SERVER_ENV,
    check_budget,
    parse_clock,
    parse_params,
    player_name,
)
from client.commands.interrupts import INTERRUPTED, on_daemon_thread
from engine.algorithms import ALGORITHMS
from engine.games import GAME_NAMES, GAMES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bot",
        help="run a bot that plays unattended",
        description="Connect to a server as a bot and play with the local engine: post seeks "
        "(--seek GAME) or accept them (--accept seeks, or only challenges addressed to the "
        "bot: --accept challenges). Plays --games games, up to --concurrency at once, or until "
        "stopped: Ctrl-C (or SIGTERM) stops its search, takes no new game and ends those in "
        "play, each aborted where the rules allow (before both sides have moved), else "
        "resigned, and prints the tally with them counted; a second Ctrl-C quits at once, "
        "leaving them live. A "
        "rematch its opponent asks for is accepted while it has room, and counted; a draw "
        "offer is accepted when its engine sees nothing better than a draw.",
    )
    parser.add_argument(
        "--server",
        default=os.environ.get(SERVER_ENV),
        metavar="URL",
        help="server to play on, e.g. ws://host:8765 (default: $NOUGHTS_SERVER)",
    )
    parser.add_argument(
        "--name",
        type=player_name,
        default="noughts-bot",
        help="the bot's name; its session is kept, as `noughts play` keeps yours, so the "
        "next run is the same player (default: %(default)s)",
    )
    parser.add_argument(
        "--engine",
        default=None,
        metavar="ALGORITHM",
        help=f"search: {', '.join(ALGORITHMS)} (default: each game's own: "
        f"{', '.join(f'{name} {game.ai}' for name, game in GAMES.items())})",
    )
    parser.add_argument(
        "--budget-ms",
        type=int,
        default=100,
        help="search time per move (default: %(default)s); in a game with a clock, at most "
        "what the clock leaves: 90%% of a fixed time per move, or, with Fischer, the time "
        "left over the moves expected still to play (20 at the start, at least 8) plus the "
        "increment, each less 250 ms for the round trip; the bot's first move, whose clock "
        "does not run, 90%% of the 30 s the server gives it, less the same",
    )
    parser.add_argument("--games", type=int, default=None, help="games to play (default: no end)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="games played at once (lichess-bot's concurrency); their searches take turns "
        "on one core, each with its whole budget (default: %(default)s)",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--seek", choices=GAME_NAMES, metavar="GAME", help=f"post seeks: {', '.join(GAME_NAMES)}"
    )
    what.add_argument(
        "--accept",
        choices=("seeks", "challenges"),
        help="accept seeks from the lobby, or only challenges to this bot (the default)",
    )
    parser.add_argument(
        "--param", action="append", default=[], metavar="KEY=N", help="mnk parameters for --seek"
    )
    parser.add_argument(
        "--clock", default=None, help="time control for --seek: none, 3+2 or 10s (default: none)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the final tally")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.server:
        print(
            "noughts bot: give a server to play on (--server URL or $NOUGHTS_SERVER)",
            file=sys.stderr,
        )
        return 2
    problem = check_budget(args.budget_ms, "noughts bot")
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    if args.games is not None and args.games < 1:
        print("noughts bot: --games must be at least 1", file=sys.stderr)
        return 2
    if args.concurrency < 1:
        print("noughts bot: --concurrency must be at least 1", file=sys.stderr)
        return 2
    import engine

    if args.engine is not None and args.engine not in engine.ALGORITHMS:
        print(
            f"noughts bot: unknown engine {args.engine!r}; choose one of "
            f"{', '.join(engine.ALGORITHMS)}",
            file=sys.stderr,
        )
        return 2
    if args.seek and args.engine is not None:  # its own seeks: refused now, not in game 1
        try:
            game = engine.make_game(args.seek, **parse_params(args.param, "noughts bot"))
            engine.check_algorithm(args.engine, game)
        except engine.EngineError as exc:
            print(f"noughts bot: {exc}", file=sys.stderr)
            return 2
    return asyncio.run(_bot(args))


async def _bot(args: argparse.Namespace) -> int:

    params = parse_params(args.param, "noughts bot")
    clock = parse_clock(args.clock, "noughts bot")
    tally = {"win": 0, "draw": 0, "loss": 0, "aborted": 0}
    try:
        return await _run_bot(args, params, clock, tally)
    finally:
        # On every way out, Ctrl-C while the engine loads included (README: the tally).
        print(
            f"{args.name}: {tally['win']} won, {tally['draw']} drawn, {tally['loss']} lost"
            + (f", {tally['aborted']} aborted" if tally["aborted"] else ""),
            flush=True,
        )


async def _run_bot(
    args: argparse.Namespace, params: dict[str, int], clock: dict[str, int], tally: dict[str, int]
) -> int:
    import engine
    from client.bot import Bot, GameResult, engine_draw, engine_player, engine_plays
    from client.connection import ConnectionLost, RequestFailed
    from client.sessions import SessionInUse, SessionStore

    async def warm() -> None:
        print(f"{args.name}: loading the engine...", file=sys.stderr)
        # What it can play: the search it was given (else each game's own), for the game it
        # seeks (else every game); not every compiled search of every game.
        games = [args.seek] if args.seek else GAME_NAMES
        targets = [(game, args.engine or engine.default_ai(game)) for game in games]
        warm_up = functools.partial(engine.warm_up, targets)
        await on_daemon_thread(warm_up, "engine warm-up")  # (Ctrl-C: not waited for)

    def report(result: GameResult) -> None:
        tally[result.outcome] += 1
        played = sum(tally.values())
        total = f"/{args.games}" if args.games else ""
        if not args.quiet:
            print(
                f"game {played}{total} {result.game_id}: {result.outcome} against "
                f"{result.opponent} ({result.result}, {result.reason}, {result.plies} plies)",
                flush=True,
            )

    bot = Bot(
        args.server,
        engine_player(args.engine, args.budget_ms),
        name=args.name,
        sessions=SessionStore.default(),
        on_draw=engine_draw(args.engine, args.budget_ms),
        plays=engine_plays(args.engine),
    )
    accept = args.accept or (None if args.seek else "challenges")
    how = f"posting {args.seek} seeks" if args.seek else f"accepting {accept}"
    if args.concurrency > 1:
        how += f", {args.concurrency} games at once"
    print(
        f"{args.name}: {args.engine or 'each game its own search'} {args.budget_ms} ms on "
        f"{args.server}, {how}",
        file=sys.stderr,
    )
    # The first Ctrl-C or SIGTERM stops the bot (Bot.stop: its games ended, then the tally);
    # before it plays, or at a second one, it quits at once.
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        if not bot.stop():
            main.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupt)
    try:
        await bot.play(
            args.games,
            seek=args.seek,
            params=params,
            clock=clock,
            accept=accept,
            concurrency=args.concurrency,
            on_result=report,
            warm=warm,
        )
    except RequestFailed as exc:
        print(f"noughts bot: the server refused: {exc.message}", file=sys.stderr)
        return 1
    except SessionInUse as exc:
        print(f"noughts bot: {exc}", file=sys.stderr)
        return 1
    except (ConnectionLost, OSError) as exc:
        print(f"noughts bot: {exc}", file=sys.stderr)
        return 1
    except asyncio.CancelledError:
        if not interrupted:
            raise
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return INTERRUPTED if interrupted else 0

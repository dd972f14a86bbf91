"""Options every networked command shares: --server, --db, --name."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NoReturn

from client.connection import ServerConnection
from client.embedded import EmbeddedServer, StatusLine, log_beside
from client.sessions import (
    SessionStore,
    connect_as_guest,
    connect_with_session,
    embedded_session_key,
)
from protocol.paths import DB_ENV, default_db_path, no_database

SERVER_ENV = "NOUGHTS_SERVER"


def add_server_arguments(parser: argparse.ArgumentParser, *, name: bool = True) -> None:
    parser.add_argument(
        "--server",
        default=os.environ.get(SERVER_ENV),
        metavar="URL",
        help="server to connect to, e.g. ws://host:8765 (default: $NOUGHTS_SERVER, or an "
        "embedded server started for this command)",
    )
    parser.add_argument(
        "--db",
        default=os.environ.get(DB_ENV),
        metavar="PATH",
        help="SQLite file of the embedded server (default: $NOUGHTS_DB, or noughts.db in your "
        "data directory)",
    )
    if name:
        parser.add_argument(
            "--name",
            type=player_name,
            default=default_name(),
            help="your name on the server; each name is a player of its own, with its own "
            "games (default: your user name, %(default)s)",
        )


def player_name(text: str) -> str:
    """--name as the wire takes it (argparse type): longer than the hello's field is a
    usage error here; the server's own rules (length, characters, reserved words) are its
    to say, in its refusal."""
    from dataclasses import fields

    from protocol import Hello

    longest = next(f.metadata["max_len"] for f in fields(Hello) if f.name == "name")
    if len(text) > longest:
        raise argparse.ArgumentTypeError(f"too long: {len(text)} characters")
    return text


def default_name() -> str:
    """The operating system's name for the user (getpass: $LOGNAME, $USER, ..., then the
    password database), else "player"."""
    import getpass

    try:
        return getpass.getuser()[:32] or "player"
    except (OSError, KeyError):
        return "player"


def session_key(args: argparse.Namespace) -> str:
    """Where a player's session on this command's server is kept: the --server URL, or the
    embedded server's database."""
    if args.server:
        return str(args.server)
    return embedded_session_key(Path(args.db) if args.db else default_db_path())


@contextlib.asynccontextmanager
async def connect(
    args: argparse.Namespace,
    *,
    workers: int | None = None,
    bot: bool = False,
    warm: list[tuple[str, str]] | None = None,
    sessions: SessionStore | None = None,
    reads_only: bool = False,
) -> AsyncIterator[ServerConnection]:
    """Connect to --server, or start an embedded server on --db and connect to it (``warm``:
    the game and algorithm pairs it compiles first; the wait is shown on stderr), as the
    player whose session ``sessions`` keeps for that server and --name, if given. The
    connection reconnects after a drop (client/connection.py), saying so on stderr.
    ``reads_only``: a command that only reads stored games connects as the user's guest
    (``connect_as_guest``), does not create a database a --db names (a mistyped path):
    FileNotFoundError, with a one-line reason; and leaves no server log beside it, nor a
    damaged game marked quarantined (EmbeddedServer ``reads_only``). On an embedded server,
    a name an earlier session of the user holds (its session lost) is taken with a suffix
    (``ClientSession.rename_if_taken``), said on stderr."""
    name = getattr(args, "name", "anonymous")[:32]
    options: dict[str, Any] = {
        "name": name,
        "bot": bot,
        "reconnect": True,
        "on_status": status_lines(),
    }

    async def open_connection(url: str, key: str) -> ServerConnection:
        if reads_only:
            guest = {k: v for k, v in options.items() if k != "name"}
            return await connect_as_guest(SessionStore.default(), key, url, **guest)
        if sessions is None:
            return await ServerConnection.connect(url, **options)
        return await connect_with_session(sessions, key, url, **options)

    if args.server:
        connection = await open_connection(args.server, session_key(args))
        try:
            yield connection
        finally:
            await connection.close()
        return
    db = Path(args.db) if args.db else default_db_path()
    if reads_only and args.db and (missing := no_database(db)):
        raise FileNotFoundError(missing)
    # The user's own database: a name held there is the user's own, its session lost (a
    # guest, reads_only, names no name).
    options["rename_if_taken"] = not reads_only
    status = StatusLine(prefix="noughts: ")
    async with EmbeddedServer(
        db,
        workers=workers,
        log_path=log_beside(db),
        warm=warm,
        status=status,
        keep_log=not reads_only,
        reads_only=reads_only,
    ) as url:
        connection = await open_connection(url, session_key(args))
        try:
            yield connection
        finally:
            await connection.close()


async def fetch_record(args: argparse.Namespace, command: str) -> dict[str, Any] | None:
    """The stored game ``args.game_id`` (PROTOCOL.md, get), read again after a reconnection;
    None after saying on stderr why it could not be read."""
    from client.connection import ConnectionLost, RequestFailed
    from client.embedded import EmbeddedServerError
    from protocol import GetGame

    try:
        async with connect(args, workers=0, reads_only=True) as connection:
            reply = await connection.request(GetGame, again=True, game_id=args.game_id)
    except RequestFailed as exc:
        print(f"noughts {command}: {exc.message}", file=sys.stderr)
        return None
    except (ConnectionLost, EmbeddedServerError, OSError) as exc:
        print(f"noughts {command}: {exc}", file=sys.stderr)
        return None
    return dict(reply.game)


def status_lines() -> Callable[[str, str], None]:
    """The connection's drops, retries and returns as lines on stderr."""
    down = False

    def on_status(status: str, detail: str) -> None:
        nonlocal down
        if status == "reconnecting":
            down = True
            print(f"noughts: {detail}", file=sys.stderr, flush=True)
        elif status == "connected" and down:
            down = False
            print("noughts: reconnected", file=sys.stderr, flush=True)

    return on_status


def usage_error(message: str) -> NoReturn:
    """Say ``message`` (one line) on stderr and exit 2, as argparse does for a bad command
    line: a bad option found after parsing is a usage error like the others."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def parse_params(items: list[str], command: str = "noughts") -> dict[str, int]:
    """``--param m=7 --param n=7`` as a map; a usage error (exit 2) on a bad item."""
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip().isdigit():
            usage_error(f"{command}: --param wants KEY=N, got {item!r}")
        params[key.strip()] = int(value)
    return params


def parse_clock(text: str | None, command: str = "noughts") -> dict[str, int]:
    """A time control as people write it: ``none``, ``3+2`` (Fischer: minutes + seconds of
    increment, as on Lichess) or ``10s`` (seconds per move), as the protocol's map."""
    if text is None or text.strip().lower() in ("", "none"):
        return {}
    text = text.strip().lower()
    try:
        if text.endswith("s"):
            return {"move_ms": round(float(text[:-1]) * 1000)}
        minutes, sep, increment = text.partition("+")
        return {
            "initial_ms": round(float(minutes) * 60_000),
            "increment_ms": round(float(increment or 0) * 1000),
        }
    except ValueError:
        usage_error(
            f"{command}: --clock wants none, MINUTES+SECONDS (e.g. 3+2) or SECONDSs (e.g. 10s), "
            f"got {text!r}"
        )


def check_budget(budget_ms: int, command: str) -> str | None:
    """Why ``--budget-ms`` cannot be sent (the protocol's range for ``budget_ms``), or None."""
    from protocol import CreateGame

    return out_of_range(
        CreateGame, "budget_ms", budget_ms, "--budget-ms wants milliseconds", command
    )


def out_of_range(message: type, field: str, value: int, option: str, command: str) -> str | None:
    """Why an option's ``value`` cannot be sent as ``message``'s ``field`` (the protocol's
    range for it, PROTOCOL.md), or None: said before connecting, in the option's words."""
    import dataclasses

    bounds = next(f.metadata for f in dataclasses.fields(message) if f.name == field)
    if bounds["min"] <= value <= bounds["max"]:
        return None
    return f"{command}: {option} in {bounds['min']}..{bounds['max']}, got {value}"

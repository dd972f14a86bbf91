"""Every setting and limit of a noughts server, in one object (sans-I/O).

``ServerSettings`` is the one place a limit lives: its default, its unit, and its
help text. ``noughts serve`` builds its command line from these fields (a field
with a ``flag`` is an option, and every option is also read from the environment
as ``NOUGHTS_<FLAG>``, e.g. ``--max-per-ip`` from ``$NOUGHTS_MAX_PER_IP``), and
PROTOCOL.md documents the ones a client can run into, with their errors. Defaults
are what a public operator would want; tests and benchmarks pass their own.

The fields are grouped by area, one section each (``group``), which is also how
``noughts serve --help`` lists them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.messages import PROTOCOL_VERSION, SEQ_SINCE_VERSION
from server.clock import FIRST_MOVE_S

ENV_PREFIX = "NOUGHTS_"
# The most processes --workers (engine workers) and --processes (server nodes) start on one
# machine. Each is a process of its own: an engine worker holds numba's compiled code, its
# kept trees (--engine-tree-mb) and up to ~110 MB more while it searches (engine/mcts.py
# MAX_NODES), so 128 is past the cores of nearly any one machine (the default is their
# count) and already ~20 GB at the searches' peak. A fixed bound rather than a multiple of
# os.cpu_count(): the same on every machine, in --help and in a container whose CPU quota
# the count does not see. Past it is a typo (--workers 300 spawned ~77 workers before
# anything else happened, with no end in sight).
MOST_PROCESSES = 128


def listen_address(text: str) -> str:
    """``--host``/``--admin-host``: an address, never empty (an empty host binds every
    interface, IPv4 and IPv6: a server made public by a blank variable). Every interface is
    asked for by name, 0.0.0.0 or ::."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "empty: name the address to listen on (0.0.0.0 or :: for every interface)"
        )
    return text


def database(text: str) -> str:
    """``--db``: a SQLite file, or a PostgreSQL URL asyncpg can read; never empty (an empty
    --db or $NOUGHTS_DB fell back to the default database without a word)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty: a SQLite file or a postgresql:// URL")
    from server.pgstore import check_url, is_postgres_url

    if is_postgres_url(text):
        try:
            check_url(text)
        except ValueError as exc:
            reason = " ".join(str(exc).split())  # (asyncpg's hints: a second line)
            raise argparse.ArgumentTypeError(
                f"not a PostgreSQL URL postgresql://USER@HOST/DB: {reason}"
            ) from exc
    return text


def bus_url(text: str) -> str:
    """``--bus`` (serve's and engine-worker's): a URL redis-py connects by, redis://HOST:PORT/N
    (or rediss://, unix://), read by redis-py's own parser before anything starts (it raised
    from deep in the start-up, and the server hung holding its database)."""
    from redis.asyncio.connection import parse_url

    try:
        parse_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a Redis URL redis://HOST:PORT/N: {exc}") from exc
    return text


def setting(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    group: str,
    choices: Sequence[Any] | None = None,
    least: int = 0,
    positive: bool = False,
    most: int | None = None,
    convert: Callable[[str], Any] | None = None,
) -> Any:
    """A settings field: ``flag`` (without the dashes) makes it a command-line option.
    ``least``: the smallest value the option takes (1 where 0 would lock every player out or
    hang a game, as a cap of 0 connections or of 0 running AI searches would); ``positive``:
    above 0 (a rate: a token bucket refilled at 0 a second never serves again); ``most``: the
    largest (a port's is 65535); ``convert``: a text option's own check
    (argparse.ArgumentTypeError when it refuses the text)."""
    metadata = {
        "help": help,
        "flag": flag,
        "group": group,
        "choices": choices,
        "least": least,
        "positive": positive,
        "most": most,
        "convert": convert,
    }
    return field(default=default, metadata=metadata)


LISTEN = "listening"
ADMISSION = "connections and transport"
RATES = "rate limits"
IDENTITY = "players and sessions"
LOBBY = "lobby"
GAMES = "games"
ENGINE = "engine"
STORAGE = "storage"
CLUSTER = "cluster"
GROUPS = (LISTEN, ADMISSION, RATES, IDENTITY, LOBBY, GAMES, ENGINE, CLUSTER, STORAGE)
DB_TIMEOUT_S = 10.0  # db_timeout_s's default (server/pgstore.py's too)


@dataclass(slots=True)
class ServerSettings:
    """A server's settings; every field has a default a public server can run with."""

    # --- listening --------------------------------------------------------------------
    host: str = setting(
        "127.0.0.1",
        "address to listen on (0.0.0.0 or :: for every interface)",
        flag="host",
        group=LISTEN,
        convert=listen_address,
    )
    port: int = setting(8765, "port to listen on; 0 picks a free one", flag="port", group=LISTEN)
    processes: int = setting(
        1,
        "server processes sharing --port on this machine (SO_REUSEPORT), each a node of the "
        "cluster: needs --db postgresql://... and --bus",
        flag="processes",
        least=1,
        most=MOST_PROCESSES,
        group=LISTEN,
    )
    reuse_port: bool = setting(
        False,
        "bind --port with SO_REUSEPORT, sharing it with other processes (as --processes does)",
        flag="reuse-port",
        group=LISTEN,
    )
    loop: str = setting(
        "asyncio",
        "event loop: the standard asyncio loop, or uvloop if you installed it (no measurable "
        "difference in bench/load.py on this class of machine)",
        flag="loop",
        group=LISTEN,
        choices=("asyncio", "uvloop"),
    )
    tls_cert: str | None = setting(
        None,
        "certificate chain (PEM) to serve wss:// without a proxy in front; with --tls-key",
        flag="tls-cert",
        group=LISTEN,
    )
    tls_key: str | None = setting(
        None, "private key (PEM) of --tls-cert", flag="tls-key", group=LISTEN
    )
    secret_path: bool = setting(
        False,
        "serve websockets only at a random secret path, ws://HOST:PORT/SECRET, told on the "
        "first line of stdout and in --db's lock file (readable by this user only); any other "
        "handshake is refused with HTTP 403. For a server only its own user may use: "
        "noughts play's (the secret is made at each start, never given on the command line)",
        flag="secret-path",
        group=LISTEN,
    )
    admin_port: int | None = setting(
        None,
        "port of the admin HTTP endpoints /healthz, /readyz and /metrics (Prometheus); "
        "off unless given",
        flag="admin-port",
        group=LISTEN,
    )
    admin_host: str = setting(
        "127.0.0.1",
        "address of the admin endpoints",
        flag="admin-host",
        group=LISTEN,
        convert=listen_address,
    )
    # A scrape or a probe is one short request: a few connections are plenty, and they come
    # out of the game port's file-descriptor budget.
    admin_max_connections: int = setting(
        16, "connections the admin port holds at most; more are answered 503", group=LISTEN
    )
    admin_max_per_ip: int = setting(
        4,
        "connections the admin port holds at most from one address; more are answered 503",
        group=LISTEN,
    )
    log_format: str = setting(
        "text",
        "log lines as text, or as one JSON object each (for log collectors)",
        flag="log-format",
        group=LISTEN,
        choices=("text", "json"),
    )
    log_level: str = setting(
        "INFO",
        "log verbosity",
        flag="log-level",
        group=LISTEN,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
    )

    # --- connections and transport ---------------------------------------------------------
    # A socket holds a slot from TCP accept to close, on every path (server/admission.py):
    # a handshake in progress first, an open connection once its websocket is accepted.
    max_connections: int = setting(
        20_000,
        "websocket connections held at most (fewer if the file-descriptor limit allows "
        "fewer); more are refused with HTTP 503",
        flag="max-connections",
        least=1,
        group=ADMISSION,
    )
    max_connections_per_ip: int = setting(
        100,
        "websocket connections held at most from one address (an IPv6 /64 counts as one); "
        "more are refused with HTTP 503",
        flag="max-per-ip",
        least=1,
        group=ADMISSION,
    )
    max_handshakes_per_ip: int = setting(
        32,
        "connections from one address still in their websocket handshake; more are "
        "answered HTTP 503 at once",
        flag="max-handshakes-per-ip",
        least=1,
        group=ADMISSION,
    )
    handshake_timeout_s: float = setting(
        10.0, "seconds a connection may take to complete its websocket handshake", group=ADMISSION
    )
    # A health check must not fail because one address floods: over its address's handshake
    # cap a socket is still read, for a GET /healthz, while a few such are held in all.
    max_health_only: int = setting(
        64,
        "connections over their address's handshake cap still read, in all, for a GET "
        "/healthz (answered 200; any other request 503); past them, answered 503 at once",
        group=ADMISSION,
    )
    health_only_timeout_s: float = setting(
        2.0,
        "seconds a connection over its address's handshake cap has to send its GET /healthz",
        group=ADMISSION,
    )
    # asyncio accepts up to `backlog` connections each time the listening socket is ready,
    # all in one turn of the event loop: at 100 (its default) a connection flood held every
    # other client up for that whole batch. Measured (bench/attack.py http-flood, 5 s, load
    # 4): a bystander's p50/p99 during it 20-23/48-106 ms at 100, 9-11/24-47 ms at 16.
    listen_backlog: int = setting(
        16,
        "connections the kernel queues for accept, and the most accepted in one turn of the "
        "event loop",
        group=ADMISSION,
    )
    fd_reserve: int = setting(
        256,
        "file descriptors kept free for the database, the engine workers and a burst of "
        "accepts (at most a quarter of the limit): the sockets held stay under the "
        "descriptor limit less these",
        group=ADMISSION,
    )
    allow_origins: tuple[str, ...] = setting(
        (),
        "browser origin allowed to connect (e.g. https://play.example.org); repeat the option "
        "or separate with commas. A request from any other origin is refused with HTTP 403; "
        "one without an Origin header (not a browser) is allowed",
        flag="allow-origin",
        group=ADMISSION,
    )
    trusted_proxies: tuple[str, ...] = setting(
        (),
        "address or network (CIDR) of a reverse proxy in front of this server (nginx, "
        "HAProxy) whose X-Forwarded-For names the client: the per-address caps then count "
        "the client's address, not the proxy's; repeat the option or separate with commas. "
        "From any other address the header is ignored",
        flag="trusted-proxy",
        group=ADMISSION,
    )
    send_buffer: int = setting(
        512 * 1024,
        "bytes waiting to be sent to a client (pongs included) before it is closed as too "
        "slow (4008); one larger frame still goes to a client that has caught up",
        group=ADMISSION,
    )
    receive_queue: int = setting(
        8,
        "frames read ahead of the handler (each at most 64 KiB); past it the server stops "
        "reading that socket until the handler catches up",
        group=ADMISSION,
    )
    compression: str = setting(
        "none",
        "websocket permessage-deflate: none (frames are a few dozen bytes and deflate costs "
        "memory per connection) or deflate",
        flag="compression",
        group=ADMISSION,
        choices=("none", "deflate"),
    )
    # Keepalive: a client that does not answer a ping within ping_timeout_s is closed (this
    # also ends a connection stalled in the middle of a frame).
    ping_interval_s: float = setting(20.0, "seconds between keepalive pings", group=ADMISSION)
    ping_timeout_s: float = setting(
        20.0, "seconds a keepalive ping waits for its pong", group=ADMISSION
    )
    close_timeout_s: float = setting(
        10.0, "seconds a closing handshake may take before the TCP is cut", group=ADMISSION
    )
    drain_timeout_s: float = setting(
        20.0,
        "seconds a stop (SIGTERM) may spend handing games over and closing connections; "
        "then the rest is cut (every move is stored already)",
        flag="drain-timeout-s",
        group=ADMISSION,
    )

    # --- rate limits ---------------------------------------------------------------------
    # Every message and every websocket ping takes a token (pings are answered by the
    # websocket layer, so one over the rate is not refused, only counted).
    rate_per_s: float = setting(
        200.0,
        "messages (and pings) per second a connection may send, sustained",
        flag="rate",
        positive=True,
        group=RATES,
    )
    burst: int = setting(
        400,
        "messages (and pings) a connection may send in a burst",
        flag="burst",
        least=1,
        group=RATES,
    )
    # Request costs, in the tokens of the rate limit above (a move, or any frame, takes 1).
    # Measured on this class of machine (CPU time, median): validating and storing a move
    # 0.06 ms; reading a 361-move record with its AI statistics (164 KiB) from the database
    # and encoding it 15 ms; the same reply from the record cache 0.007 ms, plus sending
    # 164 KiB: so a reply is also charged by its size.
    cost_get: float = setting(
        10.0, "tokens a `get` (or a `resume` served from the database) takes", group=RATES
    )
    cost_list: float = setting(10.0, "tokens a `list` takes", group=RATES)
    cost_lobby: float = setting(
        10.0, "tokens a `lobby` request (a subscription or a page) takes", group=RATES
    )
    cost_per_kib: float = setting(
        1.0,
        "tokens each KiB of a get, resume, watch, list or lobby reply takes, on top of the "
        "request's cost (charged after the reply is sent: a client may owe tokens)",
        group=RATES,
    )
    record_cache_bytes: int = setting(
        32 * 2**20,
        "bytes of encoded game records kept for `get` (least recently used out first)",
        group=RATES,
    )
    # Game events a player's actions cause for others, capped per game (as Lichess does).
    presence_burst: int = setting(
        4,
        "absences of a seat announced to its game at once; more are announced as the "
        "budget refills (a player coming back is always announced)",
        group=RATES,
    )
    presence_refill_s: float = setting(
        10.0, "seconds for one more announced absence per seat", group=RATES
    )
    draw_offer_plies: int = setting(
        1,
        "plies that must be played before a seat may offer a draw again (Lichess: 20 in chess)",
        group=RATES,
    )
    max_rematch_offers: int = setting(3, "rematch offers per seat and game", group=RATES)

    # --- players and sessions ------------------------------------------------------------
    max_open_games_per_player: int = setting(
        20,
        "unfinished games a player may hold at once",
        flag="max-games-per-player",
        least=1,
        group=IDENTITY,
    )
    # Per address as well as per session (Lichess limits per IP and per user): a client
    # that opens a new session for every connection is still one address.
    max_open_games_per_ip: int = setting(
        100,
        "unfinished games the players of one address may hold at once",
        flag="max-games-per-ip",
        least=1,
        group=IDENTITY,
    )
    new_sessions_per_ip_per_minute: float = setting(
        10.0,
        "new sessions (hello without one) per minute from one address, sustained",
        flag="new-sessions-per-ip",
        positive=True,
        group=IDENTITY,
    )
    new_sessions_burst_per_ip: int = setting(
        30,
        "new sessions one address may open in a burst (a school behind one NAT)",
        flag="new-sessions-burst-per-ip",
        least=1,
        group=IDENTITY,
    )
    # A session token holds 192 bits: guessing one is hopeless, but each guess costs the
    # database a read; and an address that keeps failing is guessing.
    failed_resumes_per_ip_per_minute: float = setting(
        10.0,
        "hellos with a session the server does not know (expired, or guessed) per minute "
        "from one address, sustained; past them a hello with any session from it is refused "
        "(too_many) until the allowance refills",
        flag="failed-resumes-per-ip",
        positive=True,
        group=IDENTITY,
    )
    failed_resumes_burst_per_ip: int = setting(
        30,
        "hellos with an unknown session one address may send in a burst",
        flag="failed-resumes-burst-per-ip",
        least=1,
        group=IDENTITY,
    )
    session_idle_s: float = setting(
        30 * 86_400.0,
        "seconds a session that has played may go unused before it expires and its name "
        "is free again",
        flag="session-idle-s",
        group=IDENTITY,
    )
    unplayed_session_idle_s: float = setting(
        86_400.0,
        "seconds a session that never held a seat may go unused before it expires",
        group=IDENTITY,
    )
    session_sweep_s: float = setting(
        60.0, "seconds between sweeps for expired sessions", group=IDENTITY
    )
    abandon_unstarted_s: float = setting(
        60.0,
        "seconds after which an open game whose creator left, or a live game in which "
        "neither side has moved and whose players all left, is aborted",
        group=IDENTITY,
    )
    abandon_s: float = setting(
        3_600.0,
        "seconds after which a game whose players all left is ended as abandoned",
        group=IDENTITY,
    )

    # --- lobby ---------------------------------------------------------------------------
    max_seeks_per_connection: int = setting(
        5, "open seeks (and quick-pairing entries) per connection", group=LOBBY
    )
    lobby_page: int = setting(
        50,
        "seeks and live games in a lobby page: the most relevant, the rest by paging",
        flag="lobby-page",
        least=1,
        group=LOBBY,
    )
    lobby_max_page: int = setting(
        200, "the largest page a client may ask for (`limit`)", group=LOBBY
    )
    lobby_tick_s: float = setting(
        0.25,
        "seconds over which lobby changes are coalesced: each subscriber gets at most one "
        "update a tick",
        group=LOBBY,
    )
    lobby_events_per_tick: int = setting(
        8,
        "lobby_event frames a tick sends a subscriber that did not ask for pages; more "
        "changes are sent as one fresh lobby_state",
        group=LOBBY,
    )

    # --- games ---------------------------------------------------------------------------
    grace_s: float = setting(
        60.0,
        "seconds a seat is held after its player leaves; then the opponent may claim the game",
        flag="grace-s",
        group=GAMES,
    )
    restore_quiet_s: float = setting(
        5.0,
        "seconds after a game is restored (a restart, a cluster node taking it over) before a "
        "seat whose player has not come back is announced away (its grace counts from the "
        "restore all the same)",
        flag="restore-quiet-s",
        group=GAMES,
    )
    keep_finished_s: float = setting(
        600.0,
        "seconds a finished game stays in memory (rematch, resume)",
        flag="keep-finished-s",
        group=GAMES,
    )
    first_move_s: float = setting(
        FIRST_MOVE_S,
        # Other than 30, it is sent in snapshots (first_move_ms), which clients built before
        # 2026-12-07 cannot read: no timed game for them (PROTOCOL.md, Versions).
        "seconds for each side's first move in a timed game, else it is aborted",
        group=GAMES,
    )
    max_watched_per_connection: int = setting(
        100, "games one connection may follow as a spectator", group=GAMES
    )

    # --- engine --------------------------------------------------------------------------
    engine: str = setting(
        "local",
        "where AI searches run: local (this server's own engine processes) or queue (the "
        "cluster's Redis queue, --bus, served by `noughts engine-worker` on any machine)",
        flag="engine",
        group=ENGINE,
        choices=("local", "queue"),
    )
    workers: int | None = setting(
        None,
        f"engine worker processes for AI moves, at most {MOST_PROCESSES}; 0 disables AI games "
        "(default: CPU count)",
        flag="workers",
        most=MOST_PROCESSES,
        group=ENGINE,
    )
    max_budget_ms: int = setting(
        10_000,
        "the most thinking time per move (budget_ms) a new game may give the AI; more is "
        "refused (bad_request)",
        flag="max-budget-ms",
        least=1,
        group=ENGINE,
    )
    max_ai_searches_per_player: int = setting(
        4,
        "AI searches one player's games may have waiting or running; a new game against the AI "
        "past it is refused (too_many); --workers 0 is the way to refuse every AI game",
        flag="max-ai-searches",
        least=1,  # (0 refused every AI game while /readyz said ready)
        group=ENGINE,
    )
    ai_running_per_player: int = setting(
        1,
        "AI searches of one player's games that run at once; the rest wait their turn, their "
        "time not started (players are served in turn, so no one holds every worker)",
        flag="ai-running-per-player",
        least=1,
        group=ENGINE,
    )
    # 8: a player is told within 10 s (a patient client's wait; bench/attack.py's) that the
    # AI cannot move, while a worker restarting from numba's cache still makes it.
    engine_wait_s: float = setting(
        8.0,
        "seconds an AI move may wait while no engine worker makes progress (all down, "
        "restarting or past their budgets; queueing behind busy workers is not counted); then "
        "its game is aborted (reason engine_unavailable) and its players get an "
        "engine_unavailable error",
        flag="engine-wait-s",
        positive=True,  # (0 aborted every AI move queued behind a busy worker)
        group=ENGINE,
    )
    engine_restart_max_s: float = setting(
        30.0,
        "longest pause between attempts to restart a dead engine worker (from 0.5 s, doubling)",
        group=ENGINE,
    )
    warm_up: str = setting(
        "all",
        "GAME:ALGORITHM pairs (comma-separated) the engine compiles before the server listens; "
        "the others are compiled in the background at the lowest priority. all: every game "
        "and algorithm. Compiling happens once, into numba's cache",
        flag="warm-up",
        group=ENGINE,
    )
    # 32: the tree of one game's 1 s search (mcts) fits; a worker's running search takes up
    # to ~110 MB more (engine/mcts.py MAX_NODES), whatever this says.
    engine_tree_mb: int = setting(
        32,
        "search trees an engine worker keeps for the next moves of its games, in MiB, least "
        "recently searched dropped first",
        flag="engine-tree-mb",
        group=ENGINE,
    )
    progress: bool = setting(
        False,
        "print each engine warm-up step on stdout, a line each, before the address line "
        "(for a program that starts the server and shows the wait)",
        flag="progress",
        group=ENGINE,
    )
    reuse_running: bool = setting(
        False,
        "if another server holds --db's lock, print its address line ('noughts server already "
        "running on URL') and exit 0, waiting while it starts (for a program that starts a "
        "server per use, as noughts play does)",
        flag="reuse-running",
        group=ENGINE,
    )

    # --- cluster -------------------------------------------------------------------------
    protocol_version: int = setting(
        PROTOCOL_VERSION,
        "the newest protocol version this server speaks, 2 up to the code's own: a lower one "
        "serves and announces itself (a node's heartbeat) as a server of that version does "
        "(a hello saying a newer version is refused; no message of a newer version is sent)",
        group=CLUSTER,
        least=SEQ_SINCE_VERSION,
        most=PROTOCOL_VERSION,
    )
    bus: str | None = setting(
        None,
        "the cluster's Redis, redis://HOST:PORT/N: with --db postgresql://, this server is "
        "a node of the cluster of every server using both (games shared, owned by shard); "
        "also the engine queue (--engine queue)",
        flag="bus",
        group=CLUSTER,
        convert=bus_url,
    )
    node: str | None = setting(
        None,
        "this node's name in the cluster (letters, digits, '-', at most 32; default: random)",
        flag="node",
        group=CLUSTER,
    )
    claim_s: float = setting(
        0.5,
        "seconds between a node's claims of shards (its fair share, and those nobody held "
        "for a whole period, as a dead node's): about the time a failover takes",
        group=CLUSTER,
    )
    heartbeat_s: float = setting(0.5, "seconds between a node's presence heartbeats", group=CLUSTER)
    presence_ttl_s: float = setting(
        2.0, "seconds a node counts as alive after its last heartbeat", group=CLUSTER
    )
    forward_timeout_s: float = setting(
        5.0,
        "seconds a request forwarded to its game's owner node may take (owners changing "
        "included); then it fails with unavailable",
        group=CLUSTER,
    )
    bus_prefix: str = setting(
        "noughts",
        "prefix of every key this cluster uses in Redis",
        flag="bus-prefix",
        group=CLUSTER,
    )
    # A command is a round trip of well under a millisecond on a LAN: seconds without an
    # answer is a Redis stalled or cut off, not a slow one.
    bus_timeout_s: float = setting(
        2.0,
        "seconds a command to the cluster's Redis (--bus) may take to connect, and again to be "
        "answered; then it fails, and a request that needs Redis is answered unavailable "
        "until Redis answers a heartbeat again; the bus's subscriber, silent this long, is "
        "sent a PING, and taken for dead (subscribed again) if it is not answered as long; "
        "so is the bus's publisher, sent one this often",
        flag="bus-timeout-s",
        group=CLUSTER,
        positive=True,
    )

    # --- storage -------------------------------------------------------------------------
    db: str | None = setting(
        None,
        "where games are stored: a SQLite file, or a PostgreSQL URL postgresql://USER@HOST/DB "
        "(default: noughts.db in your user data directory)",
        flag="db",
        group=STORAGE,
        convert=database,
    )
    # Above 0 (a cap of 0 refuses every write), at most SQLite's largest database: 2**32 - 2
    # pages of at most 64 KiB (SQLite docs, "Limits"), 2**28 MiB; beyond, a cap means nothing.
    db_max_mb: float | None = setting(
        None,
        "the database's size cap in MiB, its write-ahead log included (a quarter of it at "
        "most, the file the rest): past it every write (a move, a new game) fails with "
        "storage_full naming the cap, and the games wait (default: no cap)",
        flag="db-max-mb",
        positive=True,
        most=2**28,
        group=STORAGE,
    )
    db_timeout_s: float = setting(
        DB_TIMEOUT_S,
        "seconds the server waits for PostgreSQL to answer (a connection, a read, a commit); "
        "then the request that needs it fails with unavailable, as if PostgreSQL were down",
        flag="db-timeout-s",
        positive=True,
        group=STORAGE,
    )
    mark_quarantined: bool = setting(
        True,
        "set a game whose stored rows cannot be read aside in the database (status "
        "quarantined), so that no read meets it again; false: leave it out and log it, its "
        "row as it is (the server of noughts games, replay and export: they only read)",
        flag="mark-quarantined",
        group=STORAGE,
    )
    restore_games: bool = setting(
        True,
        "at start, take up the open and live games stored in the database (their clocks "
        "and abandonment run, their AI moves); false: leave them as stored, `list` of open "
        "and live games reading them from the database (the server of noughts games, replay "
        "and export: they only read; a cluster node takes its shards' games regardless)",
        flag="restore-games",
        group=STORAGE,
    )
    storage_retry_s: float = setting(
        1.0,
        "seconds a game waits after a failed write before its timers (flag, abandon) and "
        "its AI move try again",
        group=STORAGE,
    )


def _scalar_type(annotation: Any) -> type:
    """int, float, str or bool for a field's annotation (``X | None`` means X, and
    ``tuple[str, ...]`` means str: a list option)."""
    if typing.get_origin(annotation) is tuple:
        return str
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if args else annotation
    if base not in (int, float, str, bool):
        raise TypeError(f"settings support int, float, str and bool fields, not {annotation!r}")
    return typing.cast(type, base)


def _env_name(flag: str) -> str:
    return ENV_PREFIX + flag.upper().replace("-", "_")


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is tuple


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


class _ListOption(argparse.Action):
    """A repeatable option taking comma lists: the first use on the command line replaces
    the default (from the environment), later ones add to it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        seen = f"_{self.dest}_given"
        before = getattr(namespace, self.dest) if getattr(namespace, seen, False) else ()
        setattr(namespace, self.dest, tuple(before) + tuple(values))
        setattr(namespace, seen, True)


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def bounded(kind: type, least: int, most: int | None, positive: bool) -> Callable[[str], Any]:
    """A number no setting takes below ``least`` (0: a count, a size, seconds, a port), nor
    above ``most``, nor 0 when ``positive``, nor NaN or infinity: refused by argparse in one
    line rather than failing later (--db-max-mb inf: an OverflowError traceback)."""

    def convert(text: str) -> Any:
        value = kind(text)
        low = value > least if positive else value >= least
        if not low or (most is not None and value > most):
            bounds = f"{least}..{most}" if most is not None else f"{least} or more"
            if positive:
                bounds = f"above {least}" + ("" if most is None else f" and at most {most}")
            raise argparse.ArgumentTypeError(f"must be {bounds}, not {text}")
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
        return value

    convert.__name__ = kind.__name__  # argparse's "invalid int value" names the type
    return convert


def add_arguments(
    parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None
) -> None:
    """One option per settings field with a ``flag``, its default from the environment
    (``NOUGHTS_<FLAG>``) or the field, in one argument group per settings section."""
    environ = os.environ if environ is None else environ
    hints = typing.get_type_hints(ServerSettings)
    groups = {name: parser.add_argument_group(name) for name in GROUPS}
    for f in dataclasses.fields(ServerSettings):
        flag = f.metadata.get("flag")
        if flag is None:
            continue
        kind = _scalar_type(hints[f.name])
        listed = _is_list(hints[f.name])
        convert: Any = _comma_list if listed else _parse_bool if kind is bool else kind
        if kind in (int, float) and not listed:
            most = 65535 if flag.endswith("port") else f.metadata["most"]
            convert = bounded(kind, f.metadata["least"], most, f.metadata["positive"])
        if f.metadata["convert"] is not None:
            convert = f.metadata["convert"]
        env = _env_name(flag)
        default = f.default
        if env in environ:
            try:
                default = convert(environ[env])
            except argparse.ArgumentTypeError as exc:
                parser.error(f"${env}={environ[env]!r}: {exc}")
            except ValueError:
                parser.error(f"${env}={environ[env]!r} is not a valid {kind.__name__}")
        if listed:
            shown = f"default: {', '.join(typing.cast(Sequence[str], f.default)) or 'none'}; "
        else:
            shown = "" if f.default is None else f"default: {f.default}; "
        extra: dict[str, Any] = {"action": _ListOption} if listed else {}
        groups[f.metadata["group"]].add_argument(
            f"--{flag}",
            dest=f.name,
            metavar=None if f.metadata.get("choices") else flag.upper().replace("-", "_"),
            type=convert,
            default=default,
            choices=f.metadata.get("choices"),
            help=f"{f.metadata['help']} ({shown}${env})",
            **extra,
        )


def from_arguments(args: argparse.Namespace) -> ServerSettings:
    """The settings a parsed command line names (fields without a flag keep defaults)."""
    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(ServerSettings)
        if f.metadata.get("flag") is not None
    }
    return ServerSettings(**values)


def documented() -> list[tuple[str, str, Any, str]]:
    """(group, name, default, help) for every setting: what PROTOCOL.md's tables list."""
    return [
        (f.metadata["group"], f.name, f.default, f.metadata["help"])
        for f in dataclasses.fields(ServerSettings)
    ]

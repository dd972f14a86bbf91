"""`python -m server`: run the noughts game server (also `noughts serve`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import logging
import re
import secrets
import signal
import ssl
import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.admin import AdminServer
    from server.lockfile import ServerLock
    from server.settings import ServerSettings
    from server.store import Store
    from server.supervisor import Nodes


# Container objects allocated (net) between two collections of the youngest generation
# (CPython's default: 700). With 200 games in flight, thousands of a move's objects are
# alive at any moment, and each collection at 700 walked them and passed them on to be
# walked again: bench/load.py throughput, three alternating runs each (load 2-4), server
# CPU per move 123.0 us (122.4-124.5) at 700, 114.1 us (104.9-114.7) at 10,000.
GC_YOUNG = 10_000
# Set once this process listens: a supervised node failing before exits BOOT_ERROR
# (server/supervisor.py), which its supervisor does not restart for ever.
_listened = False
NODE_NAME = r"[A-Za-z0-9-]{1,32}"  # a cluster node's name (--node)


def open_store(db: str, max_mb: float | None = None, timeout_s: float | None = None) -> Store:
    """The store a ``--db`` value names: a postgresql:// URL, else a SQLite file path
    (``max_mb``: its size cap, settings.db_max_mb; ``timeout_s``: PostgreSQL's,
    settings.db_timeout_s)."""
    from server.pgstore import PostgresStore, is_postgres_url
    from server.settings import DB_TIMEOUT_S
    from server.store import SQLiteStore

    if is_postgres_url(db):
        return PostgresStore(db, timeout_s=DB_TIMEOUT_S if timeout_s is None else timeout_s)
    return SQLiteStore(db, max_mb=max_mb)


def address_url(scheme: str, host: str, port: int) -> str:
    """The URL of a server listening on ``host`` (an IPv6 literal in brackets, RFC 3986:
    ws://[::1]:8765, which clients and PATH.lock's readers can parse)."""
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The server's TLS context for wss://, or None without a certificate; ValueError with a
    one-line reason when the files are missing or do not match."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ValueError("--tls-cert and --tls-key go together")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the TLS certificate {cert} and key {key}: {exc}") from exc
    return context


def build_parser() -> argparse.ArgumentParser:
    from engine.command_line import CommandParser
    from server.settings import add_arguments

    parser = CommandParser(
        prog="noughts serve",
        description="Run the noughts game server: websocket + msgpack, games logged to SQLite. "
        "Every option can also be set in the environment as NOUGHTS_<OPTION> "
        "(e.g. --max-per-ip as NOUGHTS_MAX_PER_IP).",
    )
    add_arguments(parser)
    return parser


async def run(args: argparse.Namespace) -> int:
    from server.errors import ServerError
    from server.pgstore import is_postgres_url
    from server.settings import from_arguments
    from server.store import default_db_path

    settings = from_arguments(args)
    db_path = settings.db or str(default_db_path())
    lock = None
    if not is_postgres_url(db_path):  # (PostgresStore holds an advisory lock of its own)
        try:
            # Before the database is opened (or migrated): one server per database file.
            lock = await _acquire(db_path, settings)
        except ServerError as exc:
            print(f"noughts serve: {exc}", file=sys.stderr)
            return 1
        if lock is None:
            return 0  # --reuse-running: the running server's address is printed
    try:
        return await _serve(settings, db_path, lock)
    finally:
        if lock is not None:
            lock.release()


async def _acquire(db_path: str, settings: ServerSettings) -> ServerLock | None:
    """The database's lock; with --reuse-running, None once the address of the server
    holding it is printed (waiting while that one starts)."""
    from server.lockfile import DatabaseInUse, ServerLock

    waiting = False
    while True:
        try:
            return ServerLock.acquire(db_path)
        except DatabaseInUse as exc:
            if not settings.reuse_running:
                raise
            if exc.url is not None and exc.reusable:
                print(f"noughts server already running on {exc.url} (pid {exc.pid})", flush=True)
                return None
            if not waiting and settings.progress:
                # (a command that only reads holds it for a few seconds: then this one starts)
                doing = "starting it" if exc.url is None else "reading the games"
                print(f"warming up the engine: another noughts is {doing}", flush=True)
            waiting = True
            await asyncio.sleep(0.2)


async def _serve(settings: ServerSettings, db_path: str, lock: ServerLock | None) -> int:
    from server.admission import Proxies
    from server.cluster import new_node_id
    from server.errors import ServerError
    from server.logs import name_node
    from server.pgstore import PostgresStore, is_postgres_url
    from server.supervisor import engine_workers, supervised

    if settings.engine == "queue" and not settings.bus:
        print("noughts serve: --engine queue needs --bus redis://HOST:PORT/N", file=sys.stderr)
        return 2
    if settings.bus and settings.engine != "queue" and not is_postgres_url(db_path):
        # (it was taken and did nothing: a SQLite server is no node of a cluster)
        print(
            "noughts serve: --bus needs --db postgresql://... (a node of the cluster) or "
            "--engine queue (AI searches on its queue)",
            file=sys.stderr,
        )
        return 2
    try:
        tls = tls_context(settings.tls_cert, settings.tls_key)
        Proxies(settings.trusted_proxies)
    except ValueError as exc:
        print(f"noughts serve: {exc}", file=sys.stderr)
        return 2
    # With --bus, a server on PostgreSQL is a node of the cluster of every server using
    # the same database and bus (server/cluster.py); on SQLite, --bus is only the engine queue.
    node = None
    if settings.bus and is_postgres_url(db_path):
        node = settings.node or new_node_id()
        if not re.fullmatch(NODE_NAME, node):
            print(
                f"noughts serve: --node {node!r}: 1 to 32 letters, digits and '-'",
                file=sys.stderr,
            )
            return 2
        # The other nodes of --processes are NODE-1 .. NODE-(N-1), admin ports after this
        # one's: refused here rather than by each of them, started again for ever.
        last = settings.processes - 1
        if last and not re.fullmatch(NODE_NAME, f"{node}-{last}"):
            print(
                f"noughts serve: --node {node!r}: with --processes {settings.processes} the "
                f"nodes are named up to {node}-{last}, over 32 characters",
                file=sys.stderr,
            )
            return 2
        if last and settings.admin_port and settings.admin_port + last > 65535:
            print(
                f"noughts serve: --admin-port {settings.admin_port}: with --processes "
                f"{settings.processes} the nodes' admin ports go past 65535",
                file=sys.stderr,
            )
            return 2
    if settings.processes > 1 and settings.secret_path:
        # (each process would make a secret of its own, and answer the others' 403)
        print("noughts serve: --secret-path is for one process, not --processes", file=sys.stderr)
        return 2
    if settings.processes > 1 and node is None:
        print(
            "noughts serve: --processes needs --db postgresql://... and --bus redis://... "
            "(each process is a node of the cluster)",
            file=sys.stderr,
        )
        return 2
    if node is not None and (settings.processes > 1 or supervised()):
        name_node(node)  # (the nodes of --processes write one log)
    if settings.processes > 1 and settings.workers is None:
        settings = dataclasses.replace(settings, workers=engine_workers(settings.processes))
    # Stopping is graceful from here on, the engine's warm-up included (minutes with many
    # workers): a signal then stops it, kills its workers and releases the lock.
    stop = _stop_on_signals()
    store = (
        PostgresStore(db_path, node=node, timeout_s=settings.db_timeout_s)
        if node is not None
        else open_store(db_path, settings.db_max_mb, settings.db_timeout_s)
    )
    store.marks_quarantined = settings.mark_quarantined
    try:
        await store.open()
    except ServerError as exc:
        print(f"noughts serve: {exc}", file=sys.stderr)
        return 1
    try:
        return await _serve_on(store, settings, node, tls, lock, stop)
    finally:
        # However the start-up or the run ends (an unforeseen error too): a SQLite store's
        # thread would keep the process alive, holding the database's lock, for ever.
        await store.close()


async def _serve_on(
    store: Store,
    settings: ServerSettings,
    node: str | None,
    tls: ssl.SSLContext | None,
    lock: ServerLock | None,
    stop: asyncio.Future[None],
) -> int:
    """Serve on an open store (``_serve`` closes it): the engine, the cluster, the port,
    until ``stop`` (a signal: ``_stop_on_signals``)."""
    from server.admin import AdminServer
    from server.admission import raise_open_file_limit
    from server.app import GameServer, running
    from server.errors import ServerError
    from server.pgstore import PostgresStore
    from server.pool import EnginePool
    from server.remote_engine import RemoteEngine
    from server.urls import redacted_url

    # (After the store: a database that cannot be opened is one line and nothing else.)
    # Each connection is a file descriptor: the soft limit (often 1024) goes up to the hard
    # one, as nginx's worker_rlimit_nofile does; serve() keeps the sockets under it.
    soft, hard = raise_open_file_limit()
    logging.info("file descriptors: up to %d (hard limit %d)", soft, hard)

    pool: Any = None
    if settings.engine == "queue" and settings.bus:
        pool = RemoteEngine(settings.bus, prefix=settings.bus_prefix, settings=settings)
        try:
            await pool.start()
        except ServerError as exc:
            print(f"noughts serve: {exc}", file=sys.stderr)
            return 1
        logging.info("AI searches go to the engine queue at %s", redacted_url(settings.bus))
    elif settings.workers != 0:
        from engine.errors import EngineError
        from engine.warmup import parse_targets

        try:
            warm = parse_targets(settings.warm_up)
        except EngineError as exc:
            print(f"noughts serve: --warm-up: {exc}", file=sys.stderr)
            return 2

        def progress(text: str) -> None:
            logging.info("engine warm-up: %s", text)
            if settings.progress:
                print(f"warming up the engine: {text}", flush=True)

        pool = EnginePool(
            settings.workers,
            warm=warm,
            max_tree_bytes=settings.engine_tree_mb << 20,
            progress=progress,
            settings=settings,
        )
        logging.info("starting %d engine worker%s", pool.size, "" if pool.size == 1 else "s")
        if not await _unless_stopped(pool.start_async(), stop):
            logging.info("stopped during the engine warm-up")
            pool.close()
            return 0
    game_server = GameServer(store, pool, settings=settings)
    if settings.secret_path:
        # A new secret each start, made here: never on a command line (ps shows those to
        # every user), only in the address line and the lock file (0600).
        game_server.secret_path = "/" + secrets.token_urlsafe(24)
    admin = None  # open until the process ends: /readyz answers 503 for the whole drain
    if node is not None:
        from server.bus import RedisBus
        from server.cluster import Cluster
        from server.shards import ShardLocks

        assert settings.bus is not None and isinstance(store, PostgresStore)
        bus = RedisBus(
            settings.bus, prefix=settings.bus_prefix, node=node, timeout_s=settings.bus_timeout_s
        )
        game_server.cluster = Cluster(game_server, bus, ShardLocks(store.connect_locked))
        failed: int | None = None  # the exit status of a start that ends here
        try:
            # Open while the node joins (a stalled Redis may hold the join): /readyz answers
            # 503 "bus: not joined yet" until it has, and a signal stops the join.
            admin = await _open_admin(AdminServer(game_server), settings)
            if not await _unless_stopped(game_server.cluster.start(), stop):
                logging.info("stopped while joining the cluster")
                failed = 0
        except ServerError as exc:
            print(f"noughts serve: {exc}", file=sys.stderr)
            failed = 1
        if failed is not None:
            if admin is not None:
                admin.close()
            await _close_engine(pool)
            return failed
        logging.info("node %s of the cluster on %s", node, redacted_url(settings.bus))
    try:
        async with running(game_server, settings.host, settings.port, tls) as ws_server:
            port = next(iter(ws_server.sockets)).getsockname()[1]
            if admin is None:
                admin = await _open_admin(AdminServer(game_server), settings)
            # Everything alive now (modules, numba's tables, restored games) leaves the
            # collector's generations: full collections then walk only what games
            # allocate later, which keeps their pauses short (Python docs, gc.freeze).
            gc.freeze()
            gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
            global _listened
            _listened = True
            url = address_url("wss" if tls else "ws", settings.host, port)
            if game_server.secret_path is not None:
                url += game_server.secret_path
            if lock is not None:  # (a server that took up no games serves none of them)
                lock.announce(url, reusable=settings.restore_games)
            # The first line on stdout is the address: the embedded client reads it.
            where = f"db: {store.describe()}" + ("" if node is None else f", node: {node}")
            print(f"noughts server listening on {url} ({where})", flush=True)
            others = _other_nodes(settings, port, node)
            await others.start()
            await stop
            logging.info("shutting down")
            await others.stop()
    except OSError as exc:
        print(
            f"noughts serve: cannot listen on {settings.host}:{settings.port}: {exc}",
            file=sys.stderr,
        )
        return 1
    except ServerError as exc:
        print(f"noughts serve: {exc}", file=sys.stderr)
        return 1
    finally:
        if admin is not None:
            admin.close()
        if game_server.cluster is not None:
            await game_server.cluster.close()
        await _close_engine(pool)
    return 0


async def _close_engine(pool: Any) -> None:
    """Stop the AI's engine: the local pool's workers, or the queue's connection."""
    from server.pool import EnginePool

    if isinstance(pool, EnginePool):
        pool.close()
    elif pool is not None:
        await pool.close()


def _stop_on_signals() -> asyncio.Future[None]:
    """A future done at the first SIGINT, SIGTERM or SIGHUP: each stops the server with its
    drain. SIGHUP too (a closed terminal sends it to a foreground server): the server has no
    configuration to reload, so a hangup stops it as the others do, not at once."""
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[None] = loop.create_future()

    def stopping() -> None:  # a second signal during the drain changes nothing
        if not stop.done():
            stop.set_result(None)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stopping)
    return stop


async def _unless_stopped(step: Awaitable[None], stop: asyncio.Future[None]) -> bool:
    """Run a step of the start; False, once it is cancelled, if a stop signal comes first."""
    task = asyncio.ensure_future(step)
    await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


async def _open_admin(admin: AdminServer, settings: ServerSettings) -> asyncio.Server | None:
    """The admin port (``--admin-port``), or None without one; ServerError naming the admin
    address if it cannot listen there (not the game's: the caller's OSError says that one)."""
    from server.errors import ServerError

    if settings.admin_port is None:
        return None
    where = f"{settings.admin_host}:{settings.admin_port}"
    try:
        listening: asyncio.Server = await admin.start(settings.admin_host, settings.admin_port)
    except OSError as exc:
        raise ServerError(f"cannot listen on the admin address {where}: {exc}") from exc
    logging.info(
        "admin endpoints on %s/ (healthz, readyz, metrics)",
        address_url("http", settings.admin_host, next(iter(listening.sockets)).getsockname()[1]),
    )
    return listening


def _other_nodes(settings: ServerSettings, port: int, node: str | None) -> Nodes:
    """``--processes N``: N - 1 more nodes on this machine, on the same port, with this
    one's options (server/supervisor.py)."""
    from server.supervisor import Nodes

    argv, names = {}, {}
    for index in range(1, settings.processes):
        extra = ["--processes", "1", "--reuse-port", "true", "--port", str(port)]
        extra += ["--workers", str(settings.workers)]
        names[index] = f"{node}-{index}"
        extra += ["--node", names[index]]
        if settings.admin_port:
            extra += ["--admin-port", str(settings.admin_port + index)]
        argv[index] = ["-m", "server", *sys.argv[1:], *extra]
    return Nodes(argv, names)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from server.logs import configure

    configure(args.log_level, args.log_format)
    from server.supervisor import die_with_supervisor, supervised

    die_with_supervisor()  # (a node of another's --processes: it ends with it)
    if args.log_level != "DEBUG":
        # websockets logs every connection opened, refused and closed at INFO: two lines a
        # connection, a flood under attack. The server logs its refusals at a bounded rate.
        logging.getLogger("websockets").setLevel(logging.WARNING)
    if args.loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            print("noughts serve: uvloop is not installed (pip install uvloop)", file=sys.stderr)
            return 2
        code = int(uvloop.run(run(args)))
    else:
        code = asyncio.run(run(args))
    if code != 0 and not _listened and supervised():
        from server.supervisor import BOOT_ERROR

        return BOOT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())

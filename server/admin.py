"""The admin HTTP port: ``/healthz``, ``/readyz`` and Prometheus ``/metrics``.

Operators and load balancers poll it, never players: it listens on its own port
(``--admin-port``; 127.0.0.1 by default), answers GET only, reads at most one
small request per connection under a timeout, and closes. It holds a few connections
at most, per address and in all (``admin_max_per_ip``, ``admin_max_connections``),
counted as the game port counts its handshakes (server/admission.py) and taken out of
its file-descriptor budget: a crowd of idle connections here is answered 503, and
cannot starve the game port or the database of descriptors. ``/healthz`` says the
process is up; ``/readyz`` says it can serve a game: the store answers a read
and the engine has a live worker (or AI games are off), and a cluster node has
joined the bus (the port opens before it joins: 503 ``bus: not joined yet`` until
then); ``/metrics`` is the text
exposition of prometheus-client, with the server's figures read at scrape time
from its own state (nothing is counted on the per-move path for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from server.admission import Admission, Refused
from server.transport import storms

if TYPE_CHECKING:
    from server.app import GameServer

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8192  # request line and headers; a longer request is answered 431
REQUEST_TIMEOUT_S = 5.0  # to read the request, and again to send the answer
READY_CHECK_TIMEOUT_S = 2.0

Check = Callable[[], Awaitable[None]]


class NotReady(Exception):
    """A check's own verdict: its message is the whole answer (no exception type)."""


class ServerCollector(Collector):
    """The game server's figures, read from its state at each scrape."""

    def __init__(self, game_server: GameServer) -> None:
        self.game_server = game_server

    def collect(self) -> Iterator[Metric]:
        server = self.game_server
        yield GaugeMetricFamily(
            "noughts_connections", "open websocket connections", value=len(server.connections)
        )
        yield GaugeMetricFamily(
            "noughts_players_online", "players with an open connection", value=len(server.players)
        )
        games = GaugeMetricFamily("noughts_games", "games in memory by status", labels=["status"])
        for status, count in sorted(Counter(g.status for g in server.games.values()).items()):
            games.add_metric([status], count)
        yield games
        store = server.store
        yield CounterMetricFamily(
            "noughts_store_commits", "transactions committed", value=getattr(store, "commits", 0)
        )
        yield CounterMetricFamily(
            "noughts_store_writes", "writes committed", value=getattr(store, "writes", 0)
        )
        cluster = server.cluster
        if cluster is not None:
            yield GaugeMetricFamily(
                "noughts_cluster_shards", "shards this node owns", value=len(cluster.locks.held)
            )
            yield GaugeMetricFamily(
                "noughts_cluster_nodes", "live nodes of the cluster", value=len(cluster.present)
            )
            yield CounterMetricFamily(
                "noughts_cluster_forwarded",
                "requests forwarded to their game's owner node",
                value=cluster.forwarded,
            )
            yield CounterMetricFamily(
                "noughts_bus_lost",
                "bus messages not published (Redis down)",
                value=cluster.bus.lost,
            )
        pool = server.pool
        if pool is not None:
            yield GaugeMetricFamily(
                "noughts_engine_workers_alive", "engine workers alive", value=pool.alive
            )
            yield GaugeMetricFamily(
                "noughts_engine_queue_depth", "AI searches waiting or running", value=pool.pending
            )
            yield CounterMetricFamily(
                "noughts_engine_workers_replaced", "engine workers replaced", value=pool.replaced
            )


class AdminServer:
    """The admin port of one server process."""

    def __init__(self, game_server: GameServer) -> None:
        self.game_server = game_server
        settings = game_server.settings
        # Every admin connection stays at the first stage (a request in progress) until it
        # closes: capped per address and, through max_sockets, in all.
        self.admission = Admission(
            max_open=0,
            max_open_per_address=0,
            max_handshakes_per_address=settings.admin_max_per_ip,
            max_sockets=settings.admin_max_connections,
        )
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(ServerCollector(game_server))
        self.checks: dict[str, Check] = {
            "drain": self._check_drain,
            "store": self._check_store,
            "engine": self._check_engine,
        }
        if game_server.cluster is not None:
            self.checks["bus"] = self._check_bus

    async def start(self, host: str, port: int) -> asyncio.Server:
        return await asyncio.start_server(
            self._serve,
            host,
            port,
            limit=MAX_REQUEST_BYTES,
            backlog=self.game_server.settings.listen_backlog,  # (accepted in one turn at most)
        )

    async def _check_drain(self) -> None:
        """Stopping (SIGTERM): a load balancer sends no new client; /healthz stays 200."""
        if self.game_server.draining:
            if self.game_server.cluster is not None:
                raise NotReady("draining: its games go to the other nodes")
            raise NotReady("draining: the server is stopping")

    async def _check_store(self) -> None:
        await self.game_server.store.list_games("finished", 1)

    async def _check_bus(self) -> None:
        """A cluster node: joined (subscribed, announced, its first shards claimed), still
        subscribed to the bus, and holding its shard locks' connection."""
        cluster = self.game_server.cluster
        assert cluster is not None
        if not cluster.joined:
            raise NotReady("not joined yet")
        if not cluster.bus.connected:
            raise NotReady("not subscribed to the bus (Redis unreachable)")
        await cluster.bus.client.ping()
        if not cluster.locks.connected:
            raise NotReady("no connection holding shard locks (PostgreSQL unreachable)")

    async def _check_engine(self) -> None:
        pool = self.game_server.pool
        if pool is not None and pool.alive == 0:
            raise NotReady("no engine worker is alive")

    async def readiness(self) -> dict[str, str]:
        """Each check's verdict: "ok" or why it failed."""
        verdicts = {}
        for name, check in self.checks.items():
            try:
                await asyncio.wait_for(check(), READY_CHECK_TIMEOUT_S)
            except TimeoutError:
                verdicts[name] = f"no answer in {READY_CHECK_TIMEOUT_S:g} s"
            except NotReady as exc:
                verdicts[name] = str(exc)
            except Exception as exc:
                verdicts[name] = f"{type(exc).__name__}: {exc}"
            else:
                verdicts[name] = "ok"
        return verdicts

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) and peer else None
        try:
            ticket = self.admission.arrive(host)
        except Refused:
            settings = self.game_server.settings
            storms.warning(
                "admin refused", "refusing an admin connection from %s: over its caps", host
            )
            reason = (
                f"too_many: the admin port holds at most {settings.admin_max_per_ip} "
                f"connections per address and {settings.admin_max_connections} in all\n"
            )
            await _answer(writer, "503 Service Unavailable", "text/plain", reason.encode())
            return
        try:
            try:
                status, content_type, body = await self._respond(reader)
            except TimeoutError:
                status, content_type, body = "408 Request Timeout", "text/plain", b"timeout\n"
            except (asyncio.LimitOverrunError, ValueError):
                status, content_type, body = (
                    "431 Request Header Fields Too Large",
                    "text/plain",
                    b"request too large\n",
                )
            except (ConnectionError, asyncio.IncompleteReadError):
                writer.transport.abort()
                await _closed(writer)
                return
            await _answer(writer, status, content_type, body)
        finally:
            self.admission.leave(ticket)  # (its socket is closed: the descriptor is free)

    async def _respond(self, reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
        """The answer to the connection's one request, read within REQUEST_TIMEOUT_S (the
        readiness checks then have their own bounds)."""
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT_S)
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return "400 Bad Request", "text/plain", b"bad request\n"
        method, target = parts[0], parts[1].split("?", 1)[0]
        if method != "GET":
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        if target == "/healthz":
            return "200 OK", "text/plain", b"ok\n"
        if target == "/readyz":
            verdicts = await self.readiness()
            text = "".join(f"{name}: {verdict}\n" for name, verdict in verdicts.items())
            ready = all(v == "ok" for v in verdicts.values())
            return ("200 OK" if ready else "503 Service Unavailable"), "text/plain", text.encode()
        if target == "/metrics":
            return (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                generate_latest(self.registry),
            )
        return "404 Not Found", "text/plain", b"not found: /healthz, /readyz, /metrics\n"


async def _answer(
    writer: asyncio.StreamWriter, status: str, content_type: str, body: bytes
) -> None:
    """Send one HTTP answer and close; returns once the socket is closed."""
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode() + body)
    await _closed(writer)


async def _closed(writer: asyncio.StreamWriter) -> None:
    """Close the socket once its answer is sent and wait until it is: a client that does
    not take the answer within REQUEST_TIMEOUT_S is cut."""
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), REQUEST_TIMEOUT_S)
    except TimeoutError:
        writer.transport.abort()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
    except (ConnectionError, OSError):
        return

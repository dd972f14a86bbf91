"""Hostile clients against a real noughts server: what one attacker costs everyone else.

Each attack of issue 11 ("Hardened for the open internet") is a kind. A run starts a real
server (``python -m server``) on its own temporary database, with the server's own default
limits (``--server-args`` is passed through: a knob a fix adds, or a tighter cap), and
three processes beside it:

- a bystander (bench/load.py's scripted players, from 127.0.0.1) plays a human-vs-human
  gomoku game at a steady pace, and for the engine attacks a game against the AI (mcts,
  100 ms), from before the attack until after it;
- the attacker (a process running one kind below, from 127.0.0.2 and up: ``--addresses``)
  sets up (a long record to fetch, games to reconnect to, lobby subscribers), attacks for
  ``--seconds``, then leaves;
- this process samples the server's RSS, CPU, open files and log size from /proc every
  0.2 s, checks once a second whether a newcomer (from a fresh address) is served during
  the attack, and once the attacker has left, how long until a new connection is served
  from the attacker's address and from a fresh one.

Then it stops the server and looks up every move acknowledged to the bystander in the
database. Per attack it prints the bystander's round trip (and AI move delay) p50/p99
before, during and after the attack, the server's RSS and CPU before, during and after,
acknowledged against stored moves, the time to serve a newcomer after the attack, what
the attacker achieved, and the goals of issue 11 beside them.

    python bench/attack.py --kind http-flood              # one attack, 10 s
    python bench/attack.py --kind all --json > a.json     # every attack in turn
    python bench/load.py attack --kind ping-flood         # the same, through load.py
    python bench/attack.py --kind http-flood --server-args "--max-connections 100"
    python bench/attack.py --list                         # the attacks and their findings

Figures, not a test: it exits 0 when every goal was met, 1 when one was missed, 2 when the
harness itself could not run an attack. Everything talks to 127.0.0.0/8 only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import multiprocessing
import os
import random
import shlex
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import msgpack

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for _path in (str(ROOT), str(BENCH)):  # run as `python bench/attack.py` from anywhere
    if _path not in sys.path:
        sys.path.insert(0, _path)

import load  # noqa: E402  (bench/load.py: the server process, the client, the players)
from arguments import count, non_negative_float, positive_float, positive_int  # noqa: E402
from load import ServerProcess, WebSocketLink  # noqa: E402

from protocol import PROTOCOL_VERSION, ProtocolError, decode_server  # noqa: E402

# Issue 11, "What it must show": the goals printed beside the figures.
GOAL_P99_MS = 20.0  # a bystander's round trip during an attack ...
GOAL_P99_RATIO = 2.0  # ... or under twice its baseline
GOAL_RSS_GROWTH_MB = 100.0  # server RSS growth under a single attacker
GOAL_RECOVERY_S = 1.0  # a new connection served this soon after the attack stops

BYSTANDER_HOST = "127.0.0.1"
FRESH_HOST = "127.0.0.254"  # a newcomer nobody has seen: the probes' address
SERVER_NOFILE = 65536  # the server's soft limit on open files, unless a kind says otherwise
SAMPLE_INTERVAL_S = 0.2


def other_hosts(block: int, index: int) -> str:
    """Addresses for the innocent crowd an attack needs (lobby subscribers, one player per
    hostile name): 127.0.BLOCK.1-250, so per-address limits on the attacker leave them be."""
    return f"127.0.{block}.{1 + index % 250}"


def attacker_hosts(count: int) -> list[str]:
    """The attacker's source addresses: 127.0.0.2, 127.0.0.3, ... (loopback is a /8)."""
    if not 1 <= count <= 200:
        raise SystemExit("attack: --addresses must be 1..200")
    return [f"127.0.0.{2 + i}" for i in range(count)]


# --- the attacker's client -------------------------------------------------------------------


@dataclass(slots=True)
class AttackOptions:
    """What the attacker process runs; picklable."""

    kind: str
    host: str
    port: int
    server_pid: int
    db: str
    seconds: float
    addresses: list[str]
    connections: int | None
    rate: float | None
    quick: bool
    workers: int
    server_args: list[str]
    seed: int


class Client:
    """One attacker-side websocket (bench/load.py's WebSocketLink): replies matched to
    requests by rid (an ``error`` is a reply too), counts of what arrived by type."""

    def __init__(self) -> None:
        self.link: WebSocketLink | None = None
        self.rid = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.received: Counter[str] = Counter()
        self.bytes_in = 0
        self.last_size = 0  # bytes of the last frame received
        self.session: str | None = None
        self.player_id: str | None = None
        self.lost = asyncio.Event()
        self.lost_at = 0.0
        self.events: asyncio.Queue[dict[str, Any]] | None = None  # game events, when asked
        self.on_type: dict[str, Callable[[dict[str, Any], bytes], None]] = {}
        self.errors: list[dict[str, Any]] = []  # every error frame, with a rid or not

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        local_host: str,
        *,
        hello: bool = True,
        name: str = "attacker",
        session: str | None = None,
        timeout: float = 10.0,
        events: bool = False,
    ) -> Client:
        client = cls()
        if events:
            client.events = asyncio.Queue()
        client.link = await WebSocketLink.connect(
            host, port, client._on_message, client._on_lost, timeout, local_host=local_host
        )
        if hello:
            body: dict[str, Any] = {"type": "hello", "version": PROTOCOL_VERSION, "name": name}
            if session is not None:
                body["session"] = session
            welcome = await client.request(body, timeout)
            if welcome["type"] != "welcome":
                client.abort()
                raise ConnectionError(f"hello refused: {welcome.get('code')}")
            client.session = welcome["session"]
            client.player_id = welcome["player_id"]
        return client

    @property
    def closed(self) -> bool:
        return self.link is None or self.link.closed

    def send(self, body: dict[str, Any]) -> int:
        self.rid += 1
        body["rid"] = self.rid
        if self.link is not None:
            self.link.send(load._pack(body))
        return self.rid

    async def request(self, body: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """Send and wait for the reply; raises ConnectionError if the connection is lost
        and TimeoutError after ``timeout``."""
        if self.closed:
            raise ConnectionError("not connected")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        rid = self.rid + 1
        self.pending[rid] = future
        self.send(body)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self.pending.pop(rid, None)

    def pause_reading(self) -> None:
        """Stop reading: the client that never reads (its socket's buffers fill up)."""
        if self.link is not None and self.link.transport is not None:
            self.link.transport.pause_reading()

    def close(self) -> None:
        if self.link is not None:
            self.link.close()

    def abort(self) -> None:
        if self.link is not None:
            self.link.abort()

    def _on_message(self, frame: bytes) -> None:
        self.bytes_in += len(frame)
        self.last_size = len(frame)
        message = msgpack.unpackb(frame, raw=False)
        kind = message.get("type")
        self.received[kind] += 1
        if kind == "error":
            self.errors.append(message)
        handler = self.on_type.get(kind)
        if handler is not None:
            handler(message, frame)
        if self.events is not None and kind in ("moved", "ended", "offer", "presence"):
            self.events.put_nowait(message)
        future = self.pending.get(message.get("rid", -1))
        if future is not None and not future.done():
            future.set_result(message)

    def _on_lost(self, link: WebSocketLink) -> None:
        self.lost_at = time.monotonic()
        self.lost.set()
        for future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionError("connection lost"))


class Pace:
    """At most ``rate`` actions a second (None: only yield to the loop)."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self.due = time.monotonic()

    async def wait(self) -> None:
        if not self.interval:
            await asyncio.sleep(0)
            return
        now = time.monotonic()
        self.due = max(self.due + self.interval, now - 1.0)  # no burst after a stall
        if self.due > now:
            await asyncio.sleep(self.due - now)


def _status_line(data: bytes) -> str:
    """``HTTP/1.1 426`` -> ``426``; anything else -> what it is."""
    if not data:
        return "closed"
    parts = data.split(b"\r\n", 1)[0].split()
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/"):
        return parts[1].decode("latin-1")
    return "garbage"


# --- the attacks -----------------------------------------------------------------------------


class Attack:
    """One kind of attack, run in the attacker process: ``setup`` before the bystander's
    baseline, ``attack`` until ``stopping`` is set, ``release`` to leave. What it did goes
    in ``stats``; ``headline`` says it in a line."""

    name: ClassVar[str] = ""
    finding: ClassVar[str] = ""  # issue 11's numbered finding
    summary: ClassVar[str] = ""
    workers: ClassVar[int] = 0  # the server's engine workers
    nofile: ClassVar[int | None] = None  # the server's soft limit on open files
    ai_bystander: ClassVar[bool] = False  # the bystander also plays the AI
    lobby_probe: ClassVar[bool] = False  # the size of lobby_state before, during, after
    connections: ClassVar[int] = 1  # --connections: what it means is the kind's
    quick_connections: ClassVar[int] = 1
    rate: ClassVar[float | None] = None  # --rate: per connection, the kind's unit

    def __init__(self, options: AttackOptions) -> None:
        self.options = options
        self.stats: dict[str, Any] = {}
        self.clients: list[Client] = []
        self.stopping = asyncio.Event()
        self.rng = random.Random(options.seed)

    @property
    def count(self) -> int:
        if self.options.connections is not None:
            return self.options.connections
        return self.quick_connections if self.options.quick else self.connections

    @property
    def per_second(self) -> float | None:
        return self.options.rate if self.options.rate is not None else self.rate

    def address(self, index: int = 0) -> str:
        return self.options.addresses[index % len(self.options.addresses)]

    async def open(
        self, index: int = 0, keep: bool = True, local_host: str | None = None, **kwargs: Any
    ) -> Client:
        """A connection from the attacker's ``index``-th address (or ``local_host``)."""
        client = await Client.open(
            self.options.host, self.options.port, local_host or self.address(index), **kwargs
        )
        if keep:
            self.clients.append(client)
        return client

    async def tcp(
        self, index: int, timeout: float = 5.0
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(
            asyncio.open_connection(
                self.options.host, self.options.port, local_addr=(self.address(index), 0)
            ),
            timeout,
        )

    async def pause(self, seconds: float) -> bool:
        """Sleep, or less if told to stop; True when stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)
        return self.stopping.is_set()

    async def setup(self) -> None:
        pass

    async def attack(self) -> None:
        raise NotImplementedError

    async def release(self) -> None:
        for client in self.clients:
            client.close()
        self.clients.clear()
        await asyncio.sleep(0.1)  # the close frames go out

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return ""

    # --- shared set-ups ------------------------------------------------------------------

    async def long_record(self) -> str:
        """Play out a game of many moves (19x19, k=19: a full board, 361 moves; 7x7 with
        --quick), against the AI with a short mcts budget when the server has an engine
        (its moves carry their search statistics), else between two connections. Returns
        its id; ``stats`` gets its moves and the size of its record."""
        size = 7 if self.options.quick else 19
        params = {"m": size, "n": size, "k": size}
        x = await self.open(0, name="recorder-x", events=True)
        body: dict[str, Any] = {"type": "create", "game": "mnk", "params": params, "seat": 0}
        against_ai = self.options.workers > 0
        if against_ai:
            body.update(opponent="ai", algorithm="mcts", budget_ms=5)
        else:
            body.update(opponent="human")
        seated = await x.request(body)
        if seated["type"] != "seated":
            raise RuntimeError(f"cannot create the record's game: {seated}")
        game_id = seated["game_id"]
        tokens = {0: seated["token"]}
        movers = {0: x}
        if not against_ai:
            o = await self.open(0, name="recorder-o")
            joined = await o.request({"type": "join", "game_id": game_id})
            tokens[1] = joined["token"]
            movers[1] = o
        free = list(range(size * size))
        ply = 0
        over = False
        assert x.events is not None
        while not over and free:
            seat = ply % 2
            if seat in movers:
                action = free.pop(self.rng.randrange(len(free)))
                reply = await movers[seat].request(
                    {
                        "type": "move",
                        "game_id": game_id,
                        "token": tokens[seat],
                        "action": action,
                        "ply": ply,
                    },
                    timeout=30,
                )
                if reply["type"] != "moved":
                    raise RuntimeError(f"the record's move was refused: {reply}")
                over = reply["to_move"] < 0
                ply += 1
                continue
            while True:  # the AI's move
                event = await asyncio.wait_for(x.events.get(), 60)
                if event["type"] == "ended":
                    over = True
                    break
                if event["type"] == "moved" and event["ply"] == ply:
                    free.remove(event["action"])
                    over = event["to_move"] < 0
                    ply += 1
                    break
        record = await x.request({"type": "get", "game_id": game_id}, timeout=30)
        self.stats["record_moves"] = len(record["game"]["moves"])
        self.stats["record_bytes"] = x.last_size
        for client in list(movers.values()):
            client.close()
            self.clients.remove(client)
        return str(game_id)


KINDS: dict[str, type[Attack]] = {}


def kind(cls: type[Attack]) -> type[Attack]:
    KINDS[cls.name] = cls
    return cls


HTTP_REQUESTS = (
    # A plain GET (a health check, a crawler, a reverse proxy probing): 426.
    b"GET / HTTP/1.1\r\nHost: noughts\r\n\r\n",
    # A websocket handshake with a version the server does not speak.
    b"GET / HTTP/1.1\r\nHost: noughts\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
    # A websocket handshake without its key.
    b"GET / HTTP/1.1\r\nHost: noughts\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Version: 13\r\n\r\n",
    # Not HTTP at all.
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http\r\n\r\n",
)


@kind
class HttpFlood(Attack):
    name = "http-flood"
    finding = "1"
    summary = "plain GET / and bad handshakes, as fast as answered (leaked slots lock out)"
    connections = 50  # requests in flight
    quick_connections = 10

    async def attack(self) -> None:
        statuses: Counter[str] = Counter()
        first: dict[str, int] = {}
        sent = 0

        async def one(worker: int) -> None:
            nonlocal sent
            while not self.stopping.is_set():
                request = HTTP_REQUESTS[sent % len(HTTP_REQUESTS)]
                sent += 1
                try:
                    reader, writer = await self.tcp(worker)
                except (OSError, TimeoutError) as exc:
                    statuses[f"connect:{type(exc).__name__}"] += 1
                    await asyncio.sleep(0.05)
                    continue
                try:
                    writer.write(request)
                    status = _status_line(await asyncio.wait_for(reader.read(4096), 5))
                except (OSError, TimeoutError) as exc:
                    status = type(exc).__name__
                finally:
                    writer.close()
                statuses[status] += 1
                first.setdefault(status, sent)

        await asyncio.gather(*(one(i) for i in range(self.count)))
        self.stats.update(requests=sent, statuses=dict(statuses), first_seen_at=first)

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        s = stats.get("statuses", {})
        text = f"{stats.get('requests', 0):,} requests: " + ", ".join(
            f"{k} x{v:,}" for k, v in sorted(s.items())
        )
        if "503" in s:
            text += f"; first 503 at request {stats['first_seen_at']['503']:,}"
        return text


@kind
class PingFlood(Attack):
    name = "ping-flood"
    finding = "2"
    summary = "websocket pings (125 bytes) as fast as possible from a client that never reads"

    async def attack(self) -> None:
        frame = load._frame(0x89, bytes(125))  # a masked ping frame, RFC 6455 section 5.5.2
        batch = frame * 1000
        clients = [await self.open(i, name=f"pinger{i}") for i in range(self.count)]
        for client in clients:
            client.pause_reading()
        sent = 0
        started = time.monotonic()
        while not self.stopping.is_set() and any(not c.closed for c in clients):
            for client in clients:
                link = client.link
                if client.closed or link is None or link.transport is None:
                    continue
                if link.transport.get_write_buffer_size() < 1 << 20:
                    link.transport.write(batch)
                    sent += len(batch)
            await asyncio.sleep(0.001)
        self.stats.update(
            ping_mb_sent=round(sent / 2**20, 1), **_closed_by_server(clients, started)
        )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return f"{stats.get('ping_mb_sent', 0)} MB of pings; {_closed_text(stats)}"


class NonReader(Attack):
    """Connections that never read, each sending ``request()`` ``per_second`` times a
    second until the server closes it or the attack ends."""

    async def attack(self) -> None:
        clients = [await self.open(i, name=f"sleeper{i}") for i in range(self.count)]
        for client in clients:
            client.pause_reading()
        pace = Pace((self.per_second or 1.0) * len(clients))
        sent = 0
        started = time.monotonic()
        while not self.stopping.is_set() and any(not c.closed for c in clients):
            for client in clients:
                if not client.closed:
                    client.send(self.request())
                    sent += 1
            await pace.wait()
        self.stats.update(requests=sent, **_closed_by_server(clients, started))

    def request(self) -> dict[str, Any]:
        raise NotImplementedError


def _closed_by_server(clients: list[Client], started: float) -> dict[str, Any]:
    closed = [c.lost_at - started for c in clients if c.lost.is_set()]
    return {
        "closed_by_server": len(closed),
        "closed_after_s": round(min(closed), 2) if closed else None,
    }


def _closed_text(stats: dict[str, Any]) -> str:
    closed = stats.get("closed_after_s")
    return "never closed" if closed is None else f"closed by the server after {closed} s"


@kind
class MessageFlood(NonReader):
    name = "message-flood"
    finding = "2"
    summary = "protocol `ping` requests at 900/s (over the rate limit) from a non-reader"
    rate = 900.0

    def request(self) -> dict[str, Any]:
        return {"type": "ping"}

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return f"{stats.get('requests', 0):,} pings sent unread; {_closed_text(stats)}"


@kind
class HalfOpen(Attack):
    name = "half-open"
    finding = "8"
    summary = "TCP connections that send half a handshake and hold (reopened when closed)"
    connections = 3000
    quick_connections = 100

    async def attack(self) -> None:
        held = 0
        peak = 0
        outcomes: Counter[str] = Counter()
        lifetimes: list[float] = []
        gate = asyncio.Semaphore(100)

        async def one(index: int) -> None:
            nonlocal held, peak
            while not self.stopping.is_set():
                async with gate:
                    if self.stopping.is_set():
                        return
                    try:
                        reader, writer = await self.tcp(index)
                    except (OSError, TimeoutError) as exc:
                        outcomes[f"connect:{type(exc).__name__}"] += 1
                        await asyncio.sleep(0.1)
                        continue
                writer.write(b"GET / HTTP/1.1\r\nHost: noughts\r\n")  # and nothing more
                opened = time.monotonic()
                held += 1
                peak = max(peak, held)
                read = asyncio.ensure_future(reader.read(4096))
                stop = asyncio.ensure_future(self.stopping.wait())
                await asyncio.wait([read, stop], return_when=asyncio.FIRST_COMPLETED)
                held -= 1
                if read.done():
                    try:
                        outcomes[_status_line(read.result())] += 1
                    except OSError as exc:
                        outcomes[type(exc).__name__] += 1
                    lifetimes.append(time.monotonic() - opened)
                else:
                    read.cancel()
                stop.cancel()
                writer.close()

        await asyncio.gather(*(one(i) for i in range(self.count)))
        self.stats.update(
            held_peak=peak,
            server_answers=dict(outcomes),
            server_closed=len(lifetimes),
            held_for_s_median=round(statistics.median(lifetimes), 2) if lifetimes else None,
        )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        closed = stats.get("server_closed", 0)
        return f"{stats.get('held_peak', 0):,} held at once; " + (
            f"{closed:,} closed by the server after {stats['held_for_s_median']} s (median), "
            f"answers {stats.get('server_answers')}"
            if closed
            else "the server closed none"
        )


@kind
class FdExhaustion(Attack):
    name = "fd-exhaustion"
    finding = "8"
    summary = "websocket connections held until the server (soft limit 1024 fds) runs out"
    nofile = 1024
    connections = 2500
    quick_connections = 1100

    async def attack(self) -> None:
        failures: Counter[str] = Counter()
        gate = asyncio.Semaphore(100)
        peak = 0

        async def one(index: int) -> None:
            nonlocal peak
            while not self.stopping.is_set():
                async with gate:
                    if self.stopping.is_set():
                        return
                    try:
                        client = await self.open(index, keep=False, hello=False, timeout=3.0)
                    except (OSError, TimeoutError, ConnectionError) as exc:
                        failures[str(exc)[:40] or type(exc).__name__] += 1
                        continue
                self.clients.append(client)
                peak = max(peak, len(self.clients))
                await self.stopping.wait()
                return

        try:
            await asyncio.gather(*(one(i) for i in range(self.count)))
        finally:
            self.stats.update(
                held_peak=peak,
                held_at_end=sum(not c.closed for c in self.clients),
                failures=dict(failures.most_common(5)),
            )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"{stats.get('held_peak', 0):,} connections held at most "
            f"({stats.get('held_at_end', 0):,} at the end); failures {stats.get('failures')}"
        )


@kind
class AiStarvation(Attack):
    name = "ai-starvation"
    finding = "3"
    summary = "AI games with 60 s budgets created (the AI to move) and aborted at once"
    workers = 2
    ai_bystander = True
    rate = 20.0  # games created and aborted a second

    async def attack(self) -> None:
        client = await self.open(0, name="starver")
        pace = Pace(self.per_second)
        created = aborted = 0
        refused: Counter[str] = Counter()
        # 60 s searches; a server with a budget maximum refuses them, then the attack asks for
        # the default maximum (10 s) instead.
        budget = 60_000
        try:
            while not self.stopping.is_set() and not client.closed:
                await pace.wait()
                try:
                    seated = await client.request(
                        {
                            "type": "create",
                            "game": "gomoku",
                            "opponent": "ai",
                            "seat": 1,  # the AI moves first: its search starts at once
                            "algorithm": "mcts",
                            "budget_ms": budget,
                        }
                    )
                    if seated["type"] != "seated":
                        refused[f"{seated.get('code', seated['type'])} ({budget} ms)"] += 1
                        if seated.get("code") == "bad_request" and budget > 10_000:
                            budget = 10_000
                        continue
                    created += 1
                    reply = await client.request(
                        {"type": "abort", "game_id": seated["game_id"], "token": seated["token"]}
                    )
                except (ConnectionError, TimeoutError) as exc:  # the server stopped answering
                    refused[f"no answer in 10 s ({type(exc).__name__})"] += 1
                    continue
                if reply["type"] == "ended":
                    aborted += 1
                else:
                    refused[reply.get("code", reply["type"])] += 1
        finally:
            self.stats.update(
                created=created, aborted=aborted, refused=dict(refused), budget_ms=budget
            )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"{stats.get('created', 0):,} searches of {stats.get('budget_ms', 60_000) / 1000:g} s"
            f" started, {stats.get('aborted', 0):,} games aborted; refused "
            f"{stats.get('refused') or 'none'}"
        )


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (the server's engine workers)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                text = Path(f"/proc/{pid}/task/{task}/children").read_text()
                found += [int(x) for x in text.split()]
    return found


@kind
class DeadEngine(Attack):
    name = "dead-engine"
    finding = "4"
    summary = "kill -9 every engine worker once a second, replacements while they warm up"
    workers = 2
    ai_bystander = True
    rate = 1.0  # kill rounds a second

    async def attack(self) -> None:
        kills = rounds = 0
        pids: set[int] = set()
        pace = Pace(self.per_second)
        while not self.stopping.is_set():
            rounds += 1
            for child in _children(self.options.server_pid):
                try:
                    cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                    if b"multiprocessing" in cmdline and b"resource_tracker" not in cmdline:
                        os.kill(child, signal.SIGKILL)
                        kills += 1
                        pids.add(child)
                except OSError:
                    continue
            await pace.wait()
        self.stats.update(kill_rounds=rounds, kills=kills, distinct_workers_killed=len(pids))

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"{stats.get('kills', 0)} kills of {stats.get('distinct_workers_killed', 0)} "
            f"workers in {stats.get('kill_rounds', 0)} rounds"
        )


@kind
class LobbyPoison(Attack):
    name = "lobby-poison"
    finding = "5"
    summary = "many connections, each a new player creating its maximum of idle live games"
    workers = 1  # games against the AI are live at once (the AI waits for the human)
    lobby_probe = True
    connections = 500
    quick_connections = 20

    async def attack(self) -> None:
        created = 0
        refused: Counter[str] = Counter()
        gate = asyncio.Semaphore(50)

        async def one(index: int) -> None:
            nonlocal created
            async with gate:
                if self.stopping.is_set():
                    return
                try:
                    client = await self.open(index, name=f"poison{index}")
                except (OSError, TimeoutError, ConnectionError) as exc:
                    refused[f"connect:{str(exc)[:40]}"] += 1
                    return
                for _ in range(1000):  # until refused
                    if self.stopping.is_set() or client.closed:
                        return
                    try:
                        reply = await client.request(
                            {
                                "type": "create",
                                "game": "tictactoe",
                                "opponent": "ai",
                                "seat": 0,
                                "algorithm": "random",
                                "budget_ms": 1,
                            }
                        )
                    except (ConnectionError, TimeoutError) as exc:
                        refused[type(exc).__name__] += 1
                        return
                    if reply["type"] != "seated":
                        refused[reply.get("code", reply["type"])] += 1
                        return
                    created += 1

        await asyncio.gather(*(one(i) for i in range(self.count)))
        await self.stopping.wait()  # hold them until the attack's end, then leave
        self.stats.update(
            connections=len(self.clients), games_created=created, refused=dict(refused)
        )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"{stats.get('games_created', 0):,} live games from "
            f"{stats.get('connections', 0):,} connections; refused {stats.get('refused')}"
        )


# Finding 6's name classes: (class, name). "dave" is online and "carol" registered (offline)
# when these are tried; every name is tried on its own new connection.
HOSTILE_NAMES: tuple[tuple[str, str], ...] = (
    ("the AI's label", "mcts 200ms"),
    ("an AI suffix", "alice [AI]"),
    ("a bot's label", "bot"),
    ("an online name", "dave"),
    ("a registered name, offline", "carol"),
    ("case variant of an online name", "Dave"),
    ("Cyrillic look-alike", "d\u0430ve"),
    ("fullwidth (NFKC) look-alike", "\uff44\uff41\uff56\uff45"),
    ("combining mark", "dave\u0301"),
    ("zero-width space", "da\u200bve"),
    ("NUL", "eve\x00"),
    ("CR/LF", "eve\r\nINFO forged log line"),
    ("tab", "eve\tx"),
    ("ANSI CSI", "\x1b[31meve\x1b[0m"),
    ("ANSI OSC (terminal title)", "\x1b]0;owned\x07eve"),
    ("right-to-left override", "eve\u202egnp.exe"),
    ("bidi isolate", "\u2067eve\u2069"),
    ("whitespace only", "   "),
    ("empty", ""),
    ("33 characters", "e" * 33),
)


@kind
class HostileNames(Attack):
    name = "hostile-names"
    finding = "6"
    summary = "every hostile name class of finding 6; a challenge by name with the holder away"

    async def attack(self) -> None:
        carol = await self.open(0, keep=False, name="carol")
        carol_id = carol.player_id
        carol.close()
        await asyncio.sleep(0.2)
        await self.open(0, name="dave")  # stays online
        results = []
        for label, name in HOSTILE_NAMES:  # all of them, whatever --seconds says
            # Each name from its own address: a cap on new sessions per address is not a
            # refusal of the name.
            client = await self.open(
                keep=False, local_host=other_hosts(2, len(results)), hello=False
            )
            entry: dict[str, Any] = {"class": label, "name": repr(name)}
            try:
                reply = await client.request(
                    {"type": "hello", "version": PROTOCOL_VERSION, "name": name}, timeout=3
                )
            except TimeoutError:  # no reply carrying the request's rid
                reply = client.errors[-1] if client.errors else {"type": "error", "code": None}
                entry["rid_missing"] = True
            if reply["type"] == "welcome":
                entry["accepted"] = True
                # How the server shows it to others: the seat's name in a new game.
                seated = await client.request(
                    {"type": "create", "game": "tictactoe", "opponent": "human", "seat": 0}
                )
                if seated["type"] == "seated":
                    games = await client.request({"type": "list", "status": "open", "limit": 500})
                    for game in games.get("games", []):
                        if game["game_id"] == seated["game_id"]:
                            entry["shown_as"] = repr(game["players"][0]["name"])
                    client.send(
                        {"type": "resign", "game_id": seated["game_id"], "token": seated["token"]}
                    )
            else:
                entry.update(accepted=False, code=reply.get("code"), message=reply.get("message"))
            results.append(entry)
            client.close()  # offline again: only "dave" stays online
        # The real carol is away; an impostor asks for the name carol; a challenge to "carol".
        try:
            impostor: Client | None = await self.open(0, name="carol")
            impostor_took = "yes"
        except ConnectionError as exc:  # the name is bound to the real carol's session
            impostor, impostor_took = None, str(exc)
        if impostor is not None:
            impostor.send({"type": "lobby"})
        challenger = await self.open(0, name="frank")
        posted = await challenger.request(
            {"type": "seek", "game": "tictactoe", "to": "carol"}, timeout=10
        )
        await asyncio.sleep(0.3)
        if posted["type"] != "posted":
            challenge = f"refused: {posted.get('code')}: {posted.get('message')}"
        elif impostor is None:
            challenge = "posted for the real carol; the impostor could not take her name"
        elif impostor.received["lobby_event"]:
            challenge = "reached the impostor (not the real carol, who is away)"
        else:
            challenge = "posted; the impostor did not see it"
        self.stats.update(
            names=results,
            accepted=sum(1 for r in results if r.get("accepted")),
            tried=len(results),
            challenge_to_carol=challenge,
            impostor_named_carol=impostor_took,
            real_carol=carol_id,
        )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"{stats.get('accepted', 0)} of {stats.get('tried', 0)} hostile names accepted; "
            f"challenge to carol: {stats.get('challenge_to_carol')}"
        )


@kind
class GetAmplification(Attack):
    name = "get-amplification"
    finding = "7"
    summary = "10 connections fetching a 361-move record, each under the rate limit"
    workers = 1  # the record is a game against the AI: its moves carry search statistics
    connections = 10
    quick_connections = 3
    rate = 190.0  # gets a second per connection (the limit: 200 messages/s)

    async def setup(self) -> None:
        self.game_id = await self.long_record()

    async def attack(self) -> None:
        answered: Counter[str] = Counter()
        received = 0

        async def one(index: int) -> None:
            nonlocal received
            client = await self.open(index, name=f"getter{index}")
            pace = Pace(self.per_second)
            in_flight: set[asyncio.Future[dict[str, Any]]] = set()
            while not self.stopping.is_set() and not client.closed:
                await pace.wait()
                while len(in_flight) >= 4 and not self.stopping.is_set():  # a few in flight
                    done, in_flight = await asyncio.wait(
                        in_flight, timeout=0.5, return_when=asyncio.FIRST_COMPLETED
                    )
                    for future in done:
                        _count(answered, future)
                if self.stopping.is_set():
                    break
                in_flight.add(
                    asyncio.ensure_future(
                        client.request({"type": "get", "game_id": self.game_id}, timeout=60)
                    )
                )
            for future in in_flight:
                future.cancel()
            received += client.bytes_in

        try:
            await asyncio.gather(*(one(i) for i in range(self.count)))
        finally:
            self.stats.update(answers=dict(answered), mb_received=round(received / 2**20, 1))

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"record of {stats.get('record_moves')} moves, {stats.get('record_bytes', 0):,} B; "
            f"answers {stats.get('answers')}, {stats.get('mb_received')} MB received"
        )


def _count(counter: Counter[str], future: asyncio.Future[dict[str, Any]]) -> None:
    if future.cancelled():
        return
    exc = future.exception()
    if exc is not None:
        counter[type(exc).__name__] += 1
    else:
        reply = future.result()
        counter[reply.get("code", reply["type"])] += 1


@kind
class SeekSpam(Attack):
    name = "seek-spam"
    finding = "7"
    summary = "seek/cancel as fast as the rate limit allows, with 200 lobby subscribers"
    lobby_probe = True
    rate = 190.0  # messages a second from the spammer (a seek and its cancel: two)
    subscribers = 200

    async def setup(self) -> None:
        count = 20 if self.options.quick else self.subscribers
        gate = asyncio.Semaphore(50)

        async def subscriber(index: int) -> Client:
            async with gate:
                client = await self.open(local_host=other_hosts(1, index), name=f"watcher{index}")
                await client.request({"type": "lobby"})
                return client

        self.subscribed = list(await asyncio.gather(*(subscriber(i) for i in range(count))))
        self.stats["subscribers"] = count

    async def attack(self) -> None:
        before = sum(c.received["lobby_event"] for c in self.subscribed)
        started = time.monotonic()
        spammers = [await self.open(i, name=f"spammer{i}") for i in range(self.count)]
        seeks = 0
        refused: Counter[str] = Counter()

        async def spam(client: Client) -> None:
            nonlocal seeks
            pace = Pace((self.per_second or 190.0) / 2)
            while not self.stopping.is_set() and not client.closed:
                await pace.wait()
                try:
                    posted = await client.request({"type": "seek", "game": "tictactoe"})
                    if posted["type"] != "posted":
                        refused[posted.get("code", posted["type"])] += 1
                        continue
                    seeks += 1
                    await client.request({"type": "cancel_seek", "seek_id": posted["seek_id"]})
                except (ConnectionError, TimeoutError) as exc:
                    refused[type(exc).__name__] += 1

        await asyncio.gather(*(spam(c) for c in spammers))
        elapsed = time.monotonic() - started
        frames = sum(c.received["lobby_event"] for c in self.subscribed) - before
        self.stats.update(
            seeks=seeks,
            seeks_per_s=round(seeks / elapsed, 1),
            lobby_frames_per_s=round(frames / elapsed),
            subscribers_dropped=sum(c.closed for c in self.subscribed),
            refused=dict(refused),
        )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"{stats.get('seeks_per_s')} seeks/s -> {stats.get('lobby_frames_per_s', 0):,} lobby "
            f"frames/s to {stats.get('subscribers')} subscribers "
            f"({stats.get('subscribers_dropped')} dropped)"
        )


@kind
class ReconnectStorm(Attack):
    name = "reconnect-storm"
    finding = "7"
    summary = "a player seated in 20 live games reconnects as fast as it can"
    connections = 1  # reconnection loops at once

    async def setup(self) -> None:
        attacker = await self.open(0, keep=False, name="stormer")
        self.session = attacker.session
        self.victim = await self.open(0, name="victim")
        games = 0
        for _ in range(100):  # until the cap on unfinished games
            seated = await attacker.request(
                {"type": "create", "game": "tictactoe", "opponent": "human", "seat": 0}
            )
            if seated["type"] != "seated":
                break
            joined = await self.victim.request({"type": "join", "game_id": seated["game_id"]})
            if joined["type"] != "seated":
                break
            games += 1
        attacker.close()
        self.stats["games"] = games

    async def attack(self) -> None:
        presence0 = self.victim.received["presence"]
        started = time.monotonic()
        reconnects = 0
        failures: Counter[str] = Counter()

        async def storm(index: int) -> None:
            nonlocal reconnects
            while not self.stopping.is_set():
                try:
                    client = await self.open(
                        index, keep=False, name="stormer", session=self.session
                    )
                except (OSError, TimeoutError, ConnectionError) as exc:
                    failures[str(exc)[:40] or type(exc).__name__] += 1
                    await asyncio.sleep(0.05)
                    continue
                reconnects += 1
                client.close()
                await client.lost.wait()

        await asyncio.gather(*(storm(i) for i in range(self.count)))
        elapsed = time.monotonic() - started
        self.stats.update(
            reconnects_per_s=round(reconnects / elapsed, 1),
            victim_presence_frames_per_s=round(
                (self.victim.received["presence"] - presence0) / elapsed
            ),
            failures=dict(failures),
        )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"{stats.get('reconnects_per_s')} reconnections/s over {stats.get('games')} games -> "
            f"{stats.get('victim_presence_frames_per_s', 0):,} presence frames/s to the opponent"
        )


@kind
class DrawSpam(Attack):
    name = "draw-spam"
    finding = "7"
    summary = "a draw offer and its decline, again and again, in one live game"
    rate = 190.0  # messages a second per side

    async def setup(self) -> None:
        self.offerer = await self.open(0, name="offerer")
        self.decliner = await self.open(0, name="decliner")
        seated = await self.offerer.request(
            {"type": "create", "game": "tictactoe", "opponent": "human", "seat": 0}
        )
        joined = await self.decliner.request({"type": "join", "game_id": seated["game_id"]})
        self.game = seated["game_id"]
        self.tokens = (seated["token"], joined["token"])
        self.stats["record_bytes_before"] = await self.record_size()

    async def record_size(self) -> int:
        await self.offerer.request({"type": "get", "game_id": self.game}, timeout=60)
        return self.offerer.last_size

    async def attack(self) -> None:
        started = time.monotonic()
        pace = Pace(self.per_second)
        cycles = 0
        refused: Counter[str] = Counter()
        while not self.stopping.is_set() and not self.offerer.closed:
            await pace.wait()
            try:
                offer = await self.offerer.request(
                    {"type": "draw", "game_id": self.game, "token": self.tokens[0]}
                )
                decline = await self.decliner.request(
                    {
                        "type": "draw",
                        "game_id": self.game,
                        "token": self.tokens[1],
                        "answer": "decline",
                    }
                )
            except (ConnectionError, TimeoutError) as exc:
                refused[type(exc).__name__] += 1
                continue
            for reply in (offer, decline):
                if reply["type"] != "ok":
                    refused[reply.get("code", reply["type"])] += 1
            cycles += 1
        elapsed = time.monotonic() - started
        after = await self.record_size()
        self.stats.update(
            cycles=cycles,
            cycles_per_s=round(cycles / elapsed, 1),
            record_bytes_after=after,
            record_kb_per_s=round((after - self.stats["record_bytes_before"]) / 1024 / elapsed, 1),
            refused=dict(refused),
        )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"{stats.get('cycles_per_s')} offer/decline a second; the record grew "
            f"{stats.get('record_kb_per_s')} KB/s to {stats.get('record_bytes_after', 0):,} B"
        )


@kind
class SlowReader(NonReader):
    name = "slow-reader"
    finding = "7"
    summary = "fetches of a large record by a client that never reads"
    workers = 1
    rate = 20.0  # gets a second per connection

    async def setup(self) -> None:
        self.game_id = await self.long_record()

    def request(self) -> dict[str, Any]:
        return {"type": "get", "game_id": self.game_id}

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        unread = stats.get("requests", 0) * stats.get("record_bytes", 0) / 2**20
        return (
            f"{stats.get('requests', 0):,} gets of a {stats.get('record_bytes', 0):,} B record "
            f"({unread:.1f} MB) unread; {_closed_text(stats)}"
        )


@kind
class HelloFlood(Attack):
    name = "hello-flood"
    finding = "11"
    summary = "connect, hello without a session, leave: a new stored session each time"
    connections = 4  # loops at once

    async def attack(self) -> None:
        hellos = 0
        failures: Counter[str] = Counter()
        started = time.monotonic()

        async def loop(index: int) -> None:
            nonlocal hellos
            while not self.stopping.is_set():
                try:
                    client = await self.open(index, keep=False, name=f"drifter{hellos}")
                except (OSError, TimeoutError, ConnectionError) as exc:
                    failures[str(exc)[:40] or type(exc).__name__] += 1
                    await asyncio.sleep(0.05)
                    continue
                hellos += 1
                client.close()

        await asyncio.gather(*(loop(i) for i in range(self.count)))
        self.stats.update(
            hellos_per_s=round(hellos / (time.monotonic() - started), 1), failures=dict(failures)
        )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return f"{stats.get('hellos_per_s')} new sessions/s; failures {stats.get('failures')}"


@kind
class EngineMemory(Attack):
    name = "engine-memory"
    finding = "11"
    summary = "long gomoku AI searches in games left open (workers keep their trees)"
    workers = 2
    ai_bystander = True
    connections = 2  # searches at once
    rate = 2000.0  # the AI's budget, ms (a long search: a big tree)

    async def attack(self) -> None:
        budget = 200 if self.options.quick and self.options.rate is None else self.per_second
        searches = 0
        refused: Counter[str] = Counter()

        async def loop(index: int) -> None:
            nonlocal searches
            client: Client | None = None
            games = opened = 0
            while not self.stopping.is_set():
                try:
                    if client is None or games >= 20 or client.closed:
                        # A new player each time (a name is bound to the session that took it).
                        opened += 1
                        name = f"thinker{index}x{opened}"
                        client = await self.open(index, name=name, events=True)
                        games = 0
                    seated = await client.request(
                        {
                            "type": "create",
                            "game": "gomoku",
                            "opponent": "ai",
                            "seat": 1,
                            "algorithm": "mcts",
                            "budget_ms": int(budget or 2000),
                        }
                    )
                except (OSError, ConnectionError, TimeoutError) as exc:
                    refused[type(exc).__name__] += 1
                    await self.pause(1.0)
                    continue
                if seated["type"] != "seated":
                    refused[seated.get("code", seated["type"])] += 1
                    await self.pause(1.0)
                    continue
                games += 1
                assert client.events is not None
                while not self.stopping.is_set():  # the AI's first move: one search
                    try:
                        event = await asyncio.wait_for(client.events.get(), 0.5)
                    except TimeoutError:
                        continue
                    if event.get("game_id") == seated["game_id"] and event["type"] == "moved":
                        searches += 1
                        break

        try:
            await asyncio.gather(*(loop(i) for i in range(self.count)))
        finally:
            self.stats.update(searches=searches, budget_ms=budget, refused=dict(refused))

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        return (
            f"{stats.get('searches', 0)} searches of {stats.get('budget_ms')} ms in games left open"
        )


@kind
class SecondServer(Attack):
    name = "second-server"
    finding = "9"
    summary = "a second server on the same database; one player moves through each at once"

    async def setup(self) -> None:
        """A game between two players on the first server, two moves in."""
        self.x = await self.open(0, name="split-x")
        self.o = await self.open(0, name="split-o")
        seated = await self.x.request(
            {"type": "create", "game": "gomoku", "opponent": "human", "seat": 0}
        )
        joined = await self.o.request({"type": "join", "game_id": seated["game_id"]})
        self.game, self.token = seated["game_id"], seated["token"]
        await self.x.request(
            {"type": "move", "game_id": self.game, "token": self.token, "action": 0}
        )
        await self.o.request(
            {"type": "move", "game_id": self.game, "token": joined["token"], "action": 1}
        )

    async def attack(self) -> None:
        db = Path(self.options.db)
        second = ServerProcess(db, 0, lift_limits=False, extra_args=self.options.server_args)
        second.log = db.with_suffix(".second.log")
        started = time.monotonic()
        try:
            await asyncio.to_thread(second.start)
        except RuntimeError:
            text = second.log.read_text(errors="replace").strip().splitlines()
            self.stats.update(second_started=False, refused_with=text[-1] if text else "")
            return
        self.stats.update(second_started=True, start_s=round(time.monotonic() - started, 2))
        try:
            # The same player (its session) on the second server, then the move at ply 2
            # through each server.
            twin = await Client.open(
                "127.0.0.1", second.port, self.address(), name="split-x", session=self.x.session
            )
            self.clients.append(twin)
            welcome_games = await twin.request({"type": "list", "status": "live"})
            held = {g["game_id"] for g in welcome_games.get("games", [])}
            resumed = await twin.request({"type": "resume", "game_id": self.game, "since": 0})
            token = resumed.get("token", self.token)
            replies = {}
            for label, client, move_token, action in (
                ("second", twin, token, 2),
                ("first", self.x, self.token, 3),
            ):
                reply = await client.request(
                    {
                        "type": "move",
                        "game_id": self.game,
                        "token": move_token,
                        "action": action,
                        "ply": 2,
                    }
                )
                replies[label] = reply["type"] if reply["type"] != "error" else reply["code"]
            self.stats.update(
                game_live_on_second=self.game in held,
                ply_2_through_second=replies["second"],
                ply_2_through_first=replies["first"],
            )
            await self.stopping.wait()
        finally:
            await asyncio.to_thread(second.stop)
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            stored = connection.execute(
                "SELECT action FROM moves WHERE game_id = ? AND ply = 2", (self.game,)
            ).fetchall()
            collisions = connection.execute(
                "SELECT COUNT(*) FROM (SELECT game_id, seq FROM moves UNION ALL "
                "SELECT game_id, seq FROM events) GROUP BY game_id, seq HAVING COUNT(*) > 1"
            ).fetchall()
        finally:
            connection.close()
        acked = [r for r in replies.values() if r == "moved"]
        self.stats.update(
            ply_2_stored=[a for (a,) in stored],
            acknowledged_not_stored=max(0, len(acked) - len(stored)),
            seq_collisions=len(collisions),
        )

    @staticmethod
    def headline(stats: dict[str, Any]) -> str:
        if not stats.get("second_started"):
            return f"the second server was refused: {stats.get('refused_with')}"
        return (
            f"the second server started; ply 2 through it: {stats.get('ply_2_through_second')}, "
            f"through the first: {stats.get('ply_2_through_first')}; acknowledged but not "
            f"stored {stats.get('acknowledged_not_stored')}; seq collisions "
            f"{stats.get('seq_collisions')}"
        )


# --- the attacker process ------------------------------------------------------------------


def attacker_process(options: AttackOptions, pipe: Any) -> None:
    """Entry point of the attacker process (multiprocessing, spawn)."""
    load._raise_fd_limit(65536)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator stops us
    asyncio.run(_attacker_main(options, pipe))


async def _attacker_main(options: AttackOptions, pipe: Any) -> None:
    attack = KINDS[options.kind](options)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(attack.setup(), 300)
    except Exception as exc:
        pipe.send(("failed", f"setup: {type(exc).__name__}: {exc}"))
        await attack.release()
        return
    pipe.send(("ready", dict(attack.stats)))
    if (await loop.run_in_executor(None, pipe.recv))[0] != "go":
        await attack.release()
        return
    started = time.monotonic()
    task = loop.create_task(attack.attack())
    stop = loop.run_in_executor(None, pipe.recv)
    await asyncio.wait([task, stop], return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        pipe.send(("finished",))  # it did all it does: the attack phase ends early
    await stop
    attack.stopping.set()
    try:
        await asyncio.wait_for(asyncio.shield(task), 15)
    except TimeoutError:
        task.cancel()
    except Exception as exc:  # the attack broke: say how, keep what it counted
        attack.stats["attack_error"] = f"{type(exc).__name__}: {exc}"
    if task.done() and not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        attack.stats["attack_error"] = f"{type(exc).__name__}: {exc}"
    attack.stats["attack_s"] = round(time.monotonic() - started, 2)
    await attack.release()
    pipe.send(("done", attack.stats))


# --- measuring the server from outside -------------------------------------------------------


@dataclass(slots=True)
class Sample:
    at: float
    rss_kb: int
    cpu_s: float
    workers_rss_kb: int
    workers_cpu_s: float
    fds: int
    log_bytes: int
    alive: bool


class Sampler(threading.Thread):
    """The server's RSS, CPU (its own and its workers'), open files and log size from
    /proc, every SAMPLE_INTERVAL_S. Workers' CPU counts every worker seen, dead ones too."""

    def __init__(self, server: ServerProcess) -> None:
        super().__init__(name="sampler", daemon=True)
        self.server = server
        self.samples: list[Sample] = []
        self.stopped = threading.Event()
        self.worker_cpu: dict[int, float] = {}
        self.lock = threading.Lock()

    def sample(self) -> Sample:
        pid = self.server.pid
        alive = self.server.process.poll() is None
        workers_rss = 0
        for child in _children(pid) if alive else []:
            with contextlib.suppress(OSError, ValueError):
                workers_rss += load._rss_kb(child)
                self.worker_cpu[child] = load._cpu_s(child)
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            rss = load._rss_kb(pid)
        except OSError:
            fds = rss = 0
        log_bytes = self.server.log.stat().st_size if self.server.log.exists() else 0
        return Sample(
            time.monotonic(),
            rss,
            load._cpu_s(pid),
            workers_rss,
            sum(self.worker_cpu.values()),
            fds,
            log_bytes,
            alive,
        )

    def take(self) -> None:
        """One sample now. The coordinator takes one as each phase ends, so that every
        phase holds one however long the sampling thread waits for the GIL (a quick run's
        phase lasts 0.5 s, and the test runs several attacks at once)."""
        with self.lock:
            self.samples.append(self.sample())

    def run(self) -> None:
        while not self.stopped.is_set():
            self.take()
            self.stopped.wait(SAMPLE_INTERVAL_S)

    def between(self, start: float, end: float) -> list[Sample]:
        return [s for s in list(self.samples) if start <= s.at < end]


_NEWCOMERS = itertools.count(1)


async def _newcomer(host: str, port: int, local_host: str, timeout: float) -> tuple[bool, str]:
    """Is a new connection served: handshake, hello, ping answered by pong?"""
    client: Client | None = None
    try:
        # A name of its own each time: a name is bound to the session that took it.
        name = f"newcomer{os.getpid()}-{next(_NEWCOMERS)}"
        client = await Client.open(host, port, local_host, name=name, timeout=timeout)
        reply = await client.request({"type": "ping"}, timeout)
        return reply["type"] == "pong", reply["type"]
    except (OSError, ConnectionError, TimeoutError) as exc:
        return False, str(exc)[:60] or type(exc).__name__
    finally:
        if client is not None:
            client.close()
            await asyncio.sleep(0)


def newcomer_served(
    host: str, port: int, local_host: str, timeout: float = 2.0
) -> tuple[bool, float, str]:
    started = time.monotonic()
    ok, detail = asyncio.run(_newcomer(host, port, local_host, timeout))
    return ok, time.monotonic() - started, detail


async def _recovery(
    host: str, port: int, sources: dict[str, str], limit_s: float
) -> dict[str, float | None]:
    """Seconds until a new connection from each source is served; None: not within limit_s."""
    started = time.monotonic()

    async def until_served(local_host: str) -> float | None:
        while time.monotonic() - started < limit_s:
            left = limit_s - (time.monotonic() - started)
            ok, _ = await _newcomer(host, port, local_host, min(2.0, max(0.1, left)))
            if ok:
                return round(time.monotonic() - started, 3)
            await asyncio.sleep(0.1)
        return None

    found = await asyncio.gather(*(until_served(h) for h in sources.values()))
    return dict(zip(sources, found, strict=True))


async def _lobby_state(host: str, port: int) -> dict[str, Any]:
    """The lobby as a newcomer gets it: bytes, games, seeks, and whether the project's own
    client decodes it (protocol.decode_server, the client's side of the codec)."""
    sizes: list[bytes] = []
    try:
        client = await Client.open(host, port, FRESH_HOST, name="lobby-probe", timeout=5)
    except (OSError, ConnectionError, TimeoutError) as exc:
        return {"error": str(exc)[:60]}
    client.on_type["lobby_state"] = lambda message, frame: sizes.append(frame)
    started = time.monotonic()
    try:
        reply = await client.request({"type": "lobby"}, timeout=30)
    except (OSError, ConnectionError, TimeoutError) as exc:
        return {"error": type(exc).__name__}
    finally:
        client.close()
    elapsed = time.monotonic() - started
    if reply["type"] != "lobby_state" or not sizes:
        return {"error": reply.get("code", reply["type"])}
    try:
        decode_server(sizes[0])
        decodes = True
    except ProtocolError:
        decodes = False
    return {
        "bytes": len(sizes[0]),
        "games": len(reply.get("games", [])),
        "seeks": len(reply.get("seeks", [])),
        "ms": round(elapsed * 1000, 1),
        "client_decodes": decodes,
    }


def db_stats(db: Path) -> dict[str, Any]:
    """Rows and bytes of the server's database (read-only, beside the running server)."""
    files = [db, db.with_name(db.name + "-wal")]
    out: dict[str, Any] = {
        "mb": round(sum(f.stat().st_size for f in files if f.exists()) / 2**20, 2)
    }
    try:
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return out
    try:
        for table in ("games", "moves", "events", "sessions"):
            with contextlib.suppress(sqlite3.Error):
                out[table] = connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        with contextlib.suppress(sqlite3.Error):
            data = connection.execute("SELECT SUM(LENGTH(data)) FROM events").fetchone()[0]
            out["events_kb"] = round((data or 0) / 1024, 1)
    finally:
        connection.close()
    return out


# --- the coordinator -----------------------------------------------------------------------


@dataclass(slots=True)
class RunOptions:
    seconds: float
    baseline_s: float
    after_s: float
    recovery_s: float
    addresses: int
    connections: int | None
    rate: float | None
    workers: int | None
    server_args: list[str]
    server_nofile: int | None
    bystander_rate: float
    ai_budget_ms: int
    patience_s: float
    quick: bool
    seed: int
    quiet: bool


def _phase_samples(
    samples: list[float], times: list[float], start: float, end: float
) -> dict[str, Any]:
    chosen = [x for x, t in zip(samples, times, strict=True) if start <= t < end]
    p = load.percentiles(chosen, (50, 99))
    return {
        "n": len(chosen),
        "p50": p["p50"],
        "p99": p["p99"],
        "max": round(max(chosen), 3) if chosen else None,
    }


def _resources(samples: list[Sample], start: float, end: float, peak: bool) -> dict[str, Any]:
    """One phase: RSS (its peak during the attack, else its last value), CPU % over it."""
    chosen = [s for s in samples if start <= s.at < end and s.alive]
    if not chosen:
        return {}
    first, last = chosen[0], chosen[-1]
    pick = (lambda f: max(f(s) for s in chosen)) if peak else (lambda f: f(last))
    span = last.at - first.at
    return {
        "rss_mb": round(pick(lambda s: s.rss_kb) / 1024, 1),
        "workers_rss_mb": round(pick(lambda s: s.workers_rss_kb) / 1024, 1),
        "cpu_pct": round(100 * (last.cpu_s - first.cpu_s) / span) if span > 0 else None,
        "workers_cpu_pct": (
            round(100 * (last.workers_cpu_s - first.workers_cpu_s) / span) if span > 0 else None
        ),
        "fds": pick(lambda s: s.fds),
        "log_kb": round((last.log_bytes - first.log_bytes) / 1024, 1),
    }


def _errors_between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    codes = dict(after.get("error_codes", {}))
    for code, n in before.get("error_codes", {}).items():
        codes[code] = codes.get(code, 0) - n
    return {code: n for code, n in codes.items() if n}


def run_attack(name: str, options: RunOptions) -> dict[str, Any]:
    """One attack against its own server; the report (see the module's docstring)."""
    cls = KINDS[name]
    log = load._progress(options.quiet)
    workdir = Path(tempfile.mkdtemp(prefix=f"noughts-attack-{name}-"))
    db = workdir / "attack.db"
    workers = options.workers if options.workers is not None else cls.workers
    nofile = options.server_nofile or cls.nofile or SERVER_NOFILE
    server = ServerProcess(
        db,
        workers,
        lift_limits=False,
        extra_args=options.server_args,
        nofile=nofile,
        log_level="INFO",  # the server's default: what an operator's log gets
    )
    load_start = load._load_average()
    server.start()
    log(f"[{name}] server {server.url} (pid {server.pid}, {workers} workers, soft nofile {nofile})")
    sampler = Sampler(server)
    sampler.start()
    context = multiprocessing.get_context("spawn")
    attack_options = AttackOptions(
        kind=name,
        host="127.0.0.1",
        port=server.port,
        server_pid=server.pid,
        db=str(db),
        seconds=options.seconds,
        addresses=attacker_hosts(options.addresses),
        connections=options.connections,
        rate=options.rate,
        quick=options.quick,
        workers=workers,
        server_args=options.server_args,
        seed=options.seed,
    )
    ai = cls.ai_bystander and workers > 0
    bystander_settings = load.ClientSettings(
        index=0,
        host="127.0.0.1",
        port=server.port,
        game="gomoku",
        params={},
        pairs=1,
        ai_games=1 if ai else 0,
        algorithm="mcts",
        budget_ms=options.ai_budget_ms,
        rate=options.bystander_rate * (2 if ai else 1),
        reconnect=True,
        seed=options.seed,
        local_host=BYSTANDER_HOST,
        patience_s=options.patience_s,
    )
    report: dict[str, Any] = {
        "kind": name,
        "finding": cls.finding,
        "summary": cls.summary,
        "seconds": options.seconds,
        "server": {"workers": workers, "nofile": nofile, "args": options.server_args},
        "attacker_addresses": attack_options.addresses,
    }
    attacker = bystander = None
    attacker_pipe = bystander_pipe = None
    tallies: dict[str, Any] = {}
    try:
        # Both processes start at once; the bystander connects while the attacker sets up,
        # and plays from the attacker's "ready" on.
        attacker_pipe, child = context.Pipe()
        attacker = context.Process(
            target=attacker_process, args=(attack_options, child), daemon=True
        )
        attacker.start()
        child.close()
        bystander_pipe, child = context.Pipe()
        bystander = context.Process(
            target=load.client_process, args=(bystander_settings, child), daemon=True
        )
        bystander.start()
        child.close()
        if not attacker_pipe.poll(600):
            raise RuntimeError("the attacker did not set up in 600 s")
        message = attacker_pipe.recv()
        if message[0] != "ready":
            raise RuntimeError(f"the attacker could not set up: {message[1]}")
        report["setup"] = message[1]
        message = bystander_pipe.recv()
        if message[0] != "ready":
            raise RuntimeError(f"the bystander could not connect: {message[2]}")
        bystander_pipe.send(("go",))
        bystander_pipe.send(("measure",))
        t_base = time.monotonic()

        def pump() -> None:
            assert bystander_pipe is not None
            while bystander_pipe.poll():
                message = bystander_pipe.recv()
                if message[0] == "tally":
                    tallies["now"] = message[2]

        probes: dict[str, Any] = {}
        lobby = cls.lobby_probe
        if lobby:
            time.sleep(max(0.0, options.baseline_s - 0.5))
            probes["before"] = asyncio.run(_lobby_state("127.0.0.1", server.port))
        while time.monotonic() < t_base + options.baseline_s:
            pump()
            time.sleep(0.05)
        db_before = db_stats(db)
        pump()
        tallies["before"] = dict(tallies.get("now", {}))
        log(f"[{name}] baseline done; attack for {options.seconds:g} s")
        sampler.take()
        t_go = time.monotonic()
        attacker_pipe.send(("go",))
        newcomers: list[tuple[bool, float, str]] = []
        finished_early = False
        next_probe = t_go + 0.5
        while time.monotonic() < t_go + options.seconds:
            pump()
            if attacker_pipe.poll() and attacker_pipe.recv()[0] == "finished":
                finished_early = True
                break
            if time.monotonic() >= next_probe:
                newcomers.append(newcomer_served("127.0.0.1", server.port, FRESH_HOST))
                next_probe = time.monotonic() + 1.0
            time.sleep(0.05)
        if lobby:
            probes["during"] = asyncio.run(_lobby_state("127.0.0.1", server.port))
        db_during = db_stats(db)
        t_stop = time.monotonic()
        attacker_pipe.send(("stop",))
        attack_stats: dict[str, Any] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pump()
            if attacker_pipe.poll(0.1):
                message = attacker_pipe.recv()
                if message[0] == "done":
                    attack_stats = message[1]
                    break
        else:
            attack_stats = {"attack_error": "the attacker did not stop within 60 s: killed"}
            attacker.kill()
        attacker.join(timeout=10)
        sampler.take()
        t_released = time.monotonic()
        pump()
        tallies["during"] = dict(tallies.get("now", {}))
        log(f"[{name}] attacker gone after {t_released - t_go:.1f} s; measuring recovery")
        recovery = asyncio.run(
            _recovery(
                "127.0.0.1",
                server.port,
                {"attacker_address": attack_options.addresses[0], "fresh_address": FRESH_HOST},
                options.recovery_s,
            )
        )
        while time.monotonic() < t_released + options.after_s:
            pump()
            time.sleep(0.05)
        if lobby:
            probes["after"] = asyncio.run(_lobby_state("127.0.0.1", server.port))
        db_after = db_stats(db)
        sampler.take()
        t_end = time.monotonic()
        bystander_pipe.send(("stop",))
        result: dict[str, Any] | None = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and result is None:
            if bystander_pipe.poll(0.1):
                message = bystander_pipe.recv()
                if message[0] == "done":
                    result = message[2]
                elif message[0] == "tally":
                    tallies["now"] = message[2]
        bystander.join(timeout=10)
        if result is None:
            raise RuntimeError("the bystander did not report")
    finally:
        for process in (attacker, bystander):
            if process is not None and process.is_alive():
                process.kill()
        sampler.stopped.set()
        sampler.join(timeout=5)
        server_alive = server.process is not None and server.process.poll() is None
        # Every acknowledged move is committed: a server still busy with what the attack
        # left (searches nobody waits for) is killed after a short grace.
        stop_started = time.monotonic()
        server.stop(timeout=2.0)
        log(f"[{name}] server stopped in {time.monotonic() - stop_started:.1f} s")
    # --- the figures ---
    phases = {"before": (t_base, t_go), "during": (t_go, t_released), "after": (t_released, t_end)}
    round_trips = load._floats(result["round_trips"])
    round_trip_at = load._floats(result["round_trip_at"])
    bystander_report: dict[str, Any] = {
        "round_trip_ms": {
            phase: _phase_samples(round_trips, round_trip_at, *span)
            for phase, span in phases.items()
        }
    }
    if ai:
        waits = load._floats(result["ai_waits"])
        wait_at = load._floats(result["ai_wait_at"])
        bystander_report["ai_move_ms"] = {
            phase: _phase_samples(waits, wait_at, *span) for phase, span in phases.items()
        }
        bystander_report["ai_budget_ms"] = options.ai_budget_ms
    bystander_report["patience_s"] = options.patience_s
    tally = result["tally"]
    bystander_report["errors"] = {
        "before": _errors_between({}, tallies["before"]),
        "during": _errors_between(tallies["before"], tallies["during"]),
        "after": _errors_between(tallies["during"], tally),
    }
    keys = ("acked", "stalls", "abandoned", "reconnections", "games_finished", "waiting_at_end_ms")
    for key in keys:
        bystander_report[key] = tally[key]
    report["bystander"] = bystander_report
    samples = sampler.samples
    report["resources"] = {
        phase: _resources(samples, *span, peak=phase == "during") for phase, span in phases.items()
    }
    report["server_exited"] = not server_alive
    emfile = 0
    with contextlib.suppress(OSError), open(server.log, "rb") as handle:
        for line in handle:
            emfile += b"Too many open files" in line
    report["log"] = {"mb": round(server.log.stat().st_size / 2**20, 2), "emfile_lines": emfile}
    report["newcomer"] = {
        "during": {
            "tried": len(newcomers),
            "served": sum(ok for ok, _, _ in newcomers),
            "median_ms": (
                round(1000 * statistics.median(s for ok, s, _ in newcomers if ok))
                if any(ok for ok, _, _ in newcomers)
                else None
            ),
            "refusals": dict(Counter(d for ok, _, d in newcomers if not ok).most_common(3)),
        },
        "after_s": recovery,
        "recovery_limit_s": options.recovery_s,
    }
    report["attack_finished_early"] = finished_early
    report["phases_s"] = {
        "before": round(t_go - t_base, 2),
        "during": round(t_stop - t_go, 2),
        "leaving": round(t_released - t_stop, 2),  # the attacker closing what it held
        "after": round(t_end - t_released, 2),
    }
    report["attacker"] = {**report.pop("setup", {}), **attack_stats}
    report["headline"] = cls.headline(report["attacker"])
    if lobby:
        report["lobby_state"] = probes
    report["db"] = {"before": db_before, "during": db_during, "after": db_after}
    report["moves"] = load._verify(db, [result])
    report["load_average"] = {"start": load_start, "end": load._load_average()}
    report["goals"] = _goals(report)
    report["ok"] = all(goal["met"] for goal in report["goals"].values())
    report["db_path"] = str(db)
    return report


def _goals(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 11's goals, each with its figure, its limit and whether it was met."""
    rt = report["bystander"]["round_trip_ms"]
    base, during = rt["before"]["p99"], rt["during"]["p99"]
    limit = max(GOAL_P99_MS, GOAL_P99_RATIO * base) if base is not None else GOAL_P99_MS
    res = report["resources"]
    growth = None
    if res["before"] and res["during"]:
        total = lambda r: r["rss_mb"] + r["workers_rss_mb"]  # noqa: E731
        growth = round(total(res["during"]) - total(res["before"]), 1)
    recovery = report["newcomer"]["after_s"]
    goals = {
        # Under the limit during the attack, and still served after it.
        "bystander_p99": {
            "value": during,
            "limit": round(limit, 1),
            "met": during is not None and during < limit and rt["after"]["n"] > 0,
        },
        "rss_growth_mb": {
            "value": growth,
            "limit": GOAL_RSS_GROWTH_MB,
            "met": growth is not None and growth < GOAL_RSS_GROWTH_MB,
        },
        "lost_moves": {
            "value": report["moves"]["lost_moves"],
            "limit": 0,
            "met": report["moves"]["lost_moves"] == 0
            and report["moves"]["integrity_check"] == "ok",
        },
        "recovery_s": {
            "value": max(
                (s for s in recovery.values()), key=lambda s: float("inf") if s is None else s
            ),
            "limit": GOAL_RECOVERY_S,
            "met": all(s is not None and s <= GOAL_RECOVERY_S for s in recovery.values()),
        },
    }
    if "ai_move_ms" in report["bystander"]:
        # Every AI turn answered, by a move or an error, within the bystander's patience.
        b = report["bystander"]
        goals["ai_answered"] = {
            "value": b["stalls"],
            "limit": 0,
            "met": b["stalls"] == 0 and b["waiting_at_end_ms"] < 1000 * b["patience_s"],
        }
    return goals


# --- output ------------------------------------------------------------------------------


def _ms(phase: dict[str, Any]) -> str:
    if not phase.get("n"):
        return "-"
    return f"{phase['p50']:.1f}/{phase['p99']:.1f}"


def _mark(goal: dict[str, Any]) -> str:
    return "met" if goal["met"] else "MISSED"


def print_report(report: dict[str, Any]) -> None:
    b = report["bystander"]
    res = report["resources"]
    goals = report["goals"]
    rt = b["round_trip_ms"]
    print(f"{report['kind']} (finding {report['finding']}): {report['summary']}")
    print(f"  attacker       {report['headline']}")
    if report["attacker"].get("attack_error"):
        print(f"  attack error   {report['attacker']['attack_error']}")
    print(
        f"  bystander ms   p50/p99 before {_ms(rt['before'])}  during {_ms(rt['during'])}  "
        f"after {_ms(rt['after'])}  (max during {rt['during']['max']}; {rt['during']['n']} "
        f"moves)  goal p99 < {goals['bystander_p99']['limit']}: {_mark(goals['bystander_p99'])}"
    )
    if "ai_move_ms" in b:
        ai = b["ai_move_ms"]
        print(
            f"  AI move ms     p50/p99 before {_ms(ai['before'])}  during {_ms(ai['during'])}  "
            f"after {_ms(ai['after'])}  (budget {b['ai_budget_ms']}; stalls {b['stalls']}: "
            f"{_mark(goals['ai_answered'])})"
        )
    errors = {p: e for p, e in b["errors"].items() if e}
    print(
        f"  bystander      errors {errors or 'none'}; stalls {b['stalls']}, games given up "
        f"{b['abandoned']}, reconnections {b['reconnections']}"
        + (
            f"; at the end still waiting {b['waiting_at_end_ms'] / 1000:.1f} s for an answer"
            if b["waiting_at_end_ms"]
            else ""
        )
    )

    def row(key: str, unit: str = "") -> str:
        return " / ".join(str(res[p].get(key, "-")) + unit for p in ("before", "during", "after"))

    print(
        f"  server         RSS MB {row('rss_mb')} (workers {row('workers_rss_mb')}); growth "
        f"{goals['rss_growth_mb']['value']} MB: {_mark(goals['rss_growth_mb'])}"
    )
    print(
        f"                 CPU % {row('cpu_pct')} (workers {row('workers_cpu_pct')}); fds "
        f"{row('fds')}; log KB {row('log_kb')}"
        + (
            f"; 'Too many open files' x{report['log']['emfile_lines']:,}"
            if report["log"]["emfile_lines"]
            else ""
        )
    )
    n = report["newcomer"]
    print(
        f"  newcomers      during: {n['during']['served']}/{n['during']['tried']} served"
        f"{' ' + str(n['during']['refusals']) if n['during']['refusals'] else ''}; after the "
        f"attack, served in (s): {n['after_s']} (limit {n['recovery_limit_s']}): "
        f"{_mark(goals['recovery_s'])}"
    )
    m = report["moves"]
    print(
        f"  moves          {m['acked_moves_checked']:,} acknowledged, "
        f"{m['acked_moves_checked'] - m['lost_moves']:,} of them stored; lost {m['lost_moves']}: "
        f"{_mark(goals['lost_moves'])}; integrity {m['integrity_check']}"
    )
    if "lobby_state" in report:
        print(f"  lobby_state    {report['lobby_state']}")
    d = report["db"]
    print(f"  database       before {d['before']}\n                 after  {d['after']}")
    print(
        f"  load average   {report['load_average']['start'][0]} -> "
        f"{report['load_average']['end'][0]}"
        + ("; THE SERVER EXITED" if report["server_exited"] else "")
    )


def table(reports: list[dict[str, Any]]) -> str:
    """bench/SERVER.md's "Under attack" table (markdown), one row per attack. RSS counts the
    engine workers too; the last column is the 1-minute load average at the start."""
    lines = [
        "| attack (finding) | bystander p50/p99 ms before / during / after | server RSS MB "
        "before / peak / after | server CPU % before / during / after | acked / stored | "
        "newcomer served after (s): attacker's address, fresh | attacker | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        if "error" in r:
            lines.append(f"| {r['kind']} | harness failed: {r['error']} | | | | | | |")
            continue
        rt = r["bystander"]["round_trip_ms"]
        res = r["resources"]
        phases = ("before", "during", "after")
        rss = " / ".join(
            f"{res[p]['rss_mb'] + res[p]['workers_rss_mb']:.0f}" if res[p] else "-" for p in phases
        )
        cpu = " / ".join(str(res[p].get("cpu_pct", "-")) for p in phases)
        moves = r["moves"]
        after = r["newcomer"]["after_s"]
        recovery = ", ".join("never" if s is None else f"{s:.2f}" for s in after.values())
        ai = ""
        if "ai_move_ms" in r["bystander"]:
            ai_ms = r["bystander"]["ai_move_ms"]
            ai = f"; AI move {' / '.join(_ms(ai_ms[p]) for p in phases)}"
        lines.append(
            f"| {r['kind']} ({r['finding']}) | {' / '.join(_ms(rt[p]) for p in phases)}{ai} | "
            f"{rss} | {cpu} | {moves['acked_moves_checked']} / "
            f"{moves['acked_moves_checked'] - moves['lost_moves']} | {recovery} | "
            f"{r['headline']} | {r['load_average']['start'][0]} |"
        )
    return "\n".join(lines)


# --- the command line ----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/attack.py",
        description="Run issue 11's attacks against a real noughts server, one at a time, and "
        "report what each costs a bystander and the server (figures, not a test).",
    )
    parser.add_argument(
        "--kind",
        default=None,
        help="an attack (see --list), several separated by commas, or 'all'",
    )
    parser.add_argument("--list", action="store_true", help="list the attacks and exit")
    parser.add_argument(
        "--seconds",
        type=positive_float,
        default=None,
        help="attack duration (default: 10; --quick: 1)",
    )
    parser.add_argument(
        "--baseline-s",
        type=non_negative_float,
        default=None,
        help="the bystander plays this long before the attack (default: 3; --quick: 0.5)",
    )
    parser.add_argument(
        "--after-s",
        type=non_negative_float,
        default=None,
        help="and this long after the attacker left (default: 3; --quick: 0.5)",
    )
    parser.add_argument(
        "--recovery-s",
        type=non_negative_float,
        default=None,
        help="how long to try serving a newcomer after the attack (default: 10; --quick: 2)",
    )
    parser.add_argument(
        "--addresses",
        type=positive_int,
        default=1,
        help="source addresses the attacker spreads over, 127.0.0.2 up (default: %(default)s)",
    )
    parser.add_argument(
        "--connections",
        type=positive_int,
        default=None,
        help="the attack's size: connections, requests in flight or loops (see --list)",
    )
    parser.add_argument(
        "--rate",
        type=positive_float,
        default=None,
        help="the attack's rate, in its own unit (see --list)",
    )
    parser.add_argument(
        "--workers",
        type=count,
        default=None,
        help="the server's engine workers (default: per kind)",
    )
    parser.add_argument(
        "--server-args",
        action="append",
        default=[],
        metavar="ARGS",
        help='more options for `noughts serve`, e.g. "--max-connections 100" (repeatable)',
    )
    parser.add_argument(
        "--server-nofile",
        type=positive_int,
        default=None,
        help=f"the server's soft limit on open files (default: {SERVER_NOFILE}; fd-exhaustion: "
        "1024)",
    )
    parser.add_argument(
        "--bystander-rate",
        type=positive_float,
        default=40.0,
        help="the bystander's moves a second in each of its games (default: %(default)s)",
    )
    parser.add_argument(
        "--ai-budget-ms",
        type=positive_int,
        default=100,
        help="the bystander's AI budget (default: %(default)s)",
    )
    parser.add_argument(
        "--patience",
        type=positive_float,
        default=10.0,
        help="seconds the bystander waits for an answer before giving its game up (a stall) "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every attack shrunk to a smoke test (not real figures): the tests use it",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def describe_kinds() -> str:
    lines = []
    for cls in KINDS.values():
        size = f"--connections {cls.connections}" if cls.connections != 1 else ""
        rate = f"--rate {cls.rate:g}" if cls.rate is not None else ""
        extras = ", ".join(x for x in (size, rate) if x)
        lines.append(
            f"{cls.name:18} finding {cls.finding:3} {cls.summary}"
            + (f" ({extras})" if extras else "")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    load.stop_on_sigterm()
    args = build_parser().parse_args(argv)
    if args.list:
        print(describe_kinds())
        return 0
    if not args.kind:
        print("attack: name an attack with --kind (see --list)", file=sys.stderr)
        return 2
    names = list(KINDS) if args.kind == "all" else [k.strip() for k in args.kind.split(",")]
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        print(f"attack: no attack {unknown[0]!r}; choose from {', '.join(KINDS)}", file=sys.stderr)
        return 2
    quick = args.quick
    options = RunOptions(
        seconds=args.seconds if args.seconds is not None else (1.0 if quick else 10.0),
        baseline_s=args.baseline_s if args.baseline_s is not None else (0.5 if quick else 3.0),
        after_s=args.after_s if args.after_s is not None else (0.5 if quick else 3.0),
        recovery_s=args.recovery_s if args.recovery_s is not None else (2.0 if quick else 10.0),
        addresses=args.addresses,
        connections=args.connections,
        rate=args.rate,
        workers=args.workers,
        server_args=[a for arg in args.server_args for a in shlex.split(arg)],
        server_nofile=args.server_nofile,
        bystander_rate=args.bystander_rate,
        ai_budget_ms=args.ai_budget_ms,
        patience_s=args.patience,
        quick=quick,
        seed=args.seed,
        quiet=args.quiet,
    )
    load._raise_fd_limit(65536)
    reports = []
    failed = False
    for name in names:
        try:
            report = run_attack(name, options)
        except Exception as exc:  # the harness could not run it: say so, go on
            report = {"kind": name, "error": f"{type(exc).__name__}: {exc}"}
            failed = True
        reports.append(report)
        if not args.json:
            if "error" in report:
                print(f"{name}: the harness failed: {report['error']}")
            else:
                print_report(report)
            print(flush=True)
    if args.json:
        print(json.dumps({"attacks": reports, "options": asdict(options)}, indent=2, default=str))
    elif len(reports) > 1:
        print(table(reports))
    if failed:
        return 2
    return 0 if all(r["ok"] for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())

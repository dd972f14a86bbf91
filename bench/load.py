"""Load generator for the noughts server: throughput, latency, soak, kill -9, capacity.

Starts a real server as a separate process (``python -m server --port 0``), drives it
from scripted clients in one or more client processes (multiprocessing), and reports
figures; it never passes or fails a build, except that it exits 1 when a run saw
errors or lost an acknowledged move. Every run is bounded in time and count and talks
to 127.0.0.1 only.

    python bench/load.py throughput --games 200              # as fast as possible
    python bench/load.py throughput --games 100 --rate 1000  # 1,000 moves/s offered
    python bench/load.py throughput --ai-games 50 --games 0  # AI-move overhead
    python bench/load.py soak --games 500 --duration 600     # the 10-minute soak
    python bench/load.py kill --games 100 --kills 20         # kill -9 at random moments
    python bench/load.py capacity --connections 10000        # idle connections, memory
    python bench/load.py attack --kind http-flood            # issue 11's attacks: bench/attack.py
    python bench/load.py throughput --nodes 2 --db postgresql://... --bus redis://...
                                                             # a cluster: bench/cluster.py

What is measured:

- moves/s end to end: moves of human-vs-human games delivered to the opponent (so
  validated, committed and broadcast by the server), counted after a warm-up;
- human-move round trip: from sending ``move`` to receiving its acknowledgement (the
  mover's copy of ``moved``, sent only after the commit): p50, p99, p99.9;
- AI-move overhead in games against the AI: from the human move's acknowledgement to
  the AI's ``moved``, minus the AI's budget (and, apart, minus the search's own
  ``elapsed_ms``: the server's part alone);
- errors: every ``error`` frame, unexpected close, or request that failed;
- lost moves: every acknowledged move (and every move delivered to an opponent) is
  looked up in the database after the run; one missing is a lost move.

The scripted players speak the wire protocol (PROTOCOL.md) over a minimal RFC 6455
client written on asyncio.Protocol: a load generator must cost less per move than the
server it loads, and on a 2-core machine both share the CPU. Moves are random empty
cells, so the games are the m,n,k family (tictactoe, 5x5, gomoku, mnk).
"""

from __future__ import annotations

import argparse
import array
import asyncio
import base64
import contextlib
import hashlib
import json
import math
import multiprocessing
import os
import random
import resource
import signal
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgpack

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python bench/load.py` from anywhere
    sys.path.insert(0, str(ROOT))

from arguments import count, non_negative_float, positive_float, positive_int  # noqa: E402

from protocol import PROTOCOL_VERSION  # noqa: E402

try:  # the C mask of websockets (RFC 6455 section 5.3), else its pure-Python one
    from websockets.speedups import apply_mask  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    from websockets.utils import apply_mask

# Issue 6's targets, printed beside the figures.
TARGET_MOVES_PER_S = 10_000
TARGET_P99_MS = 5.0  # human-move round trip at 100 games, 1,000 moves/s offered
TARGET_AI_OVERHEAD_P99_MS = 3.0
TARGET_CONNECTIONS = 10_000

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
SERVER_START_TIMEOUT_S = 600.0  # the first start compiles the engine's kernels
RECONNECT_BACKOFF_S = (0.02, 0.05, 0.1, 0.2, 0.5)
KILL_PATIENCE_S = 10.0  # the longest a kill waits for the previous kill's players
CLIENT_RATE_CAP = 1_000_000  # messages/s per connection: no limit in practice
SERVER_CONNECTION_CAP = 100_000


# --- a minimal websocket client (RFC 6455) ---------------------------------------------


class WebSocketLink(asyncio.Protocol):
    """One client websocket: the opening handshake, masked binary frames out, frames in.

    Each complete message goes to ``on_message`` straight from ``data_received``: no
    task, queue or future per frame. Pings are answered; a close frame is echoed.
    """

    def __init__(
        self, on_message: Callable[[bytes], None], on_lost: Callable[[WebSocketLink], None]
    ) -> None:
        self.on_message = on_message
        self.on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.key = base64.b64encode(os.urandom(16))
        self.buffer = bytearray()
        self.handshaken = False
        self.fragments: list[bytes] = []
        self.closed = False
        self.close_code: int | None = None  # the server's close frame's code, once received

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        on_message: Callable[[bytes], None],
        on_lost: Callable[[WebSocketLink], None],
        timeout: float = 10.0,
        local_host: str | None = None,
    ) -> WebSocketLink:
        """Open and upgrade a connection; ``local_host`` is its source address (any of
        127.0.0.0/8 on loopback: how the attack harness gives clients their own address)."""
        loop = asyncio.get_running_loop()
        local_addr = None if local_host is None else (local_host, 0)
        _, link = await asyncio.wait_for(
            loop.create_connection(
                lambda: cls(on_message, on_lost), host, port, local_addr=local_addr
            ),
            timeout,
        )
        request = (
            f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {link.key.decode()}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        )
        assert link.transport is not None
        link.transport.write(request.encode())
        await asyncio.wait_for(link.opened, timeout)
        return link

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:  # small frames: send each at once (Nagle off, as websockets does)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.opened.done():
            self.opened.set_exception(ConnectionError("closed during the handshake"))
        self.on_lost(self)

    def send(self, payload: bytes) -> None:
        """One binary frame, FIN set, masked with a fresh key (RFC 6455 section 5.2)."""
        if self.closed or self.transport is None:
            return
        self.transport.write(_frame(0x82, payload))

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(_frame(0x88, (1000).to_bytes(2, "big")))
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        if not self.handshaken:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buffer[:end]).decode("latin-1")
            del buffer[: end + 4]
            accept = base64.b64encode(hashlib.sha1(self.key + WS_GUID).digest()).decode()
            if not head.startswith("HTTP/1.1 101") or accept not in head:
                self.opened.set_exception(ConnectionError(head.split("\r\n", 1)[0]))
                assert self.transport is not None
                self.transport.close()
                return
            self.handshaken = True
            self.opened.set_result(None)
        # Frames from the server are unmasked (RFC 6455 section 5.1).
        offset = 0
        size = len(buffer)
        while size - offset >= 2:
            first = buffer[offset]
            length = buffer[offset + 1] & 0x7F
            start = offset + 2
            if length == 126:
                if size - start < 2:
                    break
                length = int.from_bytes(buffer[start : start + 2], "big")
                start += 2
            elif length == 127:
                if size - start < 8:
                    break
                length = int.from_bytes(buffer[start : start + 8], "big")
                start += 8
            end = start + length
            if end > size:
                break
            payload = bytes(buffer[start:end])
            offset = end
            opcode = first & 0x0F
            if opcode in (0x1, 0x2, 0x0):
                if first & 0x80:
                    if self.fragments:
                        self.fragments.append(payload)
                        payload = b"".join(self.fragments)
                        self.fragments = []
                    self.on_message(payload)
                else:
                    self.fragments.append(payload)
            elif opcode == 0x9 and self.transport is not None:  # ping -> pong, same data
                self.transport.write(_frame(0x8A, payload))
            elif opcode == 0x8:
                self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                self.close()
                break
        if offset:
            del buffer[:offset]


def _frame(head: int, payload: bytes) -> bytes:
    length = len(payload)
    if length < 126:
        header = bytes((head, 0x80 | length))
    elif length < 65536:
        header = bytes((head, 0x80 | 126)) + length.to_bytes(2, "big")
    else:
        header = bytes((head, 0x80 | 127)) + length.to_bytes(8, "big")
    # The mask only has to be unpredictable to the network path; loopback here, so a
    # fast PRNG serves (RFC 6455 section 10.3 is about proxies in between).
    mask = random.randbytes(4)
    return header + mask + apply_mask(payload, mask)


def _pack(body: dict[str, Any]) -> bytes:
    return msgpack.packb(body, use_bin_type=True)  # type: ignore[no-any-return]


# --- the server under test ---------------------------------------------------------------


class ServerProcess:
    """``python -m server`` in a child process; its address is the first line it prints.

    ``lift_limits`` (the load runs) lifts the per-address and per-connection limits above
    what a run opens; the attack harness keeps the server's own defaults and passes
    ``extra_args`` through. ``nofile`` sets the server's soft limit on open files.
    """

    def __init__(
        self,
        db: Path | str,
        workers: int,
        port: int = 0,
        compression: str | None = None,
        loop: str = "asyncio",
        *,
        lift_limits: bool = True,
        extra_args: list[str] | None = None,
        nofile: int | None = None,
        log_level: str = "WARNING",
        log: Path | None = None,
    ) -> None:
        self.db = db
        self.loop = loop
        self.workers = workers
        self.port = port
        self.compression = compression
        self.lift_limits = lift_limits
        self.extra_args = list(extra_args or ())
        self.nofile = nofile
        self.log_level = log_level
        self.process: Any = None
        self.url = ""
        self.log = log or Path(db).with_suffix(".log")

    def start(self) -> str:
        import subprocess

        args = [sys.executable]
        profile = os.environ.get("NOUGHTS_LOAD_PROFILE")
        if profile:  # profile the server: cProfile's statistics land in this file at exit
            args += ["-m", "cProfile", "-o", profile]
        args += [
            "-m",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--db",
            str(self.db),
            "--workers",
            str(self.workers),
            "--log-level",
            self.log_level,
            "--loop",
            self.loop,
        ]
        if self.lift_limits:
            args += self._lifted_limits()
        if self.compression:
            args += ["--compression", self.compression]
        args += self.extra_args
        nofile = self.nofile

        def limit_files() -> None:  # in the child, before exec
            if nofile is not None:
                hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
                soft = nofile if hard == resource.RLIM_INFINITY else min(nofile, hard)
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                args,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=ROOT,
                start_new_session=True,
                preexec_fn=limit_files if nofile is not None else None,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode(errors="replace")
        if "ws://" not in line:
            self.process.wait(timeout=10)
            raise RuntimeError(f"the server did not start (see {self.log}): {line!r}")
        self.url = line[line.index("ws://") :].split()[0]
        self.port = int(self.url.rsplit(":", 1)[1])
        return self.url

    @staticmethod
    def _lifted_limits() -> list[str]:
        return [
            # Every client of this harness comes from 127.0.0.1: lift the per-address cap
            # (and the total) above what a run opens.
            "--max-connections",
            str(SERVER_CONNECTION_CAP),
            "--max-per-ip",
            str(SERVER_CONNECTION_CAP),
            # Every client opens its connections at once, from one address.
            "--max-handshakes-per-ip",
            str(SERVER_CONNECTION_CAP),
            # A scripted player moves as fast as its replies come back: on a quiet
            # machine that passes the 200 messages/s a person's connection is allowed.
            # The harness measures the server, not the abuse limit (tests/server/
            # test_limits.py proves that): lift it.
            "--rate",
            str(CLIENT_RATE_CAP),
            "--burst",
            str(CLIENT_RATE_CAP),
            # Likewise the per-address caps on new sessions and unfinished games
            # (tests/server/test_identity.py proves those).
            "--new-sessions-per-ip",
            str(SERVER_CONNECTION_CAP * 60),
            "--new-sessions-burst-per-ip",
            str(SERVER_CONNECTION_CAP),
            "--max-games-per-ip",
            str(SERVER_CONNECTION_CAP),
        ]

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def kill(self) -> None:
        """kill -9: no shutdown, nothing flushed beyond what was committed."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        # The engine workers are in the server's process group (start_new_session).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM; kill -9 if the server has not stopped within ``timeout``."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except Exception:
            self.kill()

    def rss_kb(self) -> int:
        return _rss_kb(self.pid)


class EngineWorkers:
    """``noughts engine-worker`` processes on the cluster's Redis queue, under a key prefix
    of their own (deleted at the end); ``start`` returns once every one is ready."""

    def __init__(self, url: str, processes: int, log: Path) -> None:
        self.url = url
        self.processes = processes
        self.prefix = f"load{os.getpid()}x{random.randrange(16**6):06x}"
        self.log = log
        self.process: Any = None

    def start(self, timeout: float = 300.0) -> None:
        import subprocess

        import redis

        args = [sys.executable, "-m", "client.cli", "engine-worker", "--bus", self.url]
        args += ["--bus-prefix", self.prefix, "--processes", str(self.processes)]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=log, cwd=ROOT, start_new_session=True
            )
        client = redis.Redis.from_url(self.url)
        try:
            deadline = time.monotonic() + timeout
            while len(client.keys(f"{self.prefix}:engine:worker:*")) < self.processes:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the engine workers did not start (see {self.log})")
                time.sleep(0.2)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except Exception:
                os.killpg(self.process.pid, signal.SIGKILL)
        delete_keys(self.url, self.prefix)


def delete_keys(url: str, prefix: str) -> None:
    """Every key under ``prefix`` in the Redis at ``url`` (a run's streams and heartbeat
    keys, which have no expiry): none left behind."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(f"{prefix}:*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (proc(5): utime, stime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _raise_fd_limit(wanted: int) -> int:
    """Raise the soft limit on open files toward ``wanted`` (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --- scripted players ----------------------------------------------------------------------


@dataclass(slots=True)
class ClientSettings:
    """What one client process runs; picklable."""

    index: int
    host: str
    port: int
    game: str
    params: dict[str, int]
    pairs: int  # human-vs-human games played at once
    ai_games: int  # games against the AI played at once
    algorithm: str
    budget_ms: int
    rate: float | None  # moves/s offered by this process; None: as fast as possible
    reconnect: bool  # kill mode: a lost connection is expected; reconnect and resume
    seed: int
    connect_concurrency: int = 50
    local_host: str | None = None  # source address of every connection (attack harness)
    # A bystander under attack (bench/attack.py): a game that waits this long for a move's
    # acknowledgement or the AI's move, or that gets an error, is resigned and replaced,
    # and the players never give up; None: a load run, where any such thing is an error.
    patience_s: float | None = None


@dataclass(slots=True)
class Tally:
    """What a client process counted; sent to the parent as it goes and at the end."""

    delivered: int = 0  # human-vs-human moves delivered to the opponent
    acked: int = 0  # moves acknowledged to their mover (human seats)
    ai_moves: int = 0  # AI moves received
    games_finished: int = 0
    errors: int = 0
    error_codes: dict[str, int] = field(default_factory=dict)
    error_examples: list[str] = field(default_factory=list)
    reconnections: int = 0
    unacked: int = 0  # moves in flight when the connection dropped (kill mode)
    resumed_games: int = 0  # games interrupted by a lost connection that went on
    not_resumed: int = 0  # players still stuck at the end in a game a lost connection cut
    desyncs: int = 0  # an event out of order or a position that disagrees
    stalls: int = 0  # waits over ``patience_s`` (bystander mode)
    abandoned: int = 0  # games given up after a stall or an error (bystander mode)
    waiting_at_end_ms: float = 0.0  # the longest wait still unanswered at the stop


class Pacer:
    """Offered rate for one game: one move per slot of ``interval`` seconds, the slots at
    the game's own random phase (so the games' moves are spread over time, as independent
    players' are).

    A move that comes late (its opponent's reply arrived after the slot) goes at once and
    the next keeps to the game's slots. Restarting the slots at "now" instead would put
    every game delayed by the same burst in step with the others, and those games would
    then arrive together for the rest of the run: the harness would make the bursts it
    measures.
    """

    __slots__ = ("interval", "due")

    def __init__(self, interval: float, first: float) -> None:
        self.interval = interval
        self.due = first

    def advance(self, now: float) -> None:
        """A move goes now (``due <= now``): the next slot of this game after ``now``."""
        self.due += self.interval * (1 + int((now - self.due) // self.interval))


class Player:
    """One scripted player: a session, one connection, one game at a time.

    Event-driven: the server's frames are handled in the link's callback, which plays
    the next move as soon as the player's own view says it is its turn.
    """

    def __init__(self, run: ClientRun, name: str, pacer: Pacer | None) -> None:
        self.run = run
        self.name = name
        self.pacer = pacer
        self.link: WebSocketLink | None = None
        self.session: str | None = None
        self.rids = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.game_id: str | None = None
        self.seat = 0
        self.token = ""
        self.actions: list[int] = []
        self.free: list[int] = []
        self.last_seq = 0
        self.status = "none"
        self.to_move = -1
        self.move_rid = -1  # rid of the move in flight
        self.move_sent = 0.0
        self.acked_at = 0.0  # when our last move was acknowledged (AI overhead)
        self.scheduled = False
        self.ended: asyncio.Event = asyncio.Event()
        self.connected: asyncio.Event = asyncio.Event()
        self.interrupted = False  # the connection dropped during this game
        self.reconnecting = False
        self.synced = False  # connected and, after a reconnection, the game resumed
        self.timer: asyncio.TimerHandle | None = None  # a paced move waiting
        self.opponent_is_ai = False
        self.waiting_since = 0.0  # monotonic: a move's ack or the AI's move is awaited

    # --- connection ----------------------------------------------------------------

    async def connect(self) -> None:
        self.link = await WebSocketLink.connect(
            self.run.settings.host,
            self.run.settings.port,
            self.on_frame,
            self.on_lost,
            local_host=self.run.settings.local_host,
        )
        hello: dict[str, Any] = {
            "type": "hello",
            "version": PROTOCOL_VERSION,
            "name": self.name,
            "client": "noughts-load",
        }
        if self.session is not None:
            hello["session"] = self.session
        welcome = await self.request(hello)
        self.session = welcome["session"]
        for held in welcome.get("games", ()):
            if held["game_id"] == self.game_id:
                self.seat, self.token = held["seat"], held["token"]
            elif self.run.reconnect and self.status in ("none", "finished", "aborted"):
                # A game created or joined just before the server died, its reply lost:
                # take it up (resume then fetches its position).
                self.begin(held["game_id"], held["seat"], held["token"])
        self.connected.set()
        self.synced = self.game_id is None or not self.run.reconnect or not self.interrupted

    def on_lost(self, link: WebSocketLink) -> None:
        if link is not self.link:
            return  # a link that never finished opening
        self.connected.clear()
        self.synced = False
        self.waiting_since = 0.0
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionError("connection lost"))
        self.pending.clear()
        if self.move_rid >= 0:
            self.run.tally.unacked += 1
            self.move_rid = -1
        self.scheduled = False
        if self.run.stopping:
            return
        if not self.run.reconnect:
            self.run.error("connection_lost")
            return
        self.interrupted = self.game_id is not None
        if not self.reconnecting:
            self.reconnecting = True
            self.run.spawn(self.reconnect())

    async def reconnect(self) -> None:
        attempt = 0
        try:
            while not self.run.stopping:
                delay = RECONNECT_BACKOFF_S[min(attempt, len(RECONNECT_BACKOFF_S) - 1)]
                await asyncio.sleep(delay)
                attempt += 1
                try:
                    await self.connect()
                    if self.game_id is not None:
                        await self.resume()
                except (OSError, ConnectionError, TimeoutError):
                    continue
                except RequestError as exc:
                    self.run.error(f"reconnect:{exc.code}")
                    return
                self.run.tally.reconnections += 1
                return
        finally:
            self.reconnecting = False

    async def resume(self) -> None:
        assert self.game_id is not None
        reply = await self.request(
            {"type": "resume", "game_id": self.game_id, "since": self.last_seq}
        )
        if reply.get("token") and reply["game_id"] == self.game_id:  # not a game left since
            self.seat, self.token = reply["seat"], reply["token"]
        self.synced = True  # the position is the server's again: moves may go
        self.maybe_move()

    def request(self, body: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        self.rids += 1
        body["rid"] = self.rids
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self.link is None or self.link.closed:
            future.set_exception(ConnectionError("not connected"))
            return future
        self.pending[self.rids] = future
        self.link.send(_pack(body))
        return future

    # --- games ---------------------------------------------------------------------

    def begin(self, game_id: str, seat: int, token: str) -> None:
        self.game_id, self.seat, self.token = game_id, seat, token
        self.actions = []
        self.free = list(range(self.run.cells))
        self.last_seq = 0
        self.status = "open"
        self.to_move = -1
        self.ended.clear()
        self.interrupted = False
        self.waiting_since = 0.0

    def abandon(self, resign: bool = True) -> None:
        """Bystander mode: give this game up (resign it, without waiting for the reply) and
        let the loop start another."""
        if self.status in ("finished", "aborted", "none"):
            return
        if resign and self.link is not None and not self.link.closed and self.game_id is not None:
            self.rids += 1  # a rid nobody waits for: the reply is dropped
            resign = {"type": "resign", "rid": self.rids, "game_id": self.game_id}
            self.link.send(_pack({**resign, "token": self.token}))
        self.status = "aborted"
        self.to_move = -1
        self.move_rid = -1
        self.waiting_since = 0.0
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.scheduled = False
        self.run.tally.abandoned += 1
        self.ended.set()

    def stalled(self, now: float) -> None:
        """A wait passed ``patience_s``: counted as a stall and as a sample of that wait."""
        self.run.tally.stalls += 1
        self.record_wait(now)

    def record_wait(self, now: float, at_stop: bool = False) -> None:
        """The wait so far as a sample (a lower bound: no answer came)."""
        run = self.run
        waited = (now - self.waiting_since) * 1000.0
        if run.measuring or at_stop:
            samples, times = (
                (run.ai_waits, run.ai_wait_at)
                if self.move_rid < 0 and self.opponent_is_ai
                else (run.round_trips, run.round_trip_at)
            )
            samples.append(waited)
            times.append(self.waiting_since)

    def maybe_move(self) -> None:
        if (
            self.status != "live"
            or self.to_move != self.seat
            or self.move_rid >= 0
            or self.scheduled
            or self.run.stopping
            or not self.synced
        ):
            return
        pacer = self.pacer
        if pacer is not None:
            now = time.perf_counter()
            if pacer.due > now:
                self.scheduled = True
                self.timer = self.run.loop.call_later(pacer.due - now, self._paced_move)
                return
            pacer.advance(now)
        self.send_move()

    def _paced_move(self) -> None:
        self.scheduled = False
        self.timer = None
        self.maybe_move()

    def send_move(self) -> None:
        free = self.free
        action = free[self.run.rng.randrange(len(free))]
        self.rids += 1
        self.move_rid = self.rids
        frame = _pack(
            {
                "type": "move",
                "rid": self.rids,
                "game_id": self.game_id,
                "token": self.token,
                "action": action,
                "ply": len(self.actions),
            }
        )
        assert self.link is not None
        self.move_sent = time.perf_counter()
        self.waiting_since = time.monotonic()
        self.link.send(frame)

    def on_frame(self, frame: bytes) -> None:
        message = msgpack.unpackb(frame, raw=False)
        kind = message["type"]
        rid = message.get("rid")
        if kind == "moved":
            self.on_moved(message, rid)
        elif kind == "error":
            self.run.error(message["code"], message.get("message", ""))
            if rid is not None and rid == self.move_rid:
                self.move_rid = -1
            game_id = message.get("game_id")
            if self.run.settings.patience_s is not None and game_id == self.game_id:
                self.abandon()
        elif kind in ("snapshot", "ended", "presence", "offer"):
            self.on_event(message)
        elif kind == "seated":
            # At once, not when the request's awaiter runs: the game's snapshot may be
            # in the same read.
            self.begin(message["game_id"], message["seat"], message["token"])
        if rid is not None:
            future = self.pending.pop(rid, None)
            if future is not None and not future.done():
                if kind == "error":
                    future.set_exception(RequestError(message["code"], message["message"]))
                else:
                    future.set_result(message)

    def on_moved(self, message: dict[str, Any], rid: int | None) -> None:
        if message["game_id"] != self.game_id or message["seq"] <= self.last_seq:
            return  # another game's, or seen before a reconnection
        now = time.perf_counter()
        run = self.run
        self.last_seq = message["seq"]
        ply, action, seat = message["ply"], message["action"], message["seat"]
        if ply != len(self.actions):
            run.tally.desyncs += 1
        self.actions.append(action)
        with contextlib.suppress(ValueError):
            self.free.remove(action)
        self.to_move = message["to_move"]
        measuring = run.measuring
        if seat == self.seat:
            if rid is not None and rid == self.move_rid:
                self.move_rid = -1
                run.tally.acked += 1
                run.acked.append((self.game_id, ply, action))
                self.acked_at = now
                self.waiting_since = time.monotonic() if self.opponent_is_ai else 0.0
                if measuring:
                    run.round_trips.append((now - self.move_sent) * 1000.0)
                    run.round_trip_at.append(self.move_sent + run.clock_offset)
            else:  # our move committed, its acknowledgement lost with the connection
                run.delivered_moves.append((self.game_id, ply, action))
        elif self.opponent_is_ai:
            run.tally.ai_moves += 1
            run.delivered_moves.append((self.game_id, ply, action))
            self.waiting_since = 0.0
            if measuring and self.acked_at and not self.interrupted:
                waited = (now - self.acked_at) * 1000.0
                run.ai_waits.append(waited)
                run.ai_wait_at.append(self.acked_at + run.clock_offset)
                run.ai_overhead.append(waited - run.settings.budget_ms)
                elapsed = (message.get("stats") or {}).get("elapsed_ms")
                if elapsed is not None:
                    run.ai_server_overhead.append(waited - elapsed)
        else:
            run.tally.delivered += 1
            run.delivered_moves.append((self.game_id, ply, action))
        if self.interrupted and seat == self.seat:
            self.interrupted = False
            run.tally.resumed_games += 1
        self.maybe_move()

    def on_event(self, message: dict[str, Any]) -> None:
        if message["game_id"] != self.game_id:
            return
        kind = message["type"]
        if kind == "snapshot":
            if message["status"] == "open":
                self.status = "open"
                return
            self.last_seq = message["seq"]
            self.actions = list(message["actions"])
            taken = set(self.actions)
            self.free = [c for c in range(self.run.cells) if c not in taken]
            self.status = message["status"]
            self.to_move = message["to_move"]
            if self.status in ("finished", "aborted"):
                self._over()
            self.maybe_move()
            return
        if message["seq"] <= self.last_seq:
            return
        self.last_seq = message["seq"]
        if kind == "ended":
            self.status = "finished"
            self.to_move = -1
            self._over()

    def _over(self) -> None:
        if not self.ended.is_set():
            self.ended.set()
            if self.seat == 0:
                self.run.tally.games_finished += 1


class RequestError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class ClientRun:
    """One client process: its players, its counts and its samples."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.loop = asyncio.get_running_loop()
        self.rng = random.Random(settings.seed)
        self.cells = _cells(settings.game, settings.params)
        self.reconnect = settings.reconnect
        self.tally = Tally()
        self.stopping = False
        self.measuring = False
        self.round_trips = array.array("d")
        # When each sample began (time.monotonic, comparable across processes): the attack
        # harness splits them into before, during and after the attack.
        self.round_trip_at = array.array("d")
        self.ai_waits = array.array("d")  # from a move's acknowledgement to the AI's reply
        self.ai_wait_at = array.array("d")
        self.clock_offset = time.monotonic() - time.perf_counter()
        self.ai_overhead = array.array("d")
        self.ai_server_overhead = array.array("d")
        self.acked: list[tuple[str, int, int]] = []
        self.delivered_moves: list[tuple[str, int, int]] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        self.window: dict[str, float] = {}  # counts and time when measuring began, then spans

    def counts(self) -> dict[str, float]:
        t = self.tally
        return {
            "delivered": t.delivered,
            "acked": t.acked,
            "ai_moves": t.ai_moves,
            "seconds": time.monotonic(),
        }

    def error(self, code: str, text: str = "") -> None:
        self.tally.errors += 1
        self.tally.error_codes[code] = self.tally.error_codes.get(code, 0) + 1
        if len(self.tally.error_examples) < 5:
            self.tally.error_examples.append(f"{code}: {text}")

    def spawn(self, coroutine: Any) -> None:
        task = self.loop.create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def pacer(self) -> Pacer | None:
        s = self.settings
        games = s.pairs + s.ai_games
        if s.rate is None or games == 0:
            return None
        interval = games / s.rate
        return Pacer(interval, time.perf_counter() + self.rng.random() * interval)

    async def pair_loop(self, x: Player, o: Player) -> None:
        """Two players: x creates a game, o joins, they play it out; again until stopped."""
        while not self.stopping:
            try:
                if x.game_id is None or x.status in ("finished", "aborted"):
                    await x.connected.wait()
                    await x.request(
                        {
                            "type": "create",
                            "game": self.settings.game,
                            "params": self.settings.params,
                            "opponent": "human",
                            "seat": 0,
                        }
                    )
                if o.game_id != x.game_id:
                    await o.connected.wait()
                    await o.request({"type": "join", "game_id": x.game_id})
                await self.games_over(x, o)
            except (ConnectionError, RequestError) as exc:
                if isinstance(exc, RequestError):
                    if self.settings.patience_s is not None:  # a bystander never gives up
                        x.abandon()
                        x.game_id = None
                        await asyncio.sleep(0.2)
                        continue
                    if not self.reconnect or exc.code not in ("seat_taken", "unknown_game"):
                        return  # counted as an error when its frame arrived
                    x.game_id = None  # the open game was withdrawn or lost: start anew
                await asyncio.sleep(0.05)

    async def ai_loop(self, player: Player) -> None:
        s = self.settings
        player.opponent_is_ai = True
        while not self.stopping:
            try:
                if player.game_id is None or player.status in ("finished", "aborted"):
                    await player.connected.wait()
                    await player.request(
                        {
                            "type": "create",
                            "game": s.game,
                            "params": s.params,
                            "opponent": "ai",
                            "seat": 0,
                            "algorithm": s.algorithm,
                            "budget_ms": s.budget_ms,
                        }
                    )
                    player.acked_at = 0.0
                await self.games_over(player)
            except ConnectionError:
                await asyncio.sleep(0.05)
            except RequestError:
                if self.settings.patience_s is None:
                    return
                await asyncio.sleep(0.2)  # a bystander never gives up

    async def games_over(self, *players: Player) -> None:
        """Wait until the players' game is over. In bystander mode (``patience_s``), give
        it up after a wait over the patience, or once a player's side ended and the other
        has not heard of it within a second."""
        patience = self.settings.patience_s
        if patience is None:
            for player in players:
                await player.ended.wait()
            return
        first_over = 0.0
        resign = True
        while not self.stopping:
            now = time.monotonic()
            over = [p.ended.is_set() for p in players]
            if all(over):
                return
            if any(over):
                first_over = first_over or now
                if now - first_over > 1.0:
                    resign = False  # the game is over: nothing to resign
                    break
            else:
                stuck = [p for p in players if p.waiting_since and now - p.waiting_since > patience]
                if stuck:
                    stuck[0].stalled(now)
                    break
            await asyncio.sleep(0.05)
        for player in players:
            player.abandon(resign)
            resign = resign and player.status not in ("finished", "aborted")


def _cells(game: str, params: dict[str, int]) -> int:
    import engine

    try:
        rules = engine.make_game(game, **params)
    except engine.EngineError as exc:
        raise SystemExit(f"load: {exc}") from None
    if not isinstance(rules, engine.MNKGame):
        raise SystemExit(f"load: {game!r} is not an m,n,k game")
    return rules.cells


async def _client_main(settings: ClientSettings, pipe: Any) -> None:
    run = ClientRun(settings)
    gate = asyncio.Semaphore(settings.connect_concurrency)

    async def connected(player: Player) -> Player:
        async with gate:
            await player.connect()
        return player

    pairs = []
    for i in range(settings.pairs):
        pacer = run.pacer()
        x = Player(run, f"x{settings.index}-{i}", pacer)
        o = Player(run, f"o{settings.index}-{i}", pacer)
        pairs.append((x, o))
    solos = [Player(run, f"h{settings.index}-{i}", run.pacer()) for i in range(settings.ai_games)]
    everyone = [p for pair in pairs for p in pair] + solos
    try:
        await asyncio.gather(*(connected(p) for p in everyone))
    except Exception as exc:
        pipe.send(("failed", settings.index, f"{type(exc).__name__}: {exc}"))
        return
    pipe.send(("ready", settings.index))
    loop = asyncio.get_running_loop()
    command = await loop.run_in_executor(None, pipe.recv)
    if command[0] != "go":
        return
    for x, o in pairs:
        run.spawn(run.pair_loop(x, o))
    for player in solos:
        run.spawn(run.ai_loop(player))
    # Report counts every half second; start measuring after the warm-up; stop on request.
    stop = loop.create_future()

    def listen() -> None:
        while True:
            message = pipe.recv()
            if message[0] in ("measure", "stop"):
                loop.call_soon_threadsafe(_on_command, run, stop, message[0])
            if message[0] == "stop":
                return

    listener = loop.run_in_executor(None, listen)
    while not stop.done():
        pipe.send(("tally", settings.index, asdict(run.tally)))
        await asyncio.wait([stop], timeout=0.5)
    # Stop: no new moves; wait for the moves in flight to be acknowledged.
    now = time.monotonic()
    for player in everyone:
        if player.waiting_since:  # bystander mode: an answer still awaited is a sample too
            waited = round((now - player.waiting_since) * 1000.0, 1)
            run.tally.waiting_at_end_ms = max(run.tally.waiting_at_end_ms, waited)
            player.record_wait(now, at_stop=True)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(p.move_rid >= 0 for p in everyone):
        await asyncio.sleep(0.01)
    for player in everyone:
        if player.move_rid >= 0:
            run.tally.unacked += 1
        if player.interrupted and player.status == "live":
            run.tally.not_resumed += 1
    await listener
    for task in list(run.tasks):
        task.cancel()
    for player in everyone:
        if player.link is not None:
            player.link.close()
    pipe.send(
        (
            "done",
            settings.index,
            {
                "tally": asdict(run.tally),
                "window": run.window,
                "round_trips": run.round_trips.tobytes(),
                "ai_overhead": run.ai_overhead.tobytes(),
                "ai_server_overhead": run.ai_server_overhead.tobytes(),
                "round_trip_at": run.round_trip_at.tobytes(),
                "ai_waits": run.ai_waits.tobytes(),
                "ai_wait_at": run.ai_wait_at.tobytes(),
                "acked": run.acked,
                "delivered": run.delivered_moves,
            },
        )
    )


def _on_command(run: ClientRun, stop: asyncio.Future[None], command: str) -> None:
    if command == "measure":
        run.measuring = True
        run.window = run.counts()
    elif not stop.done():
        if run.window:  # what happened between "measure" and now
            run.window = {k: v - run.window[k] for k, v in run.counts().items()}
        run.stopping = True
        run.measuring = False
        stop.set_result(None)


def client_process(settings: ClientSettings, pipe: Any) -> None:
    """Entry point of a client process (multiprocessing, spawn)."""
    _raise_fd_limit(65536)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us
    asyncio.run(_client_main(settings, pipe))


# --- the load run (throughput, soak, kill) -------------------------------------------------


@dataclass(slots=True)
class LoadOptions:
    games: int
    ai_games: int
    processes: int
    rate: float | None
    duration_s: float
    warmup_s: float
    game: str
    params: dict[str, int]
    algorithm: str
    budget_ms: int
    workers: int
    kills: int
    seed: int
    db: str | None  # a SQLite path, or a postgresql:// URL (a fresh schema in it per run)
    quiet: bool
    loop: str = "asyncio"  # the server's event loop (noughts serve --loop)
    engine_queue: str | None = None  # redis://...: AI searches on the cluster's queue


def percentiles(samples: list[float], points: tuple[float, ...]) -> dict[str, float | None]:
    """Nearest-rank percentiles (p50 ... p99.9) of ``samples``, in ms."""
    out: dict[str, float | None] = {}
    ordered = sorted(samples)
    for p in points:
        key = f"p{p:g}"
        if not ordered:
            out[key] = None
            continue
        rank = max(1, math.ceil(p / 100.0 * len(ordered)))
        out[key] = round(ordered[rank - 1], 3)
    return out


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run_load(options: LoadOptions, mode: str) -> dict[str, Any]:
    """Start the server, the client processes, the kills; gather and check everything."""
    _raise_fd_limit(65536)
    workdir = Path(tempfile.mkdtemp(prefix="noughts-load-"))
    db: Path | str = workdir / "load.db"
    if options.db is not None:
        db = _fresh_pg_schema(options.db) if is_postgres(options.db) else Path(options.db)
    port = 0
    if options.kills:
        port = _free_port()  # kept across restarts, so that clients find the server again
    workers = options.workers if options.ai_games else 0
    remote: EngineWorkers | None = None
    extra_args: list[str] = []
    if options.engine_queue is not None:
        remote = EngineWorkers(options.engine_queue, max(1, workers), workdir / "workers.log")
        extra_args = ["--engine", "queue", "--bus", remote.url, "--bus-prefix", remote.prefix]
        workers = 0
    server = ServerProcess(
        db, workers, port, loop=options.loop, log=workdir / "server.log", extra_args=extra_args
    )
    started = time.monotonic()
    if remote is not None:
        remote.start()
    server.start()
    log = _progress(options.quiet)
    log(f"server {server.url} (pid {server.pid}, db {db}), load average {_load_average()}")
    rng = random.Random(options.seed)
    context = multiprocessing.get_context("spawn")
    processes = max(1, min(options.processes, max(1, options.games + options.ai_games)))
    pair_split = _split(options.games, processes)
    ai_split = _split(options.ai_games, processes)
    rate_split: list[float | None] = [None] * processes
    if options.rate:
        total_games = options.games + options.ai_games
        rate_split = [
            options.rate * (pair_split[i] + ai_split[i]) / max(1, total_games)
            for i in range(processes)
        ]
    pipes = []
    children = []
    for i in range(processes):
        parent, child = context.Pipe()
        settings = ClientSettings(
            index=i,
            host="127.0.0.1",
            port=server.port,
            game=options.game,
            params=options.params,
            pairs=pair_split[i],
            ai_games=ai_split[i],
            algorithm=options.algorithm,
            budget_ms=options.budget_ms,
            rate=rate_split[i],
            reconnect=bool(options.kills),
            seed=options.seed * 1000 + i,
        )
        process = context.Process(target=client_process, args=(settings, child), daemon=True)
        process.start()
        child.close()
        pipes.append(parent)
        children.append(process)
    report: dict[str, Any] = {"mode": mode, "options": _options_dict(options)}
    try:
        for pipe in pipes:
            message = pipe.recv()
            if message[0] != "ready":
                raise RuntimeError(f"client process {message[1]} failed to start: {message[2]}")
        log(f"{processes} client processes connected; go")
        for pipe in pipes:
            pipe.send(("go",))
        t0 = time.monotonic()
        tallies: list[dict[str, Any]] = [asdict(Tally()) for _ in pipes]
        measure_from = t0 + options.warmup_s
        measuring = False
        cpu_mark = (0.0, 0.0, 0)
        kill_times = _kill_schedule(options, rng)
        kills_done: list[dict[str, float]] = []
        players = 2 * options.games + options.ai_games
        restarted = t0
        next_print = t0 + 1.0
        last_delivered = 0
        last_print = t0
        end = t0 + options.duration_s
        while time.monotonic() < end or kill_times:  # every kill asked for is made
            for i, pipe in enumerate(pipes):
                while pipe.poll():
                    message = pipe.recv()
                    if message[0] == "tally":
                        tallies[i] = message[2]
            now = time.monotonic()
            if not measuring and now >= measure_from:
                measuring = True
                cpu_mark = (_cpu_s(server.pid), sum(_cpu_s(c.pid) for c in children), server.pid)
                for pipe in pipes:
                    pipe.send(("measure",))
            # A kill lands on a server whose players are all back from the previous kill
            # (or, should one never come back, 10 s after the restart): a kill while they
            # are still reconnecting would count one reconnection for two kills.
            everyone_back = _sum(tallies, "reconnections") >= players * len(kills_done)
            if (
                kill_times
                and now - t0 >= kill_times[0]
                and (everyone_back or now - restarted >= KILL_PATIENCE_S)
            ):
                kill_times.pop(0)
                down = time.monotonic()
                server.kill()
                server.start()
                restarted = time.monotonic()
                kills_done.append(
                    {"at_s": round(down - t0, 3), "restart_s": round(time.monotonic() - down, 3)}
                )
                # Leave time after the last restart to see every game go on.
                end = max(end, time.monotonic() + max(2.0, 0.2 * options.duration_s))
                log(
                    f"kill -9 #{len(kills_done)} at {down - t0:.1f}s; restarted in "
                    f"{time.monotonic() - down:.2f}s"
                )
            if now >= next_print:
                delivered = _sum(tallies, "delivered") + _sum(tallies, "ai_moves")
                rate = (delivered - last_delivered) / (now - last_print)
                log(
                    f"{now - t0:6.1f}s  {rate:8,.0f} moves/s  acked {_sum(tallies, 'acked'):,}"
                    f"  games {_sum(tallies, 'games_finished'):,}"
                    f"  errors {_sum(tallies, 'errors')}"
                    f"  reconnections {_sum(tallies, 'reconnections')}"
                )
                last_delivered, last_print, next_print = delivered, now, now + 1.0
            time.sleep(0.05)
        for pipe in pipes:
            while pipe.poll():
                message = pipe.recv()
                if message[0] == "tally":
                    tallies[message[1]] = message[2]
        cpu = {"server": 0.0, "clients": 0.0}
        if measuring and cpu_mark[2] == server.pid:  # not across a restart
            cpu = {
                "server": _cpu_s(server.pid) - cpu_mark[0],
                "clients": sum(_cpu_s(c.pid) for c in children) - cpu_mark[1],
            }
        for pipe in pipes:
            pipe.send(("stop",))
        results = []
        for pipe in pipes:
            while True:
                message = pipe.recv()
                if message[0] == "done":
                    results.append(message[2])
                    break
        for process in children:
            process.join(timeout=10)
        server_rss_kb = server.rss_kb()
    finally:
        for process in children:
            if process.is_alive():
                process.kill()
        server.stop()
        if remote is not None:
            remote.stop()
    report.update(_summarise(results, options))
    moves = report["window_moves"]
    # CPU per move: a figure that holds when other processes share the cores.
    report["cpu_us_per_move"] = {
        who: round(seconds * 1e6 / moves, 1) if moves and seconds else None
        for who, seconds in cpu.items()
    }
    report["server_rss_mb"] = round(server_rss_kb / 1024, 1)
    report["kills"] = kills_done
    report.update(_verify(db, results))
    if isinstance(db, str):
        _drop_pg_schema(db)
    report["load_average"] = _load_average()
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    report["db"] = str(db)
    return report


def _kill_schedule(options: LoadOptions, rng: random.Random) -> list[float]:
    """``kills`` random moments, spread over the run, leaving its last fifth for checking
    that every game goes on after the last restart. A kill waits, past its moment, for the
    players of the previous one to be back (at most ``KILL_PATIENCE_S``)."""
    if not options.kills:
        return []
    span = options.duration_s * 0.8
    slot = span / options.kills
    return [slot * i + rng.uniform(0.2, 0.9) * slot for i in range(options.kills)]


def _sum(tallies: list[dict[str, Any]], key: str) -> int:
    return sum(t[key] for t in tallies)


def _options_dict(options: LoadOptions) -> dict[str, Any]:
    d = asdict(options)
    d["db"] = options.db
    return d


def _floats(blob: bytes) -> list[float]:
    values = array.array("d")
    values.frombytes(blob)
    return values.tolist()


def _summarise(results: list[dict[str, Any]], options: LoadOptions) -> dict[str, Any]:
    tally: dict[str, Any] = asdict(Tally())
    for result in results:
        for key, value in result["tally"].items():
            if key == "error_codes":
                for code, n in value.items():
                    tally["error_codes"][code] = tally["error_codes"].get(code, 0) + n
            elif key == "error_examples":
                tally["error_examples"] += value
            else:
                tally[key] += value
    round_trips = [x for r in results for x in _floats(r["round_trips"])]
    ai_overhead = [x for r in results for x in _floats(r["ai_overhead"])]
    ai_server = [x for r in results for x in _floats(r["ai_server_overhead"])]
    # Each client process counted over its own measuring window; their rates add up.
    windows = [r["window"] for r in results if r["window"].get("seconds", 0) > 0]
    human = sum(w["delivered"] / w["seconds"] for w in windows)
    ai = sum(w["ai_moves"] / w["seconds"] for w in windows)
    acked = sum(w["acked"] / w["seconds"] for w in windows)
    window = max((w["seconds"] for w in windows), default=0.0)
    moves = sum(w["delivered"] + w["ai_moves"] for w in windows)
    return {
        "window_s": round(window, 2),
        "window_moves": moves,
        "moves_per_s": round(human + ai, 1),  # delivered to the opponent (human or AI's)
        "human_moves_per_s": round(human, 1),
        "acked_per_s": round(acked, 1),
        "round_trip_ms": {"samples": len(round_trips), **percentiles(round_trips, (50, 99, 99.9))},
        "ai_overhead_ms": {
            "samples": len(ai_overhead),
            "budget_ms": options.budget_ms,
            **percentiles(ai_overhead, (50, 99)),
            "beyond_search_elapsed": percentiles(ai_server, (50, 99)),
        },
        "tally": tally,
        "errors": tally["errors"],
        "targets": {
            "moves_per_s": TARGET_MOVES_PER_S,
            "round_trip_p99_ms": TARGET_P99_MS,
            "ai_overhead_p99_ms": TARGET_AI_OVERHEAD_P99_MS,
        },
    }


def is_postgres(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def _fresh_pg_schema(url: str) -> str:
    """A new schema for this run in the database at ``url``; the URL that uses it (asyncpg
    passes a DSN's unknown query parameters on as server settings: ``search_path``)."""
    schema = f"load_{os.getpid()}_{random.randrange(16**6):06x}"
    _pg_execute(url, f"CREATE SCHEMA {schema}")
    return f"{url}{'&' if '?' in url else '?'}search_path={schema}"


def _drop_pg_schema(url: str) -> None:
    schema = url.rsplit("search_path=", 1)[1]
    _pg_execute(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _pg_execute(url: str, sql: str) -> None:
    import asyncpg

    async def execute() -> None:
        connection = await asyncpg.connect(url)
        try:
            await connection.execute(sql)
        finally:
            await connection.close()

    asyncio.run(execute())


# PostgreSQL has no counterpart of SQLite's PRAGMA integrity_check without extensions
# (amcheck); a PostgreSQL run is judged by its moves alone.
NO_INTEGRITY_CHECK = "n/a (PostgreSQL)"


def _stored(db: Path | str) -> tuple[str, dict[tuple[str, int], int], dict[str, int]]:
    """The integrity check's verdict, every stored move's action and the games by status."""
    moves_sql = "SELECT game_id, ply, action FROM moves"
    status_sql = "SELECT status, COUNT(*) FROM games GROUP BY status"
    if isinstance(db, str):
        import asyncpg

        async def read() -> tuple[list[Any], list[Any]]:
            connection = await asyncpg.connect(db)
            try:
                return await connection.fetch(moves_sql), await connection.fetch(status_sql)
            finally:
                await connection.close()

        moves, statuses = asyncio.run(read())
        return NO_INTEGRITY_CHECK, {(g, p): a for g, p, a in moves}, dict(statuses)
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        integrity = connection.execute("PRAGMA integrity_check").fetchone()[0]
        stored = {(g, p): a for g, p, a in connection.execute(moves_sql)}
        return integrity, stored, dict(connection.execute(status_sql))
    finally:
        connection.close()


def _verify(db: Path | str, results: list[dict[str, Any]]) -> dict[str, Any]:
    """Every acknowledged move, and every move an opponent received, is in the database."""
    integrity, stored, statuses = _stored(db)
    acked = [m for r in results for m in r["acked"]]
    delivered = [m for r in results for m in r["delivered"]]
    lost = [m for m in acked if stored.get((m[0], m[1])) != m[2]]
    phantom = [m for m in delivered if stored.get((m[0], m[1])) != m[2]]
    return {
        "integrity_check": integrity,
        "acked_moves_checked": len(acked),
        "lost_moves": len(lost),
        "lost_examples": lost[:5],
        "delivered_moves_checked": len(delivered),
        "delivered_not_stored": len(phantom),
        "stored_moves": len(stored),
        "games_by_status": statuses,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _progress(quiet: bool) -> Callable[[str], None]:
    def log(text: str) -> None:
        if not quiet:
            print(text, file=sys.stderr, flush=True)

    return log


# --- connection capacity ---------------------------------------------------------------------


def _idle_process(url: str, count: int, compression: str | None, pipe: Any) -> None:
    """Open ``count`` idle connections (hello, welcome, then nothing) and hold them."""
    _raise_fd_limit(count + 256)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    async def main() -> None:
        import websockets

        gate = asyncio.Semaphore(50)  # below the listen backlog: no SYN retries
        held: list[Any] = []
        failures = 0

        async def one(i: int) -> None:
            nonlocal failures
            async with gate:
                try:
                    ws = await websockets.connect(
                        url, compression=compression, open_timeout=30, ping_interval=None
                    )
                    hello = {
                        "type": "hello",
                        "rid": 1,
                        "version": PROTOCOL_VERSION,
                        "name": f"idle{i}",
                    }
                    await ws.send(_pack(hello))
                    reply = msgpack.unpackb(await ws.recv(), raw=False)
                    if reply.get("type") != "welcome":
                        failures += 1
                    held.append(ws)
                except Exception:
                    failures += 1

        await asyncio.gather(*(one(i) for i in range(count)))
        pipe.send(("held", len(held), failures))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, pipe.recv)
        for ws in held:
            ws.transport.abort()

    asyncio.run(main())


def run_capacity(
    connections: int, compression: str | None, processes: int, quiet: bool
) -> dict[str, Any]:
    """Hold ``connections`` idle connections; the server's RSS before and after."""
    log = _progress(quiet)
    _raise_fd_limit(connections + 1024)
    workdir = Path(tempfile.mkdtemp(prefix="noughts-capacity-"))
    server = ServerProcess(workdir / "capacity.db", 0, compression=compression)
    server.start()
    context = multiprocessing.get_context("spawn")
    pipes, children = [], []
    try:
        time.sleep(0.5)
        before = server.rss_kb()
        t0 = time.monotonic()
        for count in _split(connections, processes):
            parent, child = context.Pipe()
            process = context.Process(
                target=_idle_process, args=(server.url, count, compression, child), daemon=True
            )
            process.start()
            child.close()
            pipes.append(parent)
            children.append(process)
        held = failures = 0
        for pipe in pipes:
            _, n, failed = pipe.recv()
            held += n
            failures += failed
        opened_s = time.monotonic() - t0
        time.sleep(1.0)
        after = server.rss_kb()
        # While they are held, the server still serves a newcomer.
        answered = asyncio.run(_ping(server.url))
        log(
            f"compression={compression or 'none'}: {held:,} held ({failures} failed) in "
            f"{opened_s:.1f}s; RSS {before / 1024:.1f} -> {after / 1024:.1f} MB"
        )
        for pipe in pipes:
            pipe.send(("release",))
        for process in children:
            process.join(timeout=30)
    finally:
        for process in children:
            if process.is_alive():
                process.kill()
        server.stop()
    per_connection = (after - before) / held if held else None
    return {
        "compression": compression or "none",
        "connections": connections,
        "held": held,
        "failed": failures,
        "open_s": round(opened_s, 2),
        "rss_before_mb": round(before / 1024, 1),
        "rss_after_mb": round(after / 1024, 1),
        "kb_per_connection": None if per_connection is None else round(per_connection, 1),
        "newcomer_answered": answered,
        "target_connections": TARGET_CONNECTIONS,
    }


async def _ping(url: str) -> bool:
    import websockets

    try:
        async with websockets.connect(url, compression=None, open_timeout=30) as ws:
            await ws.send(_pack({"type": "hello", "rid": 1, "version": PROTOCOL_VERSION}))
            await asyncio.wait_for(ws.recv(), 30)
            await ws.send(_pack({"type": "ping", "rid": 2}))
            reply = msgpack.unpackb(await asyncio.wait_for(ws.recv(), 30), raw=False)
            return bool(reply.get("type") == "pong")
    except Exception:
        return False


# --- the command line ----------------------------------------------------------------------


def _params(values: list[str]) -> dict[str, int]:
    params = {}
    for value in values:
        name, _, number = value.partition("=")
        params[name] = int(number)
    return params


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/load.py",
        description="Load the noughts server from scripted clients on 127.0.0.1 and report "
        "moves/s, round trips, AI overhead, errors and lost moves (figures, not a test).",
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    defaults = {
        "throughput": dict(games=200, duration=10.0, kills=0),
        "soak": dict(games=500, duration=600.0, kills=0),
        "kill": dict(games=100, duration=60.0, kills=20),
    }
    helps = {
        "throughput": "N concurrent games as fast as possible, or at an offered --rate",
        "soak": "a long run (default 500 games for 10 minutes): 0 errors, 0 lost moves",
        "kill": "kill -9 the server at random moments, restart it, clients resume",
    }
    for mode, d in defaults.items():
        p = sub.add_parser(mode, help=helps[mode], description=helps[mode])
        p.add_argument(
            "--games",
            type=count,
            default=d["games"],
            help="human-vs-human games at once (default: %(default)s)",
        )
        p.add_argument(
            "--ai-games",
            type=count,
            default=0,
            help="games against the AI at once (default: %(default)s)",
        )
        p.add_argument(
            "--rate",
            type=positive_float,
            default=None,
            help="moves/s offered across all games (default: as fast as possible)",
        )
        p.add_argument(
            "--duration",
            type=positive_float,
            default=d["duration"],
            help="seconds of load (default: %(default)s)",
        )
        p.add_argument(
            "--warmup",
            type=non_negative_float,
            default=None,
            help="seconds before measuring (default: 10%% of --duration, <= 2)",
        )
        p.add_argument(
            "--processes",
            type=positive_int,
            default=1,
            help="client processes (default: %(default)s)",
        )
        p.add_argument(
            "--game", default="gomoku", help="tictactoe, 5x5, gomoku or mnk (default: %(default)s)"
        )
        p.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="game parameter, e.g. m=7 (mnk)",
        )
        p.add_argument("--algorithm", default="mcts", help="the AI's search (default: mcts)")
        p.add_argument(
            "--budget-ms",
            type=positive_int,
            default=20,
            help="the AI's budget per move (default: %(default)s)",
        )
        p.add_argument(
            "--workers",
            type=count,
            default=1,
            help="server engine workers, with --ai-games (default: %(default)s); with "
            "--engine-queue, `noughts engine-worker` processes",
        )
        p.add_argument(
            "--engine-queue",
            default=None,
            metavar="REDIS_URL",
            help="AI searches through the cluster's Redis queue (noughts serve --engine queue "
            "--bus REDIS_URL), served by --workers engine-worker processes started for the "
            "run under a key prefix of their own",
        )
        p.add_argument(
            "--kills",
            type=count,
            default=d["kills"],
            help="kill -9 the server this many times (default: %(default)s)",
        )
        p.add_argument("--seed", type=int, default=1)
        p.add_argument(
            "--loop",
            choices=["asyncio", "uvloop"],
            default="asyncio",
            help="the server's event loop (noughts serve --loop; default: %(default)s)",
        )
        p.add_argument(
            "--db",
            default=None,
            help="a SQLite file, or postgresql://HOST:PORT/DB (each run in a fresh schema of "
            "it; default: a temp SQLite file)",
        )
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    sub.add_parser(
        "attack",
        help="issue 11's attacks against a real server (bench/attack.py; "
        "`load.py attack --help` for its options)",
        add_help=False,
    )
    cap = sub.add_parser("capacity", help="idle connections held, server memory per connection")
    cap.add_argument("--connections", type=positive_int, default=TARGET_CONNECTIONS)
    cap.add_argument("--compression", choices=["none", "deflate", "both"], default="both")
    cap.add_argument(
        "--processes", type=positive_int, default=4, help="client processes (default: 4)"
    )
    cap.add_argument("--json", action="store_true")
    cap.add_argument("--quiet", action="store_true")
    return parser


def _print_report(report: dict[str, Any]) -> None:
    if report["mode"] == "capacity":
        print(
            f"Idle connections (target {TARGET_CONNECTIONS:,} held), load {report['load_average']}"
        )
        for row in report["runs"]:
            print(
                f"  compression {row['compression']:7}  held {row['held']:,}/{row['connections']:,}"
                f"  RSS {row['rss_before_mb']} -> {row['rss_after_mb']} MB"
                f"  {row['kb_per_connection']} KB/connection"
                f"  newcomer answered: {row['newcomer_answered']}"
            )
        return
    rt = report["round_trip_ms"]
    ai = report["ai_overhead_ms"]
    t = report["tally"]
    print(
        f"{report['mode']}: {report['options']['games']} games + {report['options']['ai_games']}"
        f" vs AI, {report['options']['game']}, rate "
        f"{report['options']['rate'] or 'max'}, {report['window_s']} s measured, "
        f"load average {report['load_average']}"
    )
    print(
        f"  moves/s end to end   {report['moves_per_s']:>10,.0f}   (target >= "
        f"{TARGET_MOVES_PER_S:,}; human-vs-human {report['human_moves_per_s']:,.0f})"
    )
    print(
        f"  round trip ms        p50 {rt['p50']}  p99 {rt['p99']}  p99.9 {rt['p99.9']}"
        f"   ({rt['samples']:,} moves; target p99 <= {TARGET_P99_MS} at 100 games, 1,000/s)"
    )
    if ai["samples"]:
        b = ai["beyond_search_elapsed"]
        print(
            f"  AI overhead ms       p50 {ai['p50']}  p99 {ai['p99']} beyond the {ai['budget_ms']}"
            f" ms budget; p50 {b['p50']}  p99 {b['p99']} beyond the search's own time"
            f"   (target p99 <= {TARGET_AI_OVERHEAD_P99_MS})"
        )
    print(
        f"  errors {report['errors']} {t['error_codes'] or ''}  lost moves "
        f"{report['lost_moves']} of {report['acked_moves_checked']:,} acknowledged; delivered "
        f"but not stored {report['delivered_not_stored']}; integrity {report['integrity_check']}"
    )
    cpu = report["cpu_us_per_move"]
    print(f"  CPU per move         server {cpu['server']} us, clients {cpu['clients']} us")
    print(
        f"  games finished {t['games_finished']:,}  desyncs {t['desyncs']}  server RSS "
        f"{report['server_rss_mb']} MB"
    )
    if report["kills"]:
        restarts = [k["restart_s"] for k in report["kills"]]
        print(
            f"  kills {len(report['kills'])}  reconnections {t['reconnections']:,}  games "
            f"resumed {t['resumed_games']:,} (not resumed: {t['not_resumed']})  moves in "
            f"flight at a kill {t['unacked']}  restart "
            f"median {statistics.median(restarts):.2f} s"
        )


def stop_on_sigterm() -> None:
    """SIGTERM (a `timeout`, a CI job's cancel) as SystemExit, so that the ``finally`` blocks
    stop the server and worker processes a run started instead of leaving them running."""

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stop_on_sigterm()
    if argv[:1] == ["attack"]:  # the attack harness has its own options
        import attack

        return attack.main(argv[1:])
    if any(a == "--nodes" or a.startswith("--nodes=") for a in argv):
        import cluster  # several nodes: bench/cluster.py, with options of its own

        return cluster.main(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.mode != "capacity" and args.games + args.ai_games < 1:
        parser.error("--games or --ai-games: at least one game")
    if args.mode != "capacity" and args.warmup is not None and args.warmup >= args.duration:
        parser.error("--warmup: shorter than --duration, or nothing is measured")
    if args.mode == "capacity":
        modes = ["none", "deflate"] if args.compression == "both" else [args.compression]
        runs = [
            run_capacity(args.connections, None if m == "none" else m, args.processes, args.quiet)
            for m in modes
        ]
        report: dict[str, Any] = {"mode": "capacity", "runs": runs, "load_average": _load_average()}
        ok = all(r["held"] == r["connections"] and r["newcomer_answered"] for r in runs)
    else:
        warmup = args.warmup if args.warmup is not None else min(2.0, args.duration * 0.1)
        options = LoadOptions(
            games=args.games,
            ai_games=args.ai_games,
            processes=args.processes,
            rate=args.rate,
            duration_s=args.duration,
            warmup_s=warmup,
            game=args.game,
            params=_params(args.param),
            algorithm=args.algorithm,
            budget_ms=args.budget_ms,
            workers=args.workers,
            kills=args.kills,
            seed=args.seed,
            db=args.db,
            quiet=args.quiet,
            loop=args.loop,
            engine_queue=args.engine_queue,
        )
        _cells(options.game, options.params)
        report = run_load(options, args.mode)
        ok = (
            report["errors"] == 0
            and report["tally"]["not_resumed"] == 0
            and report["lost_moves"] == 0
            and report["delivered_not_stored"] == 0
            and report["integrity_check"] in ("ok", NO_INTEGRITY_CHECK)
        )
    report["ok"] = ok
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        _print_report(report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The cluster's figures: ``bench/load.py throughput|kill --nodes N --db postgresql://...
--bus redis://...`` (this module; load.py hands the run over when --nodes is above 1).

Starts N real nodes (``python -m server --db URL --bus URL``) on one fresh PostgreSQL schema
and one fresh Redis key prefix, with each game's two players connected to different nodes,
and reports (figures, not a test; exit 1 only if an acknowledged move was lost or a run saw
errors other than the cluster's ``unavailable`` while a node was down):

- throughput: a human move's round trip (``move`` sent to its acknowledgement), p50/p99/
  p99.9, split by where the mover sits: on the game's owner node, or on another node (the
  request forwarded to the owner and the acknowledgement routed back); moves/s; the
  nodes' CPU per move (all nodes together, each node, and net of what the idle nodes
  spend); ``--placement local`` seats both players on the owner's node, to compare;
- kill: every ``--every`` seconds one node is killed (-9) and a new one started in its
  place; its clients reconnect to another node and resume. For each kill, the time from
  the kill to the first acknowledged move of each game the dead node owned (median and
  worst over its games); at the end every acknowledged move is looked up in the database.

    python bench/load.py throughput --nodes 2 --db postgresql://postgres@127.0.0.1/test \\
        --bus redis://127.0.0.1:6379/0 --games 100 --rate 1000 --duration 10
    python bench/load.py kill --nodes 2 --db postgresql://postgres@127.0.0.1/test \\
        --bus redis://127.0.0.1:6379/0 --games 20 --kills 20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import asyncpg
import msgpack

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for _path in (str(ROOT), str(BENCH)):  # run as `python bench/cluster.py` from anywhere
    if _path not in sys.path:
        sys.path.insert(0, _path)

from arguments import count, non_negative_float, positive_float, positive_int  # noqa: E402
from load import WebSocketLink, _load_average, _pack  # noqa: E402

from protocol import OLDEST_PROTOCOL_VERSION, CreateGame, GetGame, JoinGame, Message, Move, Resume  # noqa: E402
from server.shards import shard_of  # noqa: E402

# Issue 13's target: a forwarded human move's round trip at 1,000 moves/s offered.
TARGET_FORWARDED_P99_MS = 5.0

CELLS = {"tictactoe": 9, "5x5": 25, "gomoku": 225}
# Every scripted player comes from 127.0.0.1 and moves as fast as it is told: the caps per
# address and per connection are lifted, as bench/load.py does (their tests prove them).
LIFTED = [
    "--max-connections", "20000", "--max-per-ip", "20000", "--max-handshakes-per-ip", "20000",
    "--rate", "100000", "--burst", "100000", "--new-sessions-per-ip", "1000000",
    "--new-sessions-burst-per-ip", "20000", "--max-games-per-ip", "20000",
]  # fmt: skip


def _process_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
    except OSError:
        return 0.0
    utime, stime = fields.split()[11:13]
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


LOOK_UP_S = 60.0  # a failover takes 1 to 2 s; an owner missing this long is a failure
UNANSWERED: list[str] = []  # requests no node answered within 15 s (then sent again)


class RequestFailed(Exception):
    """The server answered a request with an ``error`` frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ConnectionLost(Exception):
    """The connection closed while a request waited for its reply."""


UNREACHABLE = (OSError, TimeoutError, ConnectionError)


class Reply(SimpleNamespace):
    """A reply's fields as attributes (``TYPE``: its wire type), as the client's messages;
    a field the server left out (an optional one) reads as None."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class LeanConnection:
    """A scripted player's connection: bench/load.py's WebSocketLink (a minimal RFC 6455
    client on asyncio.Protocol), requests matched to replies by ``rid``, every other frame
    (game events) dropped unread: the players must cost less than the nodes they measure,
    on the same two cores."""

    def __init__(self) -> None:
        self.link: WebSocketLink | None = None
        self.session: str | None = None
        self.rids = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}

    @classmethod
    async def connect(cls, url: str, *, name: str, session: str | None) -> LeanConnection:
        self = cls()
        host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
        self.link = await WebSocketLink.connect(host, int(port), self._on_frame, self._on_lost)
        # The oldest version: nothing newer is used (seq), and an older tree's nodes
        # (--server-tree) accept it.
        hello: dict[str, Any] = {
            "type": "hello", "version": OLDEST_PROTOCOL_VERSION, "name": name,
            "client": "noughts-bench",
        }  # fmt: skip
        if session is not None:
            hello["session"] = session
        try:
            welcome = await asyncio.wait_for(self._send(hello), 15)
        except BaseException:
            self.link.abort()
            raise
        self.session = welcome["session"]
        return self

    def _send(self, body: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        self.rids += 1
        body["rid"] = self.rids
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self.link is None or self.link.closed:
            future.set_exception(ConnectionLost("not connected"))
            return future
        self.pending[self.rids] = future
        self.link.send(_pack(body))
        return future

    async def request(self, kind: type[Message], timeout: float, **fields: Any) -> Reply:
        """Send a request; its reply, or RequestFailed (an ``error``), ConnectionLost, or
        TimeoutError after ``timeout`` seconds (waiting on the future itself: no task)."""
        reply = await asyncio.wait_for(self._send({"type": kind.TYPE, **fields}), timeout)
        if reply["type"] == "error":
            raise RequestFailed(reply.get("code", "?"), reply.get("message", ""))
        return Reply(TYPE=reply["type"], **{k: v for k, v in reply.items() if k != "type"})

    def _on_frame(self, frame: bytes) -> None:
        # Most frames are events, without a rid: not decoded (a frame whose bytes hold
        # "rid" elsewhere, a name say, is decoded and then dropped).
        if b"\xa3rid" not in frame:
            return
        message = msgpack.unpackb(frame, raw=False)
        rid = message.get("rid")
        if rid is None:
            return
        future = self.pending.pop(rid, None)
        if future is not None and not future.done():
            future.set_result(message)

    def _on_lost(self, link: WebSocketLink) -> None:
        for future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionLost("connection lost"))
        self.pending.clear()

    async def close(self) -> None:
        if self.link is not None:
            self.link.close()


@dataclass
class Node:
    index: int
    name: str
    process: asyncio.subprocess.Process
    url: str
    cpu_s: float = 0.0  # CPU of the processes of this slot that ended (killed)


@dataclass
class Bench:
    db: str  # with its own search_path
    schema: str
    bus: str
    prefix: str
    log_dir: Path
    log_level: str = "WARNING"
    server_tree: Path = ROOT  # the source tree the nodes run (--server-tree)
    nodes: list[Node] = field(default_factory=list)
    started = 0

    async def start_node(self, index: int) -> Node:
        self.started += 1
        name = f"bench{index}-{self.started}-{self.prefix}"
        log = (self.log_dir / f"{name}.log").open("wb")
        # Each node in a session of its own, as bench/load.py starts its server: with Linux's
        # autogroup scheduling a session shares the CPU with the machine's other sessions as
        # one, and the nodes and the players sharing the bench's would measure that share.
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOUGHTS_")}
        profile = os.environ.get("NOUGHTS_LOAD_PROFILE")  # as bench/load.py: cProfile
        process = await asyncio.create_subprocess_exec(
            sys.executable, *(["-m", "cProfile", "-o", f"{profile}.{name}"] if profile else []),
            "-m", "server", "--port", "0", "--workers", "0",
            "--db", self.db, "--bus", self.bus, "--bus-prefix", self.prefix, "--node", name,
            "--log-level", self.log_level, *LIFTED,
            stdout=asyncio.subprocess.PIPE, stderr=log, env=env, cwd=self.server_tree,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        if not line.startswith("noughts server listening on "):
            raise RuntimeError(f"node {name} did not start: {line!r}")
        node = Node(index, name, process, line.split()[4])
        if index < len(self.nodes):
            node.cpu_s = self.nodes[index].cpu_s
            self.nodes[index] = node
        else:
            self.nodes.append(node)
        return node

    def alive(self) -> list[Node]:
        return [n for n in self.nodes if n.process.returncode is None]

    async def owners(self) -> dict[int, str]:
        """shard -> the node whose lock holds it (PostgreSQL's view)."""
        conn = await asyncpg.connect(self.db)
        try:
            rows = await conn.fetch(
                "SELECT l.objid::bigint, a.application_name FROM pg_locks l "
                "JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' "
                "AND l.objsubid = 2 AND l.granted AND l.classid = "
                "(hashtext('noughts-shards:' || current_schema()) & 2147483647)::bigint::oid"
            )
        finally:
            await conn.close()
        return {int(r[0]): str(r[1]).split()[1] for r in rows}

    async def wait_balanced(self, timeout: float = 30) -> None:
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            owners = await self.owners()
            names = {n.name for n in self.alive()}
            if len(owners) == 64 and names <= set(owners.values()):
                return
            await asyncio.sleep(0.05)
        raise TimeoutError("the nodes did not share the shards in time")

    def cpu_by_node(self) -> list[float]:
        """CPU seconds of each node slot (the processes killed in it included)."""
        return [n.cpu_s + _process_cpu_s(n.process.pid) for n in self.nodes]


@dataclass
class Tally:
    local: list[float] = field(default_factory=list)  # ms, mover on the owner node
    forwarded: list[float] = field(default_factory=list)  # ms, mover on another node
    acknowledged: list[tuple[str, int, int]] = field(default_factory=list)
    unavailable: int = 0
    errors: list[str] = field(default_factory=list)
    games: int = 0
    resumed: int = 0
    resynced: int = 0  # moves whose fate a failover hid, looked up in the record
    first_move_after: dict[str, float] = field(default_factory=dict)  # game -> ack time
    current: dict[int, str] = field(default_factory=dict)  # pair -> its game in play
    players: dict[int, tuple[Player, Player]] = field(default_factory=dict)
    stopped: dict[int, str] = field(default_factory=dict)  # pair -> the error that ended it


class Player:
    """One scripted player, on one node, reconnecting to another if that node dies."""

    def __init__(self, bench: Bench, node: int, name: str) -> None:
        self.bench = bench
        self.node = node
        self.name = name
        self.connection: LeanConnection | None = None
        self.session: str | None = None
        self.unanswered = UNANSWERED
        self.connected_to = ""  # the name of the node it is connected to
        # What it last sent and last heard (a stuck game's report): (monotonic time, what),
        # formatted only when reported (``sent``, ``heard``), not on every move.
        self.last_sent: tuple[float, str, dict[str, Any], str] = (0.0, "", {}, "")
        self.last_heard: tuple[float, Any] = (0.0, "")

    def sent(self) -> str:
        at, kind, fields, node = self.last_sent
        shown = {k: v for k, v in fields.items() if k != "token"}
        return f"{time.monotonic() - at:.1f} s ago: {kind} {shown} to {node}"

    def heard(self) -> str:
        at, what = self.last_heard
        if isinstance(what, RequestFailed):
            what = f"error {what.code}: {what.message}"
        elif isinstance(what, Exception):
            what = type(what).__name__
        return f"{time.monotonic() - at:.1f} s ago: {what}"

    async def connect(self) -> LeanConnection:
        """Connect to its node, or to another while its node is down; again until one
        answers (a node killed during the handshake cuts it: InvalidMessage)."""
        while True:
            alive = self.bench.alive()
            nodes = [n for n in alive if n.index == self.node] or alive
            try:
                self.connection = await LeanConnection.connect(
                    nodes[0].url, name=self.name, session=self.session
                )
                self.connected_to = nodes[0].name
                self.session = self.connection.session
                return self.connection
            except (*UNREACHABLE, ConnectionLost):
                await asyncio.sleep(0.05)

    @property
    def node_name(self) -> str:
        return self.connected_to if self.connection else ""

    async def request(self, kind: type[Message], resume: str | None = None, **fields: Any) -> Any:
        """A request; after a lost connection: reconnect, resume game ``resume``, send again."""
        while True:
            connection = self.connection or await self.connect()
            self.last_sent = (time.monotonic(), kind.TYPE, fields, self.connected_to)
            try:
                reply = await connection.request(kind, 15, **fields)
                self.last_heard = (time.monotonic(), reply.TYPE)
                return reply
            except RequestFailed as exc:
                self.last_heard = (time.monotonic(), exc)
                raise
            except (ConnectionLost, TimeoutError) as exc:
                self.last_heard = (time.monotonic(), exc)
                if isinstance(exc, TimeoutError):  # reported; then as a lost connection
                    game = fields.get("game_id")
                    self.unanswered.append(f"{kind.TYPE} {game} on {self.node_name}")
                with contextlib.suppress(Exception):
                    await connection.close()
                self.connection = None
                connection = await self.connect()
                if resume is not None:
                    with contextlib.suppress(RequestFailed, ConnectionLost, TimeoutError):
                        await connection.request(Resume, 15, game_id=resume, since=0)


async def look_up(
    mover: Player, tally: Tally, kind: type[Message], game_id: str, **fields: Any
) -> Any:
    """A request that says where a game stands after a failover hid a move's fate (``get``,
    ``resume``), sent again while the cluster answers ``unavailable`` (the game's owner is
    being replaced: counted, as a move's retry is) for at most LOOK_UP_S; any other error,
    or one that lasts longer, is raised: the pair stops on it and it is reported."""
    give_up = time.monotonic() + LOOK_UP_S
    while True:
        try:
            return await mover.request(kind, resume=game_id, game_id=game_id, **fields)
        except RequestFailed as exc:
            if exc.code != "unavailable" or time.monotonic() > give_up:
                raise
            tally.unavailable += 1
            await asyncio.sleep(0.05)


async def play(pair: int, players: tuple[Player, Player], tally: Tally, *args: Any) -> None:
    """``games``, its end reported: a pair whose games stopped on an error is an error."""
    try:
        await games(pair, players, tally, *args)
    except Exception as exc:
        tally.errors.append(f"pair {pair} stopped playing: {exc!r}")
        tally.stopped[pair] = repr(exc)
        print(f"pair {pair} stopped playing: {exc!r}", file=sys.stderr, flush=True)


async def games(
    pair: int,
    players: tuple[Player, Player],
    tally: Tally,
    game: str,
    interval: float,
    stop: asyncio.Event,
    owners: dict[int, str],
    rng: random.Random,
) -> None:
    """Games one after another between two players on different nodes, a move every
    ``interval`` seconds."""
    cells = CELLS[game]
    next_at = time.monotonic() + rng.random() * interval
    while not stop.is_set():
        try:
            created = await players[0].request(CreateGame, game=game, opponent="human", seat=0)
            joined = await players[1].request(JoinGame, game_id=created.game_id)
        except RequestFailed as exc:
            if exc.code == "unavailable":
                tally.unavailable += 1
                await asyncio.sleep(0.05)
                continue
            tally.errors.append(f"start: {exc.code}: {exc.message}")
            await asyncio.sleep(0.2)
            continue
        game_id = created.game_id
        tally.current[pair] = game_id
        tally.players[pair] = players
        tokens = [created.token, joined.token]
        tally.games += 1
        empty = list(range(cells))
        rng.shuffle(empty)
        ply = 0
        while empty and not stop.is_set():
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            mover = players[ply % 2]
            action = empty[-1]
            sent = time.perf_counter()
            try:
                await mover.request(
                    Move,
                    resume=game_id,
                    game_id=game_id,
                    token=tokens[ply % 2],
                    action=action,
                    ply=ply,
                )
            except RequestFailed as exc:
                if exc.code == "unavailable":
                    tally.unavailable += 1
                    continue  # sent again at the next tick
                if exc.code in ("stale_move", "not_your_turn"):
                    # A move that timed out or failed over, played after all (by then a
                    # move sent again is acknowledged again) or not: the stored record says
                    # where the game is.
                    record = await look_up(mover, tally, GetGame, game_id)
                    played = [m["action"] for m in record.game["moves"]]
                    ply = len(played)
                    empty = [c for c in empty if c not in played]
                    tally.resynced += 1
                    continue
                if exc.code == "game_over":
                    break  # a line
                if exc.code == "unknown_game":  # over and unloaded (a node restores live games)
                    record = await look_up(mover, tally, GetGame, game_id)
                    if record.game["status"] == "finished":
                        break
                if exc.code == "bad_token":  # restored elsewhere: the seat's new token
                    resumed = await look_up(mover, tally, Resume, game_id, since=0)
                    tokens[ply % 2] = resumed.token or tokens[ply % 2]
                    tally.resumed += 1
                    continue
                tally.errors.append(f"move: {exc.code}: {exc.message}")
                break
            elapsed = (time.perf_counter() - sent) * 1000
            owner = owners.get(shard_of(game_id))
            (tally.local if owner == mover.node_name else tally.forwarded).append(elapsed)
            tally.acknowledged.append((game_id, ply, action))
            tally.first_move_after.setdefault(game_id, time.monotonic())
            empty.pop()
            ply += 1


def _percentiles(samples: list[float]) -> dict[str, float | None]:
    if not samples:
        return {"n": 0, "p50": None, "p99": None, "p99.9": None}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"n": len(ordered), "p50": at(0.5), "p99": at(0.99), "p99.9": at(0.999)}


async def _lost(bench: Bench, acknowledged: list[tuple[str, int, int]]) -> int:
    conn = await asyncpg.connect(bench.db)
    try:
        rows = await conn.fetch("SELECT game_id, ply, action FROM moves")
    finally:
        await conn.close()
    stored = {(r[0], r[1]): r[2] for r in rows}
    return sum(1 for game_id, ply, action in acknowledged if stored.get((game_id, ply)) != action)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    base = args.db
    schema = f"cluster_{os.getpid()}_{secrets.token_hex(3)}"
    admin = await asyncpg.connect(base)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    db = f"{base}{'&' if '?' in base else '?'}search_path={schema}"
    log_dir = Path(f"/tmp/noughts-bench-{schema}")
    log_dir.mkdir()
    bench = Bench(db, schema, args.bus, "b" + secrets.token_hex(4), log_dir, args.log_level)
    bench.server_tree = Path(args.server_tree).resolve() if args.server_tree else ROOT
    rng = random.Random(args.seed)
    report: dict[str, Any] = {"mode": args.mode, "nodes": args.nodes, "games": args.games}
    report["server_tree"] = str(Path(args.server_tree).resolve() if args.server_tree else ROOT)
    report["load_average_before"] = _load_average()
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    try:
        for index in range(args.nodes):
            await bench.start_node(index)
        await bench.wait_balanced()
        owners = await bench.owners()
        tally = Tally()
        pairs = []
        for g in range(args.games):
            first = g % args.nodes
            second = first if args.placement == "local" else (first + 1) % args.nodes
            pairs.append((Player(bench, first, f"x{g}"), Player(bench, second, f"o{g}")))
        for x, o in pairs:
            await x.connect()
            await o.connect()
        # What the nodes spend idle (heartbeats, claims): counted apart from the moves.
        idle_before, idle_started = bench.cpu_by_node(), time.monotonic()
        await asyncio.sleep(args.idle)
        idle_s = time.monotonic() - idle_started
        idle_rate = [
            (after - before) / idle_s
            for before, after in zip(idle_before, bench.cpu_by_node(), strict=True)
        ]
        interval = args.games / args.rate
        tasks = [
            asyncio.create_task(play(i, p, tally, args.game, interval, stop, owners, rng))
            for i, p in enumerate(pairs)
        ]
        await asyncio.sleep(args.warmup)
        tally.local.clear()
        tally.forwarded.clear()
        cpu_before, moves_before = bench.cpu_by_node(), len(tally.acknowledged)
        players_before = time.process_time()  # the players run in this process
        games_before = tally.games
        started = time.monotonic()
        kills: list[dict[str, Any]] = []
        if args.mode == "kill":
            for _ in range(args.kills):
                await asyncio.sleep(args.every)
                kills.append(await _kill_one(bench, tally, rng, owners))
        else:
            await asyncio.sleep(args.duration)
        elapsed = time.monotonic() - started
        moves = len(tally.acknowledged) - moves_before
        cpu_nodes = [
            after - before for before, after in zip(cpu_before, bench.cpu_by_node(), strict=True)
        ]
        cpu = sum(cpu_nodes)
        players_cpu = time.process_time() - players_before
        cpu_net = cpu - sum(idle_rate) * elapsed
        stop.set()
        await asyncio.wait(tasks, timeout=10)
        report.update(
            offered_moves_per_s=args.rate,
            moves_per_s=round(moves / elapsed, 1),
            games_started_per_s=round((tally.games - games_before) / elapsed, 1),
            placement=args.placement,
            cpu_us_per_move_all_nodes=round(cpu / max(1, moves) * 1e6, 1),
            cpu_us_per_move_net_of_idle=round(cpu_net / max(1, moves) * 1e6, 1),
            cpu_us_per_move_by_node=[round(c / max(1, moves) * 1e6, 1) for c in cpu_nodes],
            idle_cpu_percent_by_node=[round(r * 100, 2) for r in idle_rate],
            move_ms_owner_node=_percentiles(tally.local),
            move_ms_forwarded=_percentiles(tally.forwarded),
            target_forwarded_p99_ms=TARGET_FORWARDED_P99_MS,
            players_cpu_us_per_move=round(players_cpu / max(1, moves) * 1e6, 1),
            load_average_after=_load_average(),
            unavailable_retries=tally.unavailable,
            resynced_after_failover=tally.resynced,
            errors=tally.errors[:20],
            error_count=len(tally.errors) + len(UNANSWERED),
            unanswered=UNANSWERED[:20],
        )
        if kills:
            worst = [k["worst_s"] for k in kills if k["worst_s"] is not None]
            medians = [k["median_s"] for k in kills if k["median_s"] is not None]
            report["kills"] = kills
            report["kill_to_playable_s"] = {
                "median_of_medians": round(statistics.median(medians), 3) if medians else None,
                "median_of_worst": round(statistics.median(worst), 3) if worst else None,
                "worst": round(max(worst), 3) if worst else None,
            }
        report["acknowledged_moves"] = len(tally.acknowledged)
        report["lost_acknowledged_moves"] = await _lost(bench, tally.acknowledged)
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for node in bench.nodes:
            if node.process.returncode is None:
                node.process.send_signal(signal.SIGTERM)
        for node in bench.nodes:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(node.process.wait(), 20)
            if node.process.returncode is None:
                node.process.kill()
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()
        report["logs"] = str(log_dir)
    return report


async def _kill_one(
    bench: Bench, tally: Tally, rng: random.Random, owners: dict[int, str]
) -> dict[str, Any]:
    """kill -9 one node, start another in its place; how long its games took to move."""
    victim = rng.choice(bench.alive())
    shards = {s for s, n in owners.items() if n == victim.name}
    affected = {g for g in tally.current.values() if shard_of(g) in shards}
    for game_id in affected:
        tally.first_move_after.pop(game_id, None)
    victim.cpu_s += _process_cpu_s(victim.process.pid)  # its slot keeps what it spent
    killed_at = time.monotonic()
    victim.process.send_signal(signal.SIGKILL)
    await victim.process.wait()
    await bench.start_node(victim.index)
    deadline = time.monotonic() + 30

    def waiting() -> set[str]:  # its games in play that have not moved since
        current = set(tally.current.values())
        return {g for g in affected if g not in tally.first_move_after and g in current}

    while time.monotonic() < deadline and waiting():
        await asyncio.sleep(0.02)
    waits = [tally.first_move_after[g] - killed_at for g in affected if g in tally.first_move_after]
    stuck = sorted(waiting())
    await bench.wait_balanced()
    owners.clear()
    owners.update(await bench.owners())
    report: dict[str, Any] = {}
    if stuck:  # its games that did not move: what their players last sent and heard
        report["stuck"] = {
            game_id: {
                "owner": owners.get(shard_of(game_id)),
                "stopped": [tally.stopped.get(p) for p, g in tally.current.items() if g == game_id],
                **{
                    player.name: {
                        "node": player.node_name,
                        "sent": player.sent(),
                        "heard": player.heard(),
                    }
                    for pair, game in tally.current.items()
                    if game == game_id
                    for player in tally.players[pair]
                },
            }
            for game_id in stuck
        }
    return report | {
        "node": victim.name,
        "games": len(affected),
        "playable": len(waits),
        "ended": len(affected) - len(waits) - len(waiting()),  # over before moving again
        "median_s": round(statistics.median(waits), 3) if waits else None,
        "worst_s": round(max(waits), 3) if waits else None,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/load.py {throughput,kill} --nodes N",
        description="The cluster's figures: N nodes on one PostgreSQL and one Redis, each "
        "game's players on different nodes.",
    )
    parser.add_argument("mode", choices=["throughput", "kill"])
    parser.add_argument("--nodes", type=positive_int, default=2, help="nodes to start (default: 2)")
    parser.add_argument("--db", required=True, help="postgresql://... (a fresh schema is used)")
    parser.add_argument("--bus", required=True, help="redis://HOST:PORT/N (a fresh prefix)")
    parser.add_argument(
        "--games", type=positive_int, default=100, help="games at once (default: 100)"
    )
    parser.add_argument(
        "--rate", type=positive_float, default=1000.0, help="moves/s offered in all (default: 1000)"
    )
    parser.add_argument(
        "--duration", type=positive_float, default=10.0, help="seconds (throughput)"
    )
    parser.add_argument(
        "--warmup", type=non_negative_float, default=2.0, help="seconds not counted"
    )
    parser.add_argument("--kills", type=count, default=20, help="nodes killed (kill mode)")
    parser.add_argument("--every", type=positive_float, default=3.0, help="seconds between kills")
    parser.add_argument(
        "--placement",
        choices=["split", "local"],
        default="split",
        help="split: each game's players on two nodes (half the moves forwarded); local: "
        "both on the game's owner node (none forwarded), to compare CPU per move",
    )
    parser.add_argument(
        "--idle",
        type=non_negative_float,
        default=2.0,
        help="seconds the idle nodes' CPU is measured",
    )
    parser.add_argument("--game", default="gomoku", choices=sorted(CELLS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING"],
        help="the nodes' log level (their logs: the directory reported as logs)",
    )
    parser.add_argument(
        "--server-tree",
        help="run the nodes from this source tree (another checkout, to compare two versions "
        "under the same players and interpreter; default: this one)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.nodes < 2:
        print("--nodes: at least 2 (one node: the other modes of bench/load.py)", file=sys.stderr)
        return 2
    report = asyncio.run(run(args))
    report["ok"] = report["lost_acknowledged_moves"] == 0 and report["error_count"] == 0
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            if key != "kills":
                print(f"{key}: {value}")
        for kill in report.get("kills", ()):
            print(f"  kill {kill}")
    return 0 if report["ok"] else 1

"""AI searches on a Redis Streams work queue, for engine workers on any machine.

The server side (``RemoteEngine``) and the worker side (``server.engine_worker``, the
``noughts engine-worker`` command) share this module's names and encoding, as
Lichess's fishnet clients share its job API:

- Jobs go to one stream, ``<prefix>:engine:jobs``, read by the consumer group
  ``workers``: each job reaches one worker, and stays in the group's pending list
  until that worker acknowledges it (Redis Streams consumer groups).
- Each worker holds a heartbeat key ``<prefix>:engine:worker:<name>`` that expires
  unless renewed; while it searches, the key's lifetime covers the search's budget.
  A worker whose key has expired is dead: any worker claims its pending jobs
  (XCLAIM) and runs them again with what is left of their budget (the time a job
  has been pending is the time the dead worker spent on it).
- Results go to the asking node's reply stream, ``<prefix>:engine:replies:<node>``,
  which only that node reads.

The node counts the live heartbeat keys every ``COUNT_S`` (``alive``, for the admin
port's readiness and metrics): with none, a new game against the AI is refused at once,
as it is when a server's own engine workers are all down, rather than started to end
without a move.

The stream serves its jobs in the order they come, so the node keeps its searches waiting
by itself and puts one on the stream only while fewer of its jobs are unanswered than
workers are alive (at least one), the next in the turn order of the server's own pool
(server/turns.py: addresses, then their players, in turn, each player with at most
``ai_running_per_player`` jobs unanswered): one address's many sessions take one turn
among the others' instead of a place each ahead of them. A job's budget starts when a
worker starts it: time spent waiting at the node or in the stream is nobody's budget, nor
its deadline's: a search that no worker answers within its budget plus ``REPLY_GRACE_S``
(the server: ``engine_wait_s``) of a worker taking it, or while no worker is alive, fails
with ``engine_unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import asdict
from typing import Any

import msgpack
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from engine.result import SearchResult
from server.bus import redis_client, reraise_cancel
from server.errors import EngineUnavailable
from server.logs import RateLimitedLog
from server.pool import SearchRequest
from server.settings import ServerSettings
from server.turns import TurnOrder
from server.urls import redacted_url

log = logging.getLogger(__name__)
# The queue's failures, by cause, for the operator (clients are told only that the queue
# failed: a cause names Redis's address): a line a minute each, not one a search a second.
said = RateLimitedLog(log, period_s=60.0, burst=1)

GROUP = "workers"
HEARTBEAT_S = 5.0  # a worker renews its key this often, with twice this lifetime
REPLY_GRACE_S = 15.0  # beyond the budget: time for a dead worker's job to be re-run
RESUBMIT_S = 1.0  # while an answer is due: how often the job is checked for, and resubmitted
COUNT_S = 2.0  # how often a node counts the workers' heartbeat keys (one SCAN)
QUICK_RETRY_MS = 10.0  # a re-run whose budget is spent still searches this long
MAX_REPLIES = 10_000  # a reply stream keeps at most about this many entries
READ_BLOCK_S = 1.0  # how long the replies' reader's XREAD waits for one (then reads again)
# A node's reply stream is its own, new with it: deleted when it stops, and given this
# lifetime by each reply (a node killed leaves it behind, and a late reply may write it again).
REPLIES_TTL_S = 3600.0


def jobs_key(prefix: str) -> str:
    return f"{prefix}:engine:jobs"


def worker_key(prefix: str, name: str) -> str:
    return f"{prefix}:engine:worker:{name}"


def replies_key(prefix: str, node: str) -> str:
    return f"{prefix}:engine:replies:{node}"


def encode_request(request: SearchRequest) -> bytes:
    fields = asdict(request)
    # Not sent: the node orders its jobs itself (RemoteEngine._dispatch); and so the workers
    # of a version before it still read the request.
    del fields["address"]
    fields["actions"] = list(request.actions)
    return msgpack.packb(fields, use_bin_type=True)


def decode_request(data: bytes) -> SearchRequest:
    fields = msgpack.unpackb(data, raw=False)
    fields["actions"] = tuple(fields["actions"])
    return SearchRequest(**fields)


async def ensure_group(client: aioredis.Redis, prefix: str) -> None:
    """Create the jobs stream and its consumer group if they are not there yet."""
    with contextlib.suppress(ResponseError):  # BUSYGROUP: it exists
        await client.xgroup_create(jobs_key(prefix), GROUP, id="0", mkstream=True)


class RemoteEngine:
    """The server's side of the queue: submit searches, wait for their results.

    Offers what the game server uses of the local ``EnginePool``: ``search``,
    ``forget`` (a remote worker keeps no tree between jobs), ``alive``, ``pending``,
    ``replaced``, ``available``, ``closed``, ``searches_of`` and ``close``. ``settings``
    gives the per-player running cap (``ai_running_per_player``).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "noughts",
        node: str | None = None,
        settings: ServerSettings | None = None,
    ) -> None:
        settings = settings or ServerSettings()
        self.url = url
        self.timeout_s = settings.bus_timeout_s  # each command's, but the replies' XREAD
        self.prefix = prefix
        self.node = node or secrets.token_hex(6)
        self.replaced = 0
        self._client: aioredis.Redis | None = None
        # The replies' reader's own: its XREAD blocks READ_BLOCK_S on purpose, on top of
        # the command's time.
        self._reader_client: aioredis.Redis | None = None
        self._jobs: dict[str, _Job] = {}  # the jobs waiting at the node or unanswered, by id
        self._turns: TurnOrder[_Job] = TurnOrder(settings.ai_running_per_player)
        self._reader: asyncio.Task[None] | None = None
        self._counter: asyncio.Task[None] | None = None
        self._closing = False
        self._alive = 0

    @property
    def pending(self) -> int:
        """Searches waiting at the node, or on the stream and unanswered."""
        return len(self._jobs)

    @property
    def alive(self) -> int:
        """Workers whose heartbeat was seen at the last check (``refresh``)."""
        return self._alive

    async def start(self) -> None:
        self._client = redis_client(self.url, timeout_s=self.timeout_s)
        self._reader_client = redis_client(self.url, timeout_s=self.timeout_s + READ_BLOCK_S)
        try:
            await ensure_group(self._client, self.prefix)
            await self.refresh()
        except (RedisError, OSError) as exc:
            await self.close()
            raise EngineUnavailable(
                f"cannot reach the engine queue at {redacted_url(self.url)}: {exc}"
            ) from exc
        self._reader = asyncio.create_task(self._read_replies(), name="engine-replies")
        self._counter = asyncio.create_task(self._count_workers(), name="engine-workers")

    async def refresh(self) -> int:
        """Count the workers whose heartbeat key is alive (more: more jobs go out)."""
        assert self._client is not None
        count = 0
        async for _ in self._client.scan_iter(match=worker_key(self.prefix, "*"), count=100):
            count += 1
        self._alive = count
        self._dispatch()
        return count

    async def _count_workers(self) -> None:
        """``refresh`` every COUNT_S; the queue out of reach counts no worker."""
        reachable = True
        while True:
            await asyncio.sleep(COUNT_S)
            try:
                await self.refresh()
            except (RedisError, OSError) as exc:
                self._alive = 0
                if reachable:
                    log.warning("cannot count the engine workers: %s", exc)
                reachable = False
            else:
                reachable = True

    async def close(self) -> None:
        self._closing = True
        for task in (self._reader, self._counter):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._reader = self._counter = None
        for job in self._jobs.values():
            job.answer(EngineUnavailable("the engine queue is closed"))
            if job.timer is not None:
                job.timer.cancel()
        self._jobs.clear()
        if self._client is not None:
            with contextlib.suppress(RedisError, OSError):
                await self._client.delete(replies_key(self.prefix, self.node))
        for client in (self._client, self._reader_client):
            if client is not None:
                await client.aclose()
        self._client = self._reader_client = None

    def forget(self, game_key: str) -> None:
        """Nothing to drop: a remote worker keeps no search tree between jobs."""

    @property
    def available(self) -> bool:
        """A worker's heartbeat was seen at the last count, and the queue runs (a job no
        worker answers fails in time all the same)."""
        return self._client is not None and self._alive > 0

    # Why not ``available``: no worker serves the queue.
    unavailable = "no engine worker serves this server's queue (noughts engine-worker): retry soon"

    @property
    def closed(self) -> bool:
        return self._client is None

    def searches_of(self, owner: str) -> int:
        """Searches run for ``owner`` that are waiting for their answer."""
        return self._turns.held(owner)

    async def search(self, request: SearchRequest, *, wait_s: float | None = None) -> SearchResult:
        """Queue one search; EngineUnavailable if no worker answers within its budget plus
        ``wait_s`` (default REPLY_GRACE_S) of a worker taking it, or of its submission
        while no worker is alive: waiting at the node or in the stream behind live workers
        counts for nothing.

        It waits at the node for its turn (``_dispatch``). Redis may lose the job
        (restarted without its data, or down for a moment): while the answer is due, the
        job is submitted again whenever it is no longer in the stream, and a failed
        submission is retried every ``RESUBMIT_S``. An answer that comes twice is taken
        once. Cancelled, a search waiting at the node is forgotten; one on the stream keeps
        its place (a worker may be running it) until its answer or its deadline."""
        if self._client is None:
            raise EngineUnavailable("the engine queue is not running")
        client = self._client
        job_id = secrets.token_hex(8)
        loop = asyncio.get_running_loop()
        job = self._jobs[job_id] = _Job(request)
        budget_s = (request.budget_ms or 1000.0) / 1000
        total_s = budget_s + (REPLY_GRACE_S if wait_s is None else wait_s)
        deadline = loop.time() + total_s
        self._turns.join(job)
        self._dispatch()
        stream = jobs_key(self.prefix)
        fields: dict[Any, Any] = {
            "job": job_id,
            "reply": replies_key(self.prefix, self.node),
            "request": encode_request(request),
        }
        entry: Any = None  # the job's id in the stream, once submitted
        taken = False  # a worker has it (in the group's pending list)
        sent = False  # it was put on the stream, or may have been
        # Checked every RESUBMIT_S while no worker has it; once one has, the first wait
        # covers the search.
        wait = RESUBMIT_S
        failure = ""
        try:
            while True:
                if not job.started and self._alive > 0:
                    # Waiting at the node behind live workers' searches: its time has not
                    # started (as in the server's own pool).
                    deadline = loop.time() + total_s
                left = deadline - loop.time()
                if left <= 0:
                    why = f" ({failure})" if failure else ""
                    raise EngineUnavailable(f"no engine worker answered within {total_s:g} s{why}")
                if job.started:  # (until then, its turn wakes it: ``_dispatch``)
                    try:
                        if entry is None or not await client.xrange(stream, entry, entry):
                            if entry is not None:
                                log.warning(
                                    "engine job %s was lost by the queue: submitting it", job_id
                                )
                            sent = True
                            entry = await client.xadd(stream, fields)
                            taken, wait = False, RESUBMIT_S
                        elif not taken:
                            pending = await client.xpending_range(
                                stream, GROUP, min=entry, max=entry, count=1
                            )
                            if pending:  # a worker started it about now: its time starts
                                taken, deadline = True, loop.time() + total_s
                                wait = budget_s + RESUBMIT_S
                            elif self._alive > 0:
                                # Queued behind live workers' searches: its time has not started
                                # (as in the server's own pool).
                                deadline = loop.time() + total_s
                    except (RedisError, OSError) as exc:
                        said.log(
                            logging.WARNING, type(exc).__name__, "the engine queue failed: %s", exc
                        )
                        failure, entry, wait = "the engine queue failed", None, RESUBMIT_S
                answer = await job.wait(min(wait, left))
                if answer is not None:
                    if isinstance(answer, EngineUnavailable):
                        raise answer
                    return answer
                wait = RESUBMIT_S  # then: is the job still queued or running? every second
        except asyncio.CancelledError:
            if sent and job.result is None:
                # Nobody waits for its answer, but a worker may be running it: it holds its
                # place until then (``_settle``), or its deadline.
                job.timer = loop.call_later(max(0.0, deadline - loop.time()), self._done, job_id)
            raise
        finally:
            if job.timer is None:
                self._done(job_id)

    def _dispatch(self) -> None:
        """Put waiting searches on the stream (their ``search`` does), in their turn order
        (server/turns.py), while fewer of this node's are unanswered than workers are alive:
        a job put on the stream finds a worker free (if no other node's are ahead of it), so
        the next is chosen when a worker is free, as the server's own pool chooses. One
        goes while none is alive, to be told within its deadline that none answers."""
        while not self._closing and self._turns.running < max(1, self._alive):
            job = self._turns.next()
            if job is None:
                return
            self._turns.begin(job)
            job.start()

    def _done(self, job_id: str) -> None:
        """A search is over (answered, failed or given up): it frees its place."""
        job = self._jobs.pop(job_id, None)
        if job is None:
            return
        if job.timer is not None:
            job.timer.cancel()
        if job.started:
            self._turns.end(job)
            self._turns.release(job)
        else:
            self._turns.withdraw(job)
        self._dispatch()

    async def _read_replies(self) -> None:
        client = self._reader_client
        assert client is not None
        stream = replies_key(self.prefix, self.node)
        last = "0"  # the stream is this node's own, new with it: read it all
        # Until closed: redis-py's retry may swallow a cancel that lands in a blocking read
        # on a connection Redis dropped; the next XREAD then ends the loop within its block.
        while not self._closing:
            try:
                replies: Any = await client.xread(
                    {stream: last}, block=int(READ_BLOCK_S * 1000), count=100
                )
            except (RedisError, OSError) as exc:
                reraise_cancel(exc)
                log.warning("reading engine replies failed: %s; retrying", exc)
                await asyncio.sleep(1.0)
                continue
            for _, entries in replies:
                for entry_id, fields in entries:
                    last = entry_id
                    self._settle(fields)
            # Let the searches just answered run on before the next XREAD is written: that
            # write wakes Redis, which on a busy machine may take this process's core.
            await asyncio.sleep(0)

    def _settle(self, fields: dict[bytes, bytes]) -> None:
        job_id = fields[b"job"].decode()
        job = self._jobs.get(job_id)
        if job is None:
            return  # a late answer: its search has given up, or was answered already
        if job.timer is not None:  # its search was cancelled: nobody reads the answer
            self._done(job_id)
            return
        reply = msgpack.unpackb(fields[b"reply"], raw=False)
        if reply.get("error"):
            job.answer(EngineUnavailable(f"search failed: {reply['error']}"))
        else:
            job.answer(SearchResult.from_dict(reply["result"]))


class _Job:
    """A search's turn and answer, and the future its ``search`` sleeps on. The first
    answer is kept (a re-run of a job already answered answers twice). Waiting costs one
    wake-up of the search's task: ``wait`` awaits its own future, which its turn, an
    answer or a timer completes (``asyncio.wait_for`` on a shielded future would be
    three)."""

    __slots__ = ("request", "started", "timer", "result", "_wake")

    def __init__(self, request: SearchRequest) -> None:
        self.request = request
        self.started = False  # its turn came: it goes on the stream (``_dispatch``)
        self.timer: asyncio.TimerHandle | None = None  # cancelled on the stream: its end
        self.result: SearchResult | EngineUnavailable | None = None
        self._wake: asyncio.Future[None] | None = None

    @property
    def owner(self) -> str | None:
        return self.request.owner  # the player it runs for

    @property
    def address(self) -> str | None:
        return self.request.address

    def start(self) -> None:
        self.started = True
        self._wake_up()

    def answer(self, result: SearchResult | EngineUnavailable) -> None:
        if self.result is None:
            self.result = result
            self._wake_up()

    def _wake_up(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def wait(self, timeout_s: float) -> SearchResult | EngineUnavailable | None:
        """The answer, once there; None if none came within ``timeout_s``."""
        if self.result is None:
            loop = asyncio.get_running_loop()
            wake = self._wake = loop.create_future()
            timer = loop.call_later(timeout_s, _wake_up, wake)
            try:
                await wake
            finally:
                timer.cancel()
                self._wake = None
        return self.result


def _wake_up(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

"""A small API for bots: connect, get called on your turn, return a move.

    import asyncio, random
    from client.bot import Bot
    from client.sessions import SessionStore

    def on_turn(turn):
        return random.choice(turn.state.legal_actions())

    bot = Bot("ws://127.0.0.1:8765", on_turn, name="randy", sessions=SessionStore.default())
    asyncio.run(bot.play(games=3, seek="tictactoe"))

A bot posts seeks (``seek=``) or accepts them from the lobby (``accept="seeks"``, or
only those addressed to it: ``accept="challenges"``), plays up to ``concurrency`` games at
once (lichess-bot's ``concurrency``; 1 by default; the seeks it has no room for, those open
when it connects included, wait their turn, oldest first), and stops after ``games`` games
(or runs until cancelled; ``stop()`` ends its games in play, then its run). Its connection
reconnects by itself, resumes the games it was playing and posts its seek again. If the
opponent leaves and does not come back within the server's grace period, the bot claims
the game (aborts it, before both sides have moved). An opponent's rematch offer, while the
bot has a game to spare and room for it, is accepted (lichess-bot takes a rematch as any
challenge), else declined; the rematch counts among ``games``. An opponent's draw offer is
answered at once: by ``on_draw`` (``engine_draw``: the local engine's judgement), else
declined.

One connection carries every game: a router hands each game's events to its own queue,
and the events of no game in play (a rematch offer after a game) to the bot's.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import engine
from client.connection import ConnectionLost, RequestFailed, ServerConnection
from client.game_view import GameDataError, GameModel
from client.session_core import SeekReposted
from client.sessions import SessionStore, connect_with_session
from engine.time_control import TimeControl
from engine.worker import stopping_clock
from protocol import (
    Abort,
    AcceptSeek,
    CancelSeek,
    Claim,
    DeclineSeek,
    Draw,
    Ended,
    Error,
    ErrorCode,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
    Message,
    Move,
    Offer,
    Rematch,
    Resign,
    Resume,
    Seek,
    Snapshot,
)

log = logging.getLogger(__name__)

CLAIM_MARGIN_S = 0.5
# A search under a clock leaves this much more of it for the move's round trip to the server
# and the bot's own part of the move (the clocks are read when an event arrives, after the
# server sent it). A fixed margin: the bot measures no round trip, and a ping's would leave
# out its own part (its searches hold the GIL). Each side's first move has the snapshot's
# first_move_ms from when its turn began, its clock not yet running (PROTOCOL.md, Clocks);
# FIRST_MOVE_MS, the server's default, if a snapshot does not say; after a resume, the
# snapshot's first_move_left_ms from when it came.
ROUND_TRIP_MS = 200.0
FIRST_MOVE_MS = 30_000
MAX_BACKLOG = 256  # open seeks kept for when a slot frees (the server sends two pages at most)
# The games this run finished kept for their rematch offers: the last so many (the server
# keeps a finished game 10 minutes; a bot running for days finishes thousands).
MAX_FINISHED = 1024
# An error the server pushes (no request got it) is logged in one line; the same code again
# within this long is only counted, the count logged with the next one said.
ERROR_REPEAT_S = 60.0
MAX_ERROR_CODES = 64  # codes counted at once (a hostile server's made-up codes stay bounded)
# The local engine's searches (``engine_player``, ``engine_draw``) take turns: a Searcher is
# not shared between threads, and its numba kernels hold the GIL all the same. Games played
# at once each keep their budget; a move may wait for another game's search.
SEARCHING = threading.Lock()


@dataclass(slots=True)
class Turn:
    """What a bot sees when it must move: the position (its own copy) and the game."""

    game_id: str
    seat: int
    state: engine.State
    players: list[dict[str, Any] | None]
    clocks: list[int] | None = None  # ms left per seat when the turn began, if timed
    control: dict[str, int] = field(default_factory=dict)  # the time control (protocol's map)
    began: float = field(default_factory=time.monotonic)  # when the turn began (monotonic)
    first_move_ms: int = FIRST_MOVE_MS  # each side's first move's time (the snapshot's)
    # Set when the bot stops (``Bot.stop``): a handler still searching ends its search now
    # (its move is not played: the game is being ended), as ``engine_player`` does.
    stopped: threading.Event = field(default_factory=threading.Event)

    def budget_ms(self, wanted_ms: float, now: float) -> float:
        """A search's time for this move at ``now`` (``time.monotonic``): ``wanted_ms``,
        capped in a game with a clock by the rule of engine.time_control, on the server's
        clocks (PROTOCOL.md, Clocks): each side's first move is a turn of ``first_move_ms``
        whatever the control, its clock not running; then a fixed time per move is a turn
        of what is left of it; Fischer spends what is left over the moves expected still to
        play, plus the increment. A search takes 90% of a turn; each budget is less a margin
        for the round trip, so that the bot never loses on time while it has a move to play
        (lichess-bot's way)."""
        if not self.control or self.clocks is None or self.seat not in (0, 1):
            return wanted_ms
        spent = int((now - self.began) * 1000)
        ply = self.state.ply()
        if ply < 2:  # our first move: the clock starts after it
            timing = TimeControl(self.first_move_ms - spent, 0)
        elif "move_ms" in self.control:
            timing = TimeControl(self.clocks[self.seat] - spent, 0)
        else:
            timing = TimeControl(
                0,
                self.control.get("initial_ms", 0),
                self.clocks[self.seat] - spent,
                self.control.get("increment_ms", 0),
            )
        timing.overhead_ms = ROUND_TRIP_MS
        return min(wanted_ms, timing.budget_ms(ply))


@dataclass(slots=True)
class GameResult:
    game_id: str
    seat: int
    result: str
    reason: str
    winner: int | None
    plies: int
    opponent: str

    @property
    def outcome(self) -> str:
        if self.result == "*":
            return "aborted"
        if self.winner is None:
            return "draw"
        return "win" if self.winner == self.seat else "loss"


TurnHandler = Callable[[Turn], int | Awaitable[int]]
DrawHandler = Callable[[Turn], bool | Awaitable[bool]]


async def _called(handler: Callable[[Turn], Any], turn: Turn) -> Any:
    """A bot's handler: a coroutine awaited, a plain function run in a thread (a long
    search never stalls the connection)."""
    if inspect.iscoroutinefunction(handler):
        answer = await handler(turn)
    else:
        answer = await asyncio.to_thread(handler, turn)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


@dataclass(slots=True)
class ServerErrors:
    """The server's errors no request of the bot got (a game that waits for its database,
    an AI that could not move, a quick pairing refused, a frame it could not read), each
    logged in one line, as the other clients show them; the same code again within
    ``repeat_s`` only counted, the count logged with the next one said (a database down
    for an hour is said once a minute, not once per event of each game)."""

    repeat_s: float = ERROR_REPEAT_S
    # code -> (when it was last said, how many of it were held back since)
    _said: dict[str, tuple[float, int]] = field(default_factory=dict)

    def tell(self, error: Error, now: float) -> None:
        said = self._said.get(error.code)
        if said is not None and now - said[0] < self.repeat_s:
            self._said[error.code] = (said[0], said[1] + 1)
            return
        if said is None and len(self._said) >= MAX_ERROR_CODES:
            self.flush()
        named = error.game_id and error.game_id not in error.message
        where = f"game {error.game_id}: " if named else ""
        held = f" ({said[1]} more held back)" if said is not None and said[1] else ""
        text = " ".join(f"{where}{error.message}".split())  # one line, whatever it holds
        log.warning("server error %s: %s%s", error.code, text, held)
        self._said[error.code] = (now, 0)

    def flush(self) -> None:
        """Log the counts held back, and forget them."""
        for code, (_, held) in self._said.items():
            if held:
                log.warning("server error %s: %d more held back", code, held)
        self._said.clear()


@dataclass
class Bot:
    """A bot account on a server; ``on_turn`` chooses its moves (a plain function runs
    in a thread, so a long search never stalls the connection; a coroutine is awaited).

    ``sessions`` keeps the bot's session between runs (client/sessions.py), as `noughts
    bot` does: the server binds a name to the session that first used it, so a bot run
    again under its name needs that session. Without it each run is a new player, and a
    name an earlier run took is refused (``name_taken``)."""

    url: str
    on_turn: TurnHandler
    name: str = "bot"
    reconnect: bool = True
    sessions: SessionStore | None = None
    on_draw: DrawHandler | None = None  # True accepts an opponent's draw offer
    # Whether it can play a game (name, params): seeks of others are left, challenges to it
    # declined, as lichess-bot declines the variants it does not play (None: every game).
    plays: Callable[[str, dict[str, int]], bool] | None = None
    connection: ServerConnection | None = field(default=None, init=False)
    # The games this run finished, and its seat in each: their rematch offers are answered.
    finished: dict[str, int] = field(default_factory=dict, init=False)
    rematches: set[str] = field(default_factory=set, init=False)  # agreed, not yet begun
    # The games in play, each with the queue of its events (``_route``); the other events.
    playing: dict[str, asyncio.Queue[Message]] = field(default_factory=dict, init=False)
    _started: asyncio.Queue[str] = field(default_factory=asyncio.Queue, init=False)
    _other: asyncio.Queue[Message] = field(default_factory=asyncio.Queue, init=False)
    _halt: asyncio.Event | None = field(default=None, init=False)  # set by ``stop``
    # Set by ``stop`` too, for the handlers' threads (each Turn of this run carries it).
    _stopped: threading.Event = field(default_factory=threading.Event, init=False)

    def stop(self) -> bool:
        """Stop this run, as lichess-bot's first Ctrl-C does but without finishing the games:
        take no new game (a seek posted is withdrawn, rematches declined) and end those in
        play, each aborted where the rules allow (PROTOCOL.md, abort: before both sides have
        moved), else resigned; ``play`` returns once they have ended. False, doing nothing,
        while the run is not playing yet (connecting, warming up its engine) or already
        stopping: nothing to end, the caller may cancel it. A search running for a turn
        is stopped too (``Turn.stopped``), not waited for."""
        if self._halt is None or self._halt.is_set():
            return False
        self._halt.set()
        self._stopped.set()
        return True

    @property
    def stopping(self) -> bool:
        return self._halt is not None and self._halt.is_set()

    async def play(
        self,
        games: int | None = None,
        *,
        seek: str | None = None,
        params: dict[str, int] | None = None,
        clock: dict[str, int] | None = None,
        accept: str | None = None,
        color: str = "random",
        concurrency: int = 1,
        on_result: Callable[[GameResult], None] | None = None,
        warm: Callable[[], Awaitable[object]] | None = None,
    ) -> list[GameResult]:
        """Play ``games`` games (None: until cancelled), up to ``concurrency`` at once,
        posting seeks (for the seat ``color``: x, o or random; one at a time, while there
        is room) or accepting them. With ``sessions``, the games an earlier run left
        unfinished come first, counted among ``games``: the server counts a returning
        player's seats as held again, so a game left aside would keep its opponent
        waiting (as lichess-bot plays its ongoing games when it starts). ``warm`` (the
        engine's warm-up) is awaited once connected, before the first game: a server that
        cannot be reached is said at once, not after it."""
        if (seek is None) == (accept is None):
            raise ValueError("a bot either posts seeks (seek=GAME) or accepts them (accept=...)")
        if accept not in (None, "seeks", "challenges"):
            raise ValueError(f"accept must be 'seeks' or 'challenges', not {accept!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be 1 or more, not {concurrency}")
        options: dict[str, Any] = {
            "name": self.name,
            "bot": True,
            "client": "noughts-bot",
            "reconnect": self.reconnect,
        }
        if self.sessions is None:
            connection = await ServerConnection.connect(self.url, **options)
        else:
            connection = await connect_with_session(self.sessions, self.url, self.url, **options)
        self.connection = connection
        if warm is not None:
            try:
                await warm()
            except BaseException:
                await connection.close()
                raise
        # This run's queues (an asyncio.Queue belongs to the loop that first waits on it: a
        # Bot may play again under another asyncio.run).
        self.playing, self._started, self._other = {}, asyncio.Queue(), asyncio.Queue()
        self.rematches = set()  # (one agreed at the end of a run before: a game resumed now)
        self._stopped = threading.Event()
        results: list[GameResult] = []
        tasks: set[asyncio.Task[GameResult]] = set()
        begun = 0  # games begun (or resumed), counted among ``games``
        posted: str | None = None  # our seek in the lobby, if any
        resumed: set[str] = set()
        accepted: set[str] = set()  # seeks we accepted whose game has not begun yet
        lobby: asyncio.Future[Message] | None = None
        notice: asyncio.Future[SeekReposted] | None = None  # our seek after a reconnection
        started: asyncio.Future[str] | None = None
        other: asyncio.Future[Message] | None = None
        router = asyncio.create_task(self._route(), name="bot-events")
        errors = ServerErrors()
        telling = asyncio.create_task(self._tell_errors(errors), name="bot-errors")

        def free() -> int:
            """Games to spare in a free slot, counting those agreed and not begun."""
            if halt.is_set():
                return 0
            coming = len(accepted) + len(self.rematches)
            slots = concurrency - len(tasks) - coming
            return slots if games is None else min(slots, games - begun - coming)

        def room() -> bool:
            return free() > 0

        # The seeks open to us, oldest first: the lobby's list when subscribed, then its news
        # (added, withdrawn or taken); a free slot takes the first (lichess-bot's queue of
        # challenges).
        backlog: list[dict[str, Any]] = []
        halt = asyncio.Event()
        halting: asyncio.Future[Any] | None = None
        ending: set[str] = set()  # games ended by ``stop``

        async def end(game_id: str) -> None:
            if game_id not in ending:
                ending.add(game_id)
                await self._end(game_id)

        try:
            if connection.welcome:
                resumed = {game["game_id"] for game in connection.welcome.games}
            for game_id in sorted(resumed):
                # From 0: a snapshot (queued as an event: it begins the game), then
                # ``resumed`` with the seat.
                try:
                    await connection.request(Resume, game_id=game_id, since=0)
                except RequestFailed as exc:  # gone meanwhile: nothing to finish
                    log.info("game %s not resumed: %s", game_id, exc.message)
            if accept is not None:
                await connection.request(LobbySubscribe)
            self._halt = halt  # (``stop`` before this: nothing to end yet)
            halting = asyncio.ensure_future(halt.wait())
            while tasks or room() or accepted or self.rematches or not self._started.empty():
                if seek is not None and posted is None and room():
                    seeking = await connection.request(
                        Seek, game=seek, params=params or {}, clock=clock or {}, color=color
                    )
                    posted = seeking.seek_id
                while backlog and room():
                    taken = await self._accept(backlog.pop(0))
                    if taken is not None and taken not in self.playing:
                        accepted.add(taken)  # (not begun yet: counted in room)
                if accept is not None and lobby is None and not halt.is_set():
                    lobby = asyncio.ensure_future(connection.lobby_events.get())
                if started is None:
                    started = asyncio.ensure_future(self._started.get())
                if other is None:
                    other = asyncio.ensure_future(self._other.get())
                if notice is None:
                    notice = asyncio.ensure_future(connection.seek_notices.get())
                waiting: set[asyncio.Future[Any]] = {started, other, notice, router, *tasks}
                if lobby is not None:
                    waiting.add(lobby)
                if halting is not None:
                    waiting.add(halting)
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if router.done():  # the connection closed for good (ConnectionLost)
                    router.result()
                for task in [t for t in tasks if t in done]:
                    tasks.discard(task)
                    results.append(task.result())
                    if on_result is not None:
                        on_result(results[-1])
                if started.done():
                    game_id, started = started.result(), None
                    begun += 1
                    tasks.add(asyncio.create_task(self._play_game(game_id)))
                    elsewhere = game_id in self.rematches or game_id in resumed
                    self.rematches.discard(game_id)
                    accepted.discard(game_id)
                    if halt.is_set():
                        await end(game_id)  # (accepted or agreed before the stop)
                    if posted is not None and not elsewhere:
                        posted = None  # our seek was accepted: this is its game
                    elif posted is not None and not room():
                        await self._cancel_seek(posted)  # a rematch (or a resumed game) came
                        posted = None
                if other.done():
                    message, other = other.result(), None
                    if isinstance(message, Offer) and not message.next_game:
                        await self._answer_rematch(message, room())
                if notice.done():
                    reposted, notice = notice.result(), None
                    if reposted.first_id == posted and reposted.error is not None:
                        # Refused again after a reconnection: posted anew (a refusal ends
                        # the run, as the first time).
                        log.warning("seek %s gone: %s", posted, reposted.error.message)
                        posted = None
                if lobby is not None and lobby.done():
                    message, lobby = lobby.result(), None
                    backlog = await self._open_seeks(
                        backlog, message, challenges_only=accept == "challenges"
                    )
                if halting is not None and halting.done():
                    halting, backlog = None, []
                    if posted is not None:
                        await self._cancel_seek(posted)  # (accepted meanwhile: ended at once)
                        posted = None
                    for game_id in list(self.playing):
                        await end(game_id)
            return results
        finally:
            self._halt = None
            for future in (lobby, notice, started, other, halting, *tasks, router, telling):
                if future is not None:
                    future.cancel()
            await connection.close()
            while not connection.errors.empty():  # (those that came last)
                errors.tell(connection.errors.get_nowait(), time.monotonic())
            errors.flush()

    # --- finding a game -------------------------------------------------------------------

    async def _route(self) -> None:
        """Hand each event to its game's queue; a game's first snapshot (ours, live, not
        finished by this run: our seek accepted, a rematch agreed, a game resumed) begins
        it. The others (a rematch offer after a game) go to the bot's own queue. A rematch
        agreed is counted among ``rematches`` here, in the order of the events: before its
        start, which may come at once (``play`` would see the start first)."""
        assert self.connection is not None
        connection = self.connection
        while True:
            message = await connection.next_event()
            game_id = getattr(message, "game_id", "")
            agreed = message.next_game if isinstance(message, Offer | Snapshot) else None
            if agreed and game_id in self.finished:
                if agreed not in self.playing:  # (a snapshot: the server's, as a follower's)
                    self.rematches.add(agreed)
            elif isinstance(message, Snapshot) and message.status != "live":
                self.rematches.discard(game_id)  # (over before it began here: none to wait for)
            if game_id in self.finished:  # (its rematch offers: not resumed after a drop)
                connection.forget(game_id)
            queue = self.playing.get(game_id)
            if (
                queue is None
                and isinstance(message, Snapshot)
                and game_id in connection.seats
                and game_id not in self.finished
                and message.status == "live"
            ):
                queue = self.playing[game_id] = asyncio.Queue()
                self._started.put_nowait(game_id)
            if queue is not None:
                queue.put_nowait(message)
            else:
                self._other.put_nowait(message)

    async def _tell_errors(self, errors: ServerErrors) -> None:
        """Log each error the server pushes (``connection.errors``, which nothing else reads:
        it would grow for as long as the bot runs)."""
        assert self.connection is not None
        while True:
            errors.tell(await self.connection.errors.get(), time.monotonic())

    async def _answer_rematch(self, offer: Offer, room: bool) -> None:
        """Answer an opponent's rematch offer in a game this run finished: accepted if
        there is ``room`` (a game to spare, a free slot), else declined (lichess-bot
        declines a challenge it has no room for, rather than keep its maker waiting)."""
        assert self.connection is not None
        seat = self.finished.get(offer.game_id)
        if offer.kind != "rematch" or offer.answer != "offer" or seat in (None, offer.seat):
            return
        answer = "accept" if room else "decline"
        try:
            await self.connection.request(Rematch, game_id=offer.game_id, answer=answer)
        except (RequestFailed, ConnectionLost) as exc:
            log.info("rematch of %s not answered (%s): %s", offer.game_id, answer, exc)

    async def _end(self, game_id: str) -> None:
        """End a game in play for ``stop``: abort it if the rules allow, else resign."""
        assert self.connection is not None
        kinds: list[type[Message]] = [Abort, Resign]
        while kinds:
            try:
                await self.connection.request(kinds[0], game_id=game_id)
                return
            except RequestFailed as exc:
                if exc.code != ErrorCode.NOT_ALLOWED:  # (over meanwhile)
                    log.info("game %s not ended: %s", game_id, exc)
                    return
                kinds.pop(0)  # both sides have moved: resign
            except ConnectionLost:
                await self.connection.resynced()  # then ask again (gone for good: raised)

    async def _cancel_seek(self, seek_id: str) -> None:
        assert self.connection is not None
        try:
            await self.connection.request(CancelSeek, seek_id=seek_id)
        except (RequestFailed, ConnectionLost) as exc:  # accepted meanwhile: that game waits
            log.info("seek %s not cancelled: %s", seek_id, exc)

    async def _open_seeks(
        self, backlog: list[dict[str, Any]], message: Message, *, challenges_only: bool
    ) -> list[dict[str, Any]]:
        """The seeks open to us (``backlog``, oldest first) once this lobby message is
        heard: a lobby_state lists them all (its challenges to us first, then the public
        seeks, each oldest first), seek_added adds one, seek_removed takes one away. Our
        own, those for humans only and, with ``challenges_only``, those not addressed to us
        are left out; a challenge to us that ``plays`` refuses is declined at once (its
        challenger is told, not left waiting)."""
        assert self.connection is not None
        me = self.connection.welcome.player_id if self.connection.welcome else None
        if isinstance(message, LobbyState):
            backlog, added = [], list(message.seeks)
        elif isinstance(message, LobbyEvent) and message.kind == "seek_added" and message.seek:
            added = [message.seek]
        elif isinstance(message, LobbyEvent) and message.kind == "seek_removed":
            return [seek for seek in backlog if seek["seek_id"] != message.seek_id]
        else:
            return backlog
        known = {seek["seek_id"] for seek in backlog}
        for seek in added:
            if seek["seek_id"] in known or len(backlog) >= MAX_BACKLOG:
                continue
            if seek["player"].get("player_id") == me or seek["opponents"] == "humans":
                continue
            if challenges_only and seek.get("to") != me:
                continue
            if self.plays is not None and not self.plays(seek["game"], seek.get("params") or {}):
                if seek.get("to") == me:
                    with contextlib.suppress(RequestFailed, ConnectionLost):
                        await self.connection.request(DeclineSeek, seek_id=seek["seek_id"])
                continue
            backlog.append(seek)
            known.add(seek["seek_id"])
        return backlog

    async def _accept(self, seek: dict[str, Any]) -> str | None:
        """Accept a seek: its game's id, or None if it is gone (withdrawn, or taken)."""
        assert self.connection is not None
        try:
            seated = await self.connection.request(AcceptSeek, seek_id=seek["seek_id"])
        except RequestFailed as exc:
            log.info("seek %s: %s", seek["seek_id"], exc.message)
            return None
        return str(seated.game_id)

    # --- playing a game ---------------------------------------------------------------------

    async def _play_game(self, game_id: str) -> GameResult:
        """Play one game to its end, from the events ``_route`` queues for it (the first:
        its snapshot)."""
        try:
            return await self._play(game_id, self.playing[game_id])
        finally:
            self.playing.pop(game_id, None)  # its later events: the bot's (a rematch offer)

    async def _play(self, game_id: str, events: asyncio.Queue[Message]) -> GameResult:
        assert self.connection is not None
        connection = self.connection
        held = connection.seats.get(game_id)
        model = GameModel(game_id, seat=held[0] if held else None)
        seat = held[0] if held else -1
        claimed_at_seq = -1  # one claim per state of the game (a refusal waits for news)
        chosen: tuple[int, int] | None = None  # (ply, move) searched, played once caught up
        loop = asyncio.get_running_loop()
        while True:
            # An opponent who left: claim the game once its seat is no longer held (the
            # model's claim_in; a small margin covers the clocks' skew).
            wait = model.claim_in(time.time()) if model.seq != claimed_at_seq else None
            try:
                timeout = None if wait is None else wait + CLAIM_MARGIN_S
                event = await asyncio.wait_for(events.get(), timeout)
            except TimeoutError:
                claimed_at_seq = model.seq
                await self._claim(game_id, abort=model.abortable)
                continue
            if getattr(event, "game_id", None) == game_id:
                held = connection.seats.get(game_id)
                model.seat = held[0] if held else None
                try:
                    model.apply(event, loop.time())
                except GameDataError as exc:  # a newer server's game, a move against the rules
                    log.warning("game %s cannot be played: %s; ending it", game_id, exc)
                    await self._end(game_id)  # (as stop ends one: aborted, else resigned)
                    finished = self._finished(game_id, model, event, seat)
                    return replace(finished, result="*", reason="cannot be played", winner=None)
                seat = -1 if model.seat is None else model.seat
                # Ended; or the snapshot of a game resumed after it ended (an unfinished game
                # of a run before that ended between the welcome and the resume).
                if isinstance(event, Ended) or (isinstance(event, Snapshot) and model.over):
                    return self._finished(game_id, model, event, seat)
                offered = (
                    isinstance(event, Offer)
                    and (event.kind, event.answer) == ("draw", "offer")
                    and event.seat != seat
                )
                if offered and model.state is not None:
                    turn = _turn(game_id, seat, model, self._stopped)
                    if await self._answer_draw(game_id, turn):
                        continue  # the game ends by agreement
            # Our turn, once caught up with what came: a draw offer made with the opponent's
            # move (FIDE 9.1.2.1), also one that came while we searched, is answered before
            # our move, as the server's AI seats do.
            if self.stopping or not (model.my_turn and model.state is not None and events.empty()):
                continue  # (stopping: the game ends, no search begun)
            turn = _turn(game_id, seat, model, self._stopped)
            ply = turn.state.ply()
            if chosen is None or chosen[0] != ply:
                chosen = (ply, await self._choose(turn))
                if self.stopping or not events.empty():
                    continue  # (stopped while it searched: no move); what came meanwhile, first
            await self._send_move(game_id, turn, chosen[1], events)

    def _finished(self, game_id: str, model: GameModel, event: Message, seat: int) -> GameResult:
        """The result of a game that ended (``event``: its end, or a final snapshot)."""
        assert self.connection is not None
        self.connection.forget(game_id)
        if seat in (0, 1):
            self.finished[game_id] = seat
            while len(self.finished) > MAX_FINISHED:  # the oldest, long gone from the server
                oldest = next(iter(self.finished))
                del self.finished[oldest]
                self.connection.release(oldest)  # (its seat and seqs too)
        result, reason = model.result or "*", model.reason or ""
        opponent = model.opponent()
        return GameResult(
            game_id,
            seat,
            result,
            reason,
            event.winner if isinstance(event, Ended) else {"1-0": 0, "0-1": 1}.get(result),
            model.state.ply() if model.state else 0,
            opponent["name"] if opponent else "?",
        )

    async def _answer_draw(self, game_id: str, turn: Turn) -> bool:
        """Answer the opponent's draw offer (``on_draw``, else decline); True if accepted."""
        assert self.connection is not None
        accept = bool(await _called(self.on_draw, turn)) if self.on_draw is not None else False
        try:
            await self.connection.request(
                Draw, game_id=game_id, answer="accept" if accept else "decline"
            )
        except (RequestFailed, ConnectionLost) as exc:  # withdrawn meanwhile by a move
            log.info("draw offer in game %s not answered: %s", game_id, exc)
            return False
        return accept

    async def _choose(self, turn: Turn) -> int:
        """``on_turn``'s move, or a random legal one if it returned another."""
        action = await _called(self.on_turn, turn)
        legal = turn.state.legal_actions()
        if action not in legal:
            log.warning("on_turn returned %r, not a legal move: playing a random one", action)
            action = random.choice(legal)
        return int(action)

    async def _send_move(
        self, game_id: str, turn: Turn, action: int, events: asyncio.Queue[Message]
    ) -> None:
        assert self.connection is not None
        try:
            await self.connection.request(
                Move, game_id=game_id, action=action, ply=turn.state.ply()
            )
        except RequestFailed as exc:
            log.warning("move %s refused in game %s: %s", action, game_id, exc.message)
        except ConnectionLost:
            # Not resent blindly: once the game is resumed, a turn still ours comes again.
            await self.connection.resynced()
            if events.empty() and self.connection.events.empty():  # (none left to route)
                await self._send_move(game_id, turn, action, events)

    async def _claim(self, game_id: str, *, abort: bool = False) -> None:
        """Claim the win of a game whose opponent left; ``abort`` it instead before both
        sides have moved (nothing counts yet: PROTOCOL.md, claim), as lichess-bot aborts a
        game whose opponent does not make a first move."""
        assert self.connection is not None
        kind: type[Message] = Abort if abort else Claim
        fields: dict[str, Any] = {} if abort else {"outcome": "win"}
        try:
            await self.connection.request(kind, game_id=game_id, **fields)
        except (RequestFailed, ConnectionLost) as exc:
            log.info("%s in game %s refused: %s", kind.TYPE, game_id, exc)


def _turn(game_id: str, seat: int, model: GameModel, stopped: threading.Event) -> Turn:
    """The bot's view of ``model``: its turn began when the clocks it holds were read (the
    move or snapshot that gave it the turn; loop time is monotonic): a first move's time
    runs from then too, also while a draw offer that came with the move was answered. A
    snapshot (a resume) says what was left of that time then (``first_move_left_ms``)."""
    assert model.state is not None
    clocks = None if model.clocks is None else list(model.clocks)
    state, control = model.state.clone(), dict(model.clock)
    began = model.clocks_received
    first = FIRST_MOVE_MS if model.first_move_ms is None else model.first_move_ms
    if model.first_move_left_ms is not None:
        first = model.first_move_left_ms
    return Turn(game_id, seat, state, model.players, clocks, control, began, first, stopped)


def _searcher(stopped: Callable[[], bool]) -> engine.Searcher:
    """A Searcher whose search ends at once, with its best move so far, once ``stopped()``:
    the brain's way to stop a search at END (engine.worker.stopping_clock)."""
    return engine.Searcher(clock=stopping_clock(stopped), timer=time.perf_counter)


def engine_player(algorithm: str | None = None, budget_ms: int = 100) -> Callable[[Turn], int]:
    """An ``on_turn`` that searches with the local engine (tree reuse within a game):
    ``algorithm``, or each game's own (``engine.default_ai``), for ``budget_ms`` or what
    the clock leaves (``Turn.budget_ms``, counted once its turn to search comes); a search
    ends early when its turn is ``stopped``."""
    searching: list[Turn] = []  # the turn being searched (SEARCHING: one at a time)
    searcher = _searcher(lambda: any(turn.stopped.is_set() for turn in searching))

    def on_turn(turn: Turn) -> int:
        search = algorithm or engine.default_ai(turn.state.game)
        with SEARCHING:
            budget = engine.Budget(time_ms=turn.budget_ms(budget_ms, time.monotonic()))
            searching.append(turn)
            try:
                result = searcher.search(turn.state, search, budget, game_key=turn.game_id)
            finally:
                searching.clear()
        return int(result.action)

    return on_turn


def engine_plays(algorithm: str | None = None) -> Callable[[str, dict[str, int]], bool]:
    """A ``plays`` for ``Bot``: whether ``algorithm`` (or each game's own) can play a game
    (``perfect`` solves boards of at most 16 cells only)."""

    def plays(game: str, params: dict[str, int]) -> bool:
        try:
            made = engine.make_game(game, **params)
            engine.check_algorithm(algorithm or engine.default_ai(made), made)
        except engine.EngineError:
            return False
        return True

    return plays


def engine_draw(algorithm: str | None = None, budget_ms: int = 100) -> Callable[[Turn], bool]:
    """An ``on_draw`` that searches the position with the local engine and accepts when it
    sees nothing better than a draw for the bot (a value of 0 or less for it: the rule of
    the server's AI seats, PROTOCOL.md, draw), within what the clock leaves and stopped with
    its turn, as ``engine_player``."""

    def on_draw(turn: Turn) -> bool:
        search = algorithm or engine.default_ai(turn.state.game)
        with SEARCHING:
            budget = engine.Budget(time_ms=turn.budget_ms(budget_ms, time.monotonic()))
            result = _searcher(turn.stopped.is_set).search(turn.state, search, budget)
        ours = turn.state.current_player() == turn.seat
        return (result.value if ours else -result.value) <= 0.0

    return on_draw

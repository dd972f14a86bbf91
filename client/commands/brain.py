"""`noughts brain`: the engine as a bot of another program's harness, on stdin/stdout:
a Gomocup brain (the Piskvork protocol, gomoku) or a CodinGame bot (its referee's protocol,
ultimate tic-tac-toe).

The protocols are pure state machines (engine/piskvork.py, engine/codingame.py); this
module is their I/O: it reads the harness's lines (on a thread that dates each as it arrives:
a search is timed from when its line was sent, also while the search warmed up), prints
the replies (diagnostics to stderr), and runs the searches the protocol asks for (one
Searcher, one game key per game so that a search keeps its table or tree between the moves
of a game).
"""

from __future__ import annotations

import argparse
import io
import os
import queue
import select
import sys
import threading
import time
from typing import Any, TextIO

from engine.algorithms import ALGORITHMS

DESCRIPTION = """\
Play gomoku as a brain of a Gomocup manager (Piskvork protocol on stdin/stdout): START,
RECTSTART, RESTART, BEGIN, TURN, BOARD ... DONE, TAKEBACK, PLAY, INFO, ABOUT, END, and
SWAP2BOARD ... DONE (the swap2 opening: 0 stones, it opens; 3 or 5, it plays white or
answers SWAP). Freestyle (five or more in a row wins) on boards of 15 to 20 a side; other
rules and sizes get an ERROR line. Each move searches for a share of INFO time_left, at
most INFO timeout_turn, less a safety margin.

With --game uttt: play ultimate tic-tac-toe as a CodinGame bot (the referee's protocol of
its "Tic-Tac-Toe" game): each turn reads "opponentRow opponentCol" (-1 -1 when the bot
starts), the valid action count and the valid actions "row col", and answers "row col",
searching 70% of --first-ms on its first turn and of --turn-ms after, counted from the turn's
first line. When it starts, it plays the centre of the centre board once its search is
warm, or after 60% of --first-ms if the warm-up takes longer.

Exit status: 0 when the input ends (or after END); 1 when a CodinGame bot reads a line that
is not the referee's (garbage, a malformed turn: its protocol has no error reply; the
reason is on stderr); 2 for a usage error. A Gomocup brain answers a line it cannot read
with ERROR or UNKNOWN, as the Piskvork protocol asks, and goes on."""

EPILOG = """\
examples (the harness's side of the pipe):
  printf 'START 15\\nINFO timeout_turn 1000\\nBEGIN\\nEND\\n' | noughts brain
  printf -- '-1 -1\\n1\\n4 4\\n' | noughts brain --game uttt
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "brain",
        help="play in another program's harness: a Gomocup manager (gomoku) or CodinGame (uttt)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--algorithm",
        default=None,
        choices=sorted(ALGORITHMS),
        help="the search that plays (default: the game's, alphabeta for gomoku, mcts for uttt)",
    )
    parser.add_argument(
        "--game",
        default="gomoku",
        choices=("gomoku", "uttt"),
        help="gomoku: a Gomocup brain, freestyle, on the board size START gives; uttt: a "
        "CodinGame bot (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the searches")
    parser.add_argument(
        "--first-ms",
        type=_positive_ms,
        default=1000.0,
        help="uttt: the referee's limit for the bot's first turn, ms (default: %(default)s)",
    )
    parser.add_argument(
        "--turn-ms",
        type=_positive_ms,
        default=100.0,
        help="uttt: the referee's limit for each later turn, ms (default: %(default)s)",
    )
    parser.set_defaults(func=run)


def _positive_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 1.0 <= value <= 3_600_000.0:
        raise argparse.ArgumentTypeError(f"a time in ms from 1 to 3600000, not {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from engine.games import default_ai, make_game

    algorithm = args.algorithm or default_ai(args.game)
    refused = ALGORITHMS[algorithm].cannot_play(make_game(args.game))
    if refused is not None:
        print(
            f"noughts brain: error: {algorithm} cannot play {args.game}: {refused}", file=sys.stderr
        )
        return 2
    if args.game == "uttt":
        from engine.codingame import CodinGameBrain, TurnTime

        brain: Any = CodinGameBrain(TurnTime(args.first_ms, args.turn_ms))
    else:
        from engine.piskvork import PiskvorkBrain

        brain = PiskvorkBrain(about=_about())
    return serve(sys.stdin, sys.stdout, brain, args.game, algorithm, seed=args.seed)


def _about() -> str:
    from importlib import metadata

    try:
        version = metadata.version("noughts")
    except metadata.PackageNotFoundError:
        version = "dev"
    return f'name="noughts", version="{version}", author="noughts team", country="-"'


def _waiting(stream: TextIO) -> bool:
    """Whether input is already waiting on ``stream`` (a pipe or a terminal; False for what
    select cannot watch)."""
    try:
        ready, _, _ = select.select([stream], [], [], 0.0)
    except (OSError, ValueError, io.UnsupportedOperation):
        return False
    return bool(ready)


def _process_age_s() -> float:
    """Seconds since this process started (Linux's /proc; 0.0 where it cannot be read): the
    interpreter's start and the imports count against a harness's first turn too."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as uptime:
            now = float(uptime.read().split()[0])
        return max(0.0, now - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


class Arrivals:
    """A stream's lines, each with the time (``time.monotonic``) it arrived, read by a thread
    from the start: the brain warms up meanwhile, and a harness's clock runs from when it wrote
    a line, not from when the brain gets to it. The lines already waiting when the thread
    starts (those it reads within ``QUIET_S`` of the first) may have been written as early as
    ``origin`` (the process's start), and are dated so."""

    def __init__(self, stream: TextIO, origin: float) -> None:
        # Bounded: a harness that writes faster than the brain answers waits, as it did when
        # the brain read its lines itself, rather than fill this process's memory.
        self._lines: queue.Queue[tuple[float, str] | None] = queue.Queue(MAX_WAITING_LINES)
        early = origin if _waiting(stream) else None
        # Set at the first answer: lines read after it are a new turn's, dated as they come
        # (the reply to an opening answered at once came within QUIET_S of the first line,
        # and was dated at the process's start: its turn had no time left).
        self.answered = threading.Event()
        self.end_read = threading.Event()  # an END line has come: a search running stops
        threading.Thread(target=self._read, args=(stream, early), daemon=True).start()

    def _read(self, stream: TextIO, early: float | None) -> None:
        first: float | None = None
        try:
            while line := stream.readline(MAX_LINE_CHARS):
                now = time.monotonic()
                first = now if first is None else first
                stamp = now
                if early is not None and now - first < QUIET_S and not self.answered.is_set():
                    stamp = early
                self._lines.put((stamp, line))
                if line.strip().upper() == "END":
                    self.end_read.set()
                # The rest of an over-long line is dropped: the protocols refuse what was kept.
                while line and not line.endswith("\n"):
                    line = stream.readline(MAX_LINE_CHARS)
        except (OSError, ValueError):  # the pipe broke or was closed: the input has ended
            pass
        finally:
            self._lines.put(None)

    def take(self, timeout: float | None = None) -> tuple[float, str] | None:
        """The next line and when it arrived; None at the input's end. queue.Empty if none
        came within ``timeout`` seconds (None: wait for it)."""
        return self._lines.get(timeout=timeout)


MAX_LINE_CHARS = 4096  # of a line: every protocol's lines are shorter (CodinGame's 256)
MAX_WAITING_LINES = 4096  # read but not yet answered (a turn: at most 83, or a 400-cell BOARD)
MIN_SEARCH_MS = 5.0  # a search whose input waited past its time still searches this long
# A turn that comes while the search warms up waits for it this much less than its time,
# then plays the protocol's quick move (``cancel``: no search, no kernel to load).
FALLBACK_MARGIN_MS = 30.0  # (the warm-up thread slows the answer: 60-86 ms seen at 10)
# Before the warm-up, a line not here within this long is not on its way (the lines of one
# turn come in one write, and the reading thread gets to them in well under a millisecond).
QUIET_S = 0.02


def serve(
    stdin: TextIO,
    stdout: TextIO,
    brain: Any,
    game: str,
    algorithm: str,
    *,
    seed: int | None = None,
    stderr: TextIO | None = None,
) -> int:
    """The brain's loop until END, the end of input or a line the protocol cannot read; the
    exit status: 1 for the last (``unreadable``), else 0. ``brain``: a protocol state machine
    (``feed``, ``played``, ``cancel``, ``ended``, ``unreadable``, ``games``,
    ``WARM_UP_FIRST``, ``first_answer_warm_ms``, ``QUICK_MOVE``).

    The search is warmed up (compiled, or loaded from numba's cache) before the first line is
    read if the protocol says so, else as soon as no line is on its way or a line asks for a
    search; a search asked for meanwhile waits for it, within its time if the protocol has a
    quick move (``QUICK_MOVE``: else for as long as it takes). A search asked for by a line
    is shorter by the time since the first line of its burst (lines that came together, not
    yet answered) arrived: the harness's clock ran from then."""
    import engine
    from engine.think import Log, Think, answer
    from engine.worker import stopping_clock

    if isinstance(stdin, io.TextIOWrapper):
        stdin.reconfigure(errors="replace")
    errors = stderr or sys.stderr
    started = time.monotonic() - _process_age_s()
    lines = Arrivals(stdin, started)
    # The search's clock runs past every deadline once END has come (Piskvork: the brain
    # ends "as soon as possible"; a 30 s search went on to its end, END unread).
    searcher = engine.Searcher(clock=stopping_clock(lines.end_read.is_set), timer=time.perf_counter)
    ready = threading.Event()
    warming: threading.Thread | None = None

    def warm_up_now() -> None:
        engine.warm_up([(game, algorithm)])
        # Said before it is set: a line the main thread logs once ready comes after it.
        errors.write(f"ready {(time.monotonic() - started) * 1000.0:.0f} ms after the start\n")
        errors.flush()
        ready.set()

    def warm_up(wait: bool = False) -> None:
        """Warm the search up on a thread (at most once); ``wait``: until it is done."""
        nonlocal warming
        if warming is None:
            warming = threading.Thread(target=warm_up_now, name="warm-up", daemon=True)
            warming.start()
        if wait:
            warming.join()

    def say(line: str) -> None:
        lines.answered.set()  # before the line: the harness's reply may come at once
        stdout.write(line + "\n")
        stdout.flush()

    def search(think: Think) -> Any:
        deadline = time.monotonic() + think.time_ms / 1000.0
        if not ready.is_set():
            warm_up()
            if not brain.QUICK_MOVE:  # (Piskvork) waits for it, however long, until END
                while not ready.wait(QUIET_S):
                    if lines.end_read.is_set():
                        raise engine.EngineError("END came while the search warmed up")
            # A turn that comes while the search warms up (a quick opponent's reply to the
            # opening: loading the kernels takes 0.4-0.7 s, the turn 100 ms) is answered in
            # its time with a quick move rather than late, which the referee forfeits.
            elif not ready.wait(max(0.0, think.time_ms - FALLBACK_MARGIN_MS) / 1000.0):
                # The protocol's quick move (its ``cancel``), as for a search that failed.
                raise engine.EngineError("the search is not ready yet")
        time_ms = max(MIN_SEARCH_MS, (deadline - time.monotonic()) * 1000.0)
        return searcher.search(
            think.state,
            algorithm,
            engine.Budget(time_ms=time_ms),
            seed=seed,
            game_key=f"brain-{brain.games}",
        )

    if brain.WARM_UP_FIRST:
        warm_up(wait=True)
    # When the first line of the burst the brain is answering arrived: a turn's lines come
    # together (CodinGame's move, count and actions; Piskvork's INFO time_left and TURN, or a
    # BOARD block), and the harness's clock runs from the first. An answer ends the burst.
    since: float | None = None
    last = 0.0
    while True:
        try:
            taken = lines.take(None if warming is not None else QUIET_S)
        except queue.Empty:
            warm_up()  # nothing to answer: warm up while the harness waits or thinks
            continue
        if taken is None:  # `noughts brain </dev/null` fills numba's cache before a tournament
            warm_up(wait=True)
            break
        arrived, line = taken
        if since is None or arrived - last > QUIET_S:
            since = arrived  # the first line of a new burst: a new turn
        last = arrived
        replies = brain.feed(line)
        late_ms = (time.monotonic() - since) * 1000.0
        replies = [
            Think(reply.state, max(MIN_SEARCH_MS, reply.time_ms - late_ms))
            if isinstance(reply, Think)
            else reply
            for reply in replies
        ]
        if (
            not ready.is_set()
            and not lines.answered.is_set()
            and any(isinstance(reply, str) for reply in replies)
        ):  # the first answer, the opening: it may wait a while for the search to be ready
            warm_up()
            ready.wait(max(0.0, brain.first_answer_warm_ms - late_ms) / 1000.0)
        for reply in answer(brain, replies, search):
            if isinstance(reply, Log):
                errors.write(reply.text + "\n")
                errors.flush()
            else:
                say(reply)
                since = None
        if brain.ended:
            break
    return 1 if brain.unreadable else 0

"""`noughts arena`: play two engine players against each other and rate the result.

Games alternate colours (game i: A moves first when i is even) and run in parallel in worker
processes, each holding one ``engine.Searcher`` so that MCTS reuses its tree between the moves
of one game (one game_key per game and player). The report gives A's wins, draws and losses,
the score, the Elo difference with its 95% interval (``engine.rating``), the split by colour,
the time per move, and optionally an SPRT verdict that can stop the match early.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from client.host import host_info
from engine.algorithms import ALGORITHMS
from engine.games import GAME_NAMES
from engine.options import MAX_BUDGET_ITERATIONS

DEFAULT_BUDGET_MS = 100.0
# The SPRT is only allowed to stop the match once this many games are in: with a handful of
# one-sided results the variance estimate (and so the LLR) is meaningless.
SPRT_MIN_GAMES = 20
SPRT_ERROR_RATE = 0.05  # --alpha and --beta when --sprt is given without them
DEFAULT_DB = "\0default"  # --db without a path: the default database

DESCRIPTION = """\
Play GAMES games between engine players A and B, alternating colours (A moves
first in the even-numbered games), in parallel worker processes. With balanced
openings (--opening-plies, on by default for gomoku) games 2p and 2p+1 start
from the same random opening with the colours swapped. Reports A's
wins/draws/losses, the score, the Elo difference with its 95% interval, the
results by colour, time per move and games per second. With --sprt, stops as
soon as the sequential probability ratio test decides."""

EPILOG = """\
player spec: ALGO[:BUDGET[:OPTION=VALUE...]]
  ALGO     an engine search: {algorithms}
  BUDGET   per move: 100ms, 0.5s (time, at most an hour) or 5000it (iterations / nodes,
           at most {max_iterations}); default 100ms
  OPTIONS  passed to the search, e.g. mcts:100ms:c=1.2 (several: mcts:50ms:c=1.2:reuse=false)

examples:
  noughts arena --game uttt --a mcts:100ms --b flat:100ms --games 200
  noughts arena --game gomoku --a alphabeta:200ms --b alphabeta:200ms --b-ref c0f7043
  noughts arena --game tictactoe --a alphabeta:5ms --b random:1ms --games 1000 --json
  noughts arena --game mnk --param m=5 --param n=5 --param k=4 --a mcts:50ms --b uct:50ms \\
      --sprt 0,50
"""


class ArenaError(Exception):
    """A bad command line or an engine that cannot play the requested match."""


# --- player specs ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlayerSpec:
    """One side of the match: an algorithm, its budget and its options (picklable)."""

    text: str
    algorithm: str
    budget_ms: float | None
    iterations: int | None
    options: dict[str, Any] = field(default_factory=dict)
    ref: str | None = None  # the commit of an earlier build playing this side (--a-ref, --b-ref)
    tree: str | None = None  # where that build's files are (client/git_engine.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def budget(self) -> Any:
        """The engine.Budget of each move."""
        import engine

        return engine.Budget(self.budget_ms, self.iterations)


def _option_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_budget(text: str) -> tuple[float | None, int | None]:
    """'100ms' -> (100.0, None); '0.5s' -> (500.0, None); '5000it' -> (None, 5000)."""
    from engine.errors import EngineError
    from engine.options import Budget

    try:
        budget = Budget.parse(text)
    except EngineError as exc:
        raise ArenaError(str(exc)) from None
    return budget.time_ms, budget.iterations


def parse_player(text: str) -> PlayerSpec:
    """Parse 'ALGO[:BUDGET[:KEY=VALUE...]]' (options may also be comma-separated)."""
    parts = [p.strip() for p in text.split(":")]
    algorithm = parts[0].lower()
    if not algorithm:
        raise ArenaError(f"bad player {text!r}: expected ALGO[:BUDGET[:OPTION=VALUE...]]")
    budget_ms: float | None = DEFAULT_BUDGET_MS
    iterations: int | None = None
    rest = parts[1:]
    if rest and "=" not in rest[0]:
        budget_ms, iterations = parse_budget(rest[0])
        rest = rest[1:]
    options: dict[str, Any] = {}
    for chunk in rest:
        for item in filter(None, (i.strip() for i in chunk.split(","))):
            key, sep, value = item.partition("=")
            if not sep or not key.strip().isidentifier():
                raise ArenaError(f"bad option {item!r} in player {text!r}: expected NAME=VALUE")
            options[key.strip()] = _option_value(value.strip())
    return PlayerSpec(text, algorithm, budget_ms, iterations, options)


def parse_sprt(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        elo0, elo1 = (float(x) for x in text.split(","))
    except ValueError:
        raise ArenaError(f"bad --sprt {text!r}: expected ELO0,ELO1 such as 0,10") from None
    if not elo0 < elo1:
        raise ArenaError(f"bad --sprt {text!r}: ELO0 must be below ELO1")
    return elo0, elo1


def derive_seed(*parts: object) -> int:
    """A deterministic 31-bit seed from the match seed and a position in the match."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFF_FFFF


# Balanced openings (as fishtest's and Gomocup's match runners play them): each pair of games
# starts from the same few random plies, with the colours swapped, so no game repeats another
# and the first player's advantage cancels within the pair.
OPENING_RADIUS = 2  # gomoku openings: cells within this many rows and columns of the centre


def default_opening_plies(game: Any) -> int:
    """4 random plies for gomoku-like boards (k >= 5), none for the others."""
    return 4 if getattr(game, "k", 0) >= 5 else 0


def draw_opening(game: Any, plies: int, seed: int) -> tuple[int, ...]:
    """``plies`` random moves from the initial position, drawn from ``seed``, that do not end the
    game; on k >= 5 boards they stay near the centre (the box of OPENING_RADIUS around it, or
    anywhere once the box is full)."""
    import random

    rng = random.Random(seed)
    for _ in range(100):
        state = game.new_initial_state()
        for _ply in range(plies):
            legal = state.legal_actions()
            if getattr(game, "k", 0) >= 5:
                near = [a for a in legal if _near_centre(game, a)]
                legal = near or legal
            state.apply_action(rng.choice(legal))
            if state.is_terminal():
                break
        else:
            return tuple(state.history())
    raise ArenaError(f"no opening of {plies} plies that leaves the game open")


def _near_centre(game: Any, action: int) -> bool:
    row, col = divmod(action, game.n)
    return (
        abs(2 * row - (game.m - 1)) <= 2 * OPENING_RADIUS
        and abs(2 * col - (game.n - 1)) <= 2 * OPENING_RADIUS
    )


# --- the worker side ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GameTask:
    """Everything a worker needs to play one game: small and picklable."""

    index: int
    game: str
    params: dict[str, int]
    a: PlayerSpec
    b: PlayerSpec
    seed: int
    keep_moves: bool = False  # record each move's search statistics and time (--db)
    opening: tuple[int, ...] = ()  # plies played before the engines move (--opening-plies)

    @property
    def a_first(self) -> bool:
        return self.index % 2 == 0


_searcher: Any = None
_git_engines: dict[str, Any] = {}  # tree -> GitEngine, in this worker


def _runner(searcher: Any, spec: PlayerSpec, game: str) -> Any:
    """What plays ``spec``: this process's Searcher, or the child running its build (warmed
    up for ``game`` on its first use, as the workers' own engine is)."""
    if spec.tree is None:
        return searcher
    runner = _git_engines.get(spec.tree)
    if runner is None:
        from pathlib import Path

        from client.git_engine import GitEngine

        runner = _git_engines[spec.tree] = GitEngine(Path(spec.tree), spec.ref or spec.tree)
        runner.warm(game, spec.algorithm)
    return runner


def _init_worker() -> None:
    """Pool initializer: ignore Ctrl-C (the parent handles it), warm the engine, one Searcher."""
    import engine
    from client.commands.interrupts import ignore_ctrl_c

    ignore_ctrl_c()
    engine.warm_up()
    global _searcher
    _searcher = engine.Searcher()


def play_game(task: GameTask) -> dict[str, Any]:
    """Play one game and return its record (A's result, moves, time per side).

    Errors from the engine are returned as {"error": ...}, so the parent can stop the match with
    a clear message rather than a traceback from a worker.
    """
    import engine

    global _searcher
    if _searcher is None:
        _searcher = engine.Searcher()
    try:
        return _play(engine, _searcher, task)
    except ArenaError as exc:
        return {"index": task.index, "error": str(exc)}
    except OSError as exc:
        return {"index": task.index, "error": f"cannot run an engine: {exc}"}
    except Exception as exc:
        return {"index": task.index, "error": f"{type(exc).__name__}: {exc}"}


def _play(engine: Any, searcher: Any, task: GameTask) -> dict[str, Any]:
    state = engine.make_game(task.game, **task.params).new_initial_state()
    runners = {"a": _runner(searcher, task.a, task.game), "b": _runner(searcher, task.b, task.game)}
    a_player = 0 if task.a_first else 1
    keys = {"a": f"arena:{task.seed}:{task.index}:a", "b": f"arena:{task.seed}:{task.index}:b"}
    spent = {"a": 0.0, "b": 0.0}
    moves = {"a": 0, "b": 0}
    iterations = {"a": 0, "b": 0}
    worst_overrun = {"a": -math.inf, "b": -math.inf}
    forfeit: str | None = None
    move_stats: list[dict[str, Any] | None] = []
    move_at: list[float] = []
    started_at = time.time()
    for action in task.opening:  # the pair's opening: no search, no statistics
        state.apply_action(action)
        if task.keep_moves:
            move_stats.append(None)
            move_at.append(started_at)
    try:
        while not state.is_terminal():
            side = "a" if state.current_player() == a_player else "b"
            spec = task.a if side == "a" else task.b
            started = time.perf_counter()
            try:
                result = runners[side].search(
                    state,
                    spec.algorithm,
                    spec.budget,
                    seed=derive_seed(task.seed, state.ply()),
                    game_key=keys[side],
                    options=spec.options,
                )
            except Exception as exc:
                raise ArenaError(
                    f"player {side.upper()} ({spec.text}) at ply {state.ply()}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            elapsed_ms = (time.perf_counter() - started) * 1000.0
            spent[side] += elapsed_ms
            moves[side] += 1
            iterations[side] += int(result.iterations)
            if spec.budget_ms is not None:
                worst_overrun[side] = max(worst_overrun[side], elapsed_ms - spec.budget_ms)
            try:
                state.apply_checked(int(result.action))
            except engine.IllegalMove:
                forfeit = side  # the engine played an illegal move: that side loses
                break
            if task.keep_moves:
                move_stats.append(result.to_dict())
                move_at.append(time.time())
    finally:
        for side in ("a", "b"):
            try:
                runners[side].forget(keys[side])
            except Exception:  # noqa: BLE001, S110 (a dead child: its error is reported already)
                pass
    if forfeit is not None:
        outcome = "loss" if forfeit == "a" else "win"
    else:
        a_return = state.returns()[a_player]
        outcome = "win" if a_return > 0 else "loss" if a_return < 0 else "draw"
    record: dict[str, Any] = {
        "index": task.index,
        "seed": task.seed,
        "a_first": task.a_first,
        "result": outcome,
        "forfeit": forfeit,
        "plies": len(state.history()),
        "opening": list(task.opening),
        "actions": [int(a) for a in state.history()],
        "ms": spent,
        "moves": moves,
        "iterations": iterations,
        "worst_overrun_ms": {
            k: (v if math.isfinite(v) else None) for k, v in worst_overrun.items()
        },
    }
    if task.keep_moves:
        record.update(move_stats=move_stats, move_at=move_at, started_at=started_at)
    return record


# --- the tally ------------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """Running totals from A's point of view, overall and by A's colour."""

    wins: int = 0
    draws: int = 0
    losses: int = 0
    first: list[int] = field(default_factory=lambda: [0, 0, 0])  # A moved first: W, D, L
    second: list[int] = field(default_factory=lambda: [0, 0, 0])
    ms: dict[str, float] = field(default_factory=lambda: {"a": 0.0, "b": 0.0})
    moves: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})
    iterations: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})
    forfeits: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})
    plies: int = 0
    # Games 2p and 2p+1 are pair p (one opening, the colours swapped): pairs finished by
    # A's points in them (0, 1/2, 1, 3/2, 2), and A's points in the pairs half played.
    pairs: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])
    halves: dict[int, float] = field(default_factory=dict)

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    def add(self, record: dict[str, Any]) -> None:
        slot = {"win": 0, "draw": 1, "loss": 2}[record["result"]]
        (self.first if record["a_first"] else self.second)[slot] += 1
        points = (2 - slot) / 2
        pair = record["index"] // 2
        other = self.halves.pop(pair, None)
        if other is None:
            self.halves[pair] = points
        else:
            self.pairs[round(2 * (points + other))] += 1
        if slot == 0:
            self.wins += 1
        elif slot == 1:
            self.draws += 1
        else:
            self.losses += 1
        for side in ("a", "b"):
            self.ms[side] += record["ms"][side]
            self.moves[side] += record["moves"][side]
            self.iterations[side] += record["iterations"][side]
        if record["forfeit"]:
            self.forfeits[record["forfeit"]] += 1
        self.plies += record["plies"]

    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else math.nan


def _finite(value: float) -> float | None:
    """JSON has no infinity: an unbounded Elo (all wins or all losses) becomes null."""
    return round(value, 2) if math.isfinite(value) else None


def _colour_summary(wdl: list[int]) -> dict[str, Any]:
    games = sum(wdl)
    score = (wdl[0] + 0.5 * wdl[1]) / games if games else None
    return {"games": games, "wins": wdl[0], "draws": wdl[1], "losses": wdl[2], "score": score}


def _format_elo(value: float) -> str:
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return f"{value:+.1f}"


def _status_line(tally: Tally, total: int) -> str:
    from engine.rating import elo_interval

    text = f"{tally.games}/{total} games  A +{tally.wins} ={tally.draws} -{tally.losses}"
    if tally.games:
        estimate = elo_interval(tally.wins, tally.draws, tally.losses, pairs=tally.pairs)
        text += f"  score {estimate.score:.3f}  Elo {_format_elo(estimate.elo)}"
        if tally.games > 1 and 0 < estimate.error < math.inf:
            text += f" +-{estimate.error:.0f}"
    return text


# --- the match ------------------------------------------------------------------------------


@dataclass(slots=True)
class Match:
    """A match being played: the tasks, the tally so far and the SPRT state."""

    tasks: list[GameTask]
    sprt: tuple[float, float] | None
    alpha: float
    beta: float
    tally: Tally = field(default_factory=Tally)
    records: list[dict[str, Any]] = field(default_factory=list)
    verdict: str | None = None
    error: str | None = None
    interrupted: bool = False

    def add(self, record: dict[str, Any]) -> bool:
        """Count one finished game; True when the match should stop (error or SPRT bound)."""
        if "error" in record:
            self.error = record["error"]
            return True
        self.records.append(record)
        self.tally.add(record)
        if self.sprt is not None and self.tally.games >= SPRT_MIN_GAMES:
            from engine.rating import sprt

            t = self.tally
            self.verdict = sprt(
                t.wins, t.draws, t.losses, *self.sprt, self.alpha, self.beta
            ).verdict
            return self.verdict is not None
        return False


class ArenaProgress:
    """Live progress on stderr: a rich bar on a terminal, else a plain line every N games."""

    def __init__(self, total: int, every: int, enabled: bool = True) -> None:
        self.total = total
        self.every = max(1, every)
        self.enabled = enabled
        self._bar: Any = None
        self._task: Any = None
        self._last_print = 0.0

    def __enter__(self) -> ArenaProgress:
        if self.enabled and sys.stderr.isatty():
            from rich import progress as bar
            from rich.console import Console

            self._bar = bar.Progress(
                bar.TextColumn("arena"),
                bar.BarColumn(),
                bar.MofNCompleteColumn(),
                bar.TextColumn("{task.fields[status]}"),
                bar.TimeElapsedColumn(),
                bar.TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task("games", total=self.total, status="starting workers")
        return self

    def update(self, tally: Tally) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            status = _status_line(tally, self.total).split("  ", 1)[1]
            self._bar.update(self._task, completed=tally.games, status=status)
        elif tally.games % self.every == 0 or tally.games == self.total:
            print(f"arena: {_status_line(tally, self.total)}", file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def run_match(
    match: Match, workers: int, progress: ArenaProgress, stall_timeout: float = 3600.0
) -> None:
    """Play the match's games, in this process (one worker) or in a pool of processes.

    With a pool, waiting for the next finished game gives up after ``stall_timeout`` seconds:
    a worker killed mid-game (out of memory, a crash in compiled code) loses its game silently.
    """
    if workers <= 1:
        _init_engine_here()
        for task in match.tasks:
            if match.add(play_game(task)):
                break
            progress.update(match.tally)
        return
    import multiprocessing

    # spawn: workers start clean (no inherited threads or numba state), as in server/pool.py.
    context = multiprocessing.get_context("spawn")
    pool = context.Pool(processes=workers, initializer=_init_worker)
    try:
        results = pool.imap_unordered(play_game, match.tasks, chunksize=1)
        for _ in match.tasks:
            try:
                record = results.next(timeout=stall_timeout)
            except multiprocessing.TimeoutError:
                match.error = (
                    f"no game finished in {stall_timeout:.0f} s: a worker may have died "
                    "(the pool does not resubmit a lost game)"
                )
                break
            if match.add(record):
                break
            progress.update(match.tally)
    finally:
        pool.terminate()  # stops games still running after an early stop or Ctrl-C
        pool.join()


# A worker's start-up on a cold numba cache, per engine build it compiles, with its share of
# the cores: uttt's mcts kernels took ~64 CPU s to compile (branch uttt5, inlined kernels), and
# the machines matches run on are loaded (the 300 s of before ran out at load 8).
STARTUP_S_PER_BUILD = 600.0


def _stall_timeout(task: GameTask, workers: int = 1, cores: int | None = None) -> float:
    """A generous bound on one game's duration: 3x the longest possible game, plus the start-up
    of a worker on a cold numba cache: every worker compiles each engine build it plays (this
    tree's, and each --a-ref/--b-ref build's in its child process) during its first game, all
    workers at once, ``workers`` sharing ``cores``."""
    import engine

    plies = engine.make_game(task.game, **task.params).max_game_length()
    per_move_ms = max(
        spec.budget_ms if spec.budget_ms is not None else 1000.0 for spec in (task.a, task.b)
    )
    builds = len({spec.tree for spec in (task.a, task.b)})
    share = max(1.0, workers / (cores or os.cpu_count() or 1))
    return STARTUP_S_PER_BUILD * builds * share + 3.0 * plies * per_move_ms / 1000.0


def _init_engine_here() -> None:
    import engine

    engine.warm_up()


# --- the command ----------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "arena",
        help="play two engine players against each other and rate the result",
        description=DESCRIPTION,
        epilog=EPILOG.format(
            algorithms=", ".join(ALGORITHMS), max_iterations=MAX_BUDGET_ITERATIONS
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--game",
        default="uttt",
        metavar="NAME",
        help=f"game to play: {', '.join(GAME_NAMES)} (default: %(default)s)",
    )
    parser.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="game parameter, repeatable; for mnk: --param m=5 --param n=5 --param k=4",
    )
    parser.add_argument(
        "--a",
        dest="player_a",
        default="mcts:100ms",
        metavar="SPEC",
        help="player A, ALGO:BUDGET[:OPTION=VALUE] (default: %(default)s)",
    )
    parser.add_argument(
        "--b",
        dest="player_b",
        default="flat:100ms",
        metavar="SPEC",
        help="player B, same form (default: %(default)s)",
    )
    for side in ("a", "b"):
        parser.add_argument(
            f"--{side}-ref",
            metavar="REF",
            help=f"player {side.upper()} plays with the engine of this git commit (e.g. HEAD~3, "
            "a tag): extracted once into the cache directory, run in child processes; the "
            "commit needs the typed engine front door (c0f7043 or later)",
        )
    parser.add_argument(
        "--games", type=int, default=100, help="number of games to play (default: %(default)s)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes playing games in parallel; 1 plays in this process "
        "(default: the number of cores, %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="match seed; every game's and move's seed derives from it (default: a random seed, "
        "reported in the output)",
    )
    parser.add_argument(
        "--opening-plies",
        type=int,
        default=None,
        metavar="N",
        help="balanced openings: each pair of games starts from the same N random plies (drawn "
        "from the match seed; on gomoku boards within 2 rows and columns of the centre) with "
        "the colours swapped, so games do not repeat and the first player's advantage cancels; "
        "0 starts every game from the empty board (default: 4 for gomoku and m,n,k boards "
        "with k >= 5, 0 for the other games)",
    )
    parser.add_argument(
        "--sprt",
        metavar="ELO0,ELO1",
        help="run an SPRT of H0: elo=ELO0 against H1: elo=ELO1 (e.g. 0,10) and stop when it "
        f"decides (checked after each game from game {SPRT_MIN_GAMES} on)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=None,
        help=f"SPRT false-positive rate, with --sprt (default: {SPRT_ERROR_RATE:g})",
    )
    parser.add_argument(
        "--beta",
        type=float,
        default=None,
        help=f"SPRT false-negative rate, with --sprt (default: {SPRT_ERROR_RATE:g})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (summary and every game's moves, enough to archive)",
    )
    parser.add_argument(
        "--progress-every",
        type=int,
        default=None,
        metavar="N",
        help="when stderr is not a terminal, print a progress line every N games "
        "(default: about 20 lines per match)",
    )
    parser.add_argument(
        "--db",
        nargs="?",
        const=DEFAULT_DB,
        default=None,
        metavar="PATH",
        help="store the finished games, with every move's search statistics, in this SQLite "
        "file (--db alone: $NOUGHTS_DB, or noughts.db in your data directory), where "
        "`noughts games` and `noughts replay` show them",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        match, meta = _prepare(args)
    except ArenaError as exc:
        print(f"noughts arena: {exc}", file=sys.stderr)
        return 2
    from client.commands.interrupts import INTERRUPTED, sigterm_as_ctrl_c

    every = args.progress_every or max(1, args.games // 20)
    started = time.perf_counter()
    with sigterm_as_ctrl_c(), ArenaProgress(args.games, every, enabled=not args.quiet) as progress:
        try:
            stall = _stall_timeout(match.tasks[0], meta["workers"])
            run_match(match, meta["workers"], progress, stall)
        except KeyboardInterrupt:  # the workers stopped: the partial result
            match.interrupted = True
    elapsed = time.perf_counter() - started
    if match.error is not None:
        print(f"noughts arena: the engine failed: {match.error}", file=sys.stderr)
        return 1
    report = build_report(match, meta, elapsed)
    failed = None
    if meta["db"] is not None and match.records:
        try:
            report["stored"] = store_games(meta["db"], report)
        except ArenaError as exc:
            failed = f"noughts arena: the games were not stored: {exc}"
    if args.json:
        print(json.dumps(report))
    else:
        print(format_report(report))
    if failed is not None:
        print(failed, file=sys.stderr)
        return 1
    return INTERRUPTED if match.interrupted else 0


def store_games(db: str, report: dict[str, Any], timeout: float = 600.0) -> dict[str, Any]:
    """Hand the match's games to ``python -m server.arena_store`` (a child process: the client
    never imports the server), which writes them to the database ``db`` as finished games.
    Returns what it reports: {"db": path, "game_ids": [...]}."""
    import subprocess

    document = {
        "game": report["game"]["name"],
        "params": report["game"]["params"],
        "seed": report["seed"],
        "a": report["a"],
        "b": report["b"],
        "records": report["records"],
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "server.arena_store", "--db", db],
            input=json.dumps(document).encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ArenaError(f"cannot run server.arena_store: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise ArenaError(message[-1] if message else f"exit status {done.returncode}")
    try:
        stored: dict[str, Any] = json.loads(done.stdout)
    except ValueError as exc:
        raise ArenaError(f"unexpected answer from server.arena_store: {exc}") from exc
    return stored


def _prepare(args: argparse.Namespace) -> tuple[Match, dict[str, Any]]:
    """Validate the command line against the engine and build the match's tasks."""
    import engine

    if args.games < 1:
        raise ArenaError("--games must be at least 1")
    if args.workers < 1:
        raise ArenaError("--workers must be at least 1")
    if args.progress_every is not None and args.progress_every < 1:
        raise ArenaError("--progress-every must be at least 1")
    if args.sprt is None and (args.alpha is not None or args.beta is not None):
        raise ArenaError("--alpha and --beta are the SPRT's error rates: they need --sprt")
    alpha = SPRT_ERROR_RATE if args.alpha is None else args.alpha
    beta = SPRT_ERROR_RATE if args.beta is None else args.beta
    if not (0 < alpha < 1 and 0 < beta < 1):
        raise ArenaError("--alpha and --beta must be within (0, 1)")
    players = [parse_player(args.player_a), parse_player(args.player_b)]
    for index, ref in enumerate((getattr(args, "a_ref", None), getattr(args, "b_ref", None))):
        if ref is not None:
            from client.git_engine import GitEngineError, extract

            try:
                commit, tree = extract(ref)
            except GitEngineError as exc:
                raise ArenaError(str(exc)) from None
            spec = players[index]
            players[index] = PlayerSpec(
                f"{spec.text}@{commit[:12]}", spec.algorithm, spec.budget_ms, spec.iterations,
                spec.options, commit[:12], str(tree),
            )  # fmt: skip
    for label, spec in zip("AB", players, strict=True):
        if spec.tree is not None:
            continue  # that build checks its own algorithms and options
        if spec.algorithm not in engine.ALGORITHMS:
            raise ArenaError(
                f"player {label} ({spec.text}): algorithm {spec.algorithm!r} is not available "
                f"in this engine (available: {', '.join(engine.ALGORITHMS)})"
            )
    from client.commands.common import parse_params

    params = parse_params(args.param or [], "noughts arena")
    try:
        game = engine.make_game(args.game, **params)
    except engine.EngineError as exc:
        raise ArenaError(f"bad game: {exc}") from None
    for label, spec in zip("AB", players, strict=True):
        if spec.tree is not None:
            continue
        try:  # before any game starts: a misspelt option is an error, not a default
            engine.check_algorithm(spec.algorithm, game)
            engine.parse_options(
                engine.algorithm(spec.algorithm).options, spec.options, spec.algorithm
            )
        except engine.EngineError as exc:
            raise ArenaError(f"player {label} ({spec.text}): {exc}") from None
    name, game_params = game.spec()
    seed = args.seed if args.seed is not None else derive_seed(time.time_ns(), os.getpid())
    db = getattr(args, "db", None)
    if db == DEFAULT_DB:
        from client.commands.common import default_db_path

        db = str(default_db_path())
    if db is not None:  # said now, not after the match (the store's own rule, protocol.paths)
        from protocol.paths import NoDirectory, is_data_dir

        parent = Path(db).parent
        if not parent.is_dir() and not is_data_dir(parent):
            raise ArenaError(str(NoDirectory(db)))
    keep = db is not None
    plies = args.opening_plies
    if plies is None:
        plies = default_opening_plies(game)
    if not 0 <= plies < game.max_game_length():
        raise ArenaError(f"--opening-plies must be within 0..{game.max_game_length() - 1}")
    openings = {
        pair: draw_opening(game, plies, derive_seed(seed, "opening", pair)) if plies else ()
        for pair in range((args.games + 1) // 2)
    }  # games 2p and 2p+1 (A first, then B first) share pair p's opening
    tasks = [
        GameTask(
            i, name, dict(game_params), players[0], players[1], derive_seed(seed, i), keep,
            openings[i // 2],
        )
        for i in range(args.games)
    ]  # fmt: skip
    match = Match(tasks, parse_sprt(args.sprt), alpha, beta)
    meta = {
        "game": {"name": name, "requested": args.game, "params": dict(game_params)},
        "a": players[0].to_dict(),
        "b": players[1].to_dict(),
        "games_requested": args.games,
        "seed": seed,
        "opening_plies": plies,
        "workers": min(args.workers, args.games),
        "db": db,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": host_info(),
    }
    return match, meta


def build_report(match: Match, meta: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
    """The match's outcome as one JSON-ready dict (summary, then every game's record)."""
    from engine.rating import elo_interval, sprt

    t = match.tally
    report: dict[str, Any] = dict(meta)
    report.update(
        games_played=t.games,
        stopped_early=t.games < meta["games_requested"],
        interrupted=match.interrupted,
        wins=t.wins,
        draws=t.draws,
        losses=t.losses,
    )
    if t.games:
        estimate = elo_interval(t.wins, t.draws, t.losses, pairs=t.pairs)
        report.update(
            # The interval's variance: pentanomial over the finished pairs (each opening
            # played with the colours swapped, its two games correlated), the games left
            # over counted alone; trinomial while no pair has finished.
            interval="pentanomial" if estimate.pairs else "trinomial",
            pairs=list(t.pairs),
            score=estimate.score,
            score_low=estimate.score_low,
            score_high=estimate.score_high,
            elo=_finite(estimate.elo),
            elo_low=_finite(estimate.elo_low),
            elo_high=_finite(estimate.elo_high),
        )
    else:
        report.update(interval=None, pairs=list(t.pairs))
        report.update(score=None, score_low=None, score_high=None, elo=None)
        report.update(elo_low=None, elo_high=None)
    report["by_colour"] = {
        "a_first": _colour_summary(t.first),
        "a_second": _colour_summary(t.second),
    }
    report["sprt"] = (
        sprt(t.wins, t.draws, t.losses, *match.sprt, match.alpha, match.beta).to_dict()
        if match.sprt is not None and t.games
        else None
    )
    report["forfeits"] = dict(t.forfeits)
    report["moves"] = dict(t.moves)
    report["ms_per_move"] = {
        side: (t.ms[side] / t.moves[side] if t.moves[side] else None) for side in ("a", "b")
    }
    report["iterations_per_move"] = {
        side: (t.iterations[side] / t.moves[side] if t.moves[side] else None) for side in ("a", "b")
    }
    report["worst_overrun_ms"] = {
        side: max(
            (
                r["worst_overrun_ms"][side]
                for r in match.records
                if r["worst_overrun_ms"][side] is not None
            ),
            default=None,
        )
        for side in ("a", "b")
    }
    report["plies_per_game"] = t.plies / t.games if t.games else None
    report["elapsed_s"] = elapsed_s
    report["games_per_second"] = t.games / elapsed_s if elapsed_s > 0 else None
    report["records"] = sorted(match.records, key=lambda r: r["index"])
    return report


def format_report(report: dict[str, Any]) -> str:
    """The human-readable summary of a report from build_report."""
    game = report["game"]
    params = ",".join(f"{k}={v}" for k, v in sorted(game["params"].items()))
    lines = [
        f"arena: {game['name']}{' ' + params if params else ''}  "
        f"A = {report['a']['text']}  B = {report['b']['text']}",
        f"games: {report['games_played']} of {report['games_requested']}"
        f"{' (interrupted)' if report['interrupted'] else ''}"
        f"  seed {report['seed']}  workers {report['workers']}"
        + (
            f"  openings: {report['opening_plies']} plies, paired"
            if report.get("opening_plies")
            else ""
        ),
    ]
    if not report["games_played"]:
        return "\n".join(lines + ["no game finished"])
    lines.append(
        f"A: {report['wins']} wins, {report['draws']} draws, {report['losses']} losses"
        f"  score {report['score']:.4f} (95% {report['score_low']:.4f}..{report['score_high']:.4f})"
    )
    pairs = report.get("pairs") or [0] * 5
    if report.get("interval") == "pentanomial":
        lines.append(
            f"  95% intervals over {sum(pairs)} game pairs (colours swapped; pentanomial):"
            f" A scored 0 in {pairs[0]}, 1/2 in {pairs[1]}, 1 in {pairs[2]},"
            f" 3/2 in {pairs[3]}, 2 in {pairs[4]}"
        )

    def elo(value: float | None, score: float) -> str:
        if value is None:  # unbounded: a score of 1 or 0
            return "+inf" if score >= 0.5 else "-inf"
        return f"{value:+.1f}"

    lines.append(
        f"Elo difference: {elo(report['elo'], report['score'])}"
        f"  (95% {elo(report['elo_low'], report['score_low'])}"
        f" .. {elo(report['elo_high'], report['score_high'])})"
    )
    for key, label in (("a_first", "A first (X)"), ("a_second", "A second (O)")):
        c = report["by_colour"][key]
        if c["games"]:
            lines.append(
                f"  {label}: {c['games']} games  +{c['wins']} ={c['draws']} -{c['losses']}"
                f"  score {c['score']:.4f}"
            )
    if any(report["forfeits"].values()):
        lines.append(
            f"illegal moves (forfeits): A {report['forfeits']['a']}, B {report['forfeits']['b']}"
        )
    s = report["sprt"]
    if s is not None:
        verdict = {"H1": "H1 accepted", "H0": "H0 accepted", None: "undecided"}[s["verdict"]]
        lines.append(
            f"SPRT elo0={s['elo0']:g} elo1={s['elo1']:g} (alpha {s['alpha']:g}, beta "
            f"{s['beta']:g}): LLR {s['llr']:.2f} in [{s['lower']:.2f}, {s['upper']:.2f}]"
            f" -> {verdict}" + (" (stopped early)" if report["stopped_early"] else "")
        )
    ms = report["ms_per_move"]
    its = report["iterations_per_move"]
    lines.append(
        f"time: A {ms['a']:.2f} ms/move ({its['a']:.0f} it/move), "
        f"B {ms['b']:.2f} ms/move ({its['b']:.0f} it/move); "
        f"{report['plies_per_game']:.1f} plies/game"
    )
    worst = report["worst_overrun_ms"]
    if worst["a"] is not None or worst["b"] is not None:
        lines.append(
            "worst move past its time budget: "
            + ", ".join(
                f"{side.upper()} {worst[side]:+.2f} ms"
                for side in ("a", "b")
                if worst[side] is not None
            )
        )
    lines.append(
        f"speed: {report['games_per_second']:.2f} games/s ({report['elapsed_s']:.1f} s wall)"
    )
    host = report["host"]
    cpu = f" {host['cpu']}" if host.get("cpu") else ""
    lines.append(
        f"host: {host['cpus']} cpus{cpu}, 1-minute load {host['load_average_at_start'][0]:.2f} "
        "at the start"
    )
    stored = report.get("stored")
    if stored:
        ids = stored["game_ids"]
        lines.append(
            f"stored: {len(ids)} games in {stored['db']} (first {ids[0]}; see: noughts games "
            f"--db {stored['db']})"
        )
    return "\n".join(lines)

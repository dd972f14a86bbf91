"""`noughts bench`: the engine's speed figures, beside the targets of issue 3.

Measures, for each game and each search that applies: iterations (or nodes) per second from the
opening and from a middle-game position (median of several runs); the time and node count of
solving 3x3; how far moves overrun their budget (p50/p99 of elapsed - budget, timed here with
``time.perf_counter`` around the call); and the round trip to a warm worker process over a
pipe against ``loop.run_in_executor`` with a ``ProcessPoolExecutor``. Figures only: nothing
here passes or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from client.host import host_info
from engine.games import GAMES

# The registry's games that take no parameters ("mnk" is measured as 5x5 and gomoku).
BENCH_GAMES = tuple(name for name, game in GAMES.items() if not game.parameters)
# Searches with an iteration or node count worth a rate; random has none.
RATE_ALGORITHMS = ("mcts", "uct", "flat", "alphabeta", "minimax", "perfect")
# Plain minimax and the perfect player only make sense on small boards: 3x3 here.
SMALL_BOARD_ONLY = ("minimax", "perfect")
SMALL_BOARD = "tictactoe"
OVERRUN_ALGORITHMS = ("mcts", "alphabeta", "flat", "uct")

# Issue 3's targets (per core, this class of machine).
MCTS_RATE_TARGETS = {"tictactoe": 2_000_000, "uttt": 250_000, "5x5": 100_000, "gomoku": 40_000}
SOLVE_TARGET_MS = 1.0
SOLVE_TARGET_NODES = 1200
SOLVE_TARGET_NODES_SYMMETRY = 320
OVERRUN_TARGET_MS = 2.0  # 99% of moves within budget + 2 ms, for budgets >= 10 ms


@dataclass(frozen=True, slots=True)
class Settings:
    """How much to measure: the full bench, or a quick pass for tests."""

    runs: int = 5
    rate_budget_ms: float = 200.0
    solve_runs: int = 50
    overrun_budgets: tuple[float, ...] = (10.0, 50.0, 100.0)
    overrun_ms_per_budget: float = 1500.0  # moves per budget: max(20, this / budget)
    overrun_min_moves: int = 20
    round_trips: int = 300

    @classmethod
    def quick(cls) -> Settings:
        return cls(
            runs=1,
            rate_budget_ms=20.0,
            solve_runs=3,
            overrun_budgets=(10.0,),
            overrun_ms_per_budget=30.0,
            overrun_min_moves=3,
            round_trips=10,
        )


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class Reporter:
    """Progress on stderr: a rich status line on a terminal, plain lines otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._status: Any = None

    def __enter__(self) -> Reporter:
        if self.enabled and sys.stderr.isatty():
            from rich.console import Console

            self._status = Console(stderr=True).status("bench: starting")
            self._status.__enter__()
        return self

    def step(self, text: str) -> None:
        if not self.enabled:
            return
        if self._status is not None:
            self._status.update(f"bench: {text}")
        else:
            print(f"bench: {text}", file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)


# --- positions ------------------------------------------------------------------------------


def middle_position(engine: Any, game: Any, seed: int = 2024, attempts: int = 200) -> Any:
    """A fixed, seeded random position a third of the way into the game, preferably open.

    Random play often leaves a win in one or a forced line on the board, which a search proves
    at once, so its rate would measure only start-up costs. The first position that short
    searches (mcts, alphabeta, on fixed seeds and iteration budgets) do not prove is taken;
    on a board too small for that (3x3) the first live position is.
    """
    import random

    target = max(1, game.max_game_length() // 3)
    first_live = None
    for attempt in range(attempts):
        rng = random.Random(seed + attempt)
        state = game.new_initial_state()
        while state.ply() < target and not state.is_terminal():
            state.apply_action(rng.choice(state.legal_actions()))
        if state.is_terminal():
            continue
        if first_live is None:
            first_live = state
        if not any(
            engine.search(state.clone(), name, engine.Budget(iterations=n), seed=1).proven
            for name, n in (("mcts", 2000), ("alphabeta", 2000))
            if name in engine.ALGORITHMS
        ):
            return state
    if first_live is None:
        raise RuntimeError(f"no live middle-game position found for {game.name}")
    return first_live


def _game_missing(game_name: str, exc: Exception) -> dict[str, Any]:
    return {
        "game": game_name,
        "algorithm": None,
        "available": False,
        "moves": 0,
        "error": f"game not available: {type(exc).__name__}: {exc}",
    }


def applies(algorithm: str, game_name: str) -> bool:
    return algorithm not in SMALL_BOARD_ONLY or game_name == SMALL_BOARD


# --- measurements ---------------------------------------------------------------------------


def measure_rates(
    engine: Any,
    games: list[str],
    settings: Settings,
    reporter: Reporter,
    reference: Any = None,
    algorithms: tuple[str, ...] | list[str] = RATE_ALGORITHMS,
    rows: list[dict[str, Any]] | None = None,
    middles: dict[str, list[int]] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[int]]]:
    """Iterations (or nodes) per second from the opening and from a middle-game position.

    With ``reference`` (a ``client.git_engine.GitEngine``: an earlier build in a child
    process), each run of this build is followed by the same search (seed, position, budget)
    of that build, timed the same way around the call (which adds the pipe's round trip,
    about 0.1 ms), and the row gets its rates and each pair's ratio: one machine's speed
    changes between sittings, the ratio measured run by run much less.

    Returns the rows and, per game, the moves leading to the middle-game position used; in
    ``rows`` and ``middles`` if given, filled as they are measured (a bench stopped by Ctrl-C
    keeps them)."""
    rows = [] if rows is None else rows
    middles = {} if middles is None else middles
    for game_name in games:
        try:
            game = engine.make_game(game_name)
            positions = {
                "opening": game.new_initial_state(),
                "middle": middle_position(engine, game),
            }
            middles[game_name] = [int(a) for a in positions["middle"].history()]
        except Exception as exc:  # a game still being written
            rows.append(_game_missing(game_name, exc))
            continue
        for algorithm in algorithms:
            if not applies(algorithm, game_name):
                continue
            if algorithm not in engine.ALGORITHMS:
                rows.append({"game": game_name, "algorithm": algorithm, "available": False})
                continue
            reference_error = _warm_reference(reference, game_name, algorithm, reporter)
            for position, state in positions.items():
                reporter.step(f"{game_name} {algorithm} from the {position}")
                runs = []
                reference_runs: list[dict[str, Any]] = []
                error = None
                for run in range(settings.runs):
                    started = time.perf_counter()
                    try:
                        result = engine.search(
                            state.clone(),
                            algorithm,
                            engine.Budget(time_ms=settings.rate_budget_ms),
                            seed=run + 1,
                        )
                    except Exception as exc:  # an algorithm may reject a game: report it
                        error = f"{type(exc).__name__}: {exc}"
                        break
                    elapsed = time.perf_counter() - started
                    runs.append(_timed_run(result.iterations, elapsed))
                    if reference is not None and reference_error is None:
                        budget = engine.Budget(time_ms=settings.rate_budget_ms)
                        started = time.perf_counter()
                        try:
                            result = reference.search(
                                state, algorithm, budget, seed=run + 1, game_key=None, options={}
                            )
                        except Exception as exc:  # the build lacks it, or its child died
                            reference_error = f"{type(exc).__name__}: {exc}"
                        else:
                            elapsed = time.perf_counter() - started
                            reference_runs.append(_timed_run(result.iterations, elapsed))
                row: dict[str, Any] = {
                    "game": game_name,
                    "algorithm": algorithm,
                    "available": True,
                    "position": position,
                    "unit": "iterations/s" if algorithm in ("mcts", "uct", "flat") else "nodes/s",
                    "budget_ms": settings.rate_budget_ms,
                    "runs": runs,
                    "rate_median": statistics.median(r["rate"] for r in runs) if runs else None,
                    "target": (
                        MCTS_RATE_TARGETS.get(game_name)
                        if algorithm == "mcts" and position == "opening"
                        else None
                    ),
                }
                if error:
                    row["error"] = error
                if reference is not None:
                    row["reference"] = _reference_figures(
                        reference.label, runs, reference_runs, reference_error
                    )
                rows.append(row)
    return rows, middles


def _timed_run(iterations: int, elapsed_s: float) -> dict[str, Any]:
    return {
        "iterations": int(iterations),
        "elapsed_ms": elapsed_s * 1000.0,
        "rate": iterations / elapsed_s if elapsed_s > 0 else 0.0,
    }


def _warm_reference(reference: Any, game: str, algorithm: str, reporter: Reporter) -> str | None:
    """Compile (or load) the reference build's kernels for ``game`` and ``algorithm`` before
    any of its searches is timed; the error if it cannot."""
    if reference is None:
        return None
    reporter.step(f"warming up {reference.label[:12]}'s {algorithm} for {game}")
    try:
        reference.warm(game, algorithm)
    except Exception as exc:  # its child died
        return f"{type(exc).__name__}: {exc}"
    return None


def _reference_figures(
    label: str, runs: list[dict[str, Any]], reference_runs: list[dict[str, Any]], error: str | None
) -> dict[str, Any]:
    """The reference build's runs, their median rate, and this build's rate over its in each
    pair of runs (one after the other) with their median."""
    ratios = [
        ours["rate"] / theirs["rate"]
        for ours, theirs in zip(runs, reference_runs, strict=False)
        if theirs["rate"] > 0
    ]
    figures: dict[str, Any] = {
        "ref": label,
        "runs": reference_runs,
        "rate_median": (
            statistics.median(r["rate"] for r in reference_runs) if reference_runs else None
        ),
        "ratios": ratios,
        "ratio_median": statistics.median(ratios) if ratios else None,
    }
    if error:
        figures["error"] = error
    return figures


def _optional_module(name: str) -> Any:
    """An engine module if it exists yet (colleagues' work may not have landed), else None."""
    import importlib

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def _time_call(call: Callable[[], Any], runs: int) -> tuple[Any, list[float]]:
    times = []
    value = None
    for _ in range(runs):
        started = time.perf_counter()
        value = call()
        times.append((time.perf_counter() - started) * 1000.0)
    return value, times


def measure_solve(engine: Any, settings: Settings, reporter: Reporter) -> dict[str, Any]:
    """3x3 solved from the empty board: time of engine.solve and node counts of the solvers."""
    reporter.step("3x3 solve")
    state = engine.make_game("tictactoe").new_initial_state()
    report: dict[str, Any] = {
        "target_ms": SOLVE_TARGET_MS,
        "target_nodes": SOLVE_TARGET_NODES,
        "target_nodes_symmetry": SOLVE_TARGET_NODES_SYMMETRY,
    }
    solve = getattr(engine, "solve", None)
    if solve is None:
        report.update(available=False, error="engine.solve is missing")
        return report
    try:
        # The first call may build tables (the perfect player solves on demand): timed apart.
        _, first = _time_call(lambda: solve(state.clone()), 1)
        value, times = _time_call(lambda: solve(state.clone()), settings.solve_runs)
    except Exception as exc:  # e.g. the perfect player has not landed yet
        report.update(available=False, error=f"{type(exc).__name__}: {exc}")
    else:
        report.update(
            available=True,
            value=value,
            first_call_ms=first[0],
            median_ms=statistics.median(times),
            min_ms=min(times),
        )
    # A solve from scratch (fresh table), with and without symmetry, if the perfect player
    # offers its bench hook: engine.solve itself answers from a table kept for the process.
    report["from_scratch"] = []
    benchmark_solve = getattr(_optional_module("engine.perfect"), "benchmark_solve", None)
    if benchmark_solve is not None:
        for symmetry in (False, True):
            runs = [
                benchmark_solve(state.game, symmetry=symmetry) for _ in range(settings.solve_runs)
            ]
            report["from_scratch"].append(
                {
                    "symmetry": symmetry,
                    "value": runs[0]["value"],
                    "nodes": runs[0]["nodes"],
                    "median_ms": statistics.median(r["seconds"] for r in runs) * 1000.0,
                    "min_ms": min(r["seconds"] for r in runs) * 1000.0,
                    "target_nodes": SOLVE_TARGET_NODES_SYMMETRY if symmetry else SOLVE_TARGET_NODES,
                    "target_ms": SOLVE_TARGET_MS,
                }
            )
    # For reference: what a full search from the empty board costs the tree searches (they
    # stop once the value is proven; minimax is left out: it cannot finish 3x3 in a budget).
    searches = []
    for algorithm in ("alphabeta", "perfect"):
        if algorithm not in engine.ALGORITHMS:
            continue
        started = time.perf_counter()
        result = engine.search(state.clone(), algorithm, engine.Budget(time_ms=1000.0), seed=1)
        searches.append(
            {
                "algorithm": algorithm,
                "nodes": int(result.iterations),
                "elapsed_ms": (time.perf_counter() - started) * 1000.0,
                "proven": result.proven,
                "depth": result.depth,
            }
        )
    report["searches"] = searches
    return report


def measure_overrun(
    engine: Any,
    games: list[str],
    settings: Settings,
    reporter: Reporter,
    rows: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Budget overrun: self-play games with a Searcher (tree reuse on, as in real play), each
    move timed here; p50/p99 of (elapsed - budget) in ms. The rows, in ``rows`` if given,
    filled as they are measured."""
    import random

    rows = [] if rows is None else rows
    for game_name in games:
        try:
            game = engine.make_game(game_name)
        except Exception as exc:
            rows.append(_game_missing(game_name, exc))
            continue
        for algorithm in OVERRUN_ALGORITHMS:
            if algorithm not in engine.ALGORITHMS:
                continue
            for budget in settings.overrun_budgets:
                reporter.step(f"overrun {game_name} {algorithm} {budget:g} ms")
                wanted = max(
                    settings.overrun_min_moves, int(settings.overrun_ms_per_budget / budget)
                )
                searcher = engine.Searcher()
                rng = random.Random(7)
                overruns: list[float] = []
                game_number = 0
                error = None
                while len(overruns) < wanted and error is None:
                    game_number += 1
                    key = f"bench:{game_name}:{algorithm}:{budget}:{game_number}"
                    state = game.new_initial_state()
                    # A few random opening moves so that the games differ.
                    for _ in range(min(2, game.max_game_length() // 4)):
                        state.apply_action(rng.choice(state.legal_actions()))
                    while not state.is_terminal() and len(overruns) < wanted:
                        started = time.perf_counter()
                        try:
                            result = searcher.search(
                                state,
                                algorithm,
                                engine.Budget(time_ms=budget),
                                seed=len(overruns),
                                game_key=key,
                            )
                        except Exception as exc:
                            error = f"{type(exc).__name__}: {exc}"
                            break
                        overruns.append((time.perf_counter() - started) * 1000.0 - budget)
                        state.apply_action(result.action)
                    searcher.forget(key)
                row: dict[str, Any] = {
                    "game": game_name,
                    "algorithm": algorithm,
                    "budget_ms": budget,
                    "moves": len(overruns),
                }
                if overruns:
                    row.update(
                        p50_ms=percentile(overruns, 50),
                        p99_ms=percentile(overruns, 99),
                        max_ms=max(overruns),
                        within_target=sum(o <= OVERRUN_TARGET_MS for o in overruns) / len(overruns),
                    )
                if error:
                    row["error"] = error
                rows.append(row)
    return rows


# --- warm worker round trip -----------------------------------------------------------------


def round_trip_request() -> Any:
    """A tiny search: random, 1 iteration, 3x3 after one move."""
    from engine.options import Budget
    from engine.worker import SearchRequest

    return SearchRequest("tictactoe", {}, (4,), "random", Budget(iterations=1), seed=1)


def answer(request: Any) -> Any:
    """The worker's job, run in a process pool's process (engine/worker.py's ``run``)."""
    from engine.search import Searcher
    from engine.worker import run

    return run(Searcher(), request)


def _warm() -> bool:
    import engine

    engine.warm_up()
    return True


def measure_round_trip(settings: Settings, reporter: Reporter) -> dict[str, Any]:
    """Round trip of a tiny search: pre-started worker over a Pipe vs run_in_executor."""
    import asyncio
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from client.commands.interrupts import ignore_ctrl_c
    from engine.worker import WorkerProcess

    context = multiprocessing.get_context("spawn")
    reporter.step("round trip: starting a pipe worker")
    worker = WorkerProcess(warm=None)
    request = round_trip_request()
    pipe_times: list[float] = []
    try:
        if not worker.wait_ready(300.0):
            raise RuntimeError("the pipe worker did not start within 300 s")
        reporter.step("round trip: pipe")
        for i in range(settings.round_trips + 5):
            started = time.perf_counter()
            worker.search(i, request)
            worker.recv()
            if i >= 5:  # the first few warm the caches on both sides
                pipe_times.append((time.perf_counter() - started) * 1000.0)
    finally:
        worker.stop()

    reporter.step("round trip: run_in_executor")

    async def executor_times() -> list[float]:
        loop = asyncio.get_running_loop()
        times = []
        with ProcessPoolExecutor(
            max_workers=1, mp_context=context, initializer=ignore_ctrl_c
        ) as pool:
            await loop.run_in_executor(pool, _warm)
            for i in range(settings.round_trips + 5):
                started = time.perf_counter()
                await loop.run_in_executor(pool, answer, request)
                if i >= 5:
                    times.append((time.perf_counter() - started) * 1000.0)
        return times

    pool_times = asyncio.run(executor_times())

    def summary(times: list[float]) -> dict[str, float]:
        return {
            "samples": len(times),
            "p50_ms": percentile(times, 50),
            "p99_ms": percentile(times, 99),
        }

    return {
        "request": "random search, 1 iteration, 3x3 after one move",
        "pipe": summary(pipe_times),
        "run_in_executor": summary(pool_times),
    }


# --- the command ----------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measure the engine's speed",
        description="Measure the engine: iterations (or nodes) per second for each game and "
        "search from the opening and from a middle-game position (median of runs), the 3x3 "
        "solve time and node count, budget overrun (p50/p99 of elapsed - budget), and the "
        "round trip to a warm worker process. Prints a table with the targets of issue 3 "
        "beside the figures. Uses one core; run it on a quiet machine. Ctrl-C (or SIGTERM) "
        "stops it, with the figures measured so far (exit status 130).",
    )
    parser.add_argument(
        "--games",
        nargs="+",
        choices=BENCH_GAMES,
        default=list(BENCH_GAMES),
        metavar="GAME",
        help=f"games to measure, among {', '.join(BENCH_GAMES)} (default: all)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="shrink every measurement (one short run each): for tests, not for figures",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="runs per rate measurement, the median is reported (default: 5, quick: 1)",
    )
    parser.add_argument(
        "--budget-ms",
        type=float,
        default=None,
        help="time per rate run in ms (default: 200, quick: 20)",
    )
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        choices=("rates", "solve", "overrun", "round-trip"),
        metavar="PART",
        help="parts to leave out: rates, solve, overrun, round-trip",
    )
    parser.add_argument(
        "--algorithms",
        nargs="+",
        choices=RATE_ALGORITHMS,
        default=list(RATE_ALGORITHMS),
        metavar="SEARCH",
        help=f"searches whose rates to measure, among {', '.join(RATE_ALGORITHMS)} (default: "
        f"all); {' and '.join(SMALL_BOARD_ONLY)} on {SMALL_BOARD} only",
    )
    parser.add_argument(
        "--ref",
        metavar="REF",
        help="also time the engine of this git commit (e.g. c0f7043, HEAD~3; it needs the "
        "typed front door, c0f7043 or later) in a child process, each run of this build "
        "followed by the same run of that one, and give each rate's ratio to it",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import engine
    from engine.options import MAX_BUDGET_MS

    if args.runs is not None and args.runs < 1:
        print(f"noughts bench: --runs must be at least 1, not {args.runs}", file=sys.stderr)
        return 2
    if args.budget_ms is not None and not 1.0 <= args.budget_ms <= MAX_BUDGET_MS:
        print(
            f"noughts bench: --budget-ms wants milliseconds in 1..{MAX_BUDGET_MS:.0f}, "
            f"got {args.budget_ms:g}",
            file=sys.stderr,
        )
        return 2
    problem = nothing_measured(args)
    if problem is not None:
        print(f"noughts bench: {problem}", file=sys.stderr)
        return 2
    settings = Settings.quick() if args.quick else Settings()
    if args.runs is not None:
        settings = _replace(settings, runs=args.runs)
    if args.budget_ms is not None:
        settings = _replace(settings, rate_budget_ms=args.budget_ms)
    games = list(dict.fromkeys(args.games))
    started = time.perf_counter()
    report: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": args.quick,
        "host": host_info(),
        "settings": {
            "runs": settings.runs,
            "rate_budget_ms": settings.rate_budget_ms,
            "solve_runs": settings.solve_runs,
            "overrun_budgets": list(settings.overrun_budgets),
            "round_trips": settings.round_trips,
        },
        "algorithms": list(engine.ALGORITHMS),
        "games": games,
        # Each part's figures, filled as they are measured (_measure); a part not reached
        # when Ctrl-C stops the bench stays empty.
        "interrupted": False,
        "warm_up_s": None,
        "rates": [],
        "middle_positions": {},
        "solve": None,
        "overrun": [],
        "round_trip": None,
    }
    if args.ref is not None and "rates" in args.skip:
        print("noughts bench: --ref compares the rates: do not skip them", file=sys.stderr)
        return 2
    reference = None
    if args.ref is not None:
        from client.git_engine import GitEngine, GitEngineError, extract

        try:
            commit, tree = extract(args.ref)
        except GitEngineError as exc:
            print(f"noughts bench: --ref: {exc}", file=sys.stderr)
            return 2
        reference = GitEngine(tree, commit)
        report["reference"] = commit
    from client.commands.interrupts import INTERRUPTED, sigterm_as_ctrl_c

    try:
        with sigterm_as_ctrl_c(), Reporter(enabled=not args.quiet) as reporter:
            _measure(engine, report, games, settings, reporter, args, reference)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the figures measured so far
        report["interrupted"] = True
    finally:
        if reference is not None:
            reference.close()
    report["elapsed_s"] = time.perf_counter() - started
    report["host"]["load_average_at_end"] = list(os.getloadavg())
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return INTERRUPTED if report["interrupted"] else 0


def nothing_measured(args: argparse.Namespace) -> str | None:
    """Why the parts and the searches asked for would measure nothing (an empty report, or a
    rate table with no row), or None."""
    if set(args.skip) >= {"rates", "solve", "overrun", "round-trip"}:
        return "--skip leaves nothing to measure"
    algorithms = list(dict.fromkeys(args.algorithms))
    games = list(dict.fromkeys(args.games))
    if "rates" not in args.skip and not any(applies(a, g) for a in algorithms for g in games):
        return (
            f"--algorithms {' '.join(algorithms)} measure nothing on {', '.join(games)} "
            f"({' and '.join(SMALL_BOARD_ONLY)} are for {SMALL_BOARD} only)"
        )
    return None


def _measure(
    engine: Any,
    report: dict[str, Any],
    games: list[str],
    settings: Settings,
    reporter: Reporter,
    args: argparse.Namespace,
    reference: Any,
) -> None:
    """Fill ``report`` with the parts ``args.skip`` does not leave out, each figure as it is
    measured: stopped by Ctrl-C (KeyboardInterrupt), it holds those measured so far."""
    skip = args.skip
    reporter.step("warming up the engine")
    warm_started = time.perf_counter()
    engine.warm_up()
    report["warm_up_s"] = time.perf_counter() - warm_started
    if "rates" not in skip:
        algorithms = list(dict.fromkeys(args.algorithms))
        rows, middles = report["rates"], report["middle_positions"]
        measure_rates(engine, games, settings, reporter, reference, algorithms, rows, middles)
    if "solve" not in skip:
        report["solve"] = measure_solve(engine, settings, reporter)
    if "overrun" not in skip:
        measure_overrun(engine, games, settings, reporter, report["overrun"])
    if "round-trip" not in skip:
        try:
            report["round_trip"] = measure_round_trip(settings, reporter)
        except (EOFError, OSError, RuntimeError) as exc:  # a worker died: say so, go on
            report["round_trip"] = {"error": f"{type(exc).__name__}: {exc}"}


def _replace(settings: Settings, **changes: Any) -> Settings:
    from dataclasses import replace

    return replace(settings, **changes)


# --- output ---------------------------------------------------------------------------------


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ms(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.3f}"


def print_report(report: dict[str, Any]) -> None:
    """Tables of the figures with the targets beside them (rich, on stdout)."""
    from rich.console import Console
    from rich.table import Table

    # Piped output gets a fixed width wide enough for every table (rich defaults to 80).
    console = Console(width=None if sys.stdout.isatty() else 112)
    host = report["host"]
    cpu = f" {host['cpu']}" if host.get("cpu") else ""
    warm_up = report["warm_up_s"]
    console.print(
        f"noughts bench  {report['started_at']}  {host['cpus']} cpus {host['machine']}{cpu}  "
        f"python {host['python']}  engine warm-up "
        + ("interrupted" if warm_up is None else f"{warm_up:.2f} s")
        + ("  [--quick: not real figures]" if report["quick"] else "")
    )

    def yes(ok: bool) -> str:
        return "yes" if ok else "NO"

    if report["rates"]:
        settings = report["settings"]
        table = Table(
            title=f"Search speed from a position (median of {settings['runs']} searches of "
            f"{settings['rate_budget_ms']:g} ms, fresh Searcher, timed by the bench)"
        )
        table.add_column("game")
        table.add_column("search")
        table.add_column("position")
        table.add_column("per second", justify="right")
        table.add_column("unit")
        table.add_column("ms/search", justify="right")
        table.add_column("target", justify="right")
        table.add_column("met")
        reference = report.get("reference")
        if reference:
            table.caption = (
                f"{reference[:12]}: the engine of that commit, each of its runs right after "
                "this build's; ratio: the median of this build's rate over its, run by run"
            )
            table.add_column(f"{reference[:12]} per second", justify="right")
            table.add_column("ratio", justify="right")
        for row in report["rates"]:
            if not row["available"]:
                what = row.get("error", "not available")
                table.add_row(row["game"], row["algorithm"] or "-", "-", "", what)
                continue
            if row["rate_median"] is None:
                error = row.get("error", "no run")
                table.add_row(row["game"], row["algorithm"], row["position"], "", error)
                continue
            target = row["target"]
            ms = statistics.median(r["elapsed_ms"] for r in row["runs"])
            cells = [
                row["game"],
                row["algorithm"],
                row["position"],
                _rate(row["rate_median"]),
                "iterations" if row["unit"] == "iterations/s" else "nodes",
                f"{ms:.1f}",
                _rate(target) if target else "",
                "" if target is None else yes(row["rate_median"] >= target),
            ]
            theirs = row.get("reference")
            if theirs is not None:
                ratio = theirs["ratio_median"]
                cells += [
                    theirs.get("error") or _rate(theirs["rate_median"]),
                    "-" if ratio is None else f"{ratio:.2f}",
                ]
            table.add_row(*cells)
        console.print(table)
    solve = report["solve"]
    if solve is not None:
        table = Table(title="3x3 solved from the empty board")
        for column in ("what", "figure", "target", "met"):
            table.add_column(column)
        if not solve["available"]:
            table.add_row("engine.solve", f"not available ({solve['error']})", "", "")
        else:
            table.add_row(
                "engine.solve value", str(solve["value"]), "0 (draw)", yes(solve["value"] == 0)
            )
            table.add_row(
                "engine.solve time (median, table kept)",
                f"{solve['median_ms']:.3f} ms",
                f"<= {SOLVE_TARGET_MS:g} ms",
                yes(solve["median_ms"] <= SOLVE_TARGET_MS),
            )
            table.add_row("engine.solve first call", f"{solve['first_call_ms']:.3f} ms", "", "")
        for row in solve.get("from_scratch", []):
            label = f"perfect from scratch, symmetry={row['symmetry']}"
            table.add_row(
                f"{label}: time (median)",
                f"{row['median_ms']:.3f} ms (value {row['value']})",
                f"<= {row['target_ms']:g} ms",
                yes(row["median_ms"] <= row["target_ms"]),
            )
            table.add_row(
                f"{label}: nodes",
                f"{row['nodes']:,}",
                f"<= {row['target_nodes']:,}",
                yes(row["nodes"] <= row["target_nodes"]),
            )
        for search in solve.get("searches", []):
            proven = f", proven {search['proven']}" if search["proven"] else ", not proven"
            table.add_row(
                f"engine.search {search['algorithm']} (reference)",
                f"{search['nodes']:,} nodes in {search['elapsed_ms']:.2f} ms{proven}",
                "",
                "",
            )
        console.print(table)
    if report["overrun"]:
        table = Table(
            title="Budget overrun: elapsed - budget per move in ms (self-play with a Searcher, "
            "timed by the bench)"
        )
        table.add_column("game")
        table.add_column("search")
        for column in ("budget", "moves", "p50", "p99", "max", "<= +2 ms", "99% met"):
            table.add_column(column, justify="right")
        for row in report["overrun"]:
            if not row["moves"]:
                table.add_row(
                    row["game"],
                    row["algorithm"] or "-",
                    "",
                    "0",
                    "",
                    "",
                    "",
                    row.get("error", "")[:60],
                )
                continue
            within = row["within_target"]
            table.add_row(
                row["game"],
                row["algorithm"],
                f"{row['budget_ms']:g} ms",
                str(row["moves"]),
                _ms(row["p50_ms"], True),
                _ms(row["p99_ms"], True),
                _ms(row["max_ms"], True),
                f"{within:.1%}",
                yes(within >= 0.99),
            )
        console.print(table)
    trip = report["round_trip"]
    if trip is not None and "error" in trip:
        console.print(f"Warm worker round trip: failed ({trip['error']})")
    elif trip is not None:
        table = Table(title=f"Warm worker round trip ({trip['request']})")
        for column in ("transport", "samples", "p50", "p99"):
            table.add_column(column)
        for key, label in (
            ("pipe", "pre-started process + Pipe"),
            ("run_in_executor", "loop.run_in_executor(ProcessPoolExecutor)"),
        ):
            t = trip[key]
            table.add_row(
                label, str(t["samples"]), f"{t['p50_ms']:.3f} ms", f"{t['p99_ms']:.3f} ms"
            )
        console.print(table)
    loads = (host["load_average_at_start"][0], host["load_average_at_end"][0])
    console.print(
        f"bench took {report['elapsed_s']:.1f} s; 1-minute load average {loads[0]:.2f} at the "
        f"start, {loads[1]:.2f} at the end (the bench itself adds about 1)"
    )
    if report["interrupted"]:
        console.print("interrupted: the figures above are those measured before it stopped")

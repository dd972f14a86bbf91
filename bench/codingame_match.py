"""A match between two CodinGame ultimate tic-tac-toe bots, refereed as CodinGame does.

    .venv/bin/python bench/codingame_match.py --a '.venv/bin/noughts brain --game uttt' \\
        --b '/tmp/cg/bot' --games 40 [--first-ms 1000] [--turn-ms 100] [--grace-ms 50] [--json]

Each bot is a shell command. As on CodinGame, each game starts one process per bot (both at
the game's start) and ends them when it is over. Each turn the bot to move gets, on its
standard input, the opponent's last move (``-1 -1`` on X's first turn), the count of valid
actions and the valid actions (``row col``, 0..8 on the 9x9 grid, sorted), and must answer
one line ``row col`` on its standard output. Its clock runs from the moment its input is
written: ``--first-ms`` for its first turn, ``--turn-ms`` for the later ones; an answer
later than the limit plus ``--grace-ms``, a bot that exits, or an answer that is garbled or
not a valid action loses the game (a forfeit, recorded with its reason). Nothing else: no
opening, the colours alternate (A is X in the even-numbered games); the bots bring their
own randomness. Both bots start when the game starts and X gets its first input at once, so
a bot's start-up counts against its first turn (``--start-ms`` delays X's first input, a head
start CodinGame does not give). A bot's standard error is kept in a file per game and bot
when ``--log-dir`` is given (discarded otherwise).

The rules are the engine's (``engine.make_game("uttt")``): a game that fills the big board
without three won small boards in a row is a draw (CodinGame's referee would give it to the
side with more small boards).

The score is A's mean per-game score (win 1, draw 1/2, loss 0) with a 95% interval from the
normal approximation on the per-game scores (trinomial variance, the games independent:
``engine.rating.elo_interval`` without pairs).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arguments import non_negative_float, positive_float, positive_int  # noqa: E402

from engine import make_game  # noqa: E402
from engine.rating import elo_interval  # noqa: E402

MAX_ANSWER = 256  # bytes: a longer line is garbage


@dataclass
class Forfeit:
    side: str  # "A" or "B"
    colour: str  # "X" or "O"
    reason: str


@dataclass
class GameRecord:
    index: int
    a_colour: str
    result: float  # A's score
    plies: int
    winner: str | None  # "A", "B" or None for a draw
    forfeit: Forfeit | None = None
    moves: list[str] = field(default_factory=list)  # "row col", X first
    # per side: the slowest first turn and the slowest later turn (ms)
    worst_first_ms: dict[str, float] = field(default_factory=dict)
    worst_turn_ms: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


class Bot:
    """One bot process for one game: lines in, one line out within a deadline."""

    def __init__(self, command: str, stderr: IO[bytes] | int) -> None:
        self.process = subprocess.Popen(
            command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,  # its own process group: the shell and what it starts
        )
        assert self.process.stdout is not None and self.process.stdin is not None
        self.stdin = self.process.stdin
        self.fd = self.process.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.buffer = b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.eof = False

    def send(self, text: str) -> str | None:
        """Write ``text``; the reason it could not be written, or None."""
        try:
            self.stdin.write(text.encode())
            self.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            return f"its input is closed ({error.__class__.__name__})"
        return None

    def answer(self, deadline: float) -> tuple[str | None, str | None]:
        """The next line (without its end) by ``deadline`` (perf_counter), or None and why."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_ANSWER:
                return None, f"an answer of over {MAX_ANSWER} bytes without a line end"
            if self.eof:
                code = self.process.poll()
                return None, f"its output ended (exit code {code})"
            left = deadline - time.perf_counter()
            if left <= 0:
                return None, "no answer in time"
            if not self.selector.select(left):
                continue
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                continue
            if not chunk:
                self.eof = True
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace").strip(), None

    def stop(self) -> None:
        """End the process group this bot started (by its id), then reap it."""
        try:
            self.stdin.close()
        except OSError:
            pass
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.selector.close()
        if self.process.stdout is not None:
            self.process.stdout.close()


def parse_answer(text: str) -> tuple[int, int] | None:
    parts = text.split()
    if len(parts) < 2:
        return None
    try:
        row, col = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return row, col


def play_game(index: int, commands: dict[str, str], args: argparse.Namespace) -> GameRecord:
    """One game: A is X when ``index`` is even."""
    game = make_game("uttt")
    grid = game.grid
    state = game.new_initial_state()
    a_colour = "X" if index % 2 == 0 else "O"
    sides = ("A", "B") if a_colour == "X" else ("B", "A")  # by player: 0 = X, 1 = O
    record = GameRecord(index=index, a_colour=a_colour, result=0.5, plies=0, winner=None)
    record.worst_first_ms = {"A": 0.0, "B": 0.0}
    record.worst_turn_ms = {"A": 0.0, "B": 0.0}
    logs: list[IO[bytes]] = []
    bots: list[Bot] = []
    started = time.perf_counter()
    try:
        for player, side in enumerate(sides):
            stderr: IO[bytes] | int = subprocess.DEVNULL
            if args.log_dir:
                path = Path(args.log_dir) / f"game{index:03d}-{side}-{'XO'[player]}.err"
                stderr = path.open("wb")
                logs.append(stderr)
            bots.append(Bot(commands[side], stderr))
        if args.start_ms > 0:  # not CodinGame's: a head start before X's first input
            time.sleep(max(0.0, started + args.start_ms / 1000.0 - time.perf_counter()))
        turns = [0, 0]
        last = (-1, -1)
        while not state.is_terminal():
            player = state.current_player()
            side, bot = sides[player], bots[player]
            valid = sorted(grid.cell(action) for action in state.legal_actions())
            text = f"{last[0]} {last[1]}\n{len(valid)}\n"
            text += "".join(f"{row} {col}\n" for row, col in valid)
            first = turns[player] == 0
            limit = args.first_ms if first else args.turn_ms
            turns[player] += 1
            sent = time.perf_counter()
            problem = bot.send(text)
            line: str | None = None
            if problem is None:
                line, problem = bot.answer(sent + (limit + args.grace_ms) / 1000.0)
            ms = (time.perf_counter() - sent) * 1000.0
            worst = record.worst_first_ms if first else record.worst_turn_ms
            worst[side] = max(worst[side], ms)
            if line is not None and ms > limit + args.grace_ms:
                problem = f"late answer {line[:40]!r}"  # read with the bytes that came late
            elif line is not None:
                cell = parse_answer(line)
                if cell is None:
                    problem = f"garbled answer {line[:40]!r}"
                elif cell not in valid:
                    problem = f"invalid action {line[:40]!r}"
                else:
                    last = cell
            if problem is not None:
                move = "first " if first else ""
                problem = f"{problem} ({move}turn {turns[player]}, ply {state.ply()}, {ms:.0f} ms)"
                record.forfeit = Forfeit(side=side, colour="XO"[player], reason=problem)
                record.winner = "B" if side == "A" else "A"
                break
            state.apply_action(grid.action(*last))
            record.moves.append(f"{last[0]} {last[1]}")
        else:
            winner = state.winner()
            record.winner = None if winner is None else sides[winner]
        record.plies = state.ply()
        record.result = {None: 0.5, "A": 1.0, "B": 0.0}[record.winner]
    finally:
        for bot in bots:
            bot.stop()
        for log in logs:
            log.close()
    record.seconds = time.perf_counter() - started
    return record


def load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "?"


def summary(records: list[GameRecord], args: argparse.Namespace) -> dict[str, Any]:
    wins = sum(r.winner == "A" for r in records)
    losses = sum(r.winner == "B" for r in records)
    draws = len(records) - wins - losses
    estimate = elo_interval(wins, draws, losses) if records else None

    def colour_score(colour: str) -> dict[str, Any]:
        games = [r.result for r in records if r.a_colour == colour]
        return {"games": len(games), "score": sum(games) / len(games) if games else None}

    def worst(side: str, attribute: str) -> float:
        return max((getattr(r, attribute)[side] for r in records), default=0.0)

    return {
        "a": args.a,
        "b": args.b,
        "first_ms": args.first_ms,
        "turn_ms": args.turn_ms,
        "grace_ms": args.grace_ms,
        "start_ms": args.start_ms,
        "games": len(records),
        "a_wins": wins,
        "draws": draws,
        "a_losses": losses,
        "score": None if estimate is None else estimate.score,
        "score_low": None if estimate is None else estimate.score_low,
        "score_high": None if estimate is None else estimate.score_high,
        "interval": "95%, normal approximation on per-game scores (trinomial variance)",
        "a_as_x": colour_score("X"),
        "a_as_o": colour_score("O"),
        "forfeits": [asdict(r.forfeit) | {"game": r.index} for r in records if r.forfeit],
        "worst_first_turn_ms": {side: worst(side, "worst_first_ms") for side in "AB"},
        "worst_later_turn_ms": {side: worst(side, "worst_turn_ms") for side in "AB"},
        "plies_mean": sum(r.plies for r in records) / len(records) if records else None,
        "seconds": sum(r.seconds for r in records),
        "load_start": args.load_start,
        "load_end": load(),
    }


def print_text(result: dict[str, Any]) -> None:
    games = result["games"]
    print(f"A: {result['a']}\nB: {result['b']}")
    print(
        f"limits: first turn {result['first_ms']:g} ms, later {result['turn_ms']:g} ms, "
        f"grace {result['grace_ms']:g} ms, head start {result['start_ms']:g} ms"
    )
    print(
        f"games {games}: A wins {result['a_wins']}, draws {result['draws']}, "
        f"losses {result['a_losses']}"
    )
    if games:
        print(
            f"A's score {result['score']:.3f} [{result['score_low']:.3f}, "
            f"{result['score_high']:.3f}] ({result['interval']})"
        )
    for colour in "XO":
        part = result[f"a_as_{colour.lower()}"]
        if part["games"]:
            print(f"A as {colour}: {part['score']:.3f} over {part['games']} games")
    print(f"forfeits: {len(result['forfeits'])}")
    for forfeit in result["forfeits"]:
        print(
            f"  game {forfeit['game']}: {forfeit['side']} ({forfeit['colour']}) {forfeit['reason']}"
        )
    first, later = result["worst_first_turn_ms"], result["worst_later_turn_ms"]
    for side in "AB":
        print(
            f"worst response {side}: first turn {first[side]:.1f} ms, "
            f"later turns {later[side]:.1f} ms"
        )
    if games:
        print(f"plies per game {result['plies_mean']:.1f}, {result['seconds']:.0f} s of games")
    print(f"load average: start {result['load_start']}, end {result['load_end']}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Play CodinGame ultimate tic-tac-toe bots (shell commands) against each "
        "other through CodinGame's referee protocol: one process per bot per game, the "
        "referee's time limits, forfeits for late, garbled or invalid answers.",
    )
    parser.add_argument("--a", required=True, help="bot A's shell command")
    parser.add_argument("--b", required=True, help="bot B's shell command")
    parser.add_argument(
        "--games", type=positive_int, default=10, help="games (A is X in even ones)"
    )
    parser.add_argument(
        "--first-ms", type=positive_float, default=1000.0, help="a bot's first turn"
    )
    parser.add_argument("--turn-ms", type=positive_float, default=100.0, help="each later turn")
    parser.add_argument(
        "--grace-ms",
        type=non_negative_float,
        default=50.0,
        help="tolerance past the limit before a forfeit",
    )
    parser.add_argument(
        "--start-ms",
        type=non_negative_float,
        default=0.0,
        help="wait this long after starting a game's bots before X's first input (default 0: "
        "as CodinGame, a bot's start-up counts against its first turn)",
    )
    parser.add_argument("--log-dir", help="keep each bot's stderr per game in this directory")
    parser.add_argument(
        "--progress-every", type=positive_int, default=2, help="games per progress line"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.log_dir:
        Path(args.log_dir).mkdir(parents=True, exist_ok=True)
    args.load_start = load()
    commands = {"A": args.a, "B": args.b}
    records: list[GameRecord] = []
    points = 0.0
    for index in range(args.games):
        record = play_game(index, commands, args)
        records.append(record)
        points += record.result
        if (index + 1) % args.progress_every == 0 or index + 1 == args.games:
            forfeits = sum(r.forfeit is not None for r in records)
            print(
                f"[{index + 1}/{args.games}] A {points:g}/{index + 1} "
                f"({points / (index + 1):.3f}), forfeits {forfeits}, load {load()}",
                file=sys.stderr,
                flush=True,
            )
    result = summary(records, args)
    if args.json:
        result["records"] = [asdict(r) for r in records]
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        print_text(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

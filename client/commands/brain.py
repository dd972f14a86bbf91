"""`noughts brain`: a Gomocup brain, speaking the Piskvork protocol on stdin/stdout.

The protocol is engine/piskvork.py (pure); this module is its I/O: it reads the manager's
lines, prints the replies, and runs the searches the protocol asks for (one Searcher, one
game key per game so that alpha-beta keeps its table between the moves of a game).
"""

from __future__ import annotations

import argparse
import io
import sys
from typing import TextIO

from engine.algorithms import ALGORITHMS

DESCRIPTION = """\
Play gomoku as a brain of a Gomocup manager (Piskvork protocol on stdin/stdout): START,
RECTSTART, RESTART, BEGIN, TURN, BOARD ... DONE, TAKEBACK, PLAY, INFO, ABOUT, END, and
SWAP2BOARD ... DONE (the swap2 opening: 0 stones, it opens; 3 or 5, it plays white or
answers SWAP). Freestyle (five or more in a row wins) on boards of 15 to 20 a side; other
rules and sizes get an ERROR line. Each move searches for a share of INFO time_left, at
most INFO timeout_turn, less a safety margin."""

EPILOG = """\
example (a manager's side of the pipe):
  printf 'START 15\\nINFO timeout_turn 1000\\nBEGIN\\nEND\\n' | noughts brain
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "brain",
        help="play gomoku in a Gomocup manager (Piskvork protocol)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--algorithm",
        default="alphabeta",
        choices=sorted(ALGORITHMS),
        help="the search that plays (default: %(default)s)",
    )
    parser.add_argument(
        "--game",
        default="gomoku",
        choices=("gomoku",),
        help="the rule: gomoku, freestyle, on the board size START gives (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the searches")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return serve(sys.stdin, sys.stdout, args.algorithm, seed=args.seed)


def _about() -> str:
    from importlib import metadata

    try:
        version = metadata.version("noughts")
    except metadata.PackageNotFoundError:
        version = "dev"
    return f'name="noughts", version="{version}", author="noughts team", country="-"'


def serve(stdin: TextIO, stdout: TextIO, algorithm: str, *, seed: int | None = None) -> int:
    """The brain's loop until END or the end of input."""
    import engine
    from engine.piskvork import PiskvorkBrain, Think

    if isinstance(stdin, io.TextIOWrapper):
        stdin.reconfigure(errors="replace")
    engine.warm_up([("gomoku", algorithm)])  # compile (or load) before the first timed move
    brain = PiskvorkBrain(about=_about())
    searcher = engine.Searcher()

    def say(line: str) -> None:
        stdout.write(line + "\n")
        stdout.flush()

    for line in stdin:
        pending = brain.feed(line)
        while pending:
            reply = pending.pop(0)
            if not isinstance(reply, Think):
                say(reply)
                continue
            try:
                result = searcher.search(
                    reply.state,
                    algorithm,
                    engine.Budget(time_ms=reply.time_ms),
                    seed=seed,
                    game_key=f"brain-{brain.games}",
                )
            except engine.EngineError as exc:
                brain.cancel()
                say(f"ERROR {exc}")
                break
            pending[:0] = brain.played(result)  # lines, or (swap2) the next search
        if brain.ended:
            break
    return 0

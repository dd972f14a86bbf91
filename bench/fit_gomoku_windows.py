"""Fit the window evaluation of the gomoku `alphabeta` (option fitted_windows at 49c7bd0,
reverted: bench/README.md) on games: Texel tuning (Peter Österlund's method for the chess
engine Texel, 2014; Chess Programming Wiki, "Texel's Tuning Method") of one weight per window
stone count, separate for the side to move and the opponent, and a tempo.

    .venv/bin/python bench/fit_gomoku_windows.py generate --games 1500 --nodes 8000 --out G.jsonl
    .venv/bin/python bench/fit_gomoku_windows.py fit --data G.jsonl

``generate``: self-play of this build's engine (``alphabeta``, default options, a node budget
a move) from random openings (``--opening-plies`` plies within 2 rows and columns of the
centre), one JSON line a game: its moves and the winner.

``fit``: every quiet position after the opening (neither player with a window one stone
short: the positions ``quiet_leaf`` scores) is labelled with the result for the side to move
(1 win, 0.5 draw, 0 loss) and described by the number of windows free of the opponent that
hold 1, 2, 3 stones of the mover, the same for the opponent, and a tempo (constant 1); a last
column, X to move, is fitted and not written (the same for every leaf of one search). The
weights minimise the mean of ``(result - sigmoid(w . f))**2`` (Gauss-Newton, a small ridge)
on the games not numbered 4 mod 5, the others held out; the default window evaluation
(``weights[count] = 8**(count - 1)``, its scale and X to move fitted) is fitted the same way
for comparison. The weights are printed in evaluation units, ``SCALE`` a logit.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from arguments import count, iterations, non_negative_float, positive_int

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

N = 15
OPENING_RADIUS = 2
SCALE = 200  # evaluation units a logit


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def draw_opening(game: Any, plies: int, rng: random.Random) -> list[int]:
    """``plies`` random moves within OPENING_RADIUS of the centre that do not end the game."""
    centre = (N - 1) // 2
    box = [
        r * N + c
        for r in range(centre - OPENING_RADIUS, centre + OPENING_RADIUS + 1)
        for c in range(centre - OPENING_RADIUS, centre + OPENING_RADIUS + 1)
    ]
    while True:
        state = game.new_initial_state()
        for action in rng.sample(box, plies):
            state.apply_action(action)
            if state.is_terminal():
                break
        else:
            return list(state.history())


def generate(args: argparse.Namespace) -> None:
    import engine

    engine.warm_up([("gomoku", "alphabeta")])
    game = engine.make_game("gomoku")
    searcher = engine.Searcher()
    rng = random.Random(args.seed)
    budget = engine.Budget(iterations=args.nodes)
    start = time.time()
    wins = [0, 0, 0]
    with open(args.out, "w") as out:
        for index in range(args.games):
            moves = draw_opening(game, args.opening_plies, rng)
            state = engine.replay(game, moves)
            key = f"fit:{args.seed}:{index}"
            while not state.is_terminal():
                result = searcher.search(
                    state, "alphabeta", budget, seed=rng.randrange(1 << 30), game_key=key
                )
                state.apply_action(int(result.action))
            searcher.forget(key)
            returns = state.returns()
            winner = 0 if returns[0] > 0 else 1 if returns[1] > 0 else -1
            wins[winner] += 1
            record = {"moves": list(state.history()), "winner": winner, "opening": len(moves)}
            out.write(json.dumps(record) + "\n")
            out.flush()
            if (index + 1) % 10 == 0 or index + 1 == args.games:
                _log(
                    f"{index + 1}/{args.games} games, {time.time() - start:.0f} s, "
                    f"X {wins[0]} O {wins[1]} draws {wins[-1]}"
                )


def window_counts(counts: np.ndarray, q: int, k: int) -> np.ndarray:
    """How many windows free of the other player hold 1 .. k - 2 stones of q."""
    free = counts[counts[:, 1 - q] == 0, q]
    return np.bincount(free, minlength=k + 1)[1 : k - 1]


def positions(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(window features, default evaluation for the mover, result for the mover, game index)
    of every quiet position after the opening. Features: the mover's windows of 1, 2, 3
    stones, the opponent's, tempo, X to move."""
    import engine
    from engine.alphabeta_driver import mnk_context
    from engine.kernels import alphabeta_mnk as K

    game = engine.make_game("gomoku")
    context = mnk_context(game)
    context.set_patterns(False)
    k = game.k
    rows, defaults, results, games = [], [], [], []
    with open(path) as data:
        records = [json.loads(line) for line in data]
    for index, record in enumerate(records):
        moves, winner = record["moves"], record["winner"]
        context.set_position(moves[: record["opening"]])
        for ply in range(record["opening"], len(moves)):
            mover = ply & 1
            info = context.info
            if info[K.FOURS] == 0 and info[K.FOURS + 1] == 0:
                counts = context.game.counts
                row = np.concatenate(
                    [
                        window_counts(counts, mover, k),
                        window_counts(counts, 1 - mover, k),
                        [1.0, 1.0 - mover],
                    ]
                )
                rows.append(row)
                defaults.append(info[K.EVAL] if mover == 0 else -info[K.EVAL])
                results.append(0.5 if winner < 0 else 1.0 if winner == mover else 0.0)
                games.append(index)
            K.place(moves[ply], mover, context.game, info)
    return np.array(rows, float), np.array(defaults, float), np.array(results), np.array(games)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def texel_fit(x: np.ndarray, y: np.ndarray, ridge: float, steps: int = 100) -> np.ndarray:
    """The weights minimising mean((y - sigmoid(x w))**2) + ridge |w|**2 on standardised
    columns (constant columns not penalised): Gauss-Newton steps, Levenberg-Marquardt damping."""
    std = x.std(axis=0)
    used = std > 0
    scale = np.where(used, std, 1.0)
    z = x / scale
    penalty = np.where(used, ridge, 0.0)
    w = np.zeros(x.shape[1])

    def error(w: np.ndarray) -> float:
        return float(np.mean((y - _sigmoid(z @ w)) ** 2) + np.sum(penalty * w**2))

    damping = 1e-3
    current = error(w)
    for _ in range(steps):
        s = _sigmoid(z @ w)
        jac = z * (s * (1 - s))[:, None]
        grad = jac.T @ (y - s) / len(y) - penalty * w
        hess = jac.T @ jac / len(y) + np.diag(penalty)
        step = np.linalg.solve(hess + damping * np.diag(np.diag(hess) + 1e-12), grad)
        trial = error(w + step)
        if trial < current:
            w, current, damping = w + step, trial, damping / 3
            if np.max(np.abs(step)) < 1e-8:
                break
        else:
            damping *= 10
    return w / scale


def _errors(x: np.ndarray, y: np.ndarray, w: np.ndarray, held: np.ndarray) -> str:
    train = np.mean((y[~held] - _sigmoid(x[~held] @ w)) ** 2)
    test = np.mean((y[held] - _sigmoid(x[held] @ w)) ** 2)
    return f"train {train:.4f} held out {test:.4f}"


def fit(args: argparse.Namespace) -> None:
    start = time.time()
    x, default, y, games = positions(args.data)
    held = (games % 5) == 4
    _log(
        f"{len(y)} quiet positions from {games.max() + 1} games ({held.sum()} held out), "
        f"{time.time() - start:.0f} s; a constant: held out "
        f"{np.mean((y[held] - y[~held].mean()) ** 2):.4f}"
    )
    base = np.column_stack([default / 1024, x[:, -1]])
    wb = texel_fit(base[~held], y[~held], args.ridge)
    _log(f"default window evaluation (scale, X to move fitted): {_errors(base, y, wb, held)}")
    _log(f"  {wb[0] / 1024:.6f} a logit an evaluation unit ({1024 / wb[0]:.1f} units a logit)")
    w = texel_fit(x[~held], y[~held], args.ridge)
    _log(f"windows, mover/opponent, tempo (X to move fitted): {_errors(x, y, w, held)}")
    short = x[:, :-1]
    ws = texel_fit(short[~held], y[~held], args.ridge)
    _log(f"  the same without X to move: {_errors(short, y, ws, held)}")
    names = [f"{side} windows of {c}" for side in ("mover", "opponent") for c in (1, 2, 3)]
    names += ["tempo", "X to move"]
    for name, v in zip(names, w, strict=True):
        _log(f"  {name:>22} {v:+.5f} a logit, {v * SCALE:+.2f} units")
    _log(f"  tempo with X to move {(w[-2] + w[-1]) * SCALE:+.2f} units, O {w[-2] * SCALE:+.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="self-play games to fit on")
    gen.add_argument("--games", type=positive_int, default=600)
    gen.add_argument("--nodes", type=iterations, default=4000, help="node budget a move")
    gen.add_argument("--opening-plies", type=count, default=4)
    gen.add_argument("--seed", type=int, default=1)
    gen.add_argument("--out", required=True)
    fitter = sub.add_parser("fit", help="fit the weights on generated games")
    fitter.add_argument("--data", required=True, help="games from generate (JSON lines)")
    fitter.add_argument("--ridge", type=non_negative_float, default=1e-5)
    args = parser.parse_args()
    if args.command == "generate":
        generate(args)
    else:
        fit(args)


if __name__ == "__main__":
    main()

"""Fit the gomoku evaluation of `alphabeta` (AlphaBetaOptions.fitted) on games: Texel tuning
(Peter Österlund's method for the chess engine Texel, 2014; Chess Programming Wiki, "Texel's
Tuning Method"), with the line-shape and per-cell combination features of the Gomocup
engines (Rapfi, Embryo).

    .venv/bin/python bench/fit_gomoku_eval.py generate --games 1500 --nodes 8000 --out G.jsonl
    .venv/bin/python bench/fit_gomoku_eval.py fit --data G.jsonl
        [--write engine/kernels/gomoku_fitted.py] [--windows-only]

``generate``: self-play of this build's engine (``alphabeta``, default options, a node budget
a move, not a time budget) from random openings (``--opening-plies`` plies within 2 rows and
columns of the centre, as the arena's balanced openings), one JSON line a game: its moves and
the winner. Progress on stderr.

``fit``: every quiet position of those games (after the opening, neither player with a window
one stone short: the positions the search scores statically, ``quiet_leaf``) is labelled
with the result for the side to move (1 win, 0.5 draw, 0 loss) and described by
``features``, relative to the side to move: the mover's and the opponent's counts of each
shape over the empty cells and four directions, of each per-cell combination of shapes, of
windows holding one, two, three stones of one player only, the window-count evaluation and a
tempo. The weights w minimise the mean of ``(result - sigmoid(w . f))**2`` (Texel's error;
Gauss-Newton steps with a small ridge) on the games not numbered 4 mod 5, the others held
out. ``--write`` writes them as the engine's integer constants, ``FITTED_SCALE`` evaluation
units a logit (the search maps a score s to the value tanh(s / 400) = 2 sigmoid(s / 200) - 1,
so 200 units a logit keeps the fitted odds: Texel's scaling constant K is the fit's own).
``--windows-only`` fits the window features alone, which the search evaluates without
keeping line shapes (faster, measured a worse fit). Progress on stderr.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

N = 15
OPENING_RADIUS = 2
FITTED_SCALE = 200  # evaluation units a logit (above)


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


def features(context: Any, mover: int) -> np.ndarray:
    """The fitted evaluation's features of the context's position for ``mover``, laid out as
    its weights (alphabeta_mnk.fitted_eval: row 0 the mover's, row 1 the opponent's)."""
    from engine.kernels import alphabeta_mnk as K

    g, info = context.game, context.info
    out = np.zeros((2, K.FIT_WIDTH))
    for row, q in ((0, mover), (1, 1 - mover)):
        out[row, K.F_SHAPE : K.F_SHAPE + 9] = g.shape_count[q]
        out[row, K.F_COMBO : K.F_COMBO + K.COMBOS] = g.combo_count[q]
        out[row, K.F_THREES] = info[K.THREES + q]
        out[row, K.F_ONES] = g.wcount[q, 1]
        out[row, K.F_TWOS] = g.wcount[q, 2]
    out[:, K.F_SHAPE + K.NONE] = out[:, K.F_COMBO + K.NO_COMBO] = 0  # the rest: no weight
    windows = info[K.EVAL] if mover == 0 else -info[K.EVAL]
    out[0, K.F_WINDOWS] = windows / 1024
    out[0, K.F_TEMPO] = 1
    return out.ravel()


def positions(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, result for the mover, game index) of every quiet position after the opening
    (neither player with a window one stone short: the positions ``quiet_leaf`` scores). The
    last column, X to move, is fitted and not written: the first player's edge, which the
    mover's tempo would otherwise absorb, is the same for every leaf of one search."""
    import engine
    from engine.alphabeta_driver import _mnk_context
    from engine.kernels import alphabeta_mnk as K

    game = engine.make_game("gomoku")
    context = _mnk_context(game)
    context.set_patterns(False, fitted=True, lines=True)
    rows, results, games = [], [], []
    with open(path) as data:
        records = [json.loads(line) for line in data]
    start = time.time()
    for index, record in enumerate(records):
        moves, winner = record["moves"], record["winner"]
        context.set_position(moves[: record["opening"]])
        for ply in range(record["opening"], len(moves)):
            mover = ply & 1
            info = context.info
            if info[K.FOURS] == 0 and info[K.FOURS + 1] == 0:
                rows.append(np.append(features(context, mover), 1.0 - mover))
                results.append(0.5 if winner < 0 else 1.0 if winner == mover else 0.0)
                games.append(index)
            K.place(moves[ply], mover, context.game, info)
        if (index + 1) % 200 == 0:
            _log(f"features: {index + 1}/{len(records)} games, {time.time() - start:.0f} s")
    return np.array(rows), np.array(results), np.array(games)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def texel_fit(x: np.ndarray, y: np.ndarray, ridge: float, steps: int = 50) -> np.ndarray:
    """The weights minimising mean((y - sigmoid(x w))**2) + ridge |w|**2 (on standardised
    columns, the tempo's not penalised): Gauss-Newton steps (Levenberg-Marquardt damping),
    from the logistic regression's start."""
    used = np.flatnonzero(x.std(axis=0) > 0)
    constant = np.flatnonzero((x.std(axis=0) == 0) & (x[0] != 0))
    scale = np.ones(x.shape[1])
    scale[used] = x[:, used].std(axis=0)
    cols = np.concatenate([used, constant])
    z = x[:, cols] / scale[cols]
    w = np.zeros(cols.size)
    penalty = np.full(cols.size, ridge)
    penalty[used.size :] = 0.0

    def error(w: np.ndarray) -> float:
        return float(np.mean((y - _sigmoid(z @ w)) ** 2) + ridge * np.sum(w[: used.size] ** 2))

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
            if np.max(np.abs(step)) < 1e-7:
                break
        else:
            damping *= 10
    out = np.zeros(x.shape[1])
    out[cols] = w / scale[cols]
    return out


def fit(args: argparse.Namespace) -> None:
    from engine.kernels import alphabeta_mnk as K

    start = time.time()
    x, y, games = positions(args.data)
    _log(f"{len(y)} quiet positions from {games.max() + 1} games, {time.time() - start:.0f} s")
    held = (games % 5) == 4
    if args.windows_only:  # the window features alone: the search keeps no line shapes
        keep = [K.F_THREES, K.F_ONES, K.F_TWOS, K.F_WINDOWS, K.F_TEMPO]
        mask = np.zeros(x.shape[1], dtype=bool)
        for row in (0, 1):
            mask[[row * K.FIT_WIDTH + col for col in keep]] = True
        mask[-1] = True  # X to move
        x = np.where(mask, x, 0.0)
    w = texel_fit(x[~held], y[~held], args.ridge)
    weights = np.round(w[:-1] * FITTED_SCALE * K.FIT_UNIT).astype(np.int64)
    for name, part in (("train", ~held), ("held out", held)):
        if not part.any():
            continue
        mse = np.mean((y[part] - _sigmoid(x[part] @ w)) ** 2)
        base = np.mean((y[part] - y[~held].mean()) ** 2)
        _log(f"{name}: {part.sum()} positions, Texel error {mse:.4f} (a constant: {base:.4f})")
    names = _names()
    _log(f"  X to move {w[-1]:+.5f} a logit (not written)")
    for i in np.flatnonzero(weights):
        _log(f"  {names[i]:>24} {w[i]:+.5f} a logit, {weights[i]:+d}/{K.FIT_UNIT}")
    if args.write:
        text = _module(weights, args, len(y), int(games.max() + 1))
        Path(args.write).write_text(text)
        _log(f"wrote {args.write}")


def _names() -> list[str]:
    from engine.kernels import alphabeta_mnk as K

    shapes = ["NONE", "ONE", "TWO", "OPEN_TWO", "THREE", "OPEN_THREE", "FOUR", "OPEN_FOUR"]
    shapes.append("FIVE")
    combos = ["NO_COMBO", "DOUBLE_FOUR", "FOUR_THREE", "DOUBLE_THREE", "FOUR_TWO"]
    combos += ["THREE_THREE", "THREE_TWO", "TWO_TWO"]
    names = []
    for side in ("mover", "opponent"):
        row = [f"{side} {s}" for s in shapes] + [f"{side} {c}" for c in combos]
        row += [f"{side} windows of 3", f"{side} window eval/1024", f"{side} tempo"]
        row += [f"{side} windows of 1", f"{side} windows of 2"]
        assert len(row) == K.FIT_WIDTH
        names += row
    return names


def _module(weights: np.ndarray, args: argparse.Namespace, count: int, games: int) -> str:
    rows = []
    for start in range(0, weights.size, 11):  # half a row a line
        rows.append("    " + ", ".join(str(int(v)) for v in weights[start : start + 11]) + ",")
    return (
        '"""The fitted gomoku evaluation\'s weights (alphabeta_mnk.fitted_eval), written by\n'
        f"bench/fit_gomoku_eval.py fit --data {Path(args.data).name} --ridge {args.ridge}"
        f"{' --windows-only' if args.windows_only else ''}: Texel\n"
        f"tuning (logistic regression of the game result) on {count} quiet positions of\n"
        f"{games} self-play games. Row 0 the mover's, row 1 the opponent's, in 1/FIT_UNIT of an\n"
        'evaluation unit (200 units a logit)."""\n\n'
        "# fmt: off\nFITTED_WEIGHTS = (\n" + "\n".join(rows) + "\n)\n# fmt: on\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="self-play games to fit on")
    gen.add_argument("--games", type=int, default=600)
    gen.add_argument("--nodes", type=int, default=4000, help="node budget a move")
    gen.add_argument("--opening-plies", type=int, default=4)
    gen.add_argument("--seed", type=int, default=1)
    gen.add_argument("--out", required=True)
    fitter = sub.add_parser("fit", help="fit the weights on generated games")
    fitter.add_argument("--data", required=True, help="games from generate (JSON lines)")
    fitter.add_argument("--ridge", type=float, default=1e-5)
    fitter.add_argument("--write", help="write the weights to this module")
    fitter.add_argument(
        "--windows-only", action="store_true", help="fit the window features alone (no shapes)"
    )
    args = parser.parse_args()
    if args.command == "generate":
        generate(args)
    else:
        fit(args)


if __name__ == "__main__":
    main()

"""The gomoku evaluation fitted on games (``fitted``: alphabeta_mnk.fitted_eval, weights from
bench/fit_gomoku_eval.py): kept incrementally by place/remove, and it knows an open three."""

from __future__ import annotations

import random

import numpy as np

import engine
from engine.alphabeta_driver import _mnk_context
from engine.kernels import alphabeta_mnk as K
from tests.engine.test_alphabeta import _scratch_eval, _scratch_shape

STEPS = ((0, 1), (1, 0), (1, 1), (1, -1))


def _fitted_context() -> K.MNKContext:
    context = _mnk_context(engine.make_game("gomoku"))
    context.set_patterns(False, fitted=True)
    context.set_position([])
    return context


def _scratch_combo(shapes: list[int]) -> int:
    """A cell's combination of shapes, as the rule of ``combo_of`` states it."""
    fours, open_threes = shapes.count(K.FOUR), shapes.count(K.OPEN_THREE)
    others = shapes.count(K.THREE) + shapes.count(K.OPEN_TWO)
    if fours >= 2:
        return K.DOUBLE_FOUR
    if fours and open_threes:
        return K.FOUR_THREE
    if open_threes >= 2:
        return K.DOUBLE_THREE
    if fours and others:
        return K.FOUR_TWO
    if open_threes and shapes.count(K.THREE):
        return K.THREE_THREE
    if open_threes and shapes.count(K.OPEN_TWO):
        return K.THREE_TWO
    return K.TWO_TWO if others >= 2 else K.NO_COMBO


def _scratch_fitted(context: K.MNKContext, mover: int) -> int:
    """fitted_eval recomputed from the board: the shapes and combinations of the empty
    cells, the windows of one, two and three stones and the window-count evaluation,
    weighted by K.FITTED."""
    g, info = context.game, context.info
    shape_count = np.zeros((2, 9), dtype=np.int64)
    combo_count = np.zeros((2, K.COMBOS), dtype=np.int64)
    for cell in range(225):
        if g.cells[cell] != 0:
            continue
        for q in (0, 1):
            shapes = [_scratch_shape(g.cells, 15, 15, cell, step, q) for step in STEPS]
            for v in shapes:
                shape_count[q, v] += 1
            combo_count[q, _scratch_combo(shapes)] += 1
    assert g.shape_count.tolist() == shape_count.tolist()
    assert g.combo_count.tolist() == combo_count.tolist()
    windows = _scratch_eval(context)  # checks info[EVAL] on the way (fitted keeps it)
    assert windows == info[K.EVAL]
    fit = K.FITTED
    score = int(fit[0, K.F_TEMPO])
    for row, q in ((0, mover), (1, 1 - mover)):
        score += int(fit[row, K.F_SHAPE : K.F_SHAPE + 9] @ shape_count[q])
        score += int(fit[row, K.F_COMBO : K.F_COMBO + K.COMBOS] @ combo_count[q])
        stones = [
            sum(g.cells[c] == q + 1 for c in window)
            for window in context.t.win_cells
            if not any(g.cells[c] == 2 - q for c in window)
        ]
        for column, count in ((K.F_ONES, 1), (K.F_TWOS, 2), (K.F_THREES, 3)):
            score += int(fit[row, column]) * stones.count(count)
    score += (int(fit[0, K.F_WINDOWS]) * (windows if mover == 0 else -windows)) // 1024
    return score // K.FIT_UNIT


def test_the_fitted_evaluation_follows_place_and_remove():
    """After every step of random make/unmake sequences the kernel's fitted evaluation, for
    both movers, equals the one recomputed from the board (shapes, combinations, windows)."""
    context = _fitted_context()
    g, info = context.game, context.info
    rng = random.Random(1413)
    stack: list[int] = []
    box = [r * 15 + c for r in range(3, 12) for c in range(3, 12)]  # dense: combinations
    for step in range(160):
        empty = [c for c in box if g.cells[c] == 0]
        if stack and rng.random() < 0.35:
            K.remove(stack.pop(), len(stack) & 1, g, info)
        else:
            c = rng.choice(empty)
            K.place(c, len(stack) & 1, g, info)
            stack.append(c)
        if step % 4 == 0:
            for mover in (0, 1):
                assert K.fitted_eval(mover, g, info) == _scratch_fitted(context, mover), step
    assert g.combo_count[:, 1:].sum() > 0  # the sequences made combinations


def _fitted_score(moves: list[int], mover: int) -> int:
    context = _fitted_context()
    context.set_position(moves)
    return int(K.fitted_eval(mover, context.game, context.info))


def test_the_fitted_evaluation_prefers_the_movers_open_three():
    """Same stones, X to move: X's three in a row open at both ends scores above X's three
    stones apart, and O's open three (O to move) above O's stones apart; and X scores below
    when O has the open three."""
    centre = 7 * 15 + 7

    def at(r: int, c: int) -> int:
        return centre + r * 15 + c

    o_far = [at(-4, -4), at(4, 4), at(-4, 4)]
    x_row = [at(0, -1), at(0, 0), at(0, 1)]
    x_apart = [at(0, -3), at(3, 0), at(-3, 2)]

    def interleave(xs: list[int], os: list[int]) -> list[int]:
        return [m for pair in zip(xs, os, strict=True) for m in pair]

    assert _fitted_score(interleave(x_row, o_far), 0) > _fitted_score(interleave(x_apart, o_far), 0)
    # O's open three, X to move, against O's stones apart
    o_row = [at(-1, 0), at(0, 0), at(1, 0)]
    o_apart = [at(-3, 0), at(0, 3), at(2, -3)]
    x_far = [at(-4, -4), at(4, 4), at(-4, 4), at(4, -4)]
    assert _fitted_score(interleave(x_far[:3], o_row) + [x_far[3]], 1) > _fitted_score(
        interleave(x_far[:3], o_apart) + [x_far[3]], 1
    )
    assert _fitted_score(interleave(x_far[:3], o_row), 0) < _fitted_score(
        interleave(x_far[:3], o_apart), 0
    )


def test_a_search_gives_back_the_shapes_it_set_aside():
    """The threat searches run with the line shapes set aside (FIT_ASIDE); after a search
    with them (root VCF, VCT, defence, quiet-leaf VCFs) the shapes, combinations and the
    fitted evaluation are those of the position, as recomputed from the board."""
    from engine.alphabeta_driver import _CONTEXTS

    game = engine.make_game("gomoku")
    # bench/gomoku_nodes.py's sixth position: searched to the node budget
    moves = [48, 54, 100, 138, 86, 84, 69, 65, 63, 95, 108, 50, 68, 153, 55, 143]
    state = engine.replay(game, moves)
    result = engine.search(
        state, "alphabeta", engine.Budget(iterations=30_000), seed=1, options={"fitted": True}
    )
    assert result.iterations > 1_000
    context = _CONTEXTS[("mnk", 15, 15, 5)]
    assert context.t.params[K.P_FITTED] == K.FIT_LINES
    assert list(context.game.cells.nonzero()[0]) == sorted(moves)
    for mover in (0, 1):
        assert K.fitted_eval(mover, context.game, context.info) == _scratch_fitted(context, mover)

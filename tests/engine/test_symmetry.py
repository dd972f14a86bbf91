"""Board symmetries: the classes of equivalent moves, checked against exact values, and their
use at the MCTS root."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

import engine
from engine.kernels import kernel_game, root_state
from engine.kernels.layout import H_FORCED
from engine.mcts import mcts_search
from engine.options import MCTSOptions
from engine.symmetry import grid_permutations, representative_moves


@pytest.fixture(scope="module", autouse=True)
def _compiled() -> None:
    engine.warm_up()


def _kept(keep: np.ndarray | None, legal: list[int]) -> list[int]:
    assert keep is not None
    return [a for a in legal if keep[a]]


def test_grid_permutations_form_the_dihedral_group() -> None:
    for uttt, m, n, size in ((False, 3, 3, 8), (False, 5, 5, 8), (False, 3, 5, 4), (True, 0, 0, 8)):
        perms = grid_permutations(uttt, m, n)
        assert perms.shape[0] == size
        assert (perms[0] == np.arange(perms.shape[1])).all()
        rows = {tuple(p) for p in perms}
        assert len(rows) == size
        for p in perms:
            assert sorted(p) == list(range(perms.shape[1]))  # a permutation
            for q in perms:
                assert tuple(p[q]) in rows  # closed under composition


def test_known_classes_of_moves() -> None:
    # Empty 3x3: corner, edge, centre.
    assert _kept(representative_moves(False, 3, 3, []), list(range(9))) == [0, 1, 4]
    # 5x5 after the centre: 5 classes (corner 0, 1, 2, diagonal 6, orthogonal 7).
    state = engine.replay(engine.make_game("5x5"), [12])
    assert _kept(representative_moves(False, 5, 5, [12]), state.legal_actions()) == [0, 1, 2, 6, 7]
    # Empty uttt: 15 classes ((81 + 3 * 1 + 4 * 9) / 8 by Burnside's lemma).
    keep = representative_moves(True, 0, 0, [])
    assert keep is not None and int(keep.sum()) == 15
    # A corner then an edge cell next to it: only the diagonal symmetry is gone too.
    assert representative_moves(False, 3, 3, [0, 1]) is None


def test_uttt_symmetry_keeps_the_forced_board() -> None:
    game = engine.make_game("uttt")
    # 40 (centre of the centre): the opponent is sent to board 4, its centre taken: a corner
    # or an edge cell.
    state = engine.replay(game, [40])
    forced = int(root_state(state, kernel_game(game))[H_FORCED])
    assert forced == 4
    assert _kept(representative_moves(True, 0, 0, [40], forced), state.legal_actions()) == [36, 37]
    # 36 (board 4, cell 0) keeps the diagonal symmetry, and sends the opponent to board 0,
    # which that symmetry keeps too.
    state = engine.replay(game, [36])
    forced = int(root_state(state, kernel_game(game))[H_FORCED])
    kept = _kept(representative_moves(True, 0, 0, [36], forced), state.legal_actions())
    assert len(kept) == 6  # board 0: 3 diagonal cells + 3 cells above it


@pytest.mark.parametrize(("name", "params"), [("tictactoe", {}), ("mnk", {"m": 4, "n": 4, "k": 3})])
def test_equivalent_moves_have_equal_exact_values(name: str, params: dict) -> None:
    """In every symmetric position met in random games, each legal move has the exact value
    of the representative of its class, so searching representatives loses nothing."""
    game = engine.make_game(name, **params)
    kg = kernel_game(game)
    rng = random.Random(11)
    checked = 0
    for _ in range(60):
        state = game.new_initial_state()
        while not state.is_terminal():
            keep = representative_moves(False, kg.m, kg.n, state.history())
            if keep is not None:
                perms = grid_permutations(False, kg.m, kg.n)
                occupied = np.zeros(perms.shape[1], dtype=np.int8)
                for ply, action in enumerate(state.history()):
                    occupied[action] = 1 + (ply & 1)
                fixing = perms[(occupied[perms] == occupied).all(axis=1)]
                for action in state.legal_actions():
                    rep = int(fixing[:, action].min())
                    assert keep[rep] and rep in state.legal_actions()
                    values = []
                    for a in (action, rep):
                        child = state.clone()
                        child.apply_action(a)
                        values.append(None if child.is_terminal() else engine.solve(child))
                    assert values[0] == values[1]
                    checked += 1
            state.apply_action(rng.choice(state.legal_actions()))
    assert checked > 50


def _search(state: engine.State, **options: object) -> engine.SearchResult:
    return mcts_search(
        state,
        deadline=None,
        iterations=3000,
        seed=5,
        clock=time.perf_counter,
        options=MCTSOptions(**options),  # type: ignore[arg-type]
        cache={},
    )


def test_mcts_searches_one_move_per_class_at_a_symmetric_root() -> None:
    state = engine.replay(engine.make_game("5x5"), [12])
    reduced = _search(state)
    assert reduced.visits is not None
    assert [a for a, _ in reduced.visits] == [0, 1, 2, 6, 7]
    full = _search(state, symmetry=False)
    assert full.visits is not None and len(full.visits) == 24
    # No symmetry: every move, with or without the option.
    plain = engine.replay(engine.make_game("5x5"), [12, 7, 3])
    assert _search(plain) == _search(plain, symmetry=False)


def test_a_symmetric_root_starts_a_fresh_tree() -> None:
    """A reused root has every move as a child: at a symmetric root the tree is rebuilt with
    one move per class (without the option, the tree is reused)."""
    game = engine.make_game("5x5")
    for symmetry in (True, False):
        cache: dict = {}
        common = {"deadline": None, "seed": 5, "clock": time.perf_counter, "cache": cache}
        # The first search keeps every move (so both runs play the same one, with UCB1's c).
        first_options = MCTSOptions(symmetry=False, c=2**0.5, verify=0)
        first = mcts_search(
            engine.replay(game, [12]), iterations=5000, options=first_options, **common
        )
        assert first.action == 7
        state = engine.replay(game, [12, 7, 17])  # the middle column: symmetric left-right
        keep = representative_moves(False, 5, 5, state.history())
        assert keep is not None
        again = mcts_search(state, iterations=1, options=MCTSOptions(symmetry=symmetry), **common)
        assert again.visits is not None
        inherited = sum(v for _, v in again.visits)
        if symmetry:
            assert inherited <= 1
            assert all(keep[a] for a, _ in again.visits)
        else:
            assert inherited > 10


def test_a_symmetric_root_still_takes_a_win_in_one() -> None:
    win = engine.replay(engine.make_game("tictactoe"), [4, 1, 0, 3])  # X 4, 0; O 1, 3: 8 wins
    keep = representative_moves(False, 3, 3, win.history())
    assert keep is not None and keep[8]
    assert _search(win).action == 8


@pytest.mark.parametrize(("m", "n"), [(8, 8), (20, 20), (3, 20), (20, 3), (4, 16)])
@pytest.mark.parametrize("algorithm", ["mcts", "uct", "alphabeta"])
def test_every_search_opens_a_big_board_with_an_even_side(m: int, n: int, algorithm: str) -> None:
    """A big board's first move is its centre (the cells near stones have none to be near):
    on an even side one of the central cells, and the one the symmetric root keeps. It was
    the other, and mcts and uct crashed with no root move (max() of an empty list)."""
    state = engine.make_game("mnk", m=m, n=n, k=3).new_initial_state()
    result = engine.search(state, algorithm, engine.Budget(iterations=200), seed=1)
    row, col = divmod(result.action, n)
    assert row in {(m - 1) // 2, m // 2} and col in {(n - 1) // 2, n // 2}

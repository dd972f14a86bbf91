"""The MCTS node records (engine.kernels.tree): after seeded searches of several games, the
records form one tree whose visits and wins add up, and a copied subtree holds the same
records as the original."""

from __future__ import annotations

import time

import numpy as np
import pytest

import engine
from engine.kernels import kernel_game, root_state
from engine.kernels.layout import seed_rng
from engine.mcts import _run, _Tree

# 42 moves of a random uttt game (random.Random(12)); the solver proves nodes below it.
UTTT_LATE = (60, 58, 44, 77, 47, 24, 54, 5, 53, 76, 43, 66, 35, 72, 2, 26, 75, 29, 20, 19, 9)
UTTT_LATE += (6, 56, 18, 7, 69, 61, 71, 73, 10, 11, 22, 36, 4, 40, 15, 62)

# (game, params, moves before the search)
POSITIONS = [
    ("uttt", {}, []),
    ("uttt", {}, [40, 36, 4, 37, 13, 41]),
    ("5x5", {}, [12]),
    ("gomoku", {}, [112, 113]),
    ("mnk", {"m": 4, "n": 6, "k": 3}, []),
]


def _search(  # noqa: ANN202
    name: str,
    params: dict,
    moves: list[int],
    *,
    prior: int,
    expand: int,
    seed: int,
    minimax: float = 0.0,
    solver: bool = False,
    iterations: int = 6000,
    value_scale: float = 0.2,
):
    state = engine.replay(engine.make_game(name, **params), moves)
    game = kernel_game(state.game)
    tree = _Tree(1 << 10)  # small, so that the search grows it on the way
    done = _run(
        tree,
        root_state(state, game),
        game,
        deadline=None,
        iterations=iterations,
        clock=time.perf_counter,
        rng=seed_rng(seed),
        c=0.7,
        solver=solver,
        decisive=True,
        expand=expand,
        prior=prior,
        minimax=minimax,
        value_scale=value_scale,
    )
    assert done == iterations
    return tree


def _children(tree: _Tree, node: int) -> range:
    f = int(tree.first[node])
    return range(f, f + int(tree.count[node])) if f > 0 else range(0)


@pytest.mark.parametrize(("name", "params", "moves"), POSITIONS)
@pytest.mark.parametrize(("prior", "expand"), [(0, 1), (8, 4)])
def test_the_records_form_one_tree_whose_visits_add_up(
    name: str, params: dict, moves: list[int], prior: int, expand: int
) -> None:
    tree = _search(name, params, moves, prior=prior, expand=expand, seed=3)
    size = tree.size
    assert tree.capacity > 1 << 10 or size < 1 << 10
    assert int(tree.parent[0]) == -1
    seen = [0] * size
    for node in range(size):
        kids = _children(tree, node)
        for j in kids:
            seen[j] += 1
            assert int(tree.parent[j]) == node
        real = int(tree.visits[node]) - (prior if node > 0 else 0)
        assert 0 <= int(tree.wins[node]) <= 2 * int(tree.visits[node])
        if not kids:
            continue
        # Each iteration through a node goes on into one child, except the playouts it ran
        # before its expansion (``expand``; one more if every move lost) and none at the root.
        below = sum(int(tree.visits[j]) - prior for j in kids)
        assert 0 <= real - below <= (0 if node == 0 else expand + 1)
        if prior == 0:
            # Half-points of the two players sum to 2 a visit (no solver: no draw floors).
            from_children = 2 * below - sum(int(tree.wins[j]) for j in kids)
            assert 0 <= int(tree.wins[node]) - from_children <= 2 * (real - below)
    assert seen == [0] + [1] * (size - 1)  # every node but the root has one parent
    assert sum(int(tree.visits[j]) - prior for j in _children(tree, 0)) == 6000


@pytest.mark.parametrize(("name", "params", "moves"), POSITIONS[:3])
def test_a_copied_subtree_holds_the_same_records(name: str, params: dict, moves: list[int]) -> None:
    tree = _search(name, params, moves, prior=8, expand=4, seed=5, minimax=0.3)
    root = max(_children(tree, 0), key=lambda j: int(tree.visits[j]))
    copy = tree.subtree(root)
    pairs = [(root, 0)]  # (node in tree, node in copy), walked together by their actions
    while pairs:
        old, new = pairs.pop()
        for field in ("visits", "wins", "proven", "floor", "count"):
            assert int(getattr(copy, field)[new]) == int(getattr(tree, field)[old])
        assert copy.values[new] == tree.values[old]
        assert int(copy.action[new]) == int(tree.action[old])
        old_kids = _children(tree, old)
        new_kids = _children(copy, new)
        assert [int(tree.action[j]) for j in old_kids] == [int(copy.action[j]) for j in new_kids]
        for j in new_kids:
            assert int(copy.parent[j]) == new
        pairs.extend(zip(old_kids, new_kids, strict=True))
    assert int(copy.parent[0]) == -1


@pytest.mark.parametrize("moves", [[], [40, 36, 4, 37, 13, 41], list(UTTT_LATE)])
def test_implicit_minimax_values_are_backed_up(moves: list[int]) -> None:
    """With implicit minimax backups every expanded node holds one minus the best value of
    its children for its mover (a proven child at its proven value), and a leaf the
    heuristic value of the move into it; without them the values are untouched."""
    tree = _search("uttt", {}, moves, prior=8, expand=4, seed=7, minimax=0.3, solver=True)
    proven_value = {1: 1.0, 2: 0.5, 3: 0.0}
    expanded = 0
    for node in range(tree.size):
        kids = _children(tree, node)
        if not kids:
            if node > 0:
                assert 0.0 <= tree.values[node] <= 1.0
            continue
        expanded += 1
        best = max(proven_value.get(int(tree.proven[j]), float(tree.values[j])) for j in kids)
        assert tree.values[node] == pytest.approx(1.0 - best, abs=1e-12)
    assert expanded > 100
    plain = _search("uttt", {}, moves, prior=8, expand=4, seed=7, solver=True)
    assert not plain.values[: plain.size].any()


@pytest.mark.parametrize("scale", [0.2, 0.5])
def test_leaf_values_are_the_heuristic_at_the_option_scale(scale: float) -> None:
    """Option value_scale: a leaf's implicit minimax value is uttt_child_value of its move,
    from its parent's position, with the tanh scale the search was given."""
    from engine.kernels.uttt import uttt_child_value

    moves = [40, 36, 4, 37, 13, 41]
    tree = _search("uttt", {}, moves, prior=8, expand=4, seed=7, minimax=0.3, iterations=2000)
    scaled = _search(
        "uttt",
        {},
        moves,
        prior=8,
        expand=4,
        seed=7,
        minimax=0.3,
        iterations=2000,
        value_scale=scale,
    )
    leaves = [j for j in range(1, scaled.size) if int(scaled.first[j]) == 0][:300]
    assert len(leaves) == 300
    differ = 0
    for j in leaves:
        path = []
        node = int(scaled.parent[j])
        while node > 0:
            path.append(int(scaled.action[node]))
            node = int(scaled.parent[node])
        state = engine.replay(engine.make_game("uttt"), moves + path[::-1])
        st = root_state(state, kernel_game(state.game))
        assert scaled.values[j] == uttt_child_value(st, int(scaled.action[j]), scale)
        differ += uttt_child_value(st, int(scaled.action[j]), 0.2) != scaled.values[j]
    assert (differ > 0) == (scale != 0.2)
    same = np.array_equal(tree.nodes[: tree.size * 8], scaled.nodes[: scaled.size * 8])
    assert same == (scale == 0.2)  # the default scale: the same search

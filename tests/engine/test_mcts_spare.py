"""The arrays of a dropped MCTS tree go to the process's next new search tree: taken by
``_Tree.new``, zeroed where they were used, the search on them the same as on new arrays;
arrays something else still refers to stay where they are."""

from __future__ import annotations

import numpy as np

import engine
from engine import mcts
from engine.kernels.tree import NODE_SIZE
from engine.mcts import _Tree

OPENING_REPLY = [40, 36]


def _search(seed: int) -> tuple[object, ...]:
    state = engine.replay(engine.make_game("uttt"), OPENING_REPLY)
    r = engine.search(state, "mcts", engine.Budget(iterations=3000), seed=seed)
    return (r.action, r.iterations, r.value, r.pv, r.visits, r.proven)


def test_a_dropped_tree_leaves_its_arrays_zeroed_to_the_next_search_tree() -> None:
    mcts._spare.clear()
    _search(seed=1)  # its tree is dropped with the fresh Searcher's cache
    assert len(mcts._spare) == 1
    nodes, values, used = mcts._spare[0]
    assert used > 1000 and nodes[NODE_SIZE : NODE_SIZE * used].any()
    tree = _Tree.new()
    assert tree.nodes is nodes and tree.values is values and not mcts._spare
    assert tree.size == 1 and int(tree.parent[0]) == -1 and int(tree.action[0]) == -1
    assert not tree.nodes.reshape(-1, NODE_SIZE)[:, :6].any()  # visits .. count
    assert not tree.nodes.reshape(-1, NODE_SIZE)[1:, 6:].any()  # action, parent
    assert not tree.values.any()


def test_a_search_on_spare_arrays_is_the_search_on_new_ones() -> None:
    for seed in (2, 3):
        mcts._spare.clear()
        _search(seed=seed + 10)  # leaves its arrays, used, to the next search
        on_spare = _search(seed=seed)
        mcts._spare.clear()
        assert _search(seed=seed) == on_spare


def test_arrays_referred_to_elsewhere_are_not_given_away() -> None:
    mcts._spare.clear()
    tree = _Tree()
    tree.visits[:] = 7
    visits = tree.visits
    del tree
    assert not mcts._spare
    other = _Tree.new()
    assert not np.shares_memory(other.nodes, visits)
    assert (visits == 7).all()

"""Root parallelization across real worker processes: the merged result is exactly the merge
of the same searches run one by one (fixed seeds and iteration budgets)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import engine
from engine import Budget
from engine.errors import EngineError
from engine.mcts import mcts_search, merge_root_results
from engine.options import MCTSOptions
from engine.parallel import RootParallel


def _single(state: engine.State, seed: int, cache: dict) -> engine.SearchResult:  # type: ignore[type-arg]
    return mcts_search(
        state,
        deadline=None,
        iterations=1500,
        seed=seed,
        clock=time.perf_counter,
        options=MCTSOptions(),
        cache=cache,
    )


@pytest.fixture(scope="module")
def parallel() -> Iterator[RootParallel]:
    with RootParallel(2) as parallel:
        yield parallel


def test_root_parallel_merges_the_searches_of_each_worker(parallel: RootParallel) -> None:
    game = engine.make_game("5x5")
    state = engine.replay(game, [12, 7])
    merged = parallel.search(state, "mcts", Budget(iterations=1500), seed=40, game_key="g")
    caches: list[dict] = [{"game_key": "g"}, {"game_key": "g"}]  # type: ignore[type-arg]
    expected = merge_root_results([_single(state, 40 + i, caches[i]) for i in range(2)])
    assert merged.action == expected.action
    assert merged.visits == expected.visits
    assert merged.iterations == expected.iterations == 3000
    assert merged.value == pytest.approx(expected.value)
    # Each worker reuses its own tree for the game, even where the merged move is not the
    # one it would have played: the next search of the game matches one-by-one searches
    # with the same per-worker caches.
    state.apply_action(merged.action)
    state.apply_action(state.legal_actions()[0])
    again = parallel.search(state, "mcts", Budget(iterations=1500), seed=41, game_key="g")
    expected = merge_root_results([_single(state, 41 + i, caches[i]) for i in range(2)])
    assert again.visits == expected.visits and again.action == expected.action
    assert sum(v for _, v in again.visits or ()) > again.iterations  # inherited visits


def test_root_parallel_refuses_searches_without_root_statistics(parallel: RootParallel) -> None:
    state = engine.make_game("tictactoe").new_initial_state()
    with pytest.raises(EngineError, match="root statistics of mcts and uct"):
        parallel.search(state, "alphabeta", Budget(iterations=100))
    with pytest.raises(EngineError, match="unknown option"):
        parallel.search(state, "mcts", Budget(iterations=100), options={"workers": 2})
    with pytest.raises(EngineError, match="positive number"):
        RootParallel(0)

"""The search front door and every algorithm on solved positions (win in one, must block)."""

from __future__ import annotations

import pickle

import pytest

import engine
from engine import EngineError, SearchResult

SEARCHING = [name for name in engine.ALGORITHMS if name != "random"]


def _rc(n: int, *cells: tuple[int, int]) -> list[int]:
    return [r * n + c for r, c in cells]


# (game, params, moves, the moves that win / the moves that block)
WIN_IN_ONE = [
    # X to move has 2 (a row) and O threatens 5: take the win, do not block.
    ("tictactoe", {}, [0, 3, 1, 4], {2}),
    ("tictactoe", {}, [4, 0, 8, 2, 6, 5], {7}),  # O threatens 1; X wins at 7
    ("5x5", {}, [0, 5, 1, 6, 2, 7], {3}),
    (
        "gomoku",
        {},
        _rc(15, (7, 3), (0, 0), (7, 4), (0, 1), (7, 5), (0, 2), (7, 6), (0, 3)),
        set(_rc(15, (7, 2), (7, 7))),
    ),
    (
        "uttt",
        {},
        [41, 47, 24, 54, 1, 17, 73, 14, 45, 4, 36, 0, 6, 61, 64, 10, 9, 8, 79, 63, 75, 28, 12]
        + [27, 58, 42, 59, 46, 13, 37, 16, 71, 74, 22, 43, 66, 33, 55, 15, 57, 29, 23, 52, 67]
        + [40, 38, 25, 77, 48, 35, 72, 31, 44],
        {56, 60},
    ),
]
MUST_BLOCK = [
    ("tictactoe", {}, [0, 4, 1], {2}),
    ("tictactoe", {}, [4, 0, 2], {6}),
    ("5x5", {}, [0, 12, 1, 13, 2], {3}),
    (
        "gomoku",
        {},
        _rc(15, (7, 3), (7, 2), (7, 4), (0, 0), (7, 5), (0, 1), (7, 6)),
        set(_rc(15, (7, 7))),
    ),
    (
        "uttt",
        {},
        [63, 0, 4, 40, 38, 21, 33, 60, 62, 73, 11, 26, 79, 68, 47, 25, 67, 44, 77, 50, 52, 69]
        + [56, 24, 58, 37, 12, 28, 10, 13, 39, 34, 65, 1, 16, 66, 30, 31, 36, 3, 72, 8, 76, 43]
        + [71, 78, 55, 9, 7, 75, 54, 5, 49],
        {14, 45, 46, 80},  # the moves that leave O no win in one
    ),
]


def _budget(algorithm: str, game: str) -> dict[str, int]:
    """Iteration budgets: playouts for MC searches, nodes for tree searches."""
    if algorithm in ("alphabeta", "minimax", "perfect"):
        return {"iterations": 200_000}
    return {"iterations": 20_000 if game == "gomoku" else 2_000}


def _cases(positions: list[tuple]) -> list[tuple]:
    """Every searching algorithm on every position, but ``perfect`` on 3x3 only (it refuses
    bigger boards: tests/engine/test_solvers.py). Plain ``uct`` has no decisive or
    anti-decisive rule: it finds these moves by search alone, at the fixed seed and budget."""
    return [
        (algorithm, *position)
        for algorithm in SEARCHING
        for position in positions
        if algorithm != "perfect" or position[0] == "tictactoe"
    ]


@pytest.mark.parametrize(("algorithm", "game", "params", "moves", "wins"), _cases(WIN_IN_ONE))
def test_takes_a_win_in_one(algorithm, game, params, moves, wins):
    state = engine.replay((game, params), moves)
    result = engine.search(state, algorithm=algorithm, seed=3, **_budget(algorithm, game))
    assert result.action in wins
    after = state.clone()
    after.apply_action(result.action)
    assert after.winner() == state.current_player()


@pytest.mark.parametrize(("algorithm", "game", "params", "moves", "block"), _cases(MUST_BLOCK))
def test_blocks_a_loss_in_one(algorithm, game, params, moves, block):
    state = engine.replay((game, params), moves)
    result = engine.search(state, algorithm=algorithm, seed=3, **_budget(algorithm, game))
    assert result.action in block


@pytest.mark.parametrize("algorithm", engine.ALGORITHMS)
def test_result_fields_and_round_trips(algorithm):
    state = engine.make_game("tictactoe").new_initial_state()
    result = engine.search(state, algorithm=algorithm, iterations=300, seed=11)
    assert result.action in state.legal_actions()
    assert -1.0 <= result.value <= 1.0
    assert 0.0 <= result.win_probability <= 1.0
    assert result.algorithm == algorithm
    assert result.seed == 11
    assert result.budget_ms is None  # an iteration budget alone: no deadline
    assert result.elapsed_ms >= 0.0
    assert result.pv[0] == result.action
    assert pickle.loads(pickle.dumps(result)) == result
    data = result.to_dict()
    assert data["action"] == result.action and isinstance(data["pv"], list)
    assert SearchResult(**{**data, "pv": tuple(data["pv"]), "visits": result.visits}) == result


@pytest.mark.parametrize("algorithm", engine.ALGORITHMS)
def test_fixed_seed_and_iterations_give_a_fixed_move(algorithm):
    state = engine.replay(("mnk", {"m": 4, "n": 4, "k": 3}), [5, 6])
    moves = {
        engine.search(state, algorithm=algorithm, iterations=400, seed=5).action for _ in range(3)
    }
    assert len(moves) == 1


def test_default_budget_is_time_and_explicit_budget_is_kept():
    state = engine.make_game("tictactoe").new_initial_state()
    assert engine.search(state, algorithm="random").budget_ms == 100.0
    assert engine.search(state, algorithm="random", budget_ms=7).budget_ms == 7
    both = engine.search(state, algorithm="random", budget_ms=100.0, iterations=5)
    assert both.budget_ms == 100.0


def test_bad_requests_raise_engine_error():
    state = engine.make_game("tictactoe").new_initial_state()
    with pytest.raises(EngineError, match="unknown algorithm"):
        engine.search(state, algorithm="oracle")
    with pytest.raises(EngineError, match="budget_ms"):
        engine.search(state, algorithm="random", budget_ms=0)
    with pytest.raises(EngineError, match="iterations"):
        engine.search(state, algorithm="random", iterations=0)
    over = engine.replay(("tictactoe", {}), [0, 3, 1, 4, 2])
    with pytest.raises(EngineError, match="over"):
        engine.search(over, algorithm="random")


def test_searcher_keeps_and_forgets_per_game_caches():
    searcher = engine.Searcher()
    state = engine.make_game("tictactoe").new_initial_state()
    result = searcher.search(state, algorithm="mcts", iterations=50, seed=1, game_key="g1")
    assert result.action in state.legal_actions()
    assert "g1" in searcher._caches
    searcher.forget("g1")
    assert "g1" not in searcher._caches
    searcher.forget("never-seen")


def test_injected_clock_sets_the_deadline():
    ticks = iter(range(1_000_000))
    searcher = engine.Searcher(clock=lambda: next(ticks) * 0.001)  # 1 ms per clock read
    state = engine.make_game("gomoku").new_initial_state()
    # The Python searcher reads the injected clock as it goes (the kernel converts the
    # deadline to its own monotonic clock once).
    result = searcher.search(state, algorithm="alphabeta", budget_ms=20, seed=1, compiled=False)
    # The fake clock passes 20 ms after about 20 reads: the search stops then, far from the end.
    assert result.depth is not None and result.depth < 20
    assert 20 <= result.elapsed_ms <= 22


@pytest.mark.parametrize(("game", "params", "moves", "wins"), WIN_IN_ONE[:3] + MUST_BLOCK[:3])
def test_python_uct_fallback_takes_wins_and_blocks(game, params, moves, wins):
    """The pure-Python UCT (the stand-in ``mcts`` while no compiled one is present)."""
    import time

    from engine.python_uct import python_uct_search

    state = engine.replay((game, params), moves)
    result = python_uct_search(
        state, deadline=None, iterations=300, seed=1, clock=time.perf_counter, options={}, cache={}
    )
    assert result.action in wins
    assert result.pv[0] == result.action and -1.0 <= result.value <= 1.0


def test_python_uct_fallback_plays_a_whole_game():
    import time

    from engine.python_uct import python_uct_search

    state = engine.make_game("uttt").new_initial_state()
    while not state.is_terminal():
        result = python_uct_search(
            state, deadline=None, iterations=20, seed=state.ply(), clock=time.perf_counter,
            options={}, cache={},
        )  # fmt: skip
        state.apply_checked(result.action)
    assert state.returns()[0] + state.returns()[1] == 0

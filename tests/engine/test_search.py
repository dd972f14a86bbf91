"""The search front door and every algorithm on solved positions (win in one, must block)."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

import engine
from engine import Budget, EngineError, SearchResult

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


def _budget(algorithm: str, game: str) -> Budget:
    """Iteration budgets: playouts for MC searches, nodes for tree searches."""
    if algorithm in ("alphabeta", "minimax", "perfect"):
        return Budget(iterations=200_000)
    return Budget(iterations=20_000 if game == "gomoku" else 2_000)


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
    result = engine.search(state, algorithm, _budget(algorithm, game), seed=3)
    assert result.action in wins
    after = state.clone()
    after.apply_action(result.action)
    assert after.winner() == state.current_player()


@pytest.mark.parametrize(("algorithm", "game", "params", "moves", "block"), _cases(MUST_BLOCK))
def test_blocks_a_loss_in_one(algorithm, game, params, moves, block):
    state = engine.replay((game, params), moves)
    result = engine.search(state, algorithm, _budget(algorithm, game), seed=3)
    assert result.action in block


@pytest.mark.parametrize("algorithm", engine.ALGORITHMS)
def test_result_fields_and_round_trips(algorithm):
    state = engine.make_game("tictactoe").new_initial_state()
    result = engine.search(state, algorithm, Budget(iterations=300), seed=11)
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
        engine.search(state, algorithm, Budget(iterations=400), seed=5).action for _ in range(3)
    }
    assert len(moves) == 1


def test_default_budget_is_time_and_explicit_budget_is_kept():
    state = engine.make_game("tictactoe").new_initial_state()
    assert engine.search(state, "random").budget_ms == 100.0
    assert engine.search(state, "random", Budget(time_ms=7)).budget_ms == 7
    both = engine.search(state, "random", Budget(time_ms=100.0, iterations=5))
    assert both.budget_ms == 100.0


def test_bad_requests_raise_engine_error():
    state = engine.make_game("tictactoe").new_initial_state()
    with pytest.raises(EngineError, match="unknown algorithm"):
        engine.search(state, "oracle")
    with pytest.raises(EngineError, match="time budget"):
        engine.search(state, "random", Budget(time_ms=0))
    with pytest.raises(EngineError, match="iteration budget"):
        engine.search(state, "random", Budget(iterations=0))
    with pytest.raises(EngineError, match="a budget needs"):
        Budget()
    over = engine.replay(("tictactoe", {}), [0, 3, 1, 4, 2])
    with pytest.raises(EngineError, match="over"):
        engine.search(over, "random")


def test_searcher_keeps_and_forgets_per_game_caches():
    searcher = engine.Searcher()
    state = engine.make_game("tictactoe").new_initial_state()
    result = searcher.search(state, "mcts", Budget(iterations=50), seed=1, game_key="g1")
    assert result.action in state.legal_actions()
    assert searcher.kept_games() == ["g1"]
    searcher.forget("g1")
    assert searcher.kept_games() == [] and searcher.kept_bytes == 0
    searcher.forget("never-seen")


def test_kept_trees_are_bounded_in_bytes_least_recently_searched_first():
    """Issue 11: a worker kept the trees of up to 64 games whatever their size."""
    state = engine.replay(("uttt", {}), [40])
    sizes = {}
    for key in ("a", "b"):
        probe = engine.Searcher()
        probe.search(state, "mcts", Budget(iterations=3000), seed=1, game_key=key)
        sizes[key] = probe.kept_bytes
    assert sizes["a"] == sizes["b"] > 0
    # Room for two trees: a third game's tree pushes out the least recently searched.
    searcher = engine.Searcher(max_tree_bytes=2 * sizes["a"])
    for key in ("a", "b"):
        searcher.search(state, "mcts", Budget(iterations=3000), seed=1, game_key=key)
    searcher.search(state, "mcts", Budget(iterations=3000), seed=1, game_key="a")  # a is fresh
    searcher.search(state, "mcts", Budget(iterations=3000), seed=1, game_key="c")
    assert searcher.kept_games() == ["a", "c"]
    assert searcher.kept_bytes <= searcher.max_tree_bytes
    # A tree bigger than the whole bound is not kept at all: the next search starts afresh.
    small = engine.Searcher(max_tree_bytes=sizes["a"] // 2)
    small.search(state, "mcts", Budget(iterations=3000), seed=1, game_key="a")
    assert small.kept_games() == [] and small.kept_bytes == 0
    again = small.search(state, "mcts", Budget(iterations=1), seed=1, game_key="a")
    assert again.visits is not None and sum(v for _, v in again.visits) == 1


def test_options_are_typed_and_misspellings_are_refused():
    state = engine.make_game("tictactoe").new_initial_state()
    budget = Budget(iterations=50)
    with pytest.raises(EngineError, match=r"unknown option 'cc' for mcts \(did you mean 'c'\?\)"):
        engine.search(state, "mcts", budget, options={"cc": 1.0})
    with pytest.raises(EngineError, match="random takes no options"):
        engine.search(state, "random", budget, options={"c": 1.0})
    with pytest.raises(EngineError, match="option solver must be bool"):
        engine.search(state, "mcts", budget, options={"solver": "false"})
    with pytest.raises(EngineError, match="option max_depth must be int or none"):
        engine.search(state, "alphabeta", budget, options={"max_depth": 2.5})
    with pytest.raises(EngineError, match="takes MCTSOptions, not UCTOptions"):
        engine.search(state, "mcts", budget, options=engine.UCTOptions())
    typed = engine.search(state, "mcts", budget, seed=1, options=engine.MCTSOptions(c=1.0))
    mapped = engine.search(state, "mcts", budget, seed=1, options={"c": 1.0})
    assert replace(typed, elapsed_ms=0.0) == replace(mapped, elapsed_ms=0.0)
    # A whole number in a float option is a float: as an int it reached the kernels, which
    # numba compiled again for it inside a timed move (a walk's finding: 4.7 s past 10 ms).
    whole = engine.parse_options(engine.MCTSOptions, {"c": 2, "value_scale": 1}, "mcts")
    assert type(whole.c) is float and type(whole.value_scale) is float
    assert (
        engine.parse_options(engine.AlphaBetaOptions, {"max_depth": 3}, "alphabeta").max_depth == 3
    )


def test_budgets_parse_from_text():
    assert Budget.parse("100ms") == Budget(time_ms=100.0) == Budget.parse("100")
    assert Budget.parse("0.5s") == Budget(time_ms=500.0)
    assert Budget.parse("5000it") == Budget(iterations=5000)
    assert str(Budget(time_ms=100.0, iterations=5)) == "100ms+5it"
    for bad in ("-5ms", "fast", "1.5it", "0ms", ""):
        with pytest.raises(EngineError, match="budget"):
            Budget.parse(bad)


def test_an_iteration_budget_has_a_maximum_as_a_time_budget_does():
    """A time budget stops at an hour (MAX_BUDGET_MS); an iteration budget had no bound, and
    mcts:1000000000it was searched (its int32 node records overflow past about 10^9 visits)."""
    assert Budget(iterations=100_000_000).iterations == 100_000_000
    assert Budget.parse("100000000it") == Budget(iterations=100_000_000)
    for bad in (100_000_001, 10**9):
        with pytest.raises(EngineError, match=r"iteration budget is 1\.\.100000000, not"):
            Budget(iterations=bad)
    with pytest.raises(EngineError, match="iteration budget"):
        Budget.parse("1000000000it")


def test_check_algorithm_says_which_algorithm_cannot_play_which_game():
    engine.check_algorithm("perfect", engine.make_game("mnk", m=4, n=4, k=3))
    engine.check_algorithm("mcts", engine.make_game("uttt"))
    for name in ("5x5", "gomoku", "uttt"):
        with pytest.raises(EngineError, match=f"perfect cannot play {name}: .* 16 cells"):
            engine.check_algorithm("perfect", engine.make_game(name))
    with pytest.raises(EngineError, match="unknown algorithm 'oracle'"):
        engine.check_algorithm("oracle", engine.make_game("tictactoe"))
    with pytest.raises(EngineError, match="perfect cannot play gomoku"):
        engine.search(engine.make_game("gomoku").new_initial_state(), "perfect")


def test_injected_clock_sets_the_deadline():
    ticks = iter(range(1_000_000))
    searcher = engine.Searcher(clock=lambda: next(ticks) * 0.001)  # 1 ms per clock read
    state = engine.make_game("gomoku").new_initial_state()
    # The Python searcher reads the injected clock as it goes (the compiled kernels read it
    # too, every few hundred microseconds).
    result = searcher.search(
        state, "alphabeta", Budget(time_ms=20), seed=1, options={"compiled": False}
    )
    # The fake clock passes 20 ms after about 20 reads: the search stops then, far from the end.
    assert result.depth is not None and result.depth < 20
    assert 20 <= result.elapsed_ms <= 22

"""MCTS, plain UCT and flat Monte Carlo on solved positions, with fixed seeds."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

import engine
from engine import Budget
from engine.errors import EngineError
from engine.flat import flat_search
from engine.mcts import mcts_search, merge_root_results, uct_search
from engine.options import MCTSOptions, NoOptions, UCTOptions
from engine.result import SearchResult


@pytest.fixture(scope="session", autouse=True)
def _compiled() -> None:
    engine.warm_up()


OPTIONS: dict[Any, Any] = {mcts_search: MCTSOptions, uct_search: UCTOptions, flat_search: NoOptions}


def run(func: Any, state: Any, iterations: int = 2000, seed: int = 1, cache=None, **options):  # noqa: ANN001
    return func(
        state,
        deadline=None,
        iterations=iterations,
        seed=seed,
        clock=time.perf_counter,
        options=OPTIONS[func](**options),
        cache={} if cache is None else cache,
    )


def position(name: str, actions: list[int], **params: int) -> Any:
    return engine.replay(engine.make_game(name, **params), actions)


# (game, params, moves, the winning move for the player to move)
WIN_IN_ONE = [
    ("tictactoe", {}, [0, 4, 1, 5], 2),
    ("5x5", {}, [0, 24, 1, 23, 2, 22], 3),  # X 0,1,2 -> 3 wins (O threatens 21)
    ("gomoku", {}, [112, 0, 113, 1, 114, 2, 115, 4], 116),  # X 112-115 (111 too); O threatens 3
]


@pytest.mark.parametrize(("name", "params", "moves", "win"), WIN_IN_ONE)
def test_mcts_takes_a_win_in_one(name: str, params: dict, moves: list[int], win: int) -> None:
    state = position(name, moves, **params)
    result = run(mcts_search, state, iterations=200)
    assert win in _winning_moves(state)
    assert result.action in _winning_moves(state)
    assert result.proven == "win"
    assert result.value == 1.0


def test_mcts_blocks_a_loss_in_one() -> None:
    state = position("tictactoe", [0, 4, 8, 3])
    result = run(mcts_search, state, iterations=500)
    assert result.action == 5
    assert result.visits is not None and [a for a, _ in result.visits] == [5]
    state = position("5x5", [5, 6, 24, 7, 20, 8])  # O 6, 7, 8 threatens 9 only
    result = run(mcts_search, state, iterations=2000)
    assert result.action == 9
    state = position("gomoku", [0, 112, 14, 113, 210, 114, 224, 115])  # O has 112..115
    result = run(mcts_search, state, iterations=500)
    assert result.action in (111, 116)
    assert result.proven == "loss"  # an open four cannot be stopped


def test_mcts_proves_a_forced_win_with_a_fork() -> None:
    # X 0, O 1: X plays 4 (threat 8), O blocks 8, X 6 forks 3 and 2.
    state = position("tictactoe", [0, 1])
    result = run(mcts_search, state, iterations=20000)
    assert result.proven == "win"
    assert result.value == 1.0
    after = state.clone()
    after.apply_action(result.action)
    assert _negamax(after) == -1  # the opponent is lost after our move
    # And the opponent of a forced win is proven lost.
    state.apply_action(result.action)
    lost = run(mcts_search, state, iterations=20000)
    assert lost.proven == "loss"
    assert lost.value == -1.0


def test_mcts_proves_the_empty_board_a_draw() -> None:
    result = run(mcts_search, position("tictactoe", []), iterations=200000)
    assert result.proven == "draw"
    assert result.value == 0.0
    assert result.iterations < 200000  # the search stops once the root is proven


def test_fixed_seed_and_iterations_give_a_fixed_result() -> None:
    games = [("tictactoe", {}), ("5x5", {}), ("gomoku", {}), ("mnk", {"m": 4, "n": 6, "k": 3})]
    games.append(("uttt", {}))
    for name, params in games:
        state = position(name, [], **params)
        state.apply_action(state.legal_actions()[len(state.legal_actions()) // 2])
        for func in (mcts_search, uct_search, flat_search):
            a = run(func, state, iterations=3000, seed=42)
            b = run(func, state, iterations=3000, seed=42)
            assert a == b
            assert a.iterations == 3000 or a.proven is not None


def test_tree_reuse_keeps_the_visits_below_the_moves_played() -> None:
    state = position("5x5", [12])
    cache: dict = {}
    first = run(mcts_search, state, iterations=20000, cache=cache)
    reply = first.pv[1]
    state.apply_action(first.action)
    state.apply_action(reply)
    second = run(mcts_search, state, iterations=1, cache=cache)
    assert second.visits is not None
    assert sum(v for _, v in second.visits) > 100  # inherited from the first search
    # A position that does not continue the saved game starts a fresh tree.
    other = run(mcts_search, position("5x5", [0]), iterations=1, cache=cache)
    assert other.visits is not None and sum(v for _, v in other.visits) <= 1
    # uct never reuses.
    plain = run(uct_search, state, iterations=1, cache={})
    assert plain.visits is not None and sum(v for _, v in plain.visits) == 1


GAMES = [
    ("tictactoe", {}),
    ("5x5", {}),
    ("mnk", {"m": 3, "n": 8, "k": 3}),
    ("gomoku", {}),
    ("uttt", {}),
]


@pytest.mark.parametrize(("name", "params"), GAMES)
def test_every_search_plays_legal_moves(name: str, params: dict) -> None:
    rng = random.Random(7)
    game = engine.make_game(name, **params)
    for trial in range(4):
        state = game.new_initial_state()
        for _ in range(rng.randrange(0, 12)):
            if state.is_terminal():
                break
            state.apply_action(rng.choice(state.legal_actions()))
        if state.is_terminal():
            continue
        for func in (mcts_search, uct_search, flat_search):
            result = run(func, state, iterations=300, seed=trial)
            assert isinstance(result, SearchResult)
            assert result.action in state.legal_actions()
            assert -1.0 <= result.value <= 1.0
            assert result.pv[0] == result.action
            assert result.visits is not None
            assert {a for a, _ in result.visits} <= set(state.legal_actions())


def test_a_deadline_stops_the_search() -> None:
    state = position("5x5", [])
    start = time.perf_counter()
    result = mcts_search(
        state,
        deadline=start + 0.02,
        iterations=None,
        seed=3,
        clock=time.perf_counter,
        options=MCTSOptions(),
        cache={},
    )
    assert result.iterations > 0
    assert result.action in state.legal_actions()


def test_bad_options_are_refused() -> None:
    with pytest.raises(engine.EngineError):
        run(mcts_search, position("tictactoe", []), c=-1.0)
    with pytest.raises(engine.EngineError):
        run(mcts_search, position("tictactoe", []), reuse="false")


def test_enhancements_switch_off_one_at_a_time() -> None:
    state = position("tictactoe", [0, 4, 8, 3])  # X must block 5
    plain = run(mcts_search, state, iterations=50, solver=False, decisive=False, reuse=False)
    assert plain.proven is None
    assert plain.visits is not None and len(plain.visits) == 5  # no anti-decisive pruning
    enhanced = run(mcts_search, state, iterations=50)
    assert enhanced.visits is not None and [a for a, _ in enhanced.visits] == [5]


def test_merge_root_results_sums_visits() -> None:
    state = position("5x5", [12, 6])
    results = [run(mcts_search, state, iterations=2000, seed=s) for s in range(3)]
    merged = merge_root_results(results)
    assert merged.iterations == sum(r.iterations for r in results)
    totals: dict[int, int] = {}
    for r in results:
        for a, v in r.visits or ():
            totals[a] = totals.get(a, 0) + v
    assert dict(merged.visits or ()) == totals
    assert merged.action == max(totals, key=lambda a: (totals[a], -a))
    proven = SearchResult(action=3, value=1.0, algorithm="mcts", iterations=5, proven="win")
    assert merge_root_results([*results, proven]).action == 3


def test_engine_registry_runs_the_compiled_searches() -> None:
    state = position("tictactoe", [0, 4, 1])
    for algorithm in ("mcts", "uct", "flat"):
        result = engine.search(state, algorithm, Budget(iterations=3000), seed=5)
        assert result.action == 2
        assert result.algorithm == algorithm


def _winning_moves(state: Any) -> set[int]:
    wins = set()
    for a in state.legal_actions():
        child = state.clone()
        child.apply_action(a)
        if child.winner() == state.current_player():
            wins.add(a)
    return wins


def _negamax(state: Any) -> int:
    """Exact value for the player to move (small boards only): the reference for proofs."""
    if state.is_terminal():
        winner = state.winner()
        return 0 if winner is None else (1 if winner == state.current_player() else -1)
    best = -1
    for a in state.legal_actions():
        child = state.clone()
        child.apply_action(a)
        best = max(best, -_negamax(child))
        if best == 1:
            break
    return best


def test_warm_up_compiles_everything_the_searches_call() -> None:
    from engine.kernels import rules, tree

    kernels = (tree.mcts_run, tree.flat_run, tree.compact, rules.replay, rules.legal)
    engine.warm_up()
    before = [len(k.signatures) for k in kernels]
    names = [("tictactoe", {}), ("5x5", {}), ("gomoku", {}), ("mnk", {"m": 3, "n": 4, "k": 3})]
    names.append(("uttt", {}))
    for name, params in names:
        state = position(name, [], **params)
        cache: dict = {}
        first = run(mcts_search, state, iterations=50, cache=cache)
        state.apply_action(first.action)
        run(mcts_search, state, iterations=50, cache=cache)  # reuses (compacts) the tree
        run(uct_search, state, iterations=50)
        run(flat_search, state, iterations=50)
    assert [len(k.signatures) for k in kernels] == before


@pytest.mark.parametrize(
    ("name", "params", "plies"),
    [("tictactoe", {}, (0, 6)), ("mnk", {"m": 3, "n": 4, "k": 3}, (2, 8))],
)
def test_every_proof_is_exact(name: str, params: dict, plies: tuple[int, int]) -> None:
    """Whenever the solver proves a root, the proof matches exact negamax."""
    rng = random.Random(99)
    game = engine.make_game(name, **params)
    proofs = 0
    for trial in range(40):
        state = game.new_initial_state()
        for _ in range(rng.randrange(*plies)):
            state.apply_action(rng.choice(state.legal_actions()))
            if state.is_terminal():
                break
        if state.is_terminal():
            continue
        result = run(mcts_search, state, iterations=3000, seed=trial)
        if result.proven is not None:
            proofs += 1
            exact = _negamax(state)
            assert result.proven == {1: "win", 0: "draw", -1: "loss"}[exact]
            if exact >= 0:  # a proven win (or draw) is kept by the move played
                child = state.clone()
                child.apply_action(result.action)
                assert _negamax(child) == -exact
    assert proofs >= 10


def test_searcher_reuses_the_tree_of_one_game() -> None:
    searcher = engine.Searcher()
    state = position("5x5", [12])
    first = searcher.search(state, "mcts", Budget(iterations=20000), seed=2, game_key="g1")
    state.apply_action(first.action)
    state.apply_action(first.pv[1])
    again = searcher.search(state, "mcts", Budget(iterations=1), seed=2, game_key="g1")
    assert again.visits is not None and sum(v for _, v in again.visits) > 100
    fresh = searcher.search(state, "mcts", Budget(iterations=1), seed=2, game_key="g2")
    assert fresh.visits is not None and sum(v for _, v in fresh.visits) == 1


def test_no_budget_means_the_default_time_budget() -> None:
    state = position("5x5", [])
    for func in (mcts_search, flat_search):
        result = func(
            state,
            deadline=None,
            iterations=None,
            seed=1,
            clock=time.perf_counter,
            options=OPTIONS[func](),
            cache={},
        )
        assert result.iterations > 0


def test_chunking_does_not_change_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the budget loop cuts the iterations into chunks (and where the node records
    grow) leaves the tree, hence the result, unchanged."""
    from engine.kernels import budget

    state = position("5x5", [12, 6])
    whole = run(mcts_search, state, iterations=6000, seed=8)
    monkeypatch.setattr(budget, "ITERATION_CHUNK", 7)
    assert run(mcts_search, state, iterations=6000, seed=8) == whole


def test_flat_plays_each_root_move_in_turn_and_prefers_quick_wins() -> None:
    state = position("5x5", [12, 6, 13, 7, 14, 8])  # X has 12, 13, 14: 11 wins at once
    result = run(flat_search, state, iterations=1900)
    assert result.visits is not None
    counts = {v for _, v in result.visits}
    assert max(counts) - min(counts) <= 1  # round robin
    assert result.action in _winning_moves(state)
    assert result.pv == (result.action,)


def test_verification_refutes_a_trap_the_playouts_miss() -> None:
    """5x5 k=4 after X's centre: the orthogonal reply 7 loses in seven plies (alpha-beta proves
    it), yet its playouts look even, so a 10,000-iteration search sometimes prefers it. The
    alpha-beta check of the chosen move (option verify: its share of the iterations as
    alpha-beta nodes) refutes it, and the tree is otherwise the same."""
    state = position("5x5", [12])
    after = position("5x5", [12, 7])
    assert engine.search(after, "alphabeta", Budget(iterations=20000)).proven == "win"
    trapped = [
        seed
        for seed in range(40)
        if run(mcts_search, state, iterations=10000, seed=seed, verify=0).action == 7
    ]
    assert trapped  # the trap is real for unverified MCTS
    for seed in trapped[:3]:
        plain = run(mcts_search, state, iterations=10000, seed=seed, verify=0)
        checked = run(mcts_search, state, iterations=10000, seed=seed, verify=0.8)
        assert checked.action != 7
        assert checked.iterations == plain.iterations  # the same MCTS, then the check
    with pytest.raises(EngineError, match="verify"):
        run(mcts_search, state, verify=1.5)


def test_both_sides_sharing_one_tree_play_to_the_end() -> None:
    """Self-play through one game_key: each search reuses the tree of the other side's last
    search, whose chosen move the alpha-beta check may have proven (a draw, here at ply 18)
    without proven children. As a new root that proof is recomputed from its children, so
    there is always a move to choose (it used to raise)."""
    searcher = engine.Searcher()
    state = position("5x5", [])
    while not state.is_terminal():
        result = searcher.search(
            state, "mcts", Budget(iterations=2000), seed=state.ply(), game_key="self-play"
        )
        state.apply_checked(result.action)
    assert state.ply() > 18


def _tree_capacity(searcher: engine.Searcher, key: str) -> int:
    return int(searcher._caches[key]["mcts"]["tree"].capacity)


def test_the_tree_grows_only_when_the_copy_fits_in_the_budget(monkeypatch) -> None:  # noqa: ANN001
    """Doubling the node records copies the whole tree (80 ms at 2M nodes): a search whose
    remaining time would not cover the copy goes on without new nodes instead."""
    import engine.mcts as mcts

    state = engine.make_game("uttt").new_initial_state()
    # Iteration budgets: 60,000 iterations of uttt make ~50k nodes whatever the machine's load.
    grown = engine.Searcher()
    grown.search(state, "mcts", Budget(iterations=60_000), seed=1, game_key="g")
    assert _tree_capacity(grown, "g") > mcts.INITIAL_NODES  # the search filled the first arrays

    monkeypatch.setattr(mcts, "GROW_S_PER_NODE", 1.0)  # every copy too slow for the budget
    kept = engine.Searcher()
    # The same iterations under a deadline (a minute: never the one that ends the search).
    budget = Budget(time_ms=60_000, iterations=60_000)
    result = kept.search(state, "mcts", budget, seed=1, game_key="g")
    assert _tree_capacity(kept, "g") == mcts.INITIAL_NODES
    # It searched on to its budget with the tree it had, and still chose a legal move.
    assert result.iterations == 60_000 and result.action in state.legal_actions()

"""Exact searches: perfect, minimax and alphabeta agree on small boards; forced wins; draws."""

from __future__ import annotations

import functools
import random

import pytest

import engine
from engine import Budget, EngineError
from engine.options import MAX_BUDGET_ITERATIONS
from engine.perfect import benchmark_solve, solve_counted

# --- an independent solver: memoized negamax over the Python rules, for 3x3 --------------


_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


@functools.cache
def _brute(board: tuple[int, ...]) -> int:
    """Value for the player to move on a 3x3 board (-1 empty, 0 X, 1 O), own rules."""
    mover = board.count(0) - board.count(1)  # 0 when X moves, 1 when O moves
    if any(board[a] == board[b] == board[c] == 1 - mover for a, b, c in _LINES):
        return -1
    empties = [i for i, v in enumerate(board) if v < 0]
    if not empties:
        return 0
    return max(-_brute(board[:i] + (mover,) + board[i + 1 :]) for i in empties)


def _all_positions(game_name: str, params: dict[str, int]):
    seen = {}
    stack = [engine.make_game(game_name, **params).new_initial_state()]
    while stack:
        state = stack.pop()
        key = tuple(state.board)
        if key in seen:
            continue
        seen[key] = state
        for action in state.legal_actions():
            child = state.clone()
            child.apply_action(action)
            stack.append(child)
    return list(seen.values())


def test_perfect_matches_brute_force_on_every_3x3_position():
    positions = _all_positions("tictactoe", {})
    assert len(positions) == 5478  # the number of legal tic-tac-toe positions
    for state in positions:
        assert engine.solve(state) == _brute(tuple(state.board)), state.history()


def test_empty_board_values_and_node_counts():
    tictactoe = engine.make_game("tictactoe")
    assert engine.solve(tictactoe.new_initial_state()) == 0
    with_symmetry = benchmark_solve(tictactoe, symmetry=True)
    without = benchmark_solve(tictactoe, symmetry=False)
    assert with_symmetry["value"] == without["value"] == 0
    assert with_symmetry["nodes"] <= 320 and without["nodes"] <= 1200
    # Known results: 4x4 k=3 and 3x4 k=3 are first-player wins; 4x4 k=4 is a draw.
    assert engine.solve(engine.make_game("mnk", m=4, n=4, k=3).new_initial_state()) == 1
    assert engine.solve(engine.make_game("mnk", m=3, n=4, k=3).new_initial_state()) == 1
    assert engine.solve(engine.make_game("mnk", m=3, n=5, k=4).new_initial_state()) == 0
    assert engine.solve(engine.make_game("mnk", m=4, n=4, k=4).new_initial_state()) == 0


def test_symmetry_does_not_change_values():
    rng = random.Random(5)
    game = engine.make_game("mnk", m=3, n=4, k=3)
    for _ in range(200):
        state = game.new_initial_state()
        for _ in range(rng.randrange(0, 8)):
            if state.is_terminal():
                break
            state.apply_action(rng.choice(state.legal_actions()))
        assert solve_counted(state, symmetry=True)[0] == solve_counted(state, symmetry=False)[0]


def test_solve_and_labels_refuse_or_skip_big_boards():
    with pytest.raises(EngineError, match="16 cells"):
        engine.solve(engine.make_game("5x5").new_initial_state())
    with pytest.raises(EngineError):
        engine.solve(engine.make_game("uttt").new_initial_state())
    assert engine.label_moves(engine.make_game("gomoku"), [0, 1]) == [None, None]
    with pytest.raises(EngineError):
        engine.search(engine.make_game("uttt").new_initial_state(), "perfect")


def test_label_moves_reviews_a_game():
    game = engine.make_game("tictactoe")
    # X corner, O edge (a mistake: X now wins), X centre, O blocks, X forks, O, X wins.
    labels = engine.label_moves(game, [0, 1, 4, 8, 6, 3, 2])
    assert labels == ["draw", "draw", "win", "loss", "win", "loss", "win"]
    with pytest.raises(engine.IllegalMove):
        engine.label_moves(game, [0, 0])


def _random_positions(game_name, params, count, min_ply, max_ply, seed):
    rng = random.Random(seed)
    game = engine.make_game(game_name, **params)
    out = []
    while len(out) < count:
        state = game.new_initial_state()
        for _ in range(rng.randrange(min_ply, max_ply + 1)):
            if state.is_terminal():
                break
            state.apply_action(rng.choice(state.legal_actions()))
        if not state.is_terminal():
            out.append(state)
    return out


PROVEN = {"win": 1, "draw": 0, "loss": -1}


@pytest.mark.parametrize(
    ("game", "params", "min_ply", "max_ply", "algorithms"),
    [
        ("tictactoe", {}, 2, 7, ("perfect", "alphabeta", "minimax")),
        ("mnk", {"m": 4, "n": 4, "k": 3}, 3, 8, ("perfect", "alphabeta")),
        ("mnk", {"m": 4, "n": 4, "k": 4}, 9, 13, ("perfect", "alphabeta", "minimax")),
        ("mnk", {"m": 3, "n": 4, "k": 3}, 4, 9, ("perfect", "alphabeta", "minimax")),
    ],
)
def test_exact_searches_agree(game, params, min_ply, max_ply, algorithms):
    for state in _random_positions(game, params, 25, min_ply, max_ply, seed=len(algorithms)):
        truth = engine.solve(state)
        for algorithm in algorithms:
            result = engine.search(
                state, algorithm, Budget(iterations=MAX_BUDGET_ITERATIONS), seed=1
            )
            assert PROVEN[result.proven] == truth, (algorithm, state.history())
            assert result.value == truth
            child = state.clone()
            child.apply_action(result.action)
            # The move keeps the value: the opponent's value afterwards is minus ours.
            after = 0 if child.is_terminal() and child.winner() is None else None
            if child.is_terminal():
                assert (1 if child.winner() is not None else after) == truth
            else:
                assert -engine.solve(child) == truth, (algorithm, state.history(), result.action)


# --- forced wins in two and three moves, known draws --------------------------------------

FORCED_WINS = [
    # (game, moves, plies to the win): found by search and checked by the exact solvers
    ("tictactoe", [0, 1, 4, 8], 3),  # X forks with 6 (threats at 3 and 2) or 3 (6 and 5)
    ("5x5", [17, 15, 12, 23, 4, 8, 5, 22, 18], 3),
    ("5x5", [16, 7, 22, 9, 8, 13, 5], 5),
    ("5x5", [0, 22, 3, 7, 21, 2, 13, 1, 14, 24], 5),
]


def _keeps_forced_win(state, action, plies) -> bool:
    child = state.clone()
    child.apply_action(action)
    if child.is_terminal():
        return child.winner() == state.current_player()
    # Any forced win counts (MCTS-Solver may prove a longer one): look a few plies further.
    reply = engine.search(
        child, "alphabeta", Budget(iterations=10**7), options={"max_depth": plies + 3}
    )
    return reply.proven == "loss"


@pytest.mark.parametrize(
    ("algorithm", "game", "moves", "plies"),
    # minimax and perfect are the references for small boards: 3x3 only here.
    [
        (algorithm, *position)
        for algorithm in ("alphabeta", "minimax", "perfect", "mcts")
        for position in FORCED_WINS
        if algorithm in ("alphabeta", "mcts") or position[0] == "tictactoe"
    ],
)
def test_forced_wins_in_two_and_three(algorithm, game, moves, plies):
    state = engine.replay((game, {}), moves)
    if algorithm == "mcts":
        result = engine.search(state, "mcts", Budget(iterations=50000), seed=2)
    else:
        result = engine.search(state, algorithm, Budget(iterations=10**8), seed=2)
        assert result.proven == "win"
        assert result.value == 1.0
    assert _keeps_forced_win(state, result.action, plies)
    if algorithm == "alphabeta":
        assert len(result.pv) == plies  # the shortest win, to the end
        line = state.clone()
        for action in result.pv:
            line.apply_action(action)
        assert line.winner() == state.current_player()


@pytest.mark.parametrize("algorithm", ["alphabeta", "minimax", "perfect"])
def test_known_draw_3x3(algorithm):
    state = engine.make_game("tictactoe").new_initial_state()
    iterations = 10**8 if algorithm != "minimax" else 10**7
    if algorithm == "minimax":
        state = engine.replay(("tictactoe", {}), [4])  # keep the plain search short
    result = engine.search(state, algorithm, Budget(iterations=iterations), seed=0)
    assert result.proven == "draw" and result.value == 0.0


def test_perfect_prefers_an_immediate_win_and_sets_traps():
    # X can win at 2 at once (also later): the immediate win is played.
    state = engine.replay(("tictactoe", {}), [0, 3, 1, 4])
    assert engine.search(state, "perfect", seed=0).action == 2
    # From the empty board every first move draws; perfect picks one leaving O most losing
    # replies: a corner (O loses after anything but the centre) or the centre.
    first = engine.search(engine.make_game("tictactoe").new_initial_state(), "perfect")
    assert first.action in (0, 2, 6, 8, 4)

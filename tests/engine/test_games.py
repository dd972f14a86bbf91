"""Conformance of every game (random playouts by hypothesis) and the rules case by case."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine import TERMINAL, EngineError, IllegalMove

GAMES = [
    ("tictactoe", {}),
    ("5x5", {}),
    ("gomoku", {}),
    ("mnk", {"m": 4, "n": 6, "k": 3}),
    ("mnk", {"m": 3, "n": 7, "k": 7}),
    ("uttt", {}),
]


def _mnk_winner_by_scan(state) -> int | None:
    """An independent rule check: scan every cell and direction for k or more in a row."""
    game = state.game
    m, n, k = game.m, game.n, game.k
    winners = set()
    for r in range(m):
        for c in range(n):
            v = state.board[r * n + c]
            if v < 0:
                continue
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                length = 0
                rr, cc = r, c
                while 0 <= rr < m and 0 <= cc < n and state.board[rr * n + cc] == v:
                    length += 1
                    rr, cc = rr + dr, cc + dc
                if length >= k:
                    winners.add(v)
    assert len(winners) <= 1
    return winners.pop() if winners else None


def _uttt_macro_by_scan(state) -> list[int]:
    lines = engine.uttt.LINES
    macro = []
    for b in range(9):
        cells = state.board[b * 9 : b * 9 + 9]
        won = [p for p in (0, 1) if any(all(cells[i] == p for i in line) for line in lines)]
        assert len(won) <= 1
        macro.append(won[0] if won else 2 if -1 not in cells else -1)
    return macro


def _check_invariants(game, state) -> None:
    player = state.current_player()
    legal = state.legal_actions()
    assert legal == sorted(set(legal))
    assert all(0 <= a < game.num_distinct_actions() for a in legal)
    assert state.is_terminal() == (player == TERMINAL) == (not legal)
    returns = state.returns()
    assert returns[0] + returns[1] == 0 and all(-1 <= r <= 1 for r in returns)
    winner = state.winner()
    if not state.is_terminal():
        assert returns == [0.0, 0.0] and winner is None and state.winning_line() is None
    else:
        assert returns == (
            [0.0, 0.0] if winner is None else [1.0, -1.0] if winner == 0 else [-1.0, 1.0]
        )
        assert (winner is None) == (state.winning_line() is None)
    assert state.ply() == len(state.history()) <= game.max_game_length()
    # clone equals the original and is independent of it
    twin = state.clone()
    assert twin == state and hash(twin) == hash(state) and twin.history() == state.history()
    if legal:
        twin.apply_action(legal[0])
        assert twin != state and state.legal_actions() == legal
    # pickling round-trips; replaying the history gives the same position
    back = pickle.loads(pickle.dumps(state))
    assert back == state and back.history() == state.history() and back.winner() == winner
    assert back.legal_actions() == legal
    assert engine.replay(game.spec(), state.history()) == state
    # text: every legal move round-trips through its name and its number
    assert isinstance(state.render(), str) and state.render()
    for action in legal:
        assert state.parse_action(state.action_to_string(action)) == action
        assert state.parse_action(str(action)) == action
    # rules, checked independently of the implementation
    if game.name == "uttt":
        assert state.board_winners() == _uttt_macro_by_scan(state)
        boards = sorted({a // 9 for a in legal})
        assert boards == state.allowed_boards()
    else:
        assert _mnk_winner_by_scan(state) == winner
        assert legal == (
            [] if state.is_terminal() else [i for i, v in enumerate(state.board) if v < 0]
        )


@pytest.mark.parametrize(("name", "params"), GAMES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(choices=st.lists(st.integers(min_value=0, max_value=10_000), min_size=0, max_size=230))
def test_random_playouts_keep_every_invariant(name, params, choices):
    game = engine.make_game(name, **params)
    assert engine.make_game(*game.spec()[:1], **game.spec()[1]) == game
    assert pickle.loads(pickle.dumps(game)) == game
    state = game.new_initial_state()
    _check_invariants(game, state)
    for choice in choices:
        if state.is_terminal():
            break
        legal = state.legal_actions()
        state.apply_checked(legal[choice % len(legal)])
        if name == "gomoku" and state.ply() % 20:
            continue  # the full check costs too much on 225 cells at every ply
        _check_invariants(game, state)
    _check_invariants(game, state)
    if state.is_terminal():
        with pytest.raises(IllegalMove, match="over"):
            state.apply_checked(0)


# --- games and parameters ------------------------------------------------------------


def test_game_names_and_specs():
    assert engine.GAME_NAMES == ("tictactoe", "5x5", "gomoku", "uttt", "mnk")
    # Defect 17 (issue 12): a game keeps the name it was created with; a named board takes
    # no parameters (and accepts its own m, n and k spelled out).
    assert engine.make_game("tictactoe").spec() == ("tictactoe", {})
    assert engine.make_game("5x5").spec() == ("5x5", {})
    assert engine.make_game("gomoku").spec() == ("gomoku", {})
    assert engine.make_game("gomoku", m=15, n=15, k=5).spec() == ("gomoku", {})
    assert engine.make_game("uttt").spec() == ("uttt", {})
    assert engine.make_game("mnk", m=5, n=5, k=4).spec() == ("mnk", {"m": 5, "n": 5, "k": 4})
    gomoku = engine.make_game("gomoku")
    assert isinstance(gomoku, engine.MNKGame) and (gomoku.m, gomoku.n, gomoku.k) == (15, 15, 5)
    assert pickle.loads(pickle.dumps(gomoku)).spec() == ("gomoku", {})
    assert engine.make_game("mnk", m=5, n=5, k=4) != engine.make_game("5x5")
    assert engine.make_game("tictactoe") != engine.make_game("mnk", m=3, n=3, k=3)
    assert engine.make_game("mnk", m=20, n=20, k=5).cells == 400  # the Gomocup's big board
    sizes = {
        "tictactoe": (9, 9),
        "5x5": (25, 25),
        "gomoku": (225, 225),
        "uttt": (81, 81),
    }
    for name, (actions, length) in sizes.items():
        game = engine.make_game(name)
        assert (game.num_distinct_actions(), game.max_game_length()) == (actions, length)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("chess", {}, "unknown game"),
        ("mnk", {"m": 3, "n": 3}, "missing"),
        ("mnk", {"m": 2, "n": 3, "k": 3}, "out of range"),
        ("mnk", {"m": 21, "n": 3, "k": 3}, "out of range"),
        ("mnk", {"m": 4, "n": 5, "k": 6}, "out of range"),
        ("mnk", {"m": 4, "n": 5, "k": 2}, "out of range"),
        ("mnk", {"m": "4", "n": 5, "k": 3}, "integer"),
        ("mnk", {"m": True, "n": 5, "k": 3}, "integer"),
        ("mnk", {"m": 4, "n": 5, "k": 3, "x": 1}, "parameters"),
        ("tictactoe", {"m": 3}, "no parameters"),
        ("uttt", {"k": 3}, "no parameters"),
        ("gomoku", {"m": 19, "n": 19, "k": 5}, "m=15"),
        ("gomoku", {"swap": 1}, "no parameters"),
    ],
)
def test_bad_games_raise_engine_error(name, params, message):
    with pytest.raises(EngineError, match=message):
        engine.make_game(name, **params)
    assert issubclass(EngineError, ValueError) and issubclass(IllegalMove, EngineError)


# --- mnk rules -----------------------------------------------------------------------


def _rc(n, *cells):
    return [r * n + c for r, c in cells]


def test_each_games_own_ai_is_a_search_that_can_play_it():
    for name, game_type in engine.GAMES.items():
        game = engine.make_game(name, **(game_type.sample or {}))
        assert engine.default_ai(name) == engine.default_ai(game) == game_type.ai
        engine.check_algorithm(game_type.ai, game)  # raises if it cannot
    assert engine.default_ai("tictactoe") == "perfect"
    with pytest.raises(EngineError, match="unknown game 'chess'"):
        engine.default_ai("chess")


def test_gomoku_five_or_more_wins():
    # X fills (7,2),(7,3),(7,5),(7,6) and then (7,4): six in a row... with (7,7) too.
    x = _rc(15, (7, 1), (7, 2), (7, 3), (7, 5), (7, 6), (7, 4))
    o = _rc(15, (0, 0), (0, 2), (0, 4), (0, 6), (0, 8))
    moves = [m for pair in zip(x, o, strict=False) for m in pair] + x[len(o) :]
    state = engine.replay(("gomoku", {}), moves)
    assert state.winner() == 0 and state.is_terminal()
    assert state.winning_line() == _rc(15, *[(7, c) for c in range(1, 7)])


def test_mnk_four_is_not_five():
    moves = _rc(15, (7, 1), (0, 0), (7, 2), (0, 2), (7, 3), (0, 4), (7, 4))
    state = engine.replay(("gomoku", {}), moves)
    assert not state.is_terminal() and state.current_player() == 1


def test_5x5_diagonal_and_antidiagonal_wins():
    state = engine.replay(
        ("5x5", {}), _rc(5, (0, 4), (0, 0), (1, 3), (0, 1), (2, 2), (0, 2), (3, 1))
    )
    assert state.winner() == 0 and state.winning_line() == _rc(5, (0, 4), (1, 3), (2, 2), (3, 1))
    state = engine.replay(
        ("5x5", {}), _rc(5, (1, 0), (1, 1), (2, 0), (2, 2), (3, 0), (3, 3), (0, 4), (4, 4))
    )
    assert state.winner() == 1


def test_tictactoe_full_board_draw():
    state = engine.replay(("tictactoe", {}), [0, 4, 8, 1, 7, 6, 2, 5, 3])
    assert state.is_terminal() and state.winner() is None and state.returns() == [0.0, 0.0]
    assert state.current_player() == TERMINAL and state.legal_actions() == []


def test_illegal_moves_name_the_problem():
    state = engine.replay(("tictactoe", {}), [4])
    with pytest.raises(IllegalMove, match="occupied by X"):
        state.apply_checked(4)
    with pytest.raises(IllegalMove, match="out of range"):
        state.apply_checked(9)
    with pytest.raises(IllegalMove, match="out of range"):
        state.apply_checked(-1)
    with pytest.raises(IllegalMove, match="integer"):
        state.apply_checked("4")
    with pytest.raises(IllegalMove, match="integer"):
        state.apply_checked(True)
    assert state.history() == [4]


@pytest.mark.parametrize(
    "text", ["", "x", "1,", "3,0", "0,3", "9", "1,2,3", "-1", "B1 C1", "d1", "a4", "a0", "1a"]
)
def test_tictactoe_parse_rejects_nonsense(text):
    state = engine.make_game("tictactoe").new_initial_state()
    with pytest.raises(IllegalMove):
        state.parse_action(text)


def test_tictactoe_parse_forms_and_render():
    """engine/notation.py: column letter, row number from the bottom (as gomoku and chess);
    the action number and the 0-based row,col still read."""
    state = engine.replay(("tictactoe", {}), [4])
    assert state.action_to_string(5) == "c2" and state.action_to_string(0) == "a3"
    for text in ("c2", " C2 ", "c 2", "1,2", "(1, 2)", "5"):
        assert state.parse_action(text) == 5
    with pytest.raises(IllegalMove, match="cell b2 is occupied"):
        state.parse_action("b2")
    assert state.render().splitlines() == ["  a b c", "3 . . .", "2 . X .", "1 . . ."]


def test_mnk_render_shows_coordinates():
    state = engine.replay(("mnk", {"m": 3, "n": 4, "k": 3}), [0, 11])
    assert state.render().splitlines() == ["  a b c d", "3 X . . .", "2 . . . .", "1 . . . O"]
    gomoku = engine.make_game("gomoku").new_initial_state()
    assert gomoku.action_to_string(7 * 15 + 7) == "h8"  # the centre, as Renju writes it
    assert gomoku.parse_action("H8") == 112 and gomoku.parse_action("a15") == 0
    with pytest.raises(IllegalMove, match="off the board: cells go from a1 to o15"):
        gomoku.parse_action("p1")


# --- ultimate tic-tac-toe rules ----------------------------------------------------------


def _uttt(*moves):
    return engine.replay(("uttt", {}), list(moves))


def test_uttt_sends_the_opponent_to_the_cell_board():
    state = _uttt(4 * 9 + 2)  # X plays board 4, cell 2 -> O must play in board 2
    assert state.allowed_boards() == [2]
    assert state.legal_actions() == list(range(18, 27))
    with pytest.raises(IllegalMove, match="must play in the top-right board, g7-i9"):
        state.apply_checked(0)


def test_uttt_won_board_closes_and_frees_the_next_move():
    # X b0c0 -> O b0c3 -> X b3c0 -> O b0c4 -> X b4c0 -> O b0c5: O wins board 0 (cells 3, 4, 5).
    state = _uttt(0, 3, 27, 4, 36, 5)
    assert state.board_winners()[0] == 1 and state.allowed_boards() == [5]
    state.apply_checked(45)  # X b5c0 sends O to board 0, which is closed: O may play anywhere open
    assert state.allowed_boards() == list(range(1, 9))
    with pytest.raises(IllegalMove, match="closed"):
        state.apply_checked(2)


def test_uttt_full_small_board_is_drawn_and_closed():
    import random

    rng = random.Random(4)
    for _ in range(200):
        state = _uttt()
        while not state.is_terminal():
            state.apply_action(rng.choice(state.legal_actions()))
            if 2 in state.board_winners():
                b = state.board_winners().index(2)
                assert all(v >= 0 for v in state.board[b * 9 : b * 9 + 9])
                assert b not in state.allowed_boards()
                return
    pytest.fail("no drawn small board in 200 random games")


def test_uttt_three_boards_in_a_row_win_the_game():
    import random

    rng = random.Random(0)
    wins = 0
    for _ in range(30):
        state = _uttt()
        while not state.is_terminal():
            state.apply_action(rng.choice(state.legal_actions()))
        winner = state.winner()
        if winner is None:
            assert -1 not in state.board_winners()
            continue
        wins += 1
        line = state.winning_line()
        boards = sorted({a // 9 for a in line})
        assert tuple(boards) in engine.uttt.LINES
        assert all(state.board_winners()[b] == winner for b in boards)
        for b in boards:
            cells = tuple(sorted(a % 9 for a in line if a // 9 == b))
            assert cells in engine.uttt.LINES
            assert all(state.board[b * 9 + c] == winner for c in cells)
    assert wins > 0


def test_uttt_parse_forms():
    state = _uttt(40)  # X e5 (board 4, cell 4) -> O to the centre board
    # The 9x9 grid named as one board: columns a-i, rows 1-9 from the bottom.
    assert state.action_to_string(36) == "d6" and state.action_to_string(40) == "e5"
    assert state.action_to_string(0) == "a9" and state.action_to_string(80) == "i1"
    for text in ("d6", "D6", "4,0", "4 0", "(4, 0)", "36"):
        assert state.parse_action(text) == 36
    for text in ("B9 C0", "4,9", "81", "hello", "j1", "a10", ""):
        with pytest.raises(IllegalMove):
            state.parse_action(text)
    with pytest.raises(IllegalMove, match="must play in the centre board, d4-f6"):
        state.parse_action("a9")
    assert "O plays in the centre board, d4-f6" in state.render()


def test_the_example_cell_is_one_that_can_be_played() -> None:
    """The move box's example was the centre, also where it was taken (uttt after e5)."""
    uttt = engine.make_game("uttt")
    assert uttt.grid.example() == "e5"
    after = engine.replay(uttt, [40])  # e5: O must play in the centre board, e5 taken
    example = uttt.grid.example(after.legal_actions())
    assert uttt.grid.parse(example) in after.legal_actions() and example != "e5"
    tictactoe = engine.make_game("tictactoe")
    assert tictactoe.grid.example(tictactoe.new_initial_state().legal_actions()) == "b2"

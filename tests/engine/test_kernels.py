"""The compiled rules agree with the Python rules (legal moves, end of game, winner) on many
random games of every kind, and the decisive-move helpers find wins and threats."""

from __future__ import annotations

import random

import numpy as np
import pytest

import engine
from engine.kernels import (
    compiled_legal_actions,
    compiled_outcome,
    kernel_game,
    root_state,
)
from engine.kernels.layout import MOVES_MOVER_LOSES, MOVES_MOVER_WINS, MOVES_NORMAL
from engine.kernels.rules import apply, tree_moves
from engine.kernels.uttt import uttt_tree_moves, uttt_win_move


@pytest.fixture(scope="session", autouse=True)
def _compiled() -> None:
    engine.warm_up()


GAMES = [
    ("tictactoe", {}, 300),
    ("mnk", {"m": 3, "n": 3, "k": 3}, 100),
    ("5x5", {}, 150),
    ("mnk", {"m": 3, "n": 7, "k": 3}, 100),
    ("mnk", {"m": 6, "n": 4, "k": 4}, 100),
    ("mnk", {"m": 19, "n": 19, "k": 6}, 5),
    ("gomoku", {}, 15),
    ("uttt", {}, 150),
]


@pytest.mark.parametrize(("name", "params", "games"), GAMES)
def test_compiled_rules_agree_with_python_rules(name: str, params: dict, games: int) -> None:
    rng = random.Random(20081)
    game = engine.make_game(name, **params)
    kg = kernel_game(game)
    for _ in range(games):
        state = game.new_initial_state()
        st = root_state(state, kg)
        while True:
            assert compiled_legal_actions(st) == state.legal_actions()
            assert compiled_outcome(st) == (state.is_terminal(), state.winner())
            if state.is_terminal():
                break
            action = rng.choice(state.legal_actions())
            state.apply_action(action)
            apply(st, action)
        # Rebuilding from the move list gives the same compiled position.
        assert np.array_equal(root_state(state, kg), st)


def _mnk_state(name: str, actions: list[int], **params: int) -> np.ndarray:
    game = engine.make_game(name, **params)
    return root_state(engine.replay(game, actions), kernel_game(game))


@pytest.mark.parametrize("name", ["tictactoe", "mnk"])
def test_tree_moves_take_a_win_and_block_a_threat(name: str) -> None:
    buf = np.empty(400, dtype=np.int32)
    params = {"m": 3, "n": 3, "k": 3} if name == "mnk" else {}
    # X: 0, 1; O: 4, 5; X to move wins at 2.
    st = _mnk_state(name, [0, 4, 1, 5], **params)
    n, code = tree_moves(st, buf, True)
    assert (n, code, buf[0]) == (1, MOVES_MOVER_WINS, 2)
    # X: 0, 8; O: 4, 3; X must block 5.
    st = _mnk_state(name, [0, 4, 8, 3], **params)
    n, code = tree_moves(st, buf, True)
    assert (n, code, buf[0]) == (1, MOVES_NORMAL, 5)
    # Without decisive moves every empty cell is listed.
    n, code = tree_moves(st, buf, False)
    assert (code, sorted(buf[:n])) == (MOVES_NORMAL, [1, 2, 5, 6, 7])
    # O: 0, 2, 4 threatens 1, 6 and 8; X (3, 5, 7) has no win: every move loses.
    st = _mnk_state(name, [3, 0, 5, 2, 7, 4], **params)
    n, code = tree_moves(st, buf, True)
    assert (code, sorted(buf[:n])) == (MOVES_MOVER_LOSES, [1, 6, 8])
    st = _mnk_state("5x5", [0, 6, 24, 7, 20, 8])
    n, code = tree_moves(st, buf, True)
    assert code == MOVES_MOVER_LOSES and sorted(buf[:2]) == [5, 9]  # blocks first


def test_mnk_double_threat_is_a_loss() -> None:
    buf = np.empty(400, dtype=np.int32)
    # 5x5 k=4, O (second) has 6,7,8 with 5 and 9 open; X to move has no win.
    st = _mnk_state("5x5", [0, 6, 24, 7, 20, 8])
    n, code = tree_moves(st, buf, True)
    assert code == MOVES_MOVER_LOSES
    assert n == 19


def test_gomoku_five_or_more_wins() -> None:
    # X fills 0..3 and 5..8 of the first row, then 4 makes nine in a row: a win (overline).
    xs = [0, 1, 2, 3, 5, 6, 7, 8]
    os_ = [30, 31, 32, 33, 45, 46, 47, 48]
    actions = [a for pair in zip(xs, os_, strict=True) for a in pair] + [4]
    game = engine.make_game("gomoku")
    state = engine.replay(game, actions)
    st = root_state(state, kernel_game(game))
    assert compiled_outcome(st) == (True, 0) == (state.is_terminal(), state.winner())


def test_uttt_decisive_and_anti_decisive_moves() -> None:
    game = engine.make_game("uttt")
    rng = random.Random(5)
    buf = np.empty(81, dtype=np.int32)
    checked = dropped = 0
    for _ in range(40):
        state = game.new_initial_state()
        st = root_state(state, kernel_game(game))
        while not state.is_terminal():
            legal = state.legal_actions()
            wins = []
            for a in legal:
                child = state.clone()
                child.apply_action(a)
                if child.winner() == state.current_player():
                    wins.append(a)
            w = uttt_win_move(st)
            assert (w >= 0) == bool(wins)
            if w >= 0:
                assert w in wins
            n, code = uttt_tree_moves(st, buf, True)
            moves = [int(a) for a in buf[:n]]
            if code == MOVES_NORMAL:
                for a in legal:  # a move is dropped exactly when it hands over a win in one
                    child = state.clone()
                    child.apply_action(a)
                    loses = not child.is_terminal() and any(
                        _wins_now(child, b) for b in child.legal_actions()
                    )
                    assert (a not in moves) == loses
                    dropped += loses
                checked += 1
            a = rng.choice(legal)
            state.apply_action(a)
            apply(st, a)
    assert checked > 500
    assert dropped > 20


def _wins_now(state, action: int) -> bool:  # noqa: ANN001
    child = state.clone()
    player = state.current_player()
    child.apply_action(action)
    return child.winner() == player


def test_xorshift_back_undoes_a_step() -> None:
    """The playout loops carry the generator's next state and leave the last one they used
    (``xorshift_back``): it is the step's inverse, both ways."""
    from numba import njit

    from engine.kernels.layout import xorshift_back, xorshift_step

    @njit
    def both_ways(states: np.ndarray) -> tuple[int, int]:
        back = forth = 0
        for x in states:
            back += xorshift_back(xorshift_step(x)) == x
            forth += xorshift_step(xorshift_back(x)) == x
        return back, forth

    rng = random.Random(11)
    states = [rng.getrandbits(64) for _ in range(10_000)] + [1, 2**63, 2**64 - 1, 0x9E3779B9]
    assert both_ways(np.array(states, dtype=np.uint64)) == (len(states), len(states))


@pytest.mark.parametrize("policy", [0, 1, 2, 9, 13])
def test_uttt_playout_matches_move_by_move_rules(policy: int) -> None:
    """The inlined playout equals the same random choices made through uttt_apply: policy 1
    takes a game-winning move, 2 also avoids handing the opponent one, 9 (1 + PLAYOUT_AVOID)
    draws a move again, once, when it sends the opponent to a closed board or to one where
    the opponent can capture a small board at once; 13 (9 + PLAYOUT_CAPTURE) first takes the
    small board of a forced move when it can. The playout leaves the threat masks as they
    were: refreshed on every board, they are uttt_apply's."""
    from engine.kernels.layout import (
        H_CLOSED,
        H_FORCED,
        H_STATUS,
        H_THREAT0,
        H_TO_MOVE,
        PLAYOUT_AVOID,
        PLAYOUT_CAPTURE,
        below,
        seed_rng,
        xorshift_step,
    )
    from engine.kernels.uttt import (
        NTH9,
        OFF_FULL,
        OFF_SMALL,
        POP9,
        SAFE_TRIES,
        THREAT9,
        _is_safe,
        _opponent_wins_mask,
        _safe_random_move,
        uttt_apply,
        uttt_playout,
        uttt_random_move,
        uttt_refresh_threats,
    )

    def gives_capture(st: np.ndarray, action: int) -> bool:
        # the move sends the opponent to a closed board (as before the move) or to an open
        # one where it has a cell completing a small line (board b as after the move)
        c = action % 9
        if int(st[H_CLOSED]) >> c & 1:
            return True
        after = st.copy()
        uttt_apply(after, action)
        return bool(after[H_THREAT0 + 1 - int(st[H_TO_MOVE])] >> c & 1)

    game = engine.make_game("uttt")
    rng = random.Random(3)
    buf = np.empty(81, dtype=np.int32)
    taken = 0
    for trial in range(150):
        state = game.new_initial_state()
        for _ in range(rng.randrange(0, 50)):
            if state.is_terminal():
                break
            state.apply_action(rng.choice(state.legal_actions()))
        fast = root_state(state, kernel_game(game))
        slow = fast.copy()
        fast_rng = seed_rng(trial)
        result = uttt_playout(fast, fast_rng, policy, buf)
        slow_rng = seed_rng(trial)
        while slow[H_STATUS] == 0:
            p = int(slow[H_TO_MOVE])
            if policy >= 1:
                if uttt_win_move(slow) >= 0:
                    expected = p + 1
                    break
                opp = _opponent_wins_mask(slow)
                if opp and policy & 2:
                    # Rejection sampling first, then the list of safe moves.
                    tries = (uttt_random_move(slow, slow_rng) for _ in range(SAFE_TRIES))
                    a = next((t for t in tries if _is_safe(slow, t, opp)), -1)
                    if a < 0:
                        a = _safe_random_move(slow, slow_rng, opp, buf)
                    if a < 0:
                        expected = 2 - p
                        break
                    uttt_apply(slow, a)
                    continue
            f = int(slow[H_FORCED])
            if policy & PLAYOUT_CAPTURE and f >= 0:
                wins = int(THREAT9[slow[OFF_SMALL + 9 * p + f]]) & ~int(slow[OFF_FULL + f]) & 511
                if wins:  # one draw: the n-th of the cells that take the board
                    slow_rng[0] = xorshift_step(slow_rng[0])
                    uttt_apply(slow, 9 * f + int(NTH9[wins * 9 + below(slow_rng[0], POP9[wins])]))
                    taken += 1
                    continue
            a = uttt_random_move(slow, slow_rng)
            if policy & PLAYOUT_AVOID and gives_capture(slow, a):
                a = uttt_random_move(slow, slow_rng)
            uttt_apply(slow, a)
        else:
            expected = int(slow[H_STATUS])
        assert result == expected
        assert fast_rng[0] == slow_rng[0]  # the same draws, and the generator left as after them
        uttt_refresh_threats(fast, 511)
        assert np.array_equal(fast, slow)
    assert (taken > 100) == bool(policy & PLAYOUT_CAPTURE)

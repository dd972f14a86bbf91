"""The uttt bitboard kernels against the reference rules (engine/uttt.py) on random positions
drawn by hypothesis: the per-board masks, move generation, random moves, game end and the
progressive-bias prior; and MCTS-Solver's proofs on late positions against exact negamax."""

from __future__ import annotations

import math
import random
from typing import cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine.kernels import compiled_legal_actions, compiled_outcome, kernel_game, root_state
from engine.kernels.layout import (
    H_CLOSED,
    H_FORCED,
    H_META0,
    H_STATUS,
    H_THREAT0,
    H_TO_MOVE,
    seed_rng,
)
from engine.kernels.uttt import (
    EMPTY9,
    NTH9,
    OFF_FULL,
    OFF_SMALL,
    POP9,
    REPLY_CAPTURE,
    THREAT9,
    WIN9,
    _random_empty,
    uttt_apply,
    uttt_child_value,
    uttt_move_prior,
    uttt_play,
    uttt_priors_and_values,
    uttt_random_move,
    uttt_refresh_threats,
)
from engine.mcts import mcts_search
from engine.options import MCTSOptions
from engine.result import SearchResult
from engine.uttt import EMPTY, LINES, OPEN, UTTTGame, UTTTState

GAME = cast(UTTTGame, engine.make_game("uttt"))


@pytest.fixture(scope="module", autouse=True)
def _compiled() -> None:
    engine.warm_up([("uttt", "mcts")])


def _random_position(seed: int, plies: int) -> UTTTState:
    rng = random.Random(seed)
    state = GAME.new_initial_state()
    for _ in range(plies):
        if state.is_terminal():
            break
        state.apply_action(rng.choice(state.legal_actions()))
    return state


def _masks(state: UTTTState) -> tuple[list[int], list[int], list[int]]:
    """Each player's 9-bit mask per small board and the occupied cells, from the reference."""
    small = [[0] * 9, [0] * 9]
    full = [0] * 9
    for action, owner in enumerate(state.board):
        if owner != EMPTY:
            b, c = divmod(action, 9)
            small[owner][b] |= 1 << c
            full[b] |= 1 << c
    return small[0], small[1], full


def _captures(state: UTTTState, player: int) -> bool:
    """Whether ``player`` (to move in ``state``) can win a small board with one move."""
    for action in state.legal_actions():
        child = state.clone()
        child.apply_action(action)
        if child.board_winners()[action // 9] == player:
            return True
    return False


def _reference_prior(state: UTTTState, action: int) -> int:
    player = state.current_player()
    child = state.clone()
    child.apply_action(action)
    captures = int(child.board_winners()[action // 9] == player)
    if child.is_terminal():
        return captures
    free = int(child.forced < 0)
    return captures - free - int(_captures(child, 1 - player))


def _reference_value(state: UTTTState, action: int, scale: float) -> float:
    """uttt_child_value's definition over the reference rules: the move played on a copy."""
    player = state.current_player()
    child = state.clone()
    child.apply_action(action)
    if child.is_terminal():
        return 1.0 if child.winner() == player else 0.5
    winners = child.board_winners()

    def threatens(q: int, b: int) -> bool:
        # an empty cell of open board b completing one of q's small lines
        return winners[b] == OPEN and any(
            sum(child.board[9 * b + i] == q for i in line) == 2
            and any(child.board[9 * b + i] == EMPTY for i in line)
            for line in LINES
        )

    def prospects(q: int) -> float:
        score = 0.0
        for line in LINES:
            if any(winners[b] not in (OPEN, q) for b in line):
                continue  # a board of the line is closed against q
            won = sum(winners[b] == q for b in line)
            score += (won + 0.5 * sum(threatens(q, b) for b in line)) ** 2
        return score

    diff = prospects(player) - prospects(1 - player)
    if any(threatens(1 - player, b) for b in child.allowed_boards()):
        diff -= REPLY_CAPTURE
    return 0.5 + 0.5 * math.tanh(scale * diff)


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    plies=st.integers(0, 81),
    scale=st.sampled_from([0.2, 0.3, 0.05]),
)
def test_child_value_matches_its_definition(seed: int, plies: int, scale: float) -> None:
    """The heuristic of implicit minimax backups: 1 for a game-winning move, 1/2 for a
    drawing one, else the tanh of the difference of the players' prospects on the board of
    boards (scaled by ``scale``, the option value_scale), checked against the same definition
    over the reference rules."""
    state = _random_position(seed, plies)
    if state.is_terminal():
        return
    s = root_state(state, kernel_game(GAME))
    for action in state.legal_actions():
        expected = _reference_value(state, action, scale)
        assert uttt_child_value(s, action, scale) == pytest.approx(expected)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    plies=st.integers(0, 81),
    scale=st.sampled_from([0.2, 0.3, 0.05]),
)
def test_priors_and_values_of_an_expansion_are_the_single_calls(
    seed: int, plies: int, scale: float
) -> None:
    """An expansion's children scored in one call (the line scores and tanh shared between
    children alike): each one's prior as ``uttt_move_prior`` and, bit for bit, its value as
    ``uttt_child_value`` give them, in a shuffled order and written after an offset."""
    state = _random_position(seed, plies)
    if state.is_terminal():
        return
    s = root_state(state, kernel_game(GAME))
    actions = state.legal_actions()
    random.Random(seed).shuffle(actions)
    moves = np.array(actions, dtype=np.int32)
    values = np.full(len(actions) + 3, -1.0)
    uttt_priors_and_values(s, moves, len(actions), scale, values, 3)
    for i, action in enumerate(actions):
        value = uttt_child_value(s, action, scale)
        assert moves[i] == uttt_move_prior(s, action), action
        assert np.float64(values[3 + i]).tobytes() == np.float64(value).tobytes(), action


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), plies=st.integers(0, 81))
def test_bitboards_match_the_reference_rules(seed: int, plies: int) -> None:
    state = _random_position(seed, plies)
    s = root_state(state, kernel_game(GAME))
    x, o, full = _masks(state)
    assert [int(v) for v in s[OFF_SMALL : OFF_SMALL + 9]] == x
    assert [int(v) for v in s[OFF_SMALL + 9 : OFF_SMALL + 18]] == o
    assert [int(v) for v in s[OFF_FULL : OFF_FULL + 9]] == full
    winners = state.board_winners()
    assert int(s[H_CLOSED]) == sum(1 << b for b in range(9) if winners[b] != OPEN)
    for p in (0, 1):
        assert int(s[H_META0 + p]) == sum(1 << b for b in range(9) if winners[b] == p)
        # Boards with an empty cell where p would hold a whole line of that board.
        mine = (x, o)[p]
        threats = 0
        for b in range(9):
            for c in range(9):
                owned = mine[b] | 1 << c
                if not full[b] >> c & 1 and any(all(owned >> i & 1 for i in ln) for ln in LINES):
                    threats |= 1 << b
        assert int(s[H_THREAT0 + p]) == threats
    assert compiled_legal_actions(s) == state.legal_actions()
    assert compiled_outcome(s) == (state.is_terminal(), state.winner())
    if not state.is_terminal():
        assert int(s[H_FORCED]) == state.forced
        assert int(s[H_TO_MOVE]) == state.current_player()
        legal = set(state.legal_actions())
        rng = seed_rng(seed)
        drawn = {int(uttt_random_move(s, rng)) for _ in range(4 * len(legal))}
        assert drawn <= legal
        for action in sorted(legal):
            assert uttt_move_prior(s, action) == _reference_prior(state, action), action


def test_small_board_tables_match_their_definitions() -> None:
    """WIN9, THREAT9, POP9, NTH9 and EMPTY9 for every 9-bit mask, from the lines of a board."""
    for mask in range(512):
        cells = [c for c in range(9) if mask >> c & 1]
        empty = [c for c in range(9) if not mask >> c & 1]
        assert WIN9[mask] == any(all(mask >> i & 1 for i in ln) for ln in LINES)
        completing = [
            c for c in empty if any(all((mask | 1 << c) >> i & 1 for i in ln) for ln in LINES)
        ]
        assert THREAT9[mask] == sum(1 << c for c in completing)
        assert POP9[mask] == len(cells)
        assert [int(NTH9[mask * 9 + j]) for j in range(len(cells))] == cells
        e = int(EMPTY9[mask])
        assert e & 15 == len(empty)
        assert [e >> (4 * j + 4) & 15 for j in range(len(empty))] == empty


def test_random_empty_cells_are_uniform() -> None:
    """_random_empty draws every empty cell of a board about equally often, and no other."""
    rng = np.random.default_rng(14)
    for full in (0, 0b101010101, 0b111111110, 0b011101110):
        empty = [c for c in range(9) if not full >> c & 1]
        xs = rng.integers(1, 2**63, size=300 * len(empty), dtype=np.uint64)
        counts = np.bincount([_random_empty(full, x) for x in xs], minlength=9)
        assert set(np.flatnonzero(counts)) == set(empty)
        assert counts[empty].min() > 220 and counts[empty].max() < 380


def test_random_moves_are_uniform() -> None:
    """A free move (any open board) draws every legal move about equally often."""
    seed = 0
    state = _random_position(seed, 30)
    while state.is_terminal() or state.forced >= 0:
        seed += 1
        state = _random_position(seed, 30)
    s = root_state(state, kernel_game(GAME))
    legal = state.legal_actions()
    rng = seed_rng(1)
    draws = 400 * len(legal)
    counts = np.bincount([uttt_random_move(s, rng) for _ in range(draws)], minlength=81)
    assert set(np.flatnonzero(counts)) == set(legal)
    assert counts[legal].min() > 300 and counts[legal].max() < 500


def test_apply_then_status_matches_reference_to_the_end() -> None:
    rng = random.Random(14)
    for _ in range(30):
        state = GAME.new_initial_state()
        s = root_state(state, kernel_game(GAME))
        while not state.is_terminal():
            action = rng.choice(state.legal_actions())
            state.apply_action(action)
            uttt_apply(s, action)
        assert compiled_outcome(s) == (True, state.winner())
        assert int(s[H_STATUS]) in (1, 2, 3)


def test_descent_then_refresh_equals_apply() -> None:
    """The tree's descent (``uttt_play``, then ``uttt_refresh_threats`` on the boards played
    in, where a leaf is expanded) leaves the state ``uttt_apply`` leaves, move by move."""
    rng = random.Random(15)
    for _ in range(200):
        state = _random_position(rng.randrange(10**6), rng.randrange(0, 60))
        s = root_state(state, kernel_game(GAME))
        applied = s.copy()
        boards = 0
        for _ in range(rng.randrange(1, 12)):
            if state.is_terminal():
                break
            action = rng.choice(state.legal_actions())
            state.apply_action(action)
            uttt_play(s, action)
            uttt_apply(applied, action)
            boards |= 1 << (action // 9)
            refreshed = s.copy()
            uttt_refresh_threats(refreshed, boards)
            assert np.array_equal(refreshed, applied)
        assert np.array_equal(root_state(state, kernel_game(GAME)), applied)


def _value(state: UTTTState, memo: dict[tuple[int, ...], int]) -> int:
    """Exact negamax value for the player to move: 1 win, 0 draw, -1 loss."""
    key = tuple(state.history())
    if key in memo:
        return memo[key]
    best = -1
    for action in state.legal_actions():
        child = state.clone()
        child.apply_action(action)
        if child.is_terminal():
            v = 0 if child.winner() is None else 1
        else:
            v = -_value(child, memo)
        if v > best:
            best = v
            if best == 1:
                break
    memo[key] = best
    return best


def _late_positions(count: int, empties: int) -> list[UTTTState]:
    """Positions of random games where at most ``empties`` cells of the open boards are
    left (small exact trees)."""
    rng = random.Random(2008)
    out: list[UTTTState] = []
    while len(out) < count:
        state = GAME.new_initial_state()
        while not state.is_terminal():
            winners = state.board_winners()
            left = sum(
                1
                for a, owner in enumerate(state.board)
                if owner == EMPTY and winners[a // 9] == OPEN
            )
            if left <= empties:
                out.append(state)
                break
            state.apply_action(rng.choice(state.legal_actions()))
    return out


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"expand": 4, "capture_playouts": True, "prior": 8},
        {"decisive": False, "expand": 2},
    ],
)
def test_solver_proofs_are_exact_on_late_positions(options: dict) -> None:
    """MCTS-Solver (Winands et al. 2008) with each enhancement: every proven root matches
    exact negamax, and a proven win or draw is kept by the move played."""
    proofs = 0
    memo: dict[tuple[int, ...], int] = {}
    for trial, state in enumerate(_late_positions(30, 12)):
        result = mcts_search(
            state,
            deadline=None,
            iterations=20_000,
            seed=trial,
            clock=lambda: 0.0,
            options=MCTSOptions(**options),
            cache={},
        )
        if result.proven is None:
            continue
        proofs += 1
        exact = _value(state, memo)
        assert result.proven == {1: "win", 0: "draw", -1: "loss"}[exact]
        if exact >= 0:
            child = state.clone()
            child.apply_action(result.action)
            if not child.is_terminal():
                assert _value(child, memo) == -exact
            else:
                assert child.winner() in (None, state.current_player())
    assert proofs >= 20


def test_new_options_are_checked() -> None:
    bad_options = ({"expand": 0}, {"prior": -1}, {"expand": 10**6}, {"prior": True})
    bad_options += ({"minimax": -0.1}, {"minimax": 1.5}, {"value_scale": 0}, {"value_scale": 11})
    bad_options += (
        {"avoid_playouts": True, "anti_decisive_playouts": True},
        {"avoid_playouts": True, "decisive": False},
    )
    for bad in bad_options:
        with pytest.raises(
            engine.EngineError, match="option (expand|prior|minimax|value_scale|avoid_playouts)"
        ):
            MCTSOptions(**bad)
    # avoid_playouts left to the game's default goes with the other playout rules, and
    # capture_playouts with avoid_playouts (_playout_avoid_take)
    MCTSOptions(capture_playouts=True)
    MCTSOptions(avoid_playouts=True, capture_playouts=True)
    MCTSOptions(avoid_playouts=False, anti_decisive_playouts=True)


def _search(state: object, seed: int = 5, **options: object) -> SearchResult:
    """mcts_search of 3,000 iterations with ``options``, no clock, a fresh cache."""
    return mcts_search(
        state,
        deadline=None,
        iterations=3000,
        seed=seed,
        clock=lambda: 0.0,
        options=MCTSOptions(**options),  # type: ignore[arg-type]
        cache={},
    )


def _searched(state: object, **options: object) -> tuple:
    result = _search(state, **options)
    return (result.action, result.value, result.visits, result.pv)


def test_capture_playouts_default_on_with_avoid_alone() -> None:
    """uttt's default takes the small board in the avoid playouts (capture_playouts None is
    True there); with anti-decisive playouts, or without the avoid redraw, it stays off."""
    state = _random_position(4, 12)
    default = _searched(state)
    assert default == _searched(state, capture_playouts=True)
    assert default != _searched(state, capture_playouts=False)
    anti = _searched(state, avoid_playouts=False, anti_decisive_playouts=True)
    assert anti == _searched(
        state, avoid_playouts=False, anti_decisive_playouts=True, capture_playouts=False
    )
    assert _searched(state, anti_decisive_playouts=True) == _searched(
        state, anti_decisive_playouts=True, capture_playouts=False
    )
    plain = _searched(state, avoid_playouts=False)
    assert plain == _searched(state, avoid_playouts=False, capture_playouts=False)


@pytest.mark.parametrize("prior", [0, 8])
def test_reported_visits_are_real_playouts(prior: int) -> None:
    """Each iteration passes through one root child; the virtual visits of progressive bias
    are not reported as visits."""
    state = _random_position(3, 20)
    result = _search(state, seed=1, prior=prior)
    assert result.proven is None and result.visits is not None
    assert sum(v for _, v in result.visits) == 3000

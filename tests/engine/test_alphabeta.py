"""The compiled alpha-beta kernels against the Python rules, and alphabeta's own guarantees."""

from __future__ import annotations

import random

import pytest

import engine
from engine import Budget
from engine.alphabeta_driver import mnk_context
from engine.game import winning_actions
from engine.kernels import alphabeta as AB
from engine.kernels import alphabeta_mnk as K
from engine.kernels import alphabeta_uttt as U
from engine.kernels import patterns


def _scratch_shape(board, m: int, n: int, cell: int, step: tuple[int, int], player: int) -> int:
    """The shape ``player`` makes on the empty ``cell`` along ``step``, read off the board."""
    r0, c0 = divmod(cell, n)
    line = []
    for offset in range(-4, 5):
        r, c = r0 + offset * step[0], c0 + offset * step[1]
        if offset == 0:
            line.append(patterns.OWN)
        elif not (0 <= r < m and 0 <= c < n) or board[r * n + c] not in (0, player + 1):
            line.append(patterns.BLOCKED)
        else:
            line.append(patterns.OWN if board[r * n + c] == player + 1 else patterns.EMPTY)
    return patterns.line_shape(tuple(line))


def _scratch_eval(context: K.MNKContext) -> int:
    """The evaluation recomputed from the board, from X's side: by line shapes on k = 5
    boards (the shapes of every empty cell, and their counts, checked on the way), else by
    counting the stones of the windows."""
    t = context.t
    total = 0
    g = context.game
    if g.params[K.P_PATTERN]:
        counts = [[0] * patterns.SHAPES for _ in range(2)]
        steps = ((0, 1), (1, 0), (1, 1), (1, -1))
        m, n = int(g.params[K.P_M]), int(g.params[K.P_N])
        for cell in range(t.cells):
            if g.cells[cell] != 0:
                continue
            for d, step in enumerate(steps):
                for player in (0, 1):
                    shape = _scratch_shape(g.cells, m, n, cell, step, player)
                    assert g.shape[player, cell, d] == shape
                    counts[player][shape] += 1
                    worth = int(K.SHAPE_VALUE[shape])
                    total += worth if player == 0 else -worth
        assert g.shape_count.tolist() == counts
        return total
    for window in t.win_cells:
        x = sum(1 for c in window if context.game.cells[c] == 1)
        o = sum(1 for c in window if context.game.cells[c] == 2)
        if x and not o:
            total += int(t.weights[x])
        elif o and not x:
            total -= int(t.weights[o])
    return total


@pytest.mark.parametrize(
    "params",
    [
        {"m": 3, "n": 3, "k": 3},
        {"m": 5, "n": 5, "k": 4},
        {"m": 15, "n": 15, "k": 5},
        {"m": 4, "n": 7, "k": 3},
    ],  # fmt: skip
)
def test_mnk_kernel_tracks_the_python_rules(params):
    game = engine.make_game("mnk", **params)
    context = mnk_context(game)
    context.set_patterns(True)  # k = 5: the line shapes (checked by _scratch_eval)
    rng = random.Random(sum(params.values()))
    for _ in range(6):
        state = game.new_initial_state()
        while not state.is_terminal():
            state.apply_action(rng.choice(state.legal_actions()))
            context.set_position(state.history())
            assert _scratch_eval(context) == context.info[K.EVAL]
            if state.is_terminal():
                break
            empty = state.legal_actions()
            for player in (0, 1):
                python_wins = any(state.wins_with(a, player) for a in empty)
                assert (context.info[K.FOURS + player] > 0) == python_wins
            mover = state.current_player()
            moves, kind, cell = context.generate_root(mover)
            wins = winning_actions(state)
            assert (kind == 1) == bool(wins)
            threats = [a for a in empty if state.wins_with(a, 1 - mover)]
            if kind == 1:
                assert cell in wins
            elif kind == 2:  # two opponent threats: lost
                assert len(threats) >= 2
            elif kind == 3:  # one threat: the block is the only move
                assert threats == [cell] and moves == [cell]
            else:
                assert not threats
                if game.cells <= 49:
                    assert sorted(moves) == empty
        # the kernel's own win test agrees with the Python winner
        context.set_position(state.history()[:-1])
        last = state.history()[-1]
        g = context.game
        won = K.place(last, (state.ply() - 1) & 1, g, context.info)
        assert won == (state.winner() is not None)


def test_uttt_kernel_tracks_the_python_rules():
    context = U.UTTTContext(tt_bits=4)
    rng = random.Random(9)
    codes = {0: -1, 1: 0, 2: 1, 3: 2}
    for _ in range(20):
        state = engine.make_game("uttt").new_initial_state()
        while not state.is_terminal():
            context.set_position(state.history())
            assert [codes[int(v)] for v in context.game.macro] == state.board_winners()
            assert int(context.info[U.FORCED]) == state.forced
            moves, winning = context.generate_root(state.current_player())
            wins = winning_actions(state)
            assert (winning >= 0) == bool(wins)
            if winning < 0:
                assert sorted(moves) == state.legal_actions()
            else:
                assert winning in wins
            state.apply_action(rng.choice(state.legal_actions()))
        context.set_position(state.history()[:-1])
        last = state.history()[-1]
        g = context.game
        result = U.place(last, (state.ply() - 1) & 1, g.cells, g.macro, g.filled, context.info,
                         g.undo, 0, g.lines, g.through, g.through_n, g.zob)  # fmt: skip
        assert result == (1 if state.winner() is not None else 2)


def test_recursive_kernels_compile_once():
    """A second compiled copy of a recursive function breaks numba's cache (issues #6061,
    #6713): every call site must pass the same types."""
    for name, moves in (("gomoku", [112, 113, 98]), ("5x5", [12]), ("uttt", [40])):
        state = engine.replay((name, {}), moves)
        engine.search(state, "alphabeta", Budget(iterations=3000), seed=1)
    # One compiled search per game (its position tuple's type), one VCF, one VCT (negamax is
    # called from compiled code only, so its copies show as root's).
    assert len(AB.root.signatures) == 2 and len(K.vcf.signatures) == 1
    assert len(K.vct.signatures) == 1


@pytest.mark.parametrize(("name", "params"), [("mnk", {"m": 3, "n": 4, "k": 3}), ("tictactoe", {})])
def test_compiled_and_python_searches_agree_on_exact_values(name, params):
    rng = random.Random(2)
    game = engine.make_game(name, **params)
    for _ in range(15):
        state = game.new_initial_state()
        for _ in range(rng.randrange(1, 6)):
            state.apply_action(rng.choice(state.legal_actions()))
            if state.is_terminal():
                break
        if state.is_terminal():
            continue
        compiled = engine.search(state, "alphabeta", Budget(iterations=10**7))
        python = engine.search(
            state, "alphabeta", Budget(iterations=10**7), options={"compiled": False}
        )
        assert compiled.proven == python.proven is not None
        assert compiled.value == python.value


def _rc(*cells):
    return [r * 15 + c for r, c in cells]


def test_gomoku_double_four_is_found_and_played():
    # X: row 7 (7,5)-(7,7) closed by O at (7,4); column 8 (4,8)-(6,8) closed by O at (3,8).
    # X (7,8) makes two fours at once: a win in three plies, found by the VCF search.
    x = _rc((7, 5), (7, 6), (7, 7), (4, 8), (5, 8), (6, 8))
    o = _rc((7, 4), (3, 8), (0, 0), (0, 14), (14, 0), (14, 14))
    moves = [m for pair in zip(x, o, strict=True) for m in pair]
    state = engine.replay(("gomoku", {}), moves)
    result = engine.search(state, "alphabeta", Budget(iterations=50000), seed=1)
    assert result.action == _rc((7, 8))[0]
    assert result.proven == "win" and len(result.pv) == 3


def test_gomoku_open_three_is_blocked():
    # O has an open three (7,6)-(7,8) with both ends and beyond empty; X must stop it now.
    x = _rc((0, 0), (0, 2), (14, 14))
    o = _rc((7, 6), (7, 7), (7, 8))
    moves = [m for pair in zip(x, o, strict=True) for m in pair]
    state = engine.replay(("gomoku", {}), moves)
    assert state.current_player() == 0
    result = engine.search(state, "alphabeta", Budget(iterations=200000), seed=1)
    assert result.action in _rc((7, 4), (7, 5), (7, 9), (7, 10))


@pytest.mark.parametrize(("name", "moves"), [("gomoku", [112, 113, 98, 97]), ("uttt", [40, 36])])
def test_fixed_seed_and_node_budget_give_the_same_search(name, moves):
    """Fresh searches start from a clean table (a new generation), whatever ran before."""
    state = engine.replay((name, {}), moves)
    other = engine.replay((name, {}), moves[:1])
    first = engine.search(state, "alphabeta", Budget(iterations=20000), seed=4)
    engine.search(other, "alphabeta", Budget(iterations=20000), seed=5)
    again = engine.search(state, "alphabeta", Budget(iterations=20000), seed=4)
    assert (first.action, first.iterations, first.pv) == (again.action, again.iterations, again.pv)


def test_one_games_searches_share_the_table():
    searcher = engine.Searcher()
    state = engine.replay(("uttt", {}), [40])
    cold = searcher.search(state, "alphabeta", Budget(iterations=30000), game_key="g")
    state.apply_action(cold.action)
    state.apply_action(cold.pv[1])
    warm = searcher.search(state, "alphabeta", Budget(iterations=30000), game_key="g")
    fresh = engine.search(state, "alphabeta", Budget(iterations=30000))
    assert warm.action in state.legal_actions()
    # the kept table lets the same node budget reach at least as deep
    assert warm.depth >= fresh.depth


def _window_order_score(g, t, p: int, c: int) -> int:
    """A cell's ordering score for p read off its windows (the scan ``generate`` did before
    the per-cell sums): each window free of the opponent counts weights[own + 1], each free of
    p counts half of weights[opponent's + 1]."""
    own = 0
    for w in t.cell_win[c, : t.cell_win_n[c]]:
        a, b = int(g.counts[w, p]), int(g.counts[w, 1 - p])
        if b == 0:
            own += int(t.weights[a + 1])
        if a == 0:
            own += int(t.weights[b + 1]) >> 1
    return own


def _window_tallies(g, t, k: int) -> list[list[tuple[int, int, int, int, int]]]:
    """Per player and cell, from the windows through it: (sum of weights[count + 1] of those
    free of the other player, how many are k - 2, k - 1 and k - 3 for the player and free of
    the other, how many are empty (X's only))."""
    out = []
    for q in (0, 1):
        row = []
        for c in range(t.cells):
            score = fours = wins = threes = empty = 0
            for w in t.cell_win[c, : t.cell_win_n[c]]:
                own, other = int(g.counts[w, q]), int(g.counts[w, 1 - q])
                if other == 0:
                    score += int(t.weights[own + 1])
                    fours += own == k - 2
                    wins += own == k - 1
                    threes += own == k - 3
                empty += q == 0 and own + other == 0
            row.append((score, fours, wins, threes, empty))
        out.append(row)
    return out


def _fields(tally) -> list[list[tuple[int, int, int, int, int]]]:
    """The packed tallies (``alphabeta_mnk.tally``) unpacked."""
    return [
        [
            (
                int(v) & 0xFFFFFFFF,
                (int(v) >> K.T_FOURS) & 0xFF,
                (int(v) >> K.T_WINS) & 0xFF,
                (int(v) >> K.T_THREES) & 0x7F,
                (int(v) >> K.T_EMPTY) & 0xFF,
            )  # fmt: skip
            for v in row
        ]
        for row in tally
    ]


@pytest.mark.parametrize(("m", "n", "k"), [(15, 15, 5), (5, 5, 4), (4, 7, 3)])
def test_per_cell_window_sums_follow_place_and_remove(m, n, k):
    """The per-cell window tallies kept by place/remove (``_retally``) equal a scan of the
    windows after every step of random make/unmake sequences, and the ordering scores of
    ``generate`` equal the window scan they replace."""
    game = engine.make_game("mnk", m=m, n=n, k=k)
    context = mnk_context(game)
    context.set_position([])
    g, t, info = context.game, context.t, context.info
    cells = t.cells
    rng = random.Random(m * 100 + n * 10 + k)
    stack: list[tuple[int, int]] = []
    checked = 0
    for step in range(600):
        empty = [c for c in range(cells) if g.cells[c] == 0]
        if stack and (not empty or rng.random() < 0.4):
            c, p = stack.pop()
            K.remove(c, p, g, info)
        else:
            c, p = rng.choice(empty), len(stack) & 1
            K.place(c, p, g, info)
            stack.append((c, p))
        assert _fields(g.tally) == _window_tallies(g, t, k), step
        mover = len(stack) & 1
        context.search.history[:] = 0
        context.search.killers[:] = -1
        count, kind, _ = K.generate(mover, 0, g, context.search, -1)
        if kind in (0, 5):
            for i in range(count):
                c = int(context.search.moves[0, i])
                assert context.search.scores[0, i] == _window_order_score(g, t, mover, c)
            checked += 1
    assert checked > 100


def test_gomoku_depth_one_stops_at_the_deadline():
    """Every depth of the deepening stops at the deadline, the first included (with a VCF at
    each leaf, a gomoku depth 1 took seconds of a 200 ms move). On a clock that advances 1 ms
    a read, the root's threat searches spend a 30 ms budget: depth 1 is cut (it used to run
    to its end, reading no clock), and the move is still a legal one."""
    ticks = iter(range(10_000_000))
    searcher = engine.Searcher(clock=lambda: next(ticks) * 0.001)
    moves = [174, 52, 50, 84, 80, 124, 55, 56, 64, 172, 54, 79, 123, 48]  # bench/gomoku_nodes
    state = engine.replay(engine.make_game("gomoku"), moves)
    result = searcher.search(state, "alphabeta", Budget(time_ms=30), seed=1)
    assert result.depth == 0
    assert result.action in state.legal_actions()


def test_gomoku_threat_answers_extend_within_twice_the_root_depth():
    """An answer to an open three (generate's kind 4) costs no depth only within twice the
    iteration's depth (info[ROOT_DEPTH]); beyond it, answers cost depth like other moves. On
    this position, rich in threes (test_vcf_puzzles.LOST_POSITION three moves earlier), the
    unbounded extension let the deepening complete depth 2 only within 50,000 nodes."""
    moves = [112, 127, 126, 111, 98, 140, 84, 70, 143, 125, 128, 83]
    state = engine.replay(("gomoku", {}), moves)
    result = engine.search(state, "alphabeta", Budget(iterations=50_000), seed=1)
    assert result.depth >= 4
    assert result.action in state.legal_actions()


def test_gomoku_late_move_reductions_deepen_the_search():
    """Late-move reductions at the nodes that search their best moves only (generate's kind
    5): a late move is searched a ply shallower first. On this middle-game position
    (bench/gomoku_nodes.py's sixth) the deepening completes depth 4 within 50,000 nodes
    without them, depth 6 with them."""
    moves = [48, 54, 100, 138, 86, 84, 69, 65, 63, 95, 108, 50, 68, 153, 55, 143]
    state = engine.replay(("gomoku", {}), moves)
    result = engine.search(state, "alphabeta", Budget(iterations=50_000), seed=1)
    assert result.depth >= 6
    assert result.action in state.legal_actions()


@pytest.mark.parametrize("moves", [[112, 113, 98], [112, 113, 98, 126, 97, 82]])
def test_gomoku_the_deepening_goes_on_in_what_the_root_defence_leaves(moves):
    """The deepening runs in a share of the budget and the root's defence against a VCT in
    the rest; where the opponent has no threats the defence is not needed, and the deepening
    has what it would have left. Early in a game, of 50,000 nodes the search used ~38,000 (the rest
    unused); now it uses nearly all of them."""
    state = engine.replay(("gomoku", {}), moves)
    result = engine.search(state, "alphabeta", Budget(iterations=50_000), seed=1)
    assert result.iterations >= 47_500
    assert result.action in state.legal_actions()

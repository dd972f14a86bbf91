"""VCF puzzles (victory by continuous fours, Allis 1994) on the gomoku board: the alphabeta
search must find each forced win, and a reference solver written here in plain Python on the
engine's rules (not the kernels) proves both the puzzle and the move the search plays.

The reference is exhaustive within VCF: the attacker tries every move that makes a four; a
defender reply other than the block loses at once (the attacker completes five), unless it
makes five itself, so only the block is searched further. The puzzles are random gomoku
positions (no four on the board) whose shortest VCF is 3 to 5 fours, with that length
checked: none shorter exists.

VCT puzzles (victory by continuous threats: fours and open threes): positions from self-play
where the player to move has no VCF but a VCT. The check is exhaustive on the defender's side:
the attacker plays the compiled VCT's moves, and every defender move is tried, but for those
the rules settle at once (a move off the lines of the attacker's open-four cells that makes
no four leaves an open four to play, which wins)."""

from __future__ import annotations

import time

import pytest

import engine
from engine import Budget
from engine.alphabeta_driver import _defend, _passed_threat, _start, mnk_context
from engine.kernels import alphabeta_base as base
from engine.kernels import alphabeta_mnk as K
from engine.mnk import EMPTY, MNKState

# (moves from the start, fours in the shortest VCF of the player to move)
PUZZLES = [
    ([112, 97, 98, 82, 99, 127, 141, 156, 115, 170, 116, 85, 169, 67, 130, 142, 172, 51], 3),
    ([112, 126, 128, 127, 98, 82, 83, 99, 144, 96, 130, 80, 81, 69, 141, 64, 63, 145, 85, 55, 67,
      70, 48, 143, 129, 115, 157, 41], 3),
    ([112, 111, 128, 126, 97, 82, 114, 144, 81, 129, 83, 130, 141, 142, 116, 132, 95, 66, 146, 99,
      127, 94, 125, 98, 69, 93, 107, 102], 4),
    ([112, 98, 114, 129, 96, 100, 80, 101, 95, 130, 116, 127, 131, 142, 102, 158, 132, 64], 3),
    ([112, 96, 82, 126, 80, 65, 142, 127, 98, 110, 67, 156, 95, 114, 157, 66, 141, 100, 53, 64, 99,
      140, 129], 5),
    ([112, 126, 96, 141, 156, 142, 143, 140, 127, 159, 172, 145, 129, 173, 170, 146, 110, 97, 114,
      147, 154, 175], 3),
    ([112, 96, 80, 81, 128, 79, 98, 65, 114, 144, 78, 82, 68, 115, 64, 100, 77, 62, 54, 130, 159,
      50], 4),
    ([112, 98, 127, 84, 97, 128, 81, 65, 144, 68, 126, 70, 85, 55, 51, 82, 67, 101, 86, 129,
      52], 3),
    ([112, 113, 127, 97, 114, 141, 115, 96, 81, 110, 124, 101, 157, 109, 98, 138, 128, 93, 144, 156,
      117, 78], 4),
    ([112, 98, 111, 114, 100, 86, 70, 102, 97, 99, 55, 130, 82, 129, 88, 118, 132, 103, 144, 101,
      147], 5),
    ([112, 128, 143, 158, 174, 172, 187, 171, 159, 186, 203, 175, 161, 126, 162, 160, 111, 189, 217,
      176, 148, 164, 155, 110, 144], 3),
    ([112, 97, 83, 67, 52, 111, 38, 126, 96, 142, 98, 156, 95, 99, 171, 69, 141, 81, 65, 22, 79,
      127], 3),
]  # fmt: skip


def winning_cells(state: MNKState, player: int) -> set[int]:
    return {c for c, v in enumerate(state.board) if v == EMPTY and state.wins_with(c, player)}


def fours(state: MNKState, player: int) -> list[int]:
    """Every empty cell where ``player`` makes a four (then has a cell to win on)."""
    out = []
    for c, v in enumerate(state.board):
        if v == EMPTY:
            state.board[c] = player
            if winning_cells(state, player):
                out.append(c)
            state.board[c] = EMPTY
    return out


def vcf(state: MNKState, depth: int) -> int | None:
    """A first move that wins by at most ``depth`` fours for the player to move, or None."""
    p = state.current_player()
    own = winning_cells(state, p)
    if own:
        return min(own)
    if depth == 0:
        return None
    theirs = winning_cells(state, 1 - p)
    for move in fours(state, p):
        if (not theirs or move in theirs) and proves(state, move, depth):
            return move
    return None


def proves(state: MNKState, move: int, depth: int) -> bool:
    """After the mover plays ``move``, every reply loses within ``depth - 1`` more fours."""
    p = state.current_player()
    after = state.clone()
    after.apply_action(move)
    if after.is_terminal():
        return after.winner() == p
    wins = winning_cells(after, p)
    if not wins or winning_cells(after, 1 - p):
        return False  # not a four, or the defender has a five to play first
    if len(wins) >= 2:
        return True  # whatever the reply, a winning cell is left
    block = after.clone()
    block.apply_action(wins.pop())
    return not block.is_terminal() and vcf(block, depth - 1) is not None


def proves_within(state: MNKState, move: int, depth: int) -> bool:
    """``proves`` by iterative deepening: the same answer, found at the shortest VCF's depth
    (a depth-first search to ``depth`` may first exhaust long failing lines)."""
    return any(proves(state, move, d) for d in range(1, depth + 1))


@pytest.mark.parametrize(("moves", "length"), PUZZLES)
def test_puzzle_is_a_shortest_vcf_of_its_length(moves: list[int], length: int) -> None:
    state = engine.replay(("gomoku", {}), moves)
    p = state.current_player()
    assert not winning_cells(state, p) and not winning_cells(state, 1 - p)
    assert vcf(state, length) is not None
    assert vcf(state, length - 1) is None


@pytest.mark.parametrize(("moves", "length"), PUZZLES)
def test_alphabeta_finds_the_win_and_plays_it_out(moves: list[int], length: int) -> None:
    """The search proves the win (its root VCF), plays a move that starts a VCF, and against
    the blocks completes five within the 16 fours its root VCF search looks at."""
    state = engine.replay(("gomoku", {}), moves)
    attacker = state.current_player()
    for ply in range(16):
        result = engine.search(state, "alphabeta", Budget(iterations=20_000), seed=1)
        assert result.value == 1.0
        if ply == 0:  # later, a block that makes a four forces the reply: no VCF at the root
            assert result.proven == "win"
        assert proves_within(state, result.action, 16)
        state.apply_checked(result.action)
        if state.is_terminal():
            break
        state.apply_checked(min(winning_cells(state, attacker)))  # the defender blocks
    assert state.winner() == attacker


# --- VCT: victory by continuous threats (fours and open threes) -------------------------------


def line_cells(cell: int, n: int = 15) -> list[int]:
    """The cells within four of ``cell`` along its row, column and diagonals: a five through
    ``cell`` lies in them, so a stone there changes only their winning cells."""
    r0, c0 = divmod(cell, n)
    out = []
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for offset in (-4, -3, -2, -1, 1, 2, 3, 4):
            r, c = r0 + offset * dr, c0 + offset * dc
            if 0 <= r < n and 0 <= c < n:
                out.append(r * n + c)
    return out


def new_wins(state: MNKState, player: int, cell: int) -> set[int]:
    """The winning cells of ``player`` through its stone on ``cell`` (all of them, if it had
    none before)."""
    return {c for c in line_cells(cell) if state.board[c] == EMPTY and state.wins_with(c, player)}


def open_four_cells(state: MNKState, player: int, near: list[int]) -> set[int]:
    """The empty cells of ``near`` where ``player``, with no winning cell yet, gets two."""
    out = set()
    for c in near:
        if state.board[c] == EMPTY:
            state.board[c] = player
            if len(new_wins(state, player, c)) >= 2:
                out.add(c)
            state.board[c] = EMPTY
    return out


def kernel_vct_move(state: MNKState, depth: int) -> int | None:
    """The first move of the compiled VCT (engine/kernels/alphabeta_mnk.py) within ``depth``
    threats for the player to move, or None."""
    context = mnk_context(state.game)
    _start(context, state.history(), False, None, time.perf_counter)
    context.deadline[base.D_DEADLINE] = 0.0
    if K.vct(state.current_player(), 1, depth, 0, context.game, context.search):
        return int(context.info[K.BEST])
    return None


def vct_proof(state: MNKState, depth: int) -> bool:
    """The player to move (the attacker) wins within ``depth`` threats, its moves those of
    the compiled VCT, every defence tried (``vct_defence_loses``)."""
    p = state.current_player()
    if winning_cells(state, p):
        return True
    if depth == 0:
        return False
    theirs = winning_cells(state, 1 - p)
    if len(theirs) >= 2:
        return False
    move = min(theirs) if theirs else kernel_vct_move(state, depth)
    if move is None:
        return False
    after = state.clone()
    after.apply_action(move)
    return vct_defence_loses(after, depth - 1, p)


def vct_defence_loses(state: MNKState, depth: int, attacker: int) -> bool:
    """Every move of the defender (to move) loses to the attacker within ``depth`` threats.
    Exhaustive: a move far from the attacker's open-four cells (off their lines) that makes
    no four leaves an open four to play next, which wins; every other move is searched."""
    d = 1 - attacker
    if winning_cells(state, d):
        return False  # the defender makes five
    wins = winning_cells(state, attacker)
    if len(wins) >= 2:
        return True
    if wins:  # a four: any move but its block lets five be played
        replies = [min(wins)]
    else:
        board = state.board
        near = [c for c, v in enumerate(board) if v == EMPTY]
        lines = {c for s, v in enumerate(board) if v == attacker for c in line_cells(s)}
        targets = open_four_cells(state, attacker, [c for c in near if c in lines])
        if not targets:
            return False  # no four, no open three: the attack has run out
        reach = {c for t in targets for c in line_cells(t)} | targets
        replies = []
        for c in near:
            board[c] = d
            four = bool(new_wins(state, d, c))
            board[c] = EMPTY
            if four or c in reach:
                replies.append(c)
    for reply in replies:
        after = state.clone()
        after.apply_action(reply)
        if not vct_proof(after, depth):
            return False
    return True


# (moves from the start, attacking moves of the VCT found) from self-play: the player to move
# has no VCF but a VCT (Allis 1994: fours and open threes, every defence tried).
VCT_PUZZLES = [
    ([97, 144, 113, 125, 99, 98, 115, 112, 145, 81], 4),
    ([144, 95, 127, 113, 128, 160, 142, 114], 3),
    ([84, 111, 83, 142, 68, 100, 69, 114, 86, 156, 128, 85], 3),
    ([98, 82, 126, 83, 96, 97, 112, 84, 85, 111, 69, 80, 81, 101, 154, 140, 67, 95, 139, 65, 50,
      143, 159, 63, 79, 64, 62, 129, 115, 125, 110, 70, 158, 94], 4),
    ([126, 110, 82, 129, 112, 98, 83, 67, 156, 141, 124, 125, 140, 172, 80, 81, 64, 96], 4),
]  # fmt: skip


@pytest.mark.parametrize(("moves", "depth"), VCT_PUZZLES)
def test_alphabeta_finds_the_vct(moves: list[int], depth: int) -> None:
    """No VCF (checked exhaustively to 8 fours), a VCT (proven against every defence), and
    the search proves the win and plays a move that keeps it within the same threats."""
    state = engine.replay(("gomoku", {}), moves)
    attacker = state.current_player()
    assert vcf(state, 8) is None
    assert vct_proof(state, depth)
    result = engine.search(state, "alphabeta", Budget(iterations=100_000), seed=1)
    assert result.proven == "win"
    after = state.clone()
    after.apply_checked(result.action)
    assert vct_defence_loses(after, depth - 1, attacker)


# From a match against c0f7043 (seed 4201, game 51): after O's first move X has a VCT of 5.
LOST_OPENING = [141, 82, 140, 99, 156, 98]


def test_the_vct_proves_the_win_of_a_lost_game_in_few_nodes() -> None:
    """The last attacking move of a VCT must make an open four or a double four, so at one
    threat left the VCT looks for that move alone (no open three or lone four tried); the
    attacker's threats are tried in the order of their window scores (fours first), and the
    proofs are kept with the failures. Iterative deepening from 2 threats (as at the root)
    proves X's win here within 3,000 nodes (2,032); trying every threat to the last took
    9,735, and 4,358 with the threes in board order."""
    state = engine.replay(("gomoku", {}), LOST_OPENING)
    context = mnk_context(state.game)
    _start(context, state.history(), False, 3_000, time.perf_counter)
    found = 0
    for depth in range(2, 9):
        if K.vct(state.current_player(), 1, depth, 0, context.game, context.search):
            found = depth
            break
    assert found == 5
    assert vct_proof(state, found)


def test_vct_needs_a_threat() -> None:
    """The reference can say no: two stones each, no three to make, no VCT."""
    state = engine.replay(("gomoku", {}), [112, 0, 113, 14])
    assert not vct_proof(state, 3)


# (moves from the start, a tempting move after which the opponent has a VCT, its threats):
# from a match against c0f7043 (seed 4201, game 29), where the search without the defence
# plays that move. (The positions that stood here before, LOST_POSITION and a self-play one
# where it played 113, the search without the defence answers itself since the threat-answer
# extension was bounded and the late-move reductions came: it plays 170 and 155.)
DEFENCE_PUZZLES = [
    ([128, 110, 129, 99, 143, 130, 113], 98, 6),
]  # fmt: skip
# O to move: two moves hold (170, 185); after each other of its 20 best by static score, X
# has a VCT within 6 threats.
LOST_POSITION = [112, 127, 126, 111, 98, 140, 84, 70, 143, 125, 128, 83, 97, 155, 110]


@pytest.mark.parametrize(("moves", "refuted", "depth"), DEFENCE_PUZZLES)
def test_alphabeta_defends_against_the_opponents_vct(
    moves: list[int], refuted: int, depth: int
) -> None:
    """The move the search without the defence plays loses to a VCT (proven against every
    defence); with it the search plays a move after which the compiled VCT finds none for
    the opponent within 6 threats."""
    state = engine.replay(("gomoku", {}), moves)
    budget = Budget(iterations=60_000)
    plain = engine.search(state, "alphabeta", budget, seed=1, options={"defence": False})
    assert plain.action == refuted
    after = state.clone()
    after.apply_checked(refuted)
    assert vct_proof(after, depth)
    result = engine.search(state, "alphabeta", budget, seed=1)
    assert result.action != refuted
    after = state.clone()
    after.apply_checked(result.action)
    assert kernel_vct_move(after, 6) is None


def test_the_root_defence_checks_its_candidates_together() -> None:
    """The root's defence against the opponent's VCT deepens the check of its candidates in
    lockstep, one threat more for each in turn. With 500 nodes, the first candidate here (124)
    loses to an open four at once and the second (81) is safe, but takes ~3,000 nodes to
    check to 6 threats: checked one after the other, the budget ran out on 81 and the first,
    refuted, candidate was played; checked together, 124 is refuted at depth 1 and the first
    candidate not refuted, 81, is played."""
    moves = [98, 99, 125, 112, 128, 113, 127, 129, 114, 97, 145, 82, 100]
    candidates = [124, 81, 67, 52, 65, 142]
    state = engine.replay(("gomoku", {}), moves)
    player = state.current_player()
    refuted = state.clone()
    refuted.apply_checked(candidates[0])
    assert vct_proof(refuted, 1)
    context = mnk_context(state.game)
    _start(context, state.history(), False, 500, time.perf_counter)
    action, _ = _defend(context, player, candidates, 0.0, 500)
    assert context.info[base.NODES] <= 600  # the budget held
    assert action != candidates[0]
    after = state.clone()
    after.apply_checked(action)
    assert kernel_vct_move(after, 6) is None


def test_the_root_defence_falls_back_on_the_static_best_moves() -> None:
    """Where the search's own best moves are refuted, the defence also checks the best root
    moves by static score: here the search's only candidate, 124, loses to an open four at
    once, and 81, second by static score, is safe and played (without the static moves,
    the refuted one was: every candidate refuted, the longest resistance)."""
    moves = [98, 99, 125, 112, 128, 113, 127, 129, 114, 97, 145, 82, 100]
    state = engine.replay(("gomoku", {}), moves)
    context = mnk_context(state.game)
    _start(context, state.history(), False, None, time.perf_counter)
    action, refuted = _defend(
        context, state.current_player(), [124], 0.0, None, static=[124, 81, 67]
    )
    assert refuted == {124}
    assert action == 81
    after = state.clone()
    after.apply_checked(action)
    assert kernel_vct_move(after, 6) is None


def test_the_root_defence_starts_from_the_opponents_threat_if_the_mover_passed() -> None:
    """Before the deepening, the opponent's VCT as if the mover passed: early in a game it
    has none (then no move of the mover lets it have one, and the defence is skipped: the
    deepening gets its budget); in this position of a match (O to move, from seed 4101) X
    has a VCT of 3 threats from 111 (O played 111 there, after which X won by a VCT of 5)."""
    quiet = engine.replay(("gomoku", {}), [112, 113, 98])
    context = mnk_context(quiet.game)
    _start(context, quiet.history(), False, None, time.perf_counter)
    assert _passed_threat(context, quiet.current_player(), 0.0, None, time.perf_counter) is None
    moves = [112, 99, 141, 127, 140, 98, 109, 97, 96]
    state = engine.replay(("gomoku", {}), moves)
    _start(context, state.history(), False, None, time.perf_counter)
    assert _passed_threat(context, state.current_player(), 0.0, None, time.perf_counter) == 111


def test_the_root_defence_plays_the_longest_resistance() -> None:
    """When every candidate loses to a VCT, the defence plays the one whose VCT is the
    longest (it had played the first candidate): here 141, refuted by 5 threats, against
    96 and 95, refuted by 2."""
    longest = 141
    state = engine.replay(("gomoku", {}), LOST_POSITION)
    candidates = [96, 95, longest]
    context = mnk_context(state.game)
    _start(context, state.history(), False, None, time.perf_counter)
    action, _ = _defend(context, state.current_player(), candidates, 0.0, None)
    assert action == longest
    for move in candidates[:2]:
        after = state.clone()
        after.apply_checked(move)
        assert vct_proof(after, 2)

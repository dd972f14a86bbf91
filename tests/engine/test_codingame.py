"""CodinGame's referee protocol for ultimate tic-tac-toe (engine/codingame.py), fed lines as
the referee sends them."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import make_game
from engine.codingame import OPENING, CodinGameBrain, TurnTime
from engine.result import SearchResult
from engine.think import Log, Think, answer
from engine.uttt import UTTTState

GRID = make_game("uttt").grid  # type: ignore[attr-defined]


def turn(brain: CodinGameBrain, opponent: str, valid: list[int]) -> list[object]:
    """One turn of the referee: the opponent's move, then the valid actions."""
    replies = brain.feed(opponent) + brain.feed(str(len(valid)))
    for action in valid:
        row, col = GRID.cell(action)
        replies += brain.feed(f"{row} {col}")
    return replies


def think(replies: list[object]) -> Think:
    thinks = [reply for reply in replies if isinstance(reply, Think)]
    assert len(thinks) == 1 and not any(isinstance(r, str) for r in replies), replies
    return thinks[0]


def play(brain: CodinGameBrain, action: int) -> str:
    lines = brain.played(SearchResult(action, 0.0, "mcts", 1))
    assert isinstance(lines[0], Log)
    assert isinstance(lines[-1], str)
    return lines[-1]


def test_the_bot_moves_first_then_follows_the_game() -> None:
    brain = CodinGameBrain()
    state = make_game("uttt").new_initial_state()
    replies = turn(brain, "-1 -1", state.legal_actions())
    # The opening, without a search: the centre board's centre, row 4, column 4.
    assert replies[-1] == "4 4" and not any(isinstance(reply, Think) for reply in replies)
    assert OPENING == 40 and brain.state.history() == [40]
    state.apply_action(40)
    state.apply_action(GRID.action(3, 3))  # the opponent, sent to the centre board
    request = think(turn(brain, "3 3", state.legal_actions()))
    assert request.state.history() == state.history()
    assert request.time_ms == 100 * TurnTime.SHARE
    assert play(brain, 0) == "0 0"  # board 0 (top left), cell 0


def test_the_bot_moves_second() -> None:
    brain = CodinGameBrain(TurnTime(first_ms=500, turn_ms=50))
    state = make_game("uttt").new_initial_state()
    state.apply_action(GRID.action(8, 8))  # the bottom right board's bottom right cell
    request = think(turn(brain, "8 8", state.legal_actions()))
    assert request.state.history() == [80] and request.state.current_player() == 1
    assert request.time_ms == 500 * TurnTime.SHARE
    assert set(request.state.legal_actions()) == set(range(72, 80))


def test_the_referee_is_the_authority() -> None:
    """Valid actions that are not the position's legal moves: said on the diagnostic stream;
    a searched move the referee does not allow: its first valid action, and from then on."""
    brain = CodinGameBrain()
    replies = turn(brain, "-1 -1", [40, 41])  # not the 81 moves of the empty board
    assert isinstance(replies[0], Log) and "not this position's legal moves" in replies[0].text
    think(replies)
    lines = brain.played(SearchResult(0, 0.0, "mcts", 1))  # 0 is not among the valid actions
    assert isinstance(lines[0], Log) and lines[-1] == "4 4" and brain.lost_track
    assert turn(brain, "3 3", [5, 6]) == ["1 2"]  # lost: the first valid action (board 0, cell 5)


def test_a_line_that_is_not_the_referees_ends_the_bot() -> None:
    """The protocol has no error reply: a line the bot cannot read is said on the diagnostic
    stream and ends it (``unreadable``), the position unchanged; empty lines are skipped."""
    for before, line in (([], "hello"), ([], "1 2 3"), ([], "-1"), ([], "99999 1"),
                         ([], "x" * 300), ([], "4 9"), (["-1 -1"], "0"), (["-1 -1"], "82"),
                         (["-1 -1", "2"], "9 0"), (["-1 -1", "2"], "0 x")):  # fmt: skip
        brain = CodinGameBrain()
        for good in before:
            assert brain.feed(good) == []
        assert not brain.unreadable and not brain.ended
        (reply,) = brain.feed(line)
        assert isinstance(reply, Log) and reply.text.startswith("cannot read the referee's")
        assert brain.unreadable and brain.ended and brain.state.ply() == 0, line
    brain = CodinGameBrain()
    assert brain.feed("") == [] and brain.feed("-1 -1") == [] and brain.feed("2") == []
    brain.feed("0 0")
    think(brain.feed("0 1"))
    assert brain.cancel("no search")[-1] == "0 0"  # a failed search still answers
    assert not brain.unreadable and not brain.ended


def test_a_turn_without_a_search_plays_a_centre() -> None:
    """When its search fails the bot still answers: with no small board to win or block and
    no send to avoid, the centre of the centre board, else the centre of a board it may play
    in."""
    brain = CodinGameBrain()
    state = make_game("uttt").new_initial_state()
    state.apply_action(4)  # board 0, cell 4: O is sent to the centre board
    think(turn(brain, "0 1", state.legal_actions()))
    assert brain.cancel("loading")[-1] == "4 4"
    brain = CodinGameBrain()
    state = make_game("uttt").new_initial_state()
    state.apply_action(30)  # board 3, cell 3: O is sent to board 3
    think(turn(brain, "4 0", state.legal_actions()))
    assert brain.cancel("loading")[-1] == "4 1"  # board 3's centre: row 4, column 1


def follow(
    moves: list[int], bot: int = 1, valid: list[int] | None = None
) -> tuple[CodinGameBrain, UTTTState]:
    """A bot playing ``bot`` (0: X, its first move the opening; 1: O) through ``moves``
    (actions, both sides', checked), fed as the referee sends them, its own moves as its
    searches' results; ``moves`` ends with the opponent's, the bot's search pending (its
    turn's valid actions: ``valid``, else the legal moves). The bot's brain and the
    position."""
    brain = CodinGameBrain()
    state = make_game("uttt").new_initial_state()
    if bot == 0:
        assert turn(brain, "-1 -1", state.legal_actions())[-1] == "4 4"
        state.apply_checked(moves[0])
    for index, action in enumerate(moves[1 - bot :], start=1 - bot):
        mover = state.current_player()
        state.apply_checked(action)
        if mover == bot:
            play(brain, action)
            continue
        sent = state.legal_actions() if valid is None or index < len(moves) - 1 else valid
        think(turn(brain, "{} {}".format(*GRID.cell(action)), sent))
    return brain, state


def quick(brain: CodinGameBrain) -> int:
    """The bot's move when its search fails (not ready): an action."""
    line = brain.cancel("not ready")[-1]
    assert isinstance(line, str) and MOVE.fullmatch(line), line
    return GRID.action(*map(int, line.split()))


# Actions as board * 9 + cell: the move sends the opponent to board ``cell``.
def test_the_quick_move_wins_a_small_board() -> None:
    # X 3:4, O 4:0, X 0:4, O 4:1, X 1:4: O in the centre board, 4:0 and 4:1 its own.
    brain, _ = follow([31, 36, 4, 37, 13])
    assert quick(brain) == 38  # 4:2, not the centre


def test_the_quick_move_blocks_a_small_board() -> None:
    # X 4:6, O 6:4, X 4:7, O 7:5, X 5:4: O in the centre board, where X has 4:6 and 4:7.
    brain, _ = follow([42, 58, 43, 68, 49])
    assert quick(brain) == 44  # 4:8 (the centre would send X back here: it would win)


def test_the_quick_move_does_not_send_to_a_board_the_opponent_wins_at_once() -> None:
    # X 4:6, O 6:4, X 4:7: O in board 7; its centre would send X to 4, which X then wins.
    brain, _ = follow([42, 58, 43])
    assert quick(brain) == 63  # 7:0, to the empty board 0


def test_the_quick_move_does_not_give_a_free_choice() -> None:
    # X 4:0, O 0:4, X 4:1, O 1:4, X 4:2: X has won the centre board, O is sent to board 2,
    # whose centre would send X to the closed centre board: any board.
    brain, state = follow([36, 4, 37, 13, 38])
    assert state.board_winners()[4] == 0
    assert quick(brain) == 18  # 2:0, to board 0


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_quick_move_is_always_a_valid_action(data: st.DataObject) -> None:
    """In any position of a game the bot followed, its quick move is one of the referee's
    valid actions: the legal moves (then legal, and the bot still follows the game), some of
    them, or any actions (a referee whose rules differ). With the legal moves, it wins the
    game if a move does, else a small board if a move does."""
    bot = data.draw(st.integers(0, 1), label="bot")
    choices = data.draw(st.lists(st.integers(0, 80), min_size=2, max_size=81), label="choices")
    moves = [OPENING] if bot == 0 else []  # the bot as X opens in the centre
    state = replay(moves)
    for choice in choices:
        if state.is_terminal():
            break
        legal = state.legal_actions()
        moves.append(legal[choice % len(legal)])
        state.apply_action(moves[-1])
    while len(moves) % 2 != bot or replay(moves).is_terminal():
        moves.pop()  # back to the last position with the bot to move
    legal = replay(moves).legal_actions()
    kind = data.draw(st.sampled_from(["legal", "some", "any"]), label="valid")
    valid = {
        "legal": lambda: legal,
        "some": lambda: sorted(data.draw(st.sets(st.sampled_from(legal), min_size=1))),
        "any": lambda: sorted(data.draw(st.sets(st.integers(0, 80), min_size=1))),
    }[kind]()
    brain, state = follow(moves, bot, valid)
    move = quick(brain)
    assert move in valid
    if kind == "legal":  # and it wins the game, else a small board, when a move does
        after = {action: replay([*moves, action]) for action in legal}
        mover = state.current_player()
        wins = [action for action in legal if after[action].winner() == mover]
        wins = wins or [a for a in legal if after[a].board_winners()[a // 9] == mover]
        assert move in (wins or legal)
        state.apply_checked(move)
        assert brain.state == state and not brain.lost_track


def replay(moves: list[int]) -> UTTTState:
    """The position after ``moves``, unchecked."""
    state = make_game("uttt").new_initial_state()
    for action in moves:
        state.apply_action(action)
    return state


MOVE = re.compile(r"[0-8] [0-8]")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=12) | st.sampled_from(
    ["-1 -1", "4 4", "3 3", "1", "2", "81", "0 0", "4 4", "8 8"]), max_size=30))  # fmt: skip
def test_any_lines_get_logs_moves_or_a_legal_think(lines: list[str]) -> None:
    brain = CodinGameBrain()
    for line in lines:
        for reply in answer(brain, brain.feed(line), first_legal):
            if not isinstance(reply, Log):
                assert isinstance(reply, str) and MOVE.fullmatch(reply), reply


def first_legal(think: Think) -> SearchResult:
    """A search's stand-in: the first legal move, after checking the request."""
    assert isinstance(think.state, UTTTState) and think.time_ms > 0
    legal = think.state.legal_actions()
    assert legal
    return SearchResult(legal[0], 0.0, "mcts", 1)

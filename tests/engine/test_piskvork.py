"""The Piskvork protocol state machine (engine/piskvork.py), fed lines as a manager sends them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import make_game
from engine.piskvork import OPENINGS, PiskvorkBrain, Think, TimeControl
from engine.result import SearchResult
from engine.think import answer


def started(size: int = 15) -> PiskvorkBrain:
    brain = PiskvorkBrain()
    assert brain.feed(f"START {size}") == ["OK"]
    return brain


def think(replies: list[object]) -> Think:
    assert len(replies) == 1 and isinstance(replies[0], Think), replies
    return replies[0]


def move(brain: PiskvorkBrain, action: int) -> str:
    lines = brain.played(SearchResult(action, 0.0, "alphabeta", 1))
    assert lines[0].startswith("MESSAGE ")
    return lines[-1]


def test_start_sizes_and_the_game_behind_them() -> None:
    brain = started(15)
    assert brain.game is not None and brain.game.name == "gomoku"
    brain = started(20)
    assert brain.game is not None and (brain.game.m, brain.game.n, brain.game.k) == (20, 20, 5)
    assert PiskvorkBrain().feed("RECTSTART 16,18") == ["OK"]
    for bad in ("START 7", "START 21", "START x", "START", "RECTSTART 15", "RECTSTART 15,30"):
        (reply,) = PiskvorkBrain().feed(bad)
        assert isinstance(reply, str) and reply.startswith("ERROR "), bad
    assert PiskvorkBrain().feed("START 7")[0] == (
        "ERROR unsupported size 7x7: this brain plays boards of 15 to 20 a side"
    )
    for command in ("BEGIN", "TURN 1,1", "BOARD", "RESTART", "TAKEBACK 1,1"):
        (reply,) = PiskvorkBrain().feed(command)
        assert isinstance(reply, str) and reply.startswith("ERROR") and "START" in reply


def test_begin_turn_and_coordinates_x_is_the_column() -> None:
    brain = started(20)
    request = think(brain.feed("BEGIN"))
    assert request.state.ply() == 0
    assert move(brain, 3 * 20 + 7) == "7,3"  # row 3, column 7
    request = think(brain.feed("turn 8,2\r\n"))  # case and line endings as managers send them
    assert request.state.history() == [3 * 20 + 7, 2 * 20 + 8]
    assert request.state.current_player() == 0  # the brain began: X
    assert move(brain, 0) == "0,0"
    for bad, reason in (("TURN 8,2", "occupied"), ("TURN 20,0", "off the"), ("TURN 1", "X,Y")):
        (reply,) = brain.feed(bad)
        assert isinstance(reply, str) and reply.startswith("ERROR") and reason in reply, reply
    assert think(brain.feed("TURN 5,5")).state.ply() == 4  # an error takes no stone


def test_board_rebuilds_who_moved_first() -> None:
    brain = started()
    replies = brain.feed("BOARD")
    assert replies == []
    for line in ("7,7,2", "7,8,1", "8,8,2"):
        assert brain.feed(line) == []
    request = think(brain.feed("DONE"))
    assert request.state.history() == [7 * 15 + 7, 8 * 15 + 7, 8 * 15 + 8]  # opponent first
    assert request.state.current_player() == 1
    move(brain, 0)
    for lines in (["1,1,1", "2,2,2"], []):  # as many stones each: the brain is X
        brain.feed("BOARD")
        for line in lines:
            brain.feed(line)
        assert think(brain.feed("DONE")).state.current_player() == 0
        move(brain, 224)


def block_error(brain: PiskvorkBrain, command: str, lines: list[str], reason: str) -> None:
    """``command``, then ``lines`` and DONE: one ERROR line holding ``reason``, at DONE (the
    lines after a wrong one are read and dropped, not taken for commands)."""
    brain.feed(command)
    replies: list[object] = []
    for line in [*lines, "DONE"]:
        replies = brain.feed(line)
        if replies:
            break
    (reply,) = replies
    assert isinstance(reply, str) and reply.startswith("ERROR") and reason in reply, reply


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        (["1,1,1", "2,2,1"], "cannot move with 2 own and 0 opponent"),
        (["1,1,2", "1,1,1"], "repeats the stone at 1,1"),
        (["1,1"], "X,Y,WHO"),
        (["1,1,4"], "WHO is 1, 2 or 3"),
        (["1,1,1"] * 226, "more stones than the board's 225 cells"),  # refused at the 226th
        (["0,0,2", "5,5,1", "1,0,2", "6,5,1", "2,0,2", "7,5,1", "3,0,2", "8,5,1", "4,0,2"],
         "five in a row"),
    ],
)  # fmt: skip
def test_board_errors(lines: list[str], reason: str) -> None:
    brain = started()
    block_error(brain, "BOARD", lines, reason)
    assert brain.board_lines is None  # out of BOARD mode: the next command is read as one


def test_a_wrong_line_in_a_block_is_one_error_at_done() -> None:
    """A walk's finding: the ERROR came at the wrong line, and the rest of the block was
    read as commands (UNKNOWN command '1,1,1', UNKNOWN command 'DONE'): the manager, out of
    step, took those for the answers to its next commands."""
    brain = started()
    replies = [brain.feed(line) for line in ("BOARD", "7,7", "", "1,1,1", "DONE")]
    assert replies[:4] == [[], [], [], []]
    (error,) = replies[4]
    assert error == "ERROR a BOARD line is X,Y,WHO, not '7,7'"
    think(brain.feed("BEGIN"))  # in step: the next command is read as one


def test_rules_freestyle_only() -> None:
    brain = started()
    assert brain.feed("INFO rule 0") == []
    assert brain.feed("INFO rule 2") == []  # continuous game: no change for a move
    for rule, name in ((1, "exactly five"), (4, "renju"), (8, "caro"), (5, "exactly five, renju")):
        (reply,) = brain.feed(f"INFO rule {rule}")
        assert reply == (
            f"ERROR unsupported rule {rule} ({name}): this brain plays freestyle "
            "(five or more in a row wins)"
        )
    (reply,) = brain.feed("BEGIN")
    assert isinstance(reply, str) and reply.startswith("ERROR unsupported rule 5")
    brain.feed("INFO rule 0")
    think(brain.feed("BEGIN"))


def test_freestyle_overline_wins() -> None:
    """Five or more: the m,n,k rules count k or more in a row (six here)."""
    state = make_game("gomoku").new_initial_state()
    for own, theirs in zip((0, 1, 2, 4, 5), (30, 31, 32, 33, 34), strict=True):
        state.apply_action(own)
        state.apply_action(theirs)
    state.apply_action(3)
    assert state.winner() == 0 and state.winning_line() == [0, 1, 2, 3, 4, 5]


def test_time_control() -> None:
    time = TimeControl()
    assert time.budget_ms() == 30_000 * 0.9 - 50  # the protocol's default turn
    time.timeout_turn = 1000
    assert time.budget_ms() == 850
    time.timeout_match, time.time_left = 100_000, 10_000  # 1/20 of what is left
    assert time.budget_ms() == 10_000 / 20 - 50
    time.time_left = 100
    assert time.budget_ms() == TimeControl.MIN_MS
    time.timeout_turn, time.time_left = 0, 40_000  # 0: as fast as possible, within the match
    assert time.budget_ms() == 40_000 / 20 - 50
    # later in the game, a bigger share of what is left: fewer moves to come
    assert time.budget_ms(stones=40) == 40_000 / 10 - 50
    assert time.budget_ms(stones=200) == 40_000 / TimeControl.MIN_MOVES_AHEAD - 50
    brain = started()
    for line in ("INFO timeout_turn 2000", "INFO timeout_match 60000", "INFO time_left 3000"):
        assert brain.feed(line) == []
    assert think(brain.feed("BEGIN")).time_ms == 3000 / 20 - 50
    brain.cancel()
    (reply,) = brain.feed("INFO time_left -5")
    assert reply == "ERROR INFO time_left takes a number >= 0, not '-5'"


def test_about_takeback_restart_end_unknown() -> None:
    brain = PiskvorkBrain(about='name="x"')
    assert brain.feed("ABOUT") == ['name="x"']
    assert brain.feed("START 15") == ["OK"]
    think(brain.feed("TURN 7,7"))
    move(brain, 7 * 15 + 8)
    stones = list(brain.stones)
    assert brain.feed("TAKEBACK 7,7") == ["ERROR TAKEBACK undoes the last stone, 8,7, not 7,7"]
    assert brain.feed("TAKEBACK 0,0") == ["ERROR TAKEBACK of an empty cell 0,0"]
    assert brain.stones == stones  # unchanged
    assert brain.feed("TAKEBACK 8,7") == ["OK"]
    assert brain.feed("TAKEBACK 8,7")[0] == "ERROR TAKEBACK of an empty cell 8,7"
    assert think(brain.feed("BOARD") + brain.feed("DONE")).state.ply() == 0
    brain.cancel()
    assert brain.feed("RESTART") == ["OK"] and brain.stones == []
    assert brain.feed("SWAP3BOARD") == ["UNKNOWN command 'SWAP3BOARD'"]
    assert brain.feed("INFO folder /tmp") == [] and brain.feed("INFO max_memory 83886080") == []
    assert brain.feed("") == []
    assert not brain.ended
    assert brain.feed("END") == [] and brain.ended


@pytest.mark.parametrize(
    "line", ["RESTART", "BEGIN", "TURN 7,7", "BOARD", "TAKEBACK 7,7", "PLAY 7,7", "SWAP2BOARD"]
)
def test_a_board_command_before_start_or_after_a_failed_one_is_an_error(line: str) -> None:
    command = line.split()[0]
    brain = PiskvorkBrain()
    assert brain.feed(line) == [f"ERROR {command} before START"]
    assert brain.feed("START 7")[0].startswith("ERROR unsupported size 7x7")
    assert brain.feed(line) == [f"ERROR {command} before START"]
    assert (brain.stones, brain.board_lines, brain.swap2_lines) == ([], None, None)
    assert brain.feed("START 15") == ["OK"]
    assert brain.feed(line) != [f"ERROR {command} before START"]


def test_play_is_the_managers_move_for_the_brain() -> None:
    """PLAY X,Y: the brain plays the manager's move and echoes it; a TURN then goes on."""
    brain = started()
    assert brain.feed("PLAY 7,7") == ["7,7"]
    assert brain.stones == [(7 * 15 + 7, 1)]
    assert think(brain.feed("TURN 8,8")).state.history() == [7 * 15 + 7, 8 * 15 + 8]
    brain.cancel()
    for line, reason in (("PLAY 7,7", "occupied"), ("PLAY 1", "X,Y"), ("PLAY 15,0", "off the")):
        (reply,) = brain.feed(line)
        assert isinstance(reply, str) and reply.startswith("ERROR") and reason in reply, line
    assert brain.feed("PLAY 0,0") == ["0,0"]
    (reply,) = brain.feed("PLAY 1,1")  # the opponent's turn now
    assert isinstance(reply, str) and reply.startswith("ERROR cannot move with 2 own")
    assert PiskvorkBrain().feed("PLAY 1,1") == ["ERROR PLAY before START"]


def swap2(brain: PiskvorkBrain, stones: list[str]) -> Think:
    assert brain.feed("SWAP2BOARD") == []
    for line in stones:
        assert brain.feed(line) == []
    return think(brain.feed("DONE"))


def test_swap2board_with_no_stones_opens_with_the_most_even_opening() -> None:
    brain = started(20)
    request = swap2(brain, [])
    centre = 10 * 20 + 10
    values = [0.6, -0.5, 0.08, -0.3, 0.9, 0.4]  # what each opening's search finds for white
    seen = []
    for index, value in enumerate(values):
        assert request.state.ply() == 3 and request.state.current_player() == 1  # white to move
        seen.append(tuple(request.state.history()))
        assert request.state.history()[0] == centre
        assert request.time_ms == TimeControl().budget_ms(0) / len(OPENINGS)
        replies = brain.played(SearchResult(0, value, "alphabeta", 1))
        if index < len(values) - 1:
            request = think(replies)
    assert len(set(seen)) == len(OPENINGS)
    message, answer = replies
    assert isinstance(message, str) and message.startswith("MESSAGE swap2 opening 3 of 6")
    black, white, black2 = seen[2]  # the one nearest to even: +0.08
    coordinates = [f"{cell % 20},{cell // 20}" for cell in (black, white, black2)]
    assert answer == " ".join(coordinates)
    # The opponent stays white and plays on: the black stones are the brain's.
    request = think(brain.feed("TURN 0,0"))
    assert request.state.history() == [black, white, black2, 0]
    assert request.state.current_player() == 0


@pytest.mark.parametrize("stones", [3, 5])
@pytest.mark.parametrize("value", [0.25, -0.25])
def test_swap2board_plays_the_colour_its_search_prefers(stones: int, value: float) -> None:
    """After 3 or 5 stones white moves: the brain plays white's move if its search's value for
    white is >= 0, else answers SWAP and takes black; either way the stones are its own or
    the opponent's as swap2 made them, so the game goes on with TURN."""
    brain = started()
    given = ["7,7", "8,8", "7,9", "8,7", "6,8"][:stones]
    cells = [y * 15 + x for x, y in (map(int, line.split(",")) for line in given)]
    request = swap2(brain, given)
    assert request.state.history() == cells and request.state.current_player() == 1
    assert request.time_ms == TimeControl().budget_ms(stones)
    lines = brain.played(SearchResult(0, value, "alphabeta", 1))
    assert isinstance(lines[0], str) and lines[0].startswith("MESSAGE ")
    if value >= 0:
        assert lines[-1] == "0,0"  # white's move
        request = think(brain.feed("TURN 14,14"))  # black plays on
        assert request.state.history() == [*cells, 0, 14 * 15 + 14]
    else:
        assert lines[-1] == "SWAP"
        request = think(brain.feed("TURN 14,14"))  # the opponent plays white's move
        assert request.state.history() == [*cells, 14 * 15 + 14]
    assert request.state.current_player() == (0 if value < 0 else 1)


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        (["1,1"], "takes 0, 3 or 5 stones (swap2), not 1"),
        (["1,1", "2,2", "3,3", "4,4"], "not 4"),
        ([f"{i},0" for i in range(7)], "not 6"),  # refused at the sixth, not at DONE
        (["1,1", "2,2", "1,1"], "repeats the stone at 1,1"),
        (["1,1,1"], "X,Y"),
        (["15,1"], "off the 15x15 board"),
    ],
)
def test_swap2board_errors(lines: list[str], reason: str) -> None:
    brain = started()
    block_error(brain, "SWAP2BOARD", lines, reason)
    assert brain.swap2_lines is None and brain.swap2 is None  # the next line is a command
    assert brain.feed("INFO rule 4")[0].startswith("ERROR unsupported rule 4")
    assert swap2_reply(brain) == "ERROR unsupported rule 4: this brain plays freestyle"
    assert PiskvorkBrain().feed("SWAP2BOARD") == ["ERROR SWAP2BOARD before START"]


def swap2_reply(brain: PiskvorkBrain) -> object:
    brain.feed("SWAP2BOARD")
    (reply,) = brain.feed("DONE")
    return reply


COORDINATES = re.compile(r"\d+,\d+( \d+,\d+){0,2}")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=30) | st.sampled_from(
    ["START 15", "START 20", "BEGIN", "BOARD", "DONE", "TURN 3,4", "1,1,1", "INFO rule 4",
     "TAKEBACK 3,4", "RESTART", "INFO time_left 5", "RECTSTART 17,15", "SWAP2BOARD", "7,7",
     "8,8", "PLAY 3,4", "PLAY 5,5"]), max_size=25))  # fmt: skip
def test_any_lines_get_lines_or_a_legal_think(lines: list[str]) -> None:
    """Whatever the manager sends: reply lines, or a Think on a position with a legal move."""
    brain = PiskvorkBrain()
    for line in lines:
        for reply in answer(brain, brain.feed(line), first_legal):
            assert isinstance(reply, str) and "\n" not in reply
            assert (
                reply.split(" ")[0] in ("OK", "ERROR", "UNKNOWN", "MESSAGE", "SWAP")
                or "name=" in reply
                or COORDINATES.fullmatch(reply)
            ), reply


def first_legal(think: Think) -> SearchResult:
    """A search's stand-in: the first legal move, after checking the request."""
    legal = think.state.legal_actions()
    assert legal and think.time_ms >= TimeControl.MIN_MS
    return SearchResult(legal[0], 0.0, "alphabeta", 1)

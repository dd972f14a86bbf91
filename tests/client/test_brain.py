"""`noughts brain` driven as a Gomocup manager drives it: a real process, pipes, the protocol."""

from __future__ import annotations

import io
import os
import queue
import re
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from client.commands.brain import Arrivals, serve
from engine import make_game
from engine.codingame import CodinGameBrain, TurnTime
from engine.piskvork import PiskvorkBrain

MOVE = re.compile(r"[0-8] [0-8]")

TIMEOUT_S = 120  # a line must come within this (the first one waits for the kernels' warm-up)


class Brain:
    """A brain process and the manager's side of its pipes."""

    def __init__(self, *options: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "client", "brain", *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def answer(self) -> str:
        """The next line that is not a MESSAGE or DEBUG (those are shown, not answers)."""
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            assert line, f"the brain exited: {self.process.stderr.read()}"  # type: ignore[union-attr]
            line = line.rstrip("\n")
            if not line.startswith(("MESSAGE ", "DEBUG ")):
                return line

    def send_bytes(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.buffer.write(data)
        self.process.stdin.flush()

    def move(self, command: str) -> tuple[int, int]:
        self.send(command)
        x, y = self.answer().split(",")
        return int(x), int(y)

    def referee_turn(self, state: Any, opponent: str) -> str:
        """CodinGame's referee, one turn of ultimate tic-tac-toe: the opponent's last move
        (``-1 -1`` to begin), the valid actions of ``state``, and the bot's move back, which
        must be one of them (applied to ``state``, checked); returns its line."""
        grid = state.game.grid
        self.send(opponent)
        legal = state.legal_actions()
        self.send(str(len(legal)))
        for action in legal:
            self.send("{} {}".format(*grid.cell(action)))
        line = self.answer()
        row, col = map(int, line.split(" "))
        state.apply_checked(grid.action(row, col))  # legal: free, on the board it was sent to
        return line

    def end(self) -> int:
        self.send("END")
        return self.process.wait(timeout=TIMEOUT_S)


@pytest.fixture
def brains() -> list[Brain]:
    started: list[Brain] = []
    yield started  # type: ignore[misc]
    for brain in started:
        if brain.process.poll() is None:
            brain.process.kill()
        brain.process.communicate()  # waits, and closes the pipes


@pytest.mark.timeout(600)
@pytest.mark.parametrize("size", [15, 20])
def test_two_brains_play_a_game_through_a_manager(brains: list[Brain], size: int) -> None:
    """The manager's loop: START, INFO, BEGIN to the first, each move sent to the other as TURN,
    until five in a row (checked by the engine's rules) or a move cap."""
    players = [Brain(), Brain()]
    brains.extend(players)
    for brain in players:
        brain.send(f"START {size}")
        assert brain.answer() == "OK"
        brain.send("INFO timeout_turn 150")
        brain.send("INFO timeout_match 100000")
        brain.send("INFO rule 0")
    state = make_game("gomoku" if size == 15 else "mnk", **({} if size == 15 else
                      {"m": size, "n": size, "k": 5})).new_initial_state()  # fmt: skip
    time_left = [100_000, 100_000]
    x, y = players[0].move("BEGIN")
    moves = 0
    while True:
        assert 0 <= x < size and 0 <= y < size
        state.apply_checked(y * size + x)  # a legal move: free and on the board
        moves += 1
        if state.is_terminal() or moves >= 40:
            break
        mover = moves % 2
        players[mover].send(f"INFO time_left {time_left[mover]}")
        x, y = players[mover].move(f"TURN {x},{y}")
    for brain in players:
        assert brain.end() == 0


def test_end_stops_a_search_under_way(brains: list[Brain]) -> None:
    """A walk's finding: with no INFO, a turn searches 30 s (Piskvork's default
    timeout_turn), and END sent meanwhile took effect only when the search ended (26.9 s):
    the protocol asks a brain to end as soon as possible. The search now stops at END."""
    brain = Brain()
    brains.append(brain)
    brain.send("START 15")
    assert brain.answer() == "OK"
    assert brain.move("BEGIN") == (7, 7)  # the opening (once the search is warm)
    brain.send("TURN 8,8")  # a search of 27 s (90% of 30 s, less 50 ms)
    time.sleep(0.5)
    brain.send("END")
    assert brain.process.wait(timeout=15) == 0  # before: about 27 s


@pytest.mark.parametrize("info", [[], ["INFO timeout_turn 1000"]], ids=["default", "info"])
def test_a_search_stopped_by_end_says_the_time_it_took(info: list[str]) -> None:
    """BEGIN and END in one write, as a manager ending a match at once: END stops the
    search BEGIN asked for, and its MESSAGE said "16 nodes in 6000000000000 ms", the stopped
    search's clock (it jumps past every deadline) read as its time. No more than the run's."""
    brain = Brain()
    assert brain.process.stderr is not None
    try:
        brain.send("START 15")
        assert brain.answer() == "OK"
        # Ready (START's OK comes before the warm-up ends): BEGIN's search starts at once.
        assert brain.process.stderr.readline().startswith("ready ")
        started = time.monotonic()
        out, err = brain.process.communicate(
            "".join(f"{line}\n" for line in [*info, "BEGIN", "END"]), timeout=TIMEOUT_S
        )
        ran_ms = (time.monotonic() - started) * 1000.0
        assert brain.process.returncode == 0, err
        (said,) = re.findall(r"nodes in (\d+) ms", out)
        assert int(said) <= ran_ms, out
    finally:
        if brain.process.poll() is None:
            brain.process.kill()
            brain.process.communicate()


def test_errors_then_a_game_in_one_process(brains: list[Brain]) -> None:
    brain = Brain()
    brains.append(brain)
    brain.send("ABOUT")
    assert brain.answer().startswith('name="noughts", version=')
    for command, expected in (
        ("START 7", "ERROR unsupported size 7x7"),
        ("BEGIN", "ERROR BEGIN before START"),
        ("HELLO", "UNKNOWN command 'HELLO'"),
        ("START 20", "OK"),
        ("INFO rule 4", "ERROR unsupported rule 4 (renju)"),
        ("TURN 3,3", "ERROR unsupported rule 4"),
        ("INFO rule 0", None),
        ("INFO timeout_turn 100", None),
        ("TURN 30,3", "ERROR 30,3 is off the 20x20 board"),
    ):
        brain.send(command)
        if expected is not None:
            assert brain.answer().startswith(expected), command
    brain.send_bytes(b"\xff\x00garbage\n")  # not UTF-8: read with replacement characters
    assert brain.answer().startswith("UNKNOWN command")
    # A position with an open four for the opponent (brain is O): it must block at once.
    brain.send("BOARD")
    for line in ("5,5,2", "0,0,1", "6,5,2", "0,2,1", "7,5,2", "0,4,1", "8,5,2", "DONE"):
        brain.send(line)
    assert brain.answer() in ("4,5", "9,5")
    assert brain.end() == 0


def test_takeback_undoes_the_last_stone_only(brains: list[Brain]) -> None:
    """Piskvork's TAKEBACK undoes the last move (a manager sends its stone): a TAKEBACK of
    another stone, or of an empty cell, is an ERROR and the board stays as it was (before,
    any stone was taken off, and the brain went on from a position nobody played)."""
    brain = Brain()
    brains.append(brain)
    brain.send("START 15")
    assert brain.answer() == "OK"
    brain.send("INFO timeout_turn 200")
    assert brain.move("BEGIN") == (7, 7)  # the opening: no search
    x, y = brain.move("TURN 8,8")  # the brain's reply: the last stone
    for wrong in ("TAKEBACK 8,8", "TAKEBACK 7,7", "TAKEBACK 0,0"):
        brain.send(wrong)
        answer = brain.answer()
        assert answer.startswith("ERROR ") and "\n" not in answer, (wrong, answer)
    brain.send("TURN 8,8")  # still on the board: refused
    assert brain.answer() == "ERROR 8,8 is occupied"
    brain.send(f"TAKEBACK {x},{y}")
    assert brain.answer() == "OK"
    brain.send("TAKEBACK 8,8")  # the last stone now
    assert brain.answer() == "OK"
    x, y = brain.move("TURN 8,8")  # black's stone at 7,7 only: the game goes on from there
    assert (x, y) not in ((7, 7), (8, 8))
    assert brain.end() == 0


def test_swap2_opening_and_choice_through_the_pipes(brains: list[Brain]) -> None:
    """SWAP2BOARD as a Gomocup manager runs swap2: the brain opens with three stones, then
    chooses a colour after three; the game goes on with TURN from the colour it chose."""
    brain = Brain()
    brains.append(brain)
    brain.send("START 15")
    assert brain.answer() == "OK"
    brain.send("INFO timeout_turn 300")
    for line in ("SWAP2BOARD", "DONE"):
        brain.send(line)
    opening = [tuple(map(int, stone.split(","))) for stone in brain.answer().split(" ")]
    assert len(opening) == 3 and len(set(opening)) == 3
    assert all(0 <= x < 15 and 0 <= y < 15 for x, y in opening)
    given = [(7, 7), (8, 8), (7, 9)]
    for line in ("SWAP2BOARD", *(f"{x},{y}" for x, y in given), "DONE"):
        brain.send(line)
    state = make_game("gomoku").new_initial_state()
    for x, y in given:
        state.apply_checked(y * 15 + x)
    choice = brain.answer()
    if choice != "SWAP":  # white's move: the brain stays white
        x, y = map(int, choice.split(","))
        state.apply_checked(y * 15 + x)
    state.apply_checked(10 * 15 + 10)  # the opponent's move, either colour
    x, y = brain.move("TURN 10,10")
    state.apply_checked(y * 15 + x)  # a move (stones of a wrong colour: an ERROR), and legal
    assert brain.end() == 0


@pytest.mark.timeout(600)
def test_two_codingame_bots_play_ultimate_through_a_referee(brains: list[Brain]) -> None:
    """CodinGame's referee loop for ultimate tic-tac-toe: to the bot to move, the opponent's
    last move (-1 -1 to begin), the valid actions, and one move back, legal, until the game
    ends; diagnostics go to stderr, stdout holds moves only."""
    players = [Brain("--game", "uttt", "--first-ms", "300", "--turn-ms", "60") for _ in range(2)]
    brains.extend(players)
    for player in players:  # warm (a turn that comes sooner is a quick move, not a search)
        assert player.process.stderr is not None
        line = ""
        while not line.startswith("ready "):
            line = player.process.stderr.readline()
            assert line, "the bot exited before it was ready"
    state = make_game("uttt").new_initial_state()
    last = "-1 -1"
    while not state.is_terminal():
        last = players[state.current_player()].referee_turn(state, last)
    assert state.ply() >= 17  # five small boards won at the least
    for bot in players:
        out, err = bot.process.communicate(timeout=TIMEOUT_S)  # the input ends: the game too
        assert bot.process.returncode == 0 and out == ""
        assert "mcts value" in err  # each search's summary, on stderr


def test_a_search_that_cannot_play_the_game_is_refused_at_start() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "client", "brain", "--game", "uttt", "--algorithm", "perfect"],
        input="-1 -1\n", capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("noughts brain: error: perfect cannot play uttt: ")


FIRST_TURN = ["-1 -1", "81", *(f"{row} {col}" for row in range(9) for col in range(9))]


@pytest.mark.parametrize(
    ("lines", "moves", "reason"),
    [
        (["hello"], "", "expected 'opponentRow opponentCol', not 'hello'"),
        (["-1 -1", "82"], "", "expected the valid action count (1..81), not '82'"),
        (["-1 -1", "2", "0 0", "0 x"], "", "expected a valid action 'row col' (0..8), not '0 x'"),
        (["4 9"], "", "opponent move 4 9 is off the board"),
        ([*FIRST_TURN, "3 3", "1 2 3"], "4 4\n", "expected the valid action count"),
    ],
)
def test_a_codingame_bot_fails_on_input_it_cannot_read(
    lines: list[str], moves: str, reason: str
) -> None:
    """CodinGame's protocol has no error reply: a line that is not the referee's (garbage, a
    malformed turn) ends the bot with status 1 and the reason on stderr, after the moves it
    had answered (before, it said why on stderr and exited 0, as for a game played out)."""
    done = subprocess.run(
        [sys.executable, "-m", "client", "brain", "--game", "uttt"],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stdout == moves
    assert any(reason in line for line in done.stderr.splitlines()), done.stderr


def test_lines_are_dated_when_they_arrive_not_when_they_are_read() -> None:
    """The harness's clock runs from when it writes: a line is dated by the reading thread as
    it arrives, while the brain is busy (warming up); one already waiting when the reading
    starts is dated to the origin given (the process's start)."""
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "r") as stream:
        writer = os.fdopen(write_end, "w")
        writer.write("START 15\n")
        writer.flush()
        origin = time.monotonic() - 5.0
        lines = Arrivals(stream, origin)
        assert lines.take() == (origin, "START 15\n")
        with pytest.raises(queue.Empty):  # nothing more written: nothing on its way
            lines.take(timeout=0.05)
        written = time.monotonic()
        writer.write("BEGIN\n")
        writer.flush()
        time.sleep(1.0)  # busy elsewhere: the line waits a second before it is taken
        arrived, line = lines.take()  # type: ignore[misc]
        assert line == "BEGIN\n" and written <= arrived < written + 0.9
        writer.close()
        assert lines.take() is None  # the input ended


def test_a_codingame_bot_that_starts_plays_its_opening_within_its_first_turn() -> None:
    """X's first turn is sent as the bot starts, and the referee's clock runs: the opening
    needs no search, and is answered once the search is warm or after 60% of the first turn
    (1,000 ms). A quick opponent's reply that still comes before the warm-up is done is a
    quick move in its time (a walk's finding: it waited for the warm-up, 404-450 ms of a
    100 ms turn, which CodinGame forfeits); once ready, the turns are searched."""
    bot = Brain("--game", "uttt")
    assert bot.process.stderr is not None
    try:
        state = make_game("uttt").new_initial_state()
        grid = state.game.grid  # type: ignore[attr-defined]
        bot.referee_turn(state, "-1 -1")
        assert state.history() == [40]
        state.apply_action(grid.action(3, 3))
        bot.referee_turn(state, "3 3")  # at once
        logs: list[str] = []  # the opening's line, the second turn's, and "ready" somewhere
        while len(logs) < 3:
            logs.append(bot.process.stderr.readline().strip())
            assert logs[-1], logs
        ready = next(i for i, line in enumerate(logs) if line.startswith("ready "))
        turns = [line for line in logs if not line.startswith("ready ")]
        assert turns[0] == "the opening move, 4 4", logs
        if ready == 0:  # warm before the opening: the second turn searched
            assert "mcts value" in turns[1], logs
        else:  # warm after the second turn began: searched if in its time, else a quick move
            quick = "no search (the search is not ready yet): a quick move"
            assert turns[1] == quick or "mcts value" in turns[1], logs
        reply = state.legal_actions()[0]
        state.apply_action(reply)
        bot.referee_turn(state, "{} {}".format(*grid.cell(reply)))
        assert "mcts value" in bot.process.stderr.readline()  # searched, now it is ready
    finally:
        if bot.process.poll() is None:
            bot.process.kill()
        bot.process.communicate()


def test_the_opening_waits_for_the_warm_up_within_its_first_turn() -> None:
    """With a first turn long enough for the warm-up, the opening is answered once the
    search is ready, and the reply that comes at once is searched, not a quick move."""
    subprocess.run(  # numba's cache filled first (`noughts brain </dev/null`, README)
        [sys.executable, "-m", "client", "brain", "--game", "uttt"],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT_S, check=True,
    )  # fmt: skip
    bot = Brain("--game", "uttt", "--first-ms", "20000")
    assert bot.process.stderr is not None
    try:
        state = make_game("uttt").new_initial_state()
        grid = state.game.grid  # type: ignore[attr-defined]
        bot.referee_turn(state, "-1 -1")
        state.apply_action(grid.action(3, 3))
        bot.referee_turn(state, "3 3")  # at once
        logs = [bot.process.stderr.readline().strip() for _ in range(3)]
        assert logs[0].startswith("ready ") and logs[1] == "the opening move, 4 4", logs
        assert "mcts value" in logs[2], logs
    finally:
        if bot.process.poll() is None:
            bot.process.kill()
        bot.process.communicate()


def run_serve(turn: list[str], *, delay_s: float | None) -> int | None:
    """``serve`` a CodinGame bot moving second (first turn 3,000 ms: 2,100 ms of search) on a
    pipe holding ``turn``, written before it starts (None) or ``delay_s`` after; the ms its
    search took, as it logged them (None: it played the quick move, not ready to search)."""
    read_end, write_end = os.pipe()
    writer = os.fdopen(write_end, "w")

    def send() -> None:
        if delay_s is not None:
            time.sleep(delay_s)
        writer.write("".join(line + "\n" for line in turn))
        writer.close()

    out, err = io.StringIO(), io.StringIO()
    sender = threading.Thread(target=send)
    if delay_s is None:
        send()
    else:
        sender.start()
    with os.fdopen(read_end, "r") as stream:
        brain = CodinGameBrain(TurnTime(first_ms=3000.0, turn_ms=100.0))
        assert serve(stream, out, brain, "uttt", "mcts", seed=1, stderr=err) == 0
    if delay_s is not None:
        sender.join()
    assert MOVE.fullmatch(out.getvalue().strip()), out.getvalue()
    searched = re.findall(r"iterations in (\d+) ms", err.getvalue())
    if not searched:
        assert "no search (the search is not ready yet): a quick move" in err.getvalue()
        return None
    return int(searched[0])


def test_a_turn_is_timed_from_when_it_arrived() -> None:
    """The referee's clock runs from its write: input that waited (here since this process
    started, seconds ago) has no time left and is answered at once; input that comes to a
    ready bot gets the whole 70% of the turn."""
    import engine

    engine.warm_up([("uttt", "mcts")])  # this process's kernels: the bot is ready at once
    state = make_game("uttt").new_initial_state()
    grid = state.game.grid  # type: ignore[attr-defined]
    state.apply_action(grid.action(4, 4))
    turn = ["4 4", str(len(state.legal_actions()))]
    turn += ["{} {}".format(*grid.cell(action)) for action in state.legal_actions()]
    # At once: the quick move if the warm-up is not done, else the floor's 5 ms search (a
    # loaded machine overruns it).
    waited = run_serve(turn, delay_s=None)
    assert waited is None or waited < 1000
    searched = run_serve(turn, delay_s=2.0)
    assert searched is not None and searched >= 1500  # 2,100 ms asked


def test_a_gomocup_turn_long_after_the_info_lines_gets_its_whole_time() -> None:
    """The second player's first TURN comes long after START's INFO lines: its clock runs
    from the TURN (a new burst of lines), not from the INFO lines before it. (The input ends
    after the TURN, no END: END stops the search, whose time was said as 10^9 s, at least
    1,000 ms, until that was fixed.)"""
    read_end, write_end = os.pipe()
    writer = os.fdopen(write_end, "w")

    def send() -> None:
        writer.write("START 15\nINFO timeout_match 1000000\nINFO timeout_turn 2000\n")
        writer.flush()
        time.sleep(1.5)  # the first player thinks
        writer.write("TURN 7,7\n")
        writer.close()

    out, err = io.StringIO(), io.StringIO()
    sender = threading.Thread(target=send)
    sender.start()
    with os.fdopen(read_end, "r") as stream:
        assert serve(stream, out, PiskvorkBrain(), "gomoku", "alphabeta", stderr=err) == 0
    sender.join()
    lines = out.getvalue().splitlines()
    assert lines[0] == "OK" and re.fullmatch(r"\d+,\d+", lines[-1]), lines
    (searched,) = re.findall(r"nodes in (\d+) ms", out.getvalue())
    assert int(searched) >= 1000  # 2,000 ms less the margins; 1,500 ms less had it counted


def test_an_endless_line_is_cut_and_the_next_one_read() -> None:
    """A runaway or hostile harness's line of a megabyte: its first 4,096 characters are
    kept (the protocols refuse them), the rest dropped, and the next line comes as it was."""
    read_end, write_end = os.pipe()
    writer = os.fdopen(write_end, "w")

    def send() -> None:  # more than a pipe holds: written while the brain reads
        writer.write("X" * 1_000_000 + "\nBEGIN\n")
        writer.close()

    sender = threading.Thread(target=send)
    sender.start()
    with os.fdopen(read_end, "r") as stream:
        lines = Arrivals(stream, time.monotonic())
        cut, begin, end = lines.take(), lines.take(), lines.take()
    sender.join()
    assert cut is not None and cut[1] == "X" * 4096
    assert begin is not None and begin[1] == "BEGIN\n" and end is None


def test_start_is_answered_at_once_while_the_search_compiles(tmp_path: Any) -> None:
    """Managers time START's OK too (a few seconds), and the first start with numba's cache
    empty compiled for 34-60 s before it: the brain warmed up before it read START. Now OK
    comes at once, the warm-up runs meanwhile (its "ready" line on stderr comes later), and
    END ends the brain without waiting for it, a move asked for still waiting."""
    import select

    environment = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}
    process = subprocess.Popen(
        [sys.executable, "-m", "client", "brain"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, bufsize=1, env=environment,
    )  # fmt: skip
    assert process.stdin and process.stdout and process.stderr
    try:
        process.stdin.write("START 15\n")
        process.stdin.flush()
        assert process.stdout.readline() == "OK\n"
        ready, _, _ = select.select([process.stderr], [], [], 0.0)
        assert not ready, "the brain said it was ready before its OK"  # (compiled first)
        # A move asked for waits for the warm-up; END meanwhile ends the wait, and the brain.
        process.stdin.write("BEGIN\nEND\n")
        process.stdin.flush()
        assert process.stdout.readline() == "ERROR END came while the search warmed up\n"
        assert process.wait(timeout=TIMEOUT_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_a_move_asked_for_while_the_search_warms_up_waits_for_it(brains: list[Brain]) -> None:
    """BEGIN right after START, with a turn shorter than loading the search (0.4-0.7 s from
    numba's cache): the move waits for the warm-up and is played, not an ERROR line (the
    Piskvork protocol has no quick move)."""
    brain = Brain()
    brains.append(brain)
    brain.send("START 15")
    brain.send("INFO timeout_turn 50")
    brain.send("BEGIN")
    assert brain.answer() == "OK"
    assert re.fullmatch(r"\d+,\d+", brain.answer())
    assert brain.end() == 0

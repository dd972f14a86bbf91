"""The game core (server/session.py, GameSession) by transcripts: requests in, events out.

GameSession holds a live game's rules, seats, clocks, offers and its event log with
sequence numbers, and does no I/O: each request is a method call that returns the events
(each with the one row to store for it) or raises the error the client would get. A
transcript is read line by line, as websockets' sans-I/O tests read theirs:

    at T            the time is now T seconds (monotonic; wall clock = EPOCH + T)
    REQUEST ARGS    call the core; then one of
      -> EVENTS     the events it returns: `type field=value ...`, separated by `;`
                    (the fields named must match; others are not checked)
      -> nothing    it returns no event
      !  CODE       it is refused with this error code, and the game is unchanged

Requests: `new GAME [param=value...] [clock=MS[+INC]|move=MS]`, `seat SEAT NAME`,
`start`, `play SEAT ACTION [ply=N]`, `resign SEAT`, `abort SEAT`, `draw SEAT ANSWER`,
`rematch SEAT ANSWER`, `leave SEAT`, `back SEAT`, `claim SEAT OUTCOME`, `timeouts`.
Actions are the wire's integers. A request written with no arrow sets up (a seat) and
must return no event and not be refused.

Every transcript also checks the core's invariants after each request: each event has the
next seq and exactly one thing to store; its frame is the message encoded; a refusal changes
nothing.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from protocol import Moved, decode_server, encode
from server.clock import Now, TimeControl
from server.errors import GameError
from server.rows import MoveRow
from server.session import Emitted, EventLimits, GameSession, Player

EPOCH = 1_800_000_000.0
GRACE_S = 60.0


class Transcript:
    """One game driven by a transcript's lines."""

    def __init__(self) -> None:
        self.t = 0.0
        self.game: GameSession | None = None

    @property
    def now(self) -> Now:
        return Now(self.t, EPOCH + self.t)

    @property
    def session(self) -> GameSession:
        assert self.game is not None, "the transcript must start with `new`"
        return self.game

    def run(self, text: str) -> None:
        for number, raw in enumerate(text.strip().splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            try:
                self.step(line)
            except AssertionError as exc:
                raise AssertionError(f"line {number}: {line}\n{exc}") from None

    def step(self, line: str) -> None:
        if line.startswith("at "):
            self.t = float(line.split()[1])
            return
        request, arrow, expected = _split(line)
        words = shlex.split(request)
        if words[0] == "new":
            self.game = _new(words[1:], self.now)
            assert arrow == "", "`new` expects nothing"
            return
        before = self._state() if self.game is not None else None
        seq = self.session.seq
        try:
            emitted = self.call(words)
        except GameError as exc:
            assert arrow == "!", f"refused with {exc.code.value}: {exc}"
            assert exc.code.value == expected, f"refused with {exc.code.value}, not {expected}"
            assert self._state() == before, "a refused request changed the game"
            return
        if arrow == "":  # a request that sets up: no event, no refusal
            assert emitted == [], f"expected no event, got {_show(emitted)}"
            return
        assert arrow == "->", f"expected a refusal ({expected}), got {_show(emitted)}"
        self._check(emitted, seq)
        if expected == "nothing":
            assert emitted == [], f"expected no event, got {_show(emitted)}"
            return
        wanted = [part.split() for part in expected.split(";")]
        assert len(emitted) == len(wanted), f"got {_show(emitted)}"
        for event, (kind, *fields) in zip(emitted, wanted, strict=True):
            message = event.message
            assert message.TYPE == kind, f"got {_show(emitted)}"
            for field in fields:
                name, value = field.split("=", 1)
                got = getattr(message, name)
                assert got == _value(value, got), f"{kind}.{name} is {got!r}, not {value}"

    def call(self, words: list[str]) -> list[Emitted]:
        game, now = self.session, self.now
        verb, args = words[0], words[1:]
        if verb == "seat":
            game.take_seat(int(args[0]), Player(args[1], "human", player_id=f"p-{args[1]}"))
            return []
        if verb == "start":
            return [game.start(now)]
        if verb == "play":
            ply = next((int(a[4:]) for a in args[2:] if a.startswith("ply=")), None)
            return game.play(int(args[0]), int(args[1]), now, ply=ply)
        if verb == "resign":
            return game.resign(int(args[0]), now)
        if verb == "abort":
            return game.abort(int(args[0]), now)
        if verb == "draw":
            return game.draw(int(args[0]), args[1], now)
        if verb == "rematch":
            emitted, agreed = game.rematch(int(args[0]), args[1], now)
            if agreed:  # the owner creates the new game and announces it
                emitted.append(game.rematch_started(int(args[0]), "next-game", now))
            return emitted
        if verb in ("leave", "back"):
            return game.set_online(int(args[0]), verb == "back", now, GRACE_S)
        if verb == "claim":
            return game.claim(int(args[0]), args[1], now)
        if verb == "timeouts":
            return game.timeouts(now)
        raise AssertionError(f"unknown request {verb!r}")

    def _check(self, emitted: list[Emitted], seq: int) -> None:
        """Each event has the next seq, one thing to store, and its frame is its message."""
        for event in emitted:
            seq += 1
            message = event.message
            assert getattr(message, "seq", None) == seq, f"{message.TYPE} seq != {seq}"
            stored = [x for x in (event.move, event.end, event.event) if x is not None]
            if message.TYPE == "ended" and event.end is None:
                # The end of a game won by a move is stored with that move's row.
                assert emitted[0].move is not None and emitted[0].end is not None
            else:
                assert len(stored) >= 1, f"{message.TYPE} has nothing to store"
            assert event.frame == encode(message), "the frame is not the message encoded"
        assert self.session.seq == seq, "the game's seq is not its last event's"

    def _state(self) -> Any:
        game = self.session
        return (
            game.seq,
            game.status,
            game.state.ply(),
            str(game.state),
            dict(game.offers),
            game.result,
            list(game.players),
        )


def _split(line: str) -> tuple[str, str, str]:
    for arrow in ("->", "!"):
        if f" {arrow} " in f"{line} ":
            request, expected = line.split(f" {arrow}", 1)
            return request.strip(), arrow, expected.strip()
    return line, "", ""


def _new(words: list[str], now: Now) -> GameSession:
    params: dict[str, int] = {}
    control = None
    for word in words[1:]:
        name, value = word.split("=", 1)
        if name == "clock":
            base, _, inc = value.partition("+")
            control = TimeControl.parse({"initial_ms": int(base), "increment_ms": int(inc or 0)})
        elif name == "move":
            control = TimeControl.parse({"move_ms": int(value)})
        else:
            params[name] = int(value)
    game = GameSession.new(words[0], params, now, control=control)
    game.limits = EventLimits(presence_burst=4, presence_refill_s=10.0, draw_offer_plies=1)
    return game


def _value(text: str, like: Any) -> Any:
    if isinstance(like, str) or like is None and not text.lstrip("-").isdigit():
        return None if text == "none" else text
    return json.loads(text)


def _show(emitted: list[Emitted]) -> str:
    return "; ".join(repr(e.message) for e in emitted) or "nothing"


def run(text: str) -> Transcript:
    transcript = Transcript()
    transcript.run(text)
    return transcript


HUMANS = """
new {game}
seat 0 ada
seat 1 bo
start -> snapshot seq=1 status=live to_move=0
"""


def test_a_line_wins_and_then_nothing_moves() -> None:
    run(
        HUMANS.format(game="tictactoe")
        + """
        play 0 4 -> moved seq=2 ply=0 seat=0 action=4 to_move=1
        play 0 0 ! not_your_turn
        play 1 4 ! illegal_move            # occupied
        play 1 9 ! illegal_move            # off the board
        play 1 0 ply=0 ! stale_move        # meant for the position before X's move
        play 0 3 ply=0 ! stale_move        # X's move sent again with another action
        play 0 3 ply=1 ! not_your_turn
        play 1 0 ply=1 -> moved seq=3 ply=1
        play 0 1 -> moved seq=4
        play 1 2 -> moved seq=5
        play 0 7 -> moved seq=6 to_move=-1; ended seq=7 result=1-0 reason=line winner=0
        play 1 8 ! game_over
        resign 1 ! game_over
        draw 1 offer ! game_over
        """
    )


def test_a_move_sent_again_is_found_with_its_event_in_the_log_or_the_store() -> None:
    """``sent_again``: the seat's own move at that ply, the same action (a reply lost);
    ``moved_event`` gives its event, from the log or, for a restored game, its stored row."""
    transcript = run(
        HUMANS.format(game="tictactoe")
        + """
        play 0 4 -> moved seq=2 ply=0
        play 1 0 -> moved seq=3 ply=1
        play 0 8 -> moved seq=4 ply=2
        """
    )
    game = transcript.session
    assert game.sent_again(0, 4, 0) and game.sent_again(1, 0, 1) and game.sent_again(0, 8, 2)
    assert not game.sent_again(1, 4, 0)  # not this seat's move
    assert not game.sent_again(0, 2, 0)  # another action at that ply
    assert not game.sent_again(1, 2, 3)  # not played yet
    logged = game.moved_event(1)
    assert logged is not None and decode_server(logged) == Moved(
        game_id=game.id, seq=3, ply=1, seat=1, action=0, to_move=0, at=EPOCH
    )
    rows = [
        MoveRow(game.id, ply, 2 + ply, ply % 2, action, EPOCH)
        for ply, action in enumerate([4, 0, 8])
    ]
    game.log = []  # as restored
    assert game.moved_event(1) is None
    assert game.moved_event(1, rows) == logged
    last = game.moved_event(2, rows)
    assert last is not None and decode_server(last).to_move == 1


def test_a_full_board_without_a_line_is_a_draw() -> None:
    run(
        HUMANS.format(game="tictactoe")
        + """
        play 0 0 -> moved
        play 1 4 -> moved
        play 0 8 -> moved
        play 1 1 -> moved
        play 0 7 -> moved
        play 1 6 -> moved
        play 0 2 -> moved
        play 1 5 -> moved
        play 0 3 -> moved to_move=-1; ended result=1/2-1/2 reason=draw
        """
    )


def test_k_or_more_in_a_row_wins_an_overline_included() -> None:
    # k=5 on 7x7, won by six in a row: X fills cells 0-5 of the top row but 2, O plays
    # four in the bottom row (not five), then X closes cell 2 into a run of six.
    run(
        HUMANS.format(game="mnk m=7 n=7 k=5")
        + """
        play 0 0 -> moved
        play 1 42 -> moved
        play 0 1 -> moved
        play 1 43 -> moved
        play 0 3 -> moved
        play 1 44 -> moved
        play 0 4 -> moved
        play 1 45 -> moved to_move=0   # four in a row: not k
        play 0 5 -> moved to_move=1
        play 1 48 -> moved
        play 0 2 -> moved to_move=-1; ended result=1-0 reason=line winner=0
        """
    )


def test_uttt_closed_boards_and_free_moves() -> None:
    t = run(HUMANS.format(game="uttt"))
    state = t.session.state
    # X wins small board 4; a move into it is then refused, and being sent to it is a
    # free move.
    script = [
        (0, 4 * 9 + 0),  # X in board 4, cell 0: O is sent to board 0
        (1, 0 * 9 + 4),  # O in board 0, cell 4: X is sent to board 4
        (0, 4 * 9 + 1),  # X sends O to board 1
        (1, 1 * 9 + 4),  # O sends X to board 4
        (0, 4 * 9 + 2),  # X wins board 4 (cells 0, 1, 2); O is sent to board 2
    ]
    for seat, action in script:
        t.step(f"play {seat} {action} -> moved seat={seat} action={action}")
    assert state.legal_actions()[0] // 9 == 2  # O plays in board 2
    t.step("play 1 22 -> moved")  # board 2, cell 4: X is sent to board 4, now closed
    t.step("play 0 39 ! illegal_move")  # board 4, cell 3: an empty cell of a closed board
    boards = {a // 9 for a in state.legal_actions()}
    assert 4 not in boards and len(boards) == 8  # a free move: any open board
    t.step("play 0 80 -> moved seat=0 action=80")


def test_draw_offers_are_answered_or_withdrawn_by_a_move() -> None:
    run(
        HUMANS.format(game="5x5")
        + """
        draw 0 offer -> offer seq=2 kind=draw seat=0 answer=offer
        draw 0 offer ! not_allowed          # already offered
        draw 0 accept ! not_allowed         # one's own offer
        draw 1 decline -> offer seq=3 seat=1 answer=decline
        draw 0 offer ! not_allowed          # again before a move has been played
        play 0 12 -> moved seq=4
        draw 1 offer -> offer seq=5 seat=1
        play 0 13 ! not_your_turn
        play 1 6 -> moved seq=6            # the offerer moves: its offer stands
        play 0 18 -> moved seq=7            # the other side moves: declined, silently
        draw 0 accept ! not_allowed
        draw 0 offer -> offer seq=8 seat=0
        draw 1 offer -> ended seq=9 result=1/2-1/2 reason=agreement
        """
    )


def test_abort_before_both_sides_moved_then_only_resign() -> None:
    run(
        HUMANS.format(game="tictactoe")
        + """
        play 0 4 -> moved
        abort 1 -> ended result=* reason=abort
        """
    )
    run(
        HUMANS.format(game="tictactoe")
        + """
        play 0 4 -> moved
        play 1 0 -> moved
        abort 0 ! not_allowed
        resign 0 -> ended result=0-1 reason=resign winner=1
        """
    )


def test_resign_and_claim_before_both_sides_moved_count_no_result() -> None:
    """As on Lichess, a game counts only once both sides have moved: before that a resign
    aborts it (as Lichess's Board and Bot APIs do) and there is nothing to claim."""
    run(
        HUMANS.format(game="tictactoe")
        + """
        play 0 4 -> moved seq=2
        resign 0 -> ended seq=3 result=* reason=abort winner=none
        """
    )
    run(
        HUMANS.format(game="tictactoe")
        + """
        resign 1 -> ended seq=2 result=* reason=abort
        """
    )
    run(
        HUMANS.format(game="tictactoe")
        + """
        play 0 4 -> moved seq=2
        leave 1 -> presence seq=3 seat=1 online=false
        at 100
        claim 0 win ! not_allowed           # the grace is over, but nothing counts yet
        claim 0 draw ! not_allowed
        abort 0 -> ended seq=4 result=* reason=abort
        """
    )


def test_a_player_who_leaves_can_be_claimed_against_after_the_grace() -> None:
    run(
        HUMANS.format(game="tictactoe")
        + """
        play 0 4 -> moved seq=2
        play 1 0 -> moved seq=3
        claim 0 win ! not_allowed           # the opponent is here
        at 5
        leave 1 -> presence seq=4 seat=1 online=false
        at 30
        claim 0 win ! not_allowed           # the seat is held for the grace period
        back 1 -> presence seq=5 seat=1 online=true
        at 40
        leave 1 -> presence seq=6 online=false
        at 101
        claim 0 win -> ended seq=7 result=1-0 reason=abandoned
        """
    )


def test_a_move_clock_flags_the_side_that_ran_out() -> None:
    run(
        HUMANS.format(game="tictactoe move=5000")
        + """
        play 0 4 -> moved seq=2
        play 1 0 -> moved seq=3            # the clock starts once both sides have moved
        at 4
        timeouts -> nothing
        at 9
        timeouts -> ended seq=4 result=0-1 reason=flag
        play 0 8 ! game_over
        """
    )


def test_a_fischer_increment_is_added_once_the_clocks_run() -> None:
    """As on Lichess (scalachess Clock.step adds no increment while the clock is not
    running), each side's first move, made before the clocks start, adds no increment."""
    run(
        HUMANS.format(game="tictactoe clock=60000+2000")
        + """
        at 10
        play 0 4 -> moved clocks=[60000,60000]
        at 20
        play 1 0 -> moved clocks=[60000,60000]   # X's clock runs from now
        at 25
        play 0 8 -> moved clocks=[57000,60000]   # 5 s spent, 2 s added
        at 26
        play 1 2 -> moved clocks=[57000,61000]
        """
    )


def test_a_snapshot_says_what_is_left_of_a_first_moves_time() -> None:
    """A watch or resume during a side's first move: the snapshot says how much of its 30 s
    is left (a resuming bot assumed all of it); left out at the start (all of it, counted
    from the snapshot) and once both sides have moved."""
    t = run(HUMANS.format(game="tictactoe clock=60000+2000"))
    assert t.session.snapshot(t.now).first_move_left_ms is None  # the start
    t.run("at 12")
    assert t.session.snapshot(t.now).first_move_left_ms == 18_000
    t.run("play 0 4 -> moved\nat 20")
    assert t.session.snapshot(t.now).first_move_left_ms == 22_000  # O's, from X's move
    t.run("play 1 0 -> moved\nat 21")
    assert t.session.snapshot(t.now).first_move_left_ms is None  # the clocks run
    untimed = run(HUMANS.format(game="tictactoe") + "at 12")
    assert untimed.session.snapshot(untimed.now).first_move_left_ms is None


def test_a_withdrawn_open_game_has_no_rematch() -> None:
    """An open game withdrawn before anyone joined took a rematch offer (an offer event,
    stored, that no opponent could answer): it is refused, saying why."""
    t = run(
        """
        new tictactoe
        seat 0 ada
        resign 0 -> ended seq=1 result=* reason=abort
        rematch 0 offer ! not_allowed
        rematch 0 accept ! not_allowed
        """
    )
    with pytest.raises(GameError, match="withdrawn before anyone joined"):
        t.session.rematch(0, "offer", t.now)


def test_rematch_needs_both_sides_and_names_the_next_game() -> None:
    run(
        HUMANS.format(game="tictactoe")
        + """
        rematch 0 offer ! not_allowed       # not over yet
        play 0 4 -> moved seq=2
        play 1 0 -> moved seq=3
        resign 1 -> ended seq=4 result=1-0
        rematch 1 offer -> offer seq=5 kind=rematch seat=1 answer=offer
        rematch 1 offer ! not_allowed
        rematch 0 accept -> offer seq=6 kind=rematch seat=0 answer=accept next_game=next-game
        rematch 0 offer ! not_allowed       # already agreed
        """
    )


@pytest.mark.parametrize("game", ["tictactoe", "5x5", "gomoku", "uttt"])
def test_seats_and_start(game: str) -> None:
    t = run(
        f"""
        new {game}
        seat 0 ada
        start ! not_your_turn               # a seat is still open
        play 0 0 ! not_your_turn            # not started
        seat 1 bo
        start -> snapshot seq=1 status=live to_move=0
        """
    )
    with pytest.raises(GameError):
        t.session.take_seat(1, Player("cy", "human", player_id="p-cy"))


def test_a_seat_token_opens_its_seat_for_its_player_only() -> None:
    """Checked against the token itself while this process knows it, and against its
    hash once only that survived (a restart): the same answers either way."""
    session = GameSession.new("tictactoe", {}, Now(0.0, EPOCH))
    ada = session.take_seat(0, Player("ada", "human", player_id="p-ada"))
    bo = session.take_seat(1, Player("bo", "human", player_id="p-bo"))
    for known in (True, False):
        if not known:
            session.tokens = [None, None]
        assert session.authorize(ada, "p-ada") == 0 and session.authorize(bo, "p-bo") == 1
        for token, player_id in [
            (ada, "p-bo"), (bo, "p-ada"), (ada, None), (ada[:-1], "p-ada"), ("", "p-ada"),
            ("x" * 32, "p-ada"), ("é" * 32, "p-ada"),  # (not ASCII: compared by hash)
        ]:  # fmt: skip
            with pytest.raises(GameError) as refused:
                session.authorize(token, player_id)
            assert refused.value.code.value == "bad_token"


def test_a_transcript_that_is_wrong_fails() -> None:
    """The runner itself: a wrong expectation is caught, with the line it is on."""
    with pytest.raises(AssertionError, match="line 5"):
        run(HUMANS.format(game="tictactoe") + "play 0 4 -> moved seq=3")
    with pytest.raises(AssertionError, match="refused with not_your_turn"):
        run(HUMANS.format(game="tictactoe") + "play 1 4 -> moved")
    with pytest.raises(AssertionError, match="expected a refusal"):
        run(HUMANS.format(game="tictactoe") + "play 0 4 ! illegal_move")

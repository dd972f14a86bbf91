"""The client's session core, by transcripts (websockets' sans-I/O tests): what the I/O layer
tells it, and what it must send and report in return. No sockets, no event loop."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import msgpack
import pytest

from client.session_core import (
    Backoff,
    ClientSession,
    Failed,
    NotResumed,
    Received,
    Refused,
    Reply,
    ResumeWaiting,
    SeekReposted,
    Welcomed,
)
from protocol import (
    PROTOCOL_VERSION,
    CancelSeek,
    CreateGame,
    Draw,
    Ended,
    Error,
    Hello,
    LobbyState,
    LobbySubscribe,
    Message,
    Move,
    Moved,
    Offer,
    QuickPair,
    Resign,
    Resume,
    Resumed,
    Seated,
    Seek,
    SeekPosted,
    Snapshot,
    Unwatch,
    Watch,
    Welcome,
    decode,
    decode_server,
    encode,
)

HELLO = {"version": PROTOCOL_VERSION, "name": "ada", "bot": False, "client": "noughts"}


def welcome(rid: int, session: str = "s1", games: list[dict[str, Any]] | None = None) -> Welcome:
    return Welcome(rid=rid, version=PROTOCOL_VERSION, session=session, player_id="p1",
                   games=games or [])  # fmt: skip


def snapshot(game_id: str, seq: int, status: str = "live", rid: int | None = None) -> Snapshot:
    return Snapshot(game_id=game_id, seq=seq, game="tictactoe", params={}, players=[None, None],
                    actions=[], status=status, to_move=0, rid=rid)  # type: ignore[arg-type]  # fmt: skip


def moved(game_id: str, seq: int, rid: int | None = None) -> Moved:
    return Moved(game_id=game_id, seq=seq, ply=seq - 2, seat=0, action=seq, to_move=1, rid=rid)


# A step: (what the I/O layer does, the messages the session must send, the events it must
# report). What it does: "made", ("lost", reason), ("send", kind, fields), a Message
# received, ("at", now, Message) received at ``now``, ("frame", bytes) received, or
# ("again", game_id): its resume asked for again (after a ResumeWaiting's backoff).
Step = tuple[Any, list[Message], list[Any]]


def wire(event: Any) -> Any:
    """An expected event with its message as the codec reads it (lists as tuples)."""
    for name in ("message", "welcome", "error"):
        if getattr(event, name, None) is not None:
            return dataclasses.replace(event, **{name: decode_server(encode(getattr(event, name)))})
    return event


def play(session: ClientSession, transcript: list[Step]) -> None:
    for number, (action, sent, expected) in enumerate(transcript):
        events = [wire(event) for event in expected]
        if action == "made":
            session.connection_made()
        elif isinstance(action, Message):
            session.receive_frame(encode(action))
        elif action[0] == "lost":
            session.connection_lost(action[1])
        elif action[0] == "send":
            session.send_request(action[1], **action[2])
        elif action[0] == "frame":
            session.receive_frame(action[1])
        elif action[0] == "at":
            session.receive_frame(encode(action[2]), action[1])
        elif action[0] == "again":
            session.resume_again(action[1])
        actual_sent = [decode(frame) for frame in session.data_to_send()]
        assert actual_sent == sent, f"step {number}: {action!r} sent"
        assert session.events_received() == events, f"step {number}: {action!r} reported"


def test_greeting_then_a_request_and_its_reply() -> None:
    session = ClientSession(name="ada")
    seated = Seated(game_id="g1", seat=0, token="t1", rid=2)
    play(session, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (welcome(1), [], [Welcomed(welcome(1), again=False)]),
        (("send", CreateGame, {"game": "tictactoe"}), [CreateGame(rid=2, game="tictactoe")], []),
        (seated, [], [Reply(2, seated), Received(seated, replied=True)]),
        # A seat given without a request (a seek of ours accepted): an event only.
        (Seated(game_id="g2", seat=1, token="t2"), [],
         [Received(Seated(game_id="g2", seat=1, token="t2"), replied=False)]),
    ])  # fmt: skip
    assert session.seats == {"g1": (0, "t1"), "g2": (1, "t2")}
    assert session.session == "s1" and session.token_for("g2") == "t2"


def test_a_reconnection_follows_every_game_again_from_its_last_seq() -> None:
    """Played games are resumed, watched ones watched again (a resume would leave the server
    unable to unwatch them), our games named in the welcome resumed from 0, the lobby
    subscribed again; the requests in flight fail; events seen already are left out."""
    session = ClientSession(name="ada")
    mine = {"game_id": "g1", "seat": 0, "token": "t1", "seq": 1}
    other = {"game_id": "g9", "seat": 1, "token": "t9", "seq": 4}
    lobby = LobbyState(rid=3, seeks=[], games=[])
    play(session, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (welcome(1, games=[mine]), [], [Welcomed(welcome(1, games=[mine]), again=False)]),
        (("send", Watch, {"game_id": "w1"}), [Watch(rid=2, game_id="w1")], []),
        (snapshot("w1", 5, rid=2), [], [Reply(2, snapshot("w1", 5, rid=2)),
                                        Received(snapshot("w1", 5, rid=2), replied=True)]),
        (("send", LobbySubscribe, {}), [LobbySubscribe(rid=3)], []),
        (lobby, [], [Reply(3, lobby), Received(lobby, replied=True)]),
        (snapshot("g1", 1), [], [Received(snapshot("g1", 1), replied=False)]),
        (moved("g1", 2), [], [Received(moved("g1", 2), replied=False)]),
        (("send", CreateGame, {"game": "uttt"}), [CreateGame(rid=4, game="uttt")], []),
        (("lost", "gone"), [], [Failed(4, "gone")]),
        ("made", [Hello(rid=5, session="s1", **HELLO)], []),
        (welcome(5, games=[mine, other]),
         [Resume(rid=6, game_id="g1", since=2), Resume(rid=7, game_id="g9", since=0),
          Watch(rid=8, game_id="w1", since=5), LobbySubscribe(rid=9)],
         [Welcomed(welcome(5, games=[mine, other]), again=True)]),
        (moved("g1", 2), [], []),  # seen before the drop
        (moved("g1", 3), [], [Received(moved("g1", 3), replied=False)]),
        (Resumed(rid=6, game_id="g1", seq=3, seat=0, token="t1b"), [],
         [Received(Resumed(rid=6, game_id="g1", seq=3, seat=0, token="t1b"), replied=True)]),
    ])  # fmt: skip
    assert session.seats["g1"] == (0, "t1b")


def test_a_seat_request_carries_the_token_of_the_latest_welcome() -> None:
    """A server restored from its database keeps only the tokens' hashes and issues new ones
    in its welcome; a token kept by the client elsewhere went stale ("you hold no seat with
    this token"): the core fills in the seat's current token."""
    session = ClientSession(name="ada")
    before = {"game_id": "g1", "seat": 0, "token": "old", "seq": 3}
    after = {"game_id": "g1", "seat": 0, "token": "new", "seq": 3}
    play(session, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (welcome(1, games=[before]), [], [Welcomed(welcome(1, games=[before]), again=False)]),
        (("send", Move, {"game_id": "g1", "action": 4, "ply": 2}),
         [Move(rid=2, game_id="g1", token="old", action=4, ply=2)], []),
        (("lost", "restart"), [], [Failed(2, "restart")]),
        ("made", [Hello(rid=3, session="s1", **HELLO)], []),
        (welcome(3, games=[after]), [Resume(rid=4, game_id="g1", since=0)],
         [Welcomed(welcome(3, games=[after]), again=True)]),
        (("send", Move, {"game_id": "g1", "action": 4, "ply": 2}),
         [Move(rid=5, game_id="g1", token="new", action=4, ply=2)], []),
        # A token named by the caller is sent as it is.
        (("send", Resign, {"game_id": "g1", "token": "mine"}),
         [Resign(rid=6, game_id="g1", token="mine")], []),
    ])  # fmt: skip


def test_a_game_request_carries_the_seq_seen_when_first_sent() -> None:
    """Resign, abort, draw, claim and rematch carry the last seq of their game seen (none
    before any was seen), to a server of version 2; one sent again keeps its first seq; a
    server of version 1 gets none (it would refuse the field)."""
    session = ClientSession(name="ada")
    mine = {"game_id": "g1", "seat": 0, "token": "t1", "seq": 3}
    play(session, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (welcome(1, games=[mine]), [], [Welcomed(welcome(1, games=[mine]), again=False)]),
        (("send", Resign, {"game_id": "g1"}), [Resign(rid=2, game_id="g1", token="t1")], []),
        (snapshot("g1", 3), [], [Received(snapshot("g1", 3), replied=False)]),
        (("send", Draw, {"game_id": "g1"}),
         [Draw(rid=3, game_id="g1", token="t1", seq=3)], []),
        (moved("g1", 4), [], [Received(moved("g1", 4), replied=False)]),
        (("send", Draw, {"game_id": "g1", "seq": 3}),  # sent again: its first seq
         [Draw(rid=4, game_id="g1", token="t1", seq=3)], []),
        (("send", Resign, {"game_id": "g1"}), [Resign(rid=5, game_id="g1", token="t1", seq=4)],
         []),
    ])  # fmt: skip
    assert session.with_seq(Move, {"game_id": "g1"}) == {"game_id": "g1"}  # moves have ply
    old = ClientSession(name="ada")
    old_welcome = dataclasses.replace(welcome(1, games=[mine]), version=1)
    play(old, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (old_welcome, [], [Welcomed(old_welcome, again=False)]),
        (snapshot("g1", 3), [], [Received(snapshot("g1", 3), replied=False)]),
        (("send", Resign, {"game_id": "g1", "seq": 3}),
         [Resign(rid=2, game_id="g1", token="t1")], []),
    ])  # fmt: skip


def test_a_forgotten_session_starts_afresh_and_a_refusal_is_reported() -> None:
    session = ClientSession(name="ada", session="old")
    forgotten = Error(code="bad_token", message="unknown session", rid=1)
    play(session, [
        ("made", [Hello(rid=1, session="old", **HELLO)], []),
        (forgotten, [Hello(rid=2, **HELLO)], []),
        (welcome(2, session="new"), [], [Welcomed(welcome(2, session="new"), again=False)]),
    ])  # fmt: skip
    assert session.session == "new"
    refused = ClientSession(name="ada")
    full = Error(code="too_many", message="the server is full", rid=1)
    play(refused, [("made", [Hello(rid=1, **HELLO)], []), (full, [], [Refused(full)])])


def test_a_game_that_cannot_be_resumed_is_reported_and_no_longer_followed() -> None:
    session = ClientSession(name="ada")
    play(session, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (welcome(1), [], [Welcomed(welcome(1), again=False)]),
        (snapshot("g1", 3), [], [Received(snapshot("g1", 3), replied=False)]),
        (("lost", "gone"), [], []),
        ("made", [Hello(rid=2, session="s1", **HELLO)], []),
        (welcome(2), [Resume(rid=3, game_id="g1", since=3)], [Welcomed(welcome(2), True)]),
        (Error(code="unknown_game", message="no such game", rid=3), [],
         [NotResumed("g1", Error(code="unknown_game", message="no such game", rid=3))]),
        (("lost", "again"), [], []),
        ("made", [Hello(rid=4, session="s1", **HELLO)], []),
        (welcome(4), [], [Welcomed(welcome(4), True)]),  # g1 is not asked for again
    ])  # fmt: skip


def test_a_game_the_server_cannot_resume_yet_is_kept_and_asked_for_again() -> None:
    """A resume answered ``unavailable`` (the server's database down) forgot the game, as
    ``unknown_game`` does: it is kept (ResumeWaiting, for the I/O layer's backoff), asked for
    again from its last seq (not while a request for it is in flight, nor before the
    welcome), resumed by a reconnection too, and no longer waited for once resumed."""
    down = Error(code="unavailable", message="game g1 waits for the database: retry soon")
    session = ClientSession(name="ada")
    play(session, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (welcome(1), [], [Welcomed(welcome(1), again=False)]),
        (snapshot("g1", 3), [], [Received(snapshot("g1", 3), replied=False)]),
        (("lost", "gone"), [], []),
        ("made", [Hello(rid=2, session="s1", **HELLO)], []),
        (welcome(2), [Resume(rid=3, game_id="g1", since=3)], [Welcomed(welcome(2), True)]),
        (dataclasses.replace(down, rid=3), [],
         [ResumeWaiting("g1", dataclasses.replace(down, rid=3), 0)]),
        (("again", "g1"), [Resume(rid=4, game_id="g1", since=3)], []),
        (("again", "g1"), [], []),  # (one in flight)
        (dataclasses.replace(down, rid=4), [],
         [ResumeWaiting("g1", dataclasses.replace(down, rid=4), 1)]),
        (("lost", "again"), [], []),
        ("made", [Hello(rid=5, session="s1", **HELLO)], []),
        (("again", "g1"), [], []),  # (not greeted yet: the welcome resumes it)
        (welcome(5), [Resume(rid=6, game_id="g1", since=3)], [Welcomed(welcome(5), True)]),
        (Resumed(game_id="g1", seq=3, rid=6), [],
         [Received(Resumed(game_id="g1", seq=3, rid=6), replied=True)]),
        (("again", "g1"), [], []),  # resumed: nothing waits
        (moved("g1", 4), [], [Received(moved("g1", 4), replied=False)]),
    ])  # fmt: skip


def test_a_lost_create_is_told_apart_from_other_games_by_its_record() -> None:
    """``made_by_create``: the game a lost ``create`` may have made is one like it asked for
    (game, parameters, clock, our seat unless drawn, the AI with its algorithm and budget,
    or a human's seat), and no other."""
    from client.session_core import made_by_create

    ai = {"name": "mcts 50ms", "kind": "ai", "algorithm": "mcts", "budget_ms": 50}
    ada = {"name": "ada", "kind": "human", "player_id": "p1"}
    record = {"game": "5x5", "params": {}, "clock": {"initial_ms": 60000, "increment_ms": 0},
              "players": [ai, ada]}  # fmt: skip
    create = {"game": "5x5", "opponent": "ai", "seat": 1, "budget_ms": 50,
              "clock": {"initial_ms": 60000}}  # fmt: skip
    assert made_by_create(create, record, 1)
    assert made_by_create(create | {"seat": -1, "algorithm": "mcts"}, record, 1)
    for other in [{"seat": 0}, {"game": "gomoku"}, {"params": {"m": 5}}, {"budget_ms": 200},
                  {"algorithm": "uct"}, {"opponent": "human"}, {"clock": {}}]:  # fmt: skip
        assert not made_by_create(create | other, record, 1), other
    human = record | {"players": [None, ada]}
    assert made_by_create(create | {"opponent": "human"}, human, 1)
    assert not made_by_create(create, human, 1)


def test_an_ended_or_unwatched_game_is_not_resumed() -> None:
    session = ClientSession(name="ada")
    ended = Ended(game_id="g1", seq=4, result="1-0", reason="line", winner=0)
    play(session, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (welcome(1), [], [Welcomed(welcome(1), again=False)]),
        (snapshot("g1", 3), [], [Received(snapshot("g1", 3), replied=False)]),
        (ended, [], [Received(ended, replied=False)]),
        (("send", Watch, {"game_id": "w1"}), [Watch(rid=2, game_id="w1")], []),
        (("send", Unwatch, {"game_id": "w1"}), [Unwatch(rid=3, game_id="w1")], []),
        (("lost", "gone"), [], [Failed(2, "gone"), Failed(3, "gone")]),
        ("made", [Hello(rid=4, session="s1", **HELLO)], []),
        (welcome(4), [], [Welcomed(welcome(4), True)]),
    ])  # fmt: skip


def test_an_unreadable_frame_answers_its_request_or_is_reported() -> None:
    session = ClientSession(name="ada")
    play(session, [("made", [Hello(rid=1, **HELLO)], []),
                   (welcome(1), [], [Welcomed(welcome(1), again=False)])])  # fmt: skip
    session.send_request(CreateGame, game="tictactoe")
    session.data_to_send()
    session.receive_frame(msgpack.packb({"type": "seated", "rid": 2, "seat": 7}))
    reply, received = session.events_received()
    assert isinstance(reply, Reply) and reply.rid == 2
    assert isinstance(reply.message, Error) and "cannot read a frame" in reply.message.message
    session.receive_frame(b"\xc1")
    [event] = session.events_received()
    assert isinstance(event, Received) and isinstance(event.message, Error)
    assert event.message.rid is None and not event.replied


def test_an_unreadable_event_of_a_game_names_its_game() -> None:
    """An event the codec refuses (one a later server sends: a new type, a bound widened)
    has no rid: its error names the game, which a game's view says (plain: "Game g1:
    cannot read ..."); without it an older plain client waited in silence for a timed
    game's snapshot it could not read."""
    session = ClientSession(name="ada")
    play(session, [("made", [Hello(rid=1, **HELLO)], []),
                   (welcome(1), [], [Welcomed(welcome(1), again=False)])])  # fmt: skip
    session.receive_frame(msgpack.packb({"type": "snapshot", "game_id": "g1", "seq": "x"}))
    [event] = session.events_received()
    assert isinstance(event, Received) and isinstance(event.message, Error)
    assert (event.message.game_id, event.message.rid) == ("g1", None)
    assert "cannot read a frame from the server" in event.message.message
    session.receive_frame(msgpack.packb({"type": "later", "game_id": "g" * 33}))
    [event] = session.events_received()
    assert isinstance(event.message, Error) and event.message.game_id is None


def test_a_reconnection_posts_our_seeks_and_quick_entries_again() -> None:
    """The server drops a connection's seeks and quick-pairing entries with it (PROTOCOL.md,
    seek): they were lost for good. Now they are posted again once greeted, a quick entry's
    AI due when it first was; a refusal says it is gone; cancel_seek with the first id
    cancels the entry as it is now."""
    session = ClientSession(name="ada")
    posted = SeekPosted(rid=2, seek_id="s1")
    queued = SeekPosted(rid=3, seek_id="q1")
    full = Error(code="too_many", message="at your cap", rid=6)
    again = Seek(rid=5, game="tictactoe")
    quick_again = QuickPair(rid=6, game="uttt", ai_after_s=3)  # 10 s from 100.0, at 107.5
    play(session, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (welcome(1), [], [Welcomed(welcome(1), again=False)]),
        (("send", Seek, {"game": "tictactoe"}), [Seek(rid=2, game="tictactoe")], []),
        (posted, [], [Reply(2, posted), Received(posted, replied=True)]),
        (("send", QuickPair, {"game": "uttt", "ai_after_s": 10}),
         [QuickPair(rid=3, game="uttt", ai_after_s=10)], []),
        (("at", 100.0, queued), [], [Reply(3, queued), Received(queued, replied=True)]),
        (("lost", "restart"), [], []),
        ("made", [Hello(rid=4, session="s1", **HELLO)], []),
        (("at", 107.5, welcome(4)), [again, quick_again], [Welcomed(welcome(4), again=True)]),
        (SeekPosted(rid=5, seek_id="s2"), [], [SeekReposted("s1", "s1", again, seek_id="s2")]),
        (full, [], [SeekReposted("q1", "q1", quick_again, error=full)]),
        (("send", CancelSeek, {"seek_id": "s1"}), [CancelSeek(rid=7, seek_id="s2")], []),
        (("lost", "again"), [], [Failed(7, "again")]),
        ("made", [Hello(rid=8, session="s1", **HELLO)], []),
        (welcome(8), [], [Welcomed(welcome(8), again=True)]),  # nothing stands
    ])  # fmt: skip
    assert session.standing == {}


def test_a_seek_a_game_took_is_not_posted_again() -> None:
    """A seat given without a request of ours took a standing seek: the one its game's first
    snapshot fits (game, colour), even when that snapshot comes only with the resume after a
    reconnection (reposts wait for it); a rematch's seat took none."""
    session = ClientSession(name="ada")
    mine = {"game_id": "g1", "seat": 1, "token": "t1", "seq": 1}
    as_x = Seek(rid=6, game="tictactoe", color="x")
    rematch = Offer(game_id="g1", seq=5, kind="rematch", seat=0, answer="accept", next_game="g2")
    play(session, [
        ("made", [Hello(rid=1, **HELLO)], []),
        (welcome(1), [], [Welcomed(welcome(1), again=False)]),
        (("send", Seek, {"game": "tictactoe", "color": "x"}),
         [Seek(rid=2, game="tictactoe", color="x")], []),
        (SeekPosted(rid=2, seek_id="s1"), [],
         [Reply(2, SeekPosted(rid=2, seek_id="s1")),
          Received(SeekPosted(rid=2, seek_id="s1"), replied=True)]),
        (("send", Seek, {"game": "tictactoe"}), [Seek(rid=3, game="tictactoe")], []),
        (SeekPosted(rid=3, seek_id="s2"), [],
         [Reply(3, SeekPosted(rid=3, seek_id="s2")),
          Received(SeekPosted(rid=3, seek_id="s2"), replied=True)]),
        # s2 accepted (ada is O: not s1's seat); the connection drops before the snapshot.
        (Seated(game_id="g1", seat=1, token="t1"), [],
         [Received(Seated(game_id="g1", seat=1, token="t1"), replied=False)]),
        (("lost", "gone"), [], []),
        ("made", [Hello(rid=4, session="s1", **HELLO)], []),
        (welcome(4, games=[mine]), [Resume(rid=5, game_id="g1", since=0)],
         [Welcomed(welcome(4, games=[mine]), again=True)]),
        (snapshot("g1", 1), [as_x], [Received(snapshot("g1", 1), replied=False)]),
        (SeekPosted(rid=6, seek_id="s3"), [], [SeekReposted("s1", "s1", as_x, seek_id="s3")]),
        # A rematch of g1 seats ada as X: announced first, it took no seek.
        (rematch, [], [Received(rematch, replied=False)]),
        (Seated(game_id="g2", seat=0, token="t2"), [],
         [Received(Seated(game_id="g2", seat=0, token="t2"), replied=False)]),
        (snapshot("g2", 1), [], [Received(snapshot("g2", 1), replied=False)]),
    ])  # fmt: skip
    assert [(first, e.seek_id) for first, e in session.standing.items()] == [("s1", "s3")]


def test_backoff_is_exponential_with_full_jitter_under_a_cap() -> None:
    """AWS, "Exponential Backoff and Jitter": a uniform draw in [0, min(cap, base * 2**n)]."""
    backoff = Backoff(base_s=0.5, cap_s=8.0)
    delays = [backoff.delay(n, random.Random(7)) for n in range(10)]
    bounds = [min(8.0, 0.5 * 2**n) for n in range(10)]
    # The same seed draws the same fraction of each bound: exactly scaled, then capped.
    fraction = random.Random(7).random()
    assert delays == pytest.approx([fraction * bound for bound in bounds])
    # Spread: many clients of one restarted server do not come back at once.
    rng = random.Random(1)
    waits = [backoff.delay(6, rng) for _ in range(1000)]
    assert 0 <= min(waits) < 0.1 and 7.9 < max(waits) <= 8.0
    assert 3.5 < sum(waits) / len(waits) < 4.5
    assert backoff.delay(10_000, rng) <= 8.0  # no overflow for a long outage

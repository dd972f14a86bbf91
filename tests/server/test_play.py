"""Playing on the service: clocks and flags, first-move aborts, draw offers, aborts,
rematches, spectators, dropped clients resuming, and claims after a player leaves."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

import engine
from client.connection import RequestFailed, ServerConnection
from protocol import (
    Abort,
    Claim,
    CreateGame,
    Draw,
    Ended,
    Error,
    GetGame,
    Hello,
    Message,
    Move,
    Moved,
    Offer,
    Presence,
    Rematch,
    Resign,
    Seated,
    Seek,
    Snapshot,
    Watch,
)
from server.session import GAME_ID_ALPHABET, new_game_id
from server.settings import ServerSettings
from tests.server.conftest import RawClient, RunningServer, human_game, next_event


@pytest.fixture
def settings() -> ServerSettings:
    # Short waits so that timeouts happen within a test.
    return ServerSettings(grace_s=0.5, first_move_s=0.5)


async def _move(client: ServerConnection, game_id: str, action: int) -> Moved:
    return await client.request(  # type: ignore[no-any-return]
        Move, game_id=game_id, token=client.token_for(game_id), action=action
    )


async def _offer(client: ServerConnection, seat: int) -> Offer:
    """The next offer event made by ``seat`` (each side also sees its own offers)."""
    while True:
        offer = await next_event(client, Offer)
        if offer.seat == seat:
            return offer  # type: ignore[no-any-return]


async def _moved(client: ServerConnection, seat: int) -> Moved:
    """The next move event by ``seat`` (a mover also receives its own moves as events)."""
    while True:
        moved = await next_event(client, Moved)
        if moved.seat == seat:
            return moved  # type: ignore[no-any-return]


async def _events(client: ServerConnection, game_id: str, until: type) -> list[Message]:
    """Every event of one game up to and including the first of type ``until``."""
    seen: list[Message] = []
    while True:
        event = await client.next_event(timeout=10)
        if getattr(event, "game_id", None) == game_id:
            seen.append(event)
            if isinstance(event, until):
                return seen


async def test_fischer_clocks_run_after_the_first_moves_and_flag(server: RunningServer) -> None:
    ada, bo, a, b = await human_game(
        server, game="tictactoe", clock={"initial_ms": 1000, "increment_ms": 500}
    )
    gid = a.game_id
    start = await next_event(ada, Snapshot)
    assert start.clock == {"initial_ms": 1000, "increment_ms": 500}
    assert start.clocks == (1000, 1000)
    first = await _move(ada, gid, 4)
    # The clocks start after each side's first move: nothing spent, and as on Lichess no
    # increment added before they run.
    assert first.clocks == (1000, 1000)
    second = await _move(bo, gid, 0)
    assert second.clocks == (1000, 1000)
    third = await _move(ada, gid, 8)
    assert 500 < third.clocks[0] <= 1500 and third.clocks[1] == 1000
    # O does not move: O's 1 s runs out and X wins on time.
    ended = await next_event(ada, Ended, timeout=10)
    assert (ended.reason, ended.result, ended.winner) == ("flag", "1-0", 0)
    assert ended.clocks[1] == 0
    record = (await ada.request(GetGame, game_id=gid)).game
    assert (record["result"], record["reason"]) == ("1-0", "flag")
    assert [m["clocks"] for m in record["moves"]] == [list(first.clocks), list(second.clocks),
                                                      list(third.clocks)]  # fmt: skip


async def test_a_timed_game_without_a_first_move_is_aborted(server: RunningServer) -> None:
    """Within the server's first-move time (first_move_s), which every snapshot of a timed
    game tells its players (first_move_ms), as it tells the clocks."""
    ada, bo, a, b = await human_game(server, game="5x5", clock={"move_ms": 5000})
    live = await next_event(bo, Snapshot)
    assert (live.status, live.first_move_ms) == ("live", 500)
    ended = await next_event(bo, Ended, timeout=10)
    assert (ended.result, ended.reason, ended.winner) == ("*", "no_start", None)
    record = (await bo.request(GetGame, game_id=a.game_id)).game
    assert record["status"] == "aborted"


async def test_an_untimed_game_waits_for_its_first_move(server: RunningServer) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    assert (await next_event(bo, Snapshot)).first_move_ms is None
    await asyncio.sleep(1.0)  # twice the first-move allowance of timed games
    await _move(ada, a.game_id, 4)


async def test_draw_offers(server: RunningServer) -> None:
    ada, bo, a, b = await human_game(server, game="5x5")
    gid = a.game_id
    await _move(ada, gid, 12)
    with pytest.raises(RequestFailed, match="not_allowed.*no draw offer"):
        await bo.request(Draw, game_id=gid, token=b.token, answer="accept")
    await ada.request(Draw, game_id=gid, token=a.token)
    offer = await next_event(bo, Offer)
    assert (offer.kind, offer.seat, offer.answer) == ("draw", 0, "offer")
    await bo.request(Draw, game_id=gid, token=b.token, answer="decline")
    declined = await _offer(ada, 1)
    assert (declined.seat, declined.answer) == (1, "decline")
    # A move declines a standing offer without a word; a new offer can then be accepted.
    await _move(bo, gid, 0)
    await bo.request(Draw, game_id=gid, token=b.token)
    await _move(ada, gid, 6)
    with pytest.raises(RequestFailed, match="not_allowed"):
        await ada.request(Draw, game_id=gid, token=a.token, answer="accept")
    await ada.request(Draw, game_id=gid, token=a.token)
    await bo.request(Draw, game_id=gid, token=b.token, answer="accept")
    ended = await next_event(ada, Ended)
    assert (ended.result, ended.reason, ended.winner) == ("1/2-1/2", "agreement", None)


async def test_abort_only_before_both_sides_moved(server: RunningServer) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    await _move(ada, a.game_id, 4)
    ended = await bo.request(Abort, game_id=a.game_id, token=b.token)
    assert isinstance(ended, Ended) and (ended.result, ended.reason) == ("*", "abort")
    ada2, bo2, a2, b2 = await human_game(server, names=("ada2", "bo2"), game="tictactoe")
    await _move(ada2, a2.game_id, 4)
    await _move(bo2, a2.game_id, 0)
    with pytest.raises(RequestFailed, match="not_allowed.*resign"):
        await ada2.request(Abort, game_id=a2.game_id, token=a2.token)


async def test_an_agreed_draw_and_an_abort_are_taken_only_from_the_right_seat(
    server: RunningServer,
) -> None:
    """A draw is agreed only by the side the offer was made to: the offerer cannot accept
    its own offer, nor a spectator, nor a player holding the other seat's token (a seat
    belongs to its player, not to whoever learnt its token). An abort likewise comes only
    from a player with a seat in the game; nothing of the refused requests is stored."""
    ada, bo, a, b = await human_game(server, game="5x5")
    gid = a.game_id
    eve = await server.connect("eve")
    await eve.request(Watch, game_id=gid)
    await _move(ada, gid, 12)
    await ada.request(Draw, game_id=gid, token=a.token)
    with pytest.raises(RequestFailed, match="not_allowed.*no draw offer"):
        await ada.request(Draw, game_id=gid, token=a.token, answer="accept")
    for token in (a.token, b.token):  # a spectator with either token: not its seat
        with pytest.raises(RequestFailed, match="bad_token"):
            await eve.request(Draw, game_id=gid, token=token, answer="accept")
    with pytest.raises(RequestFailed, match="bad_token"):
        await ada.request(Draw, game_id=gid, token=b.token, answer="accept")
    with pytest.raises(RequestFailed, match="bad_token"):
        await eve.request(Abort, game_id=gid, token=a.token)
    with pytest.raises(RequestFailed, match="bad_token"):
        await bo.request(Abort, game_id=gid, token=a.token)
    record = (await eve.request(GetGame, game_id=gid)).game
    assert record["status"] == "live" and [e["kind"] for e in record["events"]] == [
        "started",
        "draw",
    ]
    # Each with its type and time, as on the wire (a walk's finding: the type was lost,
    # so an offer's kind, draw, stood where started and ended stand).
    assert [e["type"] for e in record["events"]] == ["started", "offer"]
    assert all(isinstance(e["at"], float) for e in record["events"])
    await bo.request(Draw, game_id=gid, token=b.token, answer="accept")
    ended = await next_event(eve, Ended)
    assert (ended.result, ended.reason) == ("1/2-1/2", "agreement")


async def test_rematch_swaps_colours(server: RunningServer) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    gid = a.game_id
    with pytest.raises(RequestFailed, match="not_allowed.*not over"):
        await ada.request(Rematch, game_id=gid, token=a.token)
    await ada.request(Resign, game_id=gid, token=a.token)
    await ada.request(Rematch, game_id=gid, token=a.token)
    offer = await next_event(bo, Offer)
    assert (offer.kind, offer.answer, offer.seat) == ("rematch", "offer", 0)
    await bo.request(Rematch, game_id=gid, token=b.token, answer="accept")
    agreed = await _offer(ada, 1)
    assert agreed.answer == "accept" and agreed.next_game
    start = await next_event(ada, Snapshot)
    assert start.game_id == agreed.next_game and start.status == "live"
    assert [p["name"] for p in start.players] == ["bo", "ada"]
    assert ada.seats[start.game_id][0] == 1 and bo.seats[start.game_id][0] == 0
    await _move(bo, start.game_id, 4)
    record = (await ada.request(GetGame, game_id=start.game_id)).game
    assert record["rematch_of"] == gid


async def test_a_rematch_accepted_after_its_offerer_left_starts_with_it_away(
    server: RunningServer,
) -> None:
    """Probe: ada offered a rematch and left; bo accepted. The new game started with ada
    shown online (the snapshot's ``online``), so bo could never claim it ("your opponent is
    here") and, bo being there, it was never abandoned either. Now it starts with ada away,
    her grace counting from the start; as on Lichess, before both sides have moved there is
    nothing to claim: bo aborts it."""
    ada, bo, a, b = await human_game(server, game="tictactoe")
    gid = a.game_id
    await ada.request(Resign, game_id=gid, token=a.token)
    await ada.request(Rematch, game_id=gid, token=a.token)
    await next_event(bo, Offer)
    await ada.close()
    while server.game_server.players[ada.player_id].online:  # (the server's side of the close)
        await asyncio.sleep(0.01)
    await bo.request(Rematch, game_id=gid, token=b.token, answer="accept")
    start = await next_event(bo, Snapshot)
    assert start.status == "live" and list(start.online) == [True, False]
    new = start.game_id
    assert server.game_server.games[new].claim_at[1] is not None  # her grace runs
    await _move(bo, new, 4)
    with pytest.raises(RequestFailed, match="abort it instead"):
        await bo.request(Claim, game_id=new, token=bo.token_for(new))
    ended = await bo.request(Abort, game_id=new, token=bo.token_for(new))
    assert isinstance(ended, Ended) and (ended.result, ended.reason) == ("*", "abort")


async def test_a_rematch_reaches_the_players_connection_that_did_not_follow_the_game(
    server: RunningServer,
) -> None:
    """ada offered a rematch, then left that client for another one (the same session, in
    the lobby, a seek of hers posted) that never followed the finished game; bo accepted.
    Only connections following the old game were seated: ada, online, never heard of the
    new game (her clock ran). Now her other connection is sent the old game's snapshot,
    which names the rematch, then her seat and the new game's start; the client tells the
    rematch from her seek's game (the seek stays posted)."""
    ada, bo, a, b = await human_game(server, game="tictactoe")
    gid = a.game_id
    await ada.request(Resign, game_id=gid, token=a.token)
    await ada.request(Rematch, game_id=gid, token=a.token)
    await next_event(bo, Offer)
    again = await server.connect("ada", session=ada.session)
    posted = await again.request(Seek, game="tictactoe")
    await ada.close()
    await bo.request(Rematch, game_id=gid, token=b.token, answer="accept")
    old = await next_event(again, Snapshot)
    assert old.game_id == gid and old.next_game
    start = await next_event(again, Snapshot)
    assert start.game_id == old.next_game and start.status == "live"
    assert again.seats[start.game_id][0] == 1 and list(start.online) == [True, True]
    assert list(again.core.standing) == [posted.seek_id]  # not taken by the rematch
    assert posted.seek_id in server.game_server.lobby.seeks
    await _move(bo, start.game_id, 4)
    await _move(again, start.game_id, 0)
    await again.close()
    await bo.close()


async def test_the_ai_accepts_a_rematch_and_answers_draw_offers(server: RunningServer) -> None:
    ada = await server.connect("ada")
    seated = await ada.request(
        CreateGame, game="tictactoe", opponent="ai", seat=0, algorithm="alphabeta", budget_ms=10
    )
    gid = seated.game_id
    await _move(ada, gid, 4)
    reply = await _moved(ada, 1)
    assert reply.stats is not None and reply.stats["value"] <= 0  # 3x3 is a draw at best for O
    await ada.request(Draw, game_id=gid, token=seated.token)
    offers = [await next_event(ada, Offer), await next_event(ada, Ended)]
    assert offers[0].answer == "offer" and offers[1].reason == "agreement"
    await ada.request(Rematch, game_id=gid, token=seated.token)
    start = await next_event(ada, Snapshot)
    assert start.players[0]["kind"] == "ai" and ada.seats[start.game_id][0] == 1
    first = await _moved(ada, 0)  # the AI opens the rematch as X
    assert first.game_id == start.game_id


async def test_a_spectator_sees_exactly_the_players_events(server: RunningServer) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    gid = a.game_id
    carol = await server.connect("carol")
    snapshot = await carol.request(Watch, game_id=gid)
    assert isinstance(snapshot, Snapshot) and snapshot.seq == 1
    await carol.next_event()  # the snapshot reply is also the spectator's first event
    for ply, action in enumerate([4, 0, 8, 2, 1, 7]):
        await _move(ada if ply % 2 == 0 else bo, gid, action)
    await ada.request(Draw, game_id=gid, token=a.token)
    await bo.request(Draw, game_id=gid, token=b.token, answer="decline")
    await _move(ada, gid, 3)
    with pytest.raises(RequestFailed, match="bad_token"):
        await carol.request(Move, game_id=gid, token=a.token, action=5)
    await _move(bo, gid, 5)
    await _move(ada, gid, 6)  # the board is full: a draw
    seen_by = {}
    for name, client in (("ada", ada), ("bo", bo), ("carol", carol)):
        events = await _events(client, gid, Ended)
        seen_by[name] = [(e.TYPE, e.seq) for e in events if not isinstance(e, Snapshot)]
    assert seen_by["carol"] == seen_by["ada"] == seen_by["bo"]
    assert [seq for _, seq in seen_by["carol"]] == list(range(2, 2 + len(seen_by["carol"])))
    assert [t for t, _ in seen_by["carol"]].count("moved") == 9


async def test_a_dropped_client_resumes_without_losing_an_event(server: RunningServer) -> None:
    ada = await ServerConnection.connect(server.url, name="ada", reconnect=True)
    bo = await server.connect("bo")
    a = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    await bo.request(__import__("protocol").JoinGame, game_id=a.game_id)
    gid = a.game_id
    await _move(ada, gid, 12)
    await _move(bo, gid, 6)
    ada.drop()  # the network fails: no closing handshake
    assert await asyncio.wait_for(ada.status_changes.get(), 5) == "connected"  # (initial)
    assert await asyncio.wait_for(ada.status_changes.get(), 5) == "reconnecting"
    left = await next_event(bo, Presence)
    assert (left.seat, left.online) == (0, False) and left.claim_at is not None
    # While ada is away, bo plays on and ada's seat is held.
    with pytest.raises(RequestFailed, match="not_your_turn"):
        await _move(bo, gid, 7)
    assert await asyncio.wait_for(ada.status_changes.get(), 10) == "connected"
    back = await next_event(bo, Presence)
    assert back.online
    await _move(ada, gid, 18)
    await _move(bo, gid, 7)
    events: list[Message] = []
    while len([e for e in events if isinstance(e, Moved)]) < 4:
        events += await _events(ada, gid, Moved)
    events = [e for e in events if not (isinstance(e, Snapshot) and e.status == "open")]
    seqs = [e.seq for e in events]  # type: ignore[attr-defined]
    # Everything from the start, in order, each once: the gap was filled by resume.
    assert seqs == list(range(1, seqs[-1] + 1))
    assert [e.TYPE for e in events] == [
        "snapshot", "moved", "moved", "presence", "presence", "moved", "moved"
    ]  # fmt: skip
    await ada.close()


async def test_the_opponent_may_claim_after_the_grace_period(server: RunningServer) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    gid = a.game_id
    await _move(ada, gid, 4)
    await _move(bo, gid, 0)  # (nothing to claim before both sides moved)
    await ada.close()
    left = await next_event(bo, Presence)
    assert not left.online
    with pytest.raises(RequestFailed, match="not_allowed.*held"):
        await bo.request(Claim, game_id=gid, token=b.token)
    await asyncio.sleep(0.6)
    ended = await bo.request(Claim, game_id=gid, token=b.token, outcome="win")
    assert isinstance(ended, Ended) and (ended.result, ended.reason) == ("0-1", "abandoned")


async def test_a_returning_player_gets_its_seat_back(server: RunningServer) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    gid = a.game_id
    session = ada.session
    await ada.close()
    ada2 = await ServerConnection.connect(server.url, name="ada", session=session)
    assert ada2.welcome is not None and ada2.welcome.player_id == ada.welcome.player_id
    held = {g["game_id"]: g for g in ada2.welcome.games}
    assert held[gid]["seat"] == 0 and held[gid]["token"] == a.token
    await _move(ada2, gid, 4)
    # A stranger with the old token but another session still cannot move.
    stranger = await server.connect("mallory")
    with pytest.raises(RequestFailed, match="bad_token"):
        await stranger.request(Move, game_id=gid, token=a.token, action=0)
    # An unknown session is refused with a clear error (the client library then starts a
    # new session by itself, as a fresh player).
    raw = await RawClient.connect(server.url, hello=False)
    await raw.send_message(Hello(rid=1, version=1, session="not-a-session-token"))
    refused = await raw.receive()
    assert (
        isinstance(refused, Error) and refused.code == "bad_token" and "session" in refused.message
    )
    fresh = await ServerConnection.connect(server.url, session="not-a-session-token")
    assert fresh.welcome is not None and fresh.welcome.games == ()


async def test_an_open_game_is_withdrawn_when_its_creator_leaves(server: RunningServer) -> None:
    ada = await server.connect("ada")
    seated = await ada.request(CreateGame, game="tictactoe", opponent="human")
    assert isinstance(seated, Seated)
    await ada.close()
    await asyncio.sleep(0.8)
    bo = await server.connect("bo")
    with pytest.raises(RequestFailed, match="seat_taken|unknown_game"):
        await bo.request(__import__("protocol").JoinGame, game_id=seated.game_id)
    record = (await bo.request(GetGame, game_id=seated.game_id)).game
    assert (record["status"], record["reason"]) == ("aborted", "abort")


async def test_a_finished_game_keeps_only_the_end_of_its_log(server: RunningServer) -> None:
    """Resume of a finished game still in memory: the last events from its short log, or
    a snapshot with the result from further back (the whole log is not kept)."""
    import engine
    from protocol import JoinGame, Resume, Resumed
    from server.session import FINISHED_LOG

    ada, bo = await server.connect("ada"), await server.connect("bo")
    a = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
    await bo.request(JoinGame, game_id=a.game_id)
    gid = a.game_id
    state = engine.make_game("5x5").new_initial_state()
    for ply in range(20):  # 20 moves, none of them ending the game
        action = next(x for x in state.legal_actions() if not _ends(state, x))
        await _move(ada if ply % 2 == 0 else bo, gid, action)
        state.apply_action(action)
    await ada.request(Resign, game_id=gid, token=ada.token_for(gid))
    ended = await next_event(bo, Ended)
    assert ended.result and ended.seq > FINISHED_LOG + 1

    raw = await RawClient.connect(server.url)
    try:
        await raw.send_message(Resume(rid=1, game_id=gid, since=ended.seq - 2))
        recent = [await raw.receive() for _ in range(3)]
        assert [type(m) for m in recent] == [Moved, Ended, Resumed]
        assert [m.seq for m in recent[:2]] == [ended.seq - 1, ended.seq]  # type: ignore[attr-defined]
        await raw.send_message(Resume(rid=2, game_id=gid, since=2))  # before the kept log
        snapshot, resumed = await raw.receive(), await raw.receive()
        assert isinstance(snapshot, Snapshot) and isinstance(resumed, Resumed)
        assert snapshot.status == "finished" and snapshot.result == ended.result
        assert len(snapshot.actions) == 20 and resumed.seq == ended.seq
    finally:
        await raw.close()
        await ada.close()
        await bo.close()


def _ends(state: object, action: int) -> bool:
    after = state.clone()  # type: ignore[attr-defined]
    after.apply_action(action)
    return bool(after.is_terminal())


def test_game_ids_are_eight_random_letters_of_the_alphabet() -> None:
    ids = [new_game_id() for _ in range(2000)]
    assert all(len(i) == 8 and set(i) <= set(GAME_ID_ALPHABET) for i in ids)
    for position in range(8):  # every letter turns up at every position
        assert {i[position] for i in ids} == set(GAME_ID_ALPHABET)
    assert not [i for i in ids if len(set(i)) == 1]  # the positions are not one draw


async def _engines_busy(client: ServerConnection) -> None:
    """Both engine workers of the fixture's pool on a 2 s uttt search: an AI move asked for
    now waits for one, so a request sent meanwhile arrives while that AI thinks."""
    for _ in range(2):
        busy = await client.request(
            CreateGame, game="uttt", opponent="ai", seat=0, algorithm="mcts", budget_ms=2000
        )
        await _move(client, busy.game_id, 40)


async def test_a_draw_offered_while_the_ai_thinks_is_answered_after_its_search(
    server: RunningServer,
) -> None:
    """An offer made on the AI's turn (with the offerer's move, FIDE 9.1.2.1) was answered at
    once from the AI's previous search, and declined before its first; it is now answered
    from the search that turn runs: 3x3 is a draw, and perfect play accepts."""
    ada = await server.connect("ada")
    seated = await ada.request(
        CreateGame, game="tictactoe", opponent="ai", seat=0, algorithm="perfect", budget_ms=10
    )
    await _engines_busy(ada)
    await _move(ada, seated.game_id, 4)
    await ada.request(Draw, game_id=seated.game_id, token=seated.token)
    events = await _events(ada, seated.game_id, Ended)
    assert events[-1].reason == "agreement"  # type: ignore[attr-defined]
    assert not any(isinstance(e, Moved) and e.seat == 1 for e in events)  # agreed, no move


async def test_an_ai_that_sees_a_win_declines_the_draw_and_moves(server: RunningServer) -> None:
    """Its previous search saw a draw, and that was its answer, though O had since blundered."""
    ada = await server.connect("ada")
    seated = await ada.request(
        CreateGame, game="tictactoe", opponent="ai", seat=1, algorithm="perfect", budget_ms=10
    )
    gid = seated.game_id
    opening = await _moved(ada, 0)
    state = engine.make_game("tictactoe").new_initial_state()
    state.apply_action(opening.action)
    for reply in state.legal_actions():  # a reply after which X, to move, wins
        after = state.clone()
        after.apply_action(reply)
        if engine.search(after, "perfect").value > 0:
            break
    await _engines_busy(ada)
    await _move(ada, gid, reply)
    await ada.request(Draw, game_id=gid, token=seated.token)
    events = await _events(ada, gid, Moved)  # ada's own move
    events += await _events(ada, gid, Moved)  # the AI's
    answers = [(e.seat, e.answer) for e in events if isinstance(e, Offer)]
    assert answers == [(1, "offer"), (0, "decline")]
    assert events[-1].seat == 0 and events[-1].stats["value"] > 0  # type: ignore[attr-defined]
    await ada.request(Resign, game_id=gid, token=seated.token)


async def test_a_player_back_while_her_last_connection_closes_keeps_her_finished_games(
    server: RunningServer,
) -> None:
    """Probe: ada's only connection closed while she played bo and held a finished game
    against the AI (its rematch still possible). The server's side of the close stores her
    absence in each game she plays; she said hello again while that write waited for the
    database (here another connection holds SQLite's write lock). The close then went on as
    if she were still away: her finished game left memory (no human seat online there),
    and her rematch with it, though she was connected. Now the close stops once she is
    back."""
    ada, bo, a, b = await human_game(server, game="tictactoe")
    seated = await ada.request(
        CreateGame, game="tictactoe", opponent="ai", seat=0, algorithm="alphabeta", budget_ms=10
    )
    gid = seated.game_id
    await _move(ada, gid, 4)
    await _moved(ada, 1)
    await ada.request(Resign, game_id=gid, token=seated.token)
    hub = server.game_server
    locker = sqlite3.connect(server.db_path, isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")  # the server's next write waits (busy_timeout)
        await ada.close()
        while hub.players[ada.player_id].online:  # the close: her absence from the game with bo
            await asyncio.sleep(0.01)
        hello = asyncio.ensure_future(server.connect("ada", session=ada.session))
        while not hub.players[ada.player_id].online:  # she is back (her welcome waits)
            await asyncio.sleep(0.01)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    again = await hello
    assert again.seats[a.game_id][0] == 0
    assert gid in hub.games and hub.players.get(ada.player_id) is not None
    await again.request(Rematch, game_id=gid, token=seated.token)
    old = await next_event(again, Snapshot)  # (this connection did not follow that game)
    assert old.game_id == gid and old.next_game
    start = await next_event(again, Snapshot)
    assert start.game_id == old.next_game and start.players[0]["kind"] == "ai"
    await again.close()
    await bo.close()

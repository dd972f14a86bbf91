"""The lobby: seeks pushed live, accepted, cancelled, dying with their owner; challenges;
private games; quick pairing with and without the AI fallback."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import msgpack
import pytest

from client.connection import RequestFailed
from protocol import (
    AcceptSeek,
    CancelSeek,
    CreateGame,
    DeclineSeek,
    JoinGame,
    ListGames,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
    LobbyUpdate,
    Move,
    Moved,
    Ok,
    QuickPair,
    Seek,
    SeekDeclined,
    Snapshot,
)
from tests.server.conftest import RawClient, RunningServer, next_event, next_lobby


async def test_two_humans_meet_through_a_seek(server: RunningServer) -> None:
    ada = await server.connect("ada")
    bo = await server.connect("bo")
    watcher = await server.connect("carol")
    state = await watcher.request(LobbySubscribe)
    assert isinstance(state, LobbyState) and state.seeks == () and state.games == ()
    assert isinstance(await next_lobby(watcher), LobbyState)

    posted = await ada.request(
        Seek, game="uttt", color="o", clock={"initial_ms": 60_000, "increment_ms": 1000}
    )
    added = await next_lobby(watcher)
    assert added.kind == "seek_added" and added.seek["seek_id"] == posted.seek_id
    assert added.seek["player"]["name"] == "ada" and added.seek["player"]["kind"] == "human"
    assert added.seek["clock"] == {"initial_ms": 60_000, "increment_ms": 1000}
    # A client subscribing now sees the seek in its first state.
    assert [s["seek_id"] for s in (await bo.request(LobbySubscribe)).seeks] == [posted.seek_id]

    seated = await bo.request(AcceptSeek, seek_id=posted.seek_id)
    assert seated.seat == 0  # ada asked for O
    removed = await next_lobby(watcher)
    assert removed.kind == "seek_removed" and removed.seek_id == posted.seek_id
    went_live = await next_lobby(watcher)
    assert went_live.kind == "game_added" and went_live.game["game_id"] == seated.game_id

    # Both players got the start; ada learnt her seat without having asked.
    start_a = await next_event(ada, Snapshot)
    start_b = await next_event(bo, Snapshot)
    assert start_a == start_b and start_a.status == "live" and start_a.seq == 1
    assert start_a.clocks == (60_000, 60_000)
    assert ada.seats[seated.game_id][0] == 1
    await bo.request(Move, game_id=seated.game_id, token=seated.token, action=40)
    moved = await next_event(ada, Moved)
    assert moved.action == 40 and moved.seat == 0
    with pytest.raises(RequestFailed, match="unknown_seek"):
        await watcher.request(AcceptSeek, seek_id=posted.seek_id)


async def test_a_seek_can_be_cancelled_and_dies_with_its_owner(server: RunningServer) -> None:
    ada = await server.connect("ada")
    watcher = await server.connect("carol")
    await watcher.request(LobbySubscribe)
    await next_lobby(watcher)
    first = await ada.request(Seek, game="tictactoe")
    second = await ada.request(Seek, game="5x5")
    assert (await next_lobby(watcher)).kind == "seek_added"
    assert (await next_lobby(watcher)).kind == "seek_added"
    await ada.request(CancelSeek, seek_id=first.seek_id)
    removed = await next_lobby(watcher)
    assert (removed.kind, removed.seek_id) == ("seek_removed", first.seek_id)
    with pytest.raises(RequestFailed, match="unknown_seek"):
        await watcher.request(CancelSeek, seek_id=second.seek_id)  # not the owner
    await ada.close()
    removed = await next_lobby(watcher)
    assert (removed.kind, removed.seek_id) == ("seek_removed", second.seek_id)
    assert (await watcher.request(LobbySubscribe)).seeks == ()


async def test_seek_rules(server: RunningServer) -> None:
    ada = await server.connect("ada")
    robot = await server.connect("robot", bot=True)
    own = await ada.request(Seek, game="tictactoe", opponents="humans")
    with pytest.raises(RequestFailed, match="not_allowed.*own"):
        await ada.request(AcceptSeek, seek_id=own.seek_id)
    with pytest.raises(RequestFailed, match="not_allowed.*human"):
        await robot.request(AcceptSeek, seek_id=own.seek_id)
    with pytest.raises(RequestFailed, match="bad_request.*chess"):
        await ada.request(Seek, game="chess")
    with pytest.raises(RequestFailed, match="bad_request.*clock"):
        await ada.request(Seek, game="tictactoe", clock={"minutes": 5})
    with pytest.raises(RequestFailed, match="bad_request.*nobody|bad_request.*no player"):
        await ada.request(Seek, game="tictactoe", to="nobody")
    for _ in range(4):
        await ada.request(Seek, game="tictactoe")
    with pytest.raises(RequestFailed, match="too_many.*5 open seeks"):
        await ada.request(Seek, game="tictactoe")


async def test_a_challenge_is_seen_and_accepted_only_by_its_player(server: RunningServer) -> None:
    ada = await server.connect("ada")
    robot = await server.connect("robot", bot=True)
    carol = await server.connect("carol")
    for client in (robot, carol):
        await client.request(LobbySubscribe)
        await next_lobby(client)
    posted = await ada.request(Seek, game="5x5", to="robot")
    added = await next_lobby(robot)
    assert added.seek["seek_id"] == posted.seek_id and added.seek["to"] == robot.welcome.player_id
    assert (await carol.request(LobbySubscribe)).seeks == ()
    with pytest.raises(RequestFailed, match="unknown_seek"):
        await carol.request(AcceptSeek, seek_id=posted.seek_id)
    seated = await robot.request(AcceptSeek, seek_id=posted.seek_id)
    start = await next_event(ada, Snapshot)
    assert start.game_id == seated.game_id
    assert {p["kind"] for p in start.players} == {"human", "bot"}


async def test_a_humans_only_challenge_to_a_bot_is_refused(server: RunningServer) -> None:
    """``opponents: "humans"`` is the poster's (bots may not accept): with ``to`` naming a
    bot, no one could ever accept the challenge, yet it was posted and its challenger waited
    for nothing. Refused at once, whether the bot is named or given by id, online or not."""
    ada = await server.connect("ada")
    robot = await server.connect("robot", bot=True)
    carol = await server.connect("carol")
    for to in ("robot", robot.welcome.player_id):
        with pytest.raises(RequestFailed, match=f"bad_request: {to} is a bot.*humans only"):
            await ada.request(Seek, game="5x5", to=to, opponents="humans")
    robot_id = robot.welcome.player_id
    await robot.close()
    while robot_id in server.game_server.players:  # until the server saw it leave
        await asyncio.sleep(0.01)
    for to in ("robot", robot_id):  # its stored session
        with pytest.raises(RequestFailed, match=f"bad_request: {to} is a bot"):
            await ada.request(Seek, game="5x5", to=to, opponents="humans")
    assert (await ada.request(LobbySubscribe)).seeks == ()
    posted = await ada.request(Seek, game="5x5", to="carol", opponents="humans")  # a human
    assert posted.seek_id in {s["seek_id"] for s in (await carol.request(LobbySubscribe)).seeks}
    posted = await ada.request(Seek, game="5x5", to="robot")  # open to bots: posted
    for client in (ada, carol):
        await client.close()


async def test_private_games_are_joined_by_code_and_never_listed(server: RunningServer) -> None:
    ada = await server.connect("ada")
    bo = await server.connect("bo")
    seated = await ada.request(CreateGame, game="gomoku", opponent="human", private=True)
    await ada.request(CreateGame, game="tictactoe", opponent="human")
    listed = await bo.request(ListGames, status="open")
    assert seated.game_id not in [g["game_id"] for g in listed.games] and len(listed.games) == 1
    joined = await bo.request(JoinGame, game_id=seated.game_id)
    assert joined.seat == 1
    live = await bo.request(ListGames, status="live")
    assert seated.game_id not in [g["game_id"] for g in live.games]
    assert (await bo.request(LobbySubscribe)).games == ()


async def test_quick_pairing_pairs_two_waiting_players(server: RunningServer) -> None:
    ada = await server.connect("ada")
    bo = await server.connect("bo")
    carol = await server.connect("carol")
    await ada.request(QuickPair, game="5x5", ai_after_s=0)
    await carol.request(QuickPair, game="tictactoe", ai_after_s=0)  # another queue
    await bo.request(QuickPair, game="5x5", ai_after_s=0)
    start_a = await next_event(ada, Snapshot)
    start_b = await next_event(bo, Snapshot)
    assert start_a == start_b and start_a.game == "5x5" and start_a.status == "live"
    assert {p["name"] for p in start_a.players} == {"ada", "bo"}
    assert {ada.seats[start_a.game_id][0], bo.seats[start_a.game_id][0]} == {0, 1}
    assert carol.events.empty()  # still waiting: nobody else wants 3x3


async def test_quick_pairing_offers_the_ai_after_the_wait(server: RunningServer) -> None:
    ada = await server.connect("ada")
    posted = await ada.request(
        QuickPair, game="tictactoe", ai_after_s=1, algorithm="alphabeta", budget_ms=10
    )
    start = await next_event(ada, Snapshot, timeout=10)
    seat = ada.seats[start.game_id][0]
    assert start.players[1 - seat]["kind"] == "ai"
    assert start.players[1 - seat]["algorithm"] == "alphabeta"
    assert posted.seek_id  # the queue entry it was
    # A quick seek that is cancelled in time never turns into a game.
    bo = await server.connect("bo")
    waiting = await bo.request(QuickPair, game="uttt", ai_after_s=1)
    await bo.request(CancelSeek, seek_id=waiting.seek_id)
    await asyncio.sleep(1.5)
    assert bo.events.empty()


async def test_lobby_events_reach_only_subscribers(server: RunningServer) -> None:
    ada = await server.connect("ada")
    quiet = await server.connect("quiet")
    listener = await server.connect("listener")
    await listener.request(LobbySubscribe)
    await next_lobby(listener)
    await ada.request(Seek, game="tictactoe")
    assert isinstance(await next_lobby(listener), LobbyEvent)
    await listener.request(LobbySubscribe, subscribe=False)
    await ada.request(Seek, game="tictactoe")
    await quiet.request(LobbySubscribe, subscribe=False)
    await asyncio.sleep(0.2)
    assert quiet.lobby_events.empty() and listener.lobby_events.empty()


# --- the lobby at scale (issue 11, findings 5 and 7) ---------------------------------------


def _apply(event: Any, seeks: dict[str, Any]) -> None:
    """What a client does with the lobby's seeks on each message."""
    if isinstance(event, LobbyState):
        seeks.clear()
        seeks.update({s["seek_id"]: s for s in event.seeks})
    elif event.kind == "seek_added":
        seeks[event.seek["seek_id"]] = event.seek
    elif event.kind == "seek_removed":
        seeks.pop(event.seek_id, None)


async def test_seek_spam_reaches_each_subscriber_coalesced_per_tick(
    server: RunningServer,
) -> None:
    """Seek/cancel spam: on main every subscriber got one frame per seek and per cancel
    (200 here); now at most one tick's worth of changes per tick, and no change is lost."""
    settings = server.game_server.settings
    settings.lobby_tick_s = 0.5
    subscribers = [await server.connect(f"sub{i}") for i in range(8)]
    for subscriber in subscribers:
        await subscriber.request(LobbySubscribe)
        assert isinstance(await next_lobby(subscriber), LobbyState)  # the reply, queued too
    paged = await RawClient.connect(server.url)
    await paged.send_message(LobbySubscribe(rid=1, limit=10))
    assert isinstance(await paged.receive(), LobbyState)
    spammer = await server.connect("spammer")
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(100):
        posted = await spammer.request(Seek, game="tictactoe")
        await spammer.request(CancelSeek, seek_id=posted.seek_id)
    last = await spammer.request(Seek, game="tictactoe")
    ticks = math.ceil((loop.time() - started) / settings.lobby_tick_s) + 1
    for subscriber in subscribers:
        seeks: dict[str, Any] = {}
        frames = 0
        while last.seek_id not in seeks:
            _apply(await next_lobby(subscriber), seeks)
            frames += 1
        assert list(seeks) == [last.seek_id]  # the lobby as it is, nothing lost
        assert frames <= settings.lobby_events_per_tick * ticks
    # A subscription that names a page size gets one lobby_update a tick at most.
    updates = 0
    while True:
        update = await paged.receive()
        assert isinstance(update, LobbyUpdate)
        updates += 1
        if last.seek_id in [s["seek_id"] for s in update.seeks]:
            break
    assert updates <= ticks and update.seeks_total == 1


async def test_the_lobby_state_is_one_bounded_page_with_counts_and_more_on_request(
    server: RunningServer,
) -> None:
    """On main lobby_state listed every live game and seek (10,200 games made 2.25 MB, which
    the client then dropped); now the most relevant page, the totals, and paging."""
    settings = server.game_server.settings
    settings.lobby_page = 4
    settings.lobby_max_page = 6
    ada = await server.connect("ada")
    bo = await server.connect("bo")
    carol = await server.connect("carol")
    humans = []
    for _ in range(6):
        seated = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        await bo.request(JoinGame, game_id=seated.game_id)
        humans.append(seated.game_id)
    against_ai = []
    for _ in range(3):  # carol moves first: the AI waits
        seated = await carol.request(CreateGame, game="tictactoe", algorithm="random", seat=0)
        against_ai.append(seated.game_id)
    dan = await server.connect("dan")
    eve = await server.connect("eve")
    seeks = [(await dan.request(Seek, game="5x5")).seek_id for _ in range(5)]
    seeks += [(await eve.request(Seek, game="uttt")).seek_id for _ in range(2)]
    challenge = (await eve.request(Seek, game="tictactoe", to="carol")).seek_id

    # A client that does not page (as written before paging) gets the first page only.
    state = await carol.request(LobbySubscribe)
    assert [g["game_id"] for g in state.games] == humans[:4]  # humans first, longest running
    assert [s["seek_id"] for s in state.seeks] == [challenge, *seeks[:4]]  # longest waiting
    assert state.games_total is None  # nothing it does not know about

    # One that names a page size gets the totals and asks for more pages.
    raw = await RawClient.connect(server.url)
    pages = []
    for page in (1, 2, 3, 4):
        await raw.send_message(LobbySubscribe(rid=page, limit=4, page=page))
        reply = await raw.receive()
        assert isinstance(reply, LobbyState) and reply.rid == page and reply.page == page
        assert (reply.games_total, reply.seeks_total, reply.limit) == (9, 7, 4)
        pages.append(reply)
    assert [g["game_id"] for p in pages for g in p.games] == humans + against_ai
    assert [s["seek_id"] for p in pages for s in p.seeks] == seeks  # the challenge is not its
    assert pages[3].games == () and pages[3].seeks == ()
    # A page size over the server's maximum is served at the maximum.
    await raw.send_message(LobbySubscribe(rid=9, limit=200))
    assert (await raw.receive()).limit == 6


async def test_a_declined_challenge_leaves_the_lobby_and_its_poster_is_told(
    server: RunningServer,
) -> None:
    """As on Lichess: the challenger learns "bo declined your challenge"; the lobby's
    subscribers see the seek removed; the decliner gets ok."""
    ada = await server.connect("ada")
    bo = await server.connect("bo")
    carol = await server.connect("carol")
    await carol.request(LobbySubscribe)
    await next_lobby(carol)
    await ada.request(LobbySubscribe)
    await next_lobby(ada)
    challenge = await ada.request(Seek, game="5x5", to="bo")
    public = await carol.request(Seek, game="tictactoe")
    assert isinstance(await bo.request(DeclineSeek, seek_id=challenge.seek_id), Ok)
    while True:
        told = await next_lobby(ada)
        if isinstance(told, SeekDeclined):
            break
    assert told.seek_id == challenge.seek_id
    assert (told.player["name"], told.player["kind"]) == ("bo", "human")
    assert told.player["player_id"] == bo.player_id
    assert challenge.seek_id not in {s["seek_id"] for s in (await bo.request(LobbySubscribe)).seeks}
    with pytest.raises(RequestFailed, match="unknown_seek"):  # once only
        await bo.request(DeclineSeek, seek_id=challenge.seek_id)
    with pytest.raises(RequestFailed, match="unknown_seek"):
        await ada.request(AcceptSeek, seek_id=challenge.seek_id)
    # Hostile or mistaken: an unknown id, someone else's challenge (not even visible), one's
    # own challenge, an open seek; each a clear error with the request's id, nothing removed.
    other = await ada.request(Seek, game="5x5", to="bo")
    for who, seek_id, error in (
        (bo, "s-nosuchseek", "unknown_seek: no challenge 's-nosuchseek'"),
        (carol, other.seek_id, "unknown_seek"),
        (ada, other.seek_id, "not_allowed: that is your own challenge: cancel_seek"),
        (bo, public.seek_id, "not_allowed: only a challenge to you can be declined"),
    ):
        with pytest.raises(RequestFailed, match=error) as refused:
            await who.request(DeclineSeek, seek_id=seek_id)
        assert refused.value.error.rid is not None
    seeks = {s["seek_id"] for s in (await bo.request(LobbySubscribe)).seeks}
    assert {other.seek_id, public.seek_id} <= seeks
    raw = await RawClient.connect(server.url)
    await raw.send(msgpack.packb({"type": "decline_seek", "rid": 9, "seek_id": 7}))
    error = await raw.receive()
    assert (error.code, error.rid) == ("bad_field", 9)
    for client in (ada, bo, carol):
        await client.close()

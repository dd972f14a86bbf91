"""Players, names and sessions over the wire (issue 11: finding 6, the per-address and
session parts of finding 5, "every hello stores a permanent session row" of finding 11).

Real server on port 0, real websocket clients, real SQLite. Every connection comes from
127.0.0.1, so the per-address caps are the loopback's."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import websockets

from client.connection import RequestFailed
from protocol import (
    PROTOCOL_VERSION,
    Abort,
    AcceptSeek,
    CreateGame,
    Error,
    Hello,
    JoinGame,
    LobbyState,
    LobbySubscribe,
    Ping,
    QuickPair,
    Rematch,
    Resign,
    Seek,
    Snapshot,
    Welcome,
)
from server.app import GameServer, running
from server.pool import EnginePool
from server.session import token_hash
from server.settings import ServerSettings
from server.store import MIGRATIONS, SQLiteStore
from tests.server.conftest import RawClient, RunningServer, human_game, next_event
from tests.server.test_names import HOSTILE


@pytest.fixture
def settings(request: pytest.FixtureRequest) -> ServerSettings:
    """The server's settings: the defaults, or a test's own through indirect parametrize."""
    return ServerSettings(**getattr(request, "param", {}))


async def hello(server: RunningServer, name: str, rid: int = 7, **fields: Any) -> Any:
    """Send one hello on a fresh websocket; the reply (welcome or error)."""
    raw = await RawClient.connect(server.url, hello=False)
    try:
        await raw.send_message(Hello(rid=rid, version=PROTOCOL_VERSION, name=name, **fields))
        return await raw.receive()
    finally:
        await raw.close()


async def eventually(condition: Callable[[], Any], timeout: float = 10.0) -> None:
    """Poll until ``condition()`` is true (never a timing assertion: a generous bound)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


# --- finding 6: hostile names ----------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [*HOSTILE.values(), "mcts 200ms", "alice [AI]", "alphabeta", "admin", "\u0430dmin", "x"],
    ids=[*HOSTILE.keys(), "ai_label", "ai_tag", "algorithm", "admin", "cyrillic_admin", "short"],
)
async def test_a_hostile_name_is_refused_with_bad_name_and_the_rid(
    server: RunningServer, name: str
) -> None:
    reply = await hello(server, name)
    assert isinstance(reply, Error), reply
    assert reply.code == "bad_name" and reply.rid == 7
    assert "\x1b" not in reply.message and "\n" not in reply.message
    assert server.query("SELECT count(*) FROM sessions") == [(0,)]


async def test_a_name_is_kept_normalised(server: RunningServer) -> None:
    reply = await hello(server, "\uff41\uff44\uff41  ")  # fullwidth "ada", trailing spaces
    assert isinstance(reply, Welcome) and reply.name == "ada"


@pytest.mark.parametrize("look_alike", ["carol", "Carol", "c\u0430rol", "CAR.OL", "\uff43arol"])
async def test_a_name_or_look_alike_of_an_online_player_is_taken(
    server: RunningServer, look_alike: str
) -> None:
    carol = await server.connect("carol")
    reply = await hello(server, look_alike)
    assert isinstance(reply, Error) and reply.code == "name_taken" and reply.rid == 7
    await carol.close()


async def test_a_name_stays_bound_to_its_session_while_its_player_is_offline(
    server: RunningServer,
) -> None:
    """The finding: a challenge `to: "carol"` went to another player calling themselves
    carol while the real carol was offline."""
    carol = await server.connect("carol")
    session, carol_id = carol.session, carol.welcome.player_id
    await carol.close()
    with pytest.raises(RequestFailed, match="name_taken"):
        await server.connect("carol")  # the impostor
    mallory = await server.connect("mallory")
    bob = await server.connect("bob")
    posted = await bob.request(Seek, game="tictactoe", to="carol")  # carol is offline
    lobby = await mallory.request(LobbySubscribe)
    assert posted.seek_id not in {s["seek_id"] for s in lobby.seeks}
    back = await server.connect("whatever", session=session)  # the real carol returns
    assert back.welcome.player_id == carol_id and back.welcome.name == "carol"
    lobby = await back.request(LobbySubscribe)
    assert isinstance(lobby, LobbyState)
    assert [s["seek_id"] for s in lobby.seeks if s.get("to") == carol_id] == [posted.seek_id]
    for client in (mallory, bob, back):
        await client.close()


async def test_a_challenge_to_an_unknown_name_is_refused(server: RunningServer) -> None:
    bob = await server.connect("bob")
    with pytest.raises(RequestFailed, match="bad_request.*no player"):
        await bob.request(Seek, game="tictactoe", to="nobody")
    await bob.close()


async def test_an_anonymous_player_gets_a_unique_guest_name(server: RunningServer) -> None:
    first = await server.connect("anonymous")
    second = await server.connect("")
    names = {first.welcome.name, second.welcome.name}
    assert len(names) == 2 and all(n.startswith("guest-") for n in names)
    game = await first.request(CreateGame, game="tictactoe", opponent="human")
    snapshot = await next_event(first, Snapshot)
    assert snapshot.game_id == game.game_id
    assert snapshot.players[game.seat]["name"] == first.welcome.name
    for client in (first, second):
        await client.close()


# --- finding 5 (per address) and finding 11 (session rows) ----------------------------------


@pytest.mark.parametrize(
    "settings",
    [dict(new_sessions_per_ip_per_minute=0.01, new_sessions_burst_per_ip=3)],
    indirect=True,
)
async def test_new_sessions_are_capped_per_address(server: RunningServer) -> None:
    clients = [await server.connect(f"p{i}x") for i in range(3)]
    reply = await hello(server, "late")
    assert isinstance(reply, Error) and reply.code == "too_many" and reply.rid == 7
    # A returning session is not a new one.
    again = await server.connect("p0x", session=clients[0].session)
    assert again.welcome.player_id == clients[0].welcome.player_id
    for client in (*clients, again):
        await client.close()


@pytest.mark.parametrize(
    "settings",
    [dict(failed_resumes_per_ip_per_minute=0.01, failed_resumes_burst_per_ip=3)],
    indirect=True,
)
async def test_hellos_with_unknown_sessions_are_capped_per_address(
    server: RunningServer,
) -> None:
    """One address could try session tokens as fast as its connection's rate limit let it
    (200 wrong hellos in 0.2 s on one connection, each a read of the database), for ever.
    Now past its allowance of unknown sessions it is refused (too_many) any hello with a
    session, a right one included, before the session is looked up: guessing learns
    nothing. A hello without a session is not a resume, and is still served."""
    player = await server.connect("guessed")
    for rid in range(3):
        reply = await hello(server, "x", rid=rid, session=f"wrong-guess-{rid:020d}")
        assert isinstance(reply, Error) and reply.code == "bad_token", reply
    reply = await hello(server, "guessed", rid=9, session=player.session)
    assert isinstance(reply, Error) and reply.code == "too_many" and reply.rid == 9, reply
    assert "unknown session" in reply.message
    fresh = await hello(server, "someone")
    assert isinstance(fresh, Welcome), fresh
    await player.close()


@pytest.mark.parametrize(
    "settings", [dict(max_open_games_per_ip=5, max_open_games_per_player=3)], indirect=True
)
async def test_unfinished_games_are_capped_per_address_as_well_as_per_player(
    server: RunningServer,
) -> None:
    ada, bo = await server.connect("ada"), await server.connect("bo")
    for _ in range(3):
        await ada.request(CreateGame, game="tictactoe", opponent="human")
    with pytest.raises(RequestFailed, match="too_many.*per player"):
        await ada.request(CreateGame, game="tictactoe", opponent="human")
    for _ in range(2):
        await bo.request(CreateGame, game="tictactoe", opponent="human")
    with pytest.raises(RequestFailed, match="too_many.*per address"):
        await bo.request(CreateGame, game="tictactoe", opponent="human")
    for client in (ada, bo):
        await client.close()


@pytest.mark.parametrize(
    "settings", [dict(max_open_games_per_ip=100, max_open_games_per_player=3)], indirect=True
)
async def test_seeks_do_not_carry_a_player_past_its_cap(server: RunningServer) -> None:
    """A seek is a game to be: a player at its cap posts none, and one posted before it
    reached the cap is not taken (it stays for later). Seeks passed the cap before: 30
    connections of 5 seeks each took one player from 20 unfinished games to 100."""
    ada, bo = await server.connect("ada"), await server.connect("bo")
    for _ in range(2):
        await ada.request(CreateGame, game="tictactoe", opponent="human")
    first = await ada.request(Seek, game="tictactoe")
    second = await ada.request(Seek, game="tictactoe")
    await bo.request(AcceptSeek, seek_id=first.seek_id)  # ada's third game
    with pytest.raises(RequestFailed, match=r"too_many.*3 unfinished games per player \(the seek"):
        await bo.request(AcceptSeek, seek_id=second.seek_id)
    with pytest.raises(RequestFailed, match="too_many.*3 unfinished games per player"):
        await ada.request(Seek, game="tictactoe")
    assert server.query("SELECT count(*) FROM games WHERE status IN ('open', 'live')") == [(3,)]
    for client in (ada, bo):
        await client.close()


@pytest.mark.parametrize(
    "settings", [dict(max_open_games_per_ip=100, max_open_games_per_player=3)], indirect=True
)
async def test_rematches_and_quick_pairing_do_not_carry_a_player_past_its_cap(
    server: RunningServer,
) -> None:
    """A probe's finding: the cap was checked when a quick-pairing entry was posted, never
    when it was paired (25 unfinished games of 20), nor for a rematch's two players."""
    ada, bo, a, b = await human_game(server, game="tictactoe")
    await ada.request(Resign, game_id=a.game_id, token=a.token)
    for _ in range(3):  # bo at its cap
        await bo.request(CreateGame, game="tictactoe", opponent="human")
    with pytest.raises(RequestFailed, match=r"too_many.*\(your opponent has as many\)"):
        await ada.request(Rematch, game_id=a.game_id, token=a.token)
    with pytest.raises(RequestFailed, match="too_many.*3 unfinished games per player$"):
        await bo.request(Rematch, game_id=b.game_id, token=b.token)
    # Quick pairing: carol queues, then reaches her cap; dan's entry does not pair with hers.
    carol, dan = await server.connect("carol"), await server.connect("dan")
    await carol.request(QuickPair, game="5x5", ai_after_s=0)
    for _ in range(3):
        await carol.request(CreateGame, game="tictactoe", opponent="human")
    await dan.request(QuickPair, game="5x5", ai_after_s=0)
    told = await asyncio.wait_for(carol.errors.get(), 10)
    assert told.code == "too_many", told
    assert not dan.seats and len(carol.seats) == 3
    for client in (ada, bo, carol, dan):
        await client.close()


async def _answers_at_once(requests: list[Any]) -> tuple[int, set[str]]:
    """Requests sent at once (each a coroutine): how many succeeded, and the refusals'
    messages (every other answer fails)."""
    answers = await asyncio.gather(*requests, return_exceptions=True)
    refused = [a for a in answers if isinstance(a, RequestFailed)]
    assert all(a.code == "too_many" for a in refused), answers
    assert not any(isinstance(a, BaseException) and a not in refused for a in answers), answers
    return len(answers) - len(refused), {a.message for a in refused}


@pytest.mark.parametrize(
    "settings", [dict(max_open_games_per_ip=100, max_open_games_per_player=3)], indirect=True
)
async def test_creates_sent_at_once_through_many_connections_stop_at_the_cap(
    server: RunningServer,
) -> None:
    """A cluster's caps overshot under requests at once (test_cluster.py); on one node a
    create's check and its game's count are one step of the event loop: 8 connections of
    one session, 2 creates each at once, hold the cap."""
    ada = await server.connect("ada")
    clients = [ada] + [await server.connect("ada", session=ada.session) for _ in range(7)]
    creates = [
        c.request(CreateGame, game="tictactoe", opponent="human") for c in clients for _ in (0, 1)
    ]
    made, refused = await _answers_at_once(creates)
    assert made == 3 and refused == {"limit: at most 3 unfinished games per player"}
    assert server.query("SELECT count(*) FROM games WHERE status IN ('open', 'live')") == [(3,)]
    for client in clients:
        await client.close()


@pytest.mark.parametrize(
    "settings", [dict(max_open_games_per_ip=100, max_open_games_per_player=3)], indirect=True
)
async def test_rematches_accepted_at_once_stop_at_the_cap(server: RunningServer) -> None:
    """On one node too, a rematch's check came before the store's write of its start, and
    the new game was counted only after: ada, accepting 6 rematches at once through 6
    connections, held 6 unfinished games of 3."""
    ada = await server.connect("ada")
    rivals, seats = [], []
    for i in range(6):
        rival = await server.connect(f"rival{i}")
        mine = await ada.request(CreateGame, game="tictactoe", opponent="human")
        theirs = await rival.request(JoinGame, game_id=mine.game_id)
        await ada.request(Resign, game_id=mine.game_id, token=mine.token)
        await rival.request(Rematch, game_id=theirs.game_id, token=theirs.token)
        rivals.append(rival)
        seats.append(mine)
    clients = [await server.connect("ada", session=ada.session) for _ in seats]
    accepts = [
        client.request(Rematch, game_id=seat.game_id, token=seat.token, answer="accept")
        for client, seat in zip(clients, seats, strict=True)
    ]
    made, refused = await _answers_at_once(accepts)
    assert made == 3 and refused == {"limit: at most 3 unfinished games per player"}
    for client in clients:
        await client.request(Ping)  # served after its rematch's start
    assert server.query("SELECT count(*) FROM games WHERE status IN ('open', 'live')") == [(3,)]
    for client in [ada, *clients, *rivals]:
        await client.close()


async def test_the_rematch_of_a_private_game_is_private(server: RunningServer) -> None:
    """A probe's finding: it was listed live to everyone."""
    ada, bo, a, b = await human_game(server, game="tictactoe", private=True)
    await ada.request(Resign, game_id=a.game_id, token=a.token)
    await ada.request(Rematch, game_id=a.game_id, token=a.token)
    await bo.request(Rematch, game_id=b.game_id, token=b.token, answer="accept")
    # (Its ok comes once the new game is stored.)
    rows = server.query("SELECT private FROM games WHERE rematch_of = ?", a.game_id)
    assert rows == [(1,)]
    for client in (ada, bo):
        await client.close()


async def test_a_private_games_id_is_too_long_to_guess(server: RunningServer) -> None:
    """A private game's id is its invite, and the only key to its open seat and its moves:
    it was eight characters (40 bits), as a listed game's, and one address sending join
    after join at its rate limit (20,000 a second over its 100 connections) found one of
    100 private games waiting in about a week, a hundred addresses in hours. Now it is
    16 characters (80 bits), and so is its rematch's; a listed game's stays 8."""
    ada, bo, a, b = await human_game(server, game="tictactoe", private=True)
    assert len(a.game_id) == 16 and b.game_id == a.game_id  # (bo joined by it)
    listed = await ada.request(CreateGame, game="tictactoe", opponent="human")
    assert len(listed.game_id) == 8
    await ada.request(Resign, game_id=a.game_id, token=a.token)
    await ada.request(Rematch, game_id=a.game_id, token=a.token)
    await bo.request(Rematch, game_id=b.game_id, token=b.token, answer="accept")
    rows = server.query("SELECT id FROM games WHERE rematch_of = ?", a.game_id)
    assert len(rows) == 1 and len(rows[0][0]) == 16
    for client in (ada, bo):
        await client.close()


@pytest.mark.parametrize(
    "settings", [dict(max_open_games_per_ip=3, max_open_games_per_player=20)], indirect=True
)
async def test_the_address_cap_counts_a_shared_game_once_and_no_ended_game(
    server: RunningServer,
) -> None:
    ada, bo = await server.connect("ada"), await server.connect("bo")
    shared = await ada.request(CreateGame, game="tictactoe", opponent="human")
    await bo.request(JoinGame, game_id=shared.game_id)  # both seats: one game
    await ada.request(CreateGame, game="tictactoe", opponent="human")
    third = await bo.request(CreateGame, game="tictactoe", opponent="human")
    with pytest.raises(RequestFailed, match="too_many.*per address"):
        await ada.request(CreateGame, game="tictactoe", opponent="human")
    await bo.request(Abort, game_id=third.game_id, token=third.token)  # ended: not counted
    await ada.request(CreateGame, game="tictactoe", opponent="human")
    for client in (ada, bo):
        await client.close()


async def _hello_from(source: str, server: RunningServer, **fields: Any) -> tuple[RawClient, Any]:
    """A connection from ``source`` (a loopback address, 127.0.0.x) and its hello's reply."""
    websocket = await websockets.connect(server.url, local_addr=(source, 0), compression=None)
    client = RawClient(websocket)
    await client.send_message(Hello(rid=1, version=PROTOCOL_VERSION, **fields))
    return client, await client.receive()


async def _create(client: RawClient, rid: int) -> Any:
    await client.send_message(CreateGame(rid=rid, game="tictactoe", opponent="human"))
    answers, _ = await client.answers({rid})
    return answers[rid]


@pytest.mark.parametrize("settings", [dict(max_open_games_per_ip=2)], indirect=True)
async def test_a_player_is_listed_at_the_address_of_its_latest_hello_only(
    server: RunningServer,
) -> None:
    """A soak probe's finding: a player stayed listed at every address it had said hello
    from while the server knew it (online, or seated): one session's hellos from 200 new
    addresses, 201 entries; and its games counted against each, refusing a newcomer at an
    address it had left (at most 2 unfinished games per address). A player the server
    forgets leaves its address's list then, not at the next session sweep."""
    listed = server.game_server._address_players
    ada, welcome = await _hello_from("127.0.0.2", server, name="ada")
    for rid in (2, 3):
        assert not isinstance(await _create(ada, rid), Error)
    for last in range(3, 8):  # ada moves on, from one address to the next
        moved, _ = await _hello_from(f"127.0.0.{last}", server, session=welcome.session)
        await ada.close()
        ada = moved
    assert listed == {"127.0.0.7": {welcome.player_id}}
    bo, bo_welcome = await _hello_from("127.0.0.2", server, name="bo")
    assert not isinstance(await _create(bo, 2), Error)  # ada's games count where she is
    cy, cy_welcome = await _hello_from("127.0.0.8", server, name="cy")
    await cy.close()  # no seat: the server forgets cy
    await eventually(lambda: cy_welcome.player_id not in server.game_server.players)
    assert listed == {"127.0.0.7": {welcome.player_id}, "127.0.0.2": {bo_welcome.player_id}}
    for client in (ada, bo):
        await client.close()


@pytest.mark.parametrize(
    "settings",
    [dict(session_idle_s=0.2, unplayed_session_idle_s=0.2, session_sweep_s=0.05)],
    indirect=True,
)
async def test_an_unused_session_expires_and_frees_its_name(server: RunningServer) -> None:
    carol = await server.connect("carol")
    session = carol.session
    await carol.close()
    await eventually(lambda: server.query("SELECT count(*) FROM sessions") == [(0,)])
    reply = await hello(server, "x", session=session)
    assert isinstance(reply, Error) and reply.code == "bad_token"
    newcomer = await server.connect("carol")
    assert newcomer.welcome.session != session
    await newcomer.close()


@pytest.mark.parametrize(
    "settings",
    [dict(session_idle_s=0.2, unplayed_session_idle_s=0.2, session_sweep_s=0.05)],
    indirect=True,
)
async def test_a_connected_session_does_not_expire(server: RunningServer) -> None:
    carol = await server.connect("carol")
    await asyncio.sleep(0.5)  # several sweeps and idle periods pass while connected
    assert server.query("SELECT name FROM sessions") == [("carol",)]
    with pytest.raises(RequestFailed, match="name_taken"):
        await server.connect("carol")
    await carol.close()


# --- finding 5: abandoned games with no moves -------------------------------------------------


@pytest.mark.parametrize("settings", [dict(abandon_unstarted_s=0.2)], indirect=True)
async def test_a_live_game_without_moves_is_ended_soon_after_its_player_leaves(
    server: RunningServer,
) -> None:
    ada = await server.connect("ada")
    seated = await ada.request(
        CreateGame, game="tictactoe", opponent="ai", seat=0
    )  # ada moves first
    watcher = await server.connect("watcher")
    await watcher.request(LobbySubscribe)
    await ada.close()
    await eventually(
        lambda: (
            server.query("SELECT status FROM games WHERE id = ?", seated.game_id) == [("aborted",)]
        )
    )
    lobby = await watcher.request(LobbySubscribe)
    assert seated.game_id not in {g["game_id"] for g in lobby.games}
    await watcher.close()


@pytest.mark.parametrize("settings", [dict(abandon_unstarted_s=0.2, grace_s=600)], indirect=True)
async def test_an_open_game_is_withdrawn_soon_after_its_creator_leaves(
    server: RunningServer,
) -> None:
    ada = await server.connect("ada")
    seated = await ada.request(CreateGame, game="tictactoe", opponent="human")
    await ada.close()
    await eventually(
        lambda: (
            server.query("SELECT status FROM games WHERE id = ?", seated.game_id) == [("aborted",)]
        )
    )


async def test_sessions_from_before_names_were_bound_get_theirs_at_their_return(
    tmp_path: Path, pool: EnginePool
) -> None:
    """A database of schema 2 (every hello stored a session, names unchecked): at its next
    hello a session keeps a valid free name, bound from then on; a hostile name becomes
    a guest name."""
    db = sqlite3.connect(tmp_path / "games.db")
    for version, script in enumerate(MIGRATIONS[:2], start=1):
        db.executescript(f"{script}\nPRAGMA user_version = {version};")
    sessions = {"carol": "carol", "evil": "\x1b]0;owned\x07mcts 200ms"}
    for token, name in sessions.items():
        db.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, 0, 0.0)", (token_hash(token), f"p-{token}", name)
        )
    db.commit()
    db.close()
    store = SQLiteStore(tmp_path / "games.db")
    await store.open()
    game_server = GameServer(store, pool)
    try:
        async with running(game_server) as ws:
            url = f"ws://127.0.0.1:{next(iter(ws.sockets)).getsockname()[1]}"
            server = RunningServer(url, game_server, tmp_path / "games.db")
            carol = await server.connect("x", session="carol")
            evil = await server.connect("x", session="evil")
            assert carol.welcome.name == "carol"
            assert evil.welcome.name.startswith("guest-")
            with pytest.raises(RequestFailed, match="name_taken"):
                await server.connect("Carol")
            for client in (carol, evil):
                await client.close()
    finally:
        await store.close()

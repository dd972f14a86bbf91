"""Amplification (issue 11, findings 7 and 11): a cheap request must not buy expensive work.

Expensive requests take more tokens than a move and a finished game's record is encoded
once; presence and offer events are capped per game, so reconnecting or offering in a loop
neither floods the opponent nor grows the stored record; `resume` is capped like `watch`."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

from client.connection import RequestFailed, ServerConnection
from protocol import (
    CreateGame,
    Draw,
    Error,
    GetGame,
    ListGames,
    LobbySubscribe,
    Move,
    Ping,
    Pong,
    Presence,
    Record,
    Rematch,
    Resign,
    Resume,
    Resumed,
    Watch,
)
from server.limits import TokenBucket
from tests.server.conftest import RawClient, RunningServer, human_game, next_event


async def _finished_game(server: RunningServer) -> str:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    for client, seated, action in ((ada, a, 4), (bo, b, 0), (ada, a, 8)):
        await client.request(Move, game_id=a.game_id, token=seated.token, action=action)
    await bo.request(Resign, game_id=a.game_id, token=b.token)
    return str(a.game_id)


async def test_a_get_costs_more_than_a_move_and_a_finished_record_is_encoded_once(
    server: RunningServer,
) -> None:
    settings = server.game_server.settings
    game_id = await _finished_game(server)
    settings.rate_per_s, settings.burst = 0.5, 60  # for connections opened from now on
    settings.cost_get, settings.cost_per_kib = 25, 0.0
    reader = await RawClient.connect(server.url)  # hello took 1 of its 60 tokens
    records = server.game_server.records
    first = await _get(reader, 1, game_id)
    assert isinstance(first, Record) and first.game["result"] == "1-0"
    assert (records.hits, records.misses) == (0, 1)
    second = await _get(reader, 2, game_id)  # 34 tokens left: one more get
    assert second.game == first.game and (records.hits, records.misses) == (1, 1)
    refused = await _get(reader, 3, game_id)  # 9 left: a get costs 25, a move 1
    assert isinstance(refused, Error) and refused.code == "rate_limited" and refused.rid == 3
    assert "get costs 25" in refused.message
    await reader.send_message(Ping(rid=4))
    assert await reader.receive() == Pong(rid=4)  # cheap requests still pass
    # The reply's size is charged too: a record of over 0.1 KiB at 1,000 tokens a KiB
    # costs more than the 59 tokens left.
    settings.cost_get, settings.cost_per_kib = 1, 1000.0
    spender = await RawClient.connect(server.url)
    assert isinstance(await _get(spender, 1, game_id), Record)  # served, then owed
    await spender.send_message(Ping(rid=2))
    assert (await spender.receive()).code == "rate_limited"  # type: ignore[attr-defined]


async def _get(client: RawClient, rid: int, game_id: str) -> Any:
    await client.send_message(GetGame(rid=rid, game_id=game_id))
    return await client.receive()


async def test_list_and_lobby_cost_more_than_a_move(server: RunningServer) -> None:
    settings = server.game_server.settings
    settings.rate_per_s, settings.burst = 0.5, 40
    settings.cost_list, settings.cost_lobby, settings.cost_per_kib = 15, 15, 0.0
    client = await server.connect("ada")  # 39 tokens after hello
    await client.request(LobbySubscribe)  # 24
    await client.request(ListGames, status="finished")  # 9
    with pytest.raises(RequestFailed, match="rate_limited.*list costs 15"):
        await client.request(ListGames)
    assert isinstance(await client.request(Ping), Pong)


async def test_a_reconnect_storm_sends_and_stores_a_bounded_number_of_presence_events(
    server: RunningServer,
) -> None:
    """On main each reconnection was two presence events to the opponent and two stored
    rows, per game (finding 7: 2,897 frames/s and 28,966 rows in 10 s)."""
    settings = server.game_server.settings
    settings.presence_burst, settings.presence_refill_s = 4, 60.0
    ada, bo, a, b = await human_game(server, game="gomoku")
    session = ada.session
    loop = asyncio.get_running_loop()
    started = loop.time()
    await ada.close()
    for _ in range(30):
        again = await ServerConnection.connect(server.url, name="ada", session=session)
        await again.close()
    back = await ServerConnection.connect(server.url, name="ada", session=session)
    await back.request(Move, game_id=a.game_id, token=a.token, action=112)
    elapsed = loop.time() - started
    seen = []
    while True:
        event = await bo.next_event(timeout=10)
        if isinstance(event, Presence):
            seen.append(event)
        elif getattr(event, "action", None) == 112:
            break
    bound = 2 * (settings.presence_burst + math.ceil(elapsed / settings.presence_refill_s))
    assert len(seen) <= bound
    assert not seen or seen[-1].online  # the opponent is not left believing ada is away
    stored = server.query(
        "SELECT count(*) FROM events WHERE game_id = ? AND kind = 'presence'", a.game_id
    )[0][0]
    assert stored == len(seen)


async def test_an_absence_over_the_budget_is_announced_when_the_budget_refills(
    server: RunningServer,
) -> None:
    settings = server.game_server.settings
    settings.presence_burst, settings.presence_refill_s = 1, 0.5
    ada, bo, a, b = await human_game(server, game="gomoku")
    session = ada.session
    await ada.close()
    assert not (await next_event(bo, Presence)).online  # the budget's one absence
    ada = await ServerConnection.connect(server.url, name="ada", session=session)
    assert (await next_event(bo, Presence)).online  # coming back is always announced
    before = time.time()
    await ada.close()
    away = await next_event(bo, Presence)  # once the budget has refilled
    assert not away.online and away.claim_at is not None
    assert before <= away.claim_at - settings.grace_s <= time.time()


async def test_draw_offer_spam_stores_nothing_until_a_move_is_played(
    server: RunningServer,
) -> None:
    """On main offer/decline in a loop grew the stored record by 14 KB/s (finding 7);
    as on Lichess, a seat offers again only after moves have been played."""
    ada, bo, a, b = await human_game(server, game="gomoku")
    gid = a.game_id
    await ada.request(Draw, game_id=gid, token=a.token)
    await bo.request(Draw, game_id=gid, token=b.token, answer="decline")
    for _ in range(20):
        with pytest.raises(RequestFailed, match="not_allowed.*draw.*move"):
            await ada.request(Draw, game_id=gid, token=a.token)
    offers = "SELECT count(*) FROM events WHERE game_id = ? AND kind = 'offer'"
    assert server.query(offers, gid)[0][0] == 2
    await bo.request(Draw, game_id=gid, token=b.token)  # bo has not offered yet
    await ada.request(Move, game_id=gid, token=a.token, action=112)  # declines bo's offer
    await ada.request(Draw, game_id=gid, token=a.token)  # a move later: allowed again
    assert server.query(offers, gid)[0][0] == 4


async def test_rematch_offers_are_capped_per_game(server: RunningServer) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    gid = a.game_id
    await ada.request(Resign, game_id=gid, token=a.token)
    cap = server.game_server.settings.max_rematch_offers
    for _ in range(cap):
        await ada.request(Rematch, game_id=gid, token=a.token)
        await bo.request(Rematch, game_id=gid, token=b.token, answer="decline")
    with pytest.raises(RequestFailed, match=f"not_allowed.*{cap} rematch"):
        await ada.request(Rematch, game_id=gid, token=a.token)


async def test_resume_is_capped_like_watch(server: RunningServer) -> None:
    """On main `resume` followed any number of games (finding 11); a game the player holds
    no seat in counts as watched."""
    server.game_server.settings.max_watched_per_connection = 2
    ada = await server.connect("ada")
    games = [
        (await ada.request(CreateGame, game="tictactoe", opponent="human")).game_id
        for _ in range(3)
    ]
    carol = await server.connect("carol")
    await carol.request(Resume, game_id=games[0])
    await carol.request(Watch, game_id=games[1])
    with pytest.raises(RequestFailed, match="too_many.*2 games watched"):
        await carol.request(Resume, game_id=games[2])
    await carol.request(Resume, game_id=games[0])  # already followed: no new slot
    for game_id in games:  # the seats a player holds are not capped by this
        await ada.request(Resume, game_id=game_id)


@pytest.mark.parametrize("request_type", [Resume, Watch])
async def test_resumes_of_a_long_game_in_memory_are_charged_by_their_size(
    server: RunningServer, request_type: type[Resume] | type[Watch]
) -> None:
    """A `resume` (or `watch` with `since`) of a game in memory cost one token whatever its
    reply: 150 resumes of a 380-move game sent 4.4 MB in 0.9 s, none refused. Each KiB of
    the reply is charged, as a `get`'s is."""
    ada, bo, a, b = await human_game(server, game="mnk", params={"m": 10, "n": 10, "k": 10})
    for ply in range(60):  # cells 0..59 in order: no row, column or diagonal of 10
        client, seated = (ada, a) if ply % 2 == 0 else (bo, b)
        await client.request(Move, game_id=a.game_id, token=seated.token, action=ply)
    settings = server.game_server.settings
    settings.rate_per_s, settings.burst = 0.5, 60  # for connections opened from now on
    loop = asyncio.get_running_loop()
    started = loop.time()
    eve = await RawClient.connect(server.url)
    await eve.send_message(request_type(rid=1, game_id=a.game_id, since=1))
    answers, reply_bytes = await eve.answers({1})
    assert isinstance(answers[1], Resumed)
    reply_kib = reply_bytes / 1024
    assert reply_kib > 4  # 60 moves' events
    rids = set(range(2, 32))
    for rid in sorted(rids):
        await eve.send_message(request_type(rid=rid, game_id=a.game_id, since=1))
    answers, _ = await eve.answers(rids)
    elapsed = loop.time() - started
    served = 1 + sum(isinstance(m, Resumed) for m in answers.values())
    refused = [m for m in answers.values() if isinstance(m, Error)]
    assert refused and {m.code for m in refused} == {"rate_limited"}
    # What the bucket held (a burst, and its refill), and the last reply's debt.
    assert served * reply_kib <= settings.burst + settings.rate_per_s * elapsed + reply_kib


def test_the_token_bucket_charges_costs_and_bounds_a_debt() -> None:
    bucket = TokenBucket(rate=10.0, burst=50, tokens=50.0, updated=0.0)
    assert bucket.charge(0.0, 30) and bucket.tokens == 20
    assert not bucket.charge(0.0, 30) and bucket.tokens == 20  # refused: nothing taken
    assert bucket.charge(0.0, 500, owe=True) and bucket.tokens == -50  # a burst below at most
    assert not bucket.take(1.0)  # 10 tokens later: still 40 in debt
    assert bucket.next_token_at() == pytest.approx(5.1)  # 41 tokens at 10/s
    assert bucket.take(5.1)


def test_a_client_steadily_over_the_rate_becomes_abusive() -> None:
    """Twice the rate for ever: every other message passes. Refusals counted in a row never
    reached a burst's worth, so such a client was answered rate_limited every other
    message for as long as it liked; forgiven at a tenth of the rate, they add up."""
    bucket = TokenBucket(rate=10.0, burst=20, tokens=20.0, updated=0.0)
    now, sent = 0.0, 0
    while not bucket.abusive and sent < 10_000:
        bucket.take(now)
        sent += 1
        now += 1 / 20  # 20 a second
    assert bucket.abusive and sent < 200, sent
    # Just under the rate, refusals (if any) are all forgiven: never abusive.
    polite = TokenBucket(rate=10.0, burst=20, tokens=20.0, updated=0.0)
    for n in range(10_000):
        polite.take(n / 9.5)
    assert not polite.abusive and polite.refused == 0

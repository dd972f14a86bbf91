"""A game request sent again (PROTOCOL.md, "A request sent again"): resign, abort, draw,
claim and rematch carry the ``seq`` their client had seen when it first sent them; sent
again with it (the reply lost with a connection), one that was applied is answered as it
was the first time, the game unchanged, from memory or, once the game left it, from the
store. Real servers, real clients: the first copy's connection dropped under it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from client.connection import RequestFailed, ServerConnection
from protocol import (
    Abort,
    Claim,
    Draw,
    Ended,
    Message,
    Move,
    Moved,
    Offer,
    Ok,
    Rematch,
    Resign,
    encode,
)
from server.pool import EnginePool
from server.session import made_already
from server.settings import ServerSettings
from tests.server.conftest import (
    RunningServer,
    human_game,
    next_event,
    next_event_where,
    serving,
)


@pytest.fixture
def settings() -> ServerSettings:
    # A finished game leaves memory at once (its requests answered from the store after);
    # a seat left is claimable after half a second.
    return ServerSettings(keep_finished_s=0.3, grace_s=0.5)


async def _move(client: ServerConnection, game_id: str, action: int) -> None:
    await client.request(Move, game_id=game_id, token=client.token_for(game_id), action=action)


async def _sent_and_dropped(client: ServerConnection, request: Message) -> None:
    """Send ``request`` and close the connection without reading its reply."""
    assert client.websocket is not None
    await client.websocket.send(encode(request))
    await client.close()


async def _back(server: RunningServer, lost: ServerConnection, name: str) -> ServerConnection:
    """``name`` reconnected with the session of its lost connection."""
    return await server.connect(name, session=lost.session)


def _events(server: RunningServer, game_id: str) -> list[tuple[int, str]]:
    rows = server.query("SELECT seq, kind FROM events WHERE game_id = ? ORDER BY seq", game_id)
    return [(int(seq), str(kind)) for seq, kind in rows]


async def test_a_resign_sent_again_after_a_drop_is_answered_with_its_end(
    server: RunningServer,
) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    gid = a.game_id
    await _move(ada, gid, 4)
    await _move(bo, gid, 0)  # (before both sides moved a resign aborts)
    await next_event_where(ada, Moved, lambda moved: moved.seat == 1)
    seen = ada.seen_seq[gid]
    await _sent_and_dropped(ada, Resign(rid=90, game_id=gid, token=a.token, seq=seen))
    ended = await next_event(bo, Ended)
    assert (ended.result, ended.reason) == ("0-1", "resign")
    again = await _back(server, ada, "ada")
    reply = await again.request(Resign, game_id=gid, token=a.token, seq=seen)
    assert isinstance(reply, Ended) and (reply.seq, reply.result) == (ended.seq, ended.result)
    # Without its seq, the same request is what it always was: the game is over.
    with pytest.raises(RequestFailed, match="game_over"):
        await again.request(Resign, game_id=gid, token=a.token, seq=ended.seq)
    assert [kind for _, kind in _events(server, gid)] == ["started", "ended"]
    # Once the game has left memory the store answers, to the seat's player only.
    async with asyncio.timeout(10):
        while gid in server.game_server.games:
            await asyncio.sleep(0.05)
    reply = await again.request(Resign, game_id=gid, token=a.token, seq=seen)
    assert isinstance(reply, Ended) and (reply.seq, reply.result, reply.reason, reply.winner) == (
        ended.seq,
        ended.result,
        "resign",
        1,
    )
    with pytest.raises(RequestFailed, match="bad_token"):
        await bo.request(Resign, game_id=gid, token=a.token, seq=seen)
    with pytest.raises(RequestFailed, match="unknown_game"):  # bo never resigned
        await bo.request(Resign, game_id=gid, token=b.token, seq=seen)
    with pytest.raises(RequestFailed, match="unknown_game"):  # not sent again: as before
        await again.request(Resign, game_id=gid, token=a.token)


async def test_a_draw_offer_sent_again_after_a_move_is_not_made_twice(
    server: RunningServer,
) -> None:
    """The offer was made, then the opponent moved (declining it): sent without ``seq`` the
    copy would be a new offer; with it, the first one's ``ok`` again, nothing stored."""
    ada, bo, a, b = await human_game(server, game="5x5")
    gid = a.game_id
    await _move(ada, gid, 12)
    seen = ada.seen_seq[gid]
    await _sent_and_dropped(ada, Draw(rid=91, game_id=gid, token=a.token, seq=seen))
    offer = await next_event(bo, Offer)
    assert (offer.kind, offer.seat, offer.answer) == ("draw", 0, "offer")
    await _move(bo, gid, 0)
    again = await _back(server, ada, "ada")
    stored = _events(server, gid)
    assert isinstance(await again.request(Draw, game_id=gid, token=a.token, seq=seen), Ok)
    assert _events(server, gid) == stored
    assert server.game_server.games[gid].offers == {}
    # An offer made now (the seq seen now) is a new one.
    await again.request(Draw, game_id=gid, token=a.token)
    assert (await next_event(bo, Offer)).seq > offer.seq


async def test_an_abort_and_a_claim_sent_again_are_answered_with_their_end(
    server: RunningServer,
) -> None:
    ada, bo, a, b = await human_game(server, game="tictactoe")
    gid = a.game_id
    seen = ada.seen_seq[gid]
    aborted = await ada.request(Abort, game_id=gid, token=a.token, seq=seen)
    assert isinstance(aborted, Ended) and aborted.reason == "abort"
    again = await ada.request(Abort, game_id=gid, token=a.token, seq=seen)
    assert isinstance(again, Ended) and again.seq == aborted.seq
    ada2, bo2, a2, b2 = await human_game(server, names=("ada2", "bo2"), game="tictactoe")
    gid2 = a2.game_id
    await _move(ada2, gid2, 4)
    await _move(bo2, gid2, 0)  # (nothing to claim before both sides moved)
    await bo2.close()  # bo2 leaves; after its grace the game may be claimed
    await asyncio.sleep(0.8)
    seen = ada2.seen_seq[gid2]
    claimed = await ada2.request(Claim, game_id=gid2, token=a2.token, seq=seen)
    assert isinstance(claimed, Ended) and (claimed.result, claimed.reason) == ("1-0", "abandoned")
    again = await ada2.request(Claim, game_id=gid2, token=a2.token, seq=seen)
    assert isinstance(again, Ended) and again.seq == claimed.seq
    with pytest.raises(RequestFailed, match="game_over"):  # a claim of a draw was not made
        await ada2.request(Claim, game_id=gid2, token=a2.token, seq=seen, outcome="draw")


async def test_a_rematch_accepted_again_starts_no_second_game(
    tmp_path: Path, pool: EnginePool
) -> None:
    async with serving(tmp_path, pool, ServerSettings()) as server:  # games kept 10 minutes
        ada, bo, a, b = await human_game(server, game="tictactoe")
        gid = a.game_id
        await ada.request(Resign, game_id=gid, token=a.token)
        await ada.request(Rematch, game_id=gid, token=a.token)
        await next_event(bo, Offer)
        seen = bo.seen_seq[gid]
        accept = Rematch(rid=92, game_id=gid, token=b.token, answer="accept", seq=seen)
        await _sent_and_dropped(bo, accept)
        agreed = await next_event_where(ada, Offer, lambda offer: offer.answer == "accept")
        again = await _back(server, bo, "bo")
        ok = await again.request(Rematch, game_id=gid, token=b.token, answer="accept", seq=seen)
        assert isinstance(ok, Ok)
        # (The first accept's event came once the new game was stored.)
        rematches = server.query("SELECT id FROM games WHERE rematch_of = ?", gid)
        assert rematches == [(agreed.next_game,)]
        assert [kind for _, kind in _events(server, gid)].count("offer") == 2


_T = {"rid": 1, "game_id": "g", "token": "t"}


@pytest.mark.parametrize(
    ("request_", "seat", "events", "made"),
    [
        (Resign(**_T), 0, [("ended", "0-1", "resign")], True),
        (Resign(**_T), 1, [("ended", "0-1", "resign")], False),
        (Resign(**_T), 1, [("ended", "*", "abort")], True),  # (before both sides moved)
        (Abort(**_T), 1, [("ended", "*", "abort")], True),
        (Claim(**_T), 0, [("ended", "1-0", "abandoned")], True),
        (Claim(**_T, outcome="draw"), 0, [("ended", "1-0", "abandoned")], False),
        (Draw(**_T, answer="accept"), 1, [("ended", "1/2-1/2", "agreement")], True),
        (Draw(**_T, answer="decline"), 1, [("ended", "1/2-1/2", "agreement")], False),
        (Draw(**_T, answer="decline"), 1, [("draw", 1, "decline")], True),
        (Draw(**_T), 1, [("draw", 0, "offer")], False),
        (Rematch(**_T), 0, [("rematch", 1, "accept")], True),
        (Rematch(**_T, answer="decline"), 0, [("rematch", 1, "decline")], False),
    ],
)  # fmt: skip
def test_which_event_a_request_made(
    request_: Message, seat: int, events: list[tuple[str, object, str]], made: bool
) -> None:
    """The game core's reading of the events after a request's seq (stored form)."""
    stored = []
    for seq, (kind, who, what) in enumerate(events, start=5):
        if kind == "ended":
            stored.append({"seq": seq, "kind": kind, "result": who, "reason": what})
        else:
            stored.append({"seq": seq, "kind": kind, "seat": who, "answer": what})
    assert (made_already(request_, seat, stored) is not None) is made

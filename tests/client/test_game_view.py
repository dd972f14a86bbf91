"""GameModel: the game as the UI sees it, built from protocol events (pure, no server)."""

from __future__ import annotations

import engine
from client.game_view import (
    GameModel,
    clock_title,
    format_ms,
    game_title,
    move_verdicts,
    result_sentence,
)
from protocol import Ended, Moved, Offer, Presence, Snapshot

HUMANS = [{"name": "ada", "kind": "human"}, {"name": "bob", "kind": "human"}]


def snapshot(**fields: object) -> Snapshot:
    base: dict[str, object] = {
        "game_id": "g1", "seq": 1, "game": "tictactoe", "params": {}, "players": HUMANS,
        "actions": [], "status": "live", "to_move": 0,
    }  # fmt: skip
    base.update(fields)
    return Snapshot(**base)  # type: ignore[arg-type]


def moved(seq: int, ply: int, action: int, **fields: object) -> Moved:
    return Moved(
        game_id="g1", seq=seq, ply=ply, seat=ply % 2, action=action, to_move=(ply + 1) % 2,
        **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def test_clocks_tick_for_the_side_to_move_once_both_have_moved() -> None:
    model = GameModel("g1", seat=0)
    clock = {"initial_ms": 60_000, "increment_ms": 0}
    model.apply(snapshot(clock=clock, clocks=[60_000, 60_000]), now=100.0)
    assert model.remaining_ms(0, now=130.0) == 60_000  # no first move yet: not running
    model.apply(moved(2, 0, 4, clocks=[60_000, 60_000]), now=101.0)
    model.apply(moved(3, 1, 0, clocks=[60_000, 55_000]), now=106.0)
    assert model.clock_ticking()
    assert model.remaining_ms(0, now=116.0) == 50_000  # X to move: 10 s since the reading
    assert model.remaining_ms(1, now=116.0) == 55_000
    assert model.remaining_ms(0, now=1_000.0) == 0.0  # never below zero
    model.apply(Ended(game_id="g1", seq=4, result="0-1", reason="flag", winner=1), now=200.0)
    assert not model.clock_ticking() and model.over
    assert result_sentence(model.result, model.reason, model.seat) == "You lose: out of time."


def test_a_gap_in_seq_is_reported_and_a_repeated_event_ignored() -> None:
    model = GameModel("g1", seat=0)
    assert model.apply(snapshot(), now=0.0)
    assert model.apply(moved(2, 0, 4), now=0.0)
    assert model.apply(moved(2, 0, 4), now=0.0)  # seen already (a resume repeats it)
    assert model.state is not None and model.state.history() == [4]
    assert not model.apply(moved(4, 2, 8), now=0.0)  # seq 3 is missing: resume
    assert model.state.history() == [4] and model.seq == 2


def test_offers_and_presence() -> None:
    model = GameModel("g1", seat=0)
    model.apply(snapshot(), now=0.0)
    model.apply(Offer(game_id="g1", seq=2, kind="draw", seat=1, answer="offer"), now=0.0)
    assert model.offers == {"draw": 1}
    model.apply(moved(3, 0, 4), now=0.0)
    assert model.offers == {}  # a move declines the other side's standing draw offer
    # An offer made with one's move (offer, then move: FIDE 9.1.2.1) stands past that move,
    # as on the server; it was dropped from view, though the opponent could still accept.
    model.apply(Offer(game_id="g1", seq=4, kind="draw", seat=1, answer="offer"), now=0.0)
    model.apply(moved(5, 1, 0), now=0.0)
    assert model.offers == {"draw": 1}
    model.apply(moved(6, 2, 8), now=0.0)
    assert model.offers == {}
    model.apply(Presence(game_id="g1", seq=7, seat=1, online=False, claim_at=60.0), now=0.0)
    assert model.online == [True, False] and model.claim_at == [None, 60.0]


def test_words_for_people() -> None:
    assert format_ms(61_000) == "1:01" and format_ms(9_450) == "0:09.4"
    assert game_title("mnk", {"m": 15, "n": 15, "k": 5}) == "gomoku"
    assert game_title("mnk", {"m": 7, "n": 6, "k": 4}) == "m,n,k 7x6 k=4"
    assert result_sentence("1/2-1/2", "agreement", None) == "Draw: draw agreed."
    assert result_sentence("*", "abort", 0) == "No result: aborted before the first moves."


def test_verdicts_mark_where_the_game_was_lost() -> None:
    game = engine.make_game("tictactoe")
    # X centre, O edge (loses), X corner (wins), O blocks, X forks, O resigns after.
    verdicts = move_verdicts(game, [4, 1, 0, 8, 6])
    assert verdicts == [("drawn", ""), ("lost", "??"), ("won", ""), ("lost", ""), ("won", "")]
    assert move_verdicts(engine.make_game("gomoku"), [112]) == [None]  # too big to solve


def test_time_controls_as_people_write_them() -> None:
    assert clock_title({}) == "no clock"
    assert clock_title({"initial_ms": 180_000, "increment_ms": 2000}) == "3+2"
    assert clock_title({"initial_ms": 90_000, "increment_ms": 2000}) == "90s+2"
    assert clock_title({"initial_ms": 1000, "increment_ms": 0}) == "1s+0"
    assert clock_title({"initial_ms": 60_000, "increment_ms": 500}) == "1+0.5"
    assert clock_title({"move_ms": 30_000}) == "30 s/move"

"""The codec: every message round-trips; anything else is one documented ProtocolError."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protocol
from protocol import ErrorCode, ProtocolError, decode, decode_server, encode

CLIENT_EXAMPLES = [
    protocol.Hello(rid=1, version=1, name="ada", bot=False, client="test"),
    protocol.Hello(rid=2, version=1, session="s" * 32),
    protocol.CreateGame(rid=3, game="mnk", params={"m": 5, "n": 5, "k": 4}, opponent="human"),
    protocol.CreateGame(rid=4, game="uttt", algorithm="alphabeta", budget_ms=50, seat=-1),
    protocol.ListGames(rid=5, status="finished", limit=10),
    protocol.JoinGame(rid=6, game_id="abcd2345"),
    protocol.Move(rid=7, game_id="abcd2345", token="t" * 32, action=4, ply=0),
    protocol.Move(rid=8, game_id="abcd2345", token="t", action=80),
    protocol.Resign(rid=9, game_id="abcd2345", token="t"),
    protocol.GetGame(rid=10, game_id="abcd2345"),
    protocol.Watch(rid=11, game_id="abcd2345"),
    protocol.Ping(rid=12),
    protocol.Watch(rid=13, game_id="abcd2345", since=4),
    protocol.Unwatch(rid=14, game_id="abcd2345"),
    protocol.Resume(rid=15, game_id="abcd2345", since=7),
    protocol.LobbySubscribe(rid=16),
    protocol.LobbySubscribe(rid=17, limit=20, page=3),
    protocol.Seek(rid=17, game="uttt", clock={"initial_ms": 60_000, "increment_ms": 1000}),
    protocol.Seek(rid=18, game="5x5", color="x", opponents="humans", to="p-1f2e3d4c5b6a"),
    protocol.CancelSeek(rid=19, seek_id="s-1"),
    protocol.AcceptSeek(rid=20, seek_id="s-1"),
    protocol.DeclineSeek(rid=27, seek_id="s-1"),
    protocol.QuickPair(rid=21, game="tictactoe", clock={"move_ms": 10_000}, ai_after_s=5),
    protocol.Draw(rid=22, game_id="g", token="t", answer="accept"),
    protocol.Rematch(rid=23, game_id="g", token="t"),
    protocol.Abort(rid=24, game_id="g", token="t"),
    protocol.Claim(rid=25, game_id="g", token="t", outcome="draw"),
    protocol.CreateGame(rid=26, game="gomoku", opponent="human", private=True, clock={}),
]

SERVER_EXAMPLES = [
    protocol.Welcome(rid=1, version=1, session="s", player_id="p-1", server="noughts/0.1"),
    protocol.Seated(rid=3, game_id="g", seat=1, token="t"),
    protocol.Seated(game_id="g", seat=0, token="t"),
    protocol.Welcome(
        rid=1,
        version=1,
        session="s",
        player_id="p-1",
        games=({"game_id": "g", "seat": 0, "token": "t", "seq": 5},),
    ),
    protocol.Offer(game_id="g", seq=5, kind="draw", seat=1, answer="offer"),
    protocol.Offer(game_id="g", seq=9, kind="rematch", seat=0, answer="accept", next_game="h"),
    protocol.Presence(game_id="g", seq=6, seat=1, online=False, claim_at=1234.5),
    protocol.Ok(rid=30),
    protocol.Resumed(rid=15, game_id="g", seq=7, seat=0, token="t"),
    protocol.SeekPosted(rid=17, seek_id="s-1"),
    protocol.SeekDeclined(seek_id="s-1", player={"name": "bo", "kind": "human"}),
    protocol.LobbyState(rid=16, seeks=({"seek_id": "s-1"},), games=()),
    protocol.LobbyEvent(kind="seek_removed", seek_id="s-1"),
    protocol.LobbyEvent(kind="game_added", game={"game_id": "g"}),
    protocol.LobbyState(
        rid=17, seeks=(), games=(), page=3, limit=20, seeks_total=41, games_total=9000
    ),
    protocol.LobbyUpdate(
        seeks=({"seek_id": "s-2"},), seeks_removed=("s-1",), seeks_total=1, games_total=0
    ),
    protocol.Snapshot(
        game_id="g",
        seq=3,
        game="tictactoe",
        params={},
        players=({"name": "a"}, None),
        actions=(4, 0),
        status="live",
        to_move=0,
    ),
    protocol.Moved(
        game_id="g",
        seq=4,
        ply=2,
        seat=0,
        action=8,
        to_move=1,
        at=1.5,
        stats={"algorithm": "mcts", "pv": [8, 2], "value": 0.25},
        rid=7,
    ),
    protocol.Ended(game_id="g", seq=9, result="1-0", reason="line", winner=0),
    protocol.Ended(game_id="g", seq=9, result="0-1", reason="flag", winner=1, clocks=(0, 5000)),
    protocol.RematchClosed(game_id="g"),
    protocol.Snapshot(
        game_id="g",
        seq=3,
        game="uttt",
        params={},
        players=({"name": "a"}, {"name": "b", "kind": "bot"}),
        actions=(40,),
        status="live",
        to_move=1,
        clock={"initial_ms": 60_000, "increment_ms": 0},
        clocks=(60_000, 59_000),
        at=12.5,
        online=(True, False),
        offers={"draw": 0},
    ),
    protocol.Moved(game_id="g", seq=4, ply=1, seat=1, action=31, to_move=0, at=2.0, clocks=(1, 2)),
    protocol.GameList(rid=5, games=({"game_id": "g"},)),
    protocol.Record(rid=10, game={"id": "g", "moves": []}),
    protocol.Pong(rid=12),
    protocol.Error(code="illegal_move", message="cell 4 is occupied", rid=7, game_id="g"),
]


@pytest.mark.parametrize("message", CLIENT_EXAMPLES, ids=lambda m: m.TYPE)
def test_client_messages_round_trip(message: protocol.Message) -> None:
    assert decode(encode(message)) == message


@pytest.mark.parametrize("message", SERVER_EXAMPLES, ids=lambda m: m.TYPE)
def test_server_messages_round_trip(message: protocol.Message) -> None:
    assert decode_server(encode(message)) == message


def test_every_message_type_has_an_example() -> None:
    covered = {type(m) for m in CLIENT_EXAMPLES + SERVER_EXAMPLES}
    assert covered == set(protocol.CLIENT_TYPES.values()) | set(protocol.SERVER_TYPES.values())


def test_a_prepacked_field_decodes_as_if_encoded_whole() -> None:
    """A cached record is sent behind each request's rid without being encoded again."""
    game = {"id": "g", "moves": [{"ply": p, "stats": {"pv": [1, 2]}} for p in range(40)]}
    whole = encode(protocol.Record(rid=7, game=game))
    spliced = protocol.encode_prepacked(
        protocol.Record(rid=7, game={}), {"game": protocol.pack(game)}
    )
    assert decode_server(spliced) == decode_server(whole)
    many = protocol.LobbyState(
        rid=1, seeks=(), games=(), page=1, limit=2, seeks_total=3, games_total=4
    )
    spliced = protocol.encode_prepacked(many, {"games": protocol.pack([{"game_id": "g"}])})
    assert decode_server(spliced) == dataclasses.replace(many, games=({"game_id": "g"},))
    wide = protocol.Snapshot(  # every field set: 18 entries, a map 16 on the wire
        game_id="g", seq=9, game="tictactoe", params={}, players=(None, None), actions=(),
        status="finished", to_move=-1, result="1-0", reason="line", clock={"move_ms": 5000},
        clocks=(1, 2), at=1.5, online=(True, False), offers={"rematch": 1}, next_game="h", rid=3,
    )  # fmt: skip
    spliced = protocol.encode_prepacked(wide, {"actions": protocol.pack([4, 0, 8])})
    assert decode_server(spliced) == dataclasses.replace(wide, actions=(4, 0, 8))


def test_a_rid_added_to_an_encoded_event_decodes_as_if_encoded_with_it() -> None:
    """An event is encoded once for all its followers; its requester's copy adds the rid
    to those bytes, across every map header: fixmap, the fixmap of 15 that becomes a map
    16, and map 16."""
    wide = protocol.Snapshot(  # every field but rid set: 17 entries
        game_id="g", seq=9, game="tictactoe", params={}, players=(None, None), actions=(4,),
        status="finished", to_move=-1, result="1-0", reason="line", clock={"move_ms": 5000},
        clocks=(1, 2), at=1.5, online=(True, False), offers={"rematch": 1}, next_game="h",
    )  # fmt: skip
    optional = ["next_game", "clocks", "reason", "result"]
    events: list[protocol.Message] = [
        dataclasses.replace(wide, **{name: None for name in optional[:n]})
        for n in range(len(optional) + 1)
    ]
    events.append(protocol.Moved(game_id="g", seq=4, ply=1, seat=1, action=3, to_move=0))
    heads = set()
    for event in events:
        frame = encode(event)
        heads.add(frame[0])
        for rid in (0, 1, 127, 2**31 - 1):
            with_rid = protocol.with_rid(frame, rid)
            assert decode_server(with_rid) == decode_server(encode(event, rid=rid))
    assert {0x8F, 0xDE} <= heads and min(heads) < 0x8F  # 17 to 13 entries, and Moved's
    with pytest.raises(ValueError):
        protocol.with_rid(msgpack.packb([1, 2]), 1)


def test_none_fields_stay_off_the_wire() -> None:
    raw = msgpack.unpackb(encode(protocol.Move(rid=1, game_id="g", token="t", action=1)))
    assert "ply" not in raw


def _code(data: bytes | str, **kwargs: object) -> ErrorCode:
    with pytest.raises(ProtocolError) as info:
        decode(data, **kwargs)  # type: ignore[arg-type]
    return info.value.code


def pack(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b"", ErrorCode.BAD_FRAME),
        (b"\xc1", ErrorCode.BAD_FRAME),  # never-used msgpack byte
        (pack([1, 2]), ErrorCode.BAD_FRAME),
        (pack({1: 2}), ErrorCode.BAD_FRAME),  # non-string map key
        (pack({"type": "ping", "rid": 1}) + b"\x00", ErrorCode.BAD_FRAME),  # trailing bytes
        (b"\x91" * 5000, ErrorCode.BAD_FRAME),  # nesting bomb
        (pack({"rid": 1}), ErrorCode.UNKNOWN_TYPE),
        (pack({"type": "launch", "rid": 1}), ErrorCode.UNKNOWN_TYPE),
        (
            pack({"type": "welcome", "rid": 1, "version": 1, "session": "s", "player_id": "p"}),
            ErrorCode.UNKNOWN_TYPE,
        ),  # a server message sent by a client
        (pack({"type": "ping"}), ErrorCode.BAD_FIELD),  # missing rid
        (pack({"type": "ping", "rid": 1, "extra": 0}), ErrorCode.BAD_FIELD),
        (pack({"type": "ping", "rid": -1}), ErrorCode.BAD_FIELD),
        (pack({"type": "ping", "rid": "1"}), ErrorCode.BAD_FIELD),
        (
            pack({"type": "move", "rid": 1, "game_id": "g", "token": "t", "action": True}),
            ErrorCode.BAD_FIELD,
        ),
        (
            pack({"type": "move", "rid": 1, "game_id": "g", "token": "t", "action": 1.0}),
            ErrorCode.BAD_FIELD,
        ),
        (
            pack({"type": "move", "rid": 1, "game_id": "g" * 33, "token": "t", "action": 1}),
            ErrorCode.BAD_FIELD,
        ),
        (
            pack({"type": "create", "rid": 1, "game": "mnk", "params": {"m": "5"}}),
            ErrorCode.BAD_FIELD,
        ),
        (
            pack({"type": "create", "rid": 1, "game": "mnk", "opponent": "alien"}),
            ErrorCode.BAD_FIELD,
        ),
        (pack({"type": "create", "rid": 1, "game": "uttt", "budget_ms": 0}), ErrorCode.BAD_FIELD),
        (pack({"type": "hello", "rid": 1, "version": 1, "name": b"bytes"}), ErrorCode.BAD_FIELD),
    ],
)
def test_malformed_frames_get_their_code(frame: bytes, code: ErrorCode) -> None:
    assert _code(frame) is code


def test_text_frames_are_refused() -> None:
    assert _code('{"type": "ping"}') is ErrorCode.BAD_FRAME


def test_size_cap() -> None:
    frame = pack({"type": "hello", "rid": 1, "version": 1, "client": "x" * 40_000})
    assert _code(frame) is ErrorCode.TOO_LARGE


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_arbitrary_bytes_only_raise_protocol_error(data: bytes) -> None:
    try:
        decode(data)
    except ProtocolError as exc:
        assert exc.code in ErrorCode


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(protocol.CLIENT_TYPES)),
    st.dictionaries(
        st.sampled_from(
            [
                "rid",
                "version",
                "game_id",
                "token",
                "action",
                "ply",
                "game",
                "params",
                "status",
                "limit",
                "name",
                "bot",
                "seat",
                "budget_ms",
            ]
        ),
        msgpack_values,
        max_size=6,
    ),
)
def test_wrong_types_and_shapes_only_raise_protocol_error(tag: str, fields: dict) -> None:
    frame = pack({"type": tag, **fields})
    try:
        message = decode(frame)
    except ProtocolError as exc:
        assert exc.code in ErrorCode
    else:
        assert message.TYPE == tag
        assert decode(encode(message)) == message


@pytest.mark.parametrize(
    "frame, code, rid",
    [
        (pack({"type": "castle", "rid": 5}), ErrorCode.UNKNOWN_TYPE, 5),
        (pack({"type": "ping", "rid": 6, "extra": 0}), ErrorCode.BAD_FIELD, 6),
        (pack({"type": "move", "rid": 7, "game_id": "g", "action": 1}), ErrorCode.BAD_FIELD, 7),
        (pack({"type": "ping", "rid": 8, "pad": "x" * 20_000}), ErrorCode.TOO_LARGE, 8),
        (pack({"type": "ping", "rid": "9"}), ErrorCode.BAD_FIELD, None),
        (pack({"type": "ping", "rid": True}), ErrorCode.BAD_FIELD, None),
        (pack({"type": "ping", "rid": 2**31}), ErrorCode.BAD_FIELD, None),
        (pack([{"rid": 1}]), ErrorCode.BAD_FRAME, None),
        (pack({"type": "ping", "rid": 1}) + b"\x00", ErrorCode.BAD_FRAME, None),
        # A string that is not UTF-8: the frame is refused whole, with its rid (a probe's
        # finding: the rid was lost).
        (
            msgpack.packb({"type": "create", "rid": 10, "game": b"\xff"}, use_bin_type=False),
            ErrorCode.BAD_FRAME,
            10,
        ),
    ],
)
def test_errors_carry_the_rid_they_can_read(frame: bytes, code: ErrorCode, rid: int | None) -> None:
    """Finding 11 of issue 11: bad_field (and the like) carried no rid; a client hung."""
    with pytest.raises(ProtocolError) as failure:
        decode(frame)
    assert failure.value.code is code
    assert failure.value.rid == rid
    assert protocol.codec.request_id(frame) == rid


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(protocol.CLIENT_TYPES)), msgpack_values, msgpack_values)
def test_the_rid_of_an_error_is_the_frame_s_valid_rid(tag: str, rid: object, other: object) -> None:
    frame = pack({"type": tag, "rid": rid, "field": other})  # "field" is unknown: refused
    valid = type(rid) is int and 0 <= rid < 2**31
    with pytest.raises(ProtocolError) as failure:
        decode(frame)
    assert failure.value.rid == (rid if valid else None)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_reading_a_rid_never_raises(data: bytes) -> None:
    rid = protocol.codec.request_id(data)
    assert rid is None or 0 <= rid < 2**31


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "create", "rid": 1, "game": "tictactoe", "opponent": [1] * 5000},
        {"type": "create", "rid": 1, "game": "tictactoe", "opponent": "x" * 10_000},
        {"type": "create", "rid": 1, "x" * 10_000: 1},
        {"type": ["create"] * 5000, "rid": 1},
        {"type": "y" * 10_000, "rid": 1},
    ],
)
def test_an_error_quotes_a_refused_value_in_a_few_words(frame: dict) -> None:
    """A hostile probe: a 15.6 KB frame of ext values in a fixed-choice field came back as a
    161 KB error (its repr), ten times the frame, at 25 times the CPU of a short one."""
    with pytest.raises(ProtocolError) as refused:
        decode(msgpack.packb(frame))
    assert len(refused.value.message) < 200, refused.value.message


def test_a_client_ignores_a_field_a_later_server_adds() -> None:
    """PROTOCOL.md, Versions: a server adds optional fields to its messages within a
    version, and clients ignore the fields they do not know. A client of before the rule
    refused them (bad_field, the frame unread): an older client could not read a timed
    game's snapshot once first_move_ms was added. A server still refuses a request's
    unknown field, and a client still a message type it does not know."""
    snapshot = protocol.Snapshot(
        game_id="g1",
        seq=1,
        game="tictactoe",
        params={},
        players=({"name": "a"}, None),
        actions=(),
        status="live",
        to_move=0,
    )
    later = pack({**msgpack.unpackb(encode(snapshot)), "rid": 3, "spare_ms": [1, 2]})
    assert decode_server(later) == dataclasses.replace(snapshot, rid=3)
    with pytest.raises(ProtocolError) as refused:
        decode_server(later, strict=True)
    assert (refused.value.code, refused.value.rid) == (ErrorCode.BAD_FIELD, 3)
    assert _code(pack({"type": "ping", "rid": 1, "extra": 0})) is ErrorCode.BAD_FIELD
    with pytest.raises(ProtocolError) as unknown:
        decode_server(pack({"type": "later_event", "game_id": "g1"}))
    assert unknown.value.code is ErrorCode.UNKNOWN_TYPE
    with pytest.raises(ProtocolError) as large:
        decode_server(pack({**msgpack.unpackb(encode(snapshot)), "spare": "x" * 9_000_000}))
    assert large.value.code is ErrorCode.TOO_LARGE

"""The one codec: messages to msgpack bytes and back, validated at the edge.

``decode`` turns any frame into a typed message or raises ProtocolError with a
documented code: never a KeyError, TypeError or assert (asserts vanish under
-O). msgpack is decoded with ``raw=False, strict_map_key=True`` and a size cap.
The error carries the frame's ``rid`` whenever one can be read, so that a client
waiting for its reply gets one.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import msgpack

from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import CLIENT_MESSAGES, SERVER_MESSAGES, Message, Ping
from protocol.schema import Checker, FieldSpec, field_specs, shown

# A client frame is a few dozen bytes; 16 KiB leaves room and caps abuse.
MAX_CLIENT_FRAME = 16 * 1024
# Server frames can carry whole game records with search statistics.
MAX_SERVER_FRAME = 8 * 1024 * 1024

_SPECS: dict[type[Message], tuple[FieldSpec, ...]] = {
    cls: field_specs(cls) for cls in CLIENT_MESSAGES + SERVER_MESSAGES
}
# The keys a frame of each message may hold, and each field's (name, check, required).
_KEYS: dict[type[Message], frozenset[str]] = {
    cls: frozenset(["type", *(spec.name for spec in specs)]) for cls, specs in _SPECS.items()
}
_CHECKS: dict[type[Message], tuple[tuple[str, Checker, bool], ...]] = {
    cls: tuple((spec.name, spec.check, spec.required) for spec in specs)
    for cls, specs in _SPECS.items()
}
_ABSENT = object()
CLIENT_TYPES: dict[str, type[Message]] = {cls.TYPE: cls for cls in CLIENT_MESSAGES}
SERVER_TYPES: dict[str, type[Message]] = {cls.TYPE: cls for cls in SERVER_MESSAGES}
# Every request's rid has the same bounds: the check of one stands for all.
_RID = next(spec for spec in _SPECS[Ping] if spec.name == "rid")


_threads = threading.local()


def _packb(value: Any) -> bytes:
    """msgpack.packb, through one Packer per thread: packb builds a Packer at each call,
    a third of the cost of packing a move."""
    try:
        packer = _threads.packer
    except AttributeError:
        packer = _threads.packer = msgpack.Packer(use_bin_type=True)
    return packer.pack(value)


def encode(message: Message, *, rid: int | None = None) -> bytes:
    """Serialize a message; fields left at None are omitted from the wire. ``rid`` sets
    the message's ``rid`` (the requester's copy of an event) without copying it."""
    body: dict[str, Any] = {"type": message.TYPE}
    for spec in _SPECS[type(message)]:
        value = getattr(message, spec.name)
        if value is not None:
            body[spec.name] = value
    if rid is not None:
        body["rid"] = rid
    return _packb(body)


_RID_KEY = msgpack.packb("rid")


def with_rid(frame: bytes, rid: int) -> bytes:
    """``frame``, a message ``encode`` made without ``rid``, with ``rid`` set: the
    requester's copy of an event, made from the one encoding all its followers get (the
    map gains one entry at its end; ``decode`` reads it as ``encode(message, rid=rid)``)."""
    head = frame[0]
    if 0x80 <= head < 0x8F:  # fixmap of up to 14 entries
        start, skip = bytes((head + 1,)), 1
    elif head == 0x8F:  # fixmap of 15: becomes a map 16
        start, skip = b"\xde\x00\x10", 1
    elif head == 0xDE:  # map 16
        start, skip = b"\xde" + (int.from_bytes(frame[1:3], "big") + 1).to_bytes(2, "big"), 3
    else:
        raise ValueError("not an encoded message: a msgpack map expected")
    return start + frame[skip:] + _RID_KEY + _packb(rid)


def encode_prepacked(message: Message, packed: Mapping[str, bytes]) -> bytes:
    """``encode`` with the fields named in ``packed`` given as msgpack bytes already: a
    large value encoded once and kept (a finished game's record) is sent again behind a new
    ``rid`` without being encoded again. The message's own values of those fields are not
    used."""
    body: dict[str, Any] = {"type": message.TYPE}
    for spec in _SPECS[type(message)]:
        value = getattr(message, spec.name)
        if value is not None and spec.name not in packed:
            body[spec.name] = value
    size = len(body) + len(packed)
    if size < 16:
        head = bytes([0x80 | size])  # fixmap
    else:
        head = b"\xde" + size.to_bytes(2, "big")  # map 16 (a message has a few dozen fields)
    parts = [head]
    for key, value in body.items():
        parts += [_packb(key), _packb(value)]
    for key, raw in packed.items():
        parts += [_packb(key), raw]
    return b"".join(parts)


def pack(value: Any) -> bytes:
    """One field's value as msgpack, for ``encode_prepacked``."""
    return _packb(value)


def _unpack(data: bytes | str, max_size: int) -> Any:
    if type(data) is not bytes and not isinstance(data, bytearray | memoryview):
        raise ProtocolError(ErrorCode.BAD_FRAME, "frames must be binary (msgpack), not text")
    if len(data) > max_size:
        raise ProtocolError(ErrorCode.TOO_LARGE, f"frame of {len(data)} bytes over {max_size}")
    try:
        # unpackb bounds every string, array and map by len(data), itself capped above.
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except (ValueError, TypeError) as exc:  # ExtraData, FormatError, StackError are ValueErrors
        raise ProtocolError(ErrorCode.BAD_FRAME, f"not a msgpack frame: {exc}") from exc


def _valid_rid(obj: Any) -> int | None:
    if type(obj) is not dict or "rid" not in obj:
        return None
    try:
        return int(_RID.check("rid", obj["rid"]))
    except ProtocolError:
        return None


def request_id(data: bytes | str) -> int | None:
    """The ``rid`` of a frame that is a msgpack map holding a valid one, else None; never
    raises. For answering a frame that is not decoded (over the rate limit, too large).
    Its cost is one unpack of the frame, whose size the transport caps."""
    if not isinstance(data, bytes | bytearray | memoryview):
        return None
    try:
        return _valid_rid(msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True))
    except (ValueError, TypeError):
        pass
    try:  # a string that is not UTF-8 (elsewhere in the frame): its rid still answers it
        obj = msgpack.unpackb(data, raw=True, strict_map_key=True, use_list=True)
    except (ValueError, TypeError):
        return None
    return _valid_rid({"rid": obj[b"rid"]}) if type(obj) is dict and b"rid" in obj else None


def decode(
    data: bytes | str,
    types: dict[str, type[Message]] = CLIENT_TYPES,
    max_size: int = MAX_CLIENT_FRAME,
    *,
    strict: bool = True,
) -> Message:
    """Parse and validate one frame into the message class its ``type`` names. A
    ProtocolError carries the frame's ``rid`` if it has a valid one. ``strict``: a field
    the message does not have is refused (bad_field); otherwise it is ignored, its value
    bounded by ``max_size`` as the whole frame is (PROTOCOL.md, Versions)."""
    try:
        obj = _unpack(data, max_size)
    except ProtocolError as exc:
        exc.rid = request_id(data)  # too large, or not decodable as a whole
        raise
    try:
        return _validate(obj, types, strict)
    except ProtocolError as exc:
        exc.rid = _valid_rid(obj)
        raise


def _validate(obj: Any, types: dict[str, type[Message]], strict: bool) -> Message:
    if type(obj) is not dict:
        raise ProtocolError(ErrorCode.BAD_FRAME, "a frame must be a msgpack map")
    tag = obj.get("type")
    cls = types.get(tag) if type(tag) is str else None
    if cls is None:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"unknown message type {shown(tag)}")
    keys = _KEYS[cls]
    if strict and not obj.keys() <= keys:
        extra = next(k for k in obj if k not in keys)
        raise ProtocolError(ErrorCode.BAD_FIELD, f"{tag}: unknown field {shown(extra)}")
    kwargs = {}
    for name, check, required in _CHECKS[cls]:
        value = obj.get(name, _ABSENT)
        if value is not _ABSENT:
            kwargs[name] = check(name, value)
        elif required:
            raise ProtocolError(ErrorCode.BAD_FIELD, f"{tag}: missing field {name!r}")
    return cls(**kwargs)


def decode_server(data: bytes | str, *, strict: bool = False) -> Message:
    """Decode a frame the server sent (the client's side of the codec). A field a later
    server adds to a message is ignored (PROTOCOL.md, Versions); ``strict`` refuses it, as
    clients of protocol 2 before 2026-12-07 did."""
    return decode(data, SERVER_TYPES, MAX_SERVER_FRAME, strict=strict)

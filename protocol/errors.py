"""Protocol errors and the error codes every `error` message carries."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Every code an `error` message can carry; PROTOCOL.md documents each one."""

    # The frame itself is bad (ProtocolError): the connection stays open unless noted.
    BAD_FRAME = "bad_frame"  # not msgpack, not a map, or trailing bytes
    TOO_LARGE = "too_large"  # frame over the size cap
    UNKNOWN_TYPE = "unknown_type"  # "type" names no message
    BAD_FIELD = "bad_field"  # a field is missing, unknown, of the wrong type or out of range
    VERSION_MISMATCH = "version_mismatch"  # hello with another protocol version; then closed
    NOT_READY = "not_ready"  # a request before hello
    # The request is well formed but the game refuses it (game errors).
    UNKNOWN_GAME = "unknown_game"
    BAD_TOKEN = "bad_token"  # the seat token does not match this game, or this connection
    NOT_YOUR_TURN = "not_your_turn"
    ILLEGAL_MOVE = "illegal_move"
    STALE_MOVE = "stale_move"  # the move's ply does not match the game's current ply
    GAME_OVER = "game_over"
    SEAT_TAKEN = "seat_taken"  # join a game whose open seat is gone
    UNKNOWN_SEEK = "unknown_seek"  # the seek is gone (accepted, cancelled, its owner left)
    NOT_ALLOWED = "not_allowed"  # the service's rules forbid it now (abort after moving, ...)
    BAD_REQUEST = "bad_request"  # e.g. unknown game kind or algorithm, bad parameters
    # Limits that protect everyone.
    RATE_LIMITED = "rate_limited"
    TOO_MANY = "too_many"  # too many open games or seeks for one connection
    BAD_NAME = "bad_name"  # a player name the server refuses (controls, reserved, look-alike)
    NAME_TAKEN = "name_taken"  # the name (or a look-alike) belongs to another player
    # The server failed; the request may be retried.
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"
    ENGINE_UNAVAILABLE = "engine_unavailable"  # no engine worker can serve the AI now
    STORAGE_FULL = "storage_full"  # the disk is full: the move was not stored; retry later


class ProtocolError(Exception):
    """The peer sent something that is not a valid message. Carries the wire code, and
    the request's ``rid`` when the frame held a readable one (set by the codec)."""

    def __init__(self, code: ErrorCode, message: str, rid: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.rid = rid

    def __repr__(self) -> str:
        return f"ProtocolError({self.code.value!r}, {self.message!r})"

"""Errors the server raises while handling a valid request; each maps to one wire code."""

from __future__ import annotations

from protocol import ErrorCode


class ServerError(Exception):
    """Root of the server's errors; ``code`` is what the client receives."""

    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str, game_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.game_id = game_id


class GameError(ServerError):
    """The game refuses the request; the connection stays open, nothing is stored."""

    code = ErrorCode.BAD_REQUEST


class UnknownGame(GameError):
    code = ErrorCode.UNKNOWN_GAME


class BadToken(GameError):
    code = ErrorCode.BAD_TOKEN


class NotYourTurn(GameError):
    code = ErrorCode.NOT_YOUR_TURN


class IllegalMove(GameError):
    code = ErrorCode.ILLEGAL_MOVE


class StaleMove(GameError):
    code = ErrorCode.STALE_MOVE


class GameOver(GameError):
    code = ErrorCode.GAME_OVER


class SeatTaken(GameError):
    code = ErrorCode.SEAT_TAKEN


class BadRequest(GameError):
    code = ErrorCode.BAD_REQUEST


class NotAllowed(GameError):
    """The rules of the service forbid it now (abort after moving, claim too early...)."""

    code = ErrorCode.NOT_ALLOWED


class UnknownSeek(GameError):
    code = ErrorCode.UNKNOWN_SEEK


class LimitExceeded(ServerError):
    """A cap that protects everyone (open games, seeks, watched games)."""

    code = ErrorCode.TOO_MANY


class BadName(ServerError):
    """The name in hello is refused (server/names.py says why)."""

    code = ErrorCode.BAD_NAME


class NameTaken(ServerError):
    """The name, or a look-alike of it, is bound to another player's session."""

    code = ErrorCode.NAME_TAKEN


class RateLimited(ServerError):
    code = ErrorCode.RATE_LIMITED


class StorageError(ServerError):
    """The store failed; wraps the database driver's error at the store boundary.
    ``message`` is what a client is told: one line that names no path, URL or address
    (PROTOCOL.md, "Storage"); ``detail`` is the cause, for the server's log only."""

    code = ErrorCode.UNAVAILABLE

    def __init__(
        self, message: str, game_id: str | None = None, *, detail: str | None = None
    ) -> None:
        super().__init__(message, game_id)
        self.detail = message if detail is None else detail


class StorageFull(StorageError):
    """The disk, or the database's size cap, is full: nothing was stored; retry later."""

    code = ErrorCode.STORAGE_FULL


class SeekTaken(StorageError):
    """The store refused a second game of one seek (a game row names its seek, unique): the
    seek was taken already and its game made; nothing of this one was stored."""

    code = ErrorCode.UNKNOWN_SEEK


class Quarantined(StorageError):
    """A game whose stored rows cannot be read; set aside (status ``quarantined``) for an
    operator to repair, instead of failing every read that meets it."""


class EngineUnavailable(ServerError):
    """No engine worker can serve the AI: none is up, or none was free in time."""

    code = ErrorCode.ENGINE_UNAVAILABLE


class NodeUnavailable(ServerError):
    """A cluster's node cannot serve the request now (its game's owner does not answer,
    or shards are changing hands): retry soon."""

    code = ErrorCode.UNAVAILABLE

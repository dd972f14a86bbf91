"""The server's request handlers, one module a topic; GameServer (server/app.py)
joins them and routes each request to its handler."""

from server.handlers.games import GameRequests
from server.handlers.lobby import LobbyRequests
from server.handlers.records import RecordRequests
from server.handlers.sessions import SessionRequests

__all__ = ["GameRequests", "LobbyRequests", "RecordRequests", "SessionRequests"]

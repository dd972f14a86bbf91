"""The Textual terminal client: lobby, games, spectating and replays (``noughts play``)."""

from client.ui.app import NoughtsApp, Start

__all__ = ["NoughtsApp", "Start"]

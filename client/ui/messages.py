"""The Textual messages a screen sends up to the app: messages up, attributes down.

A screen asks the app for something by posting a message that bubbles up to it
(``SendRequest``, ``OpenGame``, ``StopFollowing``); the app tells a screen what changed by
setting its attributes and calling its typed methods (``GameScreen.game_changed``,
``LobbyScreen.lobby_message``, ...), never by a method name in a string. No screen imports
the app (Textual's guide, "Attributes down, messages up").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.message import Message as TextualMessage
from textual.screen import Screen

from client.connection import ConnectionLost, RequestFailed
from protocol import Message

OnError = Callable[[RequestFailed], object]
OnLost = Callable[[ConnectionLost], object]

# --- up: a screen asks the app ---------------------------------------------------------------


class SendRequest(TextualMessage):
    """Send ``kind`` with ``fields``; the reply goes to ``on_reply``, a refusal to
    ``on_error``, the request's loss with the connection to ``on_lost`` (a notification
    without them): exactly one of the three settles it."""

    def __init__(
        self,
        kind: type[Message],
        on_reply: Callable[[Any], object] | None = None,
        on_error: OnError | None = None,
        on_lost: OnLost | None = None,
        **fields: Any,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.on_reply = on_reply
        self.on_error = on_error
        self.on_lost = on_lost
        self.fields = fields


class RequestingScreen(Screen[None]):
    """A screen of the app: ``request`` posts a ``SendRequest`` up to it, and the app tells it
    the link's state (``link_changed``), which it shows with ``_show_link``."""

    link_state: tuple[str, str] = ("connecting", "")

    def link_changed(self, state: str, detail: str) -> None:
        self.link_state = (state, detail)
        if self.is_mounted:
            self._show_link()

    def _show_link(self) -> None:
        raise NotImplementedError

    def request(
        self,
        kind: type[Message],
        on_reply: Callable[[Any], object] | None = None,
        on_error: OnError | None = None,
        on_lost: OnLost | None = None,
        **fields: Any,
    ) -> None:
        self.post_message(SendRequest(kind, on_reply, on_error, on_lost, **fields))


class OpenGame(TextualMessage):
    """Open a game's screen: ``how`` is "resume" (one of ours), "watch" or "replay"."""

    def __init__(self, game_id: str, how: str, on_error: OnError | None = None) -> None:
        super().__init__()
        self.game_id = game_id
        self.how = how
        self.on_error = on_error


class RingBell(TextualMessage):
    """Ring the terminal bell (if the player wants it): our clock runs low."""


class StopFollowing(TextualMessage):
    """A game's screen closed: forget the game (and stop watching it)."""

    def __init__(self, game_id: str) -> None:
        super().__init__()
        self.game_id = game_id

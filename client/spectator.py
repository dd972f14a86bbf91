"""Following a game as lines of text: what `noughts watch` prints."""

from __future__ import annotations

import time
from collections.abc import Callable

from client.connection import ServerConnection
from client.game_view import (
    GameModel,
    describe_stats,
    format_clocks,
    game_title,
    offer_sentence,
    player_name,
)
from protocol import Ended, Moved, Offer, Presence, Snapshot


async def follow(connection: ServerConnection, game_id: str, write: Callable[[str], None]) -> Ended:
    """Print a game's events as they come, until it ends; returns the ending."""
    model = GameModel(game_id)
    while True:
        event = await connection.next_event()
        if getattr(event, "game_id", None) != game_id or not model.apply(event, time.monotonic()):
            continue
        if isinstance(event, Snapshot) and model.state is not None:
            x, o = (player_name(p) for p in model.players)
            write(f"Game {game_id}: {game_title(event.game, dict(event.params))}, X = {x}, "
                  f"O = {o}, {event.status}, {len(event.actions)} moves played"
                  f"{format_clocks(event.clocks)}")  # fmt: skip
            write(model.state.render())
        elif isinstance(event, Moved) and model.state is not None and model.moves:
            line = f"{event.ply + 1}. {model.name(event.seat)} played {model.moves[-1].text}"
            if event.stats:
                line += f"  [{describe_stats(event.stats)}]"
            write(line + format_clocks(event.clocks))
            write(model.state.render())
        elif isinstance(event, Offer):
            write(offer_sentence(model.name(event.seat), event.kind, event.answer) + ".")
        elif isinstance(event, Presence):
            write(f"{model.name(event.seat)} {'is back' if event.online else 'left the game'}")
        elif isinstance(event, Ended):
            write(f"Game over: {event.result}. {model.result_sentence()}")
            return event

"""Following a game as lines of text: what `noughts watch` prints."""

from __future__ import annotations

from collections.abc import Callable

import engine
from client.connection import ServerConnection
from client.plain import SYMBOLS, describe_stats, format_clocks, result_text
from protocol import Ended, Moved, Offer, Presence, Snapshot


async def follow(connection: ServerConnection, game_id: str, write: Callable[[str], None]) -> Ended:
    """Print a game's events as they come, until it ends; returns the ending."""
    state: engine.State | None = None
    names = ["X", "O"]
    while True:
        event = await connection.next_event()
        if getattr(event, "game_id", None) != game_id:
            continue
        if isinstance(event, Snapshot):
            state = engine.replay((event.game, dict(event.params)), event.actions)
            names = [p["name"] if p else "(open)" for p in event.players]
            write(f"Game {game_id}: {event.game}, X = {names[0]}, O = {names[1]}, {event.status}, "
                  f"{len(event.actions)} moves played{format_clocks(event.clocks)}")  # fmt: skip
            write(state.render())
        elif isinstance(event, Moved) and state is not None:
            text = state.action_to_string(event.action)
            if event.ply == state.ply():
                state.apply_action(event.action)
            line = f"{event.ply + 1}. {SYMBOLS[event.seat]} ({names[event.seat]}) played {text}"
            if event.stats:
                line += f"  [{describe_stats(event.stats)}]"
            write(line + format_clocks(event.clocks))
            write(state.render())
        elif isinstance(event, Offer):
            write(f"{names[event.seat]} ({SYMBOLS[event.seat]}): {event.kind} {event.answer}")
        elif isinstance(event, Presence):
            status = "is back" if event.online else "left the game"
            write(f"{names[event.seat]} ({SYMBOLS[event.seat]}) {status}")
        elif isinstance(event, Ended):
            write(f"Game over: {event.result}. {result_text(event, None)}")
            return event

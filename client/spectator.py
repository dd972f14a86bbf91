"""Following a game as lines of text: what `noughts watch` prints."""

from __future__ import annotations

import time
from collections.abc import Callable

from client.connection import ConnectionLost, RequestFailed, ServerConnection
from client.game_view import (
    GameModel,
    MoveEntry,
    describe_stats,
    format_clocks,
    game_title,
    offer_sentence,
    player_name,
)
from client.session_core import RESUME_LATER
from protocol import (
    Ended,
    Message,
    Moved,
    Offer,
    Presence,
    RematchClosed,
    Snapshot,
    Unwatch,
    Watch,
)

# How often a watcher waiting for a rematch asks whether the server still keeps the game
# that ended (which it does 10 minutes by default: PROTOCOL.md, rematch).
KEPT_CHECK_S = 30.0
_WINDOW_OVER = "No rematch: the rematch window of game {} is over."


async def follow(
    connection: ServerConnection,
    game_id: str,
    write: Callable[[str], None],
    *,
    rematches: bool = False,
    check_s: float = KEPT_CHECK_S,
) -> Ended:
    """Print a game's events as they come, until it ends; returns the ending. With
    ``rematches``, a game that ended is followed on: once its players agree a rematch (the
    ``offer`` naming ``next_game``, which spectators get too) that game is watched, and so
    on, until cancelled (Lichess moves its spectators to the rematch). A game that ended
    is watched again after a reconnection (its rematch's ``offer`` missed meanwhile comes
    then, or a snapshot naming ``next_game``). Once the server lets a finished game go
    (``keep_finished_s`` after its end, 10 minutes by default, or once both players have
    left) no rematch can be agreed: a server of protocol version 3 says so
    (``rematch_closed``), and a line says it and the ending is returned. An older server
    does not: while waiting, the game is watched again every ``check_s`` from its last seq,
    until the server no longer knows it (``unknown_game``). (With a server of version 3 a
    check only looks whether a reconnection found the game gone, which no message told.)"""
    model = GameModel(game_id)
    shown = -1  # the moves printed so far (-1: no snapshot yet)
    ended: Ended | None = None  # the ending of the game followed, waiting for its rematch

    async def rematch(next_game: str) -> None:
        nonlocal game_id, model, shown, ended
        write(f"Rematch: game {next_game}, colours swapped.")
        await connection.request(Unwatch, game_id=game_id)
        game_id, model, shown, ended = next_game, GameModel(next_game), -1, None
        await connection.request(Watch, game_id=game_id)  # (its snapshot: an event)

    def move_line(entry: MoveEntry) -> str:
        line = f"{entry.ply + 1}. {model.name(entry.seat)} played {entry.text}"
        return line + (f"  [{describe_stats(entry.stats)}]" if entry.stats else "")

    while True:
        try:
            event = await connection.next_event(timeout=None if ended is None else check_s)
        except TimeoutError:  # (waiting for a rematch): is the game still kept?
            told = connection.core.told_rematch_closed and game_id in connection.core.watching
            if told:
                continue  # (rematch_closed will say it)
            if ended is not None and (gone := await _let_go(connection, game_id, ended.seq)):
                write(gone)
                return ended
            continue
        if isinstance(event, RematchClosed):
            if event.game_id == game_id and ended is not None:
                write(_WINDOW_OVER.format(game_id))
                return ended
            continue
        was_open = model.status == "open"
        if getattr(event, "game_id", None) != game_id or not model.apply(event, time.monotonic()):
            continue
        if isinstance(event, Snapshot) and event.next_game and rematches:
            await rematch(event.next_game)  # agreed while we were away (or before watch)
            continue
        elif isinstance(event, Snapshot) and model.state is not None:
            x, o = (player_name(p) for p in model.players)
            if shown < 0:
                write(f"Game {game_id}: {game_title(event.game, dict(event.params))}, "
                      f"X = {x}, O = {o}, {event.status}, {len(event.actions)} moves played"
                      f"{format_clocks(event.clocks)}")  # fmt: skip
            elif was_open and event.status != "open":  # its open seat taken: who plays
                write(f"The game starts: X = {x}, O = {o}{format_clocks(event.clocks)}")
            else:  # a snapshot after a reconnection: the moves made while we were away
                for entry in model.moves[shown:]:
                    write(move_line(entry))
            shown = len(model.moves)
            write(model.state.render())
        elif isinstance(event, Moved) and model.state is not None and model.moves:
            write(move_line(model.moves[-1]) + format_clocks(event.clocks))
            shown = len(model.moves)
            write(model.state.render())
        elif isinstance(event, Offer) and event.next_game and rematches:
            await rematch(event.next_game)
        elif isinstance(event, Offer):
            write(offer_sentence(model.name(event.seat), event.kind, event.answer) + ".")
        elif isinstance(event, Presence):
            write(f"{model.name(event.seat)} {'is back' if event.online else 'left the game'}")
        end = _end_of(event) if ended is None else None
        if end is not None:  # (its snapshot, for a game watched once over, or away at its end)
            write(f"Game over: {end.result}. {model.result_sentence()}")
            if not rematches:
                return end
            ended = end
            connection.core.watch_past_end(game_id, end.seq)  # (again after a reconnection)
            write("Waiting for a rematch (Ctrl-C leaves).")


def _end_of(event: Message) -> Ended | None:
    """The ending an event tells: an ``ended``, or the snapshot of a game that is over."""
    if isinstance(event, Ended):
        return event
    if isinstance(event, Snapshot) and event.status not in ("open", "live"):
        result, reason = event.result or "*", event.reason or ""
        return Ended(
            game_id=event.game_id, seq=event.seq, result=result, reason=reason, at=event.at
        )
    return None


async def _let_go(connection: ServerConnection, game_id: str, ended_seq: int) -> str | None:
    """None while the server keeps the game that ended (a ``watch`` from its last seq: the
    events missed, if any, come as events), else the line that says it no longer does."""
    since = connection.core.last_seq.get(game_id, ended_seq)
    try:
        await connection.request(Watch, game_id=game_id, since=since)
    except RequestFailed as exc:
        if exc.code in RESUME_LATER:
            return None  # (asked again at the next check)
        if exc.code == "unknown_game":
            return _WINDOW_OVER.format(game_id)
        return f"No rematch followed: game {game_id}: {exc.message}"
    except ConnectionLost:
        return None  # (a drop: watched again once back, and checked again after)
    return None

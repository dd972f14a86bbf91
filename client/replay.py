"""Stepping through a stored game: a cursor over its positions, and a plain viewer."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import engine
from client.game_view import (
    SYMBOLS,
    GameDataError,
    checked_move,
    describe_stats,
    known_game,
    player_name,
)

UNFINISHED = {"open": "waiting for an opponent", "live": "in progress"}


class RecordError(GameDataError):
    """A record this client cannot replay: a game it does not know (a newer server's), or
    a move the rules refuse (a damaged database, a hostile server)."""


def checked_game(record: dict[str, Any]) -> engine.Game:
    """The record's game, every move of it checked by the rules from the start (its seat
    the side to move); RecordError, in one line, naming the first that is not."""
    where = f"game {record.get('id', '?')} cannot be replayed"
    try:
        game = known_game(record["game"], record.get("params", {}))
        state = game.new_initial_state()
        for move in record["moves"]:
            checked_move(state, move["action"], move["seat"])
            state.apply_action(move["action"])
    except KeyError as exc:
        raise RecordError(f"{where}: no field {exc}") from exc
    except (GameDataError, TypeError) as exc:
        raise RecordError(f"{where}: {exc}") from exc
    return game


class ReplayCursor:
    """The positions of a recorded game, 0 (empty board) to len(moves); RecordError if the
    record does not replay (``checked_game``)."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.game = checked_game(record)
        self.moves: list[dict[str, Any]] = record["moves"]
        self.ply = 0

    def state_at(self, ply: int) -> engine.State:
        return engine.replay(self.game, [m["action"] for m in self.moves[:ply]])

    @property
    def last(self) -> int:
        return len(self.moves)

    def go(self, ply: int) -> int:
        self.ply = max(0, min(self.last, ply))
        return self.ply

    def header(self) -> str:
        r = self.record
        names = [player_name(p) for p in r["players"]]
        when = datetime.fromtimestamp(r["created_at"], UTC).strftime("%Y-%m-%d %H:%M UTC")
        params = ",".join(f"{k}={v}" for k, v in sorted(r["params"].items()))
        title = r["game"] + (f" ({params})" if params else "")
        if r.get("result"):
            outcome = f"result {r['result']} ({r['reason']})"
        else:  # a game not over: its moves so far
            outcome = UNFINISHED.get(r["status"], r["status"])
        count = len(self.moves)
        return (
            f"Game {r['id']}: {title}, X = {names[0]}, O = {names[1]}, {when}, "
            f"{count} move{'' if count == 1 else 's'}, {outcome}"
        )

    def describe(self) -> str:
        """The board at the cursor and the move that led to it."""
        state = self.state_at(self.ply)
        lines = []
        if self.ply == 0:
            lines.append(f"Position 0 of {self.last}: the start.")
        else:
            move = self.moves[self.ply - 1]
            before = self.state_at(self.ply - 1)
            line = (
                f"Move {self.ply} of {self.last}: {SYMBOLS[move['seat']]} played "
                f"{before.action_to_string(move['action'])}"
            )
            if move.get("stats"):
                stats = move["stats"]
                line += f"  [{describe_stats(stats)}"
                pv = " ".join(_pv_strings(before, stats.get("pv")))
                if pv:
                    line += f"; expected line: {pv}"
                line += "]"
            lines.append(line)
        lines.append(state.render())
        if self.ply == self.last and self.record.get("result"):
            lines.append(f"Result: {self.record['result']} ({self.record['reason']})")
        return "\n".join(lines)


def _pv_strings(state: engine.State, pv: Any) -> list[str]:
    """Principal variation as move names, stopping at the first move that no longer applies
    (none if ``pv``, from the server's unchecked stats, is not a list)."""
    if not isinstance(pv, list):
        return []
    state = state.clone()
    names = []
    for action in pv:
        if state.is_terminal() or action not in state.legal_actions():
            break
        names.append(state.action_to_string(action))
        state.apply_action(action)
    return names


PROMPT = "replay> "
HELP = "n/Enter next, p previous, f first, l last, a number jumps to that move, q quits"


def print_all(cursor: ReplayCursor, write: Callable[[str], None]) -> None:
    """The header and every position, each followed by a blank line."""
    write(cursor.header())
    for ply in range(cursor.last + 1):
        cursor.go(ply)
        write(cursor.describe())
        write("")


async def step_through(
    cursor: ReplayCursor,
    read_line: Callable[[str], Awaitable[str | None]],
    write: Callable[[str], None],
    *,
    prompt: Callable[[str], None],
    all_without_commands: bool = False,
) -> None:
    """Interactive stepping: next, previous, first, last, jump, quit. ``read_line(text)``
    shows the prompt ``text`` and reads a line; ``prompt(text)`` only shows it. With
    ``all_without_commands`` (stdin is not a terminal), input that ends before its first
    command prints every position instead, and each line read at the prompt is written after
    it, as a terminal shows what is typed (not the next position on the prompt's line)."""
    if all_without_commands:
        read_quietly = read_line

        async def read_line(text: str) -> str | None:
            line = await read_quietly(text)
            if text:
                write(line or "")  # (ends the prompt's line, as a terminal's Enter does)
            return line

        line = await read_line("")  # (read before the positions: is any command coming?)
        if line is None:
            print_all(cursor, write)
            return
    else:
        line = None
    write(cursor.header())
    write(HELP)
    write(cursor.describe())
    if line is not None:
        prompt(PROMPT)  # as read_line shows it for the commands after it
        write(line)
    while True:
        if line is None:
            line = await read_line(PROMPT)
            if line is None:
                return
        command = line.strip().lower()
        line = None
        if command in ("q", "quit", "exit"):
            return
        if command in ("", "n", "next"):
            if cursor.ply == cursor.last:
                write("That was the last move (p goes back, q quits).")
                continue
            cursor.go(cursor.ply + 1)
        elif command in ("p", "prev", "previous"):
            cursor.go(cursor.ply - 1)
        elif command in ("f", "first"):
            cursor.go(0)
        elif command in ("l", "last"):
            cursor.go(cursor.last)
        elif re.fullmatch(r"[+-]?[0-9]+", command):
            number = int(command)
            if not 0 <= number <= cursor.last:
                write(f"There is no move {number}: give 0 (the start) to {cursor.last}.")
                continue
            cursor.go(number)
        else:
            write(HELP)
            continue
        write(cursor.describe())

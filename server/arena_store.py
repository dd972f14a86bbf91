"""``python -m server.arena_store [--db PATH]``: store the games of a ``noughts arena`` match.

The arena runs on the client side, which never imports the server; when asked to store its
games it runs this module as a child process and writes one JSON document on its stdin::

    {"game": "uttt", "params": {}, "seed": 108,
     "a": {"text": "mcts:100ms", "algorithm": "mcts", "budget_ms": 100.0, ...},
     "b": {...},
     "records": [{"index": 0, "seed": ..., "a_first": true, "result": "win",
                  "forfeit": null, "actions": [...],
                  "move_stats": [{...SearchResult.to_dict()...}, ...],
                  "move_at": [1732330000.1, ...], "started_at": 1732330000.0}, ...]}

Each record becomes a finished game, written through ``SQLiteStore`` like a game played on
the server: the players are ``kind: "ai"`` with their algorithm and budget, one move row per
move with the search statistics, and the end (result, reason) in the same transaction as the
last move. The moves are replayed with the engine first (the trust boundary: a record that
does not replay to its stated result is refused, and nothing of the match is written). Prints
``{"db": PATH, "game_ids": [...]}`` on stdout; exits 1 with a message on stderr on failure.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import engine
from engine.command_line import CommandParser
from server.errors import StorageError
from server.rows import GameEnd, GameRow, MoveRow
from server.session import RESULTS, new_game_id
from server.store import SQLiteStore, default_db_path

MAX_INPUT_BYTES = 256 * 1024 * 1024


class ArenaRecordError(ValueError):
    """A match document or game record that cannot be stored as it is."""


def _player(spec: dict[str, Any], label: str, match_seed: Any, index: int) -> dict[str, Any]:
    return {
        "name": f"{spec.get('text') or spec.get('algorithm')} ({label})",
        "kind": "ai",
        "algorithm": spec.get("algorithm"),
        "budget_ms": spec.get("budget_ms"),
        "iterations": spec.get("iterations"),
        "options": spec.get("options") or {},
        "arena": {"seed": match_seed, "game": index, "side": label},
    }


def game_rows(
    document: dict[str, Any], now: float | None = None
) -> list[tuple[GameRow, list[MoveRow], GameEnd]]:
    """The rows of every game of the match document, each checked by replaying its moves."""
    try:
        name = str(document["game"])
        params = {str(k): int(v) for k, v in dict(document.get("params") or {}).items()}
        specs = {"A": dict(document["a"]), "B": dict(document["b"])}
        records = list(document["records"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ArenaRecordError(f"not an arena match document: {exc!r}") from exc
    try:
        game = engine.make_game(name, **params)
    except engine.EngineError as exc:
        raise ArenaRecordError(f"bad game: {exc}") from exc
    stamp = time.time() if now is None else now
    out = []
    for record in records:
        try:
            index = int(record["index"])
            a_first = bool(record["a_first"])
            actions = [int(a) for a in record["actions"]]
            stated = str(record["result"])
            forfeit = record.get("forfeit")
        except (KeyError, TypeError, ValueError) as exc:
            raise ArenaRecordError(f"bad game record: {exc!r}") from exc
        try:
            state = engine.replay(game, actions)
        except engine.EngineError as exc:
            raise ArenaRecordError(f"game {index}: its moves do not replay: {exc}") from exc
        a_seat = 0 if a_first else 1
        if forfeit in ("a", "b"):
            # The forfeiting side's illegal move is not in the record: it loses.
            winner: int | None = a_seat if forfeit == "b" else 1 - a_seat
            reason = "illegal"
        elif state.is_terminal():
            winner = state.winner()
            reason = "line" if winner is not None else "draw"
        else:
            raise ArenaRecordError(f"game {index}: its moves do not end the game")
        outcome = "draw" if winner is None else "win" if winner == a_seat else "loss"
        if outcome != stated:
            raise ArenaRecordError(f"game {index}: the moves give A a {outcome}, not a {stated}")
        stats = list(record.get("move_stats") or [None] * len(actions))
        times = [float(t) for t in record.get("move_at") or []]
        if len(stats) != len(actions) or (times and len(times) != len(actions)):
            raise ArenaRecordError(f"game {index}: one statistic and time per move expected")
        started = float(record.get("started_at") or stamp)
        if not times:
            times = [started] * len(actions)
        players: list[dict[str, Any] | None] = [
            _player(specs["A" if seat == a_seat else "B"], "A" if seat == a_seat else "B",
                    document.get("seed"), index)
            for seat in (0, 1)
        ]  # fmt: skip
        game_id = new_game_id()
        # seq as the server counts it: 1 when the game starts, one per move, one for the end.
        row = GameRow(
            id=game_id,
            game=name,
            params=dict(game.params),
            status="live",
            players=players,
            created_at=started,
            seq=1,
            started_at=started,
        )
        moves = [
            MoveRow(game_id, ply, 2 + ply, ply & 1, action, times[ply], stats[ply])
            for ply, action in enumerate(actions)
        ]
        ended = times[-1] if times else started
        out.append((row, moves, GameEnd(RESULTS[winner], reason, 2 + len(actions), ended)))
    return out


async def store_match(path: str, document: dict[str, Any]) -> list[str]:
    """Write every game of the match; returns their ids in the order of the records."""
    games = game_rows(document)
    store = SQLiteStore(path)
    await store.open()
    try:
        for row, moves, end in games:
            await store.create_game(row)
            writes = [store.append_move(m, end if i == len(moves) - 1 else None)
                      for i, m in enumerate(moves)]  # fmt: skip
            if not moves:
                writes.append(store.end_game(row.id, end))
            await asyncio.gather(*writes)  # queued together: one transaction (group commit)
    finally:
        await store.close()
    return [row.id for row, _, _ in games]


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m server.arena_store", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", default=None, help="SQLite file (default: $NOUGHTS_DB, else the server's default)"
    )
    args = parser.parse_args(argv)
    path = args.db or str(default_db_path())
    raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    try:
        if len(raw) > MAX_INPUT_BYTES:
            raise ArenaRecordError(f"input larger than {MAX_INPUT_BYTES} bytes")
        try:
            document = json.loads(raw)
        except ValueError as exc:
            raise ArenaRecordError(f"input is not JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise ArenaRecordError("input is not a JSON object")
        ids = asyncio.run(store_match(path, document))
    except (ArenaRecordError, StorageError) as exc:
        print(f"arena_store: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"db": path, "game_ids": ids}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

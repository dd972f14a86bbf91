"""Requests for stored games: list, get."""

from __future__ import annotations

from typing import Any

from protocol import GameList, GetGame, ListGames, Record, encode, encode_prepacked, pack
from server.connection import Connection
from server.errors import UnknownGame
from server.game_events import GameEvents
from server.hub import UNFINISHED
from server.rows import GameRow


class RecordRequests(GameEvents):
    """The handlers of requests for stored games."""

    async def on_list(self, connection: Connection, request: ListGames) -> None:
        self._charge(connection, self.settings.cost_list, "list")
        if request.status in UNFINISHED and not self.settings.restore_games:
            # (a server that only reads, --restore-games false: the stored games, none served)
            rows = await self.store.list_games(request.status, request.limit, public=True)
            games = [self._listed(r) for r in rows]
        elif request.status in UNFINISHED:
            games = [
                s.summary()
                for s in self.games.values()
                if s.status == request.status and not s.private
            ][: request.limit]
            if self.cluster is not None and request.status == "live":  # owned elsewhere
                listed = self.cluster.listed
                games += [listed[g][1] for g in listed if g not in self.games]
                games = games[: request.limit]
            elif self.cluster is not None and len(games) < request.limit:  # open elsewhere
                games += await self.cluster.open_elsewhere(request.limit)
                games = games[: request.limit]
        else:
            rows = await self.store.list_games(request.status, request.limit)
            games = [self._listed(r) for r in rows]
        self._send_charged(connection, encode(GameList(rid=request.rid, games=games)))

    @staticmethod
    def _listed(r: GameRow) -> dict[str, Any]:
        """A stored game as ``list`` gives it."""
        return {
            "game_id": r.id,
            "game": r.game,
            "params": r.params,
            "status": r.status,
            "players": r.players,
            "result": r.result,
            "reason": r.reason,
            "created_at": r.created_at,
            "clock": r.clock or {},
        }

    async def on_get(self, connection: Connection, request: GetGame) -> None:
        self._charge(connection, self.settings.cost_get, "get")
        loaded = self.games.get(request.game_id)
        packed = self.records.get(request.game_id, None if loaded is None else loaded.seq)
        if packed is None:
            record = await self.store.get_game(request.game_id)
            if record is None:
                raise UnknownGame(f"no game {request.game_id!r}", request.game_id)
            packed = pack(record.to_dict())
            self.records.put(request.game_id, packed, record.row.seq, final=loaded is None)
        reply = Record(rid=request.rid, game={})
        self._send_charged(connection, encode_prepacked(reply, {"game": packed}))

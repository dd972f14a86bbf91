"""One game on the server as a state machine fed by validated events (sans-I/O).

A GameSession holds the authoritative engine State, the two seats and their
secret tokens, and the event sequence number. Its methods either raise a
GameError naming the problem (and change nothing) or change the game and
return what must be stored; the caller stores it, then broadcasts.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import engine
from protocol import Snapshot
from server.errors import (
    BadRequest,
    BadToken,
    GameOver,
    IllegalMove,
    NotYourTurn,
    SeatTaken,
    StaleMove,
)
from server.store import GameEnd, GameRow, MoveRow

RESULTS = {0: "1-0", 1: "0-1", None: "1/2-1/2"}


def new_game_id() -> str:
    """Eight characters from a 32-letter alphabet: 40 random bits, easy to type."""
    alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
    return "".join(secrets.choice(alphabet) for _ in range(8))


def new_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(slots=True)
class Player:
    name: str
    kind: str  # human | ai | bot
    player_id: str | None = None
    algorithm: str | None = None
    budget_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.player_id is not None:
            d["player_id"] = self.player_id
        if self.algorithm is not None:
            d["algorithm"] = self.algorithm
            d["budget_ms"] = self.budget_ms
        return d


@dataclass(slots=True)
class MovePlayed:
    """What one accepted move produced: the row to store and, if it ended the game, the end."""

    move: MoveRow
    to_move: int
    end: GameEnd | None = None
    winner: int | None = None


@dataclass(slots=True)
class GameSession:
    id: str
    game: engine.Game
    state: engine.State
    created_at: float
    players: list[Player | None] = field(default_factory=lambda: [None, None])
    tokens: list[str | None] = field(default_factory=lambda: [None, None])
    seq: int = 0
    status: str = "open"
    result: str | None = None
    reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None

    @classmethod
    def new(cls, game_name: str, params: dict[str, int], now: float) -> GameSession:
        try:
            game = engine.make_game(game_name, **params)
        except engine.EngineError as exc:
            raise BadRequest(str(exc)) from exc
        return cls(new_game_id(), game, game.new_initial_state(), now)

    # --- seats -----------------------------------------------------------------------

    def take_seat(self, seat: int, player: Player) -> str:
        """Give ``seat`` to ``player``; returns the seat's secret token."""
        if self.status != "open":
            raise SeatTaken(f"game {self.id} is {self.status}: no seat is open", self.id)
        if self.players[seat] is not None:
            raise SeatTaken(f"seat {seat} of game {self.id} is taken", self.id)
        self.players[seat] = player
        token = new_token()
        self.tokens[seat] = token
        return token

    def open_seat(self) -> int | None:
        for seat in (0, 1):
            if self.players[seat] is None:
                return seat
        return None

    def start(self, now: float) -> None:
        self.status = "live"
        self.started_at = now
        self.seq += 1

    def seat_of(self, token: str) -> int:
        for seat, held in enumerate(self.tokens):
            if held is not None and secrets.compare_digest(held, token):
                return seat
        raise BadToken(f"this token holds no seat in game {self.id}", self.id)

    # --- moves -----------------------------------------------------------------------

    def play(
        self,
        seat: int,
        action: int,
        now: float,
        *,
        ply: int | None = None,
        stats: dict[str, Any] | None = None,
    ) -> MovePlayed:
        """Validate and apply one move; raises a GameError and changes nothing if refused."""
        if self.status in ("finished", "aborted"):
            raise GameOver(f"game {self.id} is over ({self.result}, {self.reason})", self.id)
        if self.status != "live":
            raise NotYourTurn(f"game {self.id} has not started: waiting for a player", self.id)
        current = self.state.current_player()
        if seat != current:
            raise NotYourTurn(f"it is seat {current}'s turn in game {self.id}, not yours", self.id)
        played = self.state.ply()
        if ply is not None and ply != played:
            raise StaleMove(f"move for ply {ply}, but game {self.id} is at ply {played}", self.id)
        try:
            self.state.apply_checked(action)
        except engine.IllegalMove as exc:
            raise IllegalMove(f"illegal move {action} in game {self.id}: {exc}", self.id) from exc
        self.seq += 1
        move = MoveRow(self.id, played, self.seq, seat, action, now, stats)
        if not self.state.is_terminal():
            return MovePlayed(move, self.state.current_player())
        winner = self.state.winner()
        end = self._finish(RESULTS[winner], "line" if winner is not None else "draw", now)
        return MovePlayed(move, engine.TERMINAL, end, winner)

    def resign(self, seat: int, now: float) -> GameEnd:
        if self.status in ("finished", "aborted"):
            raise GameOver(f"game {self.id} is already over", self.id)
        if self.status == "open":
            return self._finish(RESULTS[None], "abort", now)
        return self._finish(RESULTS[1 - seat], "resign", now)

    def _finish(self, result: str, reason: str, now: float) -> GameEnd:
        self.status = "aborted" if reason == "abort" else "finished"
        self.result = result
        self.reason = reason
        self.ended_at = now
        self.seq += 1
        return GameEnd(result, reason, self.seq, now)

    @property
    def winner(self) -> int | None:
        return {"1-0": 0, "0-1": 1}.get(self.result or "")

    # --- views -----------------------------------------------------------------------

    def to_row(self) -> GameRow:
        return GameRow(
            id=self.id,
            game=self.game.name,
            params=dict(self.game.params),
            status=self.status,
            players=[p.to_dict() if p else None for p in self.players],
            created_at=self.created_at,
            seq=self.seq,
            result=self.result,
            reason=self.reason,
            started_at=self.started_at,
            ended_at=self.ended_at,
        )

    def summary(self) -> dict[str, Any]:
        return {
            "game_id": self.id,
            "game": self.game.name,
            "params": dict(self.game.params),
            "status": self.status,
            "players": [p.to_dict() if p else None for p in self.players],
            "ply": self.state.ply(),
            "created_at": self.created_at,
        }

    def snapshot(self, rid: int | None = None) -> Snapshot:
        to_move = self.state.current_player() if self.status == "live" else engine.TERMINAL
        return Snapshot(
            game_id=self.id,
            seq=self.seq,
            game=self.game.name,
            params=dict(self.game.params),
            players=[p.to_dict() if p else None for p in self.players],
            actions=self.state.history(),
            status=self.status,  # type: ignore[arg-type]
            to_move=to_move,
            result=self.result,
            reason=self.reason,
            rid=rid,
        )

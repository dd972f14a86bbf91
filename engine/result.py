"""What a search returns: ``SearchResult``, small, frozen and picklable (never its tree)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from engine.errors import EngineError

__all__ = ["Proof", "SearchResult"]

Proof = Literal["win", "draw", "loss"]  # a proven result, for the player to move
PROOFS: tuple[Proof, ...] = ("win", "draw", "loss")


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What a search decided and what it did to decide it."""

    action: int
    value: float  # expected return for the player to move at the root, in [-1, 1]
    algorithm: str
    iterations: int  # playouts for Monte Carlo searches, nodes for tree searches
    elapsed_ms: float = 0.0
    pv: tuple[int, ...] = ()
    visits: tuple[tuple[int, int], ...] | None = None  # (action, visits) per root move
    depth: int | None = None
    proven: Proof | None = None
    seed: int | None = None
    budget_ms: float | None = None  # the time budget, None for an iteration budget alone

    @property
    def win_probability(self) -> float:
        return (self.value + 1.0) / 2.0

    def to_dict(self) -> dict[str, Any]:
        """Plain builtins only (lists for tuples), for storage and the wire; a field that is
        None is left out, as everywhere on the wire (PROTOCOL.md, "nil")."""
        # Shallow: dataclasses.asdict deep-copies each of up to 225 visit pairs (about
        # 1 ms on gomoku, paid in the worker after the deadline on every AI move).
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["pv"] = list(self.pv)
        if self.visits is not None:
            data["visits"] = [list(v) for v in self.visits]
        return {name: value for name, value in data.items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchResult:
        """The inverse of ``to_dict`` (a stored or received result); EngineError if malformed."""
        try:
            visits = data.get("visits")
            proven = data.get("proven")
            if proven is not None and proven not in PROOFS:
                raise ValueError(f"proven {proven!r}")
            return cls(
                action=int(data["action"]),
                value=float(data["value"]),
                algorithm=str(data["algorithm"]),
                iterations=int(data["iterations"]),
                elapsed_ms=float(data.get("elapsed_ms", 0.0)),
                pv=tuple(int(a) for a in data.get("pv") or ()),
                visits=None if visits is None else tuple((int(a), int(v)) for a, v in visits),
                depth=None if data.get("depth") is None else int(data["depth"]),
                proven=proven,
                seed=None if data.get("seed") is None else int(data["seed"]),
                budget_ms=None if data.get("budget_ms") is None else float(data["budget_ms"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EngineError(f"not a search result: {exc}") from exc

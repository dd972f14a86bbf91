"""The engine: rules of the tic-tac-toe family and the searches that play them.

Pure (no I/O, no asyncio): time and randomness come in as arguments. Importing it loads the
rules and the registries only; numpy and numba load when a search first runs, so a command's
``--help`` stays fast. The front door:

- games: ``GAMES`` (the registry), ``make_game``, ``replay``, ``default_ai``; ``Game`` / ``State``;
- searches: ``ALGORITHMS`` (the registry), ``search`` / ``Searcher`` taking a ``Budget`` and
  the algorithm's options dataclass, returning a ``SearchResult``; ``check_algorithm``;
- ``warm_up`` (compile ahead), ``solve`` and ``label_moves`` (exact values, small boards).
"""

from __future__ import annotations

from engine.algorithms import ALGORITHMS, Algorithm, algorithm, check_algorithm
from engine.errors import EngineError, IllegalMove
from engine.game import TERMINAL, Game, State
from engine.games import GAME_NAMES, GAMES, GameType, default_ai, make_game, replay
from engine.mnk import MNKGame, MNKState
from engine.options import (
    DEFAULT_BUDGET,
    AlphaBetaOptions,
    Budget,
    MCTSOptions,
    MinimaxOptions,
    NoOptions,
    Options,
    UCTOptions,
    parse_options,
)
from engine.result import SearchResult
from engine.search import Searcher, search
from engine.tictactoe import TicTacToeGame, TicTacToeState
from engine.uttt import UTTTGame, UTTTState
from engine.warmup import warm_up


def solve(state: State) -> int:
    """Perfect-play value for the player to move (+1 win, 0 draw, -1 loss); m*n <= 16."""
    from engine.perfect import solve as _solve

    return _solve(state)


def label_moves(game: Game, actions: list[int]) -> list[str | None]:
    """For each move, the position before it as "win"/"draw"/"loss" for the mover (or None)."""
    from engine.perfect import label_moves as _label_moves

    return _label_moves(game, actions)


__all__ = [
    "ALGORITHMS",
    "DEFAULT_BUDGET",
    "GAMES",
    "GAME_NAMES",
    "TERMINAL",
    "Algorithm",
    "AlphaBetaOptions",
    "Budget",
    "EngineError",
    "Game",
    "GameType",
    "IllegalMove",
    "MCTSOptions",
    "MNKGame",
    "MNKState",
    "MinimaxOptions",
    "NoOptions",
    "Options",
    "SearchResult",
    "Searcher",
    "State",
    "TicTacToeGame",
    "TicTacToeState",
    "UCTOptions",
    "UTTTGame",
    "UTTTState",
    "algorithm",
    "check_algorithm",
    "default_ai",
    "label_moves",
    "make_game",
    "parse_options",
    "replay",
    "search",
    "solve",
    "warm_up",
]

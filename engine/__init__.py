"""The engine: rules of the tic-tac-toe family and the searches that play them.

Pure (no I/O, no asyncio): time and randomness come in as arguments. The public
API is documented in notes/ENGINE_CONTRACT.md; see ``make_game``, ``search``,
``Searcher``, ``solve`` and ``label_moves``.
"""

from __future__ import annotations

from typing import Any

from engine.errors import EngineError, IllegalMove
from engine.game import TERMINAL, Game, State
from engine.mnk import PRESETS, MNKGame, MNKState
from engine.tictactoe import TicTacToeGame, TicTacToeState
from engine.uttt import UTTTGame, UTTTState

GAME_NAMES: tuple[str, ...] = ("tictactoe", "mnk", "5x5", "gomoku", "uttt")


def make_game(name: str, **params: Any) -> Game:
    """A game by name: "tictactoe", "mnk" (m, n, k), presets "5x5" and "gomoku", "uttt"."""
    if name in ("tictactoe", "uttt"):
        if params:
            raise EngineError(f"{name} takes no parameters, got {sorted(params)}")
        return TicTacToeGame() if name == "tictactoe" else UTTTGame()
    if name in PRESETS:
        preset = PRESETS[name]
        if params and params != preset:
            raise EngineError(f"{name} is m={preset['m']}, n={preset['n']}, k={preset['k']}")
        return MNKGame(**preset)
    if name == "mnk":
        unknown = set(params) - {"m", "n", "k"}
        missing = {"m", "n", "k"} - set(params)
        if unknown:
            raise EngineError(f"mnk takes parameters m, n and k, not {sorted(unknown)}")
        if missing:
            raise EngineError(f"mnk needs parameters m, n and k (missing {sorted(missing)})")
        return MNKGame(params["m"], params["n"], params["k"])
    raise EngineError(f"unknown game {name!r}: choose one of {', '.join(GAME_NAMES)}")


def replay(game: Game | tuple[str, dict[str, int]], actions: Any) -> State:
    """The state after playing ``actions`` from the start, each checked."""
    if not isinstance(game, Game):
        name, params = game
        game = make_game(name, **params)
    state = game.new_initial_state()
    for action in actions:
        state.apply_checked(action)
    return state


from engine.search import (  # noqa: E402 (after the games: algorithms import them)
    ALGORITHM_FUNCS,
    Searcher,
    SearchResult,
    algorithms,
    search,
)

ALGORITHMS: tuple[str, ...] = algorithms()


def warm_up() -> None:
    """Compile or load every numba kernel (cache=True) so no JIT runs on the request path."""
    import importlib

    for module in ("engine.kernels", "engine.alphabeta_driver", "engine.perfect"):
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            raise
        func = getattr(loaded, "warm_up", None)
        if func is not None:
            func()


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
    "ALGORITHM_FUNCS",
    "GAME_NAMES",
    "TERMINAL",
    "EngineError",
    "Game",
    "IllegalMove",
    "MNKGame",
    "MNKState",
    "SearchResult",
    "Searcher",
    "State",
    "TicTacToeGame",
    "TicTacToeState",
    "UTTTGame",
    "UTTTState",
    "label_moves",
    "make_game",
    "replay",
    "search",
    "solve",
    "warm_up",
]

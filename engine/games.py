"""The games registry: every game the engine plays, by name, in one place.

Adding a game is one entry in ``GAMES`` (OpenSpiel's registration): its name, a one-line
title for menus and ``--help``, the integer parameters it takes, how to build it, and the
search that plays it unless told otherwise (``ai``: what a player, a bot or the server's AI
seat gets without naming one). A game
keeps the name it was created with everywhere (games list, snapshots, records, exports):
``make_game("gomoku").spec() == ("gomoku", {})``. Searches and kernels know games by their
rules (``MNKGame``, ``UTTTGame``), never by these names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import EngineError
from engine.game import Game, State
from engine.mnk import MNKGame
from engine.tictactoe import TicTacToeGame
from engine.uttt import UTTTGame

__all__ = ["GAMES", "GAME_NAMES", "GameType", "default_ai", "make_game", "replay"]

# The strongest search for each game, as measured (bench/README.md): tic-tac-toe is solved
# whole by ``perfect`` (exact play that sets traps; its kernel also compiles in ~4 s where
# mcts's takes ~35 s on a first start); on gomoku ``alphabeta`` scores 0.98 against ``mcts``
# at 200 ms; ``mcts`` elsewhere.
DEFAULT_AI = "mcts"


@dataclass(frozen=True, slots=True)
class GameType:
    """One entry of the registry: a named game and how to build it from its parameters."""

    name: str
    title: str  # one line for menus and --help
    build: Callable[..., Game]  # called with the parameters as keywords
    parameters: tuple[str, ...] = ()  # the integer parameters it takes, all required
    preset: Mapping[str, int] | None = None  # a named m,n,k board: its m, n and k
    sample: Mapping[str, int] | None = None  # parameters to try it with (warm-up, tests)
    ai: str = DEFAULT_AI  # the search that plays it unless told otherwise

    def make(self, params: Mapping[str, Any]) -> Game:
        """The game with these parameters, or EngineError saying what is wrong."""
        given = dict(params)
        if self.preset is not None and given == dict(self.preset):
            given = {}  # "gomoku" with its own m, n and k spelled out
        if not self.parameters:
            if given:
                if self.preset is not None:
                    m, n, k = (self.preset[p] for p in ("m", "n", "k"))
                    raise EngineError(f"{self.name} is m={m}, n={n}, k={k} and takes no parameters")
                raise EngineError(f"{self.name} takes no parameters, got {sorted(given)}")
            return self.build()
        unknown = set(given) - set(self.parameters)
        missing = set(self.parameters) - set(given)
        names = ", ".join(self.parameters)
        if unknown:
            raise EngineError(f"{self.name} takes parameters {names}, not {sorted(unknown)}")
        if missing:
            raise EngineError(f"{self.name} needs parameters {names} (missing {sorted(missing)})")
        return self.build(**given)


def _preset(name: str, title: str, m: int, n: int, k: int, ai: str = DEFAULT_AI) -> GameType:
    def build() -> Game:
        return MNKGame(m, n, k, preset=name)

    return GameType(name, title, build, preset={"m": m, "n": n, "k": k}, ai=ai)


GAMES: Mapping[str, GameType] = {
    game.name: game
    for game in (
        GameType(
            "tictactoe",
            "tic-tac-toe: 3x3, three in a row",
            TicTacToeGame,
            preset={"m": 3, "n": 3, "k": 3},
            ai="perfect",
        ),  # fmt: skip
        _preset("5x5", "5x5, four in a row", 5, 5, 4),
        _preset(
            "gomoku", "gomoku: 15x15, five or more in a row (freestyle)", 15, 15, 5, "alphabeta"
        ),
        GameType("uttt", "ultimate tic-tac-toe: nine boards in one", UTTTGame),
        GameType(
            "mnk",
            "m,n,k: m rows, n columns, k or more in a row",
            MNKGame,
            ("m", "n", "k"),
            sample={"m": 7, "n": 7, "k": 5},
        ),  # fmt: skip
    )
}
GAME_NAMES: tuple[str, ...] = tuple(GAMES)


def make_game(name: str, **params: Any) -> Game:
    """A game by its registered name (``GAMES``) and parameters (``mnk``: m, n and k)."""
    game_type = GAMES.get(name)
    if game_type is None:
        raise EngineError(f"unknown game {name!r}: choose one of {', '.join(GAME_NAMES)}")
    return game_type.make(params)


def default_ai(game: str | Game) -> str:
    """The search that plays ``game`` (a registered name, or a game) unless told otherwise."""
    name = game if isinstance(game, str) else game.spec()[0]
    game_type = GAMES.get(name)
    if game_type is None:
        raise EngineError(f"unknown game {name!r}: choose one of {', '.join(GAME_NAMES)}")
    return game_type.ai


def replay(
    game: Game | tuple[str, Mapping[str, int]], actions: Iterable[int], *, trusted: bool = False
) -> State:
    """The state after playing ``actions`` from the start, each one checked (``IllegalMove``).

    ``trusted=True`` applies them unchecked: for moves that already passed the check at the
    trust boundary (the server's), such as the move list an engine worker is sent."""
    if not isinstance(game, Game):
        name, params = game
        game = make_game(name, **params)
    state = game.new_initial_state()
    apply = state.apply_action if trusted else state.apply_checked
    for action in actions:
        apply(action)
    return state

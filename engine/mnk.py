"""m,n,k-games: an m-row by n-column board, k or more in a row wins.

Named boards (engine/games.py: "5x5", "gomoku", ...) are MNKGames with a preset name: they
keep that name and take no parameters. Actions are ``row * n + col``.
"""

from __future__ import annotations

import random

from engine.errors import IllegalMove
from engine.game import Game, RecordedState, check_int_param
from engine.notation import Grid

MIN_SIDE, MAX_SIDE = 3, 20  # 20: the Gomocup's big board
EMPTY = -1
SYMBOLS = ("X", "O")
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))

_ZOBRIST_CACHE: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}


def zobrist_table(cells: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Fixed 64-bit Zobrist keys per (player, cell) (Zobrist 1970), same in every process."""
    table = _ZOBRIST_CACHE.get(cells)
    if table is None:
        rng = random.Random(0x5EED + cells)
        table = (
            tuple(rng.getrandbits(64) for _ in range(cells)),
            tuple(rng.getrandbits(64) for _ in range(cells)),
        )
        _ZOBRIST_CACHE[cells] = table
    return table


class MNKGame(Game):
    """The m,n,k-game: ``name`` is "mnk" and ``params`` are m, n and k; a named board
    (``preset``, e.g. "gomoku") keeps its own name and takes no parameters."""

    def __init__(self, m: int, n: int, k: int, *, preset: str | None = None) -> None:
        self.m = check_int_param("m", m, MIN_SIDE, MAX_SIDE)
        self.n = check_int_param("n", n, MIN_SIDE, MAX_SIDE)
        self.k = check_int_param("k", k, 3, max(self.m, self.n))
        self.cells = self.m * self.n
        self.grid = Grid(self.m, self.n)  # cells as people name them (engine/notation.py)
        self.zobrist = zobrist_table(self.cells)
        self.preset = preset
        self.name = preset or "mnk"

    @property
    def params(self) -> dict[str, int]:
        if self.preset is not None:
            return {}
        return {"m": self.m, "n": self.n, "k": self.k}

    def num_distinct_actions(self) -> int:
        return self.cells

    def max_game_length(self) -> int:
        return self.cells

    def new_initial_state(self) -> MNKState:
        return MNKState(self)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_mnk, (self.m, self.n, self.k, self.preset))


class MNKState(RecordedState):
    """A position of an m,n,k-game: the board (-1 empty, 0 X, 1 O) and the moves so far."""

    __slots__ = ("game", "board", "_history", "_winner", "_over", "_line", "zobrist")

    def __init__(self, game: MNKGame) -> None:
        self.game: MNKGame = game
        self.board: list[int] = [EMPTY] * game.cells
        self._begin_record()

    # --- the interface ----------------------------------------------------------
    def legal_actions(self) -> list[int]:
        if self._over:
            return []
        return [i for i, v in enumerate(self.board) if v == EMPTY]

    def apply_action(self, action: int) -> None:
        player = len(self._history) & 1
        self.board[action] = player
        self._history.append(action)
        self.zobrist ^= self.game.zobrist[player][action]
        line = self._line_through(action, player)
        if line is not None:
            self._winner, self._over, self._line = player, True, line
        elif len(self._history) == self.game.cells:
            self._over = True

    def illegal_reason(self, action: int) -> str | None:
        if self._over:
            return "the game is over"
        if not 0 <= action < self.game.cells:
            return f"move {action} is out of range 0..{self.game.cells - 1}"
        if self.board[action] != EMPTY:
            owner = SYMBOLS[self.board[action]]
            return f"cell {self.action_to_string(action)} is occupied by {owner}"
        return None

    def clone(self) -> MNKState:
        other = type(self).__new__(type(self))
        other.game = self.game
        other.board = self.board.copy()
        self._copy_record(other)
        return other

    def wins_with(self, action: int, player: int) -> bool:
        """Would ``player`` complete a line by playing the empty cell ``action``?"""
        return self._line_through(action, player, hypothetical=True) is not None

    # --- text (engine/notation.py) -----------------------------------------------------
    def action_to_string(self, action: int) -> str:
        return self.game.grid.name(action)

    def parse_action(self, text: str) -> int:
        """A cell name ("b2"), or the action number or 0-based "row,col"; must be legal here."""
        action = self.game.grid.parse(str(text))
        reason = self.illegal_reason(action)
        if reason is not None:
            raise IllegalMove(reason)
        return action

    def render(self) -> str:
        return self.game.grid.render(self.board, SYMBOLS)

    # --- equality: same game, same board --------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MNKState):
            return NotImplemented
        return self.game == other.game and self.board == other.board

    def __hash__(self) -> int:
        return hash((self.game.cells, self.zobrist))

    def __repr__(self) -> str:
        return f"<{self.game!r} state {self._history}>"

    def __getstate__(self) -> tuple[object, ...]:
        return (self.game, self._history)

    def __setstate__(self, data: tuple[object, ...]) -> None:
        game, history = data
        self.__init__(game)  # type: ignore[misc]
        for action in history:  # type: ignore[attr-defined]
            self.apply_action(action)

    # --- rules ----------------------------------------------------------------------
    def _line_through(
        self, action: int, player: int, hypothetical: bool = False
    ) -> list[int] | None:
        """The run of ``player`` stones through ``action`` if it is k or more long."""
        m, n, k = self.game.m, self.game.n, self.game.k
        board = self.board
        row, col = divmod(action, n)
        for dr, dc in DIRECTIONS:
            run = [action]
            for sign in (1, -1):
                r, c = row + sign * dr, col + sign * dc
                while 0 <= r < m and 0 <= c < n and board[r * n + c] == player:
                    run.append(r * n + c)
                    r += sign * dr
                    c += sign * dc
            if len(run) >= k:
                return sorted(run)
        return None


def _rebuild_mnk(m: int, n: int, k: int, preset: str | None) -> MNKGame:
    return MNKGame(m, n, k, preset=preset)

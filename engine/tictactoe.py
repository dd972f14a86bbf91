"""Tic-tac-toe: the 3x3 m,n,k-game with k=3, with its own name and a friendlier drawing."""

from __future__ import annotations

from engine.mnk import EMPTY, SYMBOLS, MNKGame, MNKState


class TicTacToeGame(MNKGame):
    def __init__(self) -> None:
        super().__init__(3, 3, 3, preset="tictactoe")

    def new_initial_state(self) -> TicTacToeState:
        return TicTacToeState(self)

    def __reduce__(self) -> tuple[object, ...]:
        return (TicTacToeGame, ())


class TicTacToeState(MNKState):
    """Same rules as MNKState; renders with the cell numbers in the empty cells."""

    __slots__ = ()

    def render(self) -> str:
        def cell(i: int) -> str:
            v = self.board[i]
            return str(i) if v == EMPTY else SYMBOLS[v]

        rows = [" " + " | ".join(cell(r * 3 + c) for c in range(3)) for r in range(3)]
        return "\n---+---+---\n".join(rows)

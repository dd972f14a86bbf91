"""Tic-tac-toe: the 3x3 m,n,k-game with k=3, with its own name and a friendlier drawing."""

from __future__ import annotations

from engine.mnk import MNKGame, MNKState


class TicTacToeGame(MNKGame):
    def __init__(self) -> None:
        super().__init__(3, 3, 3, preset="tictactoe")

    def new_initial_state(self) -> TicTacToeState:
        return TicTacToeState(self)

    def __reduce__(self) -> tuple[object, ...]:
        return (TicTacToeGame, ())


class TicTacToeState(MNKState):
    """Same rules and drawing as MNKState (one notation: engine/notation.py)."""

    __slots__ = ()

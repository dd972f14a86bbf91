"""Dialogs that ask what to play (against the AI, a seek, quick pairing) and whether to take
a challenge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

import engine
from client.game_view import AI_BUDGET_MS

# The registry's games, and a custom m,n,k board ("mnk:M:N:K").
GAMES: list[tuple[str, str]] = [
    (game.title, game.name) for game in engine.GAMES.values() if not game.parameters
] + [("4x4, four in a row", "mnk:4:4:4")]
CLOCKS: list[tuple[str, str]] = [
    ("no clock", "none"),
    ("1 min + 0 s", "60000+0"),
    ("3 min + 2 s", "180000+2000"),
    ("5 min + 3 s", "300000+3000"),
    ("10 min + 5 s", "600000+5000"),
    ("30 s per move", "move:30000"),
]
COLOURS: list[tuple[str, str]] = [("X (moves first)", "x"), ("O", "o"), ("random", "random")]
SEAT_OF_COLOUR = {"x": 0, "o": 1, "random": -1}
OPPONENTS: list[tuple[str, str]] = [("humans and bots", "any"), ("humans only", "humans")]
ALGORITHMS: list[tuple[str, str]] = [(name, name) for name in engine.ALGORITHMS]
# Each Select of the dialog, by id, with its options.
OPTIONS: dict[str, list[tuple[str, str]]] = {
    "game": GAMES,
    "clock": CLOCKS,
    "colour": COLOURS,
    "opponents": OPPONENTS,
    "algorithm": ALGORITHMS,
}


def game_fields(choice: str) -> dict[str, Any]:
    """A game choice as the request's ``game`` and ``params``."""
    if choice.startswith("mnk:"):
        m, n, k = (int(x) for x in choice.split(":")[1:])
        return {"game": "mnk", "params": {"m": m, "n": n, "k": k}}
    return {"game": choice, "params": {}}


def clock_fields(choice: str) -> dict[str, int]:
    if choice == "none":
        return {}
    if choice.startswith("move:"):
        return {"move_ms": int(choice.split(":")[1])}
    initial, increment = choice.split("+")
    return {"initial_ms": int(initial), "increment_ms": int(increment)}


def lost_words(why: str) -> str:
    """What a person is told of a request lost with the connection (``why``)."""
    return (
        f"No answer: the request was lost with the connection ({why}). Try again once reconnected."
    )


class NewGameDialog(ModalScreen[dict[str, Any] | None]):
    """Asks for a game's settings. ``kind``: "ai" (create vs the AI), "seek" or "quick".
    Dismissed with the request's fields, or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    TITLES = {
        "ai": "Play the AI",
        "seek": "Post a seek",
        "quick": "Quick pairing",
    }

    def __init__(self, kind: str, send: Callable[[dict[str, Any]], None] | None = None) -> None:
        """``send``: asks the server with the chosen fields; the dialog stays open, its
        choices kept, until it is dismissed (the request taken) or ``refused`` or ``lost``
        says why not. Without it, the dialog is dismissed with the fields at once."""
        super().__init__()
        self.kind = kind
        self.send = send
        self.asking = False  # a request sent, its answer not yet come

    def compose(self) -> ComposeResult:
        kind = self.kind
        with Vertical(id="dialog"):
            yield Label(self.TITLES[kind], id="dialog-title")
            yield Label("Game")
            yield Select(GAMES, value="tictactoe", allow_blank=False, compact=True, id="game")
            if kind in ("seek", "quick"):
                yield Label("Time control")
                yield Select(CLOCKS, value="none", allow_blank=False, compact=True, id="clock")
            if kind in ("ai", "seek"):
                yield Label("You play")
                yield Select(
                    COLOURS,
                    value="x" if kind == "ai" else "random",
                    allow_blank=False,
                    compact=True,
                    id="colour",
                )
            if kind == "seek":
                yield Label("Opponents")
                yield Select(
                    OPPONENTS,
                    value="any",
                    allow_blank=False,
                    compact=True,
                    id="opponents",
                )
            if kind == "quick":
                yield Label("Play the AI after waiting (seconds, 0: never)")
                yield Input("20", type="integer", compact=True, id="ai-after")
            if kind in ("ai", "quick"):
                yield Label("AI search")
                yield Select(
                    ALGORITHMS,
                    value=engine.default_ai("tictactoe"),
                    allow_blank=False,
                    compact=True,
                    id="algorithm",
                )
                yield Label("AI time per move (ms; servers allow 10000 unless set otherwise)")
                yield Input(str(AI_BUDGET_MS), type="integer", compact=True, id="budget")
            yield Label("", id="dialog-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("OK", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def on_select_changed(self, event: Select.Changed) -> None:
        """A game picked proposes its own AI (``engine.default_ai``), which can be changed."""
        if event.select.id == "game" and self.kind in ("ai", "quick"):
            game = game_fields(str(event.value))["game"]
            self.query_one("#algorithm", Select).value = engine.default_ai(game)

    def _value(self, widget_id: str) -> Any:
        return self.query_one(f"#{widget_id}", Select).value

    def fields(self) -> dict[str, Any]:
        """The request's fields; ValueError with a message for a bad entry."""
        fields = game_fields(str(self._value("game")))
        kind = self.kind
        if kind in ("seek", "quick"):
            fields["clock"] = clock_fields(str(self._value("clock")))
        if kind == "ai":
            fields["opponent"] = "ai"
            fields["seat"] = SEAT_OF_COLOUR[str(self._value("colour"))]
        if kind == "seek":
            fields["color"] = str(self._value("colour"))
            fields["opponents"] = str(self._value("opponents"))
        if kind in ("ai", "quick"):
            fields["algorithm"] = str(self._value("algorithm"))
            budget = self.query_one("#budget", Input).value.strip()
            if not budget.isdigit() or not 1 <= int(budget) <= 60_000:
                raise ValueError("the AI's time per move is 1 to 60000 ms")
            fields["budget_ms"] = int(budget)
        if kind == "quick":
            after = self.query_one("#ai-after", Input).value.strip()
            if not after.isdigit() or int(after) > 3600:
                raise ValueError("wait 0 to 3600 seconds for a partner")
            fields["ai_after_s"] = int(after)
        return fields

    def _submit(self) -> None:
        try:
            fields = self.fields()
        except ValueError as exc:
            self.query_one("#dialog-error", Label).update(str(exc))
            return
        if self.send is None:
            self.dismiss(fields)
            return
        if self.asking:
            return  # one request at a time: a second OK would make a second game
        self.asking = True
        self.query_one("#dialog-error", Label).update("Asking the server…")
        self.send(fields)

    def refused(self, why: str) -> None:
        """The server refused the request: say why, the choices kept, to change and retry
        (a budget over the server's maximum closed the dialog and lost them)."""
        self.asking = False
        if self.is_attached:
            self.query_one("#dialog-error", Label).update(f"The server refused: {why}")

    def lost(self, why: str) -> None:
        """The request got no answer, lost with the connection (``why``): say so, the
        choices kept, to send again once reconnected."""
        self.asking = False
        if self.is_attached:
            self.query_one("#dialog-error", Label).update(lost_words(why))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self._submit()
        else:
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def action_cancel(self) -> None:
        self.dismiss(None)


class ChallengeDialog(ModalScreen[bool]):
    """Someone challenges us: accept (y) or decline (n); dismissed with the answer."""

    BINDINGS = [
        Binding("y", "answer(True)", "Accept"),
        Binding("n,escape", "answer(False)", "Decline"),
    ]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("A challenge", id="dialog-title")
            yield Label(self.text, id="challenge-text")
            with Horizontal(id="dialog-buttons"):
                yield Button("Accept (y)", id="accept", variant="primary")
                yield Button("Decline (n)", id="decline")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "accept")

    def action_answer(self, accept: bool) -> None:
        self.dismiss(accept)

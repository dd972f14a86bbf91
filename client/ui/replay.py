"""The replay screen: a stored game scrubbed move by move, each move judged by the solver."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from client.game_view import (
    SYMBOLS,
    ai_value,
    game_title,
    move_verdicts,
    player_name,
    result_sentence,
)
from client.replay import ReplayCursor
from client.ui.board import PIECE_STYLES, BoardScroll, BoardView
from client.ui.game import describe_ai
from client.ui.layout import fit_board_screen

VERDICT_STYLES = {"won": "bold green", "drawn": "yellow", "lost": "bold red"}


class ReplayScreen(Screen[None]):
    """Left/right step, Home/End jump, a click in the move list goes to that move."""

    BINDINGS = [
        Binding("left", "step(-1)", "Back", priority=True),
        Binding("right", "step(1)", "Forward", priority=True),
        Binding("home", "jump(0)", "Start", priority=True),
        Binding("end", "jump(-1)", "End", priority=True),
        Binding("escape", "leave", "Close"),
    ]

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__()
        self.cursor = ReplayCursor(record)
        self.record = record
        self.verdicts: list[tuple[str, str] | None] | None = None

    @property
    def ply(self) -> int:
        return self.cursor.ply

    def compose(self) -> ComposeResult:
        yield Static(id="game-title")
        with Horizontal(id="game-body"):
            with Vertical(id="board-column"):
                with BoardScroll(id="board-scroll"):
                    yield BoardView(self.cursor.state_at(0), id="board")
                yield Static(id="replay-move")
                yield Static(id="ai-panel")
            with Vertical(id="side-column"):
                yield Static(id="players")
                yield DataTable(id="moves", cursor_type="row", zebra_stripes=True)
                yield Static(id="verdict-note")
        yield Footer()

    def on_mount(self) -> None:
        r = self.record
        title = Text()
        title.append(f"Replay: {game_title(r['game'], r['params'])}", "bold")
        title.append("  ·  game ")
        title.append(str(r["id"]), "bold")
        self.query_one("#game-title", Static).update(title)
        players = Text()
        for seat in (0, 1):
            players.append(SYMBOLS[seat], PIECE_STYLES[seat])
            players.append(f" {player_name(r['players'][seat])}\n")
        players.append(result_sentence(r.get("result"), r.get("reason"), None), "bold")
        self.query_one("#players", Static).update(players)
        table = self.query_one("#moves", DataTable)
        table.add_columns("#", "", "move", "leaves", "AI value")
        self._fill_table()
        self.query_one("#verdict-note", Static).update(
            Text("Judging the moves with the perfect solver…", "dim")
        )
        self.judge()
        self.go(self.cursor.last)
        table.focus()
        self._fit(self.size.width, self.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        """As the game screen fits (client/ui/layout.py): the move list beside the board
        when there is room for it, margins when there are rows for them, and the board
        scrolling to the last move when even that does not fit."""
        if self.query(BoardView):  # under the board: the move's line (2, compact: 1)
            fit_board_screen(self, width, height, rows_below=2, compact_rows_below=1)

    def _fill_table(self) -> None:
        table = self.query_one("#moves", DataTable)
        table.clear()
        table.add_row("0", "", "start", "", "")
        state = self.cursor.state_at(0)
        for i, move in enumerate(self.cursor.moves):
            verdict = self.verdicts[i] if self.verdicts else None
            leaves = Text("")
            if verdict is not None:
                word, mark = verdict
                leaves = Text(word + (f" {mark}" if mark else ""), VERDICT_STYLES[word])
            stats = move.get("stats") or {}
            value = ai_value(stats, chance=False) or ""
            table.add_row(
                str(i + 1),
                Text(SYMBOLS[move["seat"]], PIECE_STYLES[move["seat"]]),
                state.action_to_string(move["action"]),
                leaves,
                value,
            )
            state.apply_action(move["action"])

    @work(thread=True, exclusive=True, group="judge")
    def judge(self) -> None:
        """Label each move with the perfect solver, off the UI thread (it may take a while)."""
        actions = [m["action"] for m in self.cursor.moves]
        verdicts = move_verdicts(self.cursor.game, actions)
        self.app.call_from_thread(self._judged, verdicts)

    def _judged(self, verdicts: list[tuple[str, str] | None]) -> None:
        self.verdicts = verdicts
        ply = self.ply
        self._fill_table()
        note = self.query_one("#verdict-note", Static)
        if not verdicts:  # no move: nothing to judge, whatever the board's size
            note.update(Text("No move was played: nothing to judge.", "dim"))
        elif all(v is None for v in verdicts):
            note.update(
                Text("This board is too large for the perfect solver: moves are not judged.", "dim")
            )
        else:
            note.update(
                Text(
                    "leaves: the position after the move, for its mover, with perfect play. "
                    "? a win thrown away, ?? a loss walked into.",
                    "dim",
                )
            )
        self.go(ply)

    def go(self, ply: int) -> None:
        ply = self.cursor.go(ply)
        state = self.cursor.state_at(ply)
        last = self.cursor.moves[ply - 1]["action"] if ply else None
        self.query_one(BoardView).show(state, last, show_cursor=False)
        table = self.query_one("#moves", DataTable)
        if table.cursor_row != ply:
            table.move_cursor(row=ply)
        self.query_one("#replay-move", Static).update(self._move_text(ply))

    def _move_text(self, ply: int) -> Text:
        text = Text()
        if ply == 0:
            text.append(f"Position 0 of {self.cursor.last}: the start.")
            self.query_one("#ai-panel", Static).display = False
            return text
        move = self.cursor.moves[ply - 1]
        before = self.cursor.state_at(ply - 1)
        text.append(f"Move {ply} of {self.cursor.last}: ")
        text.append(SYMBOLS[move["seat"]], PIECE_STYLES[move["seat"]])
        text.append(f" played {before.action_to_string(move['action'])}")
        verdict = self.verdicts[ply - 1] if self.verdicts else None
        if verdict is not None:
            word, mark = verdict
            text.append(" — the position is ")
            text.append(word, VERDICT_STYLES[word])
            text.append(f" for {SYMBOLS[move['seat']]}")
            if mark == "??":
                text.append(" (a losing move)", "bold red")
            elif mark == "?":
                text.append(" (a win thrown away)", "yellow")
        if ply == self.cursor.last and self.record.get("result"):
            text.append("\n")
            text.append(
                result_sentence(self.record.get("result"), self.record.get("reason"), None), "bold"
            )
        panel = self.query_one("#ai-panel", Static)
        stats = move.get("stats")
        panel.display = bool(stats)
        if stats:
            panel.update(Text("What the AI thought\n", "bold") + describe_ai(stats, before))
        return text

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # Only the row under the cursor now: highlights posted before a jump are stale.
        if event.cursor_row == event.data_table.cursor_row and event.cursor_row != self.ply:
            self.go(event.cursor_row)

    def action_step(self, delta: int) -> None:
        self.go(self.ply + delta)

    def action_jump(self, ply: int) -> None:
        self.go(self.cursor.last if ply < 0 else ply)

    def action_leave(self) -> None:
        self.dismiss()

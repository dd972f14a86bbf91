"""The game screen (playing, or watching as a spectator) and the game-over dialog."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Input, Label, Static

import engine
from client.connection import ConnectionLost, RequestFailed
from client.game_view import (
    SYMBOLS,
    GameModel,
    ai_value,
    clock_title,
    format_ms,
    game_title,
    player_name,
    result_sentence,
    search_effort,
)
from client.replay import _pv_strings
from client.ui.board import PIECE_STYLES, BoardScroll, BoardView
from client.ui.layout import SIDE_COLUMN_MIN, board_column_width, board_size, fit_board_screen
from client.ui.messages import OpenGame, RequestingScreen, RingBell, StopFollowing
from protocol import Abort, Claim, CreateGame, Draw, Ended, Message, Move, Offer, Rematch, Resign

LOW_CLOCK_MS = 10_000  # our clock under this on our turn: the bell rings (once a turn)
CONFIRM_S = 3.0  # resign, abort and draw take a second press of their key within this


def describe_ai(stats: dict[str, Any], before: engine.State | None) -> Text:
    """The AI panel: value, principal variation, effort."""
    text = Text()
    value = ai_value(stats)
    if value is not None:
        text.append("value  ", "dim")
        text.append(value, "bold")
        text.append(" for it\n")
    line = _pv_strings(before, stats.get("pv")) if before is not None else []
    if line:
        text.append("line   ", "dim")
        text.append(" ".join(line) + "\n")
    parts = []
    iterations, elapsed = search_effort(stats)
    if iterations is not None:
        parts.append(f"{iterations:,} iterations")
    if elapsed is not None:
        parts.append(f"{elapsed:.0f} ms")
    if parts:
        text.append("effort ", "dim")
        text.append(", ".join(parts) + "\n")
    extra = []
    if stats.get("depth") is not None:
        extra.append(f"depth {stats['depth']}")
    if stats.get("algorithm"):
        extra.append(str(stats["algorithm"]))
    if extra:
        text.append("search ", "dim")
        text.append(", ".join(extra))
    return text


class GameScreen(RequestingScreen):
    """A game: the board, players and clocks, the move list, the AI's thoughts."""

    # Control keys: letters and digits on the board type a move (engine/notation.py: "e5"),
    # so no command is one stray letter away. Resign, abort and draw take a second press.
    BINDINGS = [
        Binding("ctrl+r", "resign", "Resign"),
        Binding("ctrl+x", "abort", "Abort"),
        Binding("ctrl+d", "draw", "Offer/accept draw"),
        Binding("ctrl+n", "decline", "Decline offer"),
        Binding("ctrl+w", "claim", "Claim win"),
        Binding("ctrl+t", "rematch", "Rematch"),
        Binding("ctrl+e", "toggle_ai", "AI panel"),
        Binding("escape", "escape", "Lobby"),
    ]

    def __init__(
        self,
        model: GameModel,
        *,
        clock: Callable[[], float] = time.monotonic,
        link_state: tuple[str, str] = ("online", ""),
    ) -> None:
        """``clock``: local time, for the clocks between readings; ``link_state``: the
        link's, until the app says it changed."""
        super().__init__()
        self.model = model
        self.clock = clock
        self.link_state = link_state
        self.sending = False
        self.low_clock_rung_at: int | None = None  # the ply of our turn the bell rang for
        self.game_over_shown = False
        self.confirming: str | None = None  # the action a second press of its key confirms
        self._confirm_round = 0

    # What only a seat may do: a spectator's footer does not offer it.
    SEAT_ACTIONS = frozenset({"resign", "draw", "decline", "abort", "claim", "rematch"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only what the game's state allows now: the footer shows nothing else, and its key
        does nothing (issue 12); while ? shows the keys, all of them. A spectator has no seat's
        action."""
        model = self.model
        if action in self.SEAT_ACTIONS and model.seat is None:
            return False
        if self.query("HelpPanel"):
            return True
        playing = not model.over and model.state is not None and model.status == "live"
        away = [seat for seat in (0, 1) if seat != model.seat and not model.online[seat]]
        early = model.abortable  # before both sides moved: abort, not resign (Lichess)
        offered = model.offers.get("draw")
        allowed = {
            "resign": playing and not early,
            "draw": playing and offered != model.seat,
            "abort": not model.over and early,
            "decline": any(seat != model.seat for seat in model.offers.values()),
            "claim": playing and not early and bool(away),  # (nothing counts before)
            "rematch": model.over and model.result != "*",
            "toggle_ai": model.has_ai(),
        }.get(action)
        return True if allowed is None else allowed

    def compose(self) -> ComposeResult:
        yield Static(id="game-title")
        with Horizontal(id="game-body"):
            with Vertical(id="board-column"):
                with BoardScroll(id="board-scroll"):
                    yield BoardView(
                        self.model.state or engine.make_game("tictactoe").new_initial_state(),
                        id="board",
                    )
                yield Static(id="game-status")
                yield Input(
                    placeholder="type a cell as the board labels it, Enter plays",
                    select_on_focus=False,
                    id="move-input",
                )
            with Vertical(id="side-column"):
                yield Static(id="players")
                yield DataTable(id="moves", cursor_type="row", zebra_stripes=True)
                yield Static(id="ai-panel")
        yield Static(id="link-status")
        yield Footer()

    def on_mount(self) -> None:
        if not self.query("#moves"):
            return  # replaced before it was drawn (two seats in a row): nothing to set up
        self.query_one("#moves", DataTable).add_columns("#", "", "move")
        self.ai_column = False  # the moves' "AI value" column, in games with an AI only
        self.query_one("#ai-panel").display = False
        self.ai_panel_wanted = True
        self.refresh_all()
        self._show_link()
        self.set_interval(0.1, self.tick)
        self.query_one(BoardView).focus()

    # --- what the app tells us ---------------------------------------------------------------

    def game_changed(self, model: GameModel, event: Message) -> None:
        if model is not self.model or not self.is_mounted:
            return  # on_mount draws what happened before
        if isinstance(event, Offer) and event.seat != model.seat and event.answer == "offer":
            what = "a draw" if event.kind == "draw" else "a rematch"
            key = "ctrl+d twice" if event.kind == "draw" else "ctrl+t"
            self.notify(f"{model.name(event.seat)} offers {what}: {key} accepts, ctrl+n declines.")
        elif isinstance(event, Offer) and event.answer == "decline" and event.seat != model.seat:
            self.notify(f"{model.name(event.seat)} declined the {event.kind}.")
        self.refresh_all()
        if isinstance(event, Ended) or (model.over and not self.game_over_shown):
            self.show_game_over()

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        """Degrade on a small terminal (client/ui/layout.py): without the side panel when
        narrow (``narrow``: the players and clocks head the title instead), without margins
        and with a one-line move box when short (``compact``), and with the board scrolling
        to its cursor when even that does not fit (``too-small``), the status and the move
        box still on the screen."""
        if not self.query("#board-scroll"):
            return  # not composed yet, or being taken down
        was_narrow, was_scrolling = self.has_class("narrow"), self.has_class("too-small")
        # Under the board: status (2), move box (3), and a row to spare; compact: 1 and 1.
        scrolls = fit_board_screen(self, width, height, rows_below=6, compact_rows_below=2)
        narrow = self.has_class("narrow")
        if narrow != was_narrow:
            self._refresh_title()  # the players and clocks move to the title or back
        if narrow and not was_narrow:
            self.notify(
                "The moves and the AI panel are hidden: they need "
                f"{board_column_width(self) + SIDE_COLUMN_MIN} columns; the players and "
                "clocks are in the title.",
                title="Narrow terminal",
            )
        if scrolls and not was_scrolling:
            board_w, board_h = board_size(self)
            self.notify(
                f"The board scrolls to the cursor: it needs {board_w + 2}x{board_h + 4} to be "
                "seen whole.",
                title="Small terminal",
            )

    def _show_link(self) -> None:
        if not self.query("#link-status"):
            return  # not composed yet, or being taken down (on_mount shows it)
        state, detail = self.link_state
        widget = self.query_one("#link-status", Static)
        widget.display = state != "online"
        widget.update(
            Text(f" {'Offline' if state == 'offline' else 'Connecting'}: {detail} ", "bold")
        )
        widget.set_class(state == "offline", "offline")

    # --- drawing -----------------------------------------------------------------------------

    def refresh_all(self) -> None:
        if not self.query("#game-title"):
            return  # not composed yet, or being taken down
        model = self.model
        title = self.query_one("#game-title", Static)
        if model.state is None:
            title.update(f"Game {model.game_id}: waiting for the game to start…")
            return
        self._refresh_title()
        board = self.query_one(BoardView)
        board.show(model.state, model.last_action(), show_cursor=model.my_turn)
        self._fit(self.size.width, self.size.height)
        if board.playable != model.my_turn:
            board.playable = model.my_turn  # "Play" in the footer on our turn only
            self.refresh_bindings()
        self._refresh_status()
        self._refresh_moves()
        self._refresh_players()
        self._refresh_ai()
        self.refresh_bindings()  # the footer follows the game's state
        move_input = self.query_one("#move-input", Input)
        move_input.display = model.seat is not None and not model.over
        example = model.state.game.grid.example(model.legal_moves())
        move_input.placeholder = f"type a cell (e.g. {example}), Enter plays"

    def _refresh_status(self) -> None:
        model = self.model
        status = self.query_one("#game-status", Static)
        state = model.state
        assert state is not None
        if model.over:
            status.update(Text(result_sentence(model.result, model.reason, model.seat), "bold"))
            return
        if model.status == "open":
            status.update(f"Waiting for an opponent to join (game {model.game_id})…")
            return
        to_move = state.current_player()
        text = Text()
        if model.my_turn:
            text.append("Your move", "bold reverse")
            if isinstance(state, engine.UTTTState):
                # The legal-move hint: the board the rules send us to (shaded on the board).
                boards = state.allowed_boards()
                where = (
                    state.game.grid.board_name(boards[0]) if len(boards) == 1 else "any open board"
                )
                text.append(f" in {where}: arrows + Enter, or type the cell")
            else:
                text.append(": arrows + Enter, or type the cell")
        elif to_move in (0, 1):
            who = player_name(model.players[to_move])
            text.append(f"{SYMBOLS[to_move]} ({who}) to move")
            if (model.players[to_move] or {}).get("kind") == "ai":
                text.append(" — thinking…", "italic")
        if "draw" in model.offers:
            seat = model.offers["draw"]
            mine = seat == model.seat
            text.append(
                "\nYou offered a draw."
                if mine
                else f"\n{model.name(seat)} offers a draw: ctrl+d twice accepts, ctrl+n declines.",
                "yellow",
            )
        for seat in (0, 1):
            if not model.online[seat]:
                text.append(f"\n{model.name(seat)} is away", "yellow")
                if model.claim_at[seat] is not None and seat != model.seat:
                    text.append(
                        " (ctrl+x twice aborts the game: no result before both sides moved)"
                        if model.abortable
                        else " (ctrl+w claims the game once the grace period is over)"
                    )
        status.update(text)

    def _refresh_moves(self) -> None:
        table = self.query_one("#moves", DataTable)
        if self.model.has_ai() and not self.ai_column:
            self.ai_column = True
            table.clear(columns=True)
            table.add_columns("#", "", "move", "AI value")
        have = table.row_count
        for entry in self.model.moves[have:]:
            cells: list[Any] = [
                str(entry.ply + 1),
                Text(SYMBOLS[entry.seat], PIECE_STYLES[entry.seat]),
                entry.text,
            ]
            if self.ai_column:
                cells.append((entry.stats and ai_value(entry.stats, chance=False)) or "")
            table.add_row(*cells)
        if table.row_count < have:  # a snapshot replaced the moves
            table.clear()
            self._refresh_moves()
        if table.row_count:
            table.move_cursor(row=table.row_count - 1)

    def _refresh_title(self) -> None:
        """The game, its clock, our role and its id; when the side panel is hidden
        (``narrow``), the players and their clocks first (they are nowhere else then)."""
        model = self.model
        if model.state is None:
            return
        role = "watching" if model.seat is None else f"you play {SYMBOLS[model.seat]}"
        header = Text(no_wrap=True, overflow="ellipsis")
        if self.has_class("narrow"):
            header.append_text(self._players_line())
            header.append("  ·  ")
        header.append(game_title(model.game, model.params), "bold")
        header.append(f"  ·  {clock_title(model.clock)}  ·  {role}  ·  game ")
        header.append(model.game_id, "bold")
        self.query_one("#game-title", Static).update(header)

    def _refresh_players(self) -> None:
        self.query_one("#players", Static).update(self._players_text())
        if self.has_class("narrow"):
            self._refresh_title()

    def _players_line(self) -> Text:
        """The players and their clocks on one line: '▶ X ada 2:59   O bob [AI] 3:00'."""
        model = self.model
        now = self.clock()
        text = Text()
        for seat in (0, 1):
            if seat:
                text.append("   ")
            text.append("▶ " if model.to_move == seat and not model.over else "", "bold")
            text.append(SYMBOLS[seat], PIECE_STYLES[seat])
            text.append(f" {player_name(model.players[seat])}")
            left = model.remaining_ms(seat, now)
            if left is not None:
                text.append(f" {format_ms(left)}", "bold red" if left < 10_000 else "bold")
            if not model.online[seat]:
                text.append(" away", "yellow")
        return text

    def _players_text(self) -> Text:
        model = self.model
        now = self.clock()
        text = Text()
        for seat in (0, 1):
            marker = "▶ " if model.to_move == seat and not model.over else "  "
            text.append(marker, "bold")
            text.append(SYMBOLS[seat], PIECE_STYLES[seat])
            name = player_name(model.players[seat])
            you = " (you)" if seat == model.seat else ""
            text.append(f" {name}{you}"[:24].ljust(24))
            left = model.remaining_ms(seat, now)
            if left is not None:
                style = "bold red" if left < 10_000 else "bold"
                text.append(f" {format_ms(left):>8}", style)
            if not model.online[seat]:
                text.append(" away", "yellow")
            if seat == 0:
                text.append("\n")
        return text

    def _refresh_ai(self) -> None:
        panel = self.query_one("#ai-panel", Static)
        stats = self.model.last_stats()
        panel.display = self.model.has_ai() and self.ai_panel_wanted
        if not stats:
            panel.update(Text("What the AI thought appears here after its move.", "dim"))
            return
        ply = next(e.ply for e in reversed(self.model.moves) if e.stats)
        before = engine.replay(
            (self.model.game, self.model.params), [e.action for e in self.model.moves[:ply]]
        )
        text = Text(f"What the AI thought (move {ply + 1})\n", "bold")
        text.append_text(describe_ai(stats, before))
        panel.update(text)

    def tick(self) -> None:
        model = self.model
        if model.clock_ticking():
            self._refresh_players()
            left = model.remaining_ms(model.seat, self.clock()) if model.seat is not None else None
            ply = len(model.moves)
            if model.my_turn and left is not None and left < LOW_CLOCK_MS:
                if self.low_clock_rung_at != ply:
                    self.low_clock_rung_at = ply
                    self.post_message(RingBell())

    # --- playing -----------------------------------------------------------------------------

    def on_board_view_chosen(self, message: BoardView.Chosen) -> None:
        self.play(message.action)

    def on_key(self, event: events.Key) -> None:
        # Typing a cell ("e5", or the action number) while the board has focus starts the
        # move box.
        move_input = self.query_one("#move-input", Input)
        if (
            event.character
            and (event.character.isalnum() or event.character in ",(")
            and self.focused is self.query_one(BoardView)
            and move_input.display
        ):
            # Keys that arrive before the focus moves are appended, not lost.
            move_input.value += event.character
            move_input.cursor_position = len(move_input.value)
            move_input.focus()
            event.stop()

    def action_escape(self) -> None:
        """Escape clears a half-typed move first; otherwise it goes back to the lobby."""
        move_input = self.query_one("#move-input", Input)
        if self.focused is move_input:
            move_input.value = ""
            self.query_one(BoardView).focus()
        else:
            self.action_leave()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        text = message.value.strip()
        message.input.value = ""
        self.query_one(BoardView).focus()
        if not text or self.model.state is None:
            return
        try:
            action = self.model.state.parse_action(text)
        except engine.IllegalMove as exc:
            self.notify(str(exc), title="Not a legal move", severity="warning")
            return
        self.play(action)

    def play(self, action: int) -> None:
        model = self.model
        state = model.state
        if model.seat is None:
            self.notify("Spectators cannot move.", severity="warning")
            return
        if not model.my_turn or state is None:
            self.notify("It is not your turn.", severity="warning")
            return
        reason = state.illegal_reason(action)
        if reason is not None:
            self.notify(reason, title="Not a legal move", severity="warning")
            return
        if self.sending:
            return
        if self.link_state[0] != "online":
            self.notify(
                "Offline: the move can be played once the connection is back.",
                title="Offline",
                severity="warning",
            )
            return
        self.sending = True

        def done(_: Any = None) -> None:
            self.sending = False

        def refused(exc: RequestFailed) -> None:
            self.sending = False
            if not model.said_by_the_end(exc.code):
                self.notify(exc.message, title="The server refused that move", severity="error")

        def lost(exc: ConnectionLost) -> None:
            # Not sent again blindly (as the plain client): once reconnected, the resumed
            # game says whether it was played, and if it is still our turn we play again.
            self.sending = False
            self.notify(
                f"The connection dropped before the server answered your move ({exc}): once "
                "back online, the game shows whether it was played.",
                title="Offline",
                severity="warning",
                timeout=10,
            )

        self.request(
            Move,
            on_reply=done,
            on_error=refused,
            on_lost=lost,
            game_id=model.game_id,
            action=action,
            ply=state.ply(),
        )

    def _seat_request(self, kind: type[Message], **fields: Any) -> bool:
        model = self.model
        if model.seat is None:
            self.notify("Only the players can do that.", severity="warning")
            return False
        self.request(kind, game_id=model.game_id, **fields)  # the link adds the seat's token
        return True

    def _confirmed(self, action: str, key: str, what: str) -> bool:
        """True on the second press of ``key`` within CONFIRM_S seconds; the first press
        says so. Resigning, aborting and draws are never one stray key."""
        if self.confirming == action:
            self.confirming = None
            return True
        self.confirming = action
        self._confirm_round += 1
        round_ = self._confirm_round
        self.notify(f"Press {key} again to {what}.", timeout=CONFIRM_S)
        self.set_timer(CONFIRM_S, lambda: self._forget_confirm(round_))
        return False

    def _forget_confirm(self, round_: int) -> None:
        if round_ == self._confirm_round:
            self.confirming = None

    def action_resign(self) -> None:
        if self.model.over or not self._confirmed("resign", "ctrl+r", "resign"):
            return
        self._seat_request(Resign)

    def action_draw(self) -> None:
        if self.model.over:
            return
        standing = self.model.offers.get("draw")
        answer = "accept" if standing is not None and standing != self.model.seat else "offer"
        if not self._confirmed("draw", "ctrl+d", f"{answer} a draw"):
            return
        if self._seat_request(Draw, answer=answer) and answer == "offer":
            self.notify("Draw offered.")

    def action_decline(self) -> None:
        standing = False
        for kind, request in (("draw", Draw), ("rematch", Rematch)):
            seat = self.model.offers.get(kind)
            if seat is not None and seat != self.model.seat:
                standing = True
                if self._seat_request(request, answer="decline"):
                    self.notify(f"You declined the {kind}.")
        if not standing:
            self.notify("No offer to decline.", severity="warning")

    def action_abort(self) -> None:
        if not self.model.over and self._confirmed("abort", "ctrl+x", "abort the game"):
            self._seat_request(Abort)

    def action_claim(self) -> None:
        if not self.model.over:
            self._seat_request(Claim, outcome="win")

    def action_rematch(self) -> None:
        model = self.model
        if not model.over:
            self.notify("A rematch can be asked for once the game is over.")
            return
        if model.seat is None:
            return
        standing = model.offers.get("rematch")
        answer = "accept" if standing is not None and standing != model.seat else "offer"

        def unsupported(exc: RequestFailed) -> None:
            # A server without rematches: against the AI, start the same game with the
            # colours swapped ourselves.
            ai = [p for p in model.players if (p or {}).get("kind") == "ai"]
            if exc.code in ("unknown_type", "bad_request", "unknown_game") and ai:
                ai_player = ai[0] or {}
                self.request(
                    CreateGame,
                    game=model.game,
                    params=model.params,
                    opponent="ai",
                    seat=1 - (model.seat or 0),
                    algorithm=ai_player.get("algorithm", ""),
                    budget_ms=ai_player.get("budget_ms", 200),
                    clock=model.clock,
                )
            else:
                self.notify(exc.message, title="No rematch", severity="error")

        self.request(
            Rematch,
            on_error=unsupported,
            game_id=model.game_id,
            answer=answer,
        )
        self.notify("Rematch asked for." if answer == "offer" else "Rematch accepted.")

    def action_toggle_ai(self) -> None:
        self.ai_panel_wanted = not self.ai_panel_wanted
        self._refresh_ai()

    def action_leave(self) -> None:
        model = self.model
        if model.seat is not None and not model.over and model.status == "live":
            self.notify(
                f"Game {model.game_id} goes on without you"
                + (": your clock runs. " if model.clock else ". ")
                + "Come back to it from the lobby.",
                severity="warning",
            )
        else:
            self.post_message(StopFollowing(model.game_id))
        self.dismiss()

    def show_game_over(self) -> None:
        if self.game_over_shown:
            return
        self.game_over_shown = True
        self.app.push_screen(GameOverScreen(self.model), self._after_game_over)

    def _after_game_over(self, choice: str | None) -> None:
        if choice == "rematch":
            self.action_rematch()
        elif choice == "replay":
            self.post_message(OpenGame(self.model.game_id, "replay"))
        elif choice == "lobby":
            self.post_message(StopFollowing(self.model.game_id))
            self.dismiss()


class GameOverScreen(ModalScreen[str]):
    """The result and why, with rematch, replay and back to the lobby."""

    BINDINGS = [
        Binding("m", "choose('rematch')", "Rematch"),
        Binding("p", "choose('replay')", "Replay"),
        Binding("l", "choose('lobby')", "Lobby"),
        Binding("escape", "choose('board')", "See the board"),
    ]

    def __init__(self, model: GameModel) -> None:
        super().__init__()
        self.model = model

    def compose(self) -> ComposeResult:
        model = self.model
        with Vertical(id="game-over"):
            yield Label("Game over", id="game-over-title")
            yield Label(result_sentence(model.result, model.reason, model.seat), id="result")
            yield Label(
                f"{model.result}  ·  {len(model.moves)} moves  ·  game {model.game_id}",
                id="result-detail",
            )
            with Horizontal(id="game-over-buttons"):
                if model.seat is not None and model.result != "*":
                    yield Button("Rematch (m)", id="rematch", variant="primary")
                yield Button("Replay (p)", id="replay")
                yield Button("Lobby (l)", id="lobby")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

"""The lobby: live seeks and games pushed by the server, our unfinished games to go back
to, recent games to replay."""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import DataTable, Footer, Label, Static

from client.connection import ConnectionLost, RequestFailed
from client.game_view import SYMBOLS, GameModel, clock_title, game_title, player_name
from client.session_core import SeekReposted
from client.ui.dialogs import NewGameDialog, lost_words
from client.ui.messages import OpenGame, RequestingScreen
from protocol import (
    AcceptSeek,
    CancelSeek,
    CreateGame,
    GameList,
    GetGame,
    ListGames,
    LobbyEvent,
    LobbyState,
    Message,
    QuickPair,
    Record,
    Seek,
    SeekDeclined,
    SeekPosted,
)


def _names(game: dict[str, Any]) -> tuple[str, str]:
    players = game.get("players") or [None, None]
    return player_name(players[0]), player_name(players[1])


# The columns of "Your games".
# The turn before the opponent's name: at 100 columns a pane is 50 wide, and the name (an
# AI's "mcts 200ms [AI]") is what may be cut, not whose move it is.
MINE_COLUMNS = ("game", "you", "turn", "moves", "opponent")


class LobbyScreen(RequestingScreen):
    """Seeks and live games as the server pushes them, our unfinished games; keys to play,
    seek, pair, resume, watch and replay."""

    BINDINGS = [
        Binding("p", "new('ai')", "Play the AI"),
        Binding("s", "new('seek')", "Seek"),
        Binding("k", "new('quick')", "Quick pairing"),
        # A priority over the focused table's own Enter ("Select"), so the footer and the
        # keys panel (?) say what Enter does here.
        Binding(
            "enter",
            "open",
            "Open",
            tooltip="accept the seek, resume or watch the game, replay it",
            priority=True,
        ),
        Binding(
            "x", "cancel_seek", "Cancel", tooltip="cancel my seeks, leave the quick-pairing queue"
        ),
        # Listed by ? (the footer is full without them).
        Binding("f", "filter('game')", "Game filter", tooltip="seeks of one game", show=False),
        Binding("t", "filter('clock')", "Clock filter", tooltip="one time control", show=False),
        Binding("g", "refresh", "Refresh"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, player_name: str = "player", url: str = "") -> None:
        super().__init__()
        self.player_name = player_name
        self.url = url
        # Set by the app (attributes down): the link's state, our player id, our games.
        self.link_state = ("connecting", url)
        self.player_id: str | None = None
        self.my_games: list[tuple[str, int, GameModel | None]] = []
        self.seeks: dict[str, dict[str, Any]] = {}
        self.live: dict[str, dict[str, Any]] = {}
        self.finished: list[dict[str, Any]] = []
        self.my_seeks: set[str] = set()  # seeks we posted and that still stand
        self.queued: dict[str, int] = {}  # our quick-pairing entries -> seconds before the AI
        self.has_lobby = True
        self.has_lobby_state = False  # the server's lobby_state arrived
        self.records: dict[str, dict[str, Any]] = {}  # our games' stored records, by id
        # The seeks shown: only those of this game and this clock (as titled), if set.
        self.filters: dict[str, str | None] = {"game": None, "clock": None}

    def compose(self) -> ComposeResult:
        yield Static(id="lobby-title")
        with Horizontal(id="lobby-top"):
            with Vertical(classes="lobby-pane"):
                yield Label("Open seeks", classes="pane-title", id="seeks-title")
                yield DataTable(id="seeks", cursor_type="row", zebra_stripes=True)
            with Vertical(classes="lobby-pane"):
                yield Label("Live games", classes="pane-title")
                yield DataTable(id="live", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="lobby-bottom"):
            with Vertical(id="mine-pane", classes="lobby-pane"):
                yield Label("Your games", classes="pane-title")
                yield DataTable(id="mine", cursor_type="row", zebra_stripes=True)
            with Vertical(classes="lobby-pane"):
                yield Label("Recent games", classes="pane-title")
                yield DataTable(id="finished", cursor_type="row", zebra_stripes=True)
        yield Static(id="lobby-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#seeks", DataTable).add_columns("player", "game", "clock", "plays", "")
        self.query_one("#live", DataTable).add_columns("game", "X", "O", "moves")
        self.query_one("#finished", DataTable).add_columns("game", "X", "O", "result", "when")
        self.query_one("#mine", DataTable).add_columns(*MINE_COLUMNS)
        self.query_one("#seeks", DataTable).focus()
        self._show_link()
        self.your_games_changed()

    def on_screen_resume(self) -> None:
        if self.link_state[0] == "online":
            self.action_refresh()
        self.your_games_changed()

    # --- the server ---------------------------------------------------------------------------

    def _show_link(self) -> None:
        if not self.query("#lobby-title"):
            return  # not composed yet, or being taken down (on_mount shows it)
        state, detail = self.link_state
        title = Text()
        title.append("noughts lobby", "bold")
        title.append(f"  ·  {self.player_name}  ·  ")
        if state == "online":
            title.append(f"connected to {self.url}", "green")
            self.action_refresh()
        elif state == "offline":
            title.append(f"offline: {detail}", "bold red")
        else:
            title.append(f"connecting to {self.url}…", "yellow")
        self.query_one("#lobby-title", Static).update(title)

    def lobby_message(self, message: Message) -> None:
        if not self.is_mounted:
            return
        if isinstance(message, LobbyState):
            self.has_lobby = self.has_lobby_state = True
            self.seeks = {s["seek_id"]: s for s in message.seeks}
            self.live = {g["game_id"]: g for g in message.games}
        elif isinstance(message, LobbyEvent):
            if message.kind == "seek_added" and message.seek:
                self.seeks[message.seek["seek_id"]] = message.seek
            elif message.kind == "seek_removed" and message.seek_id:
                self.seeks.pop(message.seek_id, None)
                self.my_seeks.discard(message.seek_id)
            elif message.kind == "game_added" and message.game:
                self.live[message.game["game_id"]] = message.game
            elif message.kind == "game_removed" and message.game_id:
                self.live.pop(message.game_id, None)
                self.action_refresh()
        elif isinstance(message, SeekDeclined):  # a challenge of ours: gone
            self.seeks.pop(message.seek_id, None)
            self.my_seeks.discard(message.seek_id)
            self.set_status("")
        self._show_seeks()
        self._show_live()

    def lobby_unavailable(self, reason: str) -> None:
        self.has_lobby = False
        self.set_status(
            f"This server has no lobby ({reason}): p plays the AI; live games are listed "
            "when you refresh (g)."
        )

    def set_status(self, text: str) -> None:
        with suppress(NoMatches):  # the screen is being taken down (``_table``)
            self.query_one("#lobby-status", Static).update(text)

    def seated(self, game_id: str) -> None:
        """The server seated us in a game (a seek of ours accepted, a pairing, a rematch...):
        we are no longer waiting in the quick-pairing queue."""
        if not self.is_mounted:
            return
        for seek_id in list(self.queued):
            # Paired or given the AI, the entry is gone already (unknown_seek is expected);
            # seated by something else, leave the queue rather than start a second game.
            self.request(CancelSeek, on_error=lambda exc: None, seek_id=seek_id)
        self.queued.clear()
        if self.my_seeks:
            self.set_status("Your seek is still open: x cancels it.")
        else:
            self.set_status("")
        self.your_games_changed()

    def waiting(self, request: type[Message], posted: SeekPosted, fields: dict[str, Any]) -> None:
        """A seek or quick-pairing entry posted for us (from the command line)."""
        if request is QuickPair:
            self._queued(posted, int(fields.get("ai_after_s", 20)))
        else:
            self._posted(posted)

    def reposted(self, notice: SeekReposted) -> None:
        """After a reconnection, a seek or quick-pairing entry of ours posted again under a
        new id, or refused (gone)."""
        queued = self.queued.pop(notice.previous_id, None) is not None
        mine = notice.previous_id in self.my_seeks
        self.my_seeks.discard(notice.previous_id)
        if not self.is_mounted:
            return
        if notice.seek_id is None:
            self.set_status("Your seek is gone: the server refused it after the reconnection.")
        elif queued and isinstance(notice.request, QuickPair):
            self.queued[notice.seek_id] = notice.request.ai_after_s
            self.set_status("Reconnected: back in the quick-pairing queue (x leaves it).")
        elif mine:
            self.my_seeks.add(notice.seek_id)
            self.set_status("Reconnected: your seek is posted again (x cancels it).")
        self._show_seeks()

    def game_changed(self, model: GameModel, event: Message) -> None:
        """A game event: the row of one of our games follows its moves and its end."""
        if self.is_mounted and model.seat is not None:
            self.your_games_changed()

    def set_my_games(self, games: list[tuple[str, int, GameModel | None]]) -> None:
        self.my_games = games
        self.your_games_changed()

    # --- tables -------------------------------------------------------------------------------

    @staticmethod
    def _facets(seek: dict[str, Any]) -> dict[str, str]:
        """What the filters look at: the game and the clock, as the table titles them."""
        return {
            "game": game_title(seek.get("game", "?"), seek.get("params") or {}),
            "clock": clock_title(seek.get("clock") or {}),
        }

    def action_filter(self, facet: str) -> None:
        """The next value of a filter: every game (or clock) among the seeks, then all."""
        values = sorted({self._facets(seek)[facet] for seek in self.seeks.values()})
        options: list[str | None] = [None, *values]
        current = self.filters[facet]
        at = options.index(current) if current in options else 0
        self.filters[facet] = options[(at + 1) % len(options)]
        self._show_seeks()

    def _table(self, selector: str) -> DataTable | None:
        """One of the lobby's tables, or None while the screen is being taken down: a server
        message can arrive after its widgets are removed and before ``is_mounted`` drops (seen
        for '#seeks' and '#live'), and then there is nothing to show."""
        try:
            return self.query_one(selector, DataTable)
        except NoMatches:
            return None

    def _show_seeks(self) -> None:
        table = self._table("#seeks")
        if table is None:
            return
        selected = self._selected_key(table)
        table.clear()
        my_id = self.player_id
        shown = [
            (seek_id, seek)
            for seek_id, seek in sorted(
                self.seeks.items(), key=lambda kv: kv[1].get("created_at", 0)
            )
            if all(
                wanted is None or self._facets(seek)[facet] == wanted
                for facet, wanted in self.filters.items()
            )
        ]
        title = "Open seeks"
        wanted = [value for value in self.filters.values() if value is not None]
        if wanted:
            title += f" · {', '.join(wanted)} ({len(shown)} of {len(self.seeks)}; f, t: filters)"
        self.query_one("#seeks-title", Label).update(title)
        for seek_id, seek in shown:
            owner = seek.get("player") or {}
            mine = owner.get("player_id") == my_id or seek_id in self.my_seeks
            colour = {"x": "X", "o": "O"}.get(seek.get("color", "random"), "random")
            table.add_row(
                player_name(owner) + (" (you)" if mine else ""),
                *self._facets(seek).values(),
                colour,
                "challenge"
                if seek.get("to")
                else ("humans" if seek.get("opponents") == "humans" else ""),
                key=seek_id,
            )
        self._reselect(table, selected)
        # New rows widen the columns at the next refresh; the header's cached line must
        # follow them, so drop the table's render caches once that refresh is done.
        table.call_after_refresh(table.notify_style_update)

    def _show_live(self) -> None:
        table = self._table("#live")
        if table is None:
            return
        selected = self._selected_key(table)
        table.clear()
        for game_id, game in self.live.items():
            x, o = _names(game)
            title = game_title(game.get("game", "?"), game.get("params") or {})
            table.add_row(title, x, o, str(game.get("ply", 0)), key=game_id)
        self._reselect(table, selected)
        table.call_after_refresh(table.notify_style_update)  # as in _show_seeks

    def _show_finished(self) -> None:
        table = self._table("#finished")
        if table is None:
            return
        selected = self._selected_key(table)
        table.clear()
        for game in self.finished:
            x, o = _names(game)
            when = datetime.fromtimestamp(game.get("created_at", 0), UTC).strftime("%m-%d %H:%M")
            result = f"{game.get('result') or '*'} {game.get('reason') or ''}".strip()
            title = game_title(game.get("game", "?"), game.get("params") or {})
            table.add_row(title, x, o, result, when, key=game["game_id"])
        self._reselect(table, selected)

    def your_games_changed(self) -> None:
        """Show our unfinished games; fetch the stored record of those we do not follow."""
        if not self.is_mounted:
            return
        table = self._table("#mine")
        seeks = self._table("#seeks")
        if table is None or seeks is None:
            return
        selected = self._selected_key(table)
        # The columns too: a column keeps the width of the widest cell it ever held, and a row
        # shown while its record is fetched is not the row that follows, so the widths would
        # depend on what the fetch raced with.
        table.clear(columns=True)
        table.add_columns(*MINE_COLUMNS)
        games = self.my_games
        for game_id, seat, model in games:
            if model is not None:
                game, params, players = model.game, model.params, model.players
                ply, finished = len(model.moves), model.over
            else:
                record = self.records.get(game_id)
                if record is None:
                    self._fetch_record(game_id)
                    table.add_row(game_id, SYMBOLS[seat], "…", "", "", key=game_id)
                    continue
                game, params = record.get("game", "?"), record.get("params") or {}
                players = record.get("players") or [None, None]
                ply = len(record.get("moves") or [])
                finished = record.get("status") not in ("open", "live")
            opponent = player_name(players[1 - seat]) if len(players) == 2 else "?"
            if finished:
                note = "over"
            elif players[1 - seat] is None:
                note = "waiting for a player"
            else:
                note = "your move" if ply % 2 == seat else "their move"
            table.add_row(
                game_title(game, params),
                SYMBOLS[seat],
                Text(note, "bold") if note == "your move" else note,
                str(ply),
                opponent,
                key=game_id,
            )
        self._reselect(table, selected)
        pane = self.query_one("#mine-pane")
        was_shown = pane.display
        pane.display = bool(games)
        if games and not was_shown and self.focused is seeks:
            table.focus()  # coming back to the lobby with games to resume: Enter resumes

    def _fetch_record(self, game_id: str) -> None:
        self.records[game_id] = {}  # asked for: not again

        def got(reply: Record) -> None:
            self.records[game_id] = dict(reply.game)
            self.your_games_changed()

        self.request(GetGame, on_reply=got, on_error=lambda exc: None, game_id=game_id)

    @staticmethod
    def _selected_key(table: DataTable[Any]) -> str | None:
        if not table.row_count:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        except Exception:  # noqa: BLE001 - no valid cursor
            return None
        return key.value

    @staticmethod
    def _reselect(table: DataTable[Any], key: str | None) -> None:
        if key is None:
            return
        try:
            table.move_cursor(row=table.get_row_index(key))
        except Exception:  # noqa: BLE001 - the row is gone
            pass

    # --- keys ---------------------------------------------------------------------------------

    def action_refresh(self) -> None:
        def got_finished(reply: GameList) -> None:
            self.finished = list(reply.games)
            self._show_finished()

        def got_live(reply: GameList) -> None:
            self.live = {g["game_id"]: g for g in reply.games}
            self._show_live()

        quiet = lambda exc: None  # noqa: E731 - an old server or a drop: the tables stay
        self.request(ListGames, on_reply=got_finished, on_error=quiet, status="finished", limit=30)
        if not self.has_lobby:
            self.request(ListGames, on_reply=got_live, on_error=quiet, status="live")

    def action_new(self, kind: str) -> None:
        """The dialog asks the server itself and stays open if refused, its choices kept."""

        def send(fields: dict[str, Any]) -> None:
            def taken(reply: Any) -> None:
                if dialog.is_current:  # (a new game's screen has already replaced it)
                    dialog.dismiss(None)
                if kind == "seek":
                    self._posted(reply)
                elif kind == "quick":
                    self._queued(reply, int(fields.get("ai_after_s", 0)))

            def refused(exc: RequestFailed) -> None:
                dialog.refused(exc.message)
                self.set_status(f"The server refused: {exc.message}")

            def lost(exc: ConnectionLost) -> None:
                dialog.lost(str(exc))
                self.set_status(lost_words(str(exc)))

            request, doing = {
                "ai": (CreateGame, "Starting a game against the AI…"),
                "seek": (Seek, "Posting the seek…"),
                "quick": (QuickPair, "Joining the quick-pairing queue…"),
            }[kind]
            self.set_status(doing)
            self.request(request, on_reply=taken, on_error=refused, on_lost=lost, **fields)

        dialog = NewGameDialog(kind, send)
        self.app.push_screen(dialog)

    def _posted(self, reply: SeekPosted) -> None:
        self.my_seeks.add(reply.seek_id)
        self.set_status("Seek posted: waiting for someone to accept it (x cancels).")
        self._show_seeks()

    def _queued(self, reply: SeekPosted | Any, ai_after_s: int) -> None:
        if not isinstance(reply, SeekPosted):
            return  # seated at once: a partner was waiting; the game screen is open
        self.queued[reply.seek_id] = ai_after_s
        then = f"; the AI after {ai_after_s} s" if ai_after_s else ""
        self.set_status(f"Waiting for a partner in the quick-pairing queue{then} (x leaves it).")

    def action_open(self) -> None:
        focused = self.focused
        if not isinstance(focused, DataTable):
            return
        key = self._selected_key(focused)
        if key is None:
            return
        if focused.id == "seeks":
            if key in self.my_seeks:
                self.set_status("That is your own seek: x cancels it.")
                return
            self.request(AcceptSeek, on_error=self._refused, seek_id=key)
        elif focused.id == "mine":
            self._resume(key)
        elif focused.id == "live":
            if any(game_id == key for game_id, _, _ in self.my_games):
                self._resume(key)
                return  # our own game: play it, do not watch it
            self.post_message(OpenGame(key, "watch", on_error=self._refused))
        elif focused.id == "finished":
            self.post_message(OpenGame(key, "replay", on_error=self._refused))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def _refused(self, exc: RequestFailed) -> None:
        self.notify(exc.message, title="The server refused", severity="error")
        self.set_status(f"The server refused: {exc.message}")
        self.action_refresh()

    def _resume(self, game_id: str) -> None:
        self.set_status(f"Resuming game {game_id}…")

        def refused(exc: RequestFailed) -> None:
            self._refused(exc)
            self.your_games_changed()

        self.post_message(OpenGame(game_id, "resume", on_error=refused))

    def action_cancel_seek(self) -> None:
        if not self.my_seeks and not self.queued:
            self.set_status("You have no seek to cancel.")
            return
        what = []
        if self.my_seeks:
            what.append("Seek cancelled." if len(self.my_seeks) == 1 else "Seeks cancelled.")
        if self.queued:
            what.append("You left the quick-pairing queue.")
        for seek_id in [*self.my_seeks, *self.queued]:
            self.request(CancelSeek, on_error=lambda exc: None, seek_id=seek_id)
            self.seeks.pop(seek_id, None)
        self.my_seeks.clear()
        self.queued.clear()
        self.set_status(" ".join(what))
        self._show_seeks()

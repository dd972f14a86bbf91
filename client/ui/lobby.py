"""The lobby: live seeks and games pushed by the server, recent games to replay."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, Static

from client.connection import RequestFailed
from client.ui.dialogs import NewGameDialog
from client.ui.model import clock_title, game_title, player_name
from protocol import (
    AcceptSeek,
    CancelSeek,
    CreateGame,
    GameList,
    ListGames,
    LobbyEvent,
    LobbyState,
    Message,
    QuickPair,
    Seek,
    SeekPosted,
)

if TYPE_CHECKING:
    from client.ui.app import NoughtsApp


def _names(game: dict[str, Any]) -> tuple[str, str]:
    players = game.get("players") or [None, None]
    return player_name(players[0]), player_name(players[1])


class LobbyScreen(Screen[None]):
    """Seeks and live games as the server pushes them; keys to play, seek, watch, replay."""

    BINDINGS = [
        Binding("p", "new('ai')", "Play the AI"),
        Binding("s", "new('seek')", "Seek"),
        Binding("k", "new('quick')", "Quick pairing"),
        Binding("enter", "open", "Accept/watch/replay", show=True),
        Binding("x", "cancel_seek", "Cancel seek"),
        Binding("g", "refresh", "Refresh"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.seeks: dict[str, dict[str, Any]] = {}
        self.live: dict[str, dict[str, Any]] = {}
        self.finished: list[dict[str, Any]] = []
        self.my_seeks: set[str] = set()
        self.has_lobby = True

    @property
    def noughts(self) -> NoughtsApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(id="lobby-title")
        with Horizontal(id="lobby-top"):
            with Vertical(classes="lobby-pane"):
                yield Label("Open seeks", classes="pane-title")
                yield DataTable(id="seeks", cursor_type="row", zebra_stripes=True)
            with Vertical(classes="lobby-pane"):
                yield Label("Live games", classes="pane-title")
                yield DataTable(id="live", cursor_type="row", zebra_stripes=True)
        with Vertical(id="lobby-bottom", classes="lobby-pane"):
            yield Label("Recent games", classes="pane-title")
            yield DataTable(id="finished", cursor_type="row", zebra_stripes=True)
        yield Static(id="lobby-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#seeks", DataTable).add_columns("player", "game", "clock", "plays", "")
        self.query_one("#live", DataTable).add_columns("game", "X", "O", "moves")
        self.query_one("#finished", DataTable).add_columns("game", "X", "O", "result", "when")
        self.link_changed(*self.noughts.link_state)
        self.query_one("#seeks", DataTable).focus()

    def on_screen_resume(self) -> None:
        if self.noughts.link.connection is not None:
            self.action_refresh()

    # --- the server ---------------------------------------------------------------------------

    def link_changed(self, state: str, detail: str) -> None:
        if not self.is_mounted:
            return
        title = Text()
        title.append("noughts lobby", "bold")
        title.append(f"  ·  {self.noughts.player_name}  ·  ")
        if state == "online":
            title.append(f"connected to {self.noughts.url}", "green")
            self.action_refresh()
        elif state == "offline":
            title.append(f"offline: {detail}", "bold red")
        else:
            title.append(f"connecting to {self.noughts.url}…", "yellow")
        self.query_one("#lobby-title", Static).update(title)

    def lobby_message(self, message: Message) -> None:
        if not self.is_mounted:
            return
        if isinstance(message, LobbyState):
            self.has_lobby = True
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
        self._show_seeks()
        self._show_live()

    def lobby_unavailable(self, reason: str) -> None:
        self.has_lobby = False
        self.set_status(
            f"This server has no lobby ({reason}): p plays the AI; live games are listed "
            "when you refresh (g)."
        )

    def set_status(self, text: str) -> None:
        self.query_one("#lobby-status", Static).update(text)

    # --- tables -------------------------------------------------------------------------------

    def _show_seeks(self) -> None:
        table = self.query_one("#seeks", DataTable)
        selected = self._selected_key(table)
        table.clear()
        my_id = self.noughts.link.player_id
        for seek_id, seek in sorted(self.seeks.items(), key=lambda kv: kv[1].get("created_at", 0)):
            owner = seek.get("player") or {}
            mine = owner.get("player_id") == my_id or seek_id in self.my_seeks
            colour = {"x": "X", "o": "O"}.get(seek.get("color", "random"), "random")
            table.add_row(
                player_name(owner) + (" (you)" if mine else ""),
                game_title(seek.get("game", "?"), seek.get("params") or {}),
                clock_title(seek.get("clock") or {}),
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
        table = self.query_one("#live", DataTable)
        selected = self._selected_key(table)
        table.clear()
        for game_id, game in self.live.items():
            x, o = _names(game)
            title = game_title(game.get("game", "?"), game.get("params") or {})
            table.add_row(title, x, o, str(game.get("ply", 0)), key=game_id)
        self._reselect(table, selected)
        table.call_after_refresh(table.notify_style_update)  # as in _show_seeks

    def _show_finished(self) -> None:
        table = self.query_one("#finished", DataTable)
        selected = self._selected_key(table)
        table.clear()
        for game in self.finished:
            x, o = _names(game)
            when = datetime.fromtimestamp(game.get("created_at", 0), UTC).strftime("%m-%d %H:%M")
            result = f"{game.get('result') or '*'} {game.get('reason') or ''}".strip()
            title = game_title(game.get("game", "?"), game.get("params") or {})
            table.add_row(title, x, o, result, when, key=game["game_id"])
        self._reselect(table, selected)

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
        self.noughts.request(
            ListGames, on_reply=got_finished, on_error=quiet, status="finished", limit=30
        )
        if not self.has_lobby:
            self.noughts.request(ListGames, on_reply=got_live, on_error=quiet, status="live")

    def action_new(self, kind: str) -> None:
        def chosen(fields: dict[str, Any] | None) -> None:
            if fields is None:
                return
            if kind == "ai":
                self.noughts.request(CreateGame, **fields)
            elif kind == "seek":
                self.noughts.request(Seek, on_reply=self._posted, **fields)
            else:
                self.noughts.request(QuickPair, on_reply=self._queued, **fields)

        self.app.push_screen(NewGameDialog(kind), chosen)

    def _posted(self, reply: SeekPosted) -> None:
        self.my_seeks.add(reply.seek_id)
        self.set_status("Seek posted: waiting for someone to accept it (x cancels).")
        self._show_seeks()

    def _queued(self, reply: SeekPosted) -> None:
        self.my_seeks.add(reply.seek_id)
        self.set_status("Waiting for a partner in the quick-pairing queue (x leaves it).")

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
            self.noughts.request(AcceptSeek, on_error=self._refused, seek_id=key)
        elif focused.id == "live":
            self.noughts.run_worker(self._watch(key), exit_on_error=False)
        elif focused.id == "finished":
            self.noughts.run_worker(self._replay(key), exit_on_error=False)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    async def _watch(self, game_id: str) -> None:
        try:
            await self.noughts.watch_game(game_id)
        except RequestFailed as exc:
            self._refused(exc)

    async def _replay(self, game_id: str) -> None:
        try:
            await self.noughts.open_replay(game_id)
        except RequestFailed as exc:
            self._refused(exc)

    def _refused(self, exc: RequestFailed) -> None:
        self.notify(exc.message, title="The server refused", severity="error")
        self.action_refresh()

    def action_cancel_seek(self) -> None:
        if not self.my_seeks:
            self.set_status("You have no seek to cancel.")
            return
        for seek_id in list(self.my_seeks):
            self.noughts.request(CancelSeek, on_error=lambda exc: None, seek_id=seek_id)
            self.my_seeks.discard(seek_id)
            self.seeks.pop(seek_id, None)
        self.set_status("Seek cancelled.")
        self._show_seeks()

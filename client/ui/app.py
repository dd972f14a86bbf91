"""The Textual app: one link to the server, the games it follows, and the screens.

Every message from the server reaches ``on_server_message`` in order (posted by the
link's reader); the app applies game events to its ``GameModel``s and tells the
screens showing them. Requests run in workers (``request``), so the UI never
waits on the network. The link is the one ``ServerConnection`` of every client, started
in the background: it retries until the server answers, and after a reconnection its
session core follows every game again from the last ``seq`` seen and subscribes to the
lobby again (PROTOCOL.md, resume).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rich.text import Text
from textual.app import App
from textual.binding import Binding
from textual.message import Message as TextualMessage
from textual.screen import Screen

from client.connection import ConnectionLost, RequestFailed, ServerConnection
from client.game_view import (
    GameDataError,
    GameModel,
    clock_title,
    game_title,
    player_name,
    result_sentence,
)
from client.replay import RecordError
from client.session_core import RESENDABLE, SeekReposted
from client.sessions import SessionStore, renamed_notice
from client.ui.dialogs import ChallengeDialog
from client.ui.game import GameScreen
from client.ui.lobby import LobbyScreen
from client.ui.messages import OpenGame, RequestingScreen, RingBell, SendRequest, StopFollowing
from client.ui.replay import ReplayScreen
from protocol import (
    GAME_EVENTS,
    AcceptSeek,
    CreateGame,
    DeclineSeek,
    Ended,
    Error,
    GetGame,
    LobbyEvent,
    LobbyState,
    LobbySubscribe,
    Message,
    Moved,
    Resume,
    Seated,
    SeekDeclined,
    Snapshot,
    Watch,
    Welcome,
)

S = TypeVar("S", bound=Screen[Any])


@dataclass(frozen=True)
class Start:
    """What the app does once connected: ``kind`` is "ai" (create a game against the
    AI with ``fields``), "lobby", "join", "watch" or "replay" (of ``game_id``), or
    "pairing" (send ``request`` with ``fields``: quick pairing, a seek, a challenge or
    accepting a seek; the game opens when the server seats us)."""

    kind: str = "lobby"
    game_id: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    request: type[Message] | None = None


class ServerMessage(TextualMessage):
    """A message from the server, posted to the app by the link's reader (or a seek of ours
    posted again after a reconnection)."""

    def __init__(self, message: Message | SeekReposted) -> None:
        super().__init__()
        self.message = message


class LinkState(TextualMessage):
    """The link connected, dropped or is trying again: ``state`` is "connecting", "online"
    or "offline"; ``final``: closed for good (the server refused the greeting)."""

    def __init__(self, state: str, detail: str, final: bool = False) -> None:
        super().__init__()
        self.state = state
        self.detail = detail
        self.final = final


class Connected(TextualMessage):
    """The server greeted the link (``again``: after a reconnection, with every game
    followed before followed again)."""

    def __init__(self, welcome: Welcome, again: bool) -> None:
        super().__init__()
        self.welcome = welcome
        self.again = again


# The connection's status as the screens show it.
LINK_STATES = {
    "connecting": "connecting",
    "connected": "online",
    "reconnecting": "offline",
    "closed": "offline",
}


class NoughtsApp(App[None]):
    """noughts in the terminal: lobby, games, spectating and replays."""

    TITLE = "noughts"
    CSS_PATH = Path(__file__).with_name("noughts.tcss")  # absolute: subclasses live elsewhere
    BINDINGS = [
        # Listed by ? (not in the footer, full enough without it).
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        # Not a priority: "?" typed into a move box stays there.
        Binding("question_mark", "toggle_keys", "Keys"),
        # ctrl+g: the bell's own control character (BEL, ^G).
        Binding("ctrl+g", "toggle_bell", "Bell on/off", show=False),
    ]

    def __init__(
        self,
        url: str,
        *,
        name: str = "player",
        start: Start | None = None,
        clock: Callable[[], float] = time.monotonic,
        sessions: SessionStore | None = None,
        session_key: str | None = None,
        bell: bool = True,
        rename_if_taken: bool = False,
    ) -> None:
        """``sessions`` keeps the player's session between runs, under ``session_key`` (the
        server's URL unless told otherwise: an embedded server's port changes every run).
        ``rename_if_taken``: for an embedded server (``ClientSession``), said in a notice."""
        super().__init__()
        self.url = url
        self.player_name = name
        self.start = start or Start("lobby")
        self.clock = clock  # local time for clocks; tests pass a fixed one
        self.games: dict[str, GameModel] = {}
        self.watching: set[str] = set()
        # Unfinished games of ours the server named in its welcome: game_id -> its entry.
        self.resumable: dict[str, dict[str, Any]] = {}
        self.lobby_wanted = False
        self.link_state = ("connecting", url)
        self.started = False
        self.sessions = sessions
        self.session_key = session_key or url
        self.challenges_seen: set[str] = set()
        self.bell_on = bell  # the terminal bell: the opponent moved, a game began, time is short
        self.closing = False  # the app is closing (and closes the link)
        saved = self._saved_session()
        self.link = ServerConnection(
            url,
            name=name[:32],
            client="noughts-ui",
            session=saved,
            reconnect_for_s=None,  # for as long as the app runs
            deliver=lambda message: self.post_message(ServerMessage(message)),
            on_status=lambda status, detail: self.post_message(
                LinkState(LINK_STATES[status], detail, final=status == "closed")
            ),
            on_welcome=lambda welcome, again: self.post_message(Connected(welcome, again)),
            rename_if_taken=rename_if_taken,
        )

    def _saved_session(self) -> str | None:
        if self.sessions is None:
            return None
        return self.sessions.load(self.session_key, self.player_name)

    def _save_session(self, session: str) -> None:
        if self.sessions is None:
            return
        try:
            self.sessions.save(self.session_key, self.player_name, session)
        except OSError as exc:
            self.notify(
                f"Could not save the session in {self.sessions.path} ({exc.strerror or exc}): "
                "the next run will not find this run's games.",
                title="Session not saved",
                severity="warning",
                timeout=10,
            )

    # --- start-up and the link -------------------------------------------------------------

    def on_mount(self) -> None:
        self.push_screen(LobbyScreen(self.player_name, self.url))
        self.link.start()

    async def on_unmount(self) -> None:
        self.closing = True
        await self.link.close()

    def on_connected(self, message: Connected) -> None:
        welcome = message.welcome
        self._save_session(welcome.session)
        if not message.again and self.link.core.renamed_from is not None and self.sessions:
            notice = renamed_notice(self.link, self.sessions)
            self.notify(
                f"{notice[0].upper()}{notice[1:]}.",
                title="Another name",
                severity="warning",
                timeout=15,
            )
        self.resumable = {
            game["game_id"]: game for game in welcome.games if game.get("game_id") is not None
        }
        for screen in self.screen_stack:
            if isinstance(screen, LobbyScreen):
                screen.player_id = welcome.player_id  # attributes down
        self._games_changed()
        if not message.again:  # after a reconnection the link follows everything again
            self._spawn(self._first_connection)

    async def _first_connection(self) -> None:
        if self.lobby_wanted or self.start.kind in ("lobby", "pairing"):  # pairing waits there
            await self.subscribe_lobby()
        if not self.started:
            self.started = True
            others = set(self.resumable) - {self.start.game_id}  # (--join takes one back)
            if others and self.start.kind != "lobby":
                count = len(others)
                self.notify(
                    f"You have {count} unfinished game{'s' if count > 1 else ''} on this "
                    "server: the lobby (Esc) lists them under Your games.",
                    title="Welcome back",
                    timeout=10,
                )
            await self._begin()

    async def _begin(self) -> None:
        start = self.start
        try:
            if start.kind == "ai":
                seated = await self.link.request(CreateGame, again=True, **start.fields)
                if seated.rid is None:  # made by a create lost with the connection
                    await self.resume_game(seated.game_id)
            elif start.kind == "join" and start.game_id in self.link.seats:
                # A seat of ours (the plain client's leaving line names --join to take it
                # back): resumed, as from the lobby's Your games.
                await self.resume_game(start.game_id)
            elif start.kind == "join" and start.game_id:
                from protocol import JoinGame

                await self.link.request(JoinGame, game_id=start.game_id)
            elif start.kind == "watch" and start.game_id:
                await self.watch_game(start.game_id)
            elif start.kind == "replay" and start.game_id:
                await self.open_replay(start.game_id)
            elif start.kind == "pairing" and start.request is not None:
                request = start.request
                reply = await self.link.request(request, **start.fields)
                if not isinstance(reply, Seated):
                    self.notify(
                        f"Waiting for an opponent ({reply.seek_id}); x in the lobby cancels.",
                        title="Seeking",
                        timeout=20,
                    )
                    for lobby in self._screens(LobbyScreen):
                        lobby.waiting(request, reply, start.fields)
        except RequestFailed as exc:
            self.notify(exc.message, title="The server refused", severity="error", timeout=10)

    async def _resume(self, model: GameModel) -> None:
        try:
            resumed = await self.link.request(Resume, game_id=model.game_id, since=model.seq)
        except RequestFailed as exc:
            self.notify(f"Game {model.game_id}: {exc.message}", severity="warning")
            return
        if resumed.token is not None:
            model.seat = resumed.seat

    def on_link_state(self, message: LinkState) -> None:
        if message.final and not self.closing:
            # The link retries for as long as the app runs, so it closes only when the server
            # refused us (a name, the protocol's version): nothing left to do but say why, in
            # full, and end with status 1, as the plain client does.
            self.exit(return_code=1, message=Text(f"noughts: {message.detail}"))
            return
        self.link_state = (message.state, message.detail)
        for screen in self._screens(RequestingScreen):
            screen.link_changed(message.state, message.detail)

    def _screens(self, kind: type[S]) -> list[S]:
        """The screens of the stack of one kind (attributes down: the app calls their
        typed methods)."""
        return [screen for screen in self.screen_stack if isinstance(screen, kind)]

    def _games_changed(self) -> None:
        games = self.my_games()
        for lobby in self._screens(LobbyScreen):
            lobby.set_my_games(games)

    # --- messages from the server -------------------------------------------------------

    def on_server_message(self, event: ServerMessage) -> None:
        message = event.message
        if isinstance(message, Seated):
            self._seated(message)
        elif isinstance(message, GAME_EVENTS):
            self._game_event(message)
        elif isinstance(message, LobbyState | LobbyEvent):
            for lobby in self._screens(LobbyScreen):
                lobby.lobby_message(message)
            self._challenged(message)
        elif isinstance(message, SeekDeclined):
            for lobby in self._screens(LobbyScreen):
                lobby.lobby_message(message)
            self.ring()
            self.notify(
                f"{player_name(message.player)} declined your challenge.",
                title="Challenge declined",
                severity="warning",
                timeout=10,
            )
        elif isinstance(message, SeekReposted):
            for lobby in self._screens(LobbyScreen):
                lobby.reposted(message)
            if message.error is not None:
                self.notify(
                    f"Reconnected, but the server refused it again ({message.error.message}): "
                    "post a new one from the lobby.",
                    title="Your seek is gone",
                    severity="warning",
                    timeout=20,
                )
        elif isinstance(message, Error) and message.rid is None:
            where = f"Game {message.game_id}: " if message.game_id else ""
            self.notify(f"{where}{message.message}", title=message.code, severity="error")

    def _challenged(self, message: LobbyState | LobbyEvent) -> None:
        """A challenge to us in the lobby: a notification with accept and decline, once."""
        if isinstance(message, LobbyState):
            seeks = list(message.seeks)
        else:
            seeks = [message.seek] if message.kind == "seek_added" and message.seek else []
        me = self.link.player_id
        for seek in seeks:
            seek_id = str(seek.get("seek_id"))
            if me is None or seek.get("to") != me or seek_id in self.challenges_seen:
                continue
            self.challenges_seen.add(seek_id)
            self.ring()
            challenger = player_name(seek.get("player"))
            ours = {"x": "O", "o": "X"}.get(seek.get("color", "random"), "X or O (drawn by lot)")
            game = game_title(seek.get("game", "?"), seek.get("params") or {})
            clock = clock_title(seek.get("clock") or {})
            text = f"{challenger} challenges you to {game}, {clock}; you would play {ours}."

            def answered(
                accept: bool | None, seek_id: str = seek_id, who: str = challenger
            ) -> None:
                if accept:
                    self.request(AcceptSeek, seek_id=seek_id)
                else:  # the challenger is told (seek_declined)
                    self.request(
                        DeclineSeek,
                        lambda _: self.notify(f"You declined {who}'s challenge."),
                        seek_id=seek_id,
                    )

            self.push_screen(ChallengeDialog(text), answered)

    def _seated(self, seated: Seated) -> None:
        """A seat of ours: a game we created, joined or accepted, or a pairing or rematch."""
        model = self.games.get(seated.game_id)
        if model is None:
            model = GameModel(seated.game_id)
            self.games[seated.game_id] = model
        model.seat = seated.seat
        for lobby in self._screens(LobbyScreen):
            lobby.seated(seated.game_id)
        self._games_changed()
        self._show_game(model)  # a rematch or a new pairing replaces the game on screen

    def _game_event(self, message: Message) -> None:
        game_id = getattr(message, "game_id", "")
        model = self.games.get(game_id)
        if model is None:
            return  # a game we no longer follow
        was_open = model.status == "open"
        had_state = model.state is not None
        try:
            applied = model.apply(message, self.clock())
        except GameDataError as exc:  # a game this client does not know, a move it refuses
            self.notify(f"Game {game_id} cannot be followed: {exc}", title="Cannot follow",
                        severity="error", timeout=10)  # fmt: skip
            if isinstance(self.screen, GameScreen) and self.screen.model is model:
                self.pop_screen()
            self.stop_following(game_id)
            return
        if not applied:
            self._spawn(functools.partial(self._resume, model))
            return
        if not had_state and model.state is not None:
            # The game's first snapshot: the lobby's list now shows its model (it showed
            # the record fetched when we were seated, which never moved on).
            self._games_changed()
        if model.seat is not None and not model.over:
            if isinstance(message, Moved) and message.seat != model.seat:
                self.ring()  # the opponent moved
            elif model.status == "live" and (
                was_open or (isinstance(message, Snapshot) and not message.actions)
            ):
                self.ring()  # our game began
        for lobby in self._screens(LobbyScreen):
            lobby.game_changed(model, message)
        for game in self._screens(GameScreen):
            game.game_changed(model, message)
        if model.over:
            self.resumable.pop(game_id, None)
            self._games_changed()
        if isinstance(message, Ended) and not any(
            game.model is model for game in self._screens(GameScreen)
        ):
            # A game of ours ended while its screen was closed: say how.
            sentence = result_sentence(model.result, model.reason, model.seat)
            self.notify(f"Game {game_id} is over. {sentence}", title="Game over", timeout=10)

    # --- what the screens ask for (messages up) ------------------------------------------------

    def on_send_request(self, message: SendRequest) -> None:
        self.request(
            message.kind, message.on_reply, message.on_error, message.on_lost, **message.fields
        )

    def on_open_game(self, message: OpenGame) -> None:
        opening = {"resume": self.resume_game, "watch": self.watch_game, "replay": self.open_replay}

        async def open_game() -> None:
            try:
                await opening[message.how](message.game_id)
            except RequestFailed as exc:
                if message.on_error is not None:
                    message.on_error(exc)
                else:
                    self.notify(exc.message, title="The server refused", severity="error")
            except ConnectionLost as exc:
                self.notify(str(exc), title="Offline", severity="warning")

        self._spawn(open_game)

    def on_stop_following(self, message: StopFollowing) -> None:
        self.stop_following(message.game_id)

    def on_ring_bell(self, message: RingBell) -> None:
        self.ring()

    def ring(self) -> None:
        """The terminal bell, unless turned off (--no-bell, ctrl+g)."""
        if self.bell_on:
            self.bell()

    def action_toggle_bell(self) -> None:
        self.bell_on = not self.bell_on
        self.notify(f"The bell is {'on' if self.bell_on else 'off'} (ctrl+g turns it "
                    f"{'off' if self.bell_on else 'on'}).")  # fmt: skip

    def request(
        self,
        kind: type[Message],
        on_reply: Callable[[Any], object] | None = None,
        on_error: Callable[[RequestFailed], object] | None = None,
        on_lost: Callable[[ConnectionLost], object] | None = None,
        **fields: Any,
    ) -> None:
        """Send a request from a worker. Every request sent is settled by exactly one of
        ``on_reply``, ``on_error`` (refused) and ``on_lost`` (no answer: the connection
        dropped, or was down), so that nothing waits for an answer that will never come;
        a refusal or a loss without its callback becomes a notification.
        A game request other than a move (resign, draw, abort, claim, rematch) made while
        offline waits and is sent once reconnected, with the ``seq`` seen when it was made, so
        it is never applied twice (PROTOCOL.md, "A request sent again"); a move is not sent
        again blindly: the resumed game says whether it arrived.

        A refusal is handled after the server's messages that came before it (the link posts
        those to the app's queue, where the refusal goes behind them): a request that crossed
        its game's end is refused once the end is applied and shown, and the refusal, which
        says only that the game is over, is not said (``GameModel.said_by_the_end``)."""
        again = kind in RESENDABLE

        def refused(exc: RequestFailed) -> None:
            if on_error is not None:
                on_error(exc)
                return
            model = self.games.get(fields.get("game_id", ""))
            if model is None or not model.said_by_the_end(exc.code):
                self.notify(exc.message, title="The server refused", severity="error")

        async def send() -> None:
            try:
                reply = await self.link.request(kind, again=again, **fields)
            except RequestFailed as exc:
                self.call_later(refused, exc)
                return
            except ConnectionLost as exc:
                if on_lost is not None:
                    on_lost(exc)
                else:
                    self.notify(str(exc), title="Offline", severity="warning")
                return
            if isinstance(reply, Seated) and reply.rid is None:
                # The game a create lost with the connection made (ServerConnection.request):
                # no seat was delivered of it, so it is opened here.
                with contextlib.suppress(RequestFailed, ConnectionLost):
                    await self.resume_game(reply.game_id)
            if on_reply is not None:
                on_reply(reply)

        self._spawn(send)

    def _spawn(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` in a worker. The function, not a coroutine: a worker that never starts
        (the app is closing) then leaves no coroutine unawaited."""
        self.run_worker(work, group="net", exit_on_error=False)

    def action_toggle_keys(self) -> None:
        """``?`` shows or hides every key of the current screen: Textual's keys panel, drawn
        from the active bindings (the focused widget's, the screen's and the app's BINDINGS,
        less those its ``check_action`` turns off), never a list written by hand."""
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()
        # The game screen lists every key while the panel is shown, and only what the game
        # allows once it is gone: refreshed after the panel is (un)mounted, as a refresh now
        # still sees the panel being removed.
        self.call_after_refresh(self.screen.refresh_bindings)

    async def subscribe_lobby(self) -> None:
        self.lobby_wanted = True
        try:
            reply = await self.link.request(LobbySubscribe)
        except RequestFailed as exc:
            reply = None
            for lobby in self._screens(LobbyScreen):
                lobby.lobby_unavailable(exc.message)
        if reply is not None:
            self.post_message(ServerMessage(reply))

    async def watch_game(self, game_id: str) -> None:
        model = self.games.get(game_id) or GameModel(game_id)
        self.games[game_id] = model
        self.watching.add(game_id)
        try:
            await self.link.request(Watch, game_id=game_id)
        except RequestFailed:
            self.watching.discard(game_id)
            del self.games[game_id]
            raise
        if game_id not in self.watching:
            return  # its snapshot could not be followed (_game_event said why)
        self.push_screen(self._game_screen(model))

    def _game_screen(self, model: GameModel) -> GameScreen:
        return GameScreen(model, clock=self.clock, link_state=self.link_state)

    def my_games(self) -> list[tuple[str, int, GameModel | None]]:
        """Our unfinished games, (game_id, seat, its model if we follow it): those we
        play in this run and those the server's welcome named."""
        games: dict[str, tuple[str, int, GameModel | None]] = {}
        for game_id, entry in self.resumable.items():
            games[game_id] = (game_id, int(entry["seat"]), None)
        for game_id, model in self.games.items():
            if model.seat is not None and not model.over and game_id not in self.watching:
                games[game_id] = (game_id, model.seat, model if model.state else None)
        return list(games.values())

    async def resume_game(self, game_id: str) -> None:
        """Open one of our games: the screen of a game we follow, or ``resume`` it from the
        start (since=0: a snapshot) and open its screen. RequestFailed if the server
        refuses (the game is gone)."""
        model = self.games.get(game_id)
        if model is None or model.state is None:
            entry = self.resumable.get(game_id, {})
            model = model or GameModel(game_id, seat=entry.get("seat"))
            self.games[game_id] = model
            try:
                resumed = await self.link.request(Resume, game_id=game_id, since=0)
            except RequestFailed:
                self.resumable.pop(game_id, None)
                if model.state is None:
                    del self.games[game_id]
                raise
            if resumed.token is not None:
                model.seat = resumed.seat
            self._games_changed()
        self._show_game(model)

    def _show_game(self, model: GameModel) -> None:
        """Put ``model``'s screen on top, in place of the game and dialogs shown there."""
        if not self.screen_stack:
            return  # the app is closing: a seat granted now is kept in self.games only
        while isinstance(self.screen, GameScreen) or getattr(self.screen, "is_modal", False):
            self.pop_screen()
        self.push_screen(self._game_screen(model))

    def stop_following(self, game_id: str) -> None:
        """The game's screen closed: forget it (and stop watching it)."""
        from protocol import Unwatch

        if game_id in self.watching:
            self.watching.discard(game_id)
            self.request(Unwatch, on_error=lambda exc: None, game_id=game_id)
        model = self.games.get(game_id)
        if model is not None and (model.over or model.seat is None):
            del self.games[game_id]
        self._games_changed()

    async def open_replay(self, game_id: str) -> None:
        reply = await self.link.request(GetGame, game_id=game_id)
        try:
            screen = ReplayScreen(reply.game)
        except RecordError as exc:  # a game this client does not know, a damaged record
            self.notify(str(exc), title="Cannot replay", severity="error", timeout=10)
            return
        self.push_screen(screen)

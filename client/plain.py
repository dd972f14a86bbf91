"""The line-oriented terminal client: play a game by typing moves.

It draws the board as text, takes a move in the one notation (engine/notation.py: "b2",
"h8"; the action number and ``row,col`` still read), shows the AI's move and what its search
saw, states clear errors and the result. It works through pipes too, which
makes it the client for scripts, screen readers and tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import engine
from client.connection import ConnectionLost, RequestFailed, ServerConnection
from client.game_view import SYMBOLS, GameModel, describe_stats, format_clocks, player_name
from client.session_core import RESENDABLE
from protocol import (
    Abort,
    Claim,
    CreateGame,
    Draw,
    Ended,
    JoinGame,
    Message,
    Move,
    Moved,
    Offer,
    Presence,
    Resign,
    Resume,
    Seated,
    SeekDeclined,
    Snapshot,
)

ReadLine = Callable[[str], Awaitable[str | None]]
# Typed at the prompt: request and its fields (besides the game; the connection adds the
# seat's token).
COMMANDS: dict[str, tuple[type[Message], dict[str, Any]]] = {
    "draw": (Draw, {"answer": "offer"}),  # an offer, or the acceptance of one
    "decline": (Draw, {"answer": "decline"}),
    "abort": (Abort, {}),
    "claim": (Claim, {"outcome": "win"}),
    "claim draw": (Claim, {"outcome": "draw"}),
    "resign": (Resign, {}),
}
Write = Callable[[str], None]


async def read_stdin(prompt: str) -> str | None:
    """input() on a thread, so the event loop keeps reading the network meanwhile."""
    try:
        return await asyncio.to_thread(input, prompt)
    except EOFError:
        return None


class PlainGame:
    """Follows one game's events on a connection, prompting when it is our turn."""

    def __init__(
        self,
        connection: ServerConnection,
        *,
        write: Write = print,
        read_line: ReadLine = read_stdin,
        where: str = "",
    ) -> None:
        """``where``: the options naming the server in the commands suggested to the user
        (``--server URL``, or ``--db PATH`` of an embedded server), empty for the default."""
        self.connection = connection
        self.where = f" {where}" if where else ""
        self.write = write
        self.read_line = read_line
        self.game_id: str | None = None
        self.seat: int | None = None
        self.model: GameModel | None = None  # from the game's first snapshot on
        self.ended: Ended | None = None

    async def create(self, **fields: Any) -> None:
        seated = await self.connection.request(CreateGame, **fields)
        self.game_id, self.seat = seated.game_id, seated.seat

    async def pair(self, kind: type[Message], fields: dict[str, Any]) -> bool:
        """Quick pairing, a seek, a challenge or accepting a seek: wait to be seated. False
        if the player challenged declined (said on stdout)."""
        reply = await self.connection.request(kind, **fields)
        if isinstance(reply, Seated):  # accepting a seek seats us at once
            self.game_id, self.seat = reply.game_id, reply.seat
            return True
        what = {"quick": "a player (or the AI)", "seek": "someone to accept your seek"}
        self.write(f"Waiting for {what.get(kind.TYPE, 'an opponent')} ({reply.seek_id})...")
        while True:
            while not self.connection.lobby_events.empty():
                message = self.connection.lobby_events.get_nowait()
                if isinstance(message, SeekDeclined) and message.seek_id == reply.seek_id:
                    self.write(f"{player_name(message.player)} declined your challenge.")
                    return False
            try:
                event = await self.connection.next_event(timeout=0.5)
            except TimeoutError:
                continue  # and look for a refusal again
            held = self.connection.seats.get(getattr(event, "game_id", ""))
            if isinstance(event, Snapshot) and held is not None and event.status == "live":
                self.game_id = event.game_id
                self.seat = held[0]
                self.connection.events.put_nowait(event)  # run() starts from it
                return True

    async def join(self, game_id: str) -> None:
        """Join ``game_id``, or take back the seat this session holds in it."""
        if game_id in self.connection.seats:
            # Resume from 0: a snapshot, then ``resumed`` with the seat (PROTOCOL.md).
            await self.connection.request(Resume, game_id=game_id, since=0)
            self.game_id = game_id
            self.seat = self.connection.seats[game_id][0]
            return
        seated = await self.connection.request(JoinGame, game_id=game_id)
        self.game_id, self.seat = seated.game_id, seated.seat

    def unfinished(self) -> None:
        """Name the other unfinished games this session holds a seat in, and how to go back."""
        games = [g for g in self.connection.seats if g != self.game_id]
        if games:
            count = f"{len(games)} unfinished game{'s' if len(games) > 1 else ''}"
            self.write(
                f"You have {count} on this server ({', '.join(sorted(games))}): "
                f"noughts play{self.where} --join GAME_ID takes one back."
            )

    def _apply(self, event: Message) -> None:
        if self.model is None:
            assert self.game_id is not None
            self.model = GameModel(self.game_id, seat=self.seat)
        self.model.apply(event, time.monotonic())

    def _show_board(self) -> None:
        assert self.model is not None and self.model.state is not None
        self.write("")
        self.write(self.model.state.render())

    async def run(self) -> Ended | None:
        """Play until the game ends or the user quits; returns the ending, if any."""
        while self.ended is None:
            event = await self.connection.next_event()
            if getattr(event, "game_id", None) != self.game_id:
                continue
            self._apply(event)
            if isinstance(event, Snapshot):
                self._announce(event)
            elif isinstance(event, Moved):
                self._report_move(event)
            elif isinstance(event, Offer):
                self._report_offer(event)
            elif isinstance(event, Presence):
                assert self.model is not None
                who = self.model.who(event.seat)
                if event.online:
                    self.write(f"{who} came back.")
                else:
                    self.write(f"{who} left the game; its seat is held for a while.")
            elif isinstance(event, Ended):
                assert self.model is not None
                self.ended = event
                self.write(f"Game over: {self.model.result_sentence()}")
                self.write(f"Replay it with: noughts replay{self.where} {self.game_id}")
                return event
            if not self.connection.events.empty():
                continue  # catch up with what already arrived before asking for a move
            if await self._maybe_prompt() is False:
                return None
        return self.ended

    def _announce(self, snapshot: Snapshot) -> None:
        if snapshot.status == "open":
            self.write(
                f"Game {self.game_id} created; waiting for an opponent to join "
                f"(noughts play --join {self.game_id})."
            )
            return
        names = [p["name"] if p else "?" for p in snapshot.players]
        self.write(f"Game {self.game_id}: X = {names[0]}, O = {names[1]}.")
        if self.seat is not None:
            assert self.model is not None and self.model.state is not None
            example = self.model.state.game.grid.example()
            self.write(
                f"You play {SYMBOLS[self.seat]}. Type a move as the board labels it (e.g. "
                f"{example}), 'help', 'draw', 'resign', 'abort' (before the first moves) or "
                "'claim' (if your opponent left)."
            )
        self._show_board()

    def _report_move(self, moved: Moved) -> None:
        assert self.model is not None and self.model.moves
        who = self.model.who(moved.seat)
        line = f"{who} played {self.model.moves[-1].text}."
        if moved.stats:
            line += f"  [{describe_stats(moved.stats)}]"
        self.write(line + format_clocks(moved.clocks))
        self._show_board()

    def _report_offer(self, offer: Offer) -> None:
        if offer.seat == self.seat:
            return  # our own offer or answer, already known
        assert self.model is not None
        who = self.model.name(offer.seat)
        if offer.answer == "offer":
            self.write(f"{who} offers a {offer.kind}: type 'draw' to accept, 'decline' to refuse.")
        else:
            self.write(f"{who} {offer.answer}s the {offer.kind}.")

    async def _maybe_prompt(self) -> bool | None:
        model = self.model
        if model is None or model.state is None or not model.my_turn:
            return None
        state = model.state
        while True:
            line = await self.read_line(f"{SYMBOLS[state.current_player()]} to move> ")
            if line is None or line.strip().lower() in ("q", "quit", "exit"):
                self.write(
                    f"Leaving the game: noughts play{self.where} --join {self.game_id} takes "
                    "it back."
                )
                return False
            text = line.strip().lower()
            if not text:
                continue
            if text in ("help", "?"):
                moves = ", ".join(state.action_to_string(a) for a in model.legal_moves())
                self.write(f"Legal moves: {moves}")
                continue
            if text in COMMANDS:
                kind, fields = COMMANDS[text]
                what = "The server refused"
            else:
                try:
                    action = state.parse_action(text)
                except engine.IllegalMove as exc:
                    self.write(f"Not a legal move: {exc}")
                    continue
                kind, fields = Move, {"action": action, "ply": state.ply()}
                what = "The server refused that move"
            # A game request carries the seq seen when first sent: sent again after a
            # reconnection it is never applied twice (PROTOCOL.md, "A request sent again").
            again = kind in RESENDABLE
            try:
                await self.connection.request(kind, again=again, game_id=self.game_id, **fields)
            except RequestFailed as exc:
                self.write(f"{what}: {exc.message}")
                if not self.connection.events.empty():
                    return True  # the game moved on meanwhile: show it first
                continue
            except ConnectionLost:
                # A move is not sent again blindly: the resumed game says whether it arrived.
                self.write("The connection dropped before the server answered; reconnecting…")
                await self.connection.resynced()
                if self.connection.events.empty():
                    continue  # nothing happened meanwhile: still our move
                return True
            if kind is Draw and fields["answer"] == "offer":
                self.write("Draw offer sent; it stands until your opponent moves.")
            return True  # its event (or the game's end) comes back before the next prompt

"""The line-oriented terminal client: play a game by typing moves.

It draws the board as text, takes a move in the one notation (engine/notation.py: "b2",
"h8"; the action number and ``row,col`` still read), shows the AI's move and what its search
saw, states clear errors and the result. It works through pipes too, which
makes it the client for scripts, screen readers and tests.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import dataclasses
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import engine
from client.connection import ConnectionLost, RequestFailed, ServerConnection
from client.game_view import (
    SYMBOLS,
    GameModel,
    describe_stats,
    format_clocks,
    game_title,
    offer_sentence,
    player_name,
)
from client.session_core import RESENDABLE
from protocol import (
    Abort,
    CancelSeek,
    Claim,
    CreateGame,
    Draw,
    Ended,
    Error,
    JoinGame,
    Message,
    Move,
    Moved,
    Offer,
    Presence,
    Rematch,
    Resign,
    Resume,
    Seated,
    SeekDeclined,
    Snapshot,
)

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
QUIT = ("q", "quit", "exit")
HELP = ("help", "?")
Write = Callable[[str], None]


def write_prompt(text: str) -> None:
    print(text, end="", flush=True)


class Lines(Protocol):
    async def get(self) -> str | None:
        """The next line typed, without its newline; None at the end of the input."""


class TypedLines:
    """The lines typed on stdin, read from the start on a daemon thread: a line typed while
    the opponent thinks is read at once. The thread reads the file descriptor itself: a
    thread still waiting in ``sys.stdin``'s buffered reader when the command ends would hold
    its lock through the interpreter's shutdown, which then aborts ("could not acquire lock
    for <_io.BufferedReader name='<stdin>'>"); and one of asyncio's executor would be joined
    at exit, waiting for a line."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | None] | None = None

    async def get(self) -> str | None:
        if self._queue is None:
            self._queue = asyncio.Queue()
            reader = threading.Thread(
                target=self._read, args=(asyncio.get_running_loop(), self._queue), daemon=True
            )
            reader.start()
        return await self._queue.get()

    @staticmethod
    def _read(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        try:
            fd = sys.stdin.fileno()
            encoding = sys.stdin.encoding or "utf-8"
        except (AttributeError, OSError, ValueError):  # no stdin, or closed
            fd, encoding = -1, "utf-8"
        decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        partial = ""
        while True:
            try:
                chunk = os.read(fd, 4096) if fd >= 0 else b""
            except OSError:
                chunk = b""
            *lines, partial = (partial + decoder.decode(chunk, final=not chunk)).split("\n")
            typed: list[str | None] = [line.removesuffix("\r") for line in lines]
            if not chunk:  # the end of the input, its last line unended or not
                typed += [partial, None] if partial else [None]
            for line in typed:
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, line)
                except RuntimeError:  # the loop is closed: the command is over
                    return
            if not chunk:
                return


async def read_stdin(prompt: str) -> str | None:
    """input() on a thread, so the event loop keeps reading the network meanwhile."""
    try:
        return await asyncio.to_thread(input, prompt)
    except EOFError:
        return None


def waiting_line(
    kind: type[Message], fields: dict[str, Any], seek_id: str, *, again: bool = False
) -> str:
    """What the user waits for, a seek, a challenge or quick pairing (``fields``: its
    request's), posted (``again``: after a reconnection) as ``seek_id``."""
    if kind.TYPE == "quick":  # (its id is nobody's business: no one accepts it)
        after = fields.get("ai_after_s", 0)
        ai = f", or the AI after {after} s" if after else ""
        game = game_title(fields.get("game", ""), fields.get("params", {}))
        queued = "queued again for" if again else "Waiting for"
        return f"{queued} another {game} player{ai}; 'q' leaves..."
    if again:
        what = f"challenge to {fields['to']}" if fields.get("to") else "seek"
        return f"your {what} is posted again ({seek_id}); 'q' leaves..."
    waiting = "someone to accept your seek"
    if fields.get("to"):
        waiting = f"{fields['to']} to accept your challenge"
    return f"Waiting for {waiting} ({seek_id}); 'q' leaves..."


class PlainGame:
    """Follows one game's events on a connection, prompting when it is our turn.

    What is typed is read all the time. A move typed before our turn waits for it (Lichess's
    premove; a script's moves are played in turn). The rest is done at once, on either side's
    turn: a draw offered (after one's move, as FIDE's Laws of Chess 9.1.2.1 have it) or
    answered, resign, abort, claim (an opponent who left usually left on its own turn), help
    and quit. The end of the input leaves on our turn, or at once when a person is to move."""

    def __init__(
        self,
        connection: ServerConnection,
        *,
        write: Write = print,
        prompt: Write = write_prompt,
        lines: Lines | None = None,
        where: str = "",
        rematch: bool = False,
        echo: bool = False,
    ) -> None:
        """``where``: the options naming the server in the commands suggested to the user
        (``--server URL``, or ``--db PATH`` of an embedded server), empty for the default.
        ``rematch``: at the end of a game, offer a rematch and wait for the user's answer (a
        person at a terminal); without it the game's end ends the run (a script). ``echo``:
        the input is not a terminal, which would show what is typed after the prompt and end
        its line: each line read at the prompt is written there, so the output reads as a
        terminal's (``X to move> b2``), never news on the prompt's line."""
        self.connection = connection
        self.where = f" {where}" if where else ""
        self._write = write
        self._prompt_text = prompt
        self.lines = lines if lines is not None else TypedLines()
        self.typed: deque[str | None] = deque()  # read, not yet acted on
        self.input_ended = False
        # The snapshot that seated us while pairing: run() starts from it, before the events
        # queued behind it (the AI's first move can come at once).
        self.first_event: Message | None = None
        self.prompting = False  # a prompt is on screen, waiting for a line
        self.rematch = rematch
        self.echo = echo
        self.game_id: str | None = None
        self.seat: int | None = None
        self.model: GameModel | None = None  # from the game's first snapshot on
        # What showed the game's end: its ``ended`` event, or the snapshot of a game already
        # over (resumed after it ended while we were away).
        self.ended: Ended | Snapshot | None = None
        # Refusals not said yet: (the game's last seq seen when each came, its code, text).
        self.refusals: deque[tuple[int, str, str]] = deque()

    async def create(self, **fields: Any) -> None:
        """Create the game; a request whose reply was lost with the connection is sent again
        once reconnected, unless it made its game (then that game is played)."""
        seated = await self.connection.request(CreateGame, again=True, **fields)
        self.game_id, self.seat = seated.game_id, seated.seat

    async def pair(self, kind: type[Message], fields: dict[str, Any]) -> bool | None:
        """Quick pairing, a seek, a challenge or accepting a seek: wait to be seated. False
        if the player challenged declined (said on stdout); None if the user left with 'q'
        (the seek withdrawn). Other lines typed meanwhile wait for the game."""
        reply = await self.connection.request(kind, **fields)
        if isinstance(reply, Seated):  # accepting a seek seats us at once
            self.game_id, self.seat = reply.game_id, reply.seat
            return True
        self.write(waiting_line(kind, fields, reply.seek_id))
        seek_id = reply.seek_id  # its id now: a reconnection posts it again under a new one
        line: asyncio.Future[str | None] | None = None
        try:
            while True:
                while not self.connection.lobby_events.empty():
                    message = self.connection.lobby_events.get_nowait()
                    if isinstance(message, SeekDeclined) and message.seek_id == seek_id:
                        self.write(f"{player_name(message.player)} declined your challenge.")
                        return False
                posted = self._posted_again(kind, fields, reply.seek_id)
                if posted is None:
                    return False
                seek_id = posted or seek_id
                if line is None and not self.input_ended:
                    line = asyncio.ensure_future(self.lines.get())
                if line is not None and line.done():
                    typed, line = line.result(), None
                    quit = typed is not None and typed.strip().lower() in QUIT and not self.typed
                    # The input ended with nothing typed for the game (`</dev/null`): no one
                    # could play it, so leave rather than wait for ever; a script's moves
                    # typed ahead wait for the game, the end of the input after them.
                    ended = typed is None and not any(t and t.strip() for t in self.typed)
                    if quit or ended:
                        with contextlib.suppress(RequestFailed, ConnectionLost):  # (or closing)
                            await self.connection.request(CancelSeek, seek_id=seek_id)
                        why = "Left" if quit else "The input ended with no move typed"
                        self.write(f"{why}: the seek is withdrawn.")
                        return None
                    self._typed(typed)  # for the game (a script's moves)
                    continue
                try:
                    event = await self.connection.next_event(timeout=0.5)
                except TimeoutError:
                    continue  # and look for a refusal, or a line, again
                held = self.connection.seats.get(getattr(event, "game_id", ""))
                if isinstance(event, Snapshot) and held is not None and event.status == "live":
                    self._posted_again(kind, fields, reply.seek_id)  # said before the game
                    self.game_id = event.game_id
                    self.seat = held[0]
                    # run() starts from it. Put back on the queue, it came after the AI's
                    # first move if that had come meanwhile: the move, taken first, had no
                    # position to go on (an assertion's traceback, seen once in CI's suite).
                    self.first_event = event
                    return True
        finally:
            if line is not None:
                line.cancel()

    def _posted_again(
        self, kind: type[Message], fields: dict[str, Any], first_id: str
    ) -> str | None:
        """Say what became of the seek or quick-pairing entry first posted as ``first_id``
        after each reconnection (client/session_core.py posts it again): its id now ("" if
        none came), or None when the server refused it (gone)."""
        seek_id = ""
        while not self.connection.seek_notices.empty():
            notice = self.connection.seek_notices.get_nowait()
            if notice.first_id != first_id:
                continue
            if notice.seek_id is None:
                what = "challenge" if fields.get("to") else "seek"
                if kind.TYPE == "quick":
                    what = "place in the quick-pairing queue"
                reason = notice.error.message if notice.error else "refused"
                self.write(
                    f"Reconnected, but the server refused your {what} again ({reason}): it is "
                    "gone. Run the command again for a new one."
                )
                return None
            seek_id = notice.seek_id
            again = dataclasses.asdict(notice.request)
            self.write(f"Reconnected: {waiting_line(kind, again, seek_id, again=True)}")
        return seek_id

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

    def write(self, text: str) -> None:
        if self.prompting:  # news while the prompt waits: on a line of its own
            self.prompting = False
            self._write("")
        self._write(text)

    async def run(self) -> Ended | Snapshot | None:
        """Play until the game ends or the user quits; returns the ending, if any."""
        event: asyncio.Future[Message] | None = None
        line: asyncio.Future[str | None] | None = None
        error: asyncio.Future[Error] | None = None
        try:
            while True:
                if error is None:
                    error = asyncio.ensure_future(self.connection.errors.get())
                if error.done():
                    self._told(error.result())
                    error = None
                    continue
                if self.first_event is not None:
                    first, self.first_event = self.first_event, None
                    if self._take(first):
                        return self.ended
                    continue
                if event is None:
                    event = asyncio.ensure_future(self.connection.next_event())
                if line is None and not self.input_ended:
                    line = asyncio.ensure_future(self.lines.get())
                if line is not None and line.done():
                    self._typed(line.result())
                    line = None
                    continue
                if event.done():
                    if self._take(event.result()):
                        return self.ended
                    event = None
                    continue
                if self.connection.events.empty():  # caught up with the game: what was typed
                    acted = await self._act()
                    if acted is False:
                        return self.ended
                    if acted:
                        continue
                    self._prompt()
                waiting = [f for f in (event, line, error) if f is not None]
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in (event, line, error):
                if future is not None:
                    future.cancel()

    def _told(self, error: Error) -> None:
        """An error no request of ours got (a resume after a reconnection that must wait, an
        AI's move that could not be stored): said when it is about this game."""
        if error.game_id == self.game_id:
            self.write(f"Game {self.game_id}: {error.message}")

    def _typed(self, line: str | None) -> None:
        """A line read: kept to be acted on when it is due (``_next_typed``)."""
        self.typed.append(line)
        self.input_ended = line is None

    def _take(self, event: Message) -> bool:
        """Show one event of the connection; True once the game has ended."""
        if getattr(event, "game_id", None) != self.game_id:
            return False
        if isinstance(event, Snapshot) and event.next_game and self.ended is not None:
            # The rematch agreed while this connection no longer followed the game (it
            # reconnected since): the server sends its snapshot, which names the rematch.
            self._rematch_agreed(event.next_game)
            return False
        if self.model is None and self.seat is None:  # a rematch: seated before its snapshot
            held = self.connection.seats.get(self.game_id or "")
            self.seat = held[0] if held is not None else None
        ours = self.model is not None and self.model.offers.get("draw") == self.seat
        self._apply(event)
        assert self.model is not None
        if isinstance(event, Snapshot):
            self._announce(event)
            if self.model.over and self.ended is None:
                return self._end(event)
        elif isinstance(event, Moved):
            self._report_move(event, declining=ours and event.seat != self.seat)
        elif isinstance(event, Offer):
            self._report_offer(event)
        elif isinstance(event, Presence):
            self._report_presence(event)
        elif isinstance(event, Ended):
            return self._end(event)
        self._say_refusals()
        return False

    def _end(self, event: Ended | Snapshot) -> bool:
        """Show the game's end (``event``: its ``ended``, or the snapshot of a game already
        over); True unless a rematch may be typed."""
        assert self.model is not None
        self.ended = event
        self.write(f"Game over: {self.model.result_sentence()}")
        self.write(f"Replay it with: noughts replay{self.where} {self.game_id}")
        self._say_refusals()
        if not self.rematch or self.input_ended or self.model.reason == "abort":
            return True
        self.write("Type 'rematch' for a rematch with colours swapped, or press Enter to leave.")
        return False

    def _announce(self, snapshot: Snapshot) -> None:
        if snapshot.status == "open":
            self.write(
                f"Game {self.game_id} created; waiting for an opponent to join "
                f"(noughts play --join {self.game_id})."
            )
            return
        names = [p["name"] if p else "?" for p in snapshot.players]
        self.write(f"Game {self.game_id}: X = {names[0]}, O = {names[1]}.")
        if self.seat is not None and not snapshot.result:
            assert self.model is not None and self.model.state is not None
            example = self.model.state.game.grid.example(self.model.legal_moves())
            self.write(
                f"You play {SYMBOLS[self.seat]}. Type a move as the board labels it (e.g. "
                f"{example}), 'help', 'draw', 'resign' ('abort' before both sides have "
                "moved: a resign then aborts too, as on Lichess) or 'claim' (if your opponent "
                "left, once both sides have moved)."
            )
        self._show_board()

    def _report_move(self, moved: Moved, *, declining: bool = False) -> None:
        """``declining``: the move declines our standing draw offer (the server's rule)."""
        assert self.model is not None and self.model.moves
        who = self.model.who(moved.seat)
        line = f"{who} played {self.model.moves[-1].text}"
        line += ", declining your draw offer." if declining else "."
        if moved.stats:
            line += f"  [{describe_stats(moved.stats)}]"
        self.write(line + format_clocks(moved.clocks))
        self._show_board()

    def _rematch_agreed(self, next_game: str) -> None:
        """Follow the rematch (its seat and snapshot come next)."""
        self.write(f"Rematch: game {next_game}, colours swapped.")
        self._say_refusals(every=True)  # (about the game left)
        self.game_id, self.seat, self.model, self.ended = next_game, None, None, None

    def _report_offer(self, offer: Offer) -> None:
        if offer.next_game:
            self._rematch_agreed(offer.next_game)
            return
        if offer.seat == self.seat:
            return  # our own offer or answer, already known
        assert self.model is not None
        who = self.model.name(offer.seat)
        said = offer_sentence(who, offer.kind, offer.answer)
        if offer.answer == "offer":
            self.write(f"{said}: type '{offer.kind}' to accept, 'decline' to refuse.")
        else:
            self.write(f"{said}.")

    def _report_presence(self, presence: Presence) -> None:
        assert self.model is not None
        who = self.model.who(presence.seat)
        if presence.online:
            self.write(f"{who} came back.")
            return
        claim_in = self.model.claim_in(time.time())  # (claim_at is the server's wall clock)
        if claim_in is None:
            self.write(f"{who} left the game; its seat is held for a while.")
        elif self.model.abortable:  # (nothing to claim yet: PROTOCOL.md, claim)
            self.write(
                f"{who} left the game before both sides moved; its seat is held for "
                f"{claim_in:.0f} s, and 'abort' ends the game with no result."
            )
        else:
            self.write(
                f"{who} left the game; its seat is held for {claim_in:.0f} s, then 'claim' "
                "wins the game (or 'claim draw' draws it)."
            )

    def _prompt(self) -> None:
        model = self.model
        if self.prompting or model is None or model.state is None or not model.my_turn:
            return
        self._prompt_text(f"{SYMBOLS[model.state.current_player()]} to move> ")
        self.prompting = True

    def _next_typed(self) -> int | None:
        """Which typed line to act on now: on our turn the first; on the opponent's the
        first that is not a move, or the end of the input once all else is done
        (an AI's or a bot's move is shown first); None while the game is not shown yet."""
        model = self.model
        if model is None or model.state is None:
            return None
        if model.my_turn or self.ended is not None:  # (after the game: rematch or leave)
            return 0 if self.typed else None
        program = (model.opponent() or {}).get("kind") in ("ai", "bot")  # moves soon
        for index, line in enumerate(self.typed):
            text = (line or "").strip().lower()
            if line is None and index == 0 and not program:
                return 0  # all typed is done: no use waiting for a person's move
            if line is None or text not in (*QUIT, *HELP, *COMMANDS):
                continue  # a move, or the end of the input: on our turn
            return index
        return None

    async def _after_the_game(self, text: str | None) -> bool:
        """A line typed once the game is over: a rematch offered, accepted or declined; the
        end of the input, an empty line or 'q' leaves. False to leave."""
        assert self.model is not None
        if text is None or text in ("", *QUIT):
            return False
        standing = self.model.offers.get("rematch")
        theirs = standing is not None and standing != self.seat
        if text == "rematch" or (text == "decline" and theirs):
            answer = "decline" if text == "decline" else "offer"
            if not await self._send(Rematch, {"answer": answer}, "The server refused"):
                return True
            ai = (self.model.opponent() or {}).get("kind") == "ai"
            if answer == "offer" and not theirs and not ai:
                self.write("Rematch offered; waiting for your opponent (Enter leaves).")
            return True
        self.write("The game is over: 'rematch' asks for another, Enter leaves.")
        return True

    async def _act(self) -> bool | None:
        """Act on a typed line if one is due: True when one was, False to leave the game,
        None when nothing is due."""
        index = self._next_typed()
        if index is None:
            return None
        model = self.model
        assert model is not None and model.state is not None
        mine = model.my_turn
        if mine:
            self._prompt()  # as input() shows it, also when the line was typed ahead
        line = self.typed[index]
        del self.typed[index]
        if self.prompting and self.echo:
            self._write(line or "")  # (ends the prompt's line, as a terminal's Enter does)
        self.prompting = False
        text = (line or "").strip().lower()
        if self.ended is not None:
            return await self._after_the_game(text if line is not None else None)
        if line is None or text in QUIT:
            self.write(
                f"Leaving the game: noughts play{self.where} --join {self.game_id} takes it back."
            )
            return False
        if not text:
            return True
        state = model.state
        if text in HELP:
            if mine:
                moves = ", ".join(state.action_to_string(a) for a in model.legal_moves())
                self.write(f"Legal moves: {moves}")
            else:
                self.write(
                    "Not your move yet: a move typed now is played when your turn comes. "
                    "Meanwhile: 'draw' offers a draw or accepts one, 'decline' refuses it, "
                    "'resign' (before both sides have moved: 'abort'), 'claim' (if your "
                    "opponent left), 'q' leaves."
                )
            return True
        if text in COMMANDS:
            kind, fields = COMMANDS[text]
            what = "The server refused"
        else:
            try:
                action = state.parse_action(text)
            except engine.IllegalMove as exc:
                self.write(f"Not a legal move: {exc}")
                return True
            kind, fields = Move, {"action": action, "ply": state.ply()}
            what = "The server refused that move"
        offering = kind is Draw and model.offers.get("draw") in (None, model.seat)
        sent = await self._send(kind, fields, what)
        if sent and offering and fields["answer"] == "offer":
            self.write("Draw offer sent; it stands until your opponent moves.")
        return True  # its event (or the game's end) comes back before the next prompt

    async def _send(self, kind: type[Message], fields: dict[str, Any], refused: str) -> bool:
        """A request about this game; False (said) if refused or cut off by a drop."""
        # A game request carries the seq seen when first sent: sent again after a
        # reconnection it is never applied twice (PROTOCOL.md, "A request sent again").
        again = kind in RESENDABLE
        try:
            await self.connection.request(kind, again=again, game_id=self.game_id, **fields)
        except RequestFailed as exc:
            seen = self.connection.seen_seq.get(self.game_id or "", 0)
            self.refusals.append((seen, exc.code, f"{refused}: {exc.message}"))
            self._say_refusals()
            return False
        except ConnectionLost:
            # A move is not sent again blindly: the resumed game says whether it arrived.
            self.write("The connection dropped before the server answered; reconnecting...")
            await self.connection.resynced()
            return False
        return True

    def _say_refusals(self, *, every: bool = False) -> None:
        """Say the refusals whose game events are shown (``every``: all of them). The server
        sends a game's events and the replies to requests about it in one order, but a reply
        reaches the request waiting for it at once, while the events before it may still wait
        in the queue: a request that crossed the AI's acceptance of a draw was said refused,
        "game ... is over", before the game's end. Refused because the game is over, once its
        end is shown, it is not said at all: the end says it (``GameModel.said_by_the_end``).
        The end is shown when ``self.ended`` is set (its ``ended`` event, or the snapshot of a
        game already over)."""
        model = self.model
        shown = model.seq if model is not None else 0
        while self.refusals and (every or self.refusals[0][0] <= shown):
            _, code, text = self.refusals.popleft()
            if self.ended is None or model is None or not model.said_by_the_end(code):
                self.write(text)

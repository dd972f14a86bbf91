"""The plain client reads what is typed on either side's turn. It used to read a line only
at its prompt, on its own turn: an opponent who left on its own turn (as one usually does)
could not be claimed, a draw offered by the side to move could not be accepted, nor could a
player resign, leave or ask for help while the other side thought; and at the end of its
input it waited for a person who might never move."""

from __future__ import annotations

import asyncio
import os
import pty
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from client.connection import ServerConnection
from protocol import CreateGame, Draw, Move, Moved, Offer, Rematch
from tests.client.test_reconnect_commands import Output
from tests.client.ui_support import UIServer, crossing, next_event


@asynccontextmanager
async def ada_against_bob(
    server: UIServer,
) -> AsyncIterator[tuple[asyncio.subprocess.Process, Output, ServerConnection, str]]:
    """`noughts play --plain` as ada (X) in a game of bob's, bob a connection of the test's;
    yields once ada's first prompt is shown."""
    bob = await ServerConnection.connect(server.url, name="bob")
    seated = await bob.request(CreateGame, game="tictactoe", opponent="human", seat=1)
    ada = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "play", "--plain", "--server", server.url,
        "--join", seated.game_id, "--name", "ada",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert ada.stdin is not None and ada.stdout is not None
    out = Output(ada.stdout)
    try:
        await out.until("X to move> ")
        yield ada, out, bob, seated.game_id
    finally:
        if ada.returncode is None:
            ada.kill()
            await ada.wait()
        await bob.close()


def type_(process: asyncio.subprocess.Process, text: str) -> None:
    assert process.stdin is not None
    process.stdin.write(text.encode())


async def ends(process: asyncio.subprocess.Process) -> int:
    """The child's exit code; its stdin stays open (a read still waiting must not hold up
    the exit)."""
    return await asyncio.wait_for(process.wait(), 60)


async def test_a_request_that_crossed_the_end_is_not_refused_before_it(
    ui_server: UIServer,
) -> None:
    """A walk's finding: a script's request that crossed the AI's acceptance of a draw was
    said refused ("game ... is over") before the game's end: the reply went to the waiting
    request at once, the ``ended`` sent before it waited in the events' queue. The end is
    shown, and the refusal it explains is not."""
    async with ada_against_bob(ui_server) as (ada, out, bob, game_id):
        type_(ada, "b2\ndraw\n")
        await next_event(bob, Moved)
        assert (await next_event(bob, Offer)).answer == "offer"
        async with crossing(ui_server, bob, game_id, Draw, answer="accept"):
            type_(ada, "resign\n")
        assert await ends(ada) == 0
        text = out.text + (await ada.stdout.read()).decode()  # type: ignore[union-attr]
        assert "Game over: Draw: draw agreed." in text
        assert "refused" not in text, text


async def test_a_refusal_comes_after_the_move_that_explains_it(ui_server: UIServer) -> None:
    """Ada's abort crossing bob's first move is refused because both sides have moved: said
    after that move, not before it."""
    async with ada_against_bob(ui_server) as (ada, out, bob, game_id):
        type_(ada, "b2\n")
        await next_event(bob, Moved)
        async with crossing(ui_server, bob, game_id, Move, action=6, ply=1):
            type_(ada, "abort\n")
        await out.until("resign instead")
        moved = out.text.index("bob (O) played a1.")
        assert moved < out.text.index("The server refused: "), out.text
        type_(ada, "q\n")
        assert await ends(ada) == 0


async def test_a_draw_offered_by_the_side_to_move_is_accepted(ui_server: UIServer) -> None:
    async with ada_against_bob(ui_server) as (ada, out, bob, game_id):
        type_(ada, "b2\n")
        await next_event(bob, Moved)
        await bob.request(Draw, game_id=game_id, answer="offer")  # on bob's own turn
        await out.until("offers a draw")
        type_(ada, "draw\n")
        await out.until("Game over: Draw: draw agreed.")
        assert await ends(ada) == 0
        assert "Draw offer sent" not in out.text  # an acceptance, not an offer


async def test_an_opponent_who_left_on_its_turn_is_claimed(ui_server: UIServer) -> None:
    ui_server.game_server.settings.grace_s = 1.0
    async with ada_against_bob(ui_server) as (ada, out, bob, game_id):
        type_(ada, "b2\n")
        await next_event(bob, Moved)
        await bob.request(Move, game_id=game_id, action=6, ply=1)  # a1
        type_(ada, "c3\n")
        while (await next_event(bob, Moved)).ply < 2:
            pass
        await bob.close()  # gone, on its own turn
        await out.until("bob (O) left the game; its seat is held for")
        assert "then 'claim' wins the game" in out.text
        await asyncio.sleep(1.2)
        type_(ada, "claim\n")
        await out.until("Game over: You win")
        assert await ends(ada) == 0


async def test_an_opponent_who_left_before_both_sides_moved_is_aborted_not_claimed(
    ui_server: UIServer,
) -> None:
    """As on Lichess, before both sides have moved nothing counts: the client says 'abort'
    (it said 'claim' wins the game, which the server refuses then)."""
    ui_server.game_server.settings.grace_s = 1.0
    async with ada_against_bob(ui_server) as (ada, out, bob, game_id):
        type_(ada, "b2\n")
        await next_event(bob, Moved)
        await bob.close()
        await out.until("bob (O) left the game before both sides moved; its seat is held for")
        assert "'abort' ends the game with no result" in out.text
        type_(ada, "abort\n")
        await out.until("Game over: No result: aborted before the first moves.")
        assert await ends(ada) == 0


async def test_help_on_the_opponents_turn_and_a_move_typed_ahead(ui_server: UIServer) -> None:
    async with ada_against_bob(ui_server) as (ada, out, bob, game_id):
        type_(ada, "b2\n")
        await next_event(bob, Moved)
        type_(ada, "c3\nhelp\ndraw\n")  # c3 before its turn: played when it comes
        await out.until("Not your move yet")
        await out.until("Draw offer sent")  # after her move, on bob's turn (FIDE 9.1.2.1)
        assert (await next_event(bob, Offer)).answer == "offer"
        assert "(O) played" not in out.text  # help was answered while bob thought
        await bob.request(Move, game_id=game_id, action=6, ply=1)  # a1
        moved = await next_event(bob, Moved)
        while moved.ply < 2:
            moved = await next_event(bob, Moved)
        assert (moved.ply, moved.action) == (2, 2)  # c3, typed ahead
        await out.until("bob (O) played a1, declining your draw offer.")  # (silent before)
        type_(ada, "resign\n")  # on bob's turn
        await out.until("Game over: You lose: resignation.")
        assert await ends(ada) == 0


async def test_the_end_of_the_input_does_not_wait_for_a_person(ui_server: UIServer) -> None:
    async with ada_against_bob(ui_server) as (ada, out, bob, game_id):
        type_(ada, "b2\n")
        assert ada.stdin is not None
        ada.stdin.close()
        await next_event(bob, Moved)
        assert await ends(ada) == 0  # bob has not moved
        assert f"Leaving the game: noughts play --server {ui_server.url} --join {game_id}" in (
            out.text + (await ada.stdout.read()).decode()  # type: ignore[union-attr]
        )


async def test_a_rematch_from_a_terminal(ui_server: UIServer) -> None:
    """At a terminal (stdin a tty) the end of a game offers a rematch: the AI accepts at once
    and the next game, colours swapped, is played in the same run; Enter leaves. A script
    (stdin not a tty) ends with the game, as the tests above do."""
    master, slave = pty.openpty()
    ada = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "play", "--plain", "--server", ui_server.url,
        "--name", "ada", "--ai", "random", "--budget-ms", "10",
        stdin=slave, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    os.close(slave)
    assert ada.stdout is not None
    out = Output(ada.stdout)
    try:
        await out.until("X to move> ")
        os.write(master, b"b2\n")  # (a resign before both sides moved would abort)
        await out.until("X to move> ", 2)
        os.write(master, b"resign\n")
        await out.until("Type 'rematch' for a rematch with colours swapped")
        os.write(master, b"rematch\n")
        await out.until("X = random 10ms, O = ada.")  # the AI accepted: ada is O now
        await out.until("O to move> ")
        os.write(master, b"a1\n" if "2 . X ." in out.text.split("O = ada.")[-1] else b"b2\n")
        await out.until("O to move> ", 2)
        os.write(master, b"resign\n")
        await out.until("Game over: You lose: resignation.", 2)
        os.write(master, b"\n")  # Enter leaves
        assert await asyncio.wait_for(ada.wait(), 60) == 0
    finally:
        os.close(master)
        if ada.returncode is None:
            ada.kill()
            await ada.wait()
    assert out.text.count("Rematch: game ") == 1


async def test_a_rematch_agreed_after_a_reconnection_is_played(ui_server: UIServer) -> None:
    """ada's connection dropped after her game ended; her client reconnected without the
    finished game, and her rematch offer was accepted: only connections following the old
    game were seated, so she never heard of the new game. Now the server makes her
    connection follow the old game (its snapshot names the rematch) and seats it; the
    plain client goes on with the rematch."""
    bob = await ServerConnection.connect(ui_server.url, name="bob")
    seated = await bob.request(CreateGame, game="tictactoe", opponent="human", seat=1)
    master, slave = pty.openpty()
    ada = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "play", "--plain", "--server", ui_server.url,
        "--join", seated.game_id, "--name", "ada",
        stdin=slave, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    os.close(slave)
    assert ada.stdout is not None
    out = Output(ada.stdout)
    try:
        await out.until("X to move> ")
        os.write(master, b"b2\n")  # (a resign before both sides moved would abort)
        await next_event(bob, Moved)
        await bob.request(Move, game_id=seated.game_id, action=6, ply=1)  # a1
        await out.until("X to move> ", 2)
        os.write(master, b"resign\n")
        await out.until("Type 'rematch' for a rematch with colours swapped")
        (player,) = [p for p in ui_server.game_server.players.values() if p.name == "ada"]
        (dropped,) = player.connections
        dropped.websocket.transport.abort()
        async with asyncio.timeout(30):  # reconnected
            while not player.connections or dropped in player.connections:
                await asyncio.sleep(0.01)
        os.write(master, b"rematch\n")
        offer = await next_event(bob, Offer)
        assert (offer.kind, offer.answer, offer.seat) == ("rematch", "offer", 0)
        await bob.request(Rematch, game_id=seated.game_id, answer="accept")
        await out.until("Rematch: game ")
        await out.until("X = bob, O = ada.")
    finally:
        os.close(master)
        if ada.returncode is None:
            ada.kill()
            await ada.wait()
        await bob.close()


async def test_q_leaves_the_wait_for_a_seek(ui_server: UIServer) -> None:
    """Waiting for someone to accept a seek, the client read nothing: only Ctrl-C left."""
    ada = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "play", "--plain", "--server", ui_server.url,
        "--name", "ada", "--seek", "--game", "5x5",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert ada.stdout is not None
    out = Output(ada.stdout)
    try:
        await out.until("'q' leaves...")
        assert ui_server.game_server.lobby.seeks
        type_(ada, "q\n")
        assert await ends(ada) == 0
        await out.until("Left: the seek is withdrawn.")
        assert not ui_server.game_server.lobby.seeks
    finally:
        if ada.returncode is None:
            ada.kill()
            await ada.wait()

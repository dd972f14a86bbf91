"""The clients while the server's database is down (PostgreSQL through the tests' relay,
tests/services.py ``pg_link``): a game whose resume after a reconnection the server cannot
serve yet is kept, said to wait, and resumed once it can be."""

from __future__ import annotations

import asyncio
import time

from client.connection import RequestFailed, ServerConnection
from client.plain import PlainGame
from client.session_core import Backoff
from protocol import JoinGame, Move, Moved
from server.pool import EnginePool
from tests.client.ui_support import next_event
from tests.server.conftest import next_event_where
from tests.server.test_pg_server import _cut, _serving_through
from tests.services import PostgresLink

FAST = Backoff(base_s=0.05, cap_s=0.5)


class Typed:
    """The lines a test types into a PlainGame."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def get(self) -> str | None:
        return await self.queue.get()


class Said:
    """What a PlainGame writes, waited for by the test."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str) -> None:
        self.lines.append(text)

    async def until(self, wanted: str, limit_s: float = 60) -> str:
        deadline = time.monotonic() + limit_s
        while not any(wanted in line for line in self.lines):
            assert time.monotonic() < deadline, f"no {wanted!r} in {self.lines}"
            await asyncio.sleep(0.02)
        return next(line for line in self.lines if wanted in line)


async def test_a_game_whose_resume_waits_for_the_database_is_kept_and_resumed(
    pg_schema: str, pg_link: PostgresLink, ui_pool: EnginePool
) -> None:
    """Probe: ada's connection dropped while the server's PostgreSQL was down; back, her
    client's resume of her game was answered `unavailable` ("waits for the database"), and
    the client forgot the game: nothing of it came again (bo's move after the database was
    back never showed) and nothing said why. The game is kept, the plain client says it
    waits, the resume is sent again (backoff), and bo's move shows once the server can."""
    async with _serving_through(pg_link, pg_schema, ui_pool) as url:
        ada = await ServerConnection.connect(url, name="ada", reconnect=True, backoff=FAST)
        bo = await ServerConnection.connect(url, name="bo")
        typed, said = Typed(), Said()
        game = PlainGame(ada, write=said, prompt=said, lines=typed)
        await game.create(game="tictactoe", opponent="human", seat=0)
        seat_b = await bo.request(JoinGame, game_id=game.game_id)
        playing = asyncio.ensure_future(game.run())
        try:
            typed.queue.put_nowait("b2")
            assert (await next_event(bo, Moved)).action == 4
            await _cut(pg_link, pg_schema)
            ada.drop()
            waiting = await said.until("the server cannot resume it now")
            assert waiting.startswith(f"Game {game.game_id}: "), waiting
            assert "waits for the database" in waiting, waiting
            await pg_link.restore()
            deadline = time.monotonic() + 60
            while True:  # the game goes on once the database answers
                try:
                    await bo.request(Move, game_id=game.game_id, token=seat_b.token, action=0)
                    break
                except RequestFailed as exc:
                    assert exc.code == "unavailable" and time.monotonic() < deadline, exc
                    await asyncio.sleep(0.05)
            await said.until("(O) played a3.")
            typed.queue.put_nowait("c1")  # ada plays on
            assert (await next_event_where(bo, Moved, lambda e: e.ply == 2)).action == 8
            typed.queue.put_nowait("q")
            await asyncio.wait_for(playing, 30)
        finally:
            playing.cancel()
            await ada.close()
            await bo.close()

"""The commands in hostile terminals (client/terminal.py): an ASCII locale, closed streams."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from client.connection import ServerConnection
from client.export import to_sgf
from protocol import CreateGame, GetGame, JoinGame, Move, Resign
from tests.client.ui_support import UIServer

# An output that holds ASCII only, as LC_ALL=C with PYTHONUTF8=0 (or a Latin-1 locale, for
# anything beyond it) gives.
ASCII = {"PYTHONIOENCODING": "ascii"}


def noughts(
    *args: str, stdin: bytes = b"", env: dict[str, str] | None = None, shell: str = ""
) -> subprocess.CompletedProcess[bytes]:
    """``noughts ARGS`` with bytes in and out; ``shell``: redirections of its streams."""
    command = [sys.executable, "-m", "client", *args]
    if shell:
        command = ["/bin/sh", "-c", f'exec "$0" "$@" {shell}', *command]
    return subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        timeout=300,
        env={**os.environ, "NOUGHTS_SERVER": "", **(env or {})},
    )


async def a_game_of(server: UIServer, name: str) -> dict[str, Any]:
    """A tictactoe game ``name`` (X) resigned after a move each against bob; its record."""
    x = await ServerConnection.connect(server.url, name=name)
    o = await ServerConnection.connect(server.url, name="bob")
    try:
        seated = await x.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        joined = await o.request(JoinGame, game_id=seated.game_id)
        await x.request(Move, game_id=seated.game_id, token=seated.token, action=4, ply=0)
        await o.request(Move, game_id=seated.game_id, token=joined.token, action=0, ply=1)
        await x.request(Resign, game_id=seated.game_id, token=seated.token)
        return dict((await x.request(GetGame, game_id=seated.game_id)).game)
    finally:
        await x.close()
        await o.close()


async def test_an_ascii_locale_escapes_what_it_cannot_show(ui_server: UIServer) -> None:
    """On an output that holds ASCII only, a player's name beyond it (José) ended games,
    replay, export and play --plain in a UnicodeEncodeError traceback, and a byte beyond it
    typed at replay's prompt in a UnicodeDecodeError. Now the terminal gets the name's
    escape (Jos\\xe9, as Python's stderr writes it), export writes the UTF-8 its formats
    declare, and the byte reads as U+FFFD."""
    record = await a_game_of(ui_server, "José")
    url = ui_server.url
    for args in (["games", "--server", url], ["replay", record["id"], "--server", url, "--all"]):
        done = await asyncio.to_thread(noughts, *args, env=ASCII)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
        assert b"Jos\\xe9" in done.stdout, done.stdout

    typed = await asyncio.to_thread(
        noughts, "replay", record["id"], "--server", url, stdin="é\nq\n".encode(), env=ASCII
    )
    assert typed.returncode == 0 and b"Traceback" not in typed.stderr, typed.stderr

    sgf = await asyncio.to_thread(
        noughts, "export", record["id"], "--server", url, "--format", "sgf", env=ASCII
    )
    assert sgf.returncode == 0, sgf.stderr
    assert sgf.stdout == to_sgf(record).encode("utf-8")  # CA[UTF-8], PB[José]

    played = await asyncio.to_thread(
        noughts, "play", "--plain", "--server", url, "--name", "Zoë", "--ai", "random",
        "--budget-ms", "10", stdin=b"q\n", env=ASCII,
    )  # fmt: skip
    assert played.returncode == 0 and b"Traceback" not in played.stderr, played.stderr
    assert b"X = Zo\\xeb, O = random" in played.stdout, played.stdout


@pytest.mark.parametrize("closed", ["<&-", ">&-", "2>&-"])
def test_a_closed_standard_stream_is_no_traceback(tmp_path: Path, closed: str) -> None:
    """`noughts play` with stdin or stdout closed (`<&-`, `>&-`: a service manager, a
    careless script) ended in a traceback ('NoneType' object has no attribute 'isatty'), and
    with stderr closed in status 1, saying nothing. A closed stream is now the null device:
    the input is at its end (the game is left on our turn), the output goes nowhere."""
    done = noughts(
        "play", "--db", str(tmp_path / "games.db"), "--ai", "random", "--budget-ms", "10",
        shell=closed,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr, done.stderr
    if closed != ">&-":
        assert b"Leaving the game: noughts play --db" in done.stdout, done.stdout

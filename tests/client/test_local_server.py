"""The local server (``noughts play``'s, and that of games, replay and export) is its user's
alone: it listens on 127.0.0.1, which every user of the machine reaches, so it takes a
websocket only at a secret path, which its address line and the database's lock file (0600)
tell its user's own commands."""

from __future__ import annotations

import asyncio
import json
import re
import stat
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import websockets
from websockets.exceptions import InvalidStatus

from client.connection import ServerConnection
from client.embedded import EmbeddedServer
from protocol import Abort, CreateGame, Ping
from tests.client.test_cli import noughts

REFUSAL = b"forbidden: this server is reached at its secret path only\n"


def split(url: str) -> tuple[str, str]:
    """The server's address without its path, and the secret its path holds."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/")


async def assert_refused(url: str) -> None:
    """A handshake at ``url`` is answered HTTP 403 with the one-line reason, before any
    protocol (no websocket opens)."""
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(url, compression=None):
            pass
    assert refused.value.response.status_code == 403, url
    assert refused.value.response.body == REFUSAL, url


async def test_the_embedded_server_refuses_a_handshake_without_its_secret(
    tmp_path: Path,
) -> None:
    """A security walk: another user of the machine could connect to the embedded server
    on 127.0.0.1 (list and watch its user's games, take an open game meant for a friend,
    post seeks, spend its CPU in AI games). It now answers a handshake at any path but its
    secret 403, keeps serving its user, and keeps the secret out of its log."""
    db = tmp_path / "games.db"
    log = tmp_path / "server.log"
    lock = tmp_path / "games.db.lock"
    lock.touch(0o644)  # left by a server killed before (the kernel released its lock)
    lock.chmod(0o644)  # (whatever the umask)
    async with EmbeddedServer(db, workers=0, log_path=log) as url:
        base, secret = split(url)
        await assert_refused(base)  # (before: a stranger was served)
        assert re.fullmatch(r"ws://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{32}", url), url
        assert json.loads(lock.read_text())["url"] == url  # where the user's commands find it
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600  # the secret is its user's alone
        for stranger in (base, f"{base}/", f"{base}/{secret[:-1]}", f"{url}x", f"{url}/"):
            await assert_refused(stranger)
        connection = await ServerConnection.connect(url, name="ada")  # still serving
        try:
            await connection.request(Ping)
        finally:
            await connection.close()
    text = log.read_text()
    assert "not the secret path" in text and secret not in text, text


async def test_the_local_commands_use_the_running_server_at_its_secret_path(
    tmp_path: Path,
) -> None:
    """Every command of the user that talks to the local server reaches it: play, games,
    replay and export on its database (through its lock file), watch, replay, health and
    two bots given its address; health without the secret is refused."""
    where = tmp_path / "data"  # (the test's sessions file is in tmp_path)
    where.mkdir()
    db = where / "games.db"
    async with EmbeddedServer(db, workers=1, warm=[("tictactoe", "alphabeta")]) as url:
        base, secret = split(url)
        await assert_refused(base)
        moves = "\n".join(str(cell) for _ in range(5) for cell in range(9)) + "\n"
        command = ["--plain", "--db", str(db), "--ai", "alphabeta", "--budget-ms", "20"]
        played = await asyncio.to_thread(noughts, "play", *command, "--name", "ada", stdin=moves)
        assert played.returncode == 0 and "using that server" in played.stderr, played.stderr
        assert "Game over:" in played.stdout
        game_id = re.search(r"noughts replay (?:--\S+ \S+ )*(\w+)", played.stdout).group(1)  # type: ignore[union-attr]
        for args in (["games"], ["replay", game_id], ["export", game_id]):
            done = await asyncio.to_thread(noughts, *args, "--db", str(db), timeout=120)
            assert done.returncode == 0 and "using that server" in done.stderr, done.stderr
            assert game_id in done.stdout, (args, done.stdout)
            assert secret not in done.stdout + done.stderr
        # An open game withdrawn: over, so that watch answers at once.
        bob = await ServerConnection.connect(url, name="bob")
        try:
            seated = await bob.request(CreateGame, game="tictactoe", opponent="human")
            await bob.request(Abort, game_id=seated.game_id, token=seated.token)
        finally:
            await bob.close()
        watched = await asyncio.to_thread(noughts, "watch", "--server", url, seated.game_id)
        suggested = f"noughts replay {seated.game_id} --server {url}"
        assert suggested in watched.stderr, watched.stderr
        replayed = await asyncio.to_thread(noughts, *suggested.split()[1:], timeout=120)
        assert replayed.returncode == 0 and seated.game_id in replayed.stdout, replayed.stderr
        healthy = await asyncio.to_thread(noughts, "health", "--server", url)
        assert healthy.returncode == 0, healthy.stderr
        stranger = await asyncio.to_thread(noughts, "health", "--server", base)
        assert stranger.returncode == 1 and "HTTP 403" in stranger.stderr, stranger.stderr
        each = ["--server", url, "--games", "1", "--budget-ms", "5"]
        seeker = ["--name", "seeker", "--seek", "tictactoe", "--engine", "alphabeta"]
        accepter = ["--name", "accepter", "--accept", "seeks", "--engine", "mcts"]
        played_bots = await asyncio.gather(
            asyncio.to_thread(noughts, "bot", *each, *seeker),
            asyncio.to_thread(noughts, "bot", *each, *accepter),
        )
        for done in played_bots:
            assert done.returncode == 0 and "game 1/1" in done.stdout, done.stderr

"""The commands in hostile terminals (client/terminal.py): an ASCII locale, closed streams, a
dumb terminal, stderr redirected."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
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


async def test_an_output_that_cannot_be_written_is_one_line_and_status_1(
    ui_server: UIServer,
) -> None:
    """`noughts games >/dev/full` (a full disk) ended in a traceback, as did replay, export
    and --version. Each now says it cannot write its output in one line, status 1."""
    record = await a_game_of(ui_server, "ada")
    url = ui_server.url
    for args in (
        ["games", "--server", url],
        ["replay", record["id"], "--server", url, "--all"],
        ["export", record["id"], "--server", url],
        ["--version"],
        ["play", "--plain", "--server", url, "--ai", "random", "--budget-ms", "10"],
    ):
        done = await asyncio.to_thread(noughts, *args, stdin=b"q\n", shell=">/dev/full")
        where = "noughts" if args[0].startswith("-") else f"noughts {args[0]}"
        said = f"{where}: cannot write the output: No space left on device\n".encode()
        assert (done.returncode, done.stderr) == (1, said), (args, done.stderr)


@pytest.mark.parametrize("pairing", [["--seek"], ["--quick", "--ai-after", "0"]])
async def test_a_seek_with_its_input_at_its_end_is_withdrawn(
    ui_server: UIServer, pairing: list[str]
) -> None:
    """`noughts play --seek </dev/null` (or --quick) waited for ever for an opponent whose
    game it could never play. With the input ended and nothing typed, it withdraws the seek,
    says so in one line, and ends (status 0, as 'q' does)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "play", "--plain", "--server", ui_server.url, *pairing,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(child.communicate(), 60)
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    assert child.returncode == 0, err
    assert out.decode().splitlines()[-1] == (
        "The input ended with no move typed: the seek is withdrawn."
    ), out


async def test_what_a_pipe_types_at_the_prompt_is_written_after_it(ui_server: UIServer) -> None:
    """With its input piped, `noughts play --plain` wrote its prompt without ending its line
    (a terminal ends it with what is typed), so what followed landed on it ("X to move> Game
    over: ..."). The line read is written after the prompt, as a terminal shows it."""
    done = await asyncio.to_thread(
        noughts, "play", "--plain", "--server", ui_server.url, "--ai", "random",
        "--budget-ms", "10", stdin=b"resign\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert "X to move> resign" in lines, lines
    assert lines[lines.index("X to move> resign") + 1] == (
        "Game over: No result: aborted before the first moves."  # (no move yet: an abort)
    )


class Terminal:
    """A child whose stdin and stdout are an 80x24 pseudo-terminal, its screen's bytes read
    as they come; stderr is ``stderr`` (a pipe by default)."""

    def __init__(self, *args: str, env: dict[str, str], stderr: Any = subprocess.PIPE) -> None:
        self.args, self.env, self.stderr = args, env, stderr
        self.screen = b""
        self._more = asyncio.Event()

    async def __aenter__(self) -> Terminal:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "client", *self.args,
            stdin=slave, stdout=slave, stderr=self.stderr,
            env={**os.environ, "NOUGHTS_SERVER": "", "TERM": "xterm-256color", **self.env},
        )  # fmt: skip
        os.close(slave)
        asyncio.get_running_loop().add_reader(self.master, self._read)
        return self

    def _read(self) -> None:
        try:
            self.screen += os.read(self.master, 65536)
        except OSError:  # the child closed the terminal
            asyncio.get_running_loop().remove_reader(self.master)
        self._more.set()

    async def until(self, wanted: bytes) -> None:
        async def read() -> None:
            while wanted not in self.screen:
                self._more.clear()
                await self._more.wait()

        try:
            await asyncio.wait_for(read(), 120)
        except TimeoutError:
            raise AssertionError(f"no {wanted!r} on the terminal: {self.screen!r}") from None

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    async def ends(self) -> int:
        return await asyncio.wait_for(self.child.wait(), 60)

    async def __aexit__(self, *_: object) -> None:
        asyncio.get_running_loop().remove_reader(self.master)
        if self.child.returncode is None:
            self.child.kill()
            await self.child.wait()
        os.close(self.master)


@pytest.mark.parametrize("env", [{"TERM": "dumb"}, ASCII], ids=["dumb", "ascii"])
async def test_a_terminal_that_cannot_show_the_interface_gets_the_line_client(
    ui_server: UIServer, env: dict[str, str]
) -> None:
    """In a terminal whose encoding has no box-drawing characters the terminal interface
    wrote each of them, and Textual's own, as an escape (\\u2500\\u2500...); on TERM=dumb
    it wrote escape sequences the terminal cannot follow. noughts play now says so in one
    line and plays in the line client; --lobby, which only the interface has, is refused
    saying why (exit 2)."""
    options = ("--server", ui_server.url, "--name", "ada")
    async with Terminal("play", *options, "--ai", "random", "--budget-ms", "10", env=env) as ada:
        await ada.until(b"X to move> ")
        ada.type(b"q\n")
        assert await ada.ends() == 0
        assert ada.child.stderr is not None
        said = (await ada.child.stderr.read()).decode()
    assert "noughts play: the terminal interface cannot be drawn: " in said, said
    assert "; the line client plays instead" in said, said
    assert b"\x1b[?1049h" not in ada.screen  # (the interface's alternate screen)
    async with Terminal("play", *options, "--lobby", env=env) as lobby:
        assert await lobby.ends() == 2
        assert lobby.child.stderr is not None
        said = (await lobby.child.stderr.read()).decode()
    assert said.startswith("noughts play: --lobby needs the terminal interface, which cannot be "
                           "drawn: "), said  # fmt: skip
    assert len(said.splitlines()) == 1, said


async def test_the_interface_is_drawn_on_the_terminal_when_stderr_is_redirected(
    ui_server: UIServer, tmp_path: Path
) -> None:
    """`noughts play 2>log` in a terminal drew the whole interface into the log (Textual
    draws on stderr) and left the terminal blank, waiting for keys nobody could see the
    point of. The interface is drawn on the terminal; stderr is the log again afterwards."""
    log = tmp_path / "stderr.log"
    with log.open("wb") as stderr:
        options = ("--server", ui_server.url, "--name", "ada", "--lobby")
        async with Terminal("play", *options, env={}, stderr=stderr) as ada:
            await ada.until(b"noughts lobby")
            ada.type(b"\x11")  # ctrl+q
            assert await ada.ends() == 0
    assert b"\x1b[" not in log.read_bytes()


@pytest.mark.parametrize("term", ["xterm-256color", "dumb"])
def test_the_status_line_is_rewritten_in_place_only_where_the_terminal_can(
    monkeypatch: pytest.MonkeyPatch, term: str
) -> None:
    """The embedded server's "preparing the engine" line was rewritten in place with
    \\x1b[K on TERM=dumb too, where it shows as noise: there each step has a line."""
    from client.embedded import StatusLine

    monkeypatch.setenv("TERM", term)
    master, slave = pty.openpty()
    shown = b""
    try:
        with open(slave, "w") as terminal:  # closed before the reads: they end at EOF
            line = StatusLine(terminal, prefix="noughts: ")
            line("preparing the engine (1 s)")
            line("preparing the engine (2 s)")
            line("listening (2 s)")
            line.done()
        while True:  # one read may return one write's bytes only
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other end is closed and all read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    if term == "dumb":
        assert shown == b"noughts: preparing the engine (1 s)\r\nnoughts: listening (2 s)\r\n"
    else:
        assert shown.count(b"\r\x1b[K") == 4

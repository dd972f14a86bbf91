"""Issue 12's defects of the `noughts` command, each as a user meets it: a one-line error
and an exit status, never a traceback or a hang."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from client.connection import server_url
from client.embedded import EmbeddedServer
from client.export import to_sgf
from protocol import (
    CreateGame,
    GetGame,
    JoinGame,
    ListGames,
    Resign,
    Seek,
    Snapshot,
    software_version,
)
from tests.client.test_cli import noughts
from tests.client.test_export import play_humans
from tests.client.ui_support import UIServer, next_event, resign_after_the_first_moves

BAD_SERVERS = ["http://127.0.0.1:1", "ws://127.0.0.1:99999", "ws://:8765", "127.0.0.1:port"]
SERVER_COMMANDS = [
    ["play", "--plain"],
    ["games"],
    ["replay", "someid"],
    ["export", "someid"],
    ["watch", "someid"],
    ["bot"],
    ["health"],
]


@pytest.mark.parametrize("server", BAD_SERVERS)
@pytest.mark.parametrize("command", SERVER_COMMANDS, ids=lambda c: c[0])
def test_a_bad_server_address_is_one_line_and_status_2(command: list[str], server: str) -> None:
    """Defect 3: a 38-line traceback in every command."""
    result = noughts(*command, "--server", server, timeout=60)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"noughts {command[0]}: --server: "), lines


def test_host_and_port_is_a_websocket_address() -> None:
    assert server_url("127.0.0.1:8765") == "ws://127.0.0.1:8765"
    assert server_url(" wss://example.org:443 ") == "wss://example.org:443"
    with pytest.raises(ValueError, match="not a websocket address"):
        server_url("https://example.org")


async def test_games_on_host_colon_port_reaches_the_server(ui_server: UIServer) -> None:
    """Defect 3: ``--server host:port`` means ``ws://host:port``."""
    code, out, err = await run_noughts("games", "--server", ui_server.url.removeprefix("ws://"))
    assert code == 0, err
    assert out.strip().startswith("No finished games (--status live: games in play")


@pytest.mark.parametrize("budget", ["0", "-5", "100000"])
@pytest.mark.parametrize(
    "command",
    [["play", "--plain"], ["play", "--plain", "--quick"], ["bot", "--server", "ws://127.0.0.1:1"]],
    ids=["play", "play --quick", "bot"],
)
def test_a_budget_out_of_range_is_refused_before_anything_starts(
    command: list[str], budget: str, tmp_path: Path
) -> None:
    """Defect 2: --budget-ms 0, -5 or 100000 printed nothing and never exited."""
    db = ["--db", str(tmp_path / "g.db")] if command[0] == "play" else []
    result = noughts(*command, "--budget-ms", budget, *db, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"noughts {command[0]}: --budget-ms wants milliseconds in 1..60000, got {budget}"
    )
    assert not (tmp_path / "g.db").exists()  # refused before a server started


async def run_noughts(
    *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """``noughts ARGS`` in a child process, awaited (a test's server runs in this loop)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(stdin), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def play_plain(server: UIServer, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    """``noughts play --plain`` on ``server``."""
    return await run_noughts("play", "--plain", "--server", server.url, *args, stdin=stdin)


async def test_perfect_on_gomoku_is_refused_in_the_plain_client(ui_server: UIServer) -> None:
    """Defect 1: the game hung at "thinking..." forever."""
    code, out, err = await play_plain(ui_server, "--game", "gomoku", "--ai", "perfect")
    assert code == 1
    assert err.strip() == (
        "noughts play: the server refused: perfect cannot play gomoku: it solves m,n,k "
        "boards of at most 16 cells exactly"
    )


@pytest.mark.parametrize(
    ("game", "ai"), [("tictactoe", "perfect"), ("5x5", "mcts"), ("gomoku", "alphabeta")]
)
async def test_the_ai_without_ai_is_the_games_default(
    ui_server: UIServer, game: str, ai: str
) -> None:
    """Without --ai, tic-tac-toe is played by ``perfect`` (its kernel compiles in seconds
    on a first start, mcts's in half a minute), gomoku by alphabeta (0.98 against mcts), the
    other games by mcts."""
    code, out, err = await play_plain(ui_server, "--game", game, stdin=b"q\n")
    assert code in (0, 1), err
    assert re.search(rf"X = \S+, O = {ai} 500ms\.", out), out


async def test_replay_without_a_terminal_or_commands_prints_every_position(
    ui_server: UIServer,
) -> None:
    """Defect 5: ``noughts replay ID </dev/null`` printed position 0 only."""
    record = await play_humans(ui_server, "tictactoe", [4, 0, 8, 2, 1, 7, 6, 3, 5])
    code, out, err = await run_noughts("replay", record["id"], "--server", ui_server.url)
    assert code == 0, err
    assert re.findall(r"(?:Position|Move) (\d+) of 9", out) == [str(p) for p in range(10)]
    # With commands on stdin they are followed, as before.
    code, out, err = await run_noughts(
        "replay", record["id"], "--server", ui_server.url, stdin=b"n\nl\np\nq\n"
    )
    assert code == 0, err
    assert re.findall(r"(?:Position|Move) (\d+) of 9", out) == ["0", "1", "9", "8"]


async def test_replay_through_a_pipe_prompts_for_its_first_command(ui_server: UIServer) -> None:
    """A walk's finding: `printf 'n\\nn\\nq\\n' | noughts replay ID` showed no prompt before
    its first command (that line was read first, to see whether any command comes), and
    one before each later one. Each command read is written after its prompt, as a terminal
    shows it: the next position was on the prompt's line ("replay> Move 1 of 9")."""
    record = await play_humans(ui_server, "tictactoe", [4, 0, 8, 2, 1, 7, 6, 3, 5])
    code, out, err = await run_noughts(
        "replay", record["id"], "--server", ui_server.url, stdin=b"n\nn\nq\n"
    )
    assert code == 0, err
    walked = re.findall(r"^replay> (\w*)\n(?:Move (\d+) of 9)?", out, re.MULTILINE)
    assert walked == [("n", "1"), ("n", "2"), ("q", "")], out


async def test_a_second_play_on_the_same_database_uses_the_running_server(
    tmp_path: Path,
) -> None:
    """Defect 4: two `noughts play` on one database started two servers on one file (lobbies
    disagreed, moves failed on UNIQUE constraints); the second now uses the first's."""
    db = tmp_path / "games.db"
    async with EmbeddedServer(db, workers=1, warm=[]) as url:
        moves = "".join(f"{cell}\n" for _ in range(5) for cell in range(9)).encode()
        code, out, err = await run_noughts(
            "play", "--plain", "--db", str(db), "--ai", "random", "--budget-ms", "10",
            "--name", "second", stdin=moves,
        )  # fmt: skip
        assert code == 0, err
        base, _, secret = url.rpartition("/")  # (its secret path is not shown)
        assert f"serves {db} on {base}: using that server" in err and secret not in err, out
        game_id = re.search(r"noughts replay (?:--\S+ \S+ )*(\w+)", out).group(1)  # type: ignore[union-attr]
        # The game is on the first server, in its database.
        code, listed, err = await run_noughts("games", "--server", url)
        assert code == 0, err
        assert game_id in listed and "second" in listed


async def test_plain_sessions_are_saved_and_a_left_game_is_taken_back(
    ui_server: UIServer, tmp_path: Path
) -> None:
    """Defects 6 and 7: every plain run was a new player, so a game left at the end of
    input could not be resumed; and the suggested commands left out --server."""
    sessions = {"NOUGHTS_SESSIONS": str(tmp_path / "sessions.json")}
    where = f"--server {ui_server.url}"
    ai = ["--name", "ada", "--ai", "random", "--budget-ms", "10", "--seat", "x"]
    code, out, err = await run_noughts(
        "play", "--plain", *where.split(), *ai, stdin=b"4\n", env=sessions
    )
    assert code == 0, err
    game_id = re.search(r"Game (\w+): X = ada", out).group(1)  # type: ignore[union-attr]
    assert f"Leaving the game: noughts play {where} --join {game_id} takes it back." in out
    # The next run is the same player: it is told of the game and takes it back.
    moves = "".join(f"{cell}\n" for _ in range(5) for cell in range(9)).encode()
    code, out, err = await run_noughts(
        "play", "--plain", *where.split(), "--name", "ada", "--join", game_id,
        stdin=moves, env=sessions,
    )  # fmt: skip
    assert code == 0, err
    assert f"Game {game_id}: X = ada" in out
    assert "Game over:" in out
    assert f"Replay it with: noughts replay {where} {game_id}" in out
    code, out, err = await run_noughts("replay", game_id, *where.split(), "--all")
    assert code == 0 and re.search(r"Move 1 of \d+: X played b2\n", out)  # the first run's


async def test_a_plain_run_names_the_games_it_left(ui_server: UIServer, tmp_path: Path) -> None:
    """Defect 7: the unfinished games of a saved session are named, with the way back."""
    sessions = {"NOUGHTS_SESSIONS": str(tmp_path / "sessions.json")}
    ai = ["--server", ui_server.url, "--name", "bo", "--ai", "random", "--budget-ms", "10"]
    code, out, _ = await run_noughts("play", "--plain", *ai, env=sessions)
    left = re.search(r"Game (\w+): X = bo", out).group(1)  # type: ignore[union-attr]
    code, out, _ = await run_noughts("play", "--plain", *ai, env=sessions)
    assert (
        f"You have 1 unfinished game on this server ({left}): noughts play --server "
        f"{ui_server.url} --join GAME_ID takes one back." in out
    )


async def test_the_default_name_is_the_user_name(ui_server: UIServer) -> None:
    """Defect 9: everyone was "player" unless --name."""
    code, out, err = await run_noughts(
        "play", "--plain", "--server", ui_server.url, "--ai", "random", "--budget-ms", "10",
        env={"LOGNAME": "zed", "USER": "someone-else"},
    )  # fmt: skip
    assert code == 0, err
    assert re.search(r"Game \w+: X = zed, O = random", out), out
    code, out, _ = await run_noughts("play", "--help", env={"LOGNAME": "zed"})
    assert "(default: your user name, zed)" in " ".join(out.split())


async def test_two_clients_of_one_person_never_share_a_session(ui_server: UIServer) -> None:
    """Defect 9: a second client under the same server and name is refused in one line,
    while the first plays on; another --name is another player."""
    ai = ["--server", ui_server.url, "--ai", "random", "--budget-ms", "10"]
    first = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "play", "--plain", *ai, "--name", "ann",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert first.stdin is not None and first.stdout is not None
    try:
        shown = b""
        while b"X to move> " not in shown:  # the first one is at its prompt
            chunk = await asyncio.wait_for(first.stdout.read(4096), 120)
            assert chunk, shown
            shown += chunk
        code, out, err = await run_noughts("play", "--plain", *ai, "--name", "ann")
        assert code == 1 and err.strip().splitlines()[-1] == (
            "noughts play: another noughts is playing as 'ann' on this server: give this one "
            "another --name"
        )
        code, out, err = await run_noughts("play", "--plain", *ai, "--name", "ann2")
        assert code == 0 and "X = ann2" in out, err
        first.stdin.write(b"resign\n")  # (before both sides moved: an abort)
        await first.stdin.drain()
        first.stdin.close()
        rest, _ = await asyncio.wait_for(first.communicate(), 120)
        assert "No result: aborted before the first moves." in rest.decode()
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()


async def test_ctrl_c_stops_the_bot_with_its_tally(ui_server: UIServer) -> None:
    """Defect 13: `noughts bot --accept seeks` printed no tally on Ctrl-C."""
    bot = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "bot", "--server", ui_server.url, "--name", "robo",
        "--accept", "seeks", "--engine", "random",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert bot.stdout is not None and bot.stderr is not None
    ada = await ui_server.connect("ada")
    try:
        line = b""
        while b"accepting seeks" not in line:  # (a bot that exits ends the wait: b"")
            line = await asyncio.wait_for(bot.stderr.readline(), 120)
            assert line, "the bot exited before it accepted seeks"
        await ada.request(Seek, game="tictactoe", color="x")
        start = await next_event(ada, Snapshot)
        await resign_after_the_first_moves(ada, start.game_id, ada.token_for(start.game_id))
        line = await asyncio.wait_for(bot.stdout.readline(), 120)
        assert line.decode().startswith(f"game 1 {start.game_id}: win against ada"), line
        bot.send_signal(signal.SIGINT)
        out, _ = await asyncio.wait_for(bot.communicate(), 120)
        assert bot.returncode == 130
        assert out.decode() == "robo: 1 won, 0 drawn, 0 lost\n"
    finally:
        await ada.close()
        if bot.returncode is None:
            bot.kill()
            await bot.wait()


async def test_ctrl_c_while_the_bot_loads_the_engine_prints_the_tally(
    ui_server: UIServer, tmp_path: Path
) -> None:
    """Defect 13: Ctrl-C before the first game (the engine loading) printed no tally. And it
    waited for the whole warm-up, which cannot be stopped midway (a minute here on a cold
    cache, NUMBA_CACHE_DIR empty): the bot now quits at once (a generous bound, a quarter of
    that), leaving the warm-up's thread behind."""
    bot = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "bot", "--server", ui_server.url, "--name", "robo",
        "--accept", "seeks",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")},
    )  # fmt: skip
    assert bot.stderr is not None
    try:
        line = b""
        while line != b"robo: loading the engine...\n":  # (once connected)
            line = await asyncio.wait_for(bot.stderr.readline(), 120)
            assert line, "the bot ended before loading its engine"
        stopped = time.monotonic()
        bot.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(bot.communicate(), 120)
        assert time.monotonic() - stopped < 15, "the bot waited for its warm-up"
        assert bot.returncode == 130, err
        assert out.decode() == "robo: 0 won, 0 drawn, 0 lost\n"
    finally:
        if bot.returncode is None:
            bot.kill()
            await bot.wait()


async def test_one_version_everywhere(ui_server: UIServer) -> None:
    """Defect 15: server noughts/0.2, pyproject 0.1.0, SGF AP[noughts:0.1], PROTOCOL.md
    noughts/0.1. Now pyproject's, through the package metadata, in each."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    version = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    assert software_version() == version
    vera = await ui_server.connect("vera")
    try:
        assert vera.welcome is not None and vera.welcome.server == f"noughts/{version}"
    finally:
        await vera.close()
    record = await play_humans(ui_server, "tictactoe", [4, 0, 8])
    assert f"AP[noughts:{version}]" in to_sgf(record)
    assert f'"server": "noughts/{version}"' in (root / "PROTOCOL.md").read_text()
    code, out, _ = await run_noughts("--version")
    assert code == 0 and out == f"noughts {version}\n"


@pytest.mark.parametrize("name", ["5x5", "gomoku"])
async def test_a_named_board_keeps_its_name_everywhere(ui_server: UIServer, name: str) -> None:
    """Defect 17: a game created as gomoku or 5x5 came back as mnk k=5,m=15,n=15."""
    vera = await ui_server.connect("vera")
    try:
        seated = await vera.request(CreateGame, game=name, algorithm="random", budget_ms=5)
        snapshot = await next_event(vera, Snapshot)
        assert (snapshot.game, snapshot.params) == (name, {})
        await resign_after_the_first_moves(vera, seated.game_id, seated.token)
        record = (await vera.request(GetGame, game_id=seated.game_id)).game
        assert (record["game"], record["params"]) == (name, {})
        listed = (await vera.request(ListGames, status="finished")).games
        assert [(g["game"], g["params"]) for g in listed] == [(name, {})]
    finally:
        await vera.close()
    code, out, err = await run_noughts("games", "--server", ui_server.url)
    assert code == 0 and out.splitlines()[1].split()[1] == name, err


def test_play_help_lists_every_search() -> None:
    """Defect 16: `noughts play --help` left uct out of the --ai list."""
    from engine.algorithms import ALGORITHMS

    text = " ".join(noughts("play", "--help").stdout.split())
    assert f"the AI's search: {', '.join(ALGORITHMS)} (default: the game's own: " in text
    assert "tictactoe perfect, 5x5 mcts, gomoku alphabeta, uttt mcts" in text
    assert "uct" in ALGORITHMS


async def read_until(stream: asyncio.StreamReader, wanted: str) -> list[str]:
    """Lines of ``stream`` up to and including the first that starts with ``wanted``."""
    lines: list[str] = []
    while not lines or not lines[-1].startswith(wanted):
        line = await asyncio.wait_for(stream.readline(), 120)
        assert line, f"the stream ended before {wanted!r}: {lines}"
        lines.append(line.decode().rstrip("\n"))
    return lines


async def test_watch_without_a_game_follows_the_lobby_live(ui_server: UIServer) -> None:
    """Expectation: `noughts watch` without an id follows the lobby live (it printed the
    live games once and exited); Ctrl-C quits without a traceback."""
    ada, bob = await ui_server.connect("ada"), await ui_server.connect("bob")
    watcher = None
    try:
        first = await ada.request(CreateGame, game="tictactoe", opponent="human", seat=0)
        await bob.request(JoinGame, game_id=first.game_id)
        watcher = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "client", "watch", "--server", ui_server.url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert watcher.stdout is not None
        listed = await read_until(watcher.stdout, first.game_id)
        assert listed[0] == f"Live games on {ui_server.url} (+ started, - ended; Ctrl-C quits):"
        assert listed[-1].split()[:4] == [first.game_id, "tictactoe", "ada", "bob"]

        second = await bob.request(CreateGame, game="mnk", opponent="human", seat=0,
                                   params={"m": 4, "n": 4, "k": 3})  # fmt: skip
        await ada.request(JoinGame, game_id=second.game_id)
        started = await read_until(watcher.stdout, "+")
        assert started == [f"+ {second.game_id}  mnk k=3,m=4,n=4  bob  ada"]

        await ada.request(Resign, game_id=first.game_id, token=first.token)
        ended = await read_until(watcher.stdout, "-")
        assert ended == [f"- {first.game_id}  tictactoe  ada  bob"]

        watcher.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(watcher.communicate(), 120)
        assert (watcher.returncode, out, err) == (130, b"", b"")
    finally:
        await ada.close()
        await bob.close()
        if watcher is not None and watcher.returncode is None:
            watcher.kill()
            await watcher.wait()


async def test_the_plain_client_says_proven_draw_not_win_50(ui_server: UIServer) -> None:
    """Expectation: alphabeta proves 3x3 drawn from its first reply, which read
    "value +0.00 (win 50%), proven draw"."""
    code, out, err = await play_plain(
        ui_server, "--ai", "alphabeta", "--budget-ms", "20", stdin=b"4\n"
    )
    assert code == 0, err
    reply = next(line for line in out.splitlines() if "(O) played" in line)
    assert reply.endswith(", value proven draw]") and "%" not in reply, reply


async def test_the_readme_bot_prints_what_it_does(ui_server: UIServer) -> None:
    """Expectation: the README's own bot, run as written (on the test's server), says what it
    does: it printed nothing at all."""
    from client.bot import Bot

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    intro = readme.index("Your own bot in Python, complete")
    code = readme[readme.index("```python\n", intro) + 10 : readme.index("```\n", intro + 40)]
    assert 'SERVER = "ws://127.0.0.1:8765"' in code
    assert len(code.strip().splitlines()) < 40  # a complete bot, read at a glance
    code = code.replace("ws://127.0.0.1:8765", ui_server.url)
    randy = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, cwd=root,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    opponent = Bot(ui_server.url, lambda turn: turn.state.legal_actions()[0], name="opp")
    try:
        played, (out, err) = await asyncio.gather(
            opponent.play(games=5, accept="seeks"), asyncio.wait_for(randy.communicate(), 120)
        )
    finally:
        if randy.returncode is None:
            randy.kill()
            await randy.wait()
    assert randy.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0] == (
        f"randy: posting 5 tictactoe seeks on {ui_server.url}, one at a time; "
        "accept them in the lobby"
    )
    # Each game: its moves (a cell in the notation, e.g. b2), then its result.
    outcomes = {"win": "loss", "loss": "win", "draw": "draw"}
    printed = 0
    for result in played:
        own = [line for line in lines[1:-1] if line.startswith(f"{result.game_id}: ")]
        printed += len(own)
        assert own[-1] == (
            f"{result.game_id}: {outcomes[result.outcome]} against opp ({result.reason})"
        )
        moves = own[:-1]
        assert moves and all(
            re.fullmatch(r"\S+: (plays [a-c][1-3]|[a-c][1-3] wins)", m) for m in moves
        )
    assert len(played) == 5 and printed == len(lines) - 2
    won = sum(r.outcome == "loss" for r in played)
    lost = sum(r.outcome == "win" for r in played)
    assert lines[-1] == f"randy: {won} won, {5 - won - lost} drawn, {lost} lost"


async def test_the_plain_challenger_is_told_of_a_decline(ui_server: UIServer) -> None:
    """`play --challenge bob`: bob declines (decline_seek); the challenger says so and
    exits 1, instead of waiting for ever."""
    from protocol import DeclineSeek, LobbyEvent, LobbyState, LobbySubscribe

    bob = await ui_server.connect("bob")
    try:
        await bob.request(LobbySubscribe)
        challenging = asyncio.ensure_future(
            play_plain(ui_server, "--name", "ada", "--challenge", "bob", "--game", "5x5")
        )
        seek_id = None
        while seek_id is None:
            message = await bob.next_lobby_event(timeout=120)
            seeks = list(message.seeks) if isinstance(message, LobbyState) else []
            if isinstance(message, LobbyEvent) and message.seek:
                seeks.append(message.seek)
            seek_id = next((s["seek_id"] for s in seeks if s.get("to") == bob.player_id), None)
        await bob.request(DeclineSeek, seek_id=seek_id)
        code, out, err = await challenging
        assert code == 1, err
        assert out.splitlines()[-1] == "bob declined your challenge."
        assert out.startswith("Waiting for bob to accept your challenge (s-")
    finally:
        await bob.close()


async def test_seeks_lists_the_open_seeks_and_the_challenges_to_you(ui_server: UIServer) -> None:
    """`play --accept SEEK_ID` took an id that only the terminal interface's lobby showed: a
    user of the line client (a script, a screen reader) had no way to find one."""
    from protocol import Seek

    code, out, err = await run_noughts("seeks", "--server", ui_server.url, "--name", "ada")
    assert (code, out.strip()) == (0, "No open seeks: noughts play --seek posts one."), err
    bob = await ui_server.connect("bob")
    try:
        posted = await bob.request(Seek, game="5x5", clock={"initial_ms": 180_000,
                                   "increment_ms": 2_000}, color="x")  # fmt: skip
        challenge = await bob.request(Seek, game="gomoku", to="ada", color="o")
        code, out, err = await run_noughts("seeks", "--server", ui_server.url, "--name", "ada")
        assert code == 0, err
        rows = [line.split() for line in out.splitlines()]
        assert rows[0] == ["ID", "PLAYER", "GAME", "CLOCK", "YOU", "PLAY", "FOR"]
        assert rows[1] == [posted.seek_id, "bob", "5x5", "3+2", "O", "anyone"]
        assert rows[2] == [challenge.seek_id, "bob", "gomoku", "no", "clock", "X", "you"]
        assert rows[3] == f"noughts play --server {ui_server.url} --accept ID accepts one.".split()
        code, out, err = await run_noughts("seeks", "--server", ui_server.url, "--name", "cy")
        assert challenge.seek_id not in out and posted.seek_id in out  # not cy's challenge
    finally:
        await bob.close()


async def test_play_on_a_database_in_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    """A mistyped --db directory: the embedded server is not started and nothing is made
    (it made the directory, its parents, the database, its lock and its log)."""
    db = tmp_path / "typo" / "games.db"
    code, _, err = await run_noughts("play", "--plain", "--db", str(db))
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        f"noughts play: cannot open database {db}: no directory {db.parent}"
    )
    assert not db.parent.exists()


async def test_quick_pairing_says_what_it_waits_for(ui_server: UIServer) -> None:
    """It said "Waiting for a player (or the AI) (s-...)": a seek id nobody can accept, and
    not when the AI steps in."""
    code, out, err = await play_plain(ui_server, "--name", "quinn", "--quick", "--ai-after", "1")
    assert code == 0, err
    assert out.splitlines()[0] == (
        "Waiting for another tictactoe player, or the AI after 1 s; 'q' leaves..."
    )


async def test_watching_an_open_game_names_its_open_seat(ui_server: UIServer) -> None:
    """`noughts watch` of a game waiting for its second player said "X = ada (X), O = O";
    then its offers."""
    from client.spectator import follow
    from protocol import CreateGame, Draw, JoinGame, Move, Watch

    ada = await ui_server.connect("ada")
    eve = await ui_server.connect("eve")
    try:
        created = await ada.request(CreateGame, game="5x5", opponent="human", seat=0)
        await eve.request(Watch, game_id=created.game_id)
        lines: list[str] = []
        following = asyncio.ensure_future(follow(eve, created.game_id, lines.append))
        async with asyncio.timeout(10):
            while not lines:
                await asyncio.sleep(0.02)
        assert lines[0] == (
            f"Game {created.game_id}: 5x5, X = ada, O = (open seat), open, 0 moves played"
        )
        # An offer reads as a sentence (it read "ada (X): draw offer").
        bo = await ui_server.connect("bo")
        await bo.request(JoinGame, game_id=created.game_id)
        await ada.request(Move, game_id=created.game_id, action=12)
        await ada.request(Draw, game_id=created.game_id, answer="offer")
        async with asyncio.timeout(10):
            while "offer" not in lines[-1]:
                await asyncio.sleep(0.02)
        following.cancel()
        assert lines[-1] == "ada (X) offers a draw."
        await bo.close()
    finally:
        await ada.close()
        await eve.close()

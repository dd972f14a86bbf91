"""The `noughts` command as a user runs it: an embedded server, a game through pipes, the replay."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from client.cli import COMMANDS, build_parser
from client.embedded import EmbeddedServer
from engine.games import GAME_NAMES
from tests.client.ui_support import start_server


def noughts(*args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "client", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


async def new_database(path: Path) -> None:
    """A noughts database at ``path`` with no games, as a server's first start leaves it
    (noughts migrate upgrades one, and makes none)."""
    from server.store import SQLiteStore

    store = SQLiteStore(path)
    await store.open()
    await store.close()


def test_every_subcommand_has_help() -> None:
    parser = build_parser()
    choices = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    from client.commands.serve import SERVER_COMMANDS

    # One module per command, but the one that registers every server command.
    assert len(choices) == len(COMMANDS) + len(SERVER_COMMANDS) - 1
    for name in choices:
        result = noughts(name, "--help")
        assert result.returncode == 0, (name, result.stderr)
        assert "usage" in result.stdout.lower() and "--" in result.stdout, name


def test_play_a_game_against_the_ai_then_list_and_replay_it(tmp_path: Path) -> None:
    db = tmp_path / "games.db"
    # Every cell, over and over: the occupied ones are refused by the client and retried.
    moves = "\n".join(str(cell) for _ in range(5) for cell in range(9)) + "\n"
    played = noughts(
        "play", "--plain", "--db", str(db), "--ai", "alphabeta", "--budget-ms", "20",
        "--name", "ada", stdin=moves,
    )  # fmt: skip
    assert played.returncode == 0, played.stderr
    out = played.stdout
    assert "Game over:" in out and "You win" not in out  # alphabeta never loses 3x3
    assert "is occupied" in out  # the repeated cells were refused with a reason
    game_id = re.search(r"noughts replay (?:--\S+ \S+ )*(\w+)", out).group(1)  # type: ignore[union-attr]

    listed = noughts("games", "--db", str(db))
    assert listed.returncode == 0, listed.stderr
    assert game_id in listed.stdout and "ada" in listed.stdout and "alphabeta" in listed.stdout

    replayed = noughts("replay", game_id, "--db", str(db), "--all")
    assert replayed.returncode == 0, replayed.stderr
    text = replayed.stdout
    total = int(re.search(r"(\d+) moves", text).group(1))  # type: ignore[union-attr]
    for ply in range(1, total + 1):
        assert f"Move {ply} of {total}:" in text
    assert "alphabeta" in text and "expected line" in text  # the AI's statistics came back

    # Stepping: next, next, previous, last, quit.
    stepped = noughts("replay", game_id, "--db", str(db), stdin="n\nn\np\nl\nq\n")
    assert stepped.returncode == 0
    positions = re.findall(r"(?:Position|Move) (\d+) of", stepped.stdout)
    assert positions == ["0", "1", "2", "1", str(total)]


def test_replay_of_an_unknown_game_is_a_clear_error(tmp_path: Path) -> None:
    asyncio.run(new_database(tmp_path / "empty.db"))
    result = noughts("replay", "nosuchid", "--db", str(tmp_path / "empty.db"))
    assert result.returncode == 1
    assert "nosuchid" in result.stderr and "Traceback" not in result.stderr


def store_games(path: Path, games: dict[str, tuple[str, dict[str, int], list[int]]]) -> None:
    """Write finished games (id: game, params, actions) into a noughts database as its rows
    are, checked by nothing: a database damaged by hand, or written by a newer noughts."""
    import sqlite3

    players = json.dumps([{"name": "ada", "kind": "human"}, {"name": "bob", "kind": "human"}])
    db = sqlite3.connect(path)
    for game_id, (game, params, actions) in games.items():
        db.execute(
            "INSERT INTO games (id, game, params, status, players, result, reason, seq,"
            " created_at) VALUES (?, ?, ?, 'finished', ?, '1-0', 'resign', ?, 1.8e9)",
            (game_id, game, json.dumps(params), players, len(actions) + 2),
        )
        for ply, action in enumerate(actions):
            db.execute(
                "INSERT INTO moves (game_id, ply, seq, seat, action, at)"
                " VALUES (?, ?, ?, ?, ?, 1.8e9)",
                (game_id, ply, ply + 2, ply % 2, action),
            )
    db.commit()
    db.close()


def test_a_game_that_does_not_replay_is_one_line_from_replay_and_export(tmp_path: Path) -> None:
    """noughts replay and export --format svg of a stored game whose moves break the rules
    (a damaged row), or of a game this noughts does not know (a newer server's), ended in
    an IllegalMove or EngineError traceback; export --format sgf wrote the illegal moves
    out. Each now says in one line which move does not replay, and points to the JSON
    export, which holds the record as stored."""
    db = tmp_path / "games.db"
    asyncio.run(new_database(db))
    store_games(
        db,
        {
            "occupied": ("tictactoe", {}, [4, 0, 4]),
            "outside": ("gomoku", {}, [112, 225]),
            "newer": ("connect4", {}, [3, 3]),
        },
    )
    expected = {
        "occupied": "game occupied cannot be replayed: move 3: cell b2 is occupied by X",
        "outside": "game outside cannot be replayed: move 2: move 225 is out of range 0..224",
        "newer": "game newer cannot be replayed: unknown game 'connect4': choose one of "
        + ", ".join(GAME_NAMES),
    }
    for game_id, why in expected.items():
        result = noughts("replay", game_id, "--db", str(db), "--all")
        assert (result.returncode, result.stdout) == (1, ""), result.stderr
        assert result.stderr == (
            f"noughts replay: {why} (noughts export {game_id} shows it as stored)\n"
        )
    for fmt in ("sgf", "svg"):
        result = noughts("export", "occupied", "--db", str(db), "--format", fmt)
        assert (result.returncode, result.stdout) == (1, ""), result.stderr
        assert result.stderr == (
            f"noughts export: {expected['occupied']} (--format json holds it as stored)\n"
        )
    result = noughts("export", "occupied", "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert [m["action"] for m in json.loads(result.stdout)["moves"]] == [4, 0, 4]


def damaged_database(path: Path) -> None:
    """A database holding finished games "damaged", whose second move's stats column is
    not JSON, and "unlisted", whose players column is not (rows damaged by hand or by a
    disk): games meets the second, replay and export the first."""
    import sqlite3

    asyncio.run(new_database(path))
    games = {"damaged": ("tictactoe", {}, [4, 0, 8]), "unlisted": ("tictactoe", {}, [4])}
    store_games(path, {**games, "fine": ("tictactoe", {}, [4])})
    connection = sqlite3.connect(path)
    connection.execute("UPDATE moves SET stats = '{oops' WHERE game_id = 'damaged' AND ply = 1")
    connection.execute("UPDATE games SET players = '[' WHERE id = 'unlisted'")
    connection.commit()
    connection.close()


def game_status(path: Path, game_id: str) -> str:
    import sqlite3

    connection = sqlite3.connect(path)
    try:
        return str(
            connection.execute("SELECT status FROM games WHERE id = ?", (game_id,)).fetchone()[0]
        )
    finally:
        connection.close()


def test_a_damaged_game_is_said_what_is_wrong_with_in_one_line(tmp_path: Path) -> None:
    """A walk's finding: replay of a game with a damaged row said "its stored record cannot
    be read (see the server's log)", but the log of replay's own server is removed when it
    stops: nothing said what was wrong. The line now names the column and the move, for a
    game a server marked quarantined too."""
    import sqlite3

    db = tmp_path / "games.db"
    damaged_database(db)
    why = (
        "game damaged is quarantined: its stored record cannot be read: moves.stats of "
        "move 2: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )
    for command in ("replay", "export"):
        result = noughts(command, "damaged", "--db", str(db))
        assert (result.returncode, result.stdout) == (1, ""), result.stderr
        assert result.stderr == f"noughts {command}: {why}\n"
    connection = sqlite3.connect(db)
    connection.execute("UPDATE games SET status = 'quarantined' WHERE id = 'damaged'")
    connection.commit()
    connection.close()
    result = noughts("replay", "damaged", "--db", str(db), "--all")
    assert (result.returncode, result.stderr) == (1, f"noughts replay: {why}\n")


@pytest.mark.parametrize("args", [["replay", "damaged"], ["export", "damaged"], ["games"]])
def test_a_command_that_reads_games_leaves_a_damaged_game_as_it_is(
    tmp_path: Path, args: list[str]
) -> None:
    """A walk's finding: replay (export, games) of a game with a damaged row wrote status
    'quarantined' into the database it only read. A server of its own (serve, play) still
    sets the game aside so (README, Storage); the commands that only read do not."""
    db = tmp_path / "games.db"
    damaged_database(db)
    result = noughts(*args, "--db", str(db))
    assert "Traceback" not in result.stderr
    assert (game_status(db, "damaged"), game_status(db, "unlisted")) == ("finished", "finished")
    if args == ["games"]:
        assert result.returncode == 0 and "unlisted" not in result.stdout, result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["play", "--plain"],
        ["games"],
        ["watch"],
        ["watch", "abc"],
        ["replay", "abc"],
        ["export", "abc"],
        ["bot", "--games", "1"],
        ["health"],
    ],
)
def test_an_unreachable_server_is_a_clear_error(args: list[str]) -> None:
    # Nothing listens on the discard port here: the connection is refused.
    result = noughts(*args, "--server", "ws://127.0.0.1:9", timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    reason = "connection refused (is a noughts server running there?)"
    # The bot connects before it loads its engine (with a cold cache, a minute of compiling).
    assert "loading the engine" not in result.stderr
    if args[0] == "health":
        assert result.stderr.strip() == f"unhealthy: ws://127.0.0.1:9: {reason}"
    else:
        said = f"noughts {args[0]}: cannot reach ws://127.0.0.1:9: {reason}"
        assert said in result.stderr.splitlines(), result.stderr


@pytest.mark.parametrize("args", [["games"], ["replay", "abc"], ["export", "abc"]])
def test_a_command_that_reads_games_does_not_create_the_database_it_is_given(
    tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "typo" / "games.db"
    result = noughts(*args, "--db", str(missing), timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == f"noughts {args[0]}: no database at {missing}"
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("args", [["games"], ["replay", "abc"], ["export", "abc"]])
async def test_a_command_that_reads_games_leaves_nothing_beside_the_database(
    tmp_path: Path, args: list[str]
) -> None:
    """A walk's finding: games, replay and export on --db PATH left PATH.lock and
    PATH.server.log behind, made by the server they started. They still leave a live
    server's lock (and a log they did not make) as they found them."""
    where = tmp_path / "data"  # (the test's sessions file is in tmp_path)
    where.mkdir()
    db = where / "games.db"
    await new_database(db)
    found = sorted(os.listdir(where))
    result = await asyncio.to_thread(noughts, *args, "--db", str(db), timeout=120)
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    assert sorted(os.listdir(where)) == found
    log = where / "games.db.server.log"
    log.write_text("a log of the user's\n")
    async with EmbeddedServer(db, workers=0):
        lock = (where / "games.db.lock").read_text()
        found = sorted(os.listdir(where))
        result = await asyncio.to_thread(noughts, *args, "--db", str(db), timeout=120)
        assert "using that server" in result.stderr, result.stderr
        assert sorted(os.listdir(where)) == found
        assert (where / "games.db.lock").read_text() == lock
    assert log.read_text().startswith("a log of the user's\n")


def game_row(path: Path, game_id: str) -> tuple[str, int]:
    """A stored game's status and seq (the count of its events): what a write changes."""
    import sqlite3

    connection = sqlite3.connect(path)
    try:
        status, seq = connection.execute(
            "SELECT status, seq FROM games WHERE id = ?", (game_id,)
        ).fetchone()
        return str(status), int(seq)
    finally:
        connection.close()


async def test_a_command_that_reads_games_leaves_a_live_game_as_it_is(tmp_path: Path) -> None:
    """A live game stored in the database (its server stopped) was restored by the server
    of games, replay and export, its clock running: a replay read for longer than the
    side to move's time ended the game on time, and its players' absence, an AI's move or
    the game's abandonment were written alike. That server now leaves the stored games as
    they are (serve --restore-games false), and lists and replays them from the database."""
    from client.connection import ServerConnection
    from protocol import CreateGame, GetGame, JoinGame, ListGames, Move

    servers = start_server(tmp_path, None)  # (no AI game)
    server = await anext(servers)
    ada, bob = await server.connect("ada"), await server.connect("bob")
    seated = await ada.request(
        CreateGame, game="tictactoe", opponent="human", seat=0, clock={"move_ms": 1000}
    )
    joined = await bob.request(JoinGame, game_id=seated.game_id)
    await ada.request(Move, game_id=seated.game_id, token=seated.token, action=4, ply=0)
    await bob.request(Move, game_id=seated.game_id, token=joined.token, action=0, ply=1)
    opened = await ada.request(CreateGame, game="tictactoe", opponent="human")
    await ada.request(CreateGame, game="tictactoe", opponent="human", private=True)
    await ada.close()
    await bob.close()
    await servers.aclose()  # ada's clock (1 s a move) runs from the next start
    db = tmp_path / "games.db"
    stored = game_row(db, seated.game_id)
    assert stored[0] == "live"
    async with EmbeddedServer(db, workers=0, reads_only=True) as url:
        reader = await ServerConnection.connect(url, name="reader")
        try:
            listed = await reader.request(ListGames, status="live")
            assert [g["game_id"] for g in listed.games] == [seated.game_id]
            listed = await reader.request(ListGames, status="open")  # (not the private one)
            assert [g["game_id"] for g in listed.games] == [opened.game_id]
            record = (await reader.request(GetGame, game_id=seated.game_id)).game
            assert record["status"] == "live"
            assert [m["action"] for m in record["moves"]] == [4, 0]
            # Ada's second of time passes several times over while the command reads.
            deadline = asyncio.get_running_loop().time() + 5
            while asyncio.get_running_loop().time() < deadline:
                assert game_row(db, seated.game_id) == stored
                await asyncio.sleep(0.1)
        finally:
            await reader.close()
    assert game_row(db, seated.game_id) == stored


async def test_a_command_given_a_symlink_to_a_served_database_uses_its_server(
    tmp_path: Path,
) -> None:
    """An operator's probe: the lock was LINK.lock for a symlink to a served file, so a
    command given the link started a second server on it. The lock follows the real file:
    the command uses the running server and leaves nothing beside the link."""
    where = tmp_path / "data"  # (the test's sessions file is in tmp_path)
    where.mkdir()
    db = where / "s1.db"
    link = where / "link.db"
    link.symlink_to("s1.db")
    await new_database(db)
    async with EmbeddedServer(db, workers=0) as url:
        found = sorted(os.listdir(where))
        result = await asyncio.to_thread(noughts, "games", "--db", str(link), timeout=120)
        base, _, secret = url.rpartition("/")  # (its secret path is not shown)
        assert f"serves {link} on {base}: using that server" in result.stderr, result.stderr
        assert secret not in result.stderr
        assert result.returncode == 0, result.stderr
        assert sorted(os.listdir(where)) == found


def test_a_file_that_is_no_database_is_said_so_in_one_line(tmp_path: Path) -> None:
    """A walk's finding: an empty file was made a database by `games` (which only reads),
    and a text file's "file is not a database" was only in the embedded server's log."""
    empty, text = tmp_path / "empty.db", tmp_path / "notes.db"
    empty.write_bytes(b"")
    text.write_text("not a database\n")
    result = noughts("games", "--db", str(empty), timeout=60)
    assert (result.returncode, result.stderr.strip()) == (
        1,
        f"noughts games: no database at {empty} (the file is empty)",
    )
    assert empty.stat().st_size == 0
    result = noughts("games", "--db", str(text), timeout=60)
    assert result.returncode == 1
    # Before the one line, a slow start (a loaded machine) shows its progress a line a second.
    *progress, said = result.stderr.splitlines()
    assert all(re.fullmatch(r"noughts: starting the engine \(\d+ s\)", p) for p in progress)
    assert said.startswith(
        f"noughts games: the embedded server failed to start: cannot open database {text}: "
        "file is not a database (see "
    ), result.stderr


@pytest.mark.parametrize("command", ["play", "bot"])
def test_a_name_longer_than_the_wire_takes_is_a_usage_error(command: str) -> None:
    # Before, the client cut it to 32 characters and the server refused "not 32".
    result = noughts(command, "--name", "a" * 40, "--server", "ws://127.0.0.1:9", timeout=60)
    assert result.returncode == 2
    assert result.stderr == (
        f"noughts {command}: error: argument --name: too long: 40 characters "
        f"(see noughts {command} --help)\n"
    )


def test_the_plain_client_names_the_line_command_for_the_terminal_only_options() -> None:
    """It said "use noughts replay GAME_ID" for --lobby and --watch too."""
    where = ["--plain", "--server", "ws://127.0.0.1:9"]
    result = noughts("play", *where, "--watch", "g1")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "noughts play: --watch needs the terminal interface (no --plain, in a terminal): "
        "noughts watch --server ws://127.0.0.1:9 g1"
    )
    result = noughts("play", *where, "--replay", "g1")
    assert result.stderr.strip().endswith(": noughts replay --server ws://127.0.0.1:9 g1")
    result = noughts("play", *where, "--lobby")
    assert result.stderr.strip().endswith(
        ": noughts watch --server ws://127.0.0.1:9 lists the live games; play --quick, --seek "
        "or --challenge pairs you"
    )


def test_the_watch_command_suggested_for_a_local_database_is_one_watch_takes(
    tmp_path: Path,
) -> None:
    """For a database of its own (--db), play --plain --watch and --lobby suggested `noughts
    watch --db PATH ...`, which watch refuses (it has no --db: it follows a server)."""
    where = ["--plain", "--db", str(tmp_path / "games.db")]
    result = noughts("play", *where, "--watch", "g1")
    assert result.returncode == 2
    assert result.stderr.strip().endswith(": noughts watch --server URL g1"), result.stderr
    result = noughts("play", *where, "--lobby")
    assert ": noughts watch --server URL lists the live games" in result.stderr
    result = noughts("play", *where, "--replay", "g1")  # replay takes --db
    assert result.stderr.strip().endswith(f": noughts replay --db {tmp_path / 'games.db'} g1")


def test_the_plain_client_offers_a_draw_that_the_ai_accepts(tmp_path: Path) -> None:
    played = noughts(
        "play", "--plain", "--db", str(tmp_path / "g.db"), "--ai", "alphabeta",
        "--budget-ms", "20", stdin="4\ndraw\n",
    )  # fmt: skip
    assert played.returncode == 0, played.stderr
    # alphabeta proves 3x3 drawn from its first move: a draw offer is accepted at once.
    assert "Draw offer sent" in played.stdout
    assert "Game over: Draw: draw agreed." in played.stdout


def test_the_replay_header_of_a_game_in_progress() -> None:
    """It read "1 moves, result live"."""
    from client.replay import ReplayCursor

    record = {
        "id": "g1", "game": "tictactoe", "params": {}, "created_at": 0.0,
        "players": [{"name": "ada"}, {"name": "bob"}], "status": "live",
        "result": None, "reason": None, "moves": [{"action": 4, "seat": 0}],
    }  # fmt: skip
    assert ReplayCursor(record).header() == (
        "Game g1: tictactoe, X = ada, O = bob, 1970-01-01 00:00 UTC, 1 move, in progress"
    )
    moves = [{"action": action, "seat": ply % 2} for ply, action in enumerate([0, 3, 1, 4, 2])]
    record.update(status="finished", result="1-0", reason="line", moves=moves)
    assert ReplayCursor(record).header().endswith(", 5 moves, result 1-0 (line)")


def test_search_statistics_that_are_not_numbers_are_left_out_not_a_traceback() -> None:
    """An AI move's stats are not checked on the wire nor in the store: iterations or
    milliseconds that were not numbers (a damaged record, a hostile server) ended noughts
    replay, watch and the interface's AI panel in a ValueError ("Cannot specify ',' with
    's'"), a pv that was not a list in a TypeError. They are left out now."""
    from client.game_view import describe_stats
    from client.replay import ReplayCursor
    from client.ui.game import describe_ai

    stats = {"algorithm": "mcts", "iterations": "many", "elapsed_ms": "slow", "pv": 5}
    record = {
        "id": "g1", "game": "tictactoe", "params": {}, "created_at": 0.0,
        "players": [{"name": "ada"}, {"name": "mcts", "kind": "ai"}], "status": "live",
        "moves": [{"action": 4, "seat": 0}, {"action": 0, "seat": 1, "stats": stats}],
    }  # fmt: skip
    cursor = ReplayCursor(record)
    cursor.go(2)
    assert cursor.describe().splitlines()[0] == "Move 2 of 2: O played a3  [mcts]"
    assert describe_stats(stats) == "mcts"
    assert describe_ai(stats, cursor.state_at(1)).plain == "search mcts"
    numbers = {**stats, "iterations": 1234, "elapsed_ms": 49.4, "pv": [8, 2]}
    assert describe_stats(numbers) == "mcts, 1,234 iterations, in 49 ms"
    assert "line   c1 c3" in describe_ai(numbers, cursor.state_at(2)).plain


def test_replay_names_the_moves_there_are_for_a_number_out_of_range() -> None:
    """A probe's finding: 99 went to the last move as if it were asked for, and -1 printed
    the help line; neither said which numbers there are."""
    from client.replay import HELP, ReplayCursor, step_through

    record = {
        "id": "g1", "game": "tictactoe", "params": {}, "created_at": 0.0,
        "players": [{"name": "ada"}, {"name": "bob"}], "status": "finished",
        "result": "1-0", "reason": "line",
        "moves": [{"action": a, "seat": i % 2} for i, a in enumerate([4, 0, 8, 2, 6])],
    }  # fmt: skip
    lines = iter(["2", "99", "-1", "+-1", "5", "0"])
    said: list[str] = []

    async def read_line(prompt: str) -> str | None:
        return next(lines, None)

    asyncio.run(step_through(ReplayCursor(record), read_line, said.append, prompt=said.append))
    positions = [line.split(":")[0] for line in said if line.startswith(("Move", "Position"))]
    assert positions == ["Position 0 of 5", "Move 2 of 5", "Move 5 of 5", "Position 0 of 5"]
    out_of_range = [line for line in said if "no move" in line]
    assert out_of_range == [
        "There is no move 99: give 0 (the start) to 5.",
        "There is no move -1: give 0 (the start) to 5.",
    ], said
    assert said.count(HELP) == 2  # at the start, and for "+-1" (not a number)


def test_games_checks_its_limit_before_asking() -> None:
    """A walk's finding: --limit 0 came back as the server's bad_field error."""
    result = noughts("games", "--limit", "0", "--server", "ws://127.0.0.1:9", timeout=60)
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "noughts games: --limit wants a count in 1..500, got 0",
    )


def test_a_listed_game_marks_its_bots_and_ai() -> None:
    from client.commands.games import game_row

    row = game_row(
        {
            "game_id": "abcdefgh",
            "game": "tictactoe",
            "params": {},
            "players": [{"name": "robo", "kind": "bot"}, {"name": "perfect", "kind": "ai"}],
            "status": "live",
            "created_at": 0.0,
        }
    )
    assert row[2:4] == ("robo [bot]", "perfect [AI]")


def test_a_bot_whose_engine_cannot_play_its_seek_is_refused_at_start() -> None:
    """A walk's finding: it posted the seek and died in its first move with a traceback."""
    result = noughts(
        "bot", "--server", "ws://127.0.0.1:9", "--engine", "perfect", "--seek", "gomoku",
        timeout=60,
    )  # fmt: skip
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "noughts bot: perfect cannot play gomoku: it solves m,n,k boards of at most 16 cells "
        "exactly",
    )


@pytest.mark.parametrize(
    ("command", "option", "said"),
    [
        ("play", ["--param", "m"], "--param wants KEY=N, got 'm'"),
        ("play", ["--clock", "soon"], "--clock wants none, MINUTES+SECONDS (e.g. 3+2) or "
         "SECONDSs (e.g. 10s), got 'soon'"),
        ("bot", ["--param", "m=x"], "--param wants KEY=N, got 'm=x'"),
        ("bot", ["--clock", "3+x"], "--clock wants none, MINUTES+SECONDS (e.g. 3+2) or "
         "SECONDSs (e.g. 10s), got '3+x'"),
    ],
)  # fmt: skip
def test_a_malformed_param_or_clock_is_a_usage_error(
    command: str, option: list[str], said: str
) -> None:
    """They exited 1, the other usage errors 2 (argparse's own, --name's among them)."""
    where = ["--plain"] if command == "play" else []
    result = noughts(command, *where, "--server", "ws://127.0.0.1:9", *option, timeout=60)
    assert (result.returncode, result.stderr.strip()) == (2, f"noughts {command}: {said}")


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf", "soon"])
def test_health_refuses_a_timeout_that_is_not_a_positive_number(timeout: str) -> None:
    """--timeout 0, -1 and nan were taken (and reported any server unhealthy at once)."""
    result = noughts("health", "--server", "ws://127.0.0.1:9", "--timeout", timeout, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"noughts health: error: argument --timeout: must be seconds above 0, not {timeout} "
        "(see noughts health --help)\n"
    )


def test_health_says_it_timed_out() -> None:
    """A server that accepts the connection and never answers: it said 'unhealthy: URL: '
    (a TimeoutError's empty text)."""
    import socket

    with socket.socket() as silent:  # the kernel accepts; nothing ever answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"ws://127.0.0.1:{silent.getsockname()[1]}"
        result = noughts("health", "--server", url, "--timeout", "0.5", timeout=60)
    assert (result.returncode, result.stderr.strip()) == (
        1,
        f"unhealthy: {url}: timed out after 0.5 s",
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["serve", "--port", "70000"], "noughts serve: error: argument --port: must be "
         "0..65535, not 70000 (see noughts serve --help)"),
        (["serve", "--workers", "abc"], "noughts serve: error: argument --workers: invalid "
         "int value: 'abc' (see noughts serve --help)"),
        (["migrate", "--bogus"], "noughts migrate: error: unrecognized arguments: --bogus "
         "(see noughts migrate --help)"),
        (["engine-worker", "--processes", "0"], "noughts engine-worker: error: argument "
         "--processes: must be 1..128, not 0 (see noughts engine-worker --help)"),
        (["play", "--game", "chess"], "noughts play: error: argument --game: invalid choice: "
         f"'chess' (choose from {', '.join(map(repr, GAME_NAMES))}) (see noughts play --help)"),
        (["play", "--seat", "y"], "noughts play: error: argument --seat: invalid choice: 'y' "
         "(choose from 'x', 'o', 'random') (see noughts play --help)"),
        (["bot", "--accept", "all"], "noughts bot: error: argument --accept: invalid choice: "
         "'all' (choose from 'seeks', 'challenges') (see noughts bot --help)"),
        (["games", "--bogus"], "noughts games: error: unrecognized arguments: --bogus "
         "(see noughts games --help)"),
        (["chess"], "noughts: error: argument COMMAND: invalid choice: 'chess' (choose from "
         "'serve', 'migrate', 'engine-worker', 'play', 'games', 'seeks', 'replay', 'watch', "
         "'bot', 'export', 'arena', 'bench', 'brain', 'health') (see noughts --help)"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)  # fmt: skip
def test_a_bad_option_is_one_line(args: list[str], said: str) -> None:
    """argparse printed its usage block before the error: 32 lines for `noughts serve`'s,
    10 for `noughts play`'s. A bad option is one line, as every other error, exit 2."""
    result = noughts(*args, timeout=60)
    assert (result.returncode, result.stderr) == (2, said + "\n")


async def test_a_session_sent_in_clear_to_another_host_is_warned_of_once(tmp_path: Path) -> None:
    """The client sent its session token over plain ws:// to any host without a word. A
    ws:// server that is not this machine's loopback gets one warning line, before any
    connection, suggesting wss://; 127.0.0.1, ::1 and localhost get none."""
    warning = "warning: ws:// is not encrypted: your session travels in clear to 192.0.2.1"
    # (TEST-NET-1: no server answers there; the health check gives up after its timeout)
    far = await asyncio.to_thread(
        noughts, "health", "--server", "ws://192.0.2.1:9", "--timeout", "0.5", timeout=60
    )
    lines = far.stderr.splitlines()
    said = f"noughts health: {warning}; use wss:// if the server offers it"
    assert lines.count(said) == 1 and lines[0] == said, far.stderr
    assert far.returncode == 1 and "Traceback" not in far.stderr
    async with EmbeddedServer(tmp_path / "games.db", workers=0) as url:
        port_and_path = url.removeprefix("ws://127.0.0.1")
        for host in ("127.0.0.1", "localhost", "LOCALHOST"):
            near = await asyncio.to_thread(
                noughts, "health", "--server", f"ws://{host}{port_and_path}", timeout=60
            )
            assert (near.returncode, near.stderr) == (0, ""), (host, near.stderr)
    near = await asyncio.to_thread(
        noughts, "health", "--server", "ws://[::1]:9", "--timeout", "0.5", timeout=60
    )
    assert "warning" not in near.stderr, near.stderr
    secure = await asyncio.to_thread(
        noughts, "health", "--server", "wss://192.0.2.1:9", "--timeout", "0.5", timeout=60
    )
    assert "warning" not in secure.stderr, secure.stderr

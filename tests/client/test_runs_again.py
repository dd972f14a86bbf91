"""Commands run a second time against the same server (and `watch` of a game that is over). The
server binds a name to the session that first used it (PROTOCOL.md, Sessions): `noughts
health` and `noughts watch` sent a fixed name and `noughts bot` kept no session, so every
run after the first was refused (`name_taken`): the compose file's healthcheck turned
unhealthy at its second check, a second watcher ended in a traceback, and a bot restarted
under its name could not play. And each run of a command that only reads was a new session,
of which an address may open only so many (`too_many`)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from client.bot import Bot
from client.sessions import SessionStore
from protocol import Move, Moved, Resign, Seek, Snapshot
from tests.client.test_cli_issue12 import run_noughts
from tests.client.test_export import play_humans
from tests.client.ui_support import UIServer
from tests.server.conftest import next_event, next_event_where


async def test_the_commands_that_read_take_one_guest_session(ui_server: UIServer) -> None:
    """Each run of `games`, `replay`, `export`, `health` was a new session, stored and counted
    against the address's allowance: a script reading games in a loop was refused
    (`too_many`) after the burst (30 by default; 3 here). Now they share one guest session."""
    settings = ui_server.game_server.settings
    settings.new_sessions_burst_per_ip, settings.new_sessions_per_ip_per_minute = 3, 0.01
    for command in ["games", "health", "games", "health", "games", "games"]:
        code, out, err = await run_noughts(command, "--server", ui_server.url)
        assert (code, err) == (0, ""), err
    code, out, err = await run_noughts("replay", "nosuchgame", "--server", ui_server.url)
    assert (code, err.strip()) == (1, "noughts replay: no game 'nosuchgame'")


async def test_the_commands_that_read_share_the_guest_session_with_a_running_watch(
    ui_server: UIServer,
) -> None:
    """A walk's finding: a `noughts watch` left running held the guest session, so every
    other read was a new session and refused (`too_many`) after the burst."""
    settings = ui_server.game_server.settings
    settings.new_sessions_burst_per_ip, settings.new_sessions_per_ip_per_minute = 3, 0.01
    watcher = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "watch", "--server", ui_server.url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert watcher.stdout is not None
    try:
        await asyncio.wait_for(watcher.stdout.readline(), 120)  # watching, as the guest
        for _ in range(5):
            code, out, err = await run_noughts("games", "--server", ui_server.url)
            assert (code, err) == (0, ""), err
    finally:
        watcher.kill()
        await watcher.wait()


async def test_health_checks_the_same_server_again(ui_server: UIServer) -> None:
    for _ in range(3):
        code, out, err = await run_noughts("health", "--server", ui_server.url)
        assert (code, err) == (0, ""), err
        assert out.startswith(f"healthy: {ui_server.url} (noughts/")


async def _watch_the_lobby(url: str) -> None:
    watcher = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", "watch", "--server", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert watcher.stdout is not None
    try:
        line = await asyncio.wait_for(watcher.stdout.readline(), 120)
        assert line.decode().startswith(f"Live games on {url}"), line
        watcher.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(watcher.communicate(), 120)
        assert (watcher.returncode, err) == (130, b""), err.decode()
    finally:
        if watcher.returncode is None:
            watcher.kill()
            await watcher.wait()


async def test_a_second_watcher_watches_too(ui_server: UIServer) -> None:
    await _watch_the_lobby(ui_server.url)
    await asyncio.gather(_watch_the_lobby(ui_server.url), _watch_the_lobby(ui_server.url))


async def test_a_bot_run_again_under_its_name_plays_as_itself(ui_server: UIServer) -> None:
    store = SessionStore.default()  # the test's own file (conftest), as the child's
    # The library's bot plays twice too: each `play` connects again, as the same player.
    opponent = Bot(ui_server.url, lambda turn: turn.state.legal_actions()[0], name="opp",
                   sessions=store)  # fmt: skip
    sessions = []
    for _ in range(2):
        bot = run_noughts(
            "bot", "--server", ui_server.url, "--name", "robo", "--engine", "random",
            "--seek", "tictactoe", "--games", "1",
        )  # fmt: skip
        (code, out, err), (result,) = await asyncio.gather(
            bot, opponent.play(games=1, accept="seeks")
        )
        assert code == 0, err
        assert out.splitlines()[-1].startswith("robo: "), out
        assert result.opponent == "robo"
        sessions.append(store.load(ui_server.url, "robo"))
    assert sessions[0] is not None and sessions[0] == sessions[1]  # taken back, not new


async def test_a_bot_run_again_finishes_the_game_its_last_run_left(ui_server: UIServer) -> None:
    """A bot killed mid-game and run again takes its session back, so the server counts its
    seat as held again: it must finish that game (as lichess-bot plays its ongoing games when
    it starts), not leave its opponent waiting while it looks for new ones."""
    command = ("bot", "--server", ui_server.url, "--name", "robo", "--engine", "random")
    ada = await ui_server.connect("ada")
    first = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client", *command,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert first.stderr is not None
    try:
        async with asyncio.timeout(120):  # robo online (its line on stderr comes before)
            while "robo" not in {p.name for p in ui_server.game_server.players.values()}:
                await asyncio.sleep(0.02)
        await ada.request(Seek, game="tictactoe", to="robo", color="x")
        start = await next_event(ada, Snapshot)
        first.kill()  # the game started, ada to move: robo's run ends without a word
        await first.wait()
        await ada.request(Move, game_id=start.game_id, action=4, ply=0)

        async def ada_resigns_after_robos_reply() -> None:
            await next_event_where(ada, Moved, lambda moved: moved.seat == 1, timeout=120)
            token = ada.token_for(start.game_id)
            await ada.request(Resign, game_id=start.game_id, token=token)

        (code, out, err), _ = await asyncio.gather(
            run_noughts(*command, "--games", "1"), ada_resigns_after_robos_reply()
        )
        assert code == 0, err
        assert out.splitlines() == [
            f"game 1/1 {start.game_id}: win against ada (0-1, resign, 2 plies)",
            "robo: 1 won, 0 drawn, 0 lost",
        ]
    finally:
        await ada.close()
        if first.returncode is None:
            first.kill()
            await first.wait()


async def test_watching_a_game_that_is_over_points_to_its_replay(ui_server: UIServer) -> None:
    """It said only "no live game 'ID'" of a game that exists and has ended."""
    record = await play_humans(ui_server, "tictactoe", [4, 0, 8], resign=True)
    game_id = record["id"]
    code, out, err = await run_noughts("watch", game_id, "--server", ui_server.url)
    assert (code, out) == (1, "")
    over = f"game {game_id} is over, 1-0 (resign)"  # and where (it left out --server)
    assert err == f"noughts watch: {over}: noughts replay {game_id} --server {ui_server.url}\n"
    code, out, err = await run_noughts("watch", "nosuchgame", "--server", ui_server.url)
    assert (code, err) == (1, "noughts watch: no live game 'nosuchgame'\n")


def test_a_bot_object_plays_again_under_another_event_loop(tmp_path: Path) -> None:
    """One Bot, two asyncio.run (a script that plays, then plays again): its event queues
    are its run's, not the first loop's ("Queue ... is bound to a different event loop")."""
    from client.embedded import EmbeddedServer

    bot = Bot("ws://unused", lambda turn: turn.state.legal_actions()[0], reconnect=False)

    async def run_once(db: Path) -> None:
        async with EmbeddedServer(db, workers=0) as url:
            bot.url = url
            playing = asyncio.create_task(bot.play(accept="challenges"))
            await asyncio.sleep(1.0)  # connected, subscribed, waiting for a challenge
            assert not playing.done() or playing.exception() is None, playing.exception()
            playing.cancel()

    for index in range(2):  # (each server a database of its own: the name is its session's)
        asyncio.run(run_once(tmp_path / f"games{index}.db"))


async def test_make_play_after_the_sessions_file_was_lost_plays_under_a_suffixed_name(
    tmp_path: Path,
) -> None:
    """`make play` (an embedded server on the user's database) with the sessions file gone
    but the database kept was refused: the user's name belonged to the earlier session,
    whose token was in the lost file ("belongs to another player", exit 1), so the
    documented command could not play any more. Now it plays as the name with a suffix,
    says so in one line, and the next runs play as that name again."""
    db = str(tmp_path / "games.db")
    play = ("play", "--plain", "--db", db, "--ai", "random", "--name", "ada")
    code, out, err = await run_noughts(*play, stdin=b"q\n")
    assert code == 0 and "X = ada," in out, err
    (tmp_path / "own-sessions.json").unlink()  # (conftest: the test's NOUGHTS_SESSIONS)
    code, out, err = await run_noughts(*play, stdin=b"q\n")
    assert code == 0 and "X = ada-2," in out, err
    said = [line for line in err.splitlines() if "ada-2" in line]
    assert said == [
        "noughts: the name 'ada' belongs to an earlier session on this database whose token "
        f"is not in {tmp_path / 'own-sessions.json'}: playing as 'ada-2', as the next runs will"
    ]
    code, out, err = await run_noughts(*play, stdin=b"q\n")
    assert code == 0 and "X = ada-2," in out and "unfinished game" in out, err
    assert "earlier session" not in err


async def test_a_server_still_refuses_a_name_whose_session_was_lost(ui_server: UIServer) -> None:
    """On a server named by --server the name stays its first session's: a run that lost
    that session is refused, not given a look-alike name (the embedded server's rule)."""
    play = ("play", "--plain", "--server", ui_server.url, "--ai", "random", "--name", "ada")
    code, out, err = await run_noughts(*play, stdin=b"q\n")
    assert code == 0 and "X = ada," in out, err
    SessionStore.default().forget(ui_server.url, "ada")
    code, out, err = await run_noughts(*play, stdin=b"q\n")
    assert code == 1 and "ada-2" not in out + err
    assert "the name 'ada', or one that looks like it, belongs to another player" in err

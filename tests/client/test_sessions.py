"""SessionStore: session tokens kept between runs in a small private JSON file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from client.sessions import (
    SESSIONS_ENV,
    SessionInUse,
    SessionStore,
    default_sessions_path,
    server_key,
)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_sessions_are_kept_per_server_and_name_in_a_file_only_its_owner_reads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "data" / "sessions.json"
    store = SessionStore(path)
    assert store.load("ws://a:1", "ada") is None and not path.exists()
    store.save("ws://a:1", "ada", "secret-a")
    store.save("ws://a:1", "bob", "secret-b")
    store.save("local:/x/noughts.db", "ada", "secret-c")
    assert mode_of(path) == 0o600
    again = SessionStore(path)  # another run
    assert again.load("ws://a:1", "ada") == "secret-a"
    assert again.load("ws://a:1", "bob") == "secret-b"
    assert again.load("local:/x/noughts.db", "ada") == "secret-c"
    assert again.load("ws://b:1", "ada") is None
    again.save("ws://a:1", "ada", "secret-a2")  # a new session replaces the old one
    again.forget("ws://a:1", "bob")
    assert SessionStore(path).load("ws://a:1", "ada") == "secret-a2"
    assert SessionStore(path).load("ws://a:1", "bob") is None
    assert mode_of(path) == 0o600
    assert json.loads(path.read_text())["version"] == 1
    assert [p.name for p in path.parent.iterdir()] == ["sessions.json"]  # no temporary left


def test_a_file_made_readable_by_others_is_replaced_by_a_private_one(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text('{"version": 1, "sessions": {"ws://a:1": {"ada": "s"}}}')
    path.chmod(0o644)
    store = SessionStore(path)
    assert store.load("ws://a:1", "ada") == "s"
    store.save("ws://a:1", "bob", "t")
    assert mode_of(path) == 0o600


@pytest.mark.parametrize(
    "text", ["", "not json", "[1, 2]", '{"sessions": 7}', '{"sessions": {"ws://a:1": [1]}}']
)
def test_a_damaged_file_is_an_empty_store_and_is_rewritten(tmp_path: Path, text: str) -> None:
    path = tmp_path / "sessions.json"
    path.write_text(text)
    store = SessionStore(path)
    assert store.load("ws://a:1", "ada") is None
    store.save("ws://a:1", "ada", "s")
    assert SessionStore(path).load("ws://a:1", "ada") == "s"


def test_the_environment_puts_the_file_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SESSIONS_ENV, str(tmp_path / "mine.json"))
    assert default_sessions_path() == tmp_path / "mine.json"
    assert SessionStore.default().path == tmp_path / "mine.json"
    monkeypatch.delenv(SESSIONS_ENV)
    default = default_sessions_path()
    assert default.name == "sessions.json" and "noughts" in default.parts


def test_a_file_that_cannot_be_written_raises_oserror(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    store = SessionStore(blocked / "sessions.json")  # its directory is a file
    with pytest.raises(OSError):
        store.save("ws://a:1", "ada", "s")


def test_one_server_typed_in_several_ways_is_one_key(tmp_path: Path) -> None:
    """Sessions were kept under the URL as typed: `ws://localhost:8765` and
    `ws://127.0.0.1:8765` were two players, and the second was refused the first's name."""
    store = SessionStore(tmp_path / "sessions.json")
    store.save("ws://127.0.0.1:8765", "ada", "secret")
    for typed in ["ws://localhost:8765", "ws://LOCALHOST:8765/", "ws://[::1]:8765"]:
        assert store.load(typed, "ada") == "secret", typed
    store.save("ws://example.com", "bob", "other")
    assert store.load("ws://Example.COM:80/", "bob") == "other"
    assert store.load("wss://example.com", "bob") is None  # another scheme, another port
    assert store.load("ws://example.com:8080", "bob") is None
    assert store.load("ws://localhost:8766", "ada") is None
    assert server_key("local:/x/noughts.db") == "local:/x/noughts.db"
    assert server_key("ws://[2001:db8::1]:9") == "ws://[2001:db8::1]:9"


def test_a_session_kept_under_the_url_as_typed_is_found_and_moved(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    earlier = {"version": 1, "sessions": {"ws://127.0.0.1:8765/": {"ada": "secret"}}}
    path.write_text(json.dumps(earlier))
    store = SessionStore(path)
    assert store.load("ws://127.0.0.1:8765/", "ada") == "secret"  # as an earlier run typed it
    assert store.load("ws://localhost:8765", "ada") is None  # (only that spelling)
    store.save("ws://127.0.0.1:8765/", "ada", "secret")
    assert json.loads(path.read_text())["sessions"] == {"ws://localhost:8765": {"ada": "secret"}}
    assert store.load("ws://localhost:8765", "ada") == "secret"
    store.forget("ws://127.0.0.1:8765", "ada")
    assert json.loads(path.read_text())["sessions"] == {}


def test_two_spellings_of_one_server_are_one_claim(tmp_path: Path) -> None:
    SessionStore(tmp_path / "sessions.json").claim("ws://127.0.0.1:8765", "ada")
    with pytest.raises(SessionInUse):
        SessionStore(tmp_path / "sessions.json").claim("ws://localhost:8765/", "ada")


async def test_the_data_directory_and_an_embedded_servers_files_are_the_users_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """noughts play made the data directory itself before starting its server (0755 under
    umask 022, where sessions.json and the database live) and its server's log 0644, and
    the server made the database and its lock 0644: on a shared machine any user could
    read them. Now the directory is 0700 and every file in it 0600."""
    import os

    from client.embedded import EmbeddedServer, log_beside
    from protocol.paths import default_db_path

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("NOUGHTS_DB", raising=False)
    db = default_db_path()
    old = os.umask(0o022)  # the common umask (the server inherits it)
    try:
        async with EmbeddedServer(db, workers=0, log_path=log_beside(db)):
            made = {f.name: mode_of(f) for f in db.parent.iterdir()}
    finally:
        os.umask(old)
    assert mode_of(db.parent) == 0o700
    assert made == dict.fromkeys(made, 0o600)
    assert {"noughts.db", "noughts.db.lock", "noughts.db.server.log"} <= made.keys()

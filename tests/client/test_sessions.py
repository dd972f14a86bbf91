"""SessionStore: session tokens kept between runs in a small private JSON file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from client.sessions import SESSIONS_ENV, SessionStore, default_sessions_path


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

"""One default database path for the server and the client (issue 12: it was written twice)."""

from __future__ import annotations

from pathlib import Path

from protocol.paths import DB_ENV, default_db_path


def test_the_environment_names_the_database_else_the_user_data_directory() -> None:
    assert default_db_path({DB_ENV: "/tmp/x/games.db"}) == Path("/tmp/x/games.db")
    default = default_db_path({})
    assert default.name == "noughts.db" and "noughts" in default.parent.parts


def test_server_and_client_use_the_same_one() -> None:
    from client.commands import common
    from server import store

    assert store.default_db_path is default_db_path is common.default_db_path

"""Where the SQLite database lives by default: one answer for the server and the client (the
client starts an embedded server on that file, keys its saved sessions by it and finds a
local server already running on it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DB_ENV = "NOUGHTS_DB"


def default_db_path(environ: Mapping[str, str] | None = None) -> Path:
    """$NOUGHTS_DB if set, else noughts.db in the user's data directory (platformdirs)."""
    env = (os.environ if environ is None else environ).get(DB_ENV)
    if env:
        return Path(env)
    return data_dir() / "noughts.db"


def data_dir() -> Path:
    """The user's data directory for noughts (platformdirs), made on first use by whoever
    writes there first; any other directory a path names must exist already."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("noughts", appauthor=False))


class NoDirectory(FileNotFoundError):
    """A database path names a directory that does not exist, other than the data
    directory: a mistyped ``--db`` is a one-line error, not a new tree of directories."""

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        parent = Path(db_path).parent
        super().__init__(f"cannot open database {os.fspath(db_path)}: no directory {parent}")


def is_data_dir(directory: str | os.PathLike[str]) -> bool:
    """``directory`` is the user's data directory (``data_dir``), the one directory a
    database's writer makes when it is missing (the server, and the client for the log of
    the server it embeds; this module does no I/O)."""
    return Path(directory).absolute() == data_dir().absolute()


def no_database(db_path: str | os.PathLike[str]) -> str | None:
    """Why a SQLite path holds no database (no file, or an empty one: SQLite takes either
    for a new database, which opening it would make), or None: for the commands that only
    read or upgrade one (``noughts games``, ``noughts migrate``). A stat, no change."""
    path = Path(db_path)
    if path.is_file() and path.stat().st_size > 0:
        return None
    return f"no database at {os.fspath(db_path)}" + (
        " (the file is empty)" if path.is_file() else ""
    )

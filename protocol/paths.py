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
    from platformdirs import user_data_dir

    return Path(user_data_dir("noughts", appauthor=False)) / "noughts.db"

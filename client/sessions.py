"""Session tokens kept between runs, so a player who closes the terminal gets its games back.

The server knows a player by the secret ``session`` of its ``welcome`` (PROTOCOL.md,
Sessions). ``SessionStore`` keeps one per server and player name in a small JSON file,
``sessions.json`` in the user's data directory (``$NOUGHTS_SESSIONS`` puts it elsewhere),
readable by its owner only (mode 0600): a session is as good as a password on that server.
A missing or unreadable file is an empty store; it is rewritten whole, atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

SESSIONS_ENV = "NOUGHTS_SESSIONS"
FORMAT_VERSION = 1


def default_sessions_path() -> Path:
    """``$NOUGHTS_SESSIONS``, or sessions.json in the user's data directory."""
    env = os.environ.get(SESSIONS_ENV)
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("noughts", appauthor=False)) / "sessions.json"


class SessionStore:
    """Session tokens by server (its URL, or a local database for an embedded server) and
    player name: another ``--name`` is another player on the same server."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def default(cls) -> SessionStore:
        return cls(default_sessions_path())

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or damaged: start afresh (the server issues a new session)
        sessions = data.get("sessions") if isinstance(data, dict) else None
        if not isinstance(sessions, dict):
            return {}
        return {
            server: {n: t for n, t in names.items() if isinstance(t, str)}
            for server, names in sessions.items()
            if isinstance(names, dict)
        }

    def load(self, server: str, name: str) -> str | None:
        """The session saved for ``name`` on ``server``, if any."""
        return self._read().get(server, {}).get(name)

    def save(self, server: str, name: str, session: str) -> None:
        """Remember ``session``; raises OSError if the file cannot be written."""
        sessions = self._read()
        if sessions.get(server, {}).get(name) == session:
            return
        sessions.setdefault(server, {})[name] = session
        self._write(sessions)

    def forget(self, server: str, name: str) -> None:
        sessions = self._read()
        if sessions.get(server, {}).pop(name, None) is not None:
            if not sessions[server]:
                del sessions[server]
            self._write(sessions)

    def _write(self, sessions: dict[str, dict[str, str]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        text = json.dumps({"version": FORMAT_VERSION, "sessions": sessions}, indent=1)
        # mkstemp creates the file with mode 0600; os.replace swaps it in whole.
        fd, temporary = tempfile.mkstemp(prefix=".sessions-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text + "\n")
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

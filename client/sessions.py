"""Session tokens kept between runs, so a player who closes the terminal gets its games back.

The server knows a player by the secret ``session`` of its ``welcome`` (PROTOCOL.md,
Sessions). ``SessionStore`` keeps one per server and player name in a small JSON file,
``sessions.json`` in the user's data directory (``$NOUGHTS_SESSIONS`` puts it elsewhere),
readable by its owner only (mode 0600): a session is as good as a password on that server.
A missing or unreadable file is an empty store; it is rewritten whole, atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from client.connection import ServerConnection

SESSIONS_ENV = "NOUGHTS_SESSIONS"
FORMAT_VERSION = 1
GUEST = "anonymous"  # the name of a guest's hello: the server gives the session a guest name
GUEST_SLOT = "(guest)"  # where the guest session of the commands that only read is kept


def default_sessions_path() -> Path:
    """``$NOUGHTS_SESSIONS``, or sessions.json in the user's data directory."""
    env = os.environ.get(SESSIONS_ENV)
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("noughts", appauthor=False)) / "sessions.json"


# The loopback names of this machine: a server on one port of it, however it was typed.
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def server_key(server: str) -> str:
    """The key a server's sessions are kept under: its URL in one spelling, so that
    ``ws://localhost:8765``, ``ws://127.0.0.1:8765/`` and ``WS://LOCALHOST:8765`` are one
    server (and one player under one name) rather than three. The scheme and host in lower
    case, the loopback names as one, the default port written out, no trailing slash.
    Any other key (an embedded server's database, ``local:PATH``) is its own."""
    from urllib.parse import urlsplit

    if not server.lower().startswith(("ws://", "wss://")):
        return server
    parts = urlsplit(server)
    try:
        port = parts.port or (443 if parts.scheme == "wss" else 80)
    except ValueError:
        return server
    host = parts.hostname or ""
    host = "localhost" if host in LOOPBACK else f"[{host}]" if ":" in host else host
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{host}:{port}{parts.path.rstrip('/')}{query}"


class SessionInUse(Exception):
    """Another process of this user plays under the same server and name."""


def embedded_session_key(db: Path) -> str:
    """Where the session of an embedded server is kept: its database, not its URL (an
    embedded server's port changes every run; its database does not)."""
    return f"local:{db.expanduser().resolve()}"


class SessionStore:
    """Session tokens by server (its URL, or a local database for an embedded server) and
    player name: another ``--name`` is another player on the same server."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._claims: dict[tuple[str, str], int] = {}  # lock descriptors this process holds

    def claim(self, server: str, name: str) -> None:
        """Hold ``name``'s session on ``server`` for this process (an ``fcntl.flock`` the
        kernel releases when the process ends): two clients of one person never share a
        session by accident. SessionInUse if another process holds it; OSError if the lock
        file cannot be made."""
        import fcntl
        import hashlib

        server = server_key(server)
        if (server, name) in self._claims:
            return
        digest = hashlib.sha256(f"{server}\0{name}".encode()).hexdigest()[:32]
        locks = self.path.parent / f"{self.path.name}.locks"
        locks.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(locks / digest, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionInUse(
                f"another noughts is playing as {name!r} on this server: give this one "
                "another --name"
            ) from None
        self._claims[(server, name)] = fd

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
        """The session saved for ``name`` on ``server``, if any (also one an earlier version
        kept under the URL as typed)."""
        sessions = self._read()
        saved = sessions.get(server_key(server), {}).get(name)
        return saved if saved is not None else sessions.get(server, {}).get(name)

    def save(self, server: str, name: str, session: str) -> None:
        """Remember ``session``; raises OSError if the file cannot be written."""
        sessions = self._read()
        key = server_key(server)
        typed = _pop(sessions, server, name) if server != key else None
        if sessions.get(key, {}).get(name) == session and typed is None:
            return
        sessions.setdefault(key, {})[name] = session
        self._write(sessions)

    def forget(self, server: str, name: str) -> None:
        sessions = self._read()
        found = [_pop(sessions, key, name) for key in {server_key(server), server}]
        if any(token is not None for token in found):
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


def _pop(sessions: dict[str, dict[str, str]], server: str, name: str) -> str | None:
    """Take ``name``'s session on ``server`` out of ``sessions`` (and the server, if empty)."""
    token = sessions.get(server, {}).pop(name, None)
    if server in sessions and not sessions[server]:
        del sessions[server]
    return token


async def connect_with_session(
    sessions: SessionStore, key: str, url: str, *, name: str, **kwargs: Any
) -> ServerConnection:
    """``ServerConnection.connect`` as the player saved under ``key`` and ``name`` (a session
    the server no longer knows starts afresh: the session core's rule); the session is saved,
    under ``name`` even when the run took another (``renamed_notice``, said on stderr). A file
    that cannot be written is one line on stderr: the next run will be a new player.
    SessionInUse if another process plays under that key and name (``claim``)."""
    import sys

    from client.connection import ServerConnection

    sessions.claim(key, name)
    saved = sessions.load(key, name)
    connection = await ServerConnection.connect(url, name=name, session=saved, **kwargs)
    assert connection.session is not None
    if connection.core.renamed_from is not None:
        print(f"noughts: {renamed_notice(connection, sessions)}", file=sys.stderr)
    try:
        sessions.save(key, name, connection.session)
    except OSError as exc:
        print(
            f"noughts: could not save the session in {sessions.path} ({exc.strerror or exc}): "
            "the next run will not find this run's games",
            file=sys.stderr,
        )
    return connection


def renamed_notice(connection: ServerConnection, sessions: SessionStore) -> str:
    """One line saying that this run plays under another name than the one asked for
    (``ClientSession.rename_if_taken``), and why."""
    core = connection.core
    now = core.welcome.name if core.welcome is not None and core.welcome.name else core.name
    return (
        f"the name {core.renamed_from!r} belongs to an earlier session on this database whose "
        f"token is not in {sessions.path}: playing as {now!r}, as the next runs will"
    )


async def connect_as_guest(
    sessions: SessionStore, key: str, url: str, **kwargs: Any
) -> ServerConnection:
    """``ServerConnection.connect`` as this user's guest on the server under ``key``, for
    the commands that only read or watch (games, replay, export, watch, health): one guest
    session a server, kept and taken again by every run. A new session each run would be
    stored by the server and counted against the address's allowance (PROTOCOL.md, Guests:
    10 a minute), so a script reading games in a loop was refused after 30. Runs at once
    share it (a guest holds no seat, and a session may have many connections): a ``watch``
    left running made every other read a new session, refused after 30 too. If the store
    cannot be used, the run is a guest of its own and keeps nothing."""
    from client.connection import ServerConnection

    try:
        saved = sessions.load(key, GUEST_SLOT)
    except OSError:
        return await ServerConnection.connect(url, name=GUEST, **kwargs)
    connection = await ServerConnection.connect(url, name=GUEST, session=saved, **kwargs)
    if connection.session is not None:
        with contextlib.suppress(OSError):
            sessions.save(key, GUEST_SLOT, connection.session)
    return connection

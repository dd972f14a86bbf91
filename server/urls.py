"""The URLs of the services a server uses (its database, the cluster's Redis), as logs and
messages show them."""

from __future__ import annotations

import re
from urllib.parse import urlsplit


def redacted_url(url: str) -> str:
    """``url`` (a database's or the bus's) as messages and logs show it: a password in it,
    before the host (``redis://:PASSWORD@host``, ``postgresql://user:PASSWORD@host``) or as
    a ``password=`` parameter, becomes ``***``. A log or an error is read by more people
    than the server's configuration."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unreadable URL)"
    user, at, host = parts.netloc.rpartition("@")
    if at and ":" in user:
        url = url.replace(parts.netloc, f"{user.partition(':')[0]}:***@{host}", 1)
    if parts.query:
        query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
        url = url.replace(f"?{parts.query}", f"?{query}", 1)
    return url


def without_secret_path(url: str) -> str:
    """A game server's ``url`` as messages and logs show it: its path, the secret of a
    ``--secret-path`` server, becomes ``***`` (the lock file, its owner's alone, keeps it)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unreadable URL)"
    if parts.path in ("", "/") and not parts.query:
        return url
    return f"{parts.scheme}://{parts.netloc}/***"

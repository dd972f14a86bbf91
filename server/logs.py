"""Logging for ``noughts serve``: its set-up (text for people, or one JSON object a line),
and lines an attacker cannot turn into a flood.

A storm (thousands of refused connections, a file-descriptor shortage) would otherwise
write one line per event: 130,706 lines, 59 MB in 30 s, measured. ``RateLimitedLog``
lets through a burst of lines of each kind, then at most one every ``period_s``, and
says how many it held back, so the log keeps its meaning and a bounded size.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from server.limits import TokenBucket


class JSONFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, and the
    traceback if any; what log collectors (Loki, Elasticsearch, CloudWatch) ingest as is."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        node = getattr(record, "node", None)
        if node is not None:
            entry["node"] = node
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
NODE_TEXT_FORMAT = "%(asctime)s %(levelname)s %(node)s %(name)s: %(message)s"


def configure(level: str, log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    handler.addFilter(websockets_without_secrets)
    logging.basicConfig(level=level, handlers=[handler], force=True)


def websockets_without_secrets(record: logging.LogRecord) -> bool:
    """websockets, at DEBUG, logs each frame with its first 16 and last 8 bytes: those of a
    ``resign`` or an ``abort`` end with the seat's token, and a hello's may hold a
    session's. A data frame's line keeps its type and size, not its bytes. So it logs each
    handshake's request line, whose path is a ``--secret-path`` server's secret: a path
    other than ``/`` is shown as ``/***``."""
    if not record.name.startswith("websockets"):
        return True
    if record.msg == "< %s %s %s" and isinstance(record.args, tuple) and len(record.args) == 3:
        method, path, version = record.args
        if path != "/":
            record.args = (method, "/***", version)
    elif record.msg in ("< %s", "> %s"):
        from websockets.frames import DATA_OPCODES, Frame

        frame = record.args[0] if isinstance(record.args, tuple) and record.args else None
        if isinstance(frame, Frame) and frame.opcode in DATA_OPCODES:
            record.args = (f"{frame.opcode.name} [{len(frame.data)} bytes]",)
    return True


def name_node(node: str) -> None:
    """Each line names this cluster node (``node`` in JSON, after the level in text): the
    nodes of ``--processes`` write one log."""

    def named(record: logging.LogRecord) -> bool:
        record.node = node
        return True

    for handler in logging.getLogger().handlers:
        handler.addFilter(named)
        if not isinstance(handler.formatter, JSONFormatter):
            handler.setFormatter(logging.Formatter(NODE_TEXT_FORMAT))


# Kinds of line are few and fixed by the code (never an address or a name): the table of
# buckets stays small. Past this many kinds, new ones share one bucket.
MAX_KINDS = 64


@dataclass(slots=True)
class _Kind:
    bucket: TokenBucket
    held_back: int = 0


@dataclass(slots=True)
class RateLimitedLog:
    """A logger's lines, each ``kind`` through its own token bucket (``burst`` lines, then
    one per ``period_s``); the next line written says how many were held back."""

    logger: logging.Logger
    period_s: float = 10.0
    burst: int = 5
    clock: Callable[[], float] = time.monotonic
    _kinds: dict[str, _Kind] = field(default_factory=dict)

    def log(self, level: int, kind: str, message: str, *args: object) -> bool:
        """Write the line unless its kind is over its rate; True if it was written."""
        if not self.logger.isEnabledFor(level):
            return False
        entry = self._kinds.get(kind)
        if entry is None:
            if len(self._kinds) >= MAX_KINDS - 1:  # the last place is the shared one
                kind = "(other)"
                entry = self._kinds.get(kind)
            if entry is None:
                bucket = TokenBucket(1.0 / self.period_s, self.burst, float(self.burst))
                bucket.updated = self.clock()
                entry = self._kinds[kind] = _Kind(bucket)
        if not entry.bucket.take(self.clock()):
            entry.held_back += 1
            return False
        if entry.held_back:
            message += " (and %d more like it, not logged)"
            args = (*args, entry.held_back)
            entry.held_back = 0
        self.logger.log(level, message, *args)
        return True

    def warning(self, kind: str, message: str, *args: object) -> bool:
        return self.log(logging.WARNING, kind, message, *args)

    def error(self, kind: str, message: str, *args: object) -> bool:
        return self.log(logging.ERROR, kind, message, *args)

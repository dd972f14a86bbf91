"""The terminal a command runs in, judged in one place: its standard streams.

``tolerant_streams`` (every command, from ``client.cli.main``) makes the standard streams
safe to use whatever the terminal: a closed one reads as empty or writes to nowhere, and on
an output whose encoding lacks a character (a player's name, "é", in an ASCII locale) the
character is written as an escape (``\\xe9``) rather than ending the command in a traceback.
The line client's own words are ASCII.
"""

from __future__ import annotations

import codecs
import io
import os
import sys


def tolerant_streams() -> None:
    """Make the standard streams safe for any command: a closed one is the null device
    (stdin at its end, output discarded), an output that cannot encode a character writes
    its escape (as Python's stderr does), an input that cannot decode a byte reads U+FFFD."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:  # closed by the caller (`<&-`, `>&-`, `2>&-`)
            null = open(os.devnull, mode, encoding="utf-8")
            setattr(sys, name, null)
            if getattr(sys, f"__{name}__") is None:  # (Textual draws on sys.__stderr__)
                setattr(sys, f"__{name}__", null)
    for stream, errors in ((sys.stdout, "backslashreplace"), (sys.stdin, "replace")):
        if isinstance(stream, io.TextIOWrapper) and not _encodes_everything(stream.encoding):
            stream.reconfigure(errors=errors)


def _encodes_everything(encoding: str | None) -> bool:
    """Whether ``encoding`` holds every character (a UTF, or GB 18030)."""
    try:
        name = codecs.lookup(encoding or "ascii").name
    except LookupError:
        return False
    return name.startswith(("utf-", "utf_")) or name == "gb18030"

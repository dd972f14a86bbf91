"""The terminal a command runs in, judged in one place: its standard streams and what it
can show.

``tolerant_streams`` (every command, from ``client.cli.main``) makes the standard streams
safe to use whatever the terminal: a closed one reads as empty or writes to nowhere, and on
an output whose encoding lacks a character (a player's name, "é", in an ASCII locale) the
character is written as an escape (``\\xe9``) rather than ending the command in a traceback.
The line client's own words are ASCII.

``unwritable`` tells an output that failed (a full disk, ``>/dev/full``, an I/O error) from
other errors, and ``discard_output`` lets the command end without a second failure as the
interpreter flushes it: every command then says so in one line (``client.cli.main``).

``interface_problem`` says why the terminal interface (Textual) cannot be drawn here. It
draws box-drawing characters, dots, arrows and ellipses, with no ASCII mode (nor have
Textual's own widgets): on an encoding without them each was written as an escape such as
``\\u2500``, and on TERM=dumb as escape sequences. ``noughts play`` runs the line client
there. ``ui_output`` draws the interface on the terminal when only stderr, where Textual
writes, was redirected.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import os
import sys
from collections.abc import Iterator, Mapping

# Characters the terminal interface draws, ours (client/ui) and Textual's widgets' (the
# footer's Enter, the move box's frame): an encoding that holds these holds the rest.
INTERFACE_CHARACTERS = "┌─┼│·…▶━┃╳⏎▔▁▊"
# Terminals that cannot move their cursor (as Rich has them): nothing full-screen draws there.
DUMB_TERMINALS = ("dumb", "unknown")


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


# What writing an output can fail with besides a closed pipe (EPIPE, said as BrokenPipeError):
# a full disk or /dev/full, a file too large, a quota, an I/O error.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO})


def unwritable(exc: BaseException) -> bool:
    """Whether ``exc`` is an output that cannot be written (not a network's error: the
    commands say those themselves)."""
    return isinstance(exc, OSError) and exc.errno in OUTPUT_ERRNOS


def discard_output() -> None:
    """Send what stdout still holds, and anything written to it later, to the null device:
    the interpreter's own flush at exit then fails no more (a second traceback)."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def _encodes_everything(encoding: str | None) -> bool:
    """Whether ``encoding`` holds every character (a UTF, or GB 18030)."""
    try:
        name = codecs.lookup(encoding or "ascii").name
    except LookupError:
        return False
    return name.startswith(("utf-", "utf_")) or name == "gb18030"


def moves_its_cursor(stream: object) -> bool:
    """Whether ``stream`` is a terminal that follows escape sequences (a status line
    rewritten in place): a terminal, and not a dumb one."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM", "") not in DUMB_TERMINALS


def interface_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the terminal interface cannot be drawn on this terminal, or None when it can."""
    environ = os.environ if environ is None else environ
    term = environ.get("TERM", "")
    if term in DUMB_TERMINALS:
        return f"TERM={term} cannot move the cursor"
    stream = sys.__stderr__ or sys.stderr  # where Textual draws
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        INTERFACE_CHARACTERS.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return (
            f"the terminal's encoding, {encoding}, has no box-drawing characters "
            "(a UTF-8 locale has them: LANG=C.UTF-8)"
        )
    return None


@contextlib.contextmanager
def ui_output() -> Iterator[None]:
    """While the interface runs, draw it on the terminal stdout is when stderr, where
    Textual writes, is not one (``noughts play 2>log`` drew the whole interface into the
    log and left the terminal blank); stderr is itself again afterwards."""
    if os.isatty(2) or not os.isatty(1):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(1, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)

"""Player names (sans-I/O): normalisation, the character rules, reserved words and the
key that makes look-alikes collide.

A name arrives as any string of up to 32 characters from an untrusted client. ``check``
returns the name as the server shows it, or raises ``NameRefused`` with a one-line reason:

- it is normalised to NFKC (Unicode UAX #15), so that fullwidth, mathematical and other
  compatibility forms become the plain letters they display as, and trimmed of spaces;
- it holds 2 to 20 characters: letters, digits (Nd) and combining marks after a letter,
  with single separators (space, ``-``, ``_``, ``.``) between them; it starts with a letter
  and does not end with a separator (Lichess's username rules, widened from ASCII to
  Unicode letters). So no control (NUL, CR/LF, ESC of ANSI/OSC sequences), format
  (zero-width, bidi overrides such as RLO), private-use or unassigned character, no symbol;
- no word of it is a reserved one: the AI's labels (``mcts 200ms``: every algorithm
  name), ``ai``, ``admin``, ``server``..., compared by their keys, so a look-alike of a
  reserved word is reserved too.

``name_keys`` is what two names must not share: the name case-folded and mapped to its
Unicode TR39 confusable skeleton (UTS #39, section 4: "skeleton(X)"), separators removed.
"carol", "Carol", "cаrol" (Cyrillic a) and "car.ol" share a key: the server binds the
keys to one session, so no one can pose as another player.
"""

from __future__ import annotations

import re
import secrets
import unicodedata

from server.confusables import CONFUSABLES

MIN_LENGTH = 2
MAX_LENGTH = 20
SEPARATORS = frozenset(" -_.")
# Display names that mean "no name": the server gives such a player a guest name.
ANONYMOUS = frozenset({"", "anonymous"})
GUEST_PREFIX = "guest-"
# A player's id: "p-" and 12 hex digits. A challenge's ``to`` is read as an id first, so a
# name of that shape could not be challenged by name: no name may have it.
PLAYER_ID = re.compile(r"p-[0-9a-f]{12}")
MAX_MARKS = 2  # combining marks on one letter (more is "Zalgo" text that overflows lines)

# Words no name may contain (as a whole word, compared by key): the labels the server
# gives the AI ("mcts 200ms") and its algorithms, and words that claim authority.
RESERVED_WORDS = frozenset(
    {
        # engine.ALGORITHMS, spelled out: names are checked before any engine is loaded.
        "random",
        "flat",
        "mcts",
        "uct",
        "minimax",
        "alphabeta",
        "perfect",
        "ai",
        "engine",
        "admin",
        "administrator",
        "moderator",
        "mod",
        "staff",
        "official",
        "support",
        "system",
        "server",
        "anonymous",
        "guest",
    }
)
# Whole names no one may take (a word of a longer name is fine: "noughts-bot").
RESERVED_NAMES = frozenset({"noughts"})


class NameRefused(ValueError):
    """A name the server does not accept; the message is the one-line reason."""


def normalize(raw: str) -> str:
    """NFKC, then trimmed of surrounding spaces (UAX #15)."""
    return unicodedata.normalize("NFKC", raw).strip(" ")


def is_anonymous(raw: str) -> bool:
    """The client gave no name of its own (the server assigns a guest name)."""
    return normalize(raw).casefold() in ANONYMOUS


def skeleton(text: str) -> str:
    """The TR39 skeleton: NFD, each character replaced by its prototype, NFD again."""
    decomposed = unicodedata.normalize("NFD", text)
    mapped = "".join(CONFUSABLES.get(c, c) for c in decomposed)
    return unicodedata.normalize("NFD", mapped)


def _key(name: str, *, fold_first: bool) -> str:
    key = "".join(c for c in unicodedata.normalize("NFKC", name) if c not in SEPARATORS)
    for _ in range(4):
        folded = skeleton(key.casefold()) if fold_first else skeleton(key)
        folded = "".join(c for c in folded.casefold() if c not in SEPARATORS)
        if folded == key:
            break
        key = folded
    return key


def name_keys(name: str) -> frozenset[str]:
    """What look-alike names share (two names clash when their key sets meet): the
    case-folded TR39 skeleton without separators, taken twice. Folded before mapping,
    "Ivan" and "ivan" meet; mapped before folding, "Ivan" and "lvan" meet (a capital I
    looks like l, and folds to i). Each is repeated until nothing changes, since
    prototypes are not closed under folding (``0`` maps to ``O``)."""
    return frozenset((_key(name, fold_first=True), _key(name, fold_first=False)))


def _words(name: str) -> list[str]:
    """The name's words: split at separators and between letters and digits."""
    words: list[str] = []
    current = ""
    for char in name.casefold():
        if char in SEPARATORS:
            words.append(current)
            current = ""
            continue
        if current and char.isdigit() != current[-1].isdigit():
            words.append(current)
            current = ""
        current += char
    words.append(current)
    return [w for w in words if w]


_RESERVED_WORDS = {key: word for word in RESERVED_WORDS for key in name_keys(word)}
_RESERVED_NAMES = {key: name for name in RESERVED_NAMES for key in name_keys(name)}


def _reserved(text: str, table: dict[str, str]) -> str | None:
    return next((table[key] for key in name_keys(text) if key in table), None)


def _describe(char: str) -> str:
    """A character named by code point, never echoed raw (it may be an escape)."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


_KINDS = {
    "Cc": "a control character",
    "Cf": "a format character (invisible or direction-changing)",
    "Co": "a private-use character",
    "Cn": "an unassigned character",
    "Cs": "a surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def _check_characters(name: str) -> None:
    previous = ""  # category class of the previous character: L, N, M or S(eparator)
    marks = 0
    for char in name:
        category = unicodedata.category(char)
        if char in SEPARATORS:
            if previous in ("", "S"):
                where = "start with" if not previous else "hold two separators in a row:"
                raise NameRefused(f"a name cannot {where} {char!r}")
            previous = "S"
        elif category[0] == "L" or category == "Nd":
            previous = category[0]
            marks = 0
        elif category in ("Mn", "Mc"):
            if previous not in ("L", "N", "M"):
                raise NameRefused(f"{_describe(char)} must follow a letter")
            marks += 1
            if marks > MAX_MARKS:
                raise NameRefused(f"at most {MAX_MARKS} combining marks on one letter")
            previous = "M"
        else:
            kind = _KINDS.get(category, "not a letter, digit or separator")
            raise NameRefused(
                f"{_describe(char)} is {kind}: a name holds letters, digits and single "
                "spaces, '-', '_' or '.' between them"
            )
    if previous == "S":
        raise NameRefused("a name cannot end with a separator")


def check(raw: str) -> str:
    """The name as the server keeps it, or NameRefused saying why not."""
    name = normalize(raw)
    if len(name) < MIN_LENGTH or len(name) > MAX_LENGTH:
        raise NameRefused(f"a name holds {MIN_LENGTH} to {MAX_LENGTH} characters, not {len(name)}")
    _check_characters(name)
    if unicodedata.category(name[0])[0] != "L":
        raise NameRefused("a name starts with a letter")
    if PLAYER_ID.fullmatch(name.casefold()):
        raise NameRefused("a name may not look like a player id (p- and 12 hex digits)")
    reserved = _reserved(name, _RESERVED_NAMES)
    if reserved is not None:
        raise NameRefused(f"{reserved!r} is a reserved name")
    for word in _words(name):
        reserved = _reserved(word, _RESERVED_WORDS)
        if reserved is not None:
            raise NameRefused(
                f"{reserved!r} is a reserved word (the AI's labels, the service's): "
                "no name may contain it or a look-alike of it"
            )
    return name


def new_player_id() -> str:
    """A new player's id, of the shape ``PLAYER_ID``."""
    return "p-" + secrets.token_hex(6)


def guest_name(suffix: str) -> str:
    """The name the server gives a player who did not choose one: ``guest-`` and a random
    suffix from the caller. Reserved for the server ("guest" is a reserved word)."""
    return GUEST_PREFIX + suffix

"""server/names.py: the name rules, reserved words and look-alike keys (issue 11, finding 6).

Pure functions: property tests over arbitrary text, and one test per hostile name class of
the finding (the server tests in test_identity.py check the same over the wire)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from server import names
from server.confusables import CONFUSABLES

ANY_TEXT = st.text(max_size=40)
# Names a real player types: letters of several scripts, digits, separators.
NAMEISH = st.text(
    alphabet=st.characters(categories=("Lu", "Ll", "Lo", "Nd", "Mn"), include_characters=" -_."),
    min_size=1,
    max_size=24,
)


@given(ANY_TEXT)
def test_check_returns_a_name_or_refuses_with_a_reason(raw: str) -> None:
    try:
        name = names.check(raw)
    except names.NameRefused as exc:
        assert str(exc) and "\n" not in str(exc)
        assert not any(unicodedata.category(c) == "Cc" for c in str(exc))  # never echoed
        return
    assert names.MIN_LENGTH <= len(name) <= names.MAX_LENGTH
    assert unicodedata.is_normalized("NFKC", name)
    assert not any(unicodedata.category(c)[0] in "CZS" and c != " " for c in name)
    assert name == name.strip() and unicodedata.category(name[0])[0] == "L"
    assert names.check(name) == name  # a kept name passes again, unchanged


@given(NAMEISH)
def test_check_is_idempotent_on_names_people_type(raw: str) -> None:
    try:
        name = names.check(raw)
    except names.NameRefused:
        return
    assert names.check(name) == name


def clash(a: str, b: str) -> bool:
    return bool(names.name_keys(a) & names.name_keys(b))


@given(ANY_TEXT)
def test_name_keys_are_idempotent_and_ignore_case(text: str) -> None:
    for key in names.name_keys(text):
        assert key in names.name_keys(key)
        assert not set(key) & names.SEPARATORS
    assert clash(text, text.casefold())
    if text.isascii():
        assert clash(text.upper(), text.lower())


@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=20))
def test_fullwidth_forms_share_the_key_of_ascii(text: str) -> None:
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in text)  # U+FF01..U+FF5E
    assert names.name_keys(fullwidth) == names.name_keys(text)


@given(ANY_TEXT)
def test_skeleton_leaves_prototypes_alone(text: str) -> None:
    once = names.skeleton(text)
    assert names.skeleton(once) == once


def test_every_source_collides_with_its_prototype() -> None:
    for source, prototype in CONFUSABLES.items():
        assert len(source) == 1
        assert clash(source, prototype), source


# --- finding 6: every hostile name class ----------------------------------------------------

HOSTILE = {
    "nul": "ali\x00ce",
    "cr_lf": "alice\r\nbob",
    "ansi_escape": "\x1b[31mred",
    "osc_escape": "\x1b]0;owned\x07bob",
    "rlo_bidi": "bob\u202egnp",
    "zero_width_space": "ca\u200brol",
    "zero_width_joiner": "ca\u200drol",
    "bom": "\ufeffcarol",
    "tab": "ca\trol",
    "line_separator": "ca\u2028rol",
    "private_use": "ca\ue000rol",
    "symbol": "carol\u2605",
    "brackets": "alice [AI]",
    "zalgo": "ca" + "\u0301" * 5 + "rol",
}


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_characters_are_refused(raw: str) -> None:
    with pytest.raises(names.NameRefused):
        names.check(raw)


@pytest.mark.parametrize(
    "raw",
    ["mcts 200ms", "alice [AI]", "alice AI", "alphabeta", "Perfect 50ms", "noughts", "admin",
     "Server", "guest-abcde", "anonymous", "\u0430dmin", "ADM\u0399N",
     "\uff41\uff44\uff4d\uff49\uff4e"],
)  # fmt: skip
def test_reserved_words_and_their_look_alikes_are_refused(raw: str) -> None:
    with pytest.raises(names.NameRefused):
        names.check(raw)


@pytest.mark.parametrize("raw", ["p-1f2e3d4c5b6a", "P-1F2E3D4C5B6A", "p-000000000000"])
def test_a_name_shaped_like_a_player_id_is_refused(raw: str) -> None:
    """A challenge's ``to`` is read as a player id first: such a name could not be
    challenged by name."""
    with pytest.raises(names.NameRefused, match="player id"):
        names.check(raw)
    assert names.PLAYER_ID.fullmatch(names.new_player_id())
    assert names.check("p-1f2e3d4c5b6") == "p-1f2e3d4c5b6"  # 11 digits: no id


def test_every_algorithm_name_is_reserved() -> None:
    assert set(engine.ALGORITHMS) <= names.RESERVED_WORDS
    for algorithm in engine.ALGORITHMS:
        with pytest.raises(names.NameRefused):
            names.check(f"{algorithm} 200ms")


@pytest.mark.parametrize("raw", ["x", "a" * 21, "1abc", "-abc", "abc-", "a--b", "a _b", "   ", ""])
def test_length_and_shape_rules(raw: str) -> None:
    with pytest.raises(names.NameRefused):
        names.check(raw)


@pytest.mark.parametrize(
    ("raw", "kept"),
    [("ada", "ada"), ("  Zoë  ", "Zoë"), ("Jean-Luc", "Jean-Luc"), ("\uff41\uff44\uff41", "ada"),
     ("noughts-bot", "noughts-bot"), ("李小龍", "李小龍"), ("Ωmega", "Ωmega"), ("root", "root")],
)  # fmt: skip
def test_ordinary_names_are_kept(raw: str, kept: str) -> None:
    assert names.check(raw) == kept


@pytest.mark.parametrize(
    "pair",
    [("carol", "Carol"), ("carol", "c\u0430rol"), ("carol", "car.ol"), ("bob", "b0b"),
     ("paypal", "p\u0430yp\u0430l"), ("modern", "rnodern"), ("ada", "\uff41\uff44\uff41"),
     ("alice", "\u0430lice"), ("Ivan", "lvan"), ("Ivan", "ivan"), ("BILL", "bill")],
)  # fmt: skip
def test_look_alikes_clash(pair: tuple[str, str]) -> None:
    assert clash(*pair)


@pytest.mark.parametrize(
    "pair", [("carol", "karol"), ("ada", "adam"), ("bo", "bob"), ("ivan", "lvan")]
)
def test_different_names_do_not_clash(pair: tuple[str, str]) -> None:
    assert not clash(*pair)


def test_anonymous_means_no_name() -> None:
    assert names.is_anonymous("anonymous") and names.is_anonymous("  ")
    assert names.is_anonymous("Anonymous") and not names.is_anonymous("ada")

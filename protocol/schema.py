"""Field validation for messages, derived once from their dataclass annotations.

A message class is a frozen dataclass; each field's annotation (plus optional
``metadata`` bounds: ``min``, ``max``, ``max_len``) becomes a checker that
either returns the value or raises ProtocolError(BAD_FIELD). This runs at the
edge, once per frame, so handlers only ever see well-typed messages.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union

from protocol.errors import ErrorCode, ProtocolError

Checker = Callable[[str, Any], Any]

# Bounds that hold for every field unless its metadata says otherwise.
DEFAULT_MAX_STR = 256
DEFAULT_MAX_LIST = 4096
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _bad(name: str, why: str) -> ProtocolError:
    return ProtocolError(ErrorCode.BAD_FIELD, f"field {name!r}: {why}")


# An error quotes at most this much of a refused value: a 16 KiB frame of nested values
# must not come back as a reply ten times its size (the reply is the attacker's leverage).
MAX_SHOWN = 60


def shown(value: Any) -> str:
    """``repr(value)``, cut to MAX_SHOWN characters, for quoting in an error."""
    if type(value) in (list, tuple, dict):  # repr of a big container costs before the cut
        return f"a {_type_name(value)} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def _type_name(value: Any) -> str:
    return "nil" if value is None else type(value).__name__


def _int_checker(lo: int, hi: int) -> Checker:
    def check(name: str, value: Any) -> Any:
        # bool is an int subclass in Python; on the wire it is its own type.
        if type(value) is not int:
            raise _bad(name, f"expected an integer, got {_type_name(value)}")
        if not lo <= value <= hi:
            raise _bad(name, f"{value} is out of range {lo}..{hi}")
        return value

    return check


def _float_checker(lo: float, hi: float) -> Checker:
    def check(name: str, value: Any) -> Any:
        if type(value) not in (int, float):
            raise _bad(name, f"expected a number, got {_type_name(value)}")
        value = float(value)
        if value != value or not lo <= value <= hi:  # NaN fails the first test
            raise _bad(name, f"{value} is out of range {lo}..{hi}")
        return value

    return check


def _str_checker(max_len: int) -> Checker:
    def check(name: str, value: Any) -> Any:
        if type(value) is not str:
            raise _bad(name, f"expected a string, got {_type_name(value)}")
        if len(value) > max_len:
            raise _bad(name, f"longer than {max_len} characters")
        return value

    return check


def _bool_checker(name: str, value: Any) -> Any:
    if type(value) is not bool:
        raise _bad(name, f"expected a boolean, got {_type_name(value)}")
    return value


def _any_checker(name: str, value: Any) -> Any:
    return value


def _literal_checker(allowed: tuple[Any, ...]) -> Checker:
    choices = ", ".join(repr(a) for a in allowed)

    def check(name: str, value: Any) -> Any:
        if type(value) not in (str, int) or value not in allowed:
            raise _bad(name, f"{shown(value)} is not one of {choices}")
        return value

    return check


def _optional_checker(inner: Checker) -> Checker:
    def check(name: str, value: Any) -> Any:
        return None if value is None else inner(name, value)

    return check


def _list_checker(inner: Checker, max_len: int) -> Checker:
    def check(name: str, value: Any) -> Any:
        if type(value) not in (list, tuple):
            raise _bad(name, f"expected an array, got {_type_name(value)}")
        if len(value) > max_len:
            raise _bad(name, f"more than {max_len} items")
        return tuple(inner(f"{name}[{i}]", item) for i, item in enumerate(value))

    return check


def _dict_checker(inner: Checker, max_len: int) -> Checker:
    key_check = _str_checker(64)

    def check(name: str, value: Any) -> Any:
        if type(value) is not dict:
            raise _bad(name, f"expected a map, got {_type_name(value)}")
        if len(value) > max_len:
            raise _bad(name, f"more than {max_len} entries")
        return {key_check(f"{name} key", k): inner(f"{name}[{k!r}]", v) for k, v in value.items()}

    return check


def checker_for(annotation: Any, meta: typing.Mapping[str, Any]) -> Checker:
    """Build the checker for one annotation; bounds come from the field's metadata."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1 or len(args) != 2:
            raise TypeError(f"unsupported union {annotation!r}")
        return _optional_checker(checker_for(inner[0], meta))
    if origin is Literal:
        return _literal_checker(args)
    if origin in (list, tuple):
        item = checker_for(args[0], {k: v for k, v in meta.items() if k != "max_len"})
        return _list_checker(item, meta.get("max_len", DEFAULT_MAX_LIST))
    if origin is dict:
        if args[0] is not str:
            raise TypeError("map keys must be strings")
        value = checker_for(args[1], {k: v for k, v in meta.items() if k != "max_len"})
        return _dict_checker(value, meta.get("max_len", 64))
    if annotation is bool:
        return _bool_checker
    if annotation is int:
        return _int_checker(meta.get("min", INT64_MIN), meta.get("max", INT64_MAX))
    if annotation is float:
        return _float_checker(meta.get("min", -1e300), meta.get("max", 1e300))
    if annotation is str:
        return _str_checker(meta.get("max_len", DEFAULT_MAX_STR))
    if annotation is Any:
        return _any_checker
    raise TypeError(f"unsupported annotation {annotation!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    check: Checker
    required: bool
    default: Any


def field_specs(cls: type) -> tuple[FieldSpec, ...]:
    """The checkers for every field of a message dataclass, in declaration order."""
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        if f.name == "type":
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        default = None
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        specs.append(FieldSpec(f.name, checker_for(hints[f.name], f.metadata), required, default))
    return tuple(specs)

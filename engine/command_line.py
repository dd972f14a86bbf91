"""The parser of every noughts command line, client's and server's alike: a bad option is
one line on stderr and exit 2 (the rule for everything a user touches), not argparse's
usage block before it. It lives in ``engine``, the light package every entry point loads
already (its rules only, no numpy): from ``protocol`` it would load the codec, about 0.1 s
more before a Gomocup brain's first answer (tests/engine/test_imports.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, its errors one line: argparse's message, then where the usage is.
    Subcommands' parsers are of this class too (add_subparsers makes its parser's kind)."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see {self.prog} --help)" if self.add_help else ""
        self.exit(2, f"{self.prog}: error: {message}{hint}\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> Any:
        """As argparse's, but an option no parser took is the subcommand's error, which
        names it (``noughts games: error: unrecognized arguments: --x``), not ``noughts``'."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            self._chosen(parsed).error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def add_subparsers(self, **kwargs: Any) -> Any:
        """As argparse's; the action is kept, to find the subcommand's parser (``_chosen``)."""
        self._subcommands: argparse.Action = super().add_subparsers(**kwargs)
        return self._subcommands

    def _chosen(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The parser of the subcommand ``parsed`` names, else this one."""
        action = getattr(self, "_subcommands", None)
        if action is not None and isinstance(action.choices, dict):
            chosen = action.choices.get(str(getattr(parsed, action.dest, "")))
            if isinstance(chosen, argparse.ArgumentParser):
                return chosen
        return self

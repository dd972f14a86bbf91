"""The software's one version: the installed package's metadata (pyproject.toml), read once.
The server names itself ``noughts/VERSION`` in ``welcome.server``; exports and ``noughts
--version`` show the same string."""

from __future__ import annotations

import functools


@functools.cache
def software_version() -> str:
    """The version of the installed ``noughts`` package, "0+unknown" when it is not installed
    (running from a source tree without ``pip install -e .``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("noughts")
    except PackageNotFoundError:
        return "0+unknown"

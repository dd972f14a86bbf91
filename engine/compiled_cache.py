"""numba's on-disk cache of the compiled kernels: when it is stale, and what it holds.

Pure Python (no numpy, no numba), so that a parent process can ask whether the kernels are
compiled before it starts any worker. numba caches each compiled function next to its
source (``cache=True``) but checks only that source file, not the kernels it calls from
other files: ``drop_if_stale`` clears the whole cache whenever any kernel source changes.
``record_warm`` / ``is_warm`` keep, beside the cache, which warm-up targets (engine/warmup.py)
have been compiled for these sources, this numba and this Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = ["drop_if_stale", "is_warm", "record_warm"]

ENGINE = Path(__file__).resolve().parent
KERNELS = ENGINE / "kernels"
CACHE_DIR = KERNELS / "__pycache__"
STAMP = CACHE_DIR / "kernels.sha256"
WARMED = CACHE_DIR / "warmed.json"
# Sources of compiled code: the kernels, and perfect play's solver (self-contained in its
# file, so numba's own check covers its cache; it counts for what is warm).
SOURCES = (*sorted(KERNELS.glob("*.py")), ENGINE / "perfect.py")


def sources_digest() -> str:
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.name.encode() + source.read_bytes())
    return digest.hexdigest()


def drop_if_stale() -> None:
    """After any edit of the kernels, drop every cached kernel (and what was warm)."""
    digest = sources_digest()
    try:
        if STAMP.read_text() == digest:
            return
    except OSError:
        pass
    try:
        CACHE_DIR.mkdir(exist_ok=True)
        for cached in (*CACHE_DIR.glob("*.nbi"), *CACHE_DIR.glob("*.nbc"), WARMED):
            cached.unlink(missing_ok=True)
        STAMP.write_text(digest)
    except OSError:
        pass  # read-only install: numba falls back to compiling in memory


def _key() -> str:
    from importlib import metadata  # here: its import is 40% of `import engine`'s time

    try:
        numba = metadata.version("numba")
    except metadata.PackageNotFoundError:
        numba = "?"
    return f"{sources_digest()} numba {numba} python {sys.version_info[:2]}"


def _warm_targets() -> set[tuple[str, str]]:
    try:
        data = json.loads(WARMED.read_text())
    except (OSError, ValueError):
        return set()
    if not isinstance(data, dict) or data.get("key") != _key():
        return set()
    return {(str(g), str(a)) for g, a in data.get("targets", [])}


def is_warm(targets: Iterable[tuple[str, str]]) -> bool:
    """Whether every target has been compiled into the cache for these sources."""
    return set(targets) <= _warm_targets()


def record_warm(targets: Iterable[tuple[str, str]]) -> None:
    """Note that these targets are compiled (in the cache) for these sources."""
    known = _warm_targets() | set(targets)
    temporary = WARMED.with_name(f"warmed.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps({"key": _key(), "targets": sorted(known)}))
        os.replace(temporary, WARMED)
    except OSError:
        pass

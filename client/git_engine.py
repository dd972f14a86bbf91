"""An engine of an earlier build, from a git ref, playing in a child process.

`noughts arena --b-ref REF` pits today's engine against the one of commit REF: the commit's
tree is extracted once (``git archive``) into the cache directory, and each arena worker
runs it in a child Python whose import path starts there, asking it for moves over a pipe
(one JSON line each way). The child speaks only the typed front door (``engine.Searcher``,
``engine.Budget``, ``engine.replay``), so REF must have it (c0f7043 or later). Its numba
cache lives in its tree, compiled on its first match and kept for the next. It ignores
Ctrl-C as the workers do: arena's parent handles it.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["GitEngine", "GitEngineError", "extract"]

# The child: one request per line, one answer per line ({"warm": [game, algorithm]} is
# answered with {}; {"forget": key} has no answer). It ends at the end of its input, or
# quietly when its answer cannot be written: arena stopped while it searched.
DRIVER = """\
import json, os, sys
import engine
searcher = engine.Searcher()
warm = set()
try:
    for line in sys.stdin:
        request = json.loads(line)
        if "warm" in request:
            target = tuple(request["warm"])
            try:
                engine.warm_up([target])
                warm.add(target)
            except Exception as exc:
                pass  # the first search says what is wrong
            print("{}", flush=True)
            continue
        if "forget" in request:
            searcher.forget(request["forget"])
            continue
        try:
            target = (request["game"], request["algorithm"])
            if target not in warm:
                engine.warm_up([target])
                warm.add(target)
            state = engine.replay((request["game"], request["params"]), request["moves"])
            budget = engine.Budget(request["time_ms"], request["iterations"])
            result = searcher.search(state, request["algorithm"], budget, seed=request["seed"],
                                     game_key=request["game_key"], options=request["options"])
            answer = result.to_dict()
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
except BrokenPipeError:  # arena stopped during a search (Ctrl-C): no one reads the answer
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor the flush at exit
"""


FRONT_DOOR = ("Searcher", "Budget", "replay", "warm_up")  # what DRIVER calls of ``engine``


class GitEngineError(Exception):
    """The ref cannot be found or extracted, or its engine failed."""


def extract(ref: str, repository: Path | None = None) -> tuple[str, Path]:
    """(commit, tree): the commit ``ref`` names in ``repository`` (default: the checkout this
    code runs from) and its files, extracted once into the cache directory."""
    where = repository or Path(__file__).resolve().parent
    try:
        found = subprocess.run(
            [
                "git",
                "-C",
                str(where),
                "rev-parse",
                "--show-toplevel",
                "--verify",
                "--quiet",
                f"{ref}^{{commit}}",
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitEngineError(f"cannot run git: {exc}") from exc
    lines = found.stdout.split()
    if found.returncode != 0 or len(lines) != 2:
        raise GitEngineError(f"no commit {ref!r} in a git checkout at {where}")
    root, commit = lines
    from platformdirs import user_cache_dir

    cache = Path(user_cache_dir("noughts", appauthor=False)) / "engines"
    tree = cache / commit
    if not (tree / "engine" / "__init__.py").exists():
        _extract(root, commit, cache, tree)
    front = tree / "engine" / "__init__.py"
    if not front.exists():
        raise GitEngineError(f"commit {commit[:12]} has no engine package")
    # The child speaks the typed front door (DRIVER: engine.Searcher, engine.Budget, ...);
    # an older engine failed after its launch, with the child's traceback.
    text = front.read_text(errors="replace")
    if not all(re.search(rf"\b{name}\b", text) for name in FRONT_DOOR):
        raise GitEngineError(
            f"the engine of {commit[:12]} predates the typed front door (engine.Searcher and "
            "engine.Budget, c0f7043): it cannot play here"
        )
    return commit, tree


def _extract(root: str, commit: str, cache: Path, tree: Path) -> None:
    """``commit``'s engine package, from ``git archive``, into ``tree`` (atomically)."""
    try:
        archive = subprocess.run(
            ["git", "-C", root, "archive", "--format=tar", commit, "engine"],
            capture_output=True,
            timeout=120,
            check=True,
        ).stdout
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}-", dir=cache))
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(staging, filter="data")
        try:
            os.replace(staging, tree)
        except OSError:  # another process extracted it first
            pass
    except (OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
        raise GitEngineError(f"cannot extract the engine of {commit[:12]}: {exc}") from exc


class GitEngine:
    """A ``Searcher`` look-alike (``search``, ``forget``) backed by the engine in ``tree``."""

    def __init__(self, tree: Path, label: str) -> None:
        self.label = label
        from client.commands.interrupts import ignore_ctrl_c

        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", DRIVER],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            # As arena's workers: a terminal's Ctrl-C reaches the whole process group, and
            # arena's parent handles it. Set before exec, so that Python starts ignoring it.
            preexec_fn=ignore_ctrl_c,
        )

    def _send(self, request: dict[str, Any]) -> None:
        assert self.process.stdin is not None  # a pipe: set in __init__
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except OSError as exc:
            raise GitEngineError(f"the engine of {self.label} exited: {exc}") from exc

    def search(
        self,
        state: Any,
        algorithm: str,
        budget: Any,
        *,
        seed: int | None,
        game_key: str | None,
        options: dict[str, Any],
    ) -> Any:
        from engine.result import SearchResult

        name, params = state.game.spec()
        self._send(
            {
                "game": name,
                "params": params,
                "moves": state.history(),
                "algorithm": algorithm,
                "time_ms": budget.time_ms,
                "iterations": budget.iterations,
                "seed": seed,
                "game_key": game_key,
                "options": options,
            }
        )
        assert self.process.stdout is not None  # a pipe: set in __init__
        line = self.process.stdout.readline()
        if not line:
            status = self.process.wait()
            raise GitEngineError(f"the engine of {self.label} exited (status {status})")
        answer = json.loads(line)
        if "error" in answer:
            raise GitEngineError(f"the engine of {self.label}: {answer['error']}")
        return SearchResult.from_dict(answer)

    def warm(self, game: str, algorithm: str) -> None:
        """Compile (or load) what the child's searches of ``game`` need, before any is timed."""
        self._send({"warm": [game, algorithm]})
        assert self.process.stdout is not None  # a pipe: set in __init__
        if not self.process.stdout.readline():
            raise GitEngineError(f"the engine of {self.label} exited ({self.process.wait()})")

    def forget(self, game_key: str) -> None:
        self._send({"forget": game_key})

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()

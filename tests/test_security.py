"""The security review of the wire, held by tests: what reads network data never unpickles
or evaluates it, SQL is parameterised, secrets come from `secrets`, the server listens on
loopback unless told otherwise. (That a stranger or a spectator cannot act for a seat is
tested against a live server in tests/server/test_errors.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "engine", "server", "client")
# No module imports pickle. (multiprocessing pickles the SearchRequests the server builds
# for its own engine workers, over their pipes: nothing that came from the network.)
PICKLE_ALLOWED: set[str] = set()


def _sources() -> list[tuple[str, ast.Module]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            found.append((rel, ast.parse(path.read_text(), rel)))
    return found


def test_no_eval_exec_or_pickle_of_data() -> None:
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("eval", "exec", "compile"), f"{rel}:{node.lineno}"
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if any(n.split(".")[0] in ("pickle", "marshal", "shelve") for n in names):
                    assert rel in PICKLE_ALLOWED, f"{rel}:{node.lineno} imports pickle"


def test_sql_is_parameterised() -> None:
    """Every statement the store runs is a constant, or an f-string that only splices in
    constant column lists and shipped migrations; values always go as parameters."""
    # max_pages, wal_limit, version: ints the store computes (PRAGMAs take no parameters)
    allowed_names = {
        "_GAME_COLUMNS", "script", "target", "BUSY_WAIT_MS", "max_pages", "wal_limit", "version"
    }  # fmt: skip
    tree = dict(_sources())["server/store.py"]
    executed = 0
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in ("execute", "executemany", "executescript") or not node.args:
            continue
        executed += 1
        sql = node.args[0]
        if isinstance(sql, ast.JoinedStr):
            for part in sql.values:
                if isinstance(part, ast.FormattedValue):
                    value = part.value
                    name = (
                        value.attr if isinstance(value, ast.Attribute) else getattr(value, "id", "")
                    )
                    assert name in allowed_names, f"store.py:{node.lineno} splices {name!r}"
        else:
            assert isinstance(sql, ast.Constant | ast.Name), f"store.py:{node.lineno}"
    assert executed >= 8


def test_secrets_come_from_the_secrets_module() -> None:
    from server import session

    source = (ROOT / "server/session.py").read_text() + (ROOT / "server/app.py").read_text()
    assert "import random" not in source
    assert session.new_token() != session.new_token() and len(session.new_token()) >= 32


def test_the_server_listens_on_loopback_by_default() -> None:
    from server.__main__ import build_parser

    assert build_parser().parse_args([]).host == "127.0.0.1"

"""The architecture holds: protocol and engine are pure and independent."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("package", ["protocol", "engine"])
def test_pure_packages_import_no_io_libraries(package: str) -> None:
    code = f"import json, sys, {package}\nprint(json.dumps(sorted(m for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = set(json.loads(out.stdout))
    forbidden = {"asyncio", "websockets", "aiosqlite", "sqlite3", "server", "client", "textual"}
    forbidden |= {"engine"} if package == "protocol" else {"protocol", "msgpack"}
    assert not modules & forbidden, modules & forbidden


def test_client_never_imports_server() -> None:
    code = (
        "import json, sys, client.cli, client.connection, client.plain, client.replay\n"
        "client.cli.build_parser()\n"
        "print(json.dumps(sorted(m for m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = json.loads(out.stdout)
    assert not [m for m in modules if m == "server" or m.startswith("server.")]

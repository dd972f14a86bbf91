"""docker-compose.yml: no Docker engine runs here, so check its structure and commands."""

from __future__ import annotations

import re
from pathlib import Path

from client.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent


def _command_lists(text: str) -> list[list[str]]:
    """Every JSON-style string array in the file (command and healthcheck test)."""
    return [re.findall(r'"([^"]*)"', m) for m in re.findall(r"\[([^\]]*)\]", text)]


def test_compose_runs_real_noughts_entry_points() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    commands = [c for c in _command_lists(text) if c and c[0] in ("noughts", "CMD")]
    assert len(commands) >= 2
    parser = build_parser()
    for command in commands:
        argv = command[1:] if command[0] == "CMD" else command
        assert argv[0] == "noughts"
        subcommand = argv[1]
        choices = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        assert subcommand in choices, f"{subcommand} is not a noughts subcommand"
        if subcommand == "serve":
            from server.__main__ import build_parser as server_parser

            server_parser().parse_args(argv[2:])  # exits non-zero on an unknown option
        else:
            parser.parse_args(argv[1:])


def test_compose_structure() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    assert re.search(r"^services:\s*$", text, re.M)
    assert re.search(r"^\s+server:\s*$", text, re.M)
    assert re.search(r"^\s+build: \.\s*$", text, re.M)
    assert re.search(r"^\s+healthcheck:\s*$", text, re.M)
    assert re.search(r"^\s+- noughts-data:/data\s*$", text, re.M)
    assert re.search(r"^volumes:\s*\n\s+noughts-data:", text, re.M)
    assert (ROOT / "Dockerfile").is_file()
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in ("protocol", "engine", "server", "client"):
        assert f"COPY {package} ./{package}" in dockerfile

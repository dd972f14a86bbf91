"""docker-compose.yml: no Docker engine runs here, so parse it (YAML) and check that every
noughts command in it is one the CLI accepts, with options its parser knows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from client.cli import build_parser
from client.commands.serve import SERVER_COMMANDS
from server.settings import ServerSettings, from_arguments

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(document, dict)
    return document


def _check_noughts_command(argv: list[str]) -> None:
    """Parse a `noughts ...` command line as the real CLI would (SystemExit on a bad one)."""
    assert argv[0] == "noughts"
    subcommand, rest = argv[1], argv[2:]
    if subcommand in SERVER_COMMANDS:
        import importlib

        module_name = SERVER_COMMANDS[subcommand][0]
        if module_name == "server":
            module_name = "server.__main__"
        importlib.import_module(module_name).build_parser().parse_args(rest)
    else:
        build_parser().parse_args(argv[1:])


def _commands() -> list[tuple[str, list[str]]]:
    found = []
    for name, service in _compose()["services"].items():
        command = service.get("command")
        if command and command[0] == "noughts":
            found.append((name, command))
        test = service.get("healthcheck", {}).get("test", [])
        if test[:2] == ["CMD", "noughts"]:
            found.append((name, test[1:]))
    return found


def test_every_noughts_command_parses() -> None:
    commands = _commands()
    assert {name for name, _ in commands} == {"server", "node", "node-2", "engine-worker"}
    for name, argv in commands:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                _check_noughts_command(argv)
            except SystemExit:
                pytest.fail(f"service {name}: {' '.join(argv)}: {err.getvalue()}")


def test_a_bad_option_would_be_caught() -> None:
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        _check_noughts_command(["noughts", "serve", "--no-such-option"])


def test_the_single_node_default_and_the_cluster_profile() -> None:
    services = _compose()["services"]
    server = services["server"]
    assert "profiles" not in server  # `docker compose up` starts it alone
    assert server["build"] == "."
    assert "noughts-data:/data" in server["volumes"]
    cluster = {name for name, s in services.items() if "cluster" in s.get("profiles", [])}
    assert cluster == {"postgres", "redis", "node", "node-2", "engine-worker"}
    for name in ("postgres", "redis", "node", "node-2"):
        assert "healthcheck" in services[name], name
    for name in ("node", "node-2"):  # two nodes of one cluster: one database, one bus
        node = services[name]
        assert node["environment"]["NOUGHTS_DB"].startswith("postgresql://")
        assert node["environment"]["NOUGHTS_BUS"].startswith("redis://")
        assert node["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "--engine" in node["command"] and "queue" in node["command"]
    assert services["node"]["environment"] == services["node-2"]["environment"]
    assert (ROOT / "Dockerfile").is_file()
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in ("protocol", "engine", "server", "client"):
        assert f"COPY {package} ./{package}" in dockerfile


def _seconds(duration: str) -> float:
    """A Compose duration ("30s", "1m30s") in seconds."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts is not None and duration, duration
    minutes, seconds = parts.groups()
    return 60 * int(minutes or 0) + int(seconds or 0)


def _serve_settings(command: list[str]) -> ServerSettings:
    """The settings a `noughts serve` command line starts the server with."""
    from server.__main__ import build_parser as serve_parser

    assert command[:2] == ["noughts", "serve"], command
    return from_arguments(serve_parser().parse_args(command[2:]))


def test_docker_waits_for_the_servers_drain_before_it_kills() -> None:
    """`docker compose stop` sends SIGTERM, then SIGKILL after the stop grace period
    (Docker's default: 10 s, under the server's drain): each server's is above its drain."""
    for name in ("server", "node", "node-2"):
        service = _compose()["services"][name]
        drain = _serve_settings(service["command"]).drain_timeout_s
        assert "stop_grace_period" in service, name
        assert _seconds(service["stop_grace_period"]) > drain, name


def test_admin_ports_are_published_on_the_hosts_loopback_only() -> None:
    """The admin endpoints are the operator's, not the public's: published on the host's
    127.0.0.1 only (a Prometheus in the compose network reaches the container's port)."""
    published = 0
    for name, service in _compose()["services"].items():
        command = service.get("command") or []
        if command[:2] != ["noughts", "serve"]:
            continue
        admin = _serve_settings(command).admin_port
        for mapping in service.get("ports", []):
            if admin is not None and mapping.rsplit(":", 1)[1] == str(admin):
                host_ip = mapping.split(":")[0]
                assert mapping.count(":") == 2 and host_ip == "127.0.0.1", (name, mapping)
                published += 1
    assert published == 2  # node and node-2

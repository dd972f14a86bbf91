"""The one settings object: noughts serve's options and environment variables come from it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from server.settings import ServerSettings, add_arguments, from_arguments


def _parse(argv: list[str], environ: dict[str, str]) -> ServerSettings:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser, environ)
    return from_arguments(parser.parse_args(argv))


def test_defaults_are_the_settings_defaults() -> None:
    assert _parse([], {}) == ServerSettings()


def test_every_option_is_also_an_environment_variable_and_the_flag_wins() -> None:
    settings = _parse(["--rate", "5"], {"NOUGHTS_MAX_PER_IP": "7", "NOUGHTS_RATE": "9"})
    assert settings.max_connections_per_ip == 7
    assert settings.rate_per_s == 5.0


def test_a_bad_environment_value_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse([], {"NOUGHTS_BURST": "lots"})
    assert exited.value.code == 2
    assert "$NOUGHTS_BURST='lots' is not a valid int" in capsys.readouterr().err


def test_every_setting_has_help_and_a_group() -> None:
    for f in dataclasses.fields(ServerSettings):
        assert f.metadata.get("help"), f.name
        assert f.metadata.get("group"), f.name


def test_json_log_lines_are_one_object_each() -> None:
    import json
    import logging

    from server.logs import JSONFormatter

    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("server.x", logging.ERROR, __file__, 1, "a %s", ("b",), None)
        record.exc_info = sys.exc_info()
    line = JSONFormatter().format(record)
    assert "\n" not in line.replace("\\n", "")
    entry = json.loads(line)
    assert entry["level"] == "ERROR" and entry["message"] == "a b" and entry["logger"] == "server.x"
    assert "ValueError: boom" in entry["exception"] and entry["time"].endswith("Z")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "-5"], "argument --port: must be 0..65535, not -5"),
        (["--port", "70000"], "argument --port: must be 0..65535, not 70000"),
        (["--drain-timeout-s", "-1"], "argument --drain-timeout-s: must be 0 or more, not -1"),
        (["--burst", "-400"], "argument --burst: must be 1 or more, not -400"),
        # Where 0 would lock every player out, hang a game or divide by zero:
        (["--burst", "0"], "argument --burst: must be 1 or more, not 0"),
        (["--max-connections", "0"], "argument --max-connections: must be 1 or more, not 0"),
        (["--max-per-ip", "0"], "argument --max-per-ip: must be 1 or more, not 0"),
        (["--processes", "0"], "argument --processes: must be 1..128, not 0"),
        (
            ["--ai-running-per-player", "0"],
            "argument --ai-running-per-player: must be 1 or more, not 0",
        ),
        (["--rate", "0"], "argument --rate: must be above 0, not 0"),
        (["--rate", "nan"], "argument --rate: must be above 0, not nan"),
        (["--new-sessions-per-ip", "0"], "argument --new-sessions-per-ip: must be above 0, not 0"),
        (["--max-ai-searches", "0"], "argument --max-ai-searches: must be 1 or more, not 0"),
        (["--engine-wait-s", "0"], "argument --engine-wait-s: must be above 0, not 0"),
    ],
)
def test_a_number_out_of_bounds_is_a_one_line_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No count, size, time or port is negative; a port is at most 65535 (before this, a
    negative --drain-timeout-s was taken and --port -5 ended in bind()'s traceback)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser, {})
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert _parse(["--port", "0", "--drain-timeout-s", "0"], {}).port == 0


def test_a_zero_that_means_something_is_still_taken() -> None:
    """0 engine workers (no AI games), a grace of 0 s and no kept trees are operators'
    choices, not mistakes (0 AI searches per player was one until it refused every AI game
    while /readyz said ready: --workers 0 says no AI games, and says so)."""
    parsed = _parse(["--workers", "0", "--grace-s", "0", "--engine-tree-mb", "0"], {})
    assert (parsed.workers, parsed.grace_s, parsed.engine_tree_mb) == (0, 0.0, 0)


def test_an_environment_value_out_of_bounds_names_the_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser()
    with pytest.raises(SystemExit):
        add_arguments(parser, {"NOUGHTS_BURST": "0"})
    assert "$NOUGHTS_BURST='0': must be 1 or more, not 0" in capsys.readouterr().err

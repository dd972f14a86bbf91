"""bench/fuzz_atheris.py, an on-demand tool: without atheris it says how to install it in one
line; with it, it shows its help."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "bench" / "fuzz_atheris.py"


def test_help_or_how_to_install_atheris() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), "--help"], capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr
    if importlib.util.find_spec("atheris") is None:
        assert done.returncode == 1
        assert done.stderr.strip() == (
            "fuzz_atheris.py: atheris is not installed (an on-demand tool, not a project "
            "dependency): .venv/bin/pip install atheris"
        )
    else:
        assert done.returncode == 0 and "--target" in done.stdout

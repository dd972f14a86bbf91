"""The machine a measurement ran on, for the reports of `noughts bench` and `noughts arena`.

Figures of two sittings compare only with the CPU each ran on: the same build's searches ran
about 40% slower in one sitting of the development machine than in another
(bench/README.md), and nothing in the reports said why."""

from __future__ import annotations

import os
import platform
from typing import Any

CPUINFO = "/proc/cpuinfo"


def cpu_name(cpuinfo: str = CPUINFO) -> str | None:
    """The first CPU's model name, with its family and model numbers where the kernel gives
    them (``AMD EPYC (family 25, model 1)``: the numbers tell the generations apart when the
    name does not); None where there is no such file (not Linux)."""
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as info:
            for line in info:
                if not line.strip():
                    break  # the end of the first CPU's block
                key, sep, value = line.partition(":")
                if sep:
                    fields.setdefault(key.strip(), value.strip())
    except OSError:
        return None
    name = fields.get("model name") or platform.processor() or None
    if name is None:
        return None
    if "cpu family" in fields and "model" in fields:
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


def host_info() -> dict[str, Any]:
    """The host block of a report: cores, CPU, architecture, Python, and the load average
    when the measurement started (other work on the machine moves every figure)."""
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu_name(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "load_average_at_start": list(os.getloadavg()),
    }

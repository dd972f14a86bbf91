"""The CPU a report names (client/host.py), read from /proc/cpuinfo's format."""

from __future__ import annotations

from pathlib import Path

from client.host import cpu_name, host_info

# The first lines of two CPUs' blocks as Linux writes them (x86: name, family, model).
X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: Another CPU
"""

# An ARM board: no "model name" or family in the first block's fields used here.
ARM = """processor\t: 0
BogoMIPS\t: 48.00
Features\t: fp asimd
CPU implementer\t: 0x41
"""


def test_the_first_cpu_is_named_with_its_family_and_model(tmp_path: Path) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(X86)
    assert cpu_name(str(path)) == "AMD EPYC (family 25, model 1)"


def test_a_cpu_without_those_fields_is_named_as_the_platform_names_it(tmp_path: Path) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(ARM)
    name = cpu_name(str(path))
    assert name is None or "(family" not in name


def test_no_cpuinfo_is_none(tmp_path: Path) -> None:
    assert cpu_name(str(tmp_path / "missing")) is None


def test_the_host_block_has_what_a_report_compares() -> None:
    host = host_info()
    assert host["cpus"] >= 1 and len(host["load_average_at_start"]) == 3
    assert set(host) == {"cpus", "cpu", "machine", "python", "load_average_at_start"}

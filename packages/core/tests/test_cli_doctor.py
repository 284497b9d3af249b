"""``dex-agents doctor`` reads the installed distributions and exits 1 when they leave one line.

The drifted packages are real distributions: ``.dist-info`` directories on ``PYTHONPATH`` of a
``dex-agents doctor`` child process, which ``importlib.metadata`` finds like any installed one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import dex_agents

DOCTOR = Path(sys.executable).with_name("dex-agents")


def _doctor(*site_directories: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, site_directories))}
    return subprocess.run(
        [str(DOCTOR), "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        check=False,
    )


def _distribution(
    site: Path, name: str, version: str, *requirements: str, extras: tuple[str, ...] = ()
) -> Path:
    """A distribution ``name`` ``version`` installed in ``site``: its METADATA only."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += (f"Provides-Extra: {extra}" for extra in extras)
    lines += (f"Requires-Dist: {requirement}" for requirement in requirements)
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    return site


def _doctor_with_optional(site: Path, name: str, requirement: str) -> str:
    """Doctor's report (it must find no problem) of a dex-agents package ``name`` whose extra
    ``fancy`` requires ``requirement``."""
    line = dex_agents.__version__
    _distribution(
        site,
        name,
        line,
        f"dex-agents=={line}",
        f'{requirement}; extra == "fancy"',
        extras=("fancy",),
    )
    result = _doctor(site)
    assert result.returncode == 0, result.stdout
    return result.stdout


def test_the_workspace_is_on_one_line_and_every_package_is_listed() -> None:
    result = _doctor()

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    line = dex_agents.__version__
    assert lines[-1].startswith("All ") and f"on the {line} line" in lines[-1]
    installed = {
        distribution.metadata["Name"]: distribution.version
        for distribution in metadata.distributions()
        if distribution.metadata["Name"].startswith("dex-agents-")
    }
    for name, version in {"dex-agents": line, "dex-local-engine": line, **installed}.items():
        assert f"{name} {version}" in lines
    sdk = metadata.version("dex-python-sdk")
    assert any(text.split() == ["dex-python-sdk", "==1.23.0", sdk, "ok"] for text in lines), (
        result.stdout
    )


def test_a_package_off_the_line_and_a_wrong_pin_exit_1_naming_both(tmp_path: Path) -> None:
    site = _distribution(tmp_path, "dex-agents-drifted", "0.2.0", "dex-agents==0.2.0")

    result = _doctor(site)

    assert result.returncode == 1, result.stdout
    line = dex_agents.__version__
    assert "dex-agents-drifted 0.2.0" in result.stdout.splitlines()
    assert f"dex-agents-drifted is 0.2.0, not on the {line} line of dex-agents" in result.stdout
    assert (
        f"dex-agents-drifted requires dex-agents==0.2.0; pin it to dex-agents=={line}"
        in result.stdout
    )
    assert "2 problems:" in result.stdout
    last = result.stdout.splitlines()[-1]
    assert last.startswith(f"To put every package on the {line} line: pip install ")
    assert f'"dex-agents-drifted=={line}"' in last and f'"dex-agents=={line}"' in last


def test_a_framework_outside_its_tested_range_or_missing_exits_1(tmp_path: Path) -> None:
    line = dex_agents.__version__
    site = _distribution(
        tmp_path,
        "dex-agents-unlucky",
        line,
        f"dex-agents=={line}",
        "dex-python-sdk>=2,<3",
        "no-such-framework-for-doctor>=1.0",
    )

    result = _doctor(site)

    assert result.returncode == 1, result.stdout
    sdk = metadata.version("dex-python-sdk")
    assert (
        f"dex-agents-unlucky was tested with dex-python-sdk>=2,<3, but dex-python-sdk {sdk} is "
        'installed: pip install "dex-python-sdk>=2,<3"'
    ) in result.stdout
    assert (
        "dex-agents-unlucky requires no-such-framework-for-doctor>=1.0, which is not installed"
        in result.stdout
    )
    (row,) = (text for text in result.stdout.splitlines() if "dex-python-sdk >=2,<3" in text)
    assert row.split() == ["dex-python-sdk", ">=2,<3", sdk, "outside", "the", "tested", "range"]


def test_a_missing_optional_requirement_is_listed_but_is_no_problem(tmp_path: Path) -> None:
    report = _doctor_with_optional(tmp_path, "dex-agents-optional", "no-such-extra-framework>=1")
    row = next(text for text in report.splitlines() if "no-such-extra-framework" in text)
    assert row.split() == [
        "no-such-extra-framework",
        ">=1",
        "(extra",
        "fancy)",
        "-",
        "not",
        "installed",
        "(optional)",
    ]


def test_an_optional_requirement_outside_its_range_is_a_note_not_a_problem(
    tmp_path: Path,
) -> None:
    # Another package brought the extra's requirement at a version the extra was not tested
    # with (strands-agents pins mcp<2.2, the core's mcp extra wants mcp>=2.3).
    sdk = metadata.version("dex-python-sdk")
    report = _doctor_with_optional(tmp_path, "dex-agents-extra-elsewhere", "dex-python-sdk>=999")
    row = next(text for text in report.splitlines() if "dex-python-sdk >=999" in text)
    assert row.split()[-5:] == ["outside", "the", "tested", "range", "(optional)"]
    assert (
        f"Note: dex-agents-extra-elsewhere's extra fancy was tested with dex-python-sdk>=999, but "
        f"dex-python-sdk {sdk} is installed (another package asks for it): what that extra adds "
        "may not work"
    ) in report

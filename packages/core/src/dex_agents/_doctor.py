"""``dex-agents doctor``: the installed dex-agents packages, what they wrap, and one version line.

It reads the installed distributions' metadata (``importlib.metadata``), never imports them: the
packages of the line (``dex-agents``, ``dex-local-engine``, every ``dex-agents-*``), their versions,
and for each requirement outside the line (an adapter's framework, the Dex SDK) the installed
version against the range the package was tested with.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum
from importlib import metadata
from typing import TextIO

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from dex_agents._release_line import (
    CORE_DISTRIBUTION,
    LineDistribution,
    is_line_distribution,
    line_problems,
    parse_requirement,
    specifier_text,
)

__all__ = [
    "DoctorReport",
    "InstalledPackage",
    "RequirementState",
    "RequirementStatus",
    "doctor_report",
    "format_doctor_report",
    "run_doctor",
]


class RequirementState(StrEnum):
    """How an installed requirement compares with the range its package was tested with."""

    OK = "ok"
    OUTSIDE_RANGE = "outside the tested range"
    OPTIONAL_OUTSIDE_RANGE = "outside the tested range (optional)"
    MISSING = "not installed"
    OPTIONAL_MISSING = "not installed (optional)"


@dataclass(frozen=True)
class RequirementStatus:
    """One requirement of an installed package: the tested range and what is installed."""

    name: str
    specifier: str
    extra: str | None
    installed_version: str | None
    state: RequirementState

    @property
    def label(self) -> str:
        """The requirement as the report prints it, such as ``mcp >=2.3,<3 (extra mcp)``."""
        text = f"{self.name} {self.specifier or '(any version)'}"
        return f"{text} (extra {self.extra})" if self.extra else text


@dataclass(frozen=True)
class InstalledPackage:
    """An installed package of the line, its version and its requirements' status."""

    name: str
    version: str
    requirements: tuple[RequirementStatus, ...]


@dataclass(frozen=True)
class DoctorReport:
    """What ``dex-agents doctor`` found: the line, the packages and every problem."""

    python: str
    line: str | None
    packages: tuple[InstalledPackage, ...]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every package is on one line and every requirement is within its range."""
        return not self.problems


def _installed_line_distributions() -> list[metadata.Distribution]:
    # The first distribution of a name on sys.path is the one that imports, as in pip list.
    names = sorted(
        {
            name
            for distribution in metadata.distributions()
            if (name := distribution.metadata["Name"]) and is_line_distribution(name)
        }
    )
    return [metadata.distribution(name) for name in names]


def _installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


_UNCONDITIONAL = ""


def _bringing_extra(requirement: Requirement, extras: tuple[str, ...]) -> str | None:
    """``_UNCONDITIONAL``, the extra that brings ``requirement``, or None when none applies.

    A marker such as ``python_version < "3.12"`` evaluates against this interpreter.
    """
    if requirement.marker is None:
        return _UNCONDITIONAL
    return next(
        (
            extra
            for extra in (_UNCONDITIONAL, *extras)
            if requirement.marker.evaluate({"extra": extra})
        ),
        None,
    )


def _within(requirement: Requirement, version: str) -> bool:
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:  # a version pip would not install either; only "any version" takes it
        return not requirement.specifier


def _requirement_status(
    requirement: Requirement, extras: tuple[str, ...]
) -> RequirementStatus | None:
    extra = _bringing_extra(requirement, extras)
    if extra is None:
        return None
    specifier = (
        specifier_text(requirement.specifier) if requirement.url is None else f"@ {requirement.url}"
    )
    installed = _installed_version(requirement.name)
    if installed is None:
        state = (
            RequirementState.MISSING
            if extra == _UNCONDITIONAL
            else RequirementState.OPTIONAL_MISSING
        )
    elif requirement.url is None and not _within(requirement, installed):
        # An extra's requirement that another package brought at another version: only what
        # the extra adds is at stake, and nothing says the extra is used (a note, no problem).
        state = (
            RequirementState.OUTSIDE_RANGE
            if extra == _UNCONDITIONAL
            else RequirementState.OPTIONAL_OUTSIDE_RANGE
        )
    else:
        state = RequirementState.OK
    return RequirementStatus(requirement.name, specifier, extra or None, installed, state)


def _installed_package(distribution: metadata.Distribution) -> InstalledPackage:
    name = distribution.metadata["Name"]
    extras = tuple(distribution.metadata.get_all("Provides-Extra") or ())
    statuses = (
        _requirement_status(parse_requirement(text, name), extras)
        for text in distribution.requires or ()
    )
    return InstalledPackage(
        name, distribution.version, tuple(status for status in statuses if status is not None)
    )


def _requirement_problem(package: InstalledPackage, status: RequirementStatus) -> str | None:
    wanted = f"{status.name}{status.specifier}"
    if status.state is RequirementState.MISSING:
        return f'{package.name} requires {wanted}, which is not installed: pip install "{wanted}"'
    # A line package at another version is the line rule's problem, said once there.
    if status.state is RequirementState.OUTSIDE_RANGE and not is_line_distribution(status.name):
        return (
            f"{package.name} was tested with {wanted}, but {status.name} "
            f'{status.installed_version} is installed: pip install "{wanted}"'
        )
    return None


def _requirement_note(package: InstalledPackage, status: RequirementStatus) -> str | None:
    if status.state is not RequirementState.OPTIONAL_OUTSIDE_RANGE:
        return None
    return (
        f"{package.name}'s extra {status.extra} was tested with {status.name}{status.specifier}, "
        f"but {status.name} {status.installed_version} is installed (another package asks for "
        f"it): what that extra adds may not work"
    )


def _line(packages: tuple[InstalledPackage, ...]) -> str | None:
    """The core's version, else the one version all packages share, else None."""
    core = next((p.version for p in packages if _is_core(p.name)), None)
    versions = {package.version for package in packages}
    return core or (versions.pop() if len(versions) == 1 else None)


def _is_core(name: str) -> bool:
    return canonicalize_name(name) == CORE_DISTRIBUTION


def _version_problems(
    packages: tuple[InstalledPackage, ...], distributions: list[metadata.Distribution]
) -> list[str]:
    line = _line(packages)
    if line is None:
        versions = ", ".join(f"{package.name} {package.version}" for package in packages)
        return [
            f"the dex-agents packages are on different versions ({versions}), and "
            f"{CORE_DISTRIBUTION} is not installed to say which line they belong to"
        ]
    return list(
        line_problems(
            (
                LineDistribution(package.name, package.version, tuple(distribution.requires or ()))
                for package, distribution in zip(packages, distributions, strict=True)
            ),
            line,
        )
    )


def doctor_report() -> DoctorReport:
    """Inspect the installed dex-agents packages of this Python environment.

    Example:
        >>> from dex_agents import __version__
        >>> doctor_report().line == __version__
        True
    """
    distributions = _installed_line_distributions()
    packages = tuple(_installed_package(distribution) for distribution in distributions)
    problems = _version_problems(packages, distributions)
    problems += (
        problem
        for package in packages
        for status in package.requirements
        if (problem := _requirement_problem(package, status)) is not None
    )
    core_required = any(
        _is_core(status.name) for package in packages for status in package.requirements
    )
    if not core_required and not any(_is_core(package.name) for package in packages):
        problems.append(f"{CORE_DISTRIBUTION} is not installed: pip install {CORE_DISTRIBUTION}")
    notes = tuple(
        note
        for package in packages
        for status in package.requirements
        if (note := _requirement_note(package, status)) is not None
    )
    python = f"Python {sys.version.split()[0]} at {sys.executable}"
    return DoctorReport(python, _line(packages), packages, tuple(problems), notes)


def format_doctor_report(report: DoctorReport) -> str:
    """The report as ``dex-agents doctor`` prints it: packages, requirements, then the verdict."""
    lines = [f"dex-agents doctor: {report.python}", ""]
    width = max(
        (len(status.label) for package in report.packages for status in package.requirements),
        default=0,
    )
    for package in report.packages:
        lines.append(f"{package.name} {package.version}")
        for status in package.requirements:
            installed = status.installed_version or "-"
            lines.append(f"    {status.label:<{width}}  {installed:<12} {status.state.value}")
    lines.append("")
    if report.ok:
        lines.append(
            f"All {len(report.packages)} dex-agents packages are on the {report.line} line; "
            "every requirement is within its tested range."
        )
    else:
        count = len(report.problems)
        lines.append(f"{count} problem{'s' if count != 1 else ''}:")
        lines += (f"  - {problem}" for problem in report.problems)
        if report.line is not None:
            pins = " ".join(f'"{package.name}=={report.line}"' for package in report.packages)
            lines.append(f"To put every package on the {report.line} line: pip install {pins}")
    lines += (f"Note: {note}" for note in report.notes)
    return "\n".join(lines)


def run_doctor(out: TextIO | None = None) -> int:
    """Print the doctor's report; returns 0 when all is on one line, else 1."""
    report = doctor_report()
    print(format_doctor_report(report), file=out or sys.stdout)
    return 0 if report.ok else 1

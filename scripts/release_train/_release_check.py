"""The release check: build every published package, check what was built, install each alone.

1. The version line of the workspace (the version-line test's rule).
2. ``uv build --no-sources`` of every package under ``packages/`` into ``dist/`` (emptied first):
   an sdist, then the wheel built from that sdist, so the sdist is proven complete.
3. Each wheel and sdist: no test files, no workspace-only paths, metadata on the line.
4. Each package in its own fresh venv (``_fresh_venv``), one after the other, each venv removed
   once its package passed (unless ``--work-directory`` keeps them).

The venvs go to a memory filesystem (``/dev/shm``) when it has room: each holds tens of thousands
of files, and on a slow disk writing and deleting them took longer than pip's resolving (removing
the seven venvs of one check from an ext4 disk here took 91 s).

Every problem is collected and printed at the end; the exit status is 1 if there is one.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from release_train._commands import run_logged
from release_train._distribution_contents import sdist_problems, wheel_problems
from release_train._errors import ReleaseTrainError
from release_train._fresh_venv import FreshVenvResult, check_in_fresh_venv
from release_train._version_line import version_line, workspace_line_problems
from release_train._workspace import REPOSITORY_ROOT, WorkspaceMember, workspace_members

__all__ = ["ReleaseCheckOptions", "run_release_check"]

_BUILD_TIMEOUT = 600.0
_MEMORY_FILESYSTEM = Path("/dev/shm")
# Room for the largest venv (the Claude Agent SDK bundles its CLI: about 500 MB) with a margin.
_MEMORY_FILESYSTEM_MINIMUM_FREE = 2 * 1024**3


@dataclass(frozen=True)
class ReleaseCheckOptions:
    """What to check, with which interpreter, and where the venvs go."""

    python: str
    only: tuple[str, ...] = ()
    work_directory: Path | None = None
    root: Path = REPOSITORY_ROOT


def _say(text: str) -> None:
    print(f"release check: {text}", flush=True)


def _distribution_stem(member: WorkspaceMember) -> str:
    # Wheel and sdist file names spell the project name with underscores (PEP 427, PEP 625).
    return f"{member.name.replace('-', '_').replace('.', '_').lower()}-{member.version}"


def _build(
    packages: Sequence[WorkspaceMember], line: str, dist: Path, logs: Path, root: Path
) -> tuple[list[str], bool]:
    """The problems of the builds and their contents, and whether every package built."""
    problems: list[str] = []
    built = True
    shutil.rmtree(dist, ignore_errors=True)
    for member in packages:
        command = ["uv", "build", "--no-sources", "--package", member.name, "--out-dir", str(dist)]
        result = run_logged(
            command, logs / f"build-{member.name}.log", cwd=root, timeout=_BUILD_TIMEOUT
        )
        if not result.ok:
            problems.append(result.failure(f"building {member.name}"))
            built = False
            continue
        stem = _distribution_stem(member)
        wheel = next(iter(sorted(dist.glob(f"{stem}-*.whl"))), None)
        sdist = dist / f"{stem}.tar.gz"
        if wheel is None or not sdist.is_file():
            problems.append(f"uv build of {member.name} made no {stem}-*.whl and {stem}.tar.gz")
            built = False
            continue
        found = [*wheel_problems(wheel, member, line), *sdist_problems(sdist, member, line)]
        problems += found
        _say(
            f"built {wheel.name} and {sdist.name} in {result.seconds:.1f} s"
            + ("" if found else "; no test files, no workspace-only paths")
        )
    return problems, built


def _scratch_parent() -> Path | None:
    """``/dev/shm`` when it is a writable directory with room for a venv, else None (``TMPDIR``)."""
    try:
        free = shutil.disk_usage(_MEMORY_FILESYSTEM).free
    except OSError:
        return None
    usable = os.access(_MEMORY_FILESYSTEM, os.W_OK | os.X_OK)
    return _MEMORY_FILESYSTEM if usable and free >= _MEMORY_FILESYSTEM_MINIMUM_FREE else None


def _selected(packages: Sequence[WorkspaceMember], only: Sequence[str]) -> list[WorkspaceMember]:
    names = {member.name for member in packages}
    unknown = sorted(set(only) - names)
    if unknown:
        raise ReleaseTrainError(
            f"--only {', '.join(unknown)}: not a published package; the packages are "
            f"{', '.join(sorted(names))}"
        )
    return [member for member in packages if not only or member.name in only]


def _describe(result: FreshVenvResult) -> str:
    steps = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in result.timings)
    example = f"; README '## {result.example}' ran" if result.example else ""
    verdict = "ok" if not result.problems else f"{len(result.problems)} problem(s)"
    return (
        f"{result.member.name} in a fresh venv: {verdict}; installed "
        f"{', '.join(result.installed) or 'nothing'} from dist/; {result.modules} modules "
        f"imported{example} ({steps})"
    )


def run_release_check(options: ReleaseCheckOptions) -> int:
    """Run the whole release check; returns the exit status (0: every check passed).

    Raises:
        ReleaseTrainError: The workspace cannot be read, or ``only`` names an unknown package.
    """
    started = time.monotonic()
    members = workspace_members(options.root)
    packages = [member for member in members if member.published]
    selected = _selected(packages, options.only)
    line = version_line(members)
    adapters = [member.name for member in packages if member.is_adapter]
    _say(
        f"{len(packages)} packages on the {line} line ({len(adapters)} adapters: "
        f"{', '.join(adapters)}); not published: "
        f"{', '.join(m.name for m in members if not m.published) or 'none'}"
    )
    problems = list(workspace_line_problems(members))
    work = options.work_directory or Path(
        tempfile.mkdtemp(prefix="dex-agents-release-check-", dir=_scratch_parent())
    )
    work.mkdir(parents=True, exist_ok=True)
    dist = options.root / "dist"
    building = time.monotonic()
    build_problems, built = _build(packages, line, dist, work, options.root)
    problems += build_problems
    _say(f"built {len(packages)} packages into dist/ in {time.monotonic() - building:.1f} s")
    # A wheel with bad contents still installs; only a package that did not build stops the venvs.
    if built:
        for member in selected:
            result = check_in_fresh_venv(member, line, dist, work / member.name, options.python)
            _say(_describe(result))
            problems += result.problems
            if options.work_directory is None and not result.problems:
                # Only the logs of a package that failed are worth keeping, with its venv.
                shutil.rmtree(work / member.name, ignore_errors=True)
    else:
        _say("a package did not build; no venv was made")
    if problems:
        elapsed = time.monotonic() - started
        _say(f"FAILED with {len(problems)} problem(s) after {elapsed:.0f} s (logs in {work}):")
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr, flush=True)
        return 1
    if options.work_directory is None:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - started
    _say(
        f"passed: {len(packages)} packages built, {len(selected)} checked alone, in {elapsed:.0f} s"
    )
    return 0

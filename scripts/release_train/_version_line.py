"""The workspace's version line: every member at the core's version, every pin exactly on it.

The rule is the one ``dex-agents doctor`` applies to installed packages (``line_problems``), here
applied to the ``pyproject.toml`` files, plus the ``__version__`` strings in the sources.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

from dex_agents._release_line import CORE_DISTRIBUTION, line_problems
from packaging.utils import canonicalize_name

from release_train._errors import ReleaseTrainError
from release_train._workspace import WorkspaceMember

__all__ = ["source_version", "version_line", "workspace_line_problems"]


def version_line(members: Sequence[WorkspaceMember]) -> str:
    """The line's version: the version of the ``dex-agents`` member.

    Raises:
        ReleaseTrainError: No member is ``dex-agents``.
    """
    for member in members:
        if canonicalize_name(member.name) == CORE_DISTRIBUTION:
            return member.version
    raise ReleaseTrainError(
        f"no workspace member is {CORE_DISTRIBUTION}, whose version is the line"
    )


def source_version(init: Path) -> str | None:
    """The string a package's ``__init__.py`` assigns to ``__version__``, or None."""
    for statement in ast.parse(init.read_text(), str(init)).body:
        if (
            isinstance(statement, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__version__" for t in statement.targets)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        ):
            return statement.value.value
    return None


def _source_version_problems(member: WorkspaceMember, line: str) -> list[str]:
    problems = []
    for package in member.import_packages:
        init = member.directory / "src" / package / "__init__.py"
        version = source_version(init) if init.is_file() else None
        if version is not None and version != line:
            problems.append(
                f"{init.relative_to(member.root)} sets __version__ = {version!r}, not the "
                f"{line} line"
            )
    return problems


def workspace_line_problems(members: Sequence[WorkspaceMember]) -> tuple[str, ...]:
    """What keeps the workspace's members off one version line, one sentence per problem.

    Raises:
        ReleaseTrainError: No member is ``dex-agents``.
    """
    line = version_line(members)
    problems = list(line_problems((member.line_distribution() for member in members), line))
    for member in members:
        problems += _source_version_problems(member, line)
    return tuple(problems)

"""The workspace's members, read from their ``pyproject.toml`` files; nothing is listed by hand.

The members are the directories that the root ``[tool.uv.workspace] members`` globs name. A member
under ``packages/`` is a published package; an adapter is a published package that requires
``dex-agents``. The others (``examples/web-chat``) are example apps: tested, linted and kept on the
version line, but never built or released.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dex_agents._release_line import CORE_DISTRIBUTION, LineDistribution, parse_requirement
from packaging.utils import canonicalize_name

from release_train._errors import ReleaseTrainError

__all__ = [
    "PUBLISHED_DIRECTORY",
    "REPOSITORY_ROOT",
    "SCENARIO_RUNNER_GROUP",
    "WorkspaceMember",
    "published_packages",
    "workspace_members",
]

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
PUBLISHED_DIRECTORY = "packages"
SCENARIO_RUNNER_GROUP = "dex_agents.scenario_runners"


@dataclass(frozen=True)
class WorkspaceMember:
    """One workspace member as its ``pyproject.toml`` declares it."""

    root: Path
    directory: Path
    name: str
    version: str
    requires_python: str
    dependencies: tuple[str, ...]
    optional_dependencies: Mapping[str, tuple[str, ...]]
    scenario_runners: tuple[str, ...]
    console_scripts: tuple[str, ...]
    import_packages: tuple[str, ...]

    @property
    def relative(self) -> PurePosixPath:
        """The member's directory relative to the repository root, such as ``packages/core``."""
        return PurePosixPath(self.directory.relative_to(self.root).as_posix())

    @property
    def published(self) -> bool:
        """Whether the release train builds and releases it (it lives under ``packages/``)."""
        return self.relative.parts[0] == PUBLISHED_DIRECTORY

    @property
    def is_adapter(self) -> bool:
        """Whether it is a published package that requires ``dex-agents``: a framework adapter."""
        return self.published and any(
            canonicalize_name(parse_requirement(text, self.name).name) == CORE_DISTRIBUTION
            for text in self.dependencies
        )

    @property
    def readme(self) -> Path:
        """The member's ``README.md``."""
        return self.directory / "README.md"

    def line_distribution(self) -> LineDistribution:
        """The member as the version-line rule sees it: every requirement, extras included."""
        extras = (text for group in self.optional_dependencies.values() for text in group)
        return LineDistribution(self.name, self.version, (*self.dependencies, *extras))


def _load(pyproject: Path) -> dict[str, object]:
    try:
        return tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ReleaseTrainError(f"cannot read {pyproject}: {error}") from None


def _table(value: object, where: str) -> dict[str, object]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ReleaseTrainError(f"{where} is not a table")
    return {str(key): item for key, item in value.items()}


def _strings(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ReleaseTrainError(f"{where} is not a list of strings")
    return tuple(value)


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ReleaseTrainError(f"{where} is missing or not a string")
    return value


def _import_packages(directory: Path, tool: dict[str, object], where: str) -> tuple[str, ...]:
    hatch = _table(tool.get("hatch"), f"{where} [tool.hatch]")
    build = _table(_table(hatch.get("build"), where).get("targets"), where)
    declared = _strings(
        _table(build.get("wheel"), where).get("packages"), f"{where} wheel packages"
    )
    if declared:
        return tuple(PurePosixPath(path).name for path in declared)
    return tuple(sorted(init.parent.name for init in (directory / "src").glob("*/__init__.py")))


def _member(root: Path, directory: Path) -> WorkspaceMember:
    pyproject = directory / "pyproject.toml"
    document = _load(pyproject)
    project = _table(document.get("project"), f"{pyproject} [project]")
    where = f"{pyproject} [project]"
    entry_points = _table(project.get("entry-points"), f"{where} entry-points")
    optional = _table(project.get("optional-dependencies"), f"{where} optional-dependencies")
    return WorkspaceMember(
        root=root,
        directory=directory,
        name=_string(project.get("name"), f"{where} name"),
        version=_string(project.get("version"), f"{where} version"),
        requires_python=_string(project.get("requires-python"), f"{where} requires-python"),
        dependencies=_strings(project.get("dependencies"), f"{where} dependencies"),
        optional_dependencies={
            extra: _strings(requirements, f"{where} optional-dependencies.{extra}")
            for extra, requirements in optional.items()
        },
        scenario_runners=tuple(
            _table(entry_points.get(SCENARIO_RUNNER_GROUP), f"{where} entry-points")
        ),
        console_scripts=tuple(_table(project.get("scripts"), f"{where} scripts")),
        import_packages=_import_packages(directory, _table(document.get("tool"), where), where),
    )


def workspace_members(root: Path = REPOSITORY_ROOT) -> tuple[WorkspaceMember, ...]:
    """Every member the root ``[tool.uv.workspace]`` names, sorted by directory.

    Raises:
        ReleaseTrainError: The root has no workspace, or a member's ``pyproject.toml`` lacks a
            name, version or ``requires-python``.
    """
    pyproject = root / "pyproject.toml"
    uv = _table(_table(_load(pyproject).get("tool"), f"{pyproject} [tool]").get("uv"), "[tool.uv]")
    workspace = _table(uv.get("workspace"), f"{pyproject} [tool.uv.workspace]")
    patterns = _strings(workspace.get("members"), f"{pyproject} [tool.uv.workspace] members")
    if not patterns:
        raise ReleaseTrainError(f"{pyproject} has no [tool.uv.workspace] members")
    excluded = {
        path
        for pattern in _strings(workspace.get("exclude"), f"{pyproject} [tool.uv.workspace]")
        for path in root.glob(pattern)
    }
    directories = {
        path
        for pattern in patterns
        for path in root.glob(pattern)
        if (path / "pyproject.toml").is_file() and path not in excluded
    }
    return tuple(_member(root, directory) for directory in sorted(directories))


def published_packages(root: Path = REPOSITORY_ROOT) -> tuple[WorkspaceMember, ...]:
    """The members under ``packages/``: what the release train builds and releases."""
    return tuple(member for member in workspace_members(root) if member.published)

"""One version line: every member carries the core's version and pins the line's packages to it.

The first test is the check itself, on this repository: it fails as soon as a package's version,
an adapter's ``dex-agents==`` pin or a ``__version__`` string drifts. The others show that it
does, on a copy of the workspace's ``pyproject.toml`` files with one thing changed.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from release_train import REPOSITORY_ROOT, ReleaseTrainError, published_packages, workspace_members
from release_train._compatibility import COMPATIBILITY_HEADING, compatibility_table
from release_train._version_line import version_line, workspace_line_problems


def test_every_member_is_on_the_line_of_dex_agents() -> None:
    members = workspace_members()

    assert workspace_line_problems(members) == ()
    assert {member.version for member in members} == {version_line(members)}


def test_members_are_found_from_the_workspace_and_only_packages_are_published() -> None:
    members = workspace_members()
    package_dirs = {p.parent for p in (REPOSITORY_ROOT / "packages").glob("*/pyproject.toml")}

    assert {member.directory for member in published_packages()} == package_dirs
    assert {"dex-agents", "dex-local-engine"} <= {member.name for member in members}
    not_published = [member for member in members if not member.published]
    assert not_published and all(m.relative.parts[0] == "examples" for m in not_published)
    for member in members:
        requires_core = any(re.match(r"dex-agents\b(?!-)", d) for d in member.dependencies)
        assert member.is_adapter == (member.published and requires_core), member.name


def _copy_workspace(destination: Path) -> Path:
    """The root and every member's ``pyproject.toml`` and ``src/*/__init__.py``."""
    shutil.copy(REPOSITORY_ROOT / "pyproject.toml", destination / "pyproject.toml")
    for member in workspace_members():
        target = destination / member.relative
        target.mkdir(parents=True)
        shutil.copy(member.directory / "pyproject.toml", target / "pyproject.toml")
        for init in (member.directory / "src").glob("*/__init__.py"):
            (target / "src" / init.parent.name).mkdir(parents=True)
            shutil.copy(init, target / "src" / init.parent.name / "__init__.py")
    return destination


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path} no longer has {old!r}"
    path.write_text(text.replace(old, new, 1))


def test_a_drifted_version_a_loose_pin_and_a_stale_version_string_are_each_named(
    tmp_path: Path,
) -> None:
    root = _copy_workspace(tmp_path)
    line = version_line(workspace_members())
    first, second = [m for m in published_packages(root) if m.is_adapter][:2]
    core_init = root / "packages" / "core" / "src" / "dex_agents" / "__init__.py"
    _edit(first.directory / "pyproject.toml", f'version = "{line}"', 'version = "0.2.9"')
    _edit(second.directory / "pyproject.toml", f'"dex-agents=={line}"', '"dex-agents>=0.3"')
    _edit(core_init, f'__version__ = "{line}"', '__version__ = "0.2.0"')

    problems = workspace_line_problems(workspace_members(root))

    assert problems == (
        f"{first.name} is 0.2.9, not on the {line} line of dex-agents",
        f"{second.name} requires dex-agents>=0.3; pin it to dex-agents=={line}",
        f"packages/core/src/dex_agents/__init__.py sets __version__ = '0.2.0', not the {line} line",
    )


def test_a_bumped_core_moves_the_line_and_leaves_every_other_member_behind(tmp_path: Path) -> None:
    root = _copy_workspace(tmp_path)
    line = version_line(workspace_members())
    _edit(root / "packages" / "core" / "pyproject.toml", f'version = "{line}"', 'version = "9.0.0"')

    members = workspace_members(root)
    problems = workspace_line_problems(members)

    assert version_line(members) == "9.0.0"
    behind = {m.name for m in members if m.name != "dex-agents"}
    assert {p.split(" is ")[0] for p in problems if " is " in p} == behind
    assert any("__version__" in problem for problem in problems)


def test_a_workspace_without_the_core_has_no_line(tmp_path: Path) -> None:
    root = _copy_workspace(tmp_path)
    shutil.rmtree(root / "packages" / "core")

    with pytest.raises(ReleaseTrainError, match="no workspace member is dex-agents"):
        version_line(workspace_members(root))


def test_the_root_readme_carries_the_compatibility_table_of_the_pyprojects() -> None:
    readme = (REPOSITORY_ROOT / "README.md").read_text()
    expected = compatibility_table(workspace_members())

    assert COMPATIBILITY_HEADING in readme
    section = readme.split(COMPATIBILITY_HEADING, 1)[1].split("\n## ", 1)[0]
    assert expected in section, (
        "the README's compatibility table differs from the pyprojects; put this one in its "
        f"'{COMPATIBILITY_HEADING}' section (PYTHONPATH=scripts uv run python -m release_train "
        f"compatibility-table):\n{expected}"
    )

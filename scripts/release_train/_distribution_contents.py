"""What a built wheel or sdist must not carry: test files and workspace-only paths.

A wheel holds the member's import packages and its ``.dist-info`` only. Test files are paths under
a ``tests``/``test`` directory and modules named ``test_*.py``, ``*_test.py`` or ``conftest.py``.
Testing support that ships on purpose (``dex_agents.testing``, an adapter's ``testing``
package) is neither. Workspace-only paths are what works only inside this
checkout: a requirement with a direct reference (``dex-agents @ file:///...``, which a
``{ workspace = true }`` source or a path dependency leaves in metadata), a ``file://`` URL in the
metadata, and the repository's absolute path in any file. The metadata must be on the line too:
the member's name and version, and ``==<line>`` pins on the other packages of the line.

An sdist is the source: it carries the tests, and its ``pyproject.toml`` keeps ``[tool.uv.sources]``
(uv ignores a workspace source outside the workspace), but its ``PKG-INFO`` must be as clean as a
wheel's metadata and no file may name the repository's path.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from email.message import Message
from email.parser import Parser
from pathlib import Path, PurePosixPath

from dex_agents._release_line import LineDistribution, line_problems, parse_requirement
from packaging.utils import canonicalize_name

from release_train._workspace import WorkspaceMember

__all__ = ["is_test_file", "sdist_problems", "wheel_problems"]

_TEST_DIRECTORIES = frozenset({"tests", "test"})


def is_test_file(path: PurePosixPath) -> bool:
    """Whether ``path`` (inside a distribution) is a test file rather than shipped code."""
    name = path.name
    return (
        any(part in _TEST_DIRECTORIES for part in path.parts[:-1])
        or name == "conftest.py"
        or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")))
    )


def _metadata_problems(
    label: str, member: WorkspaceMember, headers: Message, line: str
) -> Iterator[str]:
    name, version = headers.get("Name", ""), headers.get("Version", "")
    if canonicalize_name(name) != canonicalize_name(member.name) or version != member.version:
        yield f"{label} is {name} {version}, but {member.relative} declares {member.name} {member.version}"
    requirements = tuple(headers.get_all("Requires-Dist") or ())
    for text in requirements:
        requirement = parse_requirement(text, label)
        if requirement.url is not None:
            yield f"{label} requires {text}: a direct reference works only in this checkout"
    for header, value in headers.items():
        if "file://" in value:
            yield f"{label} metadata {header} names a file:// URL: {value}"
    yield from line_problems([LineDistribution(f"{label}", version, requirements)], line)


def _path_problems(label: str, files: Iterable[tuple[str, bytes]], root: Path) -> Iterator[str]:
    needle = str(root).encode()
    for path, content in files:
        if needle in content:
            yield f"{label} {path} names this checkout's path {root}"


def _entry_point_problems(
    label: str, entry_points: str, paths: set[PurePosixPath]
) -> Iterator[str]:
    for line in entry_points.splitlines():
        if "=" not in line or line.lstrip().startswith(("[", "#")):
            continue
        module = line.split("=", 1)[1].split(":", 1)[0].strip()
        stem = PurePosixPath(*module.split("."))
        if stem.with_suffix(".py") not in paths and stem / "__init__.py" not in paths:
            yield f"{label} entry point {line.strip()!r} names a module the wheel does not carry"


def wheel_problems(wheel: Path, member: WorkspaceMember, line: str) -> tuple[str, ...]:
    """What is wrong with the built ``wheel`` of ``member``, one sentence per problem."""
    label = wheel.name
    with zipfile.ZipFile(wheel) as archive:
        files = [
            (info.filename, archive.read(info)) for info in archive.infolist() if not info.is_dir()
        ]
    paths = {PurePosixPath(path) for path, _ in files}
    info_dirs = {path.parts[0] for path in paths if path.parts[0].endswith(".dist-info")}
    problems = [
        f"{label} carries the test file {path}" for path in sorted(paths) if is_test_file(path)
    ]
    allowed = {*member.import_packages, *info_dirs}
    problems += (
        f"{label} carries {path}, outside the packages {', '.join(member.import_packages)}"
        for path in sorted(paths)
        if path.parts[0] not in allowed
    )
    if len(info_dirs) != 1:
        return (*problems, f"{label} has {len(info_dirs)} .dist-info directories, not 1")
    (info,) = info_dirs
    contents = dict(files)
    if f"{info}/direct_url.json" in contents:
        problems.append(f"{label} carries {info}/direct_url.json, which only an install writes")
    headers = Parser().parsestr(contents.get(f"{info}/METADATA", b"").decode())
    problems += _metadata_problems(label, member, headers, line)
    problems += _entry_point_problems(
        label, contents.get(f"{info}/entry_points.txt", b"").decode(), paths
    )
    problems += _path_problems(label, files, member.root)
    return tuple(problems)


def sdist_problems(sdist: Path, member: WorkspaceMember, line: str) -> tuple[str, ...]:
    """What is wrong with the built ``sdist`` of ``member``, one sentence per problem."""
    label = sdist.name
    with tarfile.open(sdist) as archive:
        files = []
        for entry in archive.getmembers():
            handle = archive.extractfile(entry) if entry.isfile() else None
            if handle is not None:
                files.append((entry.name, handle.read()))
    contents = {
        PurePosixPath(path).relative_to(PurePosixPath(path).parts[0]): data for path, data in files
    }
    problems = [
        f"{label} lacks {required}"
        for required in ("PKG-INFO", "pyproject.toml", "README.md")
        if PurePosixPath(required) not in contents
    ]
    headers = Parser().parsestr(contents.get(PurePosixPath("PKG-INFO"), b"").decode())
    problems += _metadata_problems(label, member, headers, line)
    problems += _path_problems(label, files, member.root)
    return tuple(problems)

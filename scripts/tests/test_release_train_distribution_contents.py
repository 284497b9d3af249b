"""The wheel and sdist checks flag test files and workspace-only paths, and nothing shipped on purpose.

The wheels here are real zip files laid out as hatchling lays out ours; the release check runs
the same checks on the wheels ``uv build`` makes.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path, PurePosixPath

from release_train import REPOSITORY_ROOT, published_packages
from release_train._distribution_contents import is_test_file, sdist_problems, wheel_problems
from release_train._version_line import version_line
from release_train._workspace import WorkspaceMember, workspace_members

LINE = version_line(workspace_members())


def _adapter() -> WorkspaceMember:
    member = next(m for m in published_packages() if m.is_adapter)
    return replace(member, name="dex-agents-example", import_packages=("dex_agents_example",))


def _metadata(*requirements: str, name: str = "dex-agents-example") -> str:
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {LINE}"]
    lines += (f"Requires-Dist: {requirement}" for requirement in requirements)
    return "\n".join(lines) + "\n\n# dex-agents-example\n"


def _wheel(tmp_path: Path, files: dict[str, str], metadata: str | None = None) -> Path:
    wheel = tmp_path / f"dex_agents_example-{LINE}-py3-none-any.whl"
    info = f"dex_agents_example-{LINE}.dist-info"
    entry_points = (
        "[dex_agents.scenario_runners]\nexample = dex_agents_example._scenario_runner:RUNNER\n"
    )
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{info}/METADATA", metadata or _metadata(f"dex-agents=={LINE}"))
        archive.writestr(f"{info}/entry_points.txt", entry_points)
        archive.writestr(f"{info}/RECORD", "")
    return wheel


SHIPPED = {
    "dex_agents_example/__init__.py": '"""An adapter."""\n',
    "dex_agents_example/_scenario_runner.py": "from dex_agents.testing.scenarios import X\n",
    "dex_agents_example/testing.py": '"""Testing support shipped on purpose."""\n',
}


def test_a_wheel_of_shipped_modules_and_testing_support_has_no_problem(tmp_path: Path) -> None:
    assert wheel_problems(_wheel(tmp_path, SHIPPED), _adapter(), LINE) == ()


def test_test_files_in_a_wheel_are_each_named(tmp_path: Path) -> None:
    files = {
        **SHIPPED,
        "dex_agents_example/tests/helpers.py": "",
        "dex_agents_example/test_runner.py": "",
        "dex_agents_example/runner_test.py": "",
        "dex_agents_example/conftest.py": "",
        "tests/test_other.py": "",
    }

    problems = wheel_problems(_wheel(tmp_path, files), _adapter(), LINE)

    name = f"dex_agents_example-{LINE}-py3-none-any.whl"
    assert [p for p in problems if "test file" in p] == [
        f"{name} carries the test file {path}"
        for path in sorted(
            [
                "dex_agents_example/conftest.py",
                "dex_agents_example/runner_test.py",
                "dex_agents_example/test_runner.py",
                "dex_agents_example/tests/helpers.py",
                "tests/test_other.py",
            ]
        )
    ]
    assert (
        f"{name} carries tests/test_other.py, outside the packages dex_agents_example" in problems
    )


def test_workspace_only_paths_in_a_wheel_are_each_named(tmp_path: Path) -> None:
    core = REPOSITORY_ROOT / "packages" / "core"
    files = {
        **SHIPPED,
        "dex_agents_example/_paths.py": f'ENGINE = "{REPOSITORY_ROOT}/packages/local-engine"\n',
    }
    metadata = _metadata(f"dex-agents @ file://{core}", "langgraph<1.3,>=1.2")

    problems = wheel_problems(_wheel(tmp_path, files, metadata), _adapter(), LINE)

    name = f"dex_agents_example-{LINE}-py3-none-any.whl"
    assert (
        f"{name} requires dex-agents @ file://{core}: a direct reference works only in this checkout"
        in problems
    )
    assert (
        f"{name} metadata Requires-Dist names a file:// URL: dex-agents @ file://{core}" in problems
    )
    assert f"{name} requires dex-agents @ file://{core}; pin it to dex-agents=={LINE}" in problems
    assert (
        f"{name} dex_agents_example/_paths.py names this checkout's path {REPOSITORY_ROOT}"
        in problems
    )
    assert (
        f"{name} dex_agents_example-{LINE}.dist-info/METADATA names this checkout's path"
        in "\n".join(problems)
    )


def test_a_wheel_off_the_line_or_missing_its_entry_point_module_is_named(tmp_path: Path) -> None:
    files = {key: text for key, text in SHIPPED.items() if "_scenario_runner" not in key}
    metadata = _metadata("dex-agents==0.2.0", name="dex-agents-other")

    problems = wheel_problems(_wheel(tmp_path, files, metadata), _adapter(), LINE)

    name = f"dex_agents_example-{LINE}-py3-none-any.whl"
    assert problems == (
        f"{name} is dex-agents-other {LINE}, but {_adapter().relative} declares "
        f"dex-agents-example {LINE}",
        f"{name} requires dex-agents==0.2.0; pin it to dex-agents=={LINE}",
        f"{name} entry point 'example = dex_agents_example._scenario_runner:RUNNER' names a "
        "module the wheel does not carry",
    )


def _sdist(tmp_path: Path, files: dict[str, str]) -> Path:
    sdist = tmp_path / f"dex_agents_example-{LINE}.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for path, text in files.items():
            data = text.encode()
            entry = tarfile.TarInfo(f"dex_agents_example-{LINE}/{path}")
            entry.size = len(data)
            archive.addfile(entry, io.BytesIO(data))
    return sdist


def test_an_sdist_carries_its_tests_but_no_checkout_path_and_clean_metadata(tmp_path: Path) -> None:
    files = {
        "PKG-INFO": _metadata(f"dex-agents=={LINE}"),
        "pyproject.toml": "[tool.uv.sources]\ndex-agents = { workspace = true }\n",
        "README.md": "# dex-agents-example\n",
        "src/dex_agents_example/__init__.py": "",
        "tests/test_example.py": "",
    }
    assert sdist_problems(_sdist(tmp_path, files), _adapter(), LINE) == ()

    files["src/dex_agents_example/__init__.py"] = f"ROOT = {str(REPOSITORY_ROOT)!r}\n"
    del files["README.md"]
    problems = sdist_problems(_sdist(tmp_path, files), _adapter(), LINE)

    name = f"dex_agents_example-{LINE}.tar.gz"
    assert problems == (
        f"{name} lacks README.md",
        f"{name} dex_agents_example-{LINE}/src/dex_agents_example/__init__.py names this "
        f"checkout's path {REPOSITORY_ROOT}",
    )


def test_test_files_are_told_apart_from_testing_support() -> None:
    shipped = ["dex_agents/testing/file_gate.py", "dex_agents/testing/scenarios/scenario_runner.py"]
    shipped += ["dex_agents_x/_scenario_runner.py", "dex_agents/contest.py", "dex_agents/tester.py"]
    tests = ["pkg/tests/x.py", "pkg/test/x.py", "pkg/test_x.py", "pkg/x_test.py", "conftest.py"]

    assert not any(is_test_file(PurePosixPath(path)) for path in shipped)
    assert all(is_test_file(PurePosixPath(path)) for path in tests)

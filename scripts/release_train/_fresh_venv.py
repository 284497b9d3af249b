"""One published package installed alone from the built wheels into a fresh venv, and run there.

The venv comes from ``uv venv --seed`` (a plain venv with pip in it, made in a second); the
install is pip's: ``pip install --no-compile --find-links dist/ "<name>[<its extras>]==<line>"``,
so pip resolves the package's requirements as a user's pip would, taking our packages from
``dist/`` (they are not on PyPI) and third-party ones from the configured index through pip's own
cache, which the venvs share. It compiles no bytecode at install time: the venv is thrown away,
and Python writes the bytecode of what the checks import, a fraction of what pip would compile.
pip's ``--report`` then proves that every package of the line came from ``dist/``. In the venv:
``pip check``, every module of the package imported from the venv with ``python -I`` (no
``PYTHONPATH``, no working directory on ``sys.path``), each console script's ``--help``,
``dex-agents doctor``, and for an adapter its README example, which runs against that venv's
``dex-local-engine``.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from dex_agents._release_line import is_line_distribution

from release_train._commands import CommandResult, run_logged, venv_environment
from release_train._readme_example import EXAMPLE_HEADINGS, ReadmeExample, readme_example
from release_train._workspace import WorkspaceMember

__all__ = ["FreshVenvResult", "check_in_fresh_venv"]

_INSTALL_TIMEOUT = 1200.0
_COMMAND_TIMEOUT = 300.0
_ENGINE_STARTUP_TIMEOUT = 60.0
_READY_LINE = re.compile(r"^dex-local-engine ready on (\S+)\s*$", re.MULTILINE)

# Runs in the venv with -I: imports every module of the named packages and says where they came
# from, so a module that needs a workspace-only file, or one found outside the venv, shows.
_IMPORT_EVERY_MODULE = """
import importlib, json, pkgutil, sys, traceback
failures, outside, count, versions = {}, [], 0, {}
for top in sys.argv[1:]:
    try:
        package = importlib.import_module(top)
    except BaseException:
        failures[top] = traceback.format_exc(limit=-3)
        continue
    versions[top] = getattr(package, "__version__", None)
    names = [top] + [m.name for m in pkgutil.walk_packages(package.__path__, top + ".", lambda n: None)]
    for name in names:
        try:
            module = importlib.import_module(name)
        except BaseException:
            failures[name] = traceback.format_exc(limit=-3)
            continue
        count += 1
        if not (getattr(module, "__file__", None) or "").startswith(sys.prefix):
            outside.append(f"{name} from {getattr(module, '__file__', None)}")
print(json.dumps({"modules": count, "failures": failures, "outside": outside, "versions": versions}))
"""


@dataclass(frozen=True)
class FreshVenvResult:
    """What one package's fresh venv showed: its problems and how long each step took."""

    member: WorkspaceMember
    installed: tuple[str, ...]
    modules: int
    example: str | None
    problems: tuple[str, ...]
    timings: tuple[tuple[str, float], ...]


@dataclass
class _Venv:
    member: WorkspaceMember
    line: str
    dist: Path
    directory: Path
    problems: list[str]
    timings: list[tuple[str, float]]

    @property
    def bin(self) -> Path:
        return self.directory / "venv" / "bin"

    def run(self, step: str, command: list[str], *, cwd: Path | None = None) -> CommandResult:
        result = run_logged(
            command,
            self.directory / f"{step.replace(' ', '-')}.log",
            cwd=cwd or self.directory,
            timeout=_INSTALL_TIMEOUT if step == "pip install" else _COMMAND_TIMEOUT,
            env=venv_environment(self.directory / "venv"),
        )
        self.timings.append((step, result.seconds))
        if not result.ok:
            self.problems.append(f"{self.member.name}: " + result.failure(step))
        return result


def _requirement(member: WorkspaceMember, line: str) -> str:
    extras = ",".join(sorted(member.optional_dependencies))
    return f"{member.name}[{extras}]=={line}" if extras else f"{member.name}=={line}"


def _installed(venv: _Venv, report: Path) -> bool:
    """``pip install`` of the package alone, our packages from ``dist/``, without compiling."""
    install = [str(venv.bin / "python"), "-m", "pip", "install", "--progress-bar", "off"]
    install += ["--no-compile", "--find-links", str(venv.dist), "--report", str(report)]
    return venv.run("pip install", [*install, _requirement(venv.member, venv.line)]).ok


def _installed_from_dist(venv: _Venv, report: Path) -> tuple[str, ...]:
    """The line's packages pip installed, each checked to come from ``dist/`` on the line."""
    installed = []
    dist_url = venv.dist.resolve().as_uri() + "/"
    for item in json.loads(report.read_text())["install"]:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if not is_line_distribution(name):
            continue
        installed.append(f"{name} {version}")
        url = item.get("download_info", {}).get("url", "")
        if not url.startswith(dist_url):
            venv.problems.append(f"{venv.member.name}: pip installed {name} from {url}, not dist/")
        if version != venv.line:
            venv.problems.append(
                f"{venv.member.name}: pip installed {name} {version}, not {venv.line}"
            )
    return tuple(sorted(installed))


def _imported_modules(venv: _Venv) -> int:
    result = venv.run(
        "import every module",
        [str(venv.bin / "python"), "-I", "-c", _IMPORT_EVERY_MODULE, *venv.member.import_packages],
    )
    if not result.ok:
        return 0
    report = json.loads(result.log.read_text().strip().splitlines()[-1])
    for name, failure in report["failures"].items():
        venv.problems.append(f"{venv.member.name}: import {name} fails in the venv:\n{failure}")
    for where in report["outside"]:
        venv.problems.append(f"{venv.member.name}: {where} is not the venv's")
    for package, version in report["versions"].items():
        if version is not None and version != venv.line:
            venv.problems.append(f"{package}.__version__ is {version!r}, not {venv.line}")
    return int(report["modules"])


class _Engine:
    """The venv's ``dex-local-engine serve`` on a free port, for a README example to reach."""

    def __init__(self, venv: _Venv, directory: Path) -> None:
        self._log = directory / "engine.log"
        command = [str(venv.bin / "dex-local-engine"), "serve", "--address", "127.0.0.1:0"]
        command += ["--database", str(directory / "engine.db")]
        with self._log.open("wb") as output:
            self._process = subprocess.Popen(
                command,
                cwd=directory,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=venv_environment(venv.directory / "venv"),
            )

    def address(self) -> str | None:
        deadline = time.monotonic() + _ENGINE_STARTUP_TIMEOUT
        while time.monotonic() < deadline and self._process.poll() is None:
            ready = _READY_LINE.search(self._log.read_text(errors="replace"))
            if ready is not None:
                return ready.group(1)
            time.sleep(0.1)
        return None

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def _run_example(venv: _Venv, example: ReadmeExample) -> None:
    directory = venv.directory / "example"
    directory.mkdir()
    script = directory / "readme_example.py"
    engine = _Engine(venv, directory) if example.needs_engine else None
    try:
        address = engine.address() if engine is not None else None
        if engine is not None and address is None:
            venv.problems.append(
                f"{venv.member.name}: the venv's dex-local-engine printed no ready line within "
                f"{_ENGINE_STARTUP_TIMEOUT:g} s (see {directory / 'engine.log'})"
            )
            return
        script.write_text(example.connected_to(address) if address else example.source)
        venv.run("README example", [str(venv.bin / "python"), "-I", script.name], cwd=directory)
    finally:
        if engine is not None:
            engine.stop()


def check_in_fresh_venv(
    member: WorkspaceMember, line: str, dist: Path, directory: Path, python: str
) -> FreshVenvResult:
    """Install ``member`` alone from ``dist`` into a venv in ``directory`` and check it there.

    ``python`` is the interpreter the venv is made from.
    """
    directory.mkdir(parents=True)
    venv = _Venv(member, line, dist, directory, [], [])
    installed: tuple[str, ...] = ()
    modules = 0
    example = readme_example(member.readme) if member.readme.is_file() else None
    if member.is_adapter and example is None:
        headings = " or ".join(f"'## {heading}'" for heading in EXAMPLE_HEADINGS)
        venv.problems.append(
            f"{member.name}: {member.relative}/README.md has no {headings} section with a "
            "```python block: an adapter's README carries a complete example the release check runs"
        )
    created = venv.run(
        "uv venv", ["uv", "venv", "--quiet", "--seed", "--python", python, str(directory / "venv")]
    )
    report = directory / "pip-report.json"
    if created.ok and _installed(venv, report):
        installed = _installed_from_dist(venv, report)
        venv.run("pip check", [str(venv.bin / "python"), "-m", "pip", "check"])
        modules = _imported_modules(venv)
        for script in member.console_scripts:
            venv.run(f"{script} --help", [str(venv.bin / script), "--help"])
        if any(text.startswith("dex-agents ") for text in installed):
            venv.run("dex-agents doctor", [str(venv.bin / "dex-agents"), "doctor"])
        if example is not None:
            _run_example(venv, example)
    return FreshVenvResult(
        member,
        installed,
        modules,
        example.heading if example else None,
        tuple(venv.problems),
        tuple(venv.timings),
    )

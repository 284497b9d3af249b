"""Running the release train's commands: each one's output in a log file, its tail on failure."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CommandResult", "log_tail", "run_logged", "venv_environment"]

_TAIL_LINES = 40
_OFFLINE_LITELLM = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}


@dataclass(frozen=True)
class CommandResult:
    """How one command ended: its status, its log and how long it took."""

    command: tuple[str, ...]
    returncode: int
    log: Path
    seconds: float

    @property
    def ok(self) -> bool:
        """Whether it exited 0."""
        return self.returncode == 0

    def failure(self, what: str) -> str:
        """``what`` failed: the command, its status and the tail of its output."""
        return (
            f"{what} exited {self.returncode}: {' '.join(self.command)}\n"
            f"{log_tail(self.log)}\n(whole output: {self.log})"
        )


def log_tail(log: Path, lines: int = _TAIL_LINES) -> str:
    """The last ``lines`` lines of ``log``, indented."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\n".join(f"    {line}" for line in text.splitlines()[-lines:])


def run_logged(
    command: Sequence[str],
    log: Path,
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run ``command`` with its stdout and stderr in ``log``; a timeout is status -9."""
    started = time.monotonic()
    with log.open("wb") as output:
        try:
            completed = subprocess.run(
                list(command),
                cwd=cwd,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                env=None if env is None else dict(env),
                check=False,
            )
            returncode = completed.returncode
        except subprocess.TimeoutExpired:
            output.write(f"\n(killed after {timeout:g} s)\n".encode())
            returncode = -9
    return CommandResult(tuple(command), returncode, log, time.monotonic() - started)


def venv_environment(venv: Path) -> dict[str, str]:
    """This process's environment for a command of ``venv``, with nothing of the workspace's.

    The venv's ``bin`` leads ``PATH``; ``PYTHONPATH``, ``VIRTUAL_ENV`` and uv's project variables
    are dropped, so nothing resolves to this checkout. ``PYTHONDONTWRITEBYTECODE`` is dropped too:
    pip installs without compiling, so Python writes the bytecode of what runs, once, as it does
    for a user. LiteLLM reads its bundled model cost map instead of fetching it (three tries with
    pauses when offline), as the workspace's tests have it.
    """
    dropped = {
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONDONTWRITEBYTECODE",
        "VIRTUAL_ENV",
        "UV_PROJECT_ENVIRONMENT",
        "CONDA_PREFIX",
    }
    environment = {key: value for key, value in os.environ.items() if key not in dropped}
    environment["PATH"] = os.pathsep.join([str(venv / "bin"), environment.get("PATH", "")])
    environment["VIRTUAL_ENV"] = str(venv)
    environment.update(_OFFLINE_LITELLM)
    return environment

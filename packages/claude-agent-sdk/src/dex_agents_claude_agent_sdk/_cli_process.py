"""The Claude Code CLI child of a ``RunModel``: started through a launcher that ties its life to
the Worker, and killed the moment the harness has what it needs.

The launcher asks Linux to SIGKILL the CLI when the Worker process dies (``PR_SET_PDEATHSIG``),
so a Worker killed mid-turn leaves no CLI behind, and writes the CLI's PID to a file, so the
harness can end the CLI at once instead of waiting for it to wind down.

A Worker SIGKILLed mid-turn never runs its cleanup, so the temporary directories of a turn and of
the launcher are the kit's ``owned_temp_directory``: named for their process, and removed by a
later process once theirs is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Final

import claude_agent_sdk
from dex_agents.adapters import owned_temp_directory

__all__ = [
    "bundled_cli_path",
    "kill_cli",
    "launcher_environment",
    "launcher_path",
]


class _LauncherEnvironment(StrEnum):
    """What the launcher reads from its environment (``launcher_environment``)."""

    PARENT_PID = "DEX_AGENTS_CLI_PARENT_PID"
    """The Worker's PID: the launcher exits if its parent is another process by then."""
    CLI_PATH = "DEX_AGENTS_CLI_PATH"
    """The real CLI, which the launcher becomes (``execv``)."""
    PID_FILE = "DEX_AGENTS_CLI_PID_FILE"
    """Where the launcher writes its PID, the CLI's, for ``kill_cli``."""


TURN_DIRECTORY_PREFIX: Final = "dex-agents-claude-"
_LAUNCHER_DIRECTORY_PREFIX: Final = "dex-agents-cli-launcher-"

_LAUNCHER_BODY: Final = f"""
import ctypes, os, signal, sys
if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
if os.getppid() != int(os.environ["{_LauncherEnvironment.PARENT_PID}"]):
    sys.exit("dex-agents: the Worker exited before its Claude Code CLI started")
with open(os.environ["{_LauncherEnvironment.PID_FILE}"], "w") as pid_file:
    pid_file.write(str(os.getpid()))
cli = os.environ["{_LauncherEnvironment.CLI_PATH}"]
os.execv(cli, [cli, *sys.argv[1:]])
"""


def bundled_cli_path() -> str:
    """The Claude Code CLI that the claude-agent-sdk wheel bundles."""
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    if not path.exists():
        raise FileNotFoundError(
            f"the claude-agent-sdk install has no bundled Claude Code CLI at {path}; "
            "pass cli_path= to the runner"
        )
    return str(path)


@cache
def launcher_path() -> str:
    """An executable that runs the CLI named in the environment, orphan-guarded (one per process)."""
    directory = owned_temp_directory(_LAUNCHER_DIRECTORY_PREFIX)
    path = directory / "claude"
    path.write_text(f"#!{sys.executable}\n{_LAUNCHER_BODY}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def launcher_environment(cli_path: str, pid_file: Path) -> dict[str, str]:
    """What the launcher reads: this process's PID, the real CLI, and where to write its PID."""
    return {
        _LauncherEnvironment.PARENT_PID: str(os.getpid()),
        _LauncherEnvironment.CLI_PATH: cli_path,
        _LauncherEnvironment.PID_FILE: str(pid_file),
    }


def kill_cli(pid_file: Path) -> None:
    """SIGKILL the CLI whose PID the launcher wrote, if it still runs."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)

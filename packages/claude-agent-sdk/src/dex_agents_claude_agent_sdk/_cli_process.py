"""The Claude Code CLI child of a ``RunModel``: started through a launcher that ties its life to
the Worker, and killed the moment the harness has what it needs.

The launcher asks Linux to SIGKILL the CLI when the Worker process dies (``PR_SET_PDEATHSIG``),
so a Worker killed mid-turn leaves no CLI behind, and writes the CLI's PID to a file, so the
harness can end the CLI at once instead of waiting for it to wind down.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Final

import claude_agent_sdk

__all__ = ["bundled_cli_path", "kill_cli", "launcher_environment", "launcher_path"]

PARENT_PID_ENV: Final = "DEX_AGENTS_CLI_PARENT_PID"
CLI_PATH_ENV: Final = "DEX_AGENTS_CLI_PATH"
PID_FILE_ENV: Final = "DEX_AGENTS_CLI_PID_FILE"

_LAUNCHER_BODY: Final = f"""
import ctypes, os, signal, sys
if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
if os.getppid() != int(os.environ["{PARENT_PID_ENV}"]):
    sys.exit("dex-agents: the Worker exited before its Claude Code CLI started")
with open(os.environ["{PID_FILE_ENV}"], "w") as pid_file:
    pid_file.write(str(os.getpid()))
cli = os.environ["{CLI_PATH_ENV}"]
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
    directory = Path(tempfile.mkdtemp(prefix="dex-agents-cli-launcher-"))
    path = directory / "claude"
    path.write_text(f"#!{sys.executable}\n{_LAUNCHER_BODY}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def launcher_environment(cli_path: str, pid_file: Path) -> dict[str, str]:
    """What the launcher reads: this process's PID, the real CLI, and where to write its PID."""
    return {PARENT_PID_ENV: str(os.getpid()), CLI_PATH_ENV: cli_path, PID_FILE_ENV: str(pid_file)}


def kill_cli(pid_file: Path) -> None:
    """SIGKILL the CLI whose PID the launcher wrote, if it still runs."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)

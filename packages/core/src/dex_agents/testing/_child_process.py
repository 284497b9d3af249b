"""Child processes that die with their parent and can be killed as a group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

# Runs before the real command and execs it: on Linux the child asks for SIGKILL when
# the process that started it dies, so a killed test or demo leaves no engine or
# Worker behind holding the database. The parent check closes the race where the
# parent died before prctl ran.
_ORPHAN_GUARD = """
import os, signal, sys
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))
if os.getppid() != int(sys.argv[1]):
    sys.exit("the parent process exited before this child started")
os.execvp(sys.argv[2], sys.argv[2:])
"""


class ChildProcess(Protocol):
    """What the test side uses of a child: a ``subprocess.Popen``, or a child forked by a fork
    server (``dex_agents.testing._fork_server.ForkedProcess``)."""

    @property
    def pid(self) -> int:
        """The process ID."""

    @property
    def returncode(self) -> int | None:
        """The exit status once known (``-N`` for signal ``N``), else ``None``."""

    def poll(self) -> int | None:
        """The exit status, or ``None`` while it runs."""

    def wait(self, timeout: float | None = None) -> int:
        """Wait for it to exit; raises ``subprocess.TimeoutExpired`` after ``timeout`` s."""

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` unless it has exited."""

    def kill(self) -> None:
        """SIGKILL it unless it has exited."""


def orphan_guarded(command: Sequence[str]) -> list[str]:
    """Wrap ``command`` so it is killed when this process dies."""
    return [sys.executable, "-c", _ORPHAN_GUARD, str(os.getpid()), *command]


def start_child(
    command: Sequence[str],
    *,
    stdout_path: Path,
    stderr_path: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    own_process_group: bool = False,
    stdin: int | None = subprocess.DEVNULL,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start ``command`` with its output in files, guarded against orphaning.

    Raises:
        OSError: The command cannot be started.
    """
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    with stdout_path.open("ab") as stdout, stderr_path.open("ab") as stderr:
        return subprocess.Popen(
            orphan_guarded(command),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=own_process_group,
            pass_fds=pass_fds,
        )


def kill_process_group(process: ChildProcess) -> None:
    """SIGKILL ``process`` and its whole process group, and reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def terminate(process: ChildProcess, timeout: float) -> int:
    """SIGTERM ``process``; SIGKILL it when it has not exited after ``timeout`` s.

    Returns:
        The exit status.
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


def tail(path: Path, max_chars: int = 4000) -> str:
    """The end of a log file, for error messages; empty when it does not exist."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return text[-max_chars:].strip()

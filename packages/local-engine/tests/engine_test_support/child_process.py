"""A child process in its own process group, with its stdout read line by line.

The base of :class:`~engine_test_support.engine_process.EngineProcess` and
:class:`~engine_test_support.worker_process.WorkerProcess`: it starts the command in a new session
(so SIGKILL reaches the whole group and nothing else), passes the parent's ``sys.path`` on as
``PYTHONPATH`` (the child imports what the test imports), keeps stderr in a log file, and lets a
test wait for a line on stdout without blocking its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

_EOF = ""


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment, ``PYTHONPATH`` set to the parent's import path, plus ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        entry for entry in sys.path if entry and Path(entry).exists()
    )
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class ChildProcess:
    """A running child process; see the module docstring.

    Args:
        command: argv of the child.
        stderr_path: file receiving the child's stderr (shown when a wait fails).
        env: extra environment entries.
    """

    def __init__(self, command: Sequence[str], stderr_path: Path, env: Mapping[str, str]) -> None:
        self.command = tuple(command)
        self.stderr_path = stderr_path
        stderr_path.parent.mkdir(parents=True, exist_ok=True)
        with stderr_path.open("ab") as stderr:
            self._process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=child_environment(env),
                start_new_session=True,
                text=True,
            )
        self._lines: queue.Queue[str] = queue.Queue()
        self.stdout_lines: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.poll()

    def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self.stdout_lines.append(line.rstrip("\n"))
            self._lines.put(line.rstrip("\n"))
        self._lines.put(_EOF)

    def wait_for_line(self, matches: Callable[[str], bool], timeout: float) -> str:
        """Block until a stdout line satisfies ``matches``; return it.

        Raises:
            RuntimeError: the child exited first (its stderr is in the message).
            TimeoutError: no such line within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"{self.command[0]}: no expected line within {timeout}s; {self.describe()}"
                )
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line == _EOF:
                self._process.wait()
                raise RuntimeError(f"child exited before it was ready; {self.describe()}")
            if matches(line):
                return line

    async def await_line(self, matches: Callable[[str], bool], timeout: float) -> str:
        """Like :meth:`wait_for_line` without blocking the running event loop."""
        return await asyncio.to_thread(self.wait_for_line, matches, timeout)

    def describe(self) -> str:
        """Exit status, stdout and stderr so far, for failure messages."""
        stderr = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return (
            f"pid {self.pid} exit {self.returncode}; stdout: {self.stdout_lines[-20:]!r}; "
            f"stderr tail:\n{stderr[-4000:]}"
        )

    def kill(self) -> None:
        """SIGKILL the child's whole process group and reap it."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM the child, wait up to ``timeout`` seconds, then SIGKILL; return its exit code."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self._process.wait()

    async def aterminate(self, timeout: float = 30.0) -> int:
        """Like :meth:`terminate` without blocking the running event loop."""
        return await asyncio.to_thread(self.terminate, timeout)

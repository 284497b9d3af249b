"""The local engine as a real process: start, SIGKILL, restart on the same database.

It runs ``dex-local-engine serve --address 127.0.0.1:<port> --database <path>`` (the console
script next to the running interpreter, else ``python -m dex_local_engine.cli``) and waits for the
ready line ``dex-local-engine ready on 127.0.0.1:<port>``. A restart reuses the port, so Workers
and Clients that reconnect to the old address find the new process.

Example::

    engine = EngineProcess(tmp_path / "engine.db", tmp_path / "logs")
    address = engine.start()
    engine.kill()
    engine.start()          # same database, same address
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from engine_test_support.child_process import ChildProcess

READY_LINE = re.compile(r"^dex-local-engine ready on (127\.0\.0\.1:\d+)$")
_REBIND_SECONDS = 10.0


def engine_command() -> list[str]:
    """argv prefix that runs the engine's command line with the current interpreter."""
    script = Path(sys.executable).with_name("dex-local-engine")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "dex_local_engine.cli"]


class EngineProcess:
    """One engine database served by successive engine processes.

    Args:
        database: the engine's database file (kept across restarts).
        log_directory: receives each run's stderr.
        extra_args: more ``serve`` arguments, e.g. ``["--durability", "fsync"]``.
        env: extra environment entries.
    """

    def __init__(
        self,
        database: Path,
        log_directory: Path,
        *,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.database = database
        self.log_directory = log_directory
        self.extra_args = tuple(extra_args)
        self.env = dict(env or {})
        self.child: ChildProcess | None = None
        self._address: str | None = None
        self._runs = 0

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>`` of the engine (stable across restarts)."""
        if self._address is None:
            raise RuntimeError("the engine has not been started")
        return self._address

    @property
    def is_running(self) -> bool:
        return self.child is not None and self.child.returncode is None

    def start(self, timeout: float = 60.0) -> str:
        """Start the engine (on the previous port after a restart); return its address.

        A restart retries for up to ``_REBIND_SECONDS`` while the old port is briefly unavailable
        (another process's connection may hold it right after the kill).

        Raises:
            RuntimeError: already running, or the engine exited before its ready line.
            TimeoutError: no ready line within ``timeout`` seconds.
        """
        if self.is_running:
            raise RuntimeError(f"the engine already runs at {self._address}")
        rebind_deadline = time.monotonic() + _REBIND_SECONDS
        while True:
            try:
                return self._start_once(timeout)
            except RuntimeError:
                if self._address is None or time.monotonic() > rebind_deadline:
                    raise
                time.sleep(0.2)

    def _start_once(self, timeout: float) -> str:
        self._runs += 1
        command = [
            *engine_command(),
            "serve",
            "--address",
            self._address or "127.0.0.1:0",
            "--database",
            str(self.database),
            *self.extra_args,
        ]
        stderr = self.log_directory / f"engine-run-{self._runs}.stderr"
        self.child = ChildProcess(command, stderr, self.env)
        line = self.child.wait_for_line(lambda text: READY_LINE.match(text) is not None, timeout)
        match = READY_LINE.match(line)
        assert match is not None
        self._address = match.group(1)
        return self._address

    async def astart(self, timeout: float = 60.0) -> str:
        """Like :meth:`start` without blocking the running event loop."""
        return await asyncio.to_thread(self.start, timeout)

    def kill(self) -> None:
        """SIGKILL the engine process (its process group); the database stays."""
        if self.child is not None:
            self.child.kill()

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM the engine and wait; returns its exit code."""
        if self.child is None:
            raise RuntimeError("the engine has not been started")
        return self.child.terminate(timeout)

    def restart_after_kill(self, timeout: float = 60.0) -> str:
        """SIGKILL the engine and start it again on the same database and address."""
        self.kill()
        return self.start(timeout)

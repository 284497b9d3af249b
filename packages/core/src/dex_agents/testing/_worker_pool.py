"""Worker child processes that many tests share: one per Worker module, directory and environment.

A Worker child spends most of its start importing its agent framework (seconds for some), while a
test's sessions need only its pull queues. Tests that do not kill their Worker therefore share
one child per registry, each test isolated by its own session IDs; a test that kills a Worker
starts its own with ``AgentTestStack.start_worker()``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from dex_agents.testing._worker_process import WorkerProcess

__all__ = ["WorkerPool"]


class WorkerPool:
    """Running Worker children on one engine, keyed by module, directory and environment.

    ``worker()`` returns the running child of a key, starting it on first use and again when it
    has died (so a test that killed a shared Worker by mistake costs the next test only a start).
    ``close()`` kills them all.

    Example:
        >>> pool = WorkerPool("127.0.0.1:7233", tmp_path / "workers")  # doctest: +SKIP
        >>> worker = await pool.worker("tests.my_worker", env={"AGENT": "support"})  # doctest: +SKIP
    """

    def __init__(self, server_address: str, directory: Path) -> None:
        self.server_address = server_address
        self.directory = directory
        self._workers: dict[str, WorkerProcess] = {}

    async def worker(
        self,
        worker_module: str,
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        preload_env: Mapping[str, str] | None = None,
    ) -> WorkerProcess:
        """The running Worker child of ``worker_module`` in ``cwd`` with ``env``; with
        ``preload_env``, forked from a warm parent (see ``WorkerProcess.start``).

        Raises:
            WorkerStartError: The child exited or did not register in time.
        """
        key = json.dumps([worker_module, str(cwd or ""), sorted((env or {}).items())])
        running = self._workers.get(key)
        if running is not None and running.is_running:
            return running
        # pytest runs one test at a time per process, so no two starts of one key overlap.
        worker = await WorkerProcess.start(
            worker_module,
            server_address=self.server_address,
            state_dir=self.directory / f"worker-{len(self._workers) + 1}-{_short(key)}",
            cwd=cwd,
            env=env,
            preload_env=preload_env,
        )
        self._workers[key] = worker
        return worker

    def close(self) -> None:
        """SIGKILL every Worker child of the pool; safe to repeat."""
        for worker in self._workers.values():
            worker.kill()
        self._workers.clear()


def _short(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]

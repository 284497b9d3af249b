"""SDK pull Workers in child processes, which a test can stop gracefully or SIGKILL.

Example::

    worker = await workers.start("engine_test_support.sample_flows:probe_registry", address)
    ...
    worker.kill()            # SIGKILL, mid-Step if a gate holds the handler
    await worker.stop()      # or: SIGTERM, the Worker drains and exits
"""

from __future__ import annotations

import itertools
import sys
import uuid
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TypedDict, Unpack

from engine_test_support.child_process import ChildProcess
from engine_test_support.worker_main import READY_PREFIX


class WorkerMode(StrEnum):
    """Which SDK Worker class runs the Registry."""

    SYNC = "sync"
    """``dex.Worker``: handlers run in a thread pool."""
    ASYNC = "async"
    """``dex.AsyncWorker``: handlers run on an event loop (Registry must allow async handlers)."""


class WorkerProcess:
    """One Worker child process; create it with :meth:`WorkerLauncher.start`."""

    def __init__(self, child: ChildProcess, app_worker_id: str, registry: str) -> None:
        self.child = child
        self.app_worker_id = app_worker_id
        self.registry = registry

    @property
    def pid(self) -> int:
        return self.child.pid

    def kill(self) -> None:
        """SIGKILL the Worker's process group (no drain, no goodbye on its streams)."""
        self.child.kill()

    async def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM: the Worker stops taking tasks, drains running ones and exits. Returns its code."""
        return await self.child.aterminate(timeout)

    def stop_sync(self, timeout: float = 30.0) -> int:
        """Blocking :meth:`stop` (not on the event loop serving the Worker's engine)."""
        return self.child.terminate(timeout)


class WorkerSettings(TypedDict, total=False):
    """How :meth:`WorkerLauncher.spawn` runs a Worker (every key optional)."""

    mode: WorkerMode
    """``WorkerMode.SYNC`` by default."""
    app_worker_id: str | None
    """A fresh ``test-worker-<n>-<hex>`` by default."""
    max_concurrent_tasks: int
    """1 by default, so tests control capacity exactly."""
    reserved_rpc_tasks: int | None
    """The SDK's default by default."""


def _is_ready_line(line: str) -> bool:
    return line.startswith(READY_PREFIX)


class WorkerLauncher:
    """Starts Worker child processes for one test and kills the leftovers at :meth:`close`.

    Args:
        directory: where Workers keep their blob caches and stderr logs.
        env: extra environment for every Worker (gates, invocation log).
    """

    def __init__(self, directory: Path, env: Mapping[str, str]) -> None:
        self.directory = directory
        self.env = dict(env)
        self.workers: list[WorkerProcess] = []
        self._numbers = itertools.count(1)

    def spawn(
        self,
        registry: str,
        server_address: str,
        *,
        mode: WorkerMode = WorkerMode.SYNC,
        app_worker_id: str | None = None,
        max_concurrent_tasks: int = 1,
        reserved_rpc_tasks: int | None = None,
    ) -> WorkerProcess:
        """Start a Worker process without waiting for it; see :meth:`start`."""
        number = next(self._numbers)
        worker_id = app_worker_id or f"test-worker-{number}-{uuid.uuid4().hex[:8]}"
        command = [
            sys.executable,
            "-m",
            "engine_test_support.worker_main",
            "--registry",
            registry,
            "--server",
            server_address,
            "--blob-cache-dir",
            str(self.directory / f"worker-{number}-blobs"),
            "--app-worker-id",
            worker_id,
            "--max-concurrent-tasks",
            str(max_concurrent_tasks),
        ]
        if mode is WorkerMode.ASYNC:
            command.append("--async")
        if reserved_rpc_tasks is not None:
            command += ["--reserved-rpc-tasks", str(reserved_rpc_tasks)]
        child = ChildProcess(command, self.directory / f"worker-{number}.stderr", self.env)
        worker = WorkerProcess(child, worker_id, registry)
        self.workers.append(worker)
        return worker

    async def start(
        self,
        registry: str,
        server_address: str,
        *,
        timeout: float = 60.0,
        **settings: Unpack[WorkerSettings],
    ) -> WorkerProcess:
        """Start a Worker for ``registry`` (``package.module:name``) and wait until it registered.

        ``settings``: see :class:`WorkerSettings` (``max_concurrent_tasks`` defaults to 1 so
        tests control capacity exactly).

        Raises:
            RuntimeError: the Worker exited before it was ready (its stderr is in the message).
            TimeoutError: not ready within ``timeout`` seconds.
        """
        worker = self.spawn(registry, server_address, **settings)
        await worker.child.await_line(_is_ready_line, timeout)
        return worker

    def start_sync(
        self,
        registry: str,
        server_address: str,
        *,
        timeout: float = 60.0,
        **settings: Unpack[WorkerSettings],
    ) -> WorkerProcess:
        """Blocking :meth:`start`, for tests whose engine runs in another process.

        Never call it on the event loop that serves the Worker's engine (it would wait forever).
        """
        worker = self.spawn(registry, server_address, **settings)
        worker.child.wait_for_line(_is_ready_line, timeout)
        return worker

    def close(self) -> None:
        """SIGKILL every Worker this launcher started that still runs."""
        for worker in self.workers:
            worker.kill()

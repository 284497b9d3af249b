"""Worker child processes: the test side starts and kills them, the child runs the Flows."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex import (
    BlobCacheConfig,
    Flow,
    Registry,
    open_blob_cache,
)

from dex_agents._codec_registry import agent_codec_registry
from dex_agents._worker_gc import freeze_worker_startup_objects
from dex_agents.exceptions import DexAgentsError
from dex_agents.testing._child_process import (
    ChildProcess,
    kill_process_group,
    start_child,
    tail,
    terminate,
)
from dex_agents.testing._fork_server import fork_child
from dex_agents.testing._pull_worker import BLOB_CACHE_BYTES, new_pull_worker

SERVER_ADDRESS_ENV = "DEX_AGENTS_TEST_SERVER_ADDRESS"
"""The Dex address the Worker child connects to; set by ``AgentTestStack``."""

READY_FILE_ENV = "DEX_AGENTS_TEST_WORKER_READY_FILE"
"""The file the Worker child creates once every pull queue is registered."""

BLOB_CACHE_DIR_ENV = "DEX_AGENTS_TEST_BLOB_CACHE_DIR"
"""A blob cache directory of the Worker child's own (a cache is locked by one process)."""

DEFAULT_MAX_CONCURRENT_TASKS = 16
"""Task slots of a test Worker: enough for the largest parallel tool call batch."""

DEFAULT_WORKER_STARTUP_TIMEOUT_SECONDS = 60.0

_POLL_INTERVAL_SECONDS = 0.02
_STOP_DRAIN_SECONDS = 10.0


class WorkerStartError(DexAgentsError, RuntimeError):
    """The Worker child exited or did not register its pull queues in time."""


class WorkerProcess:
    """A Worker child process in its own process group.

    ``kill()`` SIGKILLs the whole group at once, the way a crash would, and
    reaps it; ``stop()`` asks the Worker to drain and exit.

    Example:
        >>> from dex_agents.testing import AgentTestStack
        >>> async with AgentTestStack(tmp_path, [flow], "tests.my_worker") as stack:  # doctest: +SKIP
        ...     worker = await stack.start_worker()
        ...     worker.kill()  # as a crash would
        ...     worker = await stack.start_worker()
    """

    def __init__(self, process: ChildProcess, stderr_path: Path) -> None:
        self.process = process
        self.stderr_path = stderr_path

    @property
    def pid(self) -> int:
        """The process ID, which is also the process group ID."""
        return self.process.pid

    @property
    def is_running(self) -> bool:
        """Whether the process has not exited yet."""
        return self.process.poll() is None

    @classmethod
    async def start(
        cls,
        worker_module: str,
        *,
        server_address: str,
        state_dir: Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_WORKER_STARTUP_TIMEOUT_SECONDS,
        preload_env: Mapping[str, str] | None = None,
    ) -> WorkerProcess:
        """Run ``python -m worker_module`` and wait until its Worker is registered.

        ``state_dir`` gets the child's logs, ready file and blob cache. With ``preload_env`` (the
        variables of ``env`` that decide what the module imports), the child is forked instead
        from a warm parent that imported the module and ran its ``preload_worker()`` with them
        set, shared by every child of the same module, directory and ``preload_env``; it falls
        back to ``python -m`` when that parent cannot be used (``dex_agents.testing._fork_server``).

        Raises:
            WorkerStartError: The child exited first, or did not become ready in
                ``timeout`` seconds; the message carries its stderr.
        """
        state_dir.mkdir(parents=True, exist_ok=True)
        ready_file = state_dir / "ready"
        stderr_path = state_dir / "stderr.log"
        child_env = {
            **os.environ,
            **(env or {}),
            SERVER_ADDRESS_ENV: server_address,
            READY_FILE_ENV: str(ready_file),
            BLOB_CACHE_DIR_ENV: str(state_dir / "blob-cache"),
        }
        process = _start_process(worker_module, state_dir, cwd, child_env, preload_env)
        worker = cls(process, stderr_path)
        deadline = time.monotonic() + timeout
        while not ready_file.exists():
            if not worker.is_running:
                raise WorkerStartError(
                    f"Worker module {worker_module} exited with status "
                    f"{process.returncode} before it was ready; its stderr: {worker.stderr_tail()}"
                )
            if time.monotonic() >= deadline:
                worker.kill()
                raise WorkerStartError(
                    f"Worker module {worker_module} was not ready within {timeout:g} s; "
                    f"its stderr: {worker.stderr_tail()}"
                )
            await asyncio.sleep(_POLL_INTERVAL_SECONDS)
        return worker

    def kill(self) -> None:
        """SIGKILL the Worker's whole process group and reap it."""
        kill_process_group(self.process)

    async def stop(self, timeout: float = _STOP_DRAIN_SECONDS * 2) -> int:
        """Ask the Worker to drain and exit (SIGTERM); SIGKILL it after ``timeout`` s.

        Returns:
            The exit status.
        """
        return await asyncio.to_thread(terminate, self.process, timeout)

    def stderr_tail(self) -> str:
        """The end of the child's stderr, for error messages."""
        return tail(self.stderr_path) or "(empty)"


def _start_process(
    worker_module: str,
    state_dir: Path,
    cwd: Path | None,
    env: Mapping[str, str],
    preload_env: Mapping[str, str] | None,
) -> ChildProcess:
    stdout_path, stderr_path = state_dir / "stdout.log", state_dir / "stderr.log"
    if preload_env is not None:
        forked = fork_child(
            worker_module,
            preload_env=preload_env,
            cwd=cwd,
            env=env,
            stdout_path=stdout_path,
            stderr_path=stderr_path,
        )
        if forked is not None:
            return forked
    return start_child(
        [sys.executable, "-m", worker_module],
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        cwd=cwd,
        env=env,
        own_process_group=True,
    )


def run_agent_worker(
    flows: Sequence[Flow[Any]], *, max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS
) -> None:
    """Serve ``flows`` with a pull AsyncWorker until SIGTERM, SIGINT or SIGKILL.

    The main function of a Worker child that ``AgentTestStack.start_worker``
    starts: it connects to the address in ``DEX_AGENTS_TEST_SERVER_ADDRESS``,
    registers its pull queues, then creates the ready file the stack waits for.
    SIGTERM drains running Steps before exiting.

    Raises:
        SystemExit: The address is not set (the module was not started by
            ``AgentTestStack``) or the Worker failed to start.

    Example:
        >>> if __name__ == "__main__":  # the Worker child module, such as tests/my_worker.py
        ...     run_agent_worker([flow])
    """
    server_address = os.environ.get(SERVER_ADDRESS_ENV)
    if not server_address:
        raise SystemExit(
            f"{SERVER_ADDRESS_ENV} is not set: start this Worker with AgentTestStack.start_worker()"
        )
    asyncio.run(_serve(flows, server_address, max_concurrent_tasks))


async def _serve(
    flows: Sequence[Flow[Any]], server_address: str, max_concurrent_tasks: int
) -> None:
    cache_dir = os.environ.get(BLOB_CACHE_DIR_ENV) or tempfile.mkdtemp(prefix="dex-worker-cache-")
    cache = open_blob_cache(BlobCacheConfig(cache_dir, BLOB_CACHE_BYTES))
    try:
        worker = new_pull_worker(
            Registry(list(flows), agent_codec_registry(), allow_async_handlers=True),
            cache,
            server_address,
            flows=list(flows),
            max_concurrent_tasks=max_concurrent_tasks,
            stop_drain_timeout=timedelta(seconds=_STOP_DRAIN_SECONDS),
        )
        # Frozen before the Worker pulls: a replacement Worker is handed a pending task the moment
        # it registers, and that task's Step must already run on a frozen start-up.
        freeze_worker_startup_objects()
        serving = asyncio.create_task(worker.start())
        await worker.wait_pull_registered()
        loop = asyncio.get_running_loop()
        for stop_signal in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(stop_signal, lambda: asyncio.ensure_future(worker.stop()))
        _mark_ready()
        await serving
    finally:
        cache.close()


def _mark_ready() -> None:
    ready_file = os.environ.get(READY_FILE_ENV)
    if ready_file:
        Path(ready_file).touch()

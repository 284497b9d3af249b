"""A private engine, a Client and Worker child processes for one integration test."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from dex import (
    AsyncClient,
    BlobCache,
    BlobCacheConfig,
    ClientOptions,
    DexServiceError,
    Flow,
    Registry,
    WorkerTarget,
    open_blob_cache,
)

from dex_agents._codec_registry import agent_codec_registry
from dex_agents._session.client import AgentSessionClient
from dex_agents.exceptions import ConfigurationError
from dex_agents.testing._engine_process import (
    DEXCLI_ENV,
    EngineDurability,
    EngineLogs,
    EngineProcess,
)
from dex_agents.testing._pull_worker import BLOB_CACHE_BYTES
from dex_agents.testing._step_history import StepHistoryEntry, read_step_history
from dex_agents.testing._waiting import wait_until
from dex_agents.testing._worker_process import WorkerProcess

_ENGINE_HEALTH_TIMEOUT_SECONDS = 120.0


class AgentTestStack:
    """An engine, an ``AsyncClient`` and Worker child processes, torn down together.

    Entering starts a private engine on a database in ``tmp_path``: the
    embedded ``dex-local-engine`` on a free port, or, when ``DEXCLI`` is set,
    ``dexcli dev --engine zd`` with a processCrashSafe config (see
    ``EngineProcess.start_dexcli``). ``start_worker()`` runs
    ``python -m worker_module`` in its own process group with ``worker_cwd`` as
    its directory and ``worker_env`` added to its environment; that module calls
    ``run_agent_worker`` with the same Flows. Leaving kills every Worker, closes
    the Client and stops the engine.

    Example:
        >>> async with AgentTestStack(tmp_path, [flow], "tests.my_worker") as stack:  # doctest: +SKIP
        ...     worker = await stack.start_worker()  # tests/my_worker.py: run_agent_worker([flow])
        ...     await stack.sessions(flow).start_session("session-1", "hello")
        ...     worker.kill()
    """

    def __init__(
        self,
        tmp_path: Path,
        flows: Sequence[Flow[Any]],
        worker_module: str,
        *,
        worker_cwd: Path | None = None,
        worker_env: Mapping[str, str] | None = None,
        server_zd_config: Path | None = None,
    ) -> None:
        if not flows:
            raise ConfigurationError("AgentTestStack needs at least one Flow")
        self.tmp_path = Path(tmp_path)
        self.flows = list(flows)
        self.worker_module = worker_module
        self.worker_cwd = worker_cwd
        self.worker_env = dict(worker_env or {})
        self.server_zd_config = server_zd_config
        self.workers: list[WorkerProcess] = []
        self._engine: EngineProcess | None = None
        self._client: AsyncClient | None = None
        self._blob_cache: BlobCache | None = None

    @property
    def server_address(self) -> str:
        """The engine's gRPC address, ``host:port``."""
        return self._running_engine().server_address

    @property
    def client(self) -> AsyncClient:
        """An ``AsyncClient`` of the Flows, dispatching to pull Workers."""
        if self._client is None:
            raise RuntimeError(
                "AgentTestStack is not entered: use `async with AgentTestStack(...)`"
            )
        return self._client

    async def __aenter__(self) -> AgentTestStack:
        self.tmp_path.mkdir(parents=True, exist_ok=True)
        try:
            self._engine = await self._start_engine()
            self._blob_cache = open_blob_cache(
                BlobCacheConfig(str(self.tmp_path / "client-blob-cache"), BLOB_CACHE_BYTES)
            )
            self._client = AsyncClient(
                Registry(self.flows, agent_codec_registry(), allow_async_handlers=True),
                self._blob_cache,
                ClientOptions(
                    server_address=self._engine.server_address,
                    worker_target=WorkerTarget(pull=True),
                ),
            )
            await self._wait_for_engine()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def sessions(self, flow: Flow[Any]) -> AgentSessionClient:
        """An ``AgentSessionClient`` for ``flow`` on this stack's Client.

        Raises:
            ConfigurationError: ``flow`` is not one of the stack's Flows.
        """
        if not any(flow is known for known in self.flows):
            raise ConfigurationError(
                f"Flow {flow.get_flow_type()!r} is not one of this AgentTestStack's Flows"
            )
        return AgentSessionClient(self.client, flow)

    async def start_worker(self) -> WorkerProcess:
        """Start one more Worker child and wait until it serves.

        Raises:
            WorkerStartError: The child exited or did not register in time.
        """
        worker = await WorkerProcess.start(
            self.worker_module,
            server_address=self.server_address,
            state_dir=self.tmp_path / "workers" / f"worker-{len(self.workers) + 1}",
            cwd=self.worker_cwd,
            env=self.worker_env,
        )
        self.workers.append(worker)
        return worker

    async def read_step_history(self, flow_id: str) -> list[StepHistoryEntry]:
        """The Step method events of ``flow_id``; see ``read_step_history``."""
        return await read_step_history(self.server_address, flow_id)

    async def close(self) -> None:
        """Kill the Workers, close the Client and stop the engine; safe to repeat."""
        for worker in self.workers:
            worker.kill()
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._blob_cache is not None:
            self._blob_cache.close()
            self._blob_cache = None
        if self._engine is not None:
            await self._engine.stop()
            self._engine = None

    async def _start_engine(self) -> EngineProcess:
        logs = EngineLogs.in_directory(self.tmp_path / "engine")
        dexcli = os.environ.get(DEXCLI_ENV)
        if dexcli:
            return EngineProcess.start_dexcli(
                dexcli, self.tmp_path / "dexcli", logs, server_zd_config=self.server_zd_config
            )
        return await EngineProcess.start_local(
            self.tmp_path / "engine" / "engine.db",
            logs,
            durability=EngineDurability.PROCESS_CRASH_SAFE,
        )

    async def _wait_for_engine(self) -> bool:
        return await wait_until(
            f"the engine at {self.server_address} to answer a health check",
            self._engine_is_healthy,
            _ENGINE_HEALTH_TIMEOUT_SECONDS,
        )

    async def _engine_is_healthy(self) -> bool | None:
        self._running_engine().check_running()
        try:
            return await self.client.health_check()
        except DexServiceError:
            return False

    def _running_engine(self) -> EngineProcess:
        if self._engine is None:
            raise RuntimeError(
                "AgentTestStack is not entered: use `async with AgentTestStack(...)`"
            )
        return self._engine

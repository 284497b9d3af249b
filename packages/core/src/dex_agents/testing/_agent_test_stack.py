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
from dex_agents.testing._worker_pool import WorkerPool
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
    the Client and stops the engine. ``stream_store_disabled`` runs the local
    engine like a Dex Server with ``streamStore.backend: disabled`` (see
    ``EngineProcess.start_local``); with ``DEXCLI`` set it raises
    ``ConfigurationError`` on entering, since dexcli's Stream Store is configured in its
    own config file.

    ``engine_address`` attaches the stack to an engine that is already running (the pytest
    plugin's session engine, ``dex_agents.testing.pytest_plugin``) instead of starting one;
    leaving then closes only the Client. ``shared_worker()`` takes the Worker child of this
    module, directory and environment from ``worker_pool`` (started once, kept for the next
    test), so only ``start_worker()`` pays a framework's import cost per test.
    ``worker_preload_env`` (the variables of ``worker_env`` that decide what the module imports)
    makes ``start_worker()`` and ``shared_worker()`` fork their children from a warm parent that
    has imported the module and run its ``preload_worker()`` once (see ``WorkerProcess.start``),
    so a test that kills and restarts its Worker does not import the framework again. The local
    engine forks from a warm parent too (``EngineProcess.start_local(warm_start=True)``);
    ``warm_engine=False`` starts it as ``dex-local-engine serve``, for a benchmark that measures
    the engine as users run it.

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
        stream_store_disabled: bool = False,
        engine_address: str | None = None,
        worker_pool: WorkerPool | None = None,
        worker_preload_env: Mapping[str, str] | None = None,
        warm_engine: bool = True,
    ) -> None:
        if not flows:
            raise ConfigurationError("AgentTestStack needs at least one Flow")
        if stream_store_disabled and server_zd_config is not None:
            raise ConfigurationError(
                "stream_store_disabled starts the local engine with --stream-store disabled; "
                "with dexcli, set streamStore in server_zd_config instead"
            )
        if engine_address is not None and (stream_store_disabled or server_zd_config is not None):
            raise ConfigurationError(
                "engine_address attaches to a running engine; stream_store_disabled and "
                "server_zd_config configure a private one"
            )
        self.stream_store_disabled = stream_store_disabled
        self.engine_address = engine_address
        self.worker_pool = worker_pool
        self.tmp_path = Path(tmp_path)
        self.flows = list(flows)
        self.worker_module = worker_module
        self.worker_cwd = worker_cwd
        self.worker_env = dict(worker_env or {})
        self.worker_preload_env = (
            dict(worker_preload_env) if worker_preload_env is not None else None
        )
        self.server_zd_config = server_zd_config
        self.warm_engine = warm_engine
        self.workers: list[WorkerProcess] = []
        self._engine: EngineProcess | None = None
        self._client: AsyncClient | None = None
        self._blob_cache: BlobCache | None = None

    @property
    def server_address(self) -> str:
        """The engine's gRPC address, ``host:port``."""
        if self.engine_address is not None:
            return self.engine_address
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
            if self.engine_address is None:
                self._engine = await self._start_engine()
            self._blob_cache = open_blob_cache(
                BlobCacheConfig(str(self.tmp_path / "client-blob-cache"), BLOB_CACHE_BYTES)
            )
            self._client = AsyncClient(
                Registry(self.flows, agent_codec_registry(), allow_async_handlers=True),
                self._blob_cache,
                ClientOptions(
                    server_address=self.server_address,
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
            preload_env=self.worker_preload_env,
        )
        self.workers.append(worker)
        return worker

    async def shared_worker(self) -> WorkerProcess:
        """The Worker child that serves this stack's Flows for every test that shares it.

        With a ``worker_pool``, the pool's running Worker of this module, directory and
        environment (started now if none runs); leaving the stack leaves it running. Without a
        pool, the same as ``start_worker()``.

        Raises:
            WorkerStartError: The child exited or did not register in time.
        """
        if self.worker_pool is None:
            return await self.start_worker()
        return await self.worker_pool.worker(
            self.worker_module,
            cwd=self.worker_cwd,
            env=self.worker_env,
            preload_env=self.worker_preload_env,
        )

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
        return await start_test_engine(
            self.tmp_path,
            server_zd_config=self.server_zd_config,
            stream_store_disabled=self.stream_store_disabled,
            warm=self.warm_engine,
        )

    async def _wait_for_engine(self) -> bool:
        return await wait_until(
            f"the engine at {self.server_address} to answer a health check",
            self._engine_is_healthy,
            _ENGINE_HEALTH_TIMEOUT_SECONDS,
        )

    async def _engine_is_healthy(self) -> bool | None:
        if self.engine_address is None:
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


async def start_test_engine(
    directory: Path,
    *,
    server_zd_config: Path | None = None,
    stream_store_disabled: bool = False,
    warm: bool = True,
) -> EngineProcess:
    """Start the engine an integration test runs against, its files under ``directory``.

    The embedded ``dex-local-engine`` (process-crash-safe) on a free port, or ``dexcli dev
    --engine zd`` when ``DEXCLI`` is set; see ``AgentTestStack``.

    Raises:
        ConfigurationError: ``stream_store_disabled`` with ``DEXCLI`` set.
        EngineStartError: The engine did not start.
    """
    logs = EngineLogs.in_directory(directory / "engine")
    dexcli = os.environ.get(DEXCLI_ENV)
    if dexcli and stream_store_disabled:
        raise ConfigurationError(
            f"stream_store_disabled needs the local engine, but {DEXCLI_ENV} is set; pass a "
            "server_zd_config that disables dexcli's Stream Store instead"
        )
    if dexcli:
        return EngineProcess.start_dexcli(
            dexcli, directory / "dexcli", logs, server_zd_config=server_zd_config
        )
    return await EngineProcess.start_local(
        directory / "engine" / "engine.db",
        logs,
        durability=EngineDurability.PROCESS_CRASH_SAFE,
        stream_store_disabled=stream_store_disabled,
        warm_start=warm,  # a test run starts many engines
    )

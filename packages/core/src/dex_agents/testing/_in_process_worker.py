"""A Client and a pull Worker in this process, sharing one registry and blob cache.

The demo, ``ContextWindowSessionScenario``, benchmarks and in-process tests all need the same
setup: one ``Registry`` of the Flows with the fast agent codecs, one blob cache, an ``AsyncClient``
that targets pull Workers, and an ``AsyncWorker`` serving pull queues, started and registered
before the first session starts, then drained and closed in the right order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex import (
    AsyncClient,
    AsyncWorker,
    BlobCache,
    BlobCacheConfig,
    ClientOptions,
    CodecRegistry,
    Flow,
    Registry,
    WorkerTarget,
    open_blob_cache,
)

from dex_agents._codec_registry import agent_codec_registry
from dex_agents._session.client import AgentSessionClient
from dex_agents._session.flow import AgentSessionFlow
from dex_agents.exceptions import ConfigurationError
from dex_agents.testing._pull_worker import BLOB_CACHE_BYTES, new_pull_worker
from dex_agents.testing._session_prefix import PrefixedSessionClient

__all__ = ["InProcessWorker", "in_process_worker"]


@dataclass(frozen=True)
class InProcessWorker:
    """The running Client and Worker of :func:`in_process_worker`.

    Attributes:
        registry: The Worker's registry: the Flows and its codecs (``agent_codec_registry()``
            unless given).
        client: An ``AsyncClient`` whose Flows start on pull Workers.
        worker: The ``AsyncWorker``, its pull queues registered.
        server_address: The Dex server both talk to, ``host:port``.
        session_prefix: Prepended to every session ID that ``sessions(flow)`` and ``scoped()``
            are given (a test sharing its engine with others names its sessions under its own
            prefix); ``""`` leaves IDs alone.
        session_ids: Every ID ``scoped()`` has returned, so the test's sessions can be stopped
            when it ends.
    """

    registry: Registry
    client: AsyncClient
    worker: AsyncWorker
    server_address: str = ""
    session_prefix: str = ""
    session_ids: set[str] = field(default_factory=set)

    def sessions(self, flow: AgentSessionFlow) -> AgentSessionClient:
        """An ``AgentSessionClient`` of ``flow`` on this Client; with a ``session_prefix``, a
        ``PrefixedSessionClient``."""
        if not self.session_prefix:
            return AgentSessionClient(self.client, flow)
        return PrefixedSessionClient(self.client, flow, self.session_prefix, self.session_ids)

    def scoped(self, session_id: str) -> str:
        """``session_id`` under ``session_prefix``, for the raw ``client`` and the engine's
        history, which do not add it.

        Example:
            >>> import asyncio
            >>> async def scoped_session() -> tuple[str, str]:
            ...     async with in_process_worker([flow], server_address, tmp_path / "cache",
            ...                                  session_prefix="t0123456789ab-") as dex:
            ...         await dex.sessions(flow).start_session("scoped-chat", "Hi")
            ...         info = await dex.client.describe_flow(dex.scoped("scoped-chat"))
            ...         return dex.scoped("scoped-chat"), info.flow_type
            >>> asyncio.run(scoped_session())
            ('t0123456789ab-scoped-chat', 'SupportAgent')
        """
        if session_id.startswith(self.session_prefix):
            return session_id
        scoped = self.session_prefix + session_id
        self.session_ids.add(scoped)
        return scoped


@asynccontextmanager
async def in_process_worker(
    flows: Sequence[Flow[Any]],
    server_address: str,
    blob_cache_dir: Path,
    *,
    max_concurrent_tasks: int = 8,
    stop_drain_timeout: timedelta = timedelta(seconds=2),
    registration_timeout: timedelta = timedelta(seconds=30),
    codecs: CodecRegistry | None = None,
    client_codecs: CodecRegistry | None = None,
    session_prefix: str = "",
) -> AsyncIterator[InProcessWorker]:
    """Serve ``flows`` with a pull Worker in this process, and a Client for them, while the block
    runs.

    The Worker has one idle stream per task slot, so a burst of parallel tool Steps needs no new
    stream. Leaving the block stops the Worker (draining running Steps for at most
    ``stop_drain_timeout``), then closes the Client and the blob cache.

    Args:
        flows: The Flows to serve and to call.
        server_address: The Dex server, ``host:port``.
        blob_cache_dir: The blob cache the Worker and the Client share.
        max_concurrent_tasks: Task slots of the Worker, and its idle streams.
        stop_drain_timeout: How long leaving the block lets running Steps drain.
        registration_timeout: How long to wait for the Worker's pull queues.
        codecs: The Worker's codecs; ``None`` uses ``agent_codec_registry()``, and
            ``CodecRegistry()`` the SDK's own.
        client_codecs: The Client's codecs, such as to read with other codecs than the Worker
            writes with; ``None`` uses the Worker's registry.
        session_prefix: See ``InProcessWorker.session_prefix``.

    Raises:
        ConfigurationError: ``flows`` is empty or ``max_concurrent_tasks`` is below 1.
        TimeoutError: The Worker did not register its pull queues within ``registration_timeout``.
        BaseException: The Worker's own start failure, such as an unreachable server.

    Example:
        >>> import asyncio
        >>> async def start() -> str:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         return await dex.sessions(flow).start_session("worker-example", "Hello")
        >>> run_id = asyncio.run(start())
    """
    if not flows:
        raise ConfigurationError("in_process_worker needs at least one Flow")
    if max_concurrent_tasks < 1:
        raise ConfigurationError(
            f"max_concurrent_tasks must be at least 1, got {max_concurrent_tasks}"
        )
    registry = Registry(
        list(flows),
        codecs if codecs is not None else agent_codec_registry(),
        allow_async_handlers=True,
    )
    client_registry = (
        registry
        if client_codecs is None
        else Registry(list(flows), client_codecs, allow_async_handlers=True)
    )
    cache: BlobCache = open_blob_cache(BlobCacheConfig(str(blob_cache_dir), BLOB_CACHE_BYTES))
    client = AsyncClient(
        client_registry,
        cache,
        ClientOptions(server_address=server_address, worker_target=WorkerTarget(pull=True)),
    )
    worker = new_pull_worker(
        registry,
        cache,
        server_address,
        flows=flows,
        max_concurrent_tasks=max_concurrent_tasks,
        stop_drain_timeout=stop_drain_timeout,
    )
    serving = asyncio.create_task(worker.start())
    try:
        # Startup failures wake the wait with the Worker's own error.
        await worker.wait_pull_registered(registration_timeout.total_seconds())
        yield InProcessWorker(
            registry=registry,
            client=client,
            worker=worker,
            server_address=server_address,
            session_prefix=session_prefix,
        )
    finally:
        await worker.stop()
        await asyncio.gather(serving, return_exceptions=True)
        await client.close()
        cache.close()

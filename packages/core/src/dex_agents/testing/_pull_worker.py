"""The pull Worker every testing helper starts, in this process or in a Worker child."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Final

from dex import (
    AsyncClient,
    AsyncWorker,
    BlobCache,
    ClientOptions,
    Flow,
    PullWorkerOptions,
    Registry,
    WorkerOptions,
)

from dex_agents._sdk_pull_streams import install_sdk_pull_stream_patches
from dex_agents._session.flow import AgentSessionFlow
from dex_agents._worker_logging import quiet_worker_logging

__all__ = ["BLOB_CACHE_BYTES", "new_pull_worker"]

BLOB_CACHE_BYTES: Final = 64 * 1024 * 1024
"""Size of the blob cache a testing Worker or Client opens."""


def new_pull_worker(
    registry: Registry,
    cache: BlobCache,
    server_address: str,
    *,
    flows: Sequence[Flow[Any]],
    max_concurrent_tasks: int,
    stop_drain_timeout: timedelta,
) -> AsyncWorker:
    """An ``AsyncWorker`` serving pull queues, with one idle stream per task slot.

    A burst of parallel tool Steps or concurrent sessions then needs no new streams (the engine
    registers spares lazily; ``install_sdk_pull_stream_patches`` keeps their upkeep linear in
    their number). A failed Step attempt logs one WARNING line, its traceback at DEBUG
    (``quiet_worker_logging``). Each ``AgentSessionFlow`` of ``flows`` (those of ``registry``)
    gets a Dex client of the same Registry for its tool start claims (``use_worker_client``).
    """
    quiet_worker_logging()
    install_sdk_pull_stream_patches()
    session_flows = [flow for flow in flows if isinstance(flow, AgentSessionFlow)]
    client: AsyncClient | None = None
    if session_flows:
        client = AsyncClient(registry, cache, ClientOptions(server_address=server_address))
        for flow in session_flows:
            flow.use_worker_client(client)
    return _PullWorker(
        client,
        registry,
        cache,
        WorkerOptions(
            server_address=server_address,
            pull=PullWorkerOptions(
                max_concurrent_tasks=max_concurrent_tasks,
                idle_streams_per_queue=max_concurrent_tasks,
                stop_drain_timeout=stop_drain_timeout,
            ),
        ),
    )


class _PullWorker(AsyncWorker):
    """An ``AsyncWorker`` that closes its start-claims client when it stops.

    An open gRPC aio channel left to the interpreter's exit can hang the process after Ctrl+C,
    so the client goes with the Worker it serves.
    """

    def __init__(
        self,
        client: AsyncClient | None,
        registry: Registry,
        cache: BlobCache,
        options: WorkerOptions,
    ) -> None:
        super().__init__(registry, cache, options)
        self._claims_client = client

    async def stop(self) -> None:
        try:
            await super().stop()
        finally:
            if self._claims_client is not None:
                await self._claims_client.close()

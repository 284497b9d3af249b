"""The pull Worker every testing helper starts, in this process or in a Worker child."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from dex import AsyncWorker, BlobCache, PullWorkerOptions, Registry, WorkerOptions

from dex_agents._worker_logging import quiet_worker_logging

__all__ = ["BLOB_CACHE_BYTES", "new_pull_worker"]

BLOB_CACHE_BYTES: Final = 64 * 1024 * 1024
"""Size of the blob cache a testing Worker or Client opens."""


def new_pull_worker(
    registry: Registry,
    cache: BlobCache,
    server_address: str,
    *,
    max_concurrent_tasks: int,
    stop_drain_timeout: timedelta,
) -> AsyncWorker:
    """An ``AsyncWorker`` serving pull queues, with one idle stream per task slot.

    A burst of parallel tool Steps or concurrent sessions then needs no new streams (the engine
    registers spares lazily). A failed Step attempt logs one WARNING line, its traceback at DEBUG
    (``quiet_worker_logging``).
    """
    quiet_worker_logging()
    return AsyncWorker(
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

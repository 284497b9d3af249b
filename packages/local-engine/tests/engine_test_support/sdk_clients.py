"""SDK clients of a test's engine, each with its own blob cache under the test's directory."""

from __future__ import annotations

from pathlib import Path

from dex import AsyncClient, BlobCacheConfig, ClientOptions, Registry, open_blob_cache
from dex.worker_options import WorkerTarget


def pull_client(registry: Registry, server_address: str, directory: Path) -> AsyncClient:
    """An SDK ``AsyncClient`` whose Flows run on pull Workers; use it with ``async with``.

    Its blob cache lives in ``directory / "client-blobs"``. Example::

        async with pull_client(probe_registry(), engine.address, tmp_path) as client:
            await client.start_flow(client.registry.flows[0], "id", "input")
    """
    cache = open_blob_cache(BlobCacheConfig(str(directory / "client-blobs"), 1 << 20))
    options = ClientOptions(server_address=server_address, worker_target=WorkerTarget(pull=True))
    return AsyncClient(registry, cache, options)

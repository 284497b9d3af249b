"""A listening-mode SDK Worker serves a Flow through the real engine (Steps and an RPC)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest
from dex import (
    AsyncClient,
    BlobCacheConfig,
    ClientOptions,
    FlowNotActiveOrNotFoundError,
    FlowStatus,
    open_blob_cache,
)
from dex.worker_options import WorkerTarget
from engine_test_support import EngineProcess, GateBoard, InvocationLog
from engine_test_support.sample_flows import PROBE_REGISTRY, ProbeFlow, probe_registry
from listening_worker_main import start_listening_worker


async def test_listening_worker_runs_a_flow_and_an_rpc(
    engine: EngineProcess, tmp_path: Path, gates: GateBoard, invocation_log: InvocationLog
) -> None:
    child, address = await start_listening_worker(
        PROBE_REGISTRY,
        engine.address,
        tmp_path / "listening",
        env={**gates.env(), **invocation_log.env()},
    )
    try:
        cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "client-blobs"), 1 << 20))
        options = ClientOptions(
            server_address=engine.address, worker_target=WorkerTarget(address=address)
        )
        async with AsyncClient(probe_registry(), cache, options) as client:
            flow = cast(ProbeFlow, client.registry.flows[0])
            with pytest.raises(FlowNotActiveOrNotFoundError):
                await client.invoke_rpc(flow.echo, "no-such-flow", "early")
            await client.start_flow(flow, "listen-1", "l1")
            result = await client.wait_for_flow("listen-1", timedelta(seconds=30))
            assert result.status is FlowStatus.COMPLETED
            assert result.single_output(str) == "l1:done"
            assert await client.invoke_rpc(flow.echo, "listen-1", "hi") == "echo:hi"
        assert invocation_log.count("ProbeStep.done") == 1
        assert invocation_log.count("ProbeFlow.echo") == 1
    finally:
        child.kill()

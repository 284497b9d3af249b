"""A listening-mode SDK Worker serves a Flow through the real engine (Steps and an RPC)."""

from __future__ import annotations

import subprocess
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
from engine_test_support.engine_process import engine_command
from engine_test_support.sample_flows import PROBE_REGISTRY, ProbeFlow, probe_registry
from listening_worker_main import free_port, start_listening_worker


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


async def test_a_flow_started_without_a_worker_target_goes_to_the_default_listening_worker(
    tmp_path: Path, gates: GateBoard, invocation_log: InvocationLog
) -> None:
    # A client that advertises no worker target (the SDK's default ClientOptions) reaches the
    # Worker listening at the engine's default worker address, as on a Dex Server.
    port = free_port()
    engine = EngineProcess(
        tmp_path / "engine.db",
        tmp_path / "engine-logs",
        extra_args=["--default-worker-address", f"127.0.0.1:{port}"],
        env={**gates.env(), **invocation_log.env()},
    )
    engine.start()
    child, _ = await start_listening_worker(
        PROBE_REGISTRY,
        engine.address,
        tmp_path / "listening",
        port=port,
        env={**gates.env(), **invocation_log.env()},
    )
    try:
        cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "client-blobs"), 1 << 20))
        async with AsyncClient(
            probe_registry(), cache, ClientOptions(server_address=engine.address)
        ) as client:
            flow = cast(ProbeFlow, client.registry.flows[0])
            await client.start_flow(flow, "default-target-1", "d1")
            result = await client.wait_for_flow("default-target-1", timedelta(seconds=30))
            assert result.status is FlowStatus.COMPLETED
            assert result.single_output(str) == "d1:done"
        assert invocation_log.count("ProbeStep.done") == 1
    finally:
        child.kill()
        engine.kill()


def test_serve_refuses_a_malformed_default_worker_address(tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            *engine_command(),
            "serve",
            "--address",
            "127.0.0.1:0",
            "--database",
            str(tmp_path / "engine.db"),
            "--default-worker-address",
            "no-port",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 1
    assert "--default-worker-address 'no-port'" in completed.stderr

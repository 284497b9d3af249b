"""Pull Workers against the real engine process: the SDK Client starts Flows, SDK Workers in
child processes run them, and Workers are SIGKILLed at exact points inside a Step."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import dex
import pytest
from engine_test_support import EngineProcess, GateBoard, InvocationLog, WorkerLauncher
from engine_test_support.sample_flows import PROBE_REGISTRY, probe_registry

WAIT = timedelta(seconds=60)


@pytest.fixture
def client(engine: EngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dex.Client]:
    cache = dex.open_blob_cache(
        dex.BlobCacheConfig(str(tmp_path_factory.mktemp("client-blobs")), 64 * 1024 * 1024)
    )
    options = dex.ClientOptions(
        server_address=engine.address, worker_target=dex.WorkerTarget(pull=True)
    )
    with dex.Client(probe_registry(), cache, options) as opened:
        yield opened
    cache.close()


def run_probe(client: dex.Client, flow_id: str, label: str) -> str:
    client.start_flow(client.registry.flows[0], flow_id, label)
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is dex.FlowStatus.COMPLETED, result.error_message
    return str(result.completions[-1].decode(str))


def attempts(invocation_log: InvocationLog, name: str) -> list[object]:
    return [entry.details["attempt"] for entry in invocation_log.entries(name)]


def test_flow_runs_on_a_pull_worker(
    engine: EngineProcess,
    client: dex.Client,
    workers: WorkerLauncher,
    invocation_log: InvocationLog,
) -> None:
    worker = workers.start_sync(PROBE_REGISTRY, engine.address)

    assert run_probe(client, "pull-e2e-1", "plain") == "plain:done"

    assert [entry.pid for entry in invocation_log.entries("ProbeStep.done")] == [worker.pid]


@pytest.mark.parametrize(
    ("label", "gate"),
    [
        # Killed after output: the attempt fails and a new Worker retries.
        pytest.param("crash", "after-output", id="after-output"),
        # Killed before output: the handler ran but sent nothing, and the engine cannot tell that
        # from "never started", so the attempt fails (a retry) instead of being handed out again
        # under the same number.
        pytest.param("quiet", "before-output", id="before-output"),
    ],
)
def test_worker_killed_mid_step_fails_the_attempt_and_a_new_worker_retries(
    engine: EngineProcess,
    client: dex.Client,
    workers: WorkerLauncher,
    gates: GateBoard,
    invocation_log: InvocationLog,
    label: str,
    gate: str,
) -> None:
    doomed = workers.start_sync(PROBE_REGISTRY, engine.address)
    gates.hold(f"{label}.{gate}")
    client.start_flow(client.registry.flows[0], f"pull-{label}", label)
    gates.wait_arrived_sync(f"{label}.{gate}")

    doomed.kill()
    gates.release(f"{label}.{gate}")
    survivor = workers.start_sync(PROBE_REGISTRY, engine.address)

    result = client.wait_for_flow(f"pull-{label}", timeout=WAIT)
    assert result.status is dex.FlowStatus.COMPLETED, result.error_message
    assert attempts(invocation_log, "ProbeStep.start") == [1, 2]
    assert attempts(invocation_log, "ProbeStep.done") == [2]
    assert [entry.pid for entry in invocation_log.entries("ProbeStep.done")] == [survivor.pid]


def test_engine_killed_mid_step_and_restarted_finishes_the_flow_with_the_same_worker(
    engine: EngineProcess,
    client: dex.Client,
    workers: WorkerLauncher,
    gates: GateBoard,
    invocation_log: InvocationLog,
) -> None:
    worker = workers.start_sync(PROBE_REGISTRY, engine.address)
    gates.hold("restart.after-output")
    client.start_flow(client.registry.flows[0], "pull-engine-restart", "restart")
    gates.wait_arrived_sync("restart.after-output")

    address = engine.address
    assert engine.restart_after_kill() == address
    gates.release("restart.after-output")

    result = client.wait_for_flow("pull-engine-restart", timeout=WAIT)
    assert result.status is dex.FlowStatus.COMPLETED, result.error_message
    assert result.completions[-1].decode(str) == "restart:done"
    # The Worker reconnected to the restarted engine and ran the Step again.
    assert {entry.pid for entry in invocation_log.entries("ProbeStep.start")} == {worker.pid}
    assert len(invocation_log.entries("ProbeStep.start")) == 2

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


def test_worker_killed_after_output_fails_the_attempt_and_a_new_worker_retries(
    engine: EngineProcess,
    client: dex.Client,
    workers: WorkerLauncher,
    gates: GateBoard,
    invocation_log: InvocationLog,
) -> None:
    doomed = workers.start_sync(PROBE_REGISTRY, engine.address)
    gates.hold("crash.after-output")
    client.start_flow(client.registry.flows[0], "pull-crash-after", "crash")
    gates.wait_arrived_sync("crash.after-output")

    doomed.kill()
    gates.release("crash.after-output")
    survivor = workers.start_sync(PROBE_REGISTRY, engine.address)

    result = client.wait_for_flow("pull-crash-after", timeout=WAIT)
    assert result.status is dex.FlowStatus.COMPLETED, result.error_message
    assert attempts(invocation_log, "ProbeStep.start") == [1, 2]
    assert [entry.pid for entry in invocation_log.entries("ProbeStep.done")] == [survivor.pid]


def test_worker_killed_before_output_fails_the_attempt_it_may_have_started(
    engine: EngineProcess,
    client: dex.Client,
    workers: WorkerLauncher,
    gates: GateBoard,
    invocation_log: InvocationLog,
) -> None:
    doomed = workers.start_sync(PROBE_REGISTRY, engine.address)
    gates.hold("quiet.before-output")
    client.start_flow(client.registry.flows[0], "pull-crash-before", "quiet")
    gates.wait_arrived_sync("quiet.before-output")

    doomed.kill()
    gates.release("quiet.before-output")
    workers.start_sync(PROBE_REGISTRY, engine.address)

    result = client.wait_for_flow("pull-crash-before", timeout=WAIT)
    assert result.status is dex.FlowStatus.COMPLETED, result.error_message
    # The handler ran but sent nothing: the engine cannot tell that from "never started", so the
    # attempt fails (a retry) instead of being handed out again under the same number.
    assert attempts(invocation_log, "ProbeStep.start") == [1, 2]
    assert attempts(invocation_log, "ProbeStep.done") == [2]


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

"""Many concurrent tasks over several pull Workers: no task gets another's frames, and no task
runs twice unless its Worker was lost (redispatch after rejects and stream retirement is safe)."""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter

import pytest
from dex.dexpb import dex_pb2 as pb
from dex_local_engine.dispatch import DispatchTask, TaskFrame, TaskNotStarted, WorkerLost
from dex_local_engine.pull_dispatch import PullDispatcher
from engine_test_support import (
    InvocationLog,
    PullTestServer,
    WorkerLauncher,
    WorkerMode,
    execute_task,
    rpc_task,
    string_value,
)
from engine_test_support.sample_flows import (
    ASYNC_PROBE_REGISTRY,
    PROBE_FLOW_TYPE,
    PROBE_REGISTRY,
    PROBE_STEP_TYPE,
)

WAIT_SECONDS = 120.0


def output_of(frames: list[TaskFrame]) -> str:
    final = frames[-1]
    if isinstance(final, pb.InvokeWorkerRPCResponse):
        return final.output.string_value
    assert isinstance(final, pb.InvokeExecuteMethodOutput), final
    return final.result.step_decision.close_decision.close_input.string_value


def mixed_tasks(count: int) -> dict[str, DispatchTask]:
    tasks = {}
    for number in range(count):
        label = f"load-{number}"
        if number % 3 == 0:
            tasks[label] = rpc_task(PROBE_FLOW_TYPE, "echo", string_value(label))
        else:
            tasks[label] = execute_task(PROBE_FLOW_TYPE, PROBE_STEP_TYPE, string_value(label))
    return tasks


def expected_output(label: str, task: DispatchTask) -> str:
    if isinstance(task.request, pb.InvokeWorkerRPCRequest):
        return f"echo:{label}"
    return f"{label}:done"


async def collect(dispatcher: PullDispatcher, task: DispatchTask) -> list[TaskFrame]:
    return [frame async for frame in dispatcher.dispatch(task)]


async def start_pool(server: PullTestServer, workers: WorkerLauncher) -> None:
    await asyncio.gather(
        workers.start(PROBE_REGISTRY, server.address, max_concurrent_tasks=4),
        workers.start(PROBE_REGISTRY, server.address, max_concurrent_tasks=4),
        workers.start(
            ASYNC_PROBE_REGISTRY, server.address, mode=WorkerMode.ASYNC, max_concurrent_tasks=4
        ),
    )


async def test_concurrent_tasks_each_run_once_and_get_their_own_result(
    pull_server: PullTestServer, workers: WorkerLauncher, invocation_log: InvocationLog
) -> None:
    await start_pool(pull_server, workers)
    tasks = mixed_tasks(90)

    results = await asyncio.wait_for(
        asyncio.gather(*(collect(pull_server.dispatcher, task) for task in tasks.values())),
        WAIT_SECONDS,
    )

    for (label, task), frames in zip(tasks.items(), results, strict=True):
        assert output_of(frames) == expected_output(label, task)
    step_runs = Counter(
        entry.details["label"] for entry in invocation_log.entries("ProbeStep.start")
    )
    rpc_runs = Counter(entry.details["value"] for entry in invocation_log.entries("ProbeFlow.echo"))
    assert set(step_runs.values()) == {1}
    assert set(rpc_runs.values()) == {1}
    assert len(step_runs) + len(rpc_runs) == len(tasks)


@pytest.mark.long
@pytest.mark.skipif(
    os.environ.get("DEX_AGENTS_LONG_TESTS") != "1", reason="set DEX_AGENTS_LONG_TESTS=1"
)
async def test_tasks_survive_workers_killed_at_random(
    pull_server: PullTestServer, workers: WorkerLauncher, invocation_log: InvocationLog
) -> None:
    await start_pool(pull_server, workers)
    rng = random.Random(7)
    outcomes: Counter[str] = Counter()

    async def run_until_done(label: str, task: DispatchTask) -> None:
        while True:  # what the scheduler does: same attempt again, or a new attempt
            try:
                frames = await collect(pull_server.dispatcher, task)
            except TaskNotStarted:
                outcomes["not started"] += 1
            except WorkerLost:
                outcomes["lost"] += 1
            else:
                assert output_of(frames) == expected_output(label, task)
                outcomes["done"] += 1
                return

    async def chaos() -> None:
        for _ in range(6):
            await asyncio.sleep(rng.uniform(0.2, 0.6))
            victim = rng.choice(
                [worker for worker in workers.workers if worker.child.returncode is None]
            )
            victim.kill()
            await workers.start(PROBE_REGISTRY, pull_server.address, max_concurrent_tasks=4)

    tasks = mixed_tasks(400)
    chaos_task = asyncio.create_task(chaos())
    await asyncio.wait_for(
        asyncio.gather(*(run_until_done(label, task) for label, task in tasks.items())),
        WAIT_SECONDS * 3,
    )
    await chaos_task
    assert outcomes["done"] == len(tasks)
    done = Counter(entry.details["label"] for entry in invocation_log.entries("ProbeStep.done"))
    assert len(done) == sum(
        1 for task in tasks.values() if isinstance(task.request, pb.InvokeExecuteMethodRequest)
    )

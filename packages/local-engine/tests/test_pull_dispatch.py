"""Pull dispatch against real SDK Workers in child processes (sync and async Workers).

The engine side is the real :class:`PullDispatcher` in a gRPC server on the test's event loop,
with a TEST STUB FlowService for the Worker's start-up calls; tests drive ``dispatch()`` directly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from dex.dexpb import dex_pb2 as pb
from dex_local_engine.dispatch import DispatchTask, TaskFrame, WorkerLost
from dex_local_engine.pull_dispatch import PullDispatcher, PullStreamInfo
from engine_test_support import (
    GateBoard,
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
    PROBE_STREAM_NAME,
    STEPLESS_PROBE_REGISTRY,
)

WAIT_SECONDS = 60.0


def probe_task(label: str) -> DispatchTask:
    return execute_task(PROBE_FLOW_TYPE, PROBE_STEP_TYPE, string_value(label))


async def collect(dispatcher: PullDispatcher, task: DispatchTask) -> list[TaskFrame]:
    return [frame async for frame in dispatcher.dispatch(task)]


async def wait_until(
    dispatcher: PullDispatcher, condition: Callable[[tuple[PullStreamInfo, ...]], bool]
) -> tuple[PullStreamInfo, ...]:
    async def poll() -> tuple[PullStreamInfo, ...]:
        while not condition(streams := dispatcher.streams()):
            await asyncio.sleep(0.02)
        return streams

    return await asyncio.wait_for(poll(), WAIT_SECONDS)


def execute_output(frame: TaskFrame) -> pb.InvokeExecuteMethodOutput:
    assert isinstance(frame, pb.InvokeExecuteMethodOutput), frame
    return frame


def completion_output(frames: list[TaskFrame]) -> str:
    """The Flow output of a final ``graceful_complete`` result."""
    result = execute_output(frames[-1]).result
    return result.step_decision.close_decision.close_input.string_value


def frame_kinds(frames: list[TaskFrame]) -> list[str]:
    return [
        "worker_error"
        if isinstance(frame, pb.WorkerErrorResponse)
        else str(frame.WhichOneof("output"))
        for frame in frames
    ]


@pytest.mark.parametrize("mode", [WorkerMode.SYNC, WorkerMode.ASYNC])
async def test_worker_registers_and_runs_a_step_with_heartbeat_and_stream_write(
    pull_server: PullTestServer,
    workers: WorkerLauncher,
    invocation_log: InvocationLog,
    mode: WorkerMode,
) -> None:
    registry = PROBE_REGISTRY if mode is WorkerMode.SYNC else ASYNC_PROBE_REGISTRY
    worker = await workers.start(registry, pull_server.address, mode=mode)

    streams = pull_server.dispatcher.streams()
    queues = {stream.queue for stream in streams if stream.app_worker_id == worker.app_worker_id}
    assert queues == {worker.app_worker_id, PROBE_FLOW_TYPE}
    assert all(stream.flow_types == {PROBE_FLOW_TYPE} for stream in streams)
    assert all(stream.sdk_name == "python" for stream in streams)

    frames = await asyncio.wait_for(
        collect(pull_server.dispatcher, probe_task("alpha")), WAIT_SECONDS
    )

    assert frame_kinds(frames) == ["heartbeat", "stream_write", "result"]
    heartbeat, stream_write = execute_output(frames[0]), execute_output(frames[1])
    assert json.loads(heartbeat.heartbeat.value.obj_value.payload) == {
        "label": "alpha",
        "progress": 1,
    }
    assert stream_write.stream_write.stream_name == PROBE_STREAM_NAME
    assert stream_write.stream_write.value.string_value == "alpha:chunk"
    assert completion_output(frames) == "alpha:done"
    assert [entry.pid for entry in invocation_log.entries("ProbeStep.done")] == [worker.pid]


async def test_rpc_task_returns_the_rpc_response(
    pull_server: PullTestServer, workers: WorkerLauncher, invocation_log: InvocationLog
) -> None:
    await workers.start(PROBE_REGISTRY, pull_server.address)

    task = rpc_task(PROBE_FLOW_TYPE, "echo", string_value("ping"))
    frames = await asyncio.wait_for(collect(pull_server.dispatcher, task), WAIT_SECONDS)

    assert len(frames) == 1
    response = frames[0]
    assert isinstance(response, pb.InvokeWorkerRPCResponse)
    assert response.output.string_value == "echo:ping"
    assert invocation_log.count("ProbeFlow.echo") == 1


async def test_no_capacity_reject_redispatches_to_another_worker(
    pull_server: PullTestServer,
    workers: WorkerLauncher,
    gates: GateBoard,
    invocation_log: InvocationLog,
) -> None:
    dispatcher = pull_server.dispatcher
    busy_worker = await workers.start(PROBE_REGISTRY, pull_server.address)
    gates.hold("first.after-output")
    first = asyncio.create_task(collect(dispatcher, probe_task("first")))
    await gates.wait_arrived("first.after-output")

    second = asyncio.create_task(collect(dispatcher, probe_task("second")))
    # The busy Worker's spare stream is offered the task and declines it: no capacity.
    await wait_until(dispatcher, lambda _: dispatcher.stats.rejected_no_capacity >= 1)
    free_worker = await workers.start(PROBE_REGISTRY, pull_server.address)

    second_frames = await asyncio.wait_for(second, WAIT_SECONDS)
    assert frame_kinds(second_frames) == ["heartbeat", "stream_write", "result"]
    runs = invocation_log.entries("ProbeStep.start")
    assert [(run.details["label"], run.pid) for run in runs] == [
        ("first", busy_worker.pid),
        ("second", free_worker.pid),
    ]

    gates.release("first.after-output")
    assert frame_kinds(await asyncio.wait_for(first, WAIT_SECONDS))[-1] == "result"


async def test_no_capacity_task_waits_for_the_worker_to_finish_its_task(
    pull_server: PullTestServer,
    workers: WorkerLauncher,
    gates: GateBoard,
    invocation_log: InvocationLog,
) -> None:
    dispatcher = pull_server.dispatcher
    await workers.start(PROBE_REGISTRY, pull_server.address)
    gates.hold("first.after-output")
    first = asyncio.create_task(collect(dispatcher, probe_task("first")))
    await gates.wait_arrived("first.after-output")
    second = asyncio.create_task(collect(dispatcher, probe_task("second")))
    await wait_until(dispatcher, lambda _: dispatcher.stats.rejected_no_capacity >= 1)
    assert not second.done()
    assert invocation_log.count("ProbeStep.start") == 1

    gates.release("first.after-output")

    assert frame_kinds(await asyncio.wait_for(first, WAIT_SECONDS))[-1] == "result"
    assert frame_kinds(await asyncio.wait_for(second, WAIT_SECONDS))[-1] == "result"
    labels = [run.details["label"] for run in invocation_log.entries("ProbeStep.done")]
    assert labels == ["first", "second"]


async def test_unknown_step_reject_redispatches_to_a_worker_that_knows_the_step(
    pull_server: PullTestServer, workers: WorkerLauncher, invocation_log: InvocationLog
) -> None:
    dispatcher = pull_server.dispatcher
    await workers.start(STEPLESS_PROBE_REGISTRY, pull_server.address)
    task = asyncio.create_task(collect(dispatcher, probe_task("known")))
    await wait_until(dispatcher, lambda _: dispatcher.stats.rejected_unknown_name >= 1)
    assert not task.done()

    knowing_worker = await workers.start(PROBE_REGISTRY, pull_server.address)

    assert frame_kinds(await asyncio.wait_for(task, WAIT_SECONDS))[-1] == "result"
    assert [run.pid for run in invocation_log.entries("ProbeStep.done")] == [knowing_worker.pid]


@pytest.mark.parametrize("mode", [WorkerMode.SYNC, WorkerMode.ASYNC])
async def test_cancelled_dispatch_keeps_the_stream_busy_and_drops_the_late_result(
    pull_server: PullTestServer,
    workers: WorkerLauncher,
    gates: GateBoard,
    invocation_log: InvocationLog,
    mode: WorkerMode,
) -> None:
    dispatcher = pull_server.dispatcher
    registry = PROBE_REGISTRY if mode is WorkerMode.SYNC else ASYNC_PROBE_REGISTRY
    worker = await workers.start(registry, pull_server.address, mode=mode)
    gates.hold("late.after-output")
    task = probe_task("late")
    frames = dispatcher.dispatch(task)
    assert frame_kinds([await anext(frames), await anext(frames)]) == ["heartbeat", "stream_write"]
    await gates.wait_arrived("late.after-output")

    await frames.aclose()  # what the scheduler's deadline or a Step cancellation does

    if mode is WorkerMode.SYNC:
        # A sync handler cannot be interrupted: its stream stays busy until it answers.
        busy = [stream for stream in dispatcher.streams() if stream.task_id == task.task_id]
        assert [stream.app_worker_id for stream in busy] == [worker.app_worker_id]
    gates.release("late.after-output")
    await wait_until(dispatcher, lambda streams: all(s.task_id is None for s in streams))
    assert dispatcher.stats.frames_dropped == 1
    if mode is WorkerMode.SYNC:
        assert invocation_log.count("ProbeStep.done") == 1  # the result existed, and was dropped

    next_frames = await asyncio.wait_for(collect(dispatcher, probe_task("next")), WAIT_SECONDS)
    assert completion_output(next_frames) == "next:done"


async def test_worker_killed_after_output_raises_worker_lost(
    pull_server: PullTestServer, workers: WorkerLauncher, gates: GateBoard
) -> None:
    worker = await workers.start(PROBE_REGISTRY, pull_server.address)
    gates.hold("doomed.after-output")
    frames = pull_server.dispatcher.dispatch(probe_task("doomed"))
    assert frame_kinds([await anext(frames), await anext(frames)]) == ["heartbeat", "stream_write"]
    await gates.wait_arrived("doomed.after-output")

    worker.kill()

    with pytest.raises(WorkerLost, match=worker.app_worker_id):
        await asyncio.wait_for(anext(frames), WAIT_SECONDS)


async def test_worker_killed_before_output_raises_worker_lost(
    pull_server: PullTestServer, workers: WorkerLauncher, gates: GateBoard
) -> None:
    worker = await workers.start(PROBE_REGISTRY, pull_server.address)
    gates.hold("early.before-output")
    run = asyncio.create_task(collect(pull_server.dispatcher, probe_task("early")))
    await gates.wait_arrived("early.before-output")

    worker.kill()

    # The handler is running (it reached the gate) without having sent a frame.
    with pytest.raises(WorkerLost, match=f"{worker.app_worker_id}.*before any output"):
        await asyncio.wait_for(run, WAIT_SECONDS)


async def test_reconnect_reopens_idle_streams_and_lets_a_busy_stream_finish(
    pull_server: PullTestServer, workers: WorkerLauncher, gates: GateBoard
) -> None:
    dispatcher = pull_server.dispatcher
    worker = await workers.start(PROBE_REGISTRY, pull_server.address, max_concurrent_tasks=2)
    gates.hold("steady.after-output")
    running = asyncio.create_task(collect(dispatcher, probe_task("steady")))
    await gates.wait_arrived("steady.after-output")
    before = dispatcher.streams()
    busy_stream = next(stream for stream in before if stream.task_id is not None)
    newest_before = max(stream.stream_id for stream in before)

    assert dispatcher.reconnect_worker(worker.app_worker_id, "test asked") == len(before)

    # Idle streams close and the Worker opens fresh ones; the busy stream keeps its task.
    def reopened(streams: tuple[PullStreamInfo, ...]) -> bool:
        fresh_queues = {s.queue for s in streams if s.stream_id > newest_before}
        return fresh_queues == {worker.app_worker_id, PROBE_FLOW_TYPE}

    streams = await wait_until(dispatcher, reopened)
    assert busy_stream.stream_id in {stream.stream_id for stream in streams}
    assert not running.done()

    gates.release("steady.after-output")
    assert frame_kinds(await asyncio.wait_for(running, WAIT_SECONDS))[-1] == "result"
    await wait_until(
        dispatcher, lambda streams: busy_stream.stream_id not in {s.stream_id for s in streams}
    )
    assert (
        frame_kinds(await asyncio.wait_for(collect(dispatcher, probe_task("after")), WAIT_SECONDS))[
            -1
        ]
        == "result"
    )


async def test_dispatch_waits_for_a_worker_and_can_be_cancelled_while_waiting(
    pull_server: PullTestServer, workers: WorkerLauncher, invocation_log: InvocationLog
) -> None:
    dispatcher = pull_server.dispatcher
    abandoned = asyncio.create_task(collect(dispatcher, probe_task("abandoned")))
    waiting = asyncio.create_task(collect(dispatcher, probe_task("waiting")))
    await asyncio.sleep(0.2)
    assert not abandoned.done() and not waiting.done()
    abandoned.cancel()

    await workers.start(PROBE_REGISTRY, pull_server.address)

    assert frame_kinds(await asyncio.wait_for(waiting, WAIT_SECONDS))[-1] == "result"
    assert [run.details["label"] for run in invocation_log.entries("ProbeStep.start")] == [
        "waiting"
    ]
    assert dispatcher.stats.tasks_offered == 1


async def test_stopping_worker_drains_its_running_task_then_leaves(
    pull_server: PullTestServer, workers: WorkerLauncher, gates: GateBoard
) -> None:
    dispatcher = pull_server.dispatcher
    worker = await workers.start(PROBE_REGISTRY, pull_server.address)
    gates.hold("draining.after-output")
    running = asyncio.create_task(collect(dispatcher, probe_task("draining")))
    await gates.wait_arrived("draining.after-output")

    stopping = asyncio.create_task(worker.stop())
    # The Worker closes its idle streams at once and keeps the busy one until the result.
    streams = await wait_until(dispatcher, lambda streams: len(streams) == 1)
    assert streams[0].task_id is not None
    gates.release("draining.after-output")

    assert completion_output(await asyncio.wait_for(running, WAIT_SECONDS)) == "draining:done"
    assert await asyncio.wait_for(stopping, WAIT_SECONDS) == 0
    await wait_until(dispatcher, lambda streams: not streams)

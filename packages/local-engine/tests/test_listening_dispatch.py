"""ListeningDispatcher against real SDK Workers in listening mode, in child processes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from dex.dexpb import dex_pb2 as pb
from dex_local_engine.dispatch import DispatchTask, TaskFrame, TaskNotStarted, WorkerLost
from dex_local_engine.listening_dispatch import ListeningDispatcher
from engine_test_support import (
    ChildProcess,
    GateBoard,
    InvocationLog,
    PullTestServer,
    execute_task,
    rpc_task,
    string_value,
)
from engine_test_support.sample_flows import (
    ASYNC_PROBE_REGISTRY,
    PROBE_FLOW_TYPE,
    PROBE_REGISTRY,
    PROBE_STEP_TYPE,
    STEPLESS_PROBE_REGISTRY,
)
from listening_worker_main import free_port, start_listening_worker


@pytest.fixture
async def dispatcher() -> AsyncIterator[ListeningDispatcher]:
    listening = ListeningDispatcher(connect_wait_seconds=0.5)
    try:
        yield listening
    finally:
        await listening.close()


class _Workers:
    def __init__(self, directory: Path, server: PullTestServer, env: dict[str, str]) -> None:
        self.directory, self.server, self.env = directory, server, env
        self.children: list[ChildProcess] = []

    async def start(self, registry: str, *, use_async: bool = False) -> tuple[ChildProcess, str]:
        child, address = await start_listening_worker(
            registry, self.server.address, self.directory, use_async=use_async, env=self.env
        )
        self.children.append(child)
        return child, address


@pytest.fixture
async def listening_workers(
    tmp_path: Path, pull_server: PullTestServer, gates: GateBoard, invocation_log: InvocationLog
) -> AsyncIterator[_Workers]:
    workers = _Workers(tmp_path / "listening", pull_server, {**gates.env(), **invocation_log.env()})
    try:
        yield workers
    finally:
        for child in workers.children:
            child.kill()


def _at(task: DispatchTask, address: str) -> DispatchTask:
    return dataclasses.replace(task, listening_address=address)


async def _frames(dispatcher: ListeningDispatcher, task: DispatchTask) -> list[TaskFrame]:
    return [frame async for frame in dispatcher.dispatch(task)]


@pytest.mark.parametrize("use_async", [False, True])
async def test_step_execute_streams_heartbeat_stream_write_and_result(
    dispatcher: ListeningDispatcher, listening_workers: _Workers, use_async: bool
) -> None:
    registry = ASYNC_PROBE_REGISTRY if use_async else PROBE_REGISTRY
    _, address = await listening_workers.start(registry, use_async=use_async)
    task = _at(execute_task(PROBE_FLOW_TYPE, PROBE_STEP_TYPE, string_value("a")), address)
    frames = await _frames(dispatcher, task)
    kinds = [frame.WhichOneof("output") for frame in frames]
    assert kinds[-1] == "result"
    assert "heartbeat" in kinds
    writes = [frame.stream_write for frame in frames if frame.HasField("stream_write")]  # type: ignore[union-attr]
    assert [(w.stream_name, w.value.string_value) for w in writes] == [("probe-output", "a:chunk")]
    result = frames[-1].result  # type: ignore[union-attr]
    assert "a:done" in str(result)


async def test_rpc_answers_and_unknown_rpc_is_a_worker_error(
    dispatcher: ListeningDispatcher, listening_workers: _Workers
) -> None:
    _, address = await listening_workers.start(PROBE_REGISTRY)
    frames = await _frames(
        dispatcher, _at(rpc_task(PROBE_FLOW_TYPE, "echo", string_value("x")), address)
    )
    assert len(frames) == 1 and isinstance(frames[0], pb.InvokeWorkerRPCResponse)
    assert "echo:x" in str(frames[0])

    _, stepless = await listening_workers.start(STEPLESS_PROBE_REGISTRY)
    frames = await _frames(
        dispatcher, _at(rpc_task(PROBE_FLOW_TYPE, "echo", string_value("y")), stepless)
    )
    assert len(frames) == 1 and isinstance(frames[0], pb.WorkerErrorResponse)
    assert frames[0].detail


async def test_unreachable_worker_is_task_not_started(dispatcher: ListeningDispatcher) -> None:
    task = _at(
        execute_task(PROBE_FLOW_TYPE, PROBE_STEP_TYPE, string_value("b")),
        f"127.0.0.1:{free_port()}",
    )
    with pytest.raises(TaskNotStarted, match="not reachable"):
        await _frames(dispatcher, task)


async def test_killed_before_or_after_output_is_lost(
    dispatcher: ListeningDispatcher,
    listening_workers: _Workers,
    gates: GateBoard,
    invocation_log: InvocationLog,
) -> None:
    gates.hold("early.before-output")
    child, address = await listening_workers.start(PROBE_REGISTRY)
    early = asyncio.create_task(
        _frames(
            dispatcher,
            _at(execute_task(PROBE_FLOW_TYPE, PROBE_STEP_TYPE, string_value("early")), address),
        )
    )
    await gates.wait_arrived("early.before-output")
    child.kill()
    # The handler runs but has sent nothing: it may have had effects, so it is not "not started".
    with pytest.raises(WorkerLost, match="before any output"):
        await early

    gates.hold("late.after-output")
    child, address = await listening_workers.start(PROBE_REGISTRY)
    received: list[TaskFrame] = []

    async def consume() -> None:
        task = _at(execute_task(PROBE_FLOW_TYPE, PROBE_STEP_TYPE, string_value("late")), address)
        async for frame in dispatcher.dispatch(task):
            received.append(frame)

    late = asyncio.create_task(consume())
    await gates.wait_arrived("late.after-output")
    # The handler passes its gate right after sending output, but under load that output can
    # still be in flight: kill only once the engine has it, so this case is "after output".
    async with asyncio.timeout(30):
        while not received and not late.done():
            await asyncio.sleep(0.01)
    assert received, "the Worker's output before the kill reached the engine"
    child.kill()
    with pytest.raises(WorkerLost):
        await late
    assert invocation_log.count("ProbeStep.done") == 0


async def test_cancelling_the_dispatch_cancels_the_call_and_the_channel_stays_usable(
    dispatcher: ListeningDispatcher,
    listening_workers: _Workers,
    gates: GateBoard,
    invocation_log: InvocationLog,
) -> None:
    gates.hold("slow.after-output")
    _, address = await listening_workers.start(ASYNC_PROBE_REGISTRY, use_async=True)
    task = _at(execute_task(PROBE_FLOW_TYPE, PROBE_STEP_TYPE, string_value("slow")), address)
    iteration = dispatcher.dispatch(task)
    first = await anext(iteration)
    assert first.WhichOneof("output") in ("heartbeat", "stream_write")
    await gates.wait_arrived("slow.after-output")
    await asyncio.wait_for(iteration.aclose(), 5)
    # The Worker cancels the handler when it sees the call's cancellation, a moment later.
    async with asyncio.timeout(10):
        while invocation_log.count("ProbeStep.cancelled") == 0:
            await asyncio.sleep(0.02)
    gates.release("slow.after-output")
    frames = await _frames(
        dispatcher, _at(rpc_task(PROBE_FLOW_TYPE, "echo", string_value("after")), address)
    )
    assert "echo:after" in json.dumps(str(frames[0]))
    # The handler was cancelled with the call: released, it never gets to record "done".
    await asyncio.sleep(0.5)
    assert invocation_log.count("ProbeStep.start") == 1
    assert invocation_log.count("ProbeStep.done") == 0

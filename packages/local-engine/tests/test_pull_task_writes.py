"""A pull task is on a Worker (its attempt's in-flight row is committed) only once it is written.

The stream's writer tells the task right before it writes it, with nothing in between, so a task
still queued for a stream when the engine dies has no row and is not counted as a lost attempt
after the restart. These tests hold the writer back (no gRPC call runs it) and play its part.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from dex.dexpb import dex_pb2 as pb
from dex_local_engine.dispatch import DispatchTask, TaskFrame
from dex_local_engine.pull_dispatch import PullDispatcher
from dex_local_engine.pull_worker_registry import Outgoing, WorkerStream
from engine_test_support import execute_task, string_value

FLOW_TYPE = "WriteTimingFlow"


class _CommitFailed(Exception):
    pass


def _task(on_worker: list[bool], *, fails: bool = False) -> DispatchTask:
    def note(is_on_worker: bool) -> None:
        if fails:
            raise _CommitFailed("the in-flight row could not be committed")
        on_worker.append(is_on_worker)

    task = execute_task(FLOW_TYPE, "Write", string_value("x"))
    return dataclasses.replace(task, on_worker=note)


def _stream(dispatcher: PullDispatcher) -> WorkerStream:
    # The registry is the dispatcher's own; no PollWorkerTask call runs this stream's writer.
    registration = pb.PollWorkerTaskRegister(
        queue=FLOW_TYPE, app_worker_id="worker-1", flow_types=[FLOW_TYPE]
    )
    return dispatcher._registry.add_stream(registration)


async def _queued_task_frame(stream: WorkerStream) -> Outgoing:
    """The task frame, taken from the stream's outbox as its writer would take it (after
    ``registered``), once the dispatch queued it."""
    for _ in range(500):
        while not stream.outbox.empty():
            outgoing = stream.outbox.get_nowait()
            if outgoing.response.HasField("task"):
                return outgoing
        await asyncio.sleep(0.01)
    raise AssertionError("the task was never queued for the stream")


async def _first_frame(dispatcher: PullDispatcher, task: DispatchTask) -> TaskFrame:
    async for frame in dispatcher.dispatch(task):
        return frame
    raise AssertionError("no frame")


async def test_a_task_queued_for_a_stream_is_on_a_worker_only_when_written() -> None:
    dispatcher = PullDispatcher()
    stream = _stream(dispatcher)
    on_worker: list[bool] = []
    dispatch = asyncio.create_task(_first_frame(dispatcher, _task(on_worker)))
    outgoing = await _queued_task_frame(stream)
    assert on_worker == []  # queued, not written: an engine killed now leaves no row
    assert outgoing.before_write is not None and outgoing.before_write()  # the writer's turn
    assert on_worker == [True]
    dispatch.cancel()
    await asyncio.gather(dispatch, return_exceptions=True)


async def test_a_task_whose_dispatch_stopped_before_the_write_is_not_written() -> None:
    dispatcher = PullDispatcher()
    stream = _stream(dispatcher)
    on_worker: list[bool] = []
    dispatch = asyncio.create_task(_first_frame(dispatcher, _task(on_worker)))
    outgoing = await _queued_task_frame(stream)
    dispatch.cancel()
    await asyncio.gather(dispatch, return_exceptions=True)
    assert outgoing.before_write is not None and not outgoing.before_write()
    assert on_worker == [] and stream.is_idle  # never on a Worker; the stream takes the next


async def test_a_failed_commit_fails_the_dispatch_and_the_task_is_not_written() -> None:
    dispatcher = PullDispatcher()
    stream = _stream(dispatcher)
    dispatch = asyncio.create_task(_first_frame(dispatcher, _task([], fails=True)))
    outgoing = await _queued_task_frame(stream)
    assert outgoing.before_write is not None and not outgoing.before_write()
    with pytest.raises(_CommitFailed):
        await asyncio.wait_for(dispatch, 10)
    assert stream.is_idle

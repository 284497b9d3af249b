"""The PollWorkerTask protocol frame by frame, with a hand-driven Worker stream.

These cases need exact control over what a Worker sends (a half-close at a chosen moment, a frame
of an unknown task, a bad registration), which a real SDK Worker does not expose.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC

import grpc
import pytest
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from dex_local_engine.dispatch import DispatchTask, TaskFrame, WorkerLost
from engine_test_support import PullTestServer, execute_task, string_value

WAIT_SECONDS = 30.0
FLOW_TYPE = "RawFlow"


class RawWorkerStream:
    """One PollWorkerTask stream driven by the test."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        stub = dex_pb2_grpc.WorkerTaskServiceStub(channel)  # type: ignore[no-untyped-call]
        self.call = stub.PollWorkerTask()

    async def register(
        self, queue: str, app_worker_id: str, flow_types: list[str]
    ) -> pb.PollWorkerTaskResponse:
        await self.send(
            pb.PollWorkerTaskRequest(
                register=pb.PollWorkerTaskRegister(
                    queue=queue, app_worker_id=app_worker_id, flow_types=flow_types, sdk_name="raw"
                )
            )
        )
        return await self.read()

    async def send(self, request: pb.PollWorkerTaskRequest) -> None:
        await self.call.write(request)

    async def read(self) -> pb.PollWorkerTaskResponse:
        response = await asyncio.wait_for(self.call.read(), WAIT_SECONDS)
        assert isinstance(response, pb.PollWorkerTaskResponse), response
        return response

    async def heartbeat(self, task_id: str) -> None:
        output = pb.InvokeExecuteMethodOutput(heartbeat=pb.StepMethodHeartbeat())
        await self.send(
            pb.PollWorkerTaskRequest(
                task_frame=pb.PollWorkerTaskFrame(task_id=task_id, execute=output)
            )
        )

    async def result(self, task_id: str) -> None:
        output = pb.InvokeExecuteMethodOutput(result=pb.InvokeExecuteMethodResponse())
        await self.send(
            pb.PollWorkerTaskRequest(
                task_frame=pb.PollWorkerTaskFrame(task_id=task_id, execute=output)
            )
        )

    async def reject(self, task_id: str, reason: pb.PollWorkerTaskRejectReason) -> None:
        await self.send(
            pb.PollWorkerTaskRequest(reject=pb.PollWorkerTaskReject(task_id=task_id, reason=reason))
        )


@pytest.fixture
async def channel(pull_server: PullTestServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(pull_server.address) as opened:
        yield opened


async def registered_stream(
    channel: grpc.aio.Channel, queue: str = FLOW_TYPE, worker: str = "raw-worker-1"
) -> RawWorkerStream:
    stream = RawWorkerStream(channel)
    first = await stream.register(queue, worker, [FLOW_TYPE])
    assert first.WhichOneof("frame") == "registered"
    assert first.registered.supports_unknown_name_rejection
    return stream


def raw_task(label: str = "x") -> DispatchTask:
    return execute_task(FLOW_TYPE, "RawStep", string_value(label))


async def collect(frames: AsyncIterator[TaskFrame]) -> list[TaskFrame]:
    return [frame async for frame in frames]


async def test_first_frame_other_than_register_is_rejected(channel: grpc.aio.Channel) -> None:
    stream = RawWorkerStream(channel)
    await stream.send(pb.PollWorkerTaskRequest(pong=pb.PollWorkerTaskPong()))

    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await stream.read()

    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "first PollWorkerTask frame must be register, got pong" in str(failure.value.details())


async def test_registration_without_flow_types_is_rejected(channel: grpc.aio.Channel) -> None:
    stream = RawWorkerStream(channel)
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await stream.register(FLOW_TYPE, "raw-worker-1", [])

    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "lists no Flow types" in str(failure.value.details())


async def test_task_carries_its_request_and_deadline(
    pull_server: PullTestServer, channel: grpc.aio.Channel
) -> None:
    stream = await registered_stream(channel)
    task = raw_task("carried")
    run = asyncio.create_task(collect(pull_server.dispatcher.dispatch(task)))

    offered = await stream.read()
    assert offered.task.task_id == task.task_id
    assert offered.task.execute == task.request
    assert offered.task.deadline.ToDatetime(tzinfo=UTC) == task.deadline

    await stream.result(task.task_id)
    frames = await asyncio.wait_for(run, WAIT_SECONDS)
    assert [frame.WhichOneof("output") for frame in frames] == ["result"]


async def test_half_close_before_output_offers_the_task_to_another_stream(
    pull_server: PullTestServer, channel: grpc.aio.Channel
) -> None:
    retiring = await registered_stream(channel, worker="raw-retiring")
    task = raw_task()
    run = asyncio.create_task(collect(pull_server.dispatcher.dispatch(task)))
    assert (await retiring.read()).task.task_id == task.task_id

    await retiring.call.done_writing()  # what a Worker does when it retires an idle stream
    other = await registered_stream(channel, worker="raw-other")

    assert (await other.read()).task.execute == task.request
    await other.result(task.task_id)
    assert len(await asyncio.wait_for(run, WAIT_SECONDS)) == 1
    assert pull_server.dispatcher.stats.tasks_offered == 2


async def test_stream_broken_after_the_task_arrived_raises_worker_lost(
    pull_server: PullTestServer, channel: grpc.aio.Channel
) -> None:
    stream = await registered_stream(channel)
    task = raw_task()
    run = asyncio.create_task(collect(pull_server.dispatcher.dispatch(task)))
    assert (await stream.read()).task.task_id == task.task_id

    stream.call.cancel()

    with pytest.raises(WorkerLost, match="broke after the task was sent to the Worker"):
        await asyncio.wait_for(run, WAIT_SECONDS)


async def test_half_close_after_output_raises_worker_lost(
    pull_server: PullTestServer, channel: grpc.aio.Channel
) -> None:
    stream = await registered_stream(channel)
    task = raw_task()
    frames = pull_server.dispatcher.dispatch(task)
    first = asyncio.ensure_future(anext(frames))
    assert (await stream.read()).task.task_id == task.task_id
    await stream.heartbeat(task.task_id)
    assert (await asyncio.wait_for(first, WAIT_SECONDS)).WhichOneof("output") == "heartbeat"

    await stream.call.done_writing()

    with pytest.raises(WorkerLost, match="after the task sent output"):
        await asyncio.wait_for(anext(frames), WAIT_SECONDS)


async def test_frames_of_other_tasks_are_dropped(
    pull_server: PullTestServer, channel: grpc.aio.Channel
) -> None:
    stream = await registered_stream(channel)
    task = raw_task()
    run = asyncio.create_task(collect(pull_server.dispatcher.dispatch(task)))
    await stream.read()

    await stream.result("some-other-task")
    await stream.heartbeat(task.task_id)
    await stream.result(task.task_id)

    frames = await asyncio.wait_for(run, WAIT_SECONDS)
    assert [frame.WhichOneof("output") for frame in frames] == ["heartbeat", "result"]
    assert pull_server.dispatcher.stats.frames_dropped == 1


async def test_rejected_task_is_offered_to_another_worker_with_the_same_request(
    pull_server: PullTestServer, channel: grpc.aio.Channel
) -> None:
    full = await registered_stream(channel, worker="raw-full")
    task = raw_task()
    run = asyncio.create_task(collect(pull_server.dispatcher.dispatch(task)))
    assert (await full.read()).task.task_id == task.task_id
    # The other Worker is there before the reject: a declining stream is offered the task again
    # after 2 ms, sooner than a stream opened after the reject may register on a busy machine.
    spare = await registered_stream(channel, worker="raw-spare")
    await full.reject(task.task_id, pb.POLL_WORKER_TASK_REJECT_REASON_NO_CAPACITY)

    offered = await spare.read()
    assert offered.task.execute == task.request
    await spare.result(offered.task.task_id)

    assert len(await asyncio.wait_for(run, WAIT_SECONDS)) == 1
    assert pull_server.dispatcher.stats.rejected_no_capacity == 1


async def test_tasks_go_only_to_streams_of_their_queue(
    pull_server: PullTestServer, channel: grpc.aio.Channel
) -> None:
    other_queue = await registered_stream(channel, queue="SomeOtherQueue", worker="raw-other")
    sticky = await registered_stream(channel, queue="raw-sticky", worker="raw-sticky")
    flow_queue = await registered_stream(channel, queue=FLOW_TYPE, worker="raw-flow")
    default_task = raw_task("default")
    sticky_task = replace(raw_task("sticky"), queue="raw-sticky")

    default_run = asyncio.create_task(collect(pull_server.dispatcher.dispatch(default_task)))
    sticky_run = asyncio.create_task(collect(pull_server.dispatcher.dispatch(sticky_task)))

    assert (await flow_queue.read()).task.task_id == default_task.task_id
    assert (await sticky.read()).task.task_id == sticky_task.task_id
    await flow_queue.result(default_task.task_id)
    await sticky.result(sticky_task.task_id)
    await asyncio.wait_for(asyncio.gather(default_run, sticky_run), WAIT_SECONDS)
    busy = [info for info in pull_server.dispatcher.streams() if info.queue == "SomeOtherQueue"]
    assert [info.task_id for info in busy] == [None]
    assert pull_server.dispatcher.stats.tasks_offered == 2
    del other_queue

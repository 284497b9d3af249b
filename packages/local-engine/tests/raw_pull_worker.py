"""A hand-made pull Worker for tests that need answers no SDK Worker would send.

It speaks ``WorkerTaskService.PollWorkerTask`` directly: registers for one Flow type, then answers
each task with the frames ``answer(task)`` returns (a ``wait_for`` task it answers by default with
an empty result, so the Step moves on to ``execute``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import grpc
from dex.dexpb import dex_pb2 as pb

__all__ = ["RawWorker", "complete", "execute_result", "raw_pull_worker"]

Answer = Callable[[pb.PollWorkerTask], list[pb.PollWorkerTaskFrame] | None]
"""The frames to answer a task with; None for the default answer."""


@dataclass
class RawWorker:
    """What the raw Worker saw."""

    tasks: list[pb.PollWorkerTask] = field(default_factory=list)
    ended: grpc.aio.AioRpcError | None = None
    """The status that ended the stream, if the engine ended it."""


def execute_result(
    task: pb.PollWorkerTask, result: pb.InvokeExecuteMethodResponse
) -> list[pb.PollWorkerTaskFrame]:
    """The final frame answering an execute ``task`` with ``result``."""
    output = pb.InvokeExecuteMethodOutput(result=result)
    return [pb.PollWorkerTaskFrame(task_id=task.task_id, execute=output)]


def _default_answer(task: pb.PollWorkerTask) -> list[pb.PollWorkerTaskFrame]:
    if task.WhichOneof("request") == "wait_for":
        output = pb.InvokeWaitForMethodOutput(result=pb.InvokeWaitForMethodResponse())
        return [pb.PollWorkerTaskFrame(task_id=task.task_id, wait_for=output)]
    return execute_result(task, pb.InvokeExecuteMethodResponse(step_decision=complete()))


def complete() -> pb.StepDecision:
    """A decision that completes the Flow with the output ``"done"``."""
    close = pb.CloseDecision(
        close_decision_type=pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE,
        close_input=pb.Value(string_value="done"),
    )
    return pb.StepDecision(close_decision=close)


@asynccontextmanager
async def raw_pull_worker(
    address: str, flow_type: str, answer: Answer, worker_id: str = "raw-worker"
) -> AsyncIterator[RawWorker]:
    """Run a raw pull Worker for ``flow_type`` on the engine at ``address`` while in the block."""
    seen = RawWorker()
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.stream_stream(
            "/dex.WorkerTaskService/PollWorkerTask",
            request_serializer=pb.PollWorkerTaskRequest.SerializeToString,
            response_deserializer=pb.PollWorkerTaskResponse.FromString,
        )()
        register = pb.PollWorkerTaskRegister(
            queue=flow_type, app_worker_id=worker_id, flow_types=[flow_type]
        )
        await call.write(pb.PollWorkerTaskRequest(register=register))

        async def serve() -> None:
            try:
                while (response := await call.read()) is not grpc.aio.EOF:
                    if response.WhichOneof("frame") != "task":
                        continue
                    seen.tasks.append(response.task)
                    frames = answer(response.task) or _default_answer(response.task)
                    for frame in frames:
                        await call.write(pb.PollWorkerTaskRequest(task_frame=frame))
            except grpc.aio.AioRpcError as error:
                seen.ended = error

        serving = asyncio.create_task(serve())
        try:
            yield seen
        finally:
            call.cancel()
            await asyncio.gather(serving, return_exceptions=True)

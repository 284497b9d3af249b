"""Dispatch of Step methods and RPCs to listening Workers (the engine calls ``WorkerService``).

A Flow started with ``WorkerTarget(address="host:port")`` is served by a Worker that listens on
that address. For each task the engine calls, at ``task.listening_address``:

* ``InvokeWaitForMethod`` / ``InvokeExecuteMethod`` (server streaming): the Worker streams
  heartbeat and Stream-write frames, then one frame with ``result``;
* ``InvokeWorkerRPC`` (unary): one ``InvokeWorkerRPCResponse``.

The gRPC deadline of the call is the task's deadline, so the Worker knows it. How call outcomes
map to the :class:`~dex_local_engine.dispatch.Dispatcher` contract:

==========================================================  ===================================
outcome                                                     result
==========================================================  ===================================
the Worker is unreachable (within ``connect_wait_seconds``)  :class:`TaskNotStarted`
the stream ends cleanly before any frame                     :class:`TaskNotStarted`
the handler raised (status details hold a                   a final ``WorkerErrorResponse``
``WorkerErrorResponse``)                                    frame
another gRPC failure (UNIMPLEMENTED, INTERNAL,              a final ``WorkerErrorResponse``
RESOURCE_EXHAUSTED, ...)                                    naming the status
the call breaks, is cancelled by the Worker or times out    :class:`WorkerLost`
(before or after output), or the stream ends without a
result after output
==========================================================  ===================================

A call that breaks before any frame is lost, not unstarted: the call was made on a connected
channel, so the Worker may have started the task, and SDK 1.23's ``heartbeat()`` only queues its
frame, so a tool that already ran may not have said so yet. Handing such a task out again could
run a non-idempotent write twice.

Cancelling the iteration cancels the gRPC call (the Worker's handler sees its context end).

Public API: :class:`ListeningDispatcher` (``dispatch(task)``, ``await close()``).

Example::

    listening = ListeningDispatcher()
    async for frame in listening.dispatch(task):   # task.listening_address == "localhost:8803"
        handle(frame)
    await listening.close()                          # on engine shutdown
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Any

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from grpc_status import rpc_status

from dex_local_engine.dispatch import (
    DispatchTask,
    TaskFrame,
    TaskNotStarted,
    WorkerLost,
    note_on_worker,
)
from dex_local_engine.exceptions import EngineConfigurationError

__all__ = ["ListeningDispatcher"]

_LOGGER = logging.getLogger(__name__)

_LOST_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED}
)
"""Transport-level endings of a call made on a connected channel: the Worker is lost."""
_CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
"""A restarted Worker is found within a second, not after gRPC's default backoff (up to 2 min)."""


class ListeningDispatcher:
    """Runs tasks on listening Workers by calling their ``WorkerService``.

    Args:
        connect_wait_seconds: how long a dispatch waits for an unreachable Worker to accept a
            connection before raising :class:`TaskNotStarted` (the scheduler then dispatches
            again, so this also paces reconnect attempts to a Worker that is down).
    """

    def __init__(self, *, connect_wait_seconds: float = 1.0) -> None:
        if connect_wait_seconds <= 0:
            raise EngineConfigurationError(
                f"connect_wait_seconds must be positive, got {connect_wait_seconds}"
            )
        self._connect_wait_seconds = connect_wait_seconds
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def close(self) -> None:
        """Close every Worker channel; in-flight calls end with CANCELLED."""
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close(None)

    def dispatch(self, task: DispatchTask) -> AsyncGenerator[TaskFrame, None]:
        """Run ``task`` on the listening Worker at ``task.listening_address``; yield its frames.

        Raises:
            EngineConfigurationError: ``task.listening_address`` is None (a pull task).
            TaskNotStarted: the Worker could not be reached, or ended the call cleanly before
                any output.
            WorkerLost: the call broke after it reached the Worker, or the Worker went away
                after output.
        """
        if not task.listening_address:
            raise EngineConfigurationError(f"task {task.task_id} has no listening address")
        if isinstance(task.request, pb.InvokeWorkerRPCRequest):
            return self._dispatch_rpc(task, task.request)
        return self._dispatch_step_method(task)

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            target = f"127.0.0.1{address}" if address.startswith(":") else address
            channel = grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS)
            self._channels[address] = channel
        return channel

    async def _forget_channel(self, address: str) -> None:
        channel = self._channels.pop(address, None)
        if channel is not None:
            await channel.close(None)

    async def _connected_stub(self, task: DispatchTask) -> dex_pb2_grpc.WorkerServiceStub:
        address = task.listening_address
        assert address is not None
        channel = self._channel(address)
        try:
            await asyncio.wait_for(channel.channel_ready(), self._connect_wait_seconds)
        except TimeoutError:
            # A fresh channel connects at once next time instead of after gRPC's backoff.
            await self._forget_channel(address)
            raise TaskNotStarted(
                f"listening Worker at {address} is not reachable (task {task.task_id})"
            ) from None
        return dex_pb2_grpc.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]

    async def _dispatch_step_method(self, task: DispatchTask) -> AsyncGenerator[TaskFrame, None]:
        stub = await self._connected_stub(task)
        note_on_worker(task, True)
        method: Any = (
            stub.InvokeWaitForMethod
            if isinstance(task.request, pb.InvokeWaitForMethodRequest)
            else stub.InvokeExecuteMethod
        )
        call = method(task.request, timeout=_seconds_until(task.deadline))
        received_output = False
        try:
            async for frame in call:
                received_output = True
                yield frame
                if frame.HasField("result"):
                    return
        except grpc.aio.AioRpcError as error:
            yield _failure_frame(task, error, received_output)
            return
        finally:
            call.cancel()
        raise _ended_early(task, received_output)

    async def _dispatch_rpc(
        self, task: DispatchTask, request: pb.InvokeWorkerRPCRequest
    ) -> AsyncGenerator[TaskFrame, None]:
        stub = await self._connected_stub(task)
        note_on_worker(task, True)
        call = stub.InvokeWorkerRPC(request, timeout=_seconds_until(task.deadline))
        try:
            response: pb.InvokeWorkerRPCResponse = await call
        except grpc.aio.AioRpcError as error:
            # A unary call gives no sign of whether the handler began; once connected, assume
            # it may have (the safe side for an RPC with effects).
            yield _failure_frame(task, error, received_output=True)
            return
        finally:
            call.cancel()
        yield response


def _seconds_until(deadline: datetime) -> float:
    return max(0.001, (deadline - datetime.now(UTC)).total_seconds())


def _ended_early(task: DispatchTask, received_output: bool) -> Exception:
    if received_output:
        return WorkerLost(f"listening Worker ended task {task.task_id} without a result")
    return TaskNotStarted(f"listening Worker ended task {task.task_id} without any output")


def _failure_frame(
    task: DispatchTask, error: grpc.aio.AioRpcError, received_output: bool
) -> pb.WorkerErrorResponse:
    """The handler's error from the call's status, or raises TaskNotStarted/WorkerLost."""
    worker_error = _worker_error_of(error)
    if worker_error is not None:
        return worker_error
    code = error.code()
    if code in _LOST_CODES:
        when = "after output" if received_output else "before any output (it may have started)"
        raise WorkerLost(
            f"listening Worker at {task.listening_address}: {code.name} {when}: {error.details()}"
        )
    _LOGGER.warning("listening Worker call for task %s failed: %s", task.task_id, error)
    return pb.WorkerErrorResponse(
        detail=f"Worker call failed with {code.name}: {error.details()}",
        error_type=f"grpc.StatusCode.{code.name}",
        grpc_status=code.value[0],
    )


def _worker_error_of(error: grpc.aio.AioRpcError) -> pb.WorkerErrorResponse | None:
    try:
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
    except ValueError:
        return None
    if status is None:
        return None
    for packed in status.details:
        candidate = pb.WorkerErrorResponse()
        if packed.Is(candidate.DESCRIPTOR):
            packed.Unpack(candidate)
            if not candidate.grpc_status:
                candidate.grpc_status = status.code
            return candidate
    return None

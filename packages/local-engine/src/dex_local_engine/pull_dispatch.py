"""Dispatch of Step methods and RPCs to pull Workers over ``WorkerTaskService.PollWorkerTask``.

:class:`PullDispatcher` is both the engine's ``WorkerTaskService`` servicer (Workers open streams
to it) and a :class:`~dex_local_engine.dispatch.Dispatcher` (the scheduler hands it tasks).

Wiring, in the engine's server (one asyncio event loop serves gRPC and runs the scheduler)::

    from dex.dexpb import dex_pb2_grpc
    from dex_local_engine.pull_dispatch import PullDispatcher

    pull = PullDispatcher()
    server = grpc.aio.server()
    dex_pb2_grpc.add_WorkerTaskServiceServicer_to_server(pull, server)
    scheduler = Scheduler(..., dispatcher=pull)  # tasks with listening_address=None
    ...
    pull.reconnect_all("engine shutting down")  # on graceful shutdown, before server.stop()

Protocol, as the Dex SDK's pull Worker expects it:

- A stream's first frame from the Worker is ``register`` (queue, app Worker ID, Flow types); the
  engine answers ``registered`` before anything else: at once, or (for a spare stream of a queue
  that has an idle registered stream) when it first offers the stream a task.
- A stream carries one task at a time: ``task`` out, then ``task_frame``s back (heartbeats and
  Stream writes, then the result, or ``worker_error``), or a ``reject``.
- A rejected task is offered to other streams without using an attempt. A Worker that declines a
  Step (an RPC) for lack of capacity is offered no Step (RPC) while it holds as many tasks as it
  held then, its learned bound, but for one probe per retry delay (2 ms, doubling, at most
  ``no_capacity_retry_seconds``): see :mod:`dex_local_engine.pull_worker_capacity`. A Worker that
  does not know the Step or RPC is skipped for that task. A task waits for a Worker without
  limit; the scheduler enforces the deadline by cancelling the dispatch.
- The task's ``on_worker(True)`` (the scheduler commits the attempt's in-flight row) runs in the
  stream's writer right before the task is written, with nothing in between: a task still queued
  for a stream when the engine dies left no row, so it is not counted as a lost attempt.
- Cancelling a dispatch sends ``cancel_task``; the stream stays busy until the Worker's final frame,
  which is dropped (a task not written yet is not written at all, and its stream is free).
- A Worker retires idle streams at any time (half-close, then it rejects or silently drops a task
  that arrives), so a task whose stream half-closes before any output never ran: it is offered to
  another stream, like a reject. A stream that breaks (a killed Worker, a cancelled call) after the
  task was written to it raises :class:`WorkerLost`, with or without output: the Worker may have
  started the task, and a tool that ran must never be handed out again as unstarted (SDK 1.23's
  ``heartbeat()`` only queues its frame, so "no output yet" does not prove "not started"). Only a
  break before the task was written raises :class:`TaskNotStarted` (same attempt). After output,
  any end of the stream raises :class:`WorkerLost`. A clean half-close and a break both read as
  EOF on the server; a ``ping`` written after the EOF tells them apart (it fails on a broken call).
- Tasks waiting for a stream: RPCs first, first come, first served; Steps oldest work first
  (the Steps of work under way, such as a session resumed after a person, before the Steps of
  work that started later), with a bound so new work still starts: see
  :mod:`dex_local_engine.step_dispatch_order`. A declined task keeps its place.
- Idle streams are offered least-busy Worker first, registered before held spares, then
  longest-idle stream first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

from dex_local_engine.dispatch import (
    DispatchTask,
    TaskFrame,
    TaskNotStarted,
    UnknownTaskName,
    WorkerLost,
    note_on_worker,
)
from dex_local_engine.exceptions import EngineConfigurationError
from dex_local_engine.pull_worker_registry import (
    Assignment,
    Exclusions,
    FrameEvent,
    PullDispatchStats,
    PullStreamInfo,
    PullWorkerRegistry,
    RejectEvent,
    StreamGoneEvent,
    WorkerStream,
    WriteRefusedEvent,
)
from dex_local_engine.request_decoding import UndecodableRequest
from dex_local_engine.step_dispatch_order import DEFAULT_MAX_OVERTAKE_SECONDS, StepDispatchOrder

__all__ = ["PullDispatchStats", "PullDispatcher", "PullStreamInfo"]

_LOGGER = logging.getLogger(__name__)
_EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]  # missing from the grpc stubs
_PROBE_SECONDS = 5.0
_REJECT_REASONS = frozenset(pb.PollWorkerTaskRejectReason.values())
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class PullDispatcher(dex_pb2_grpc.WorkerTaskServiceServicer):
    """Serves pull Worker streams and dispatches tasks to them.

    Args:
        no_capacity_retry_seconds: the longest wait between probes of a Worker at a bound
            learned from its declines for lack of capacity; probes start 2 ms after a decline.
        max_overtake_seconds: Steps waiting for a free slot are offered one oldest work first,
            but never before a Step that started waiting more than this earlier (0: in arrival
            order); see :mod:`dex_local_engine.step_dispatch_order`.

    Raises:
        EngineConfigurationError: ``no_capacity_retry_seconds`` not positive, or
            ``max_overtake_seconds`` negative.

    Example:
        >>> pull = PullDispatcher()
        >>> async for frame in pull.dispatch(task):  # doctest: +SKIP
        ...     handle(frame)
    """

    def __init__(
        self,
        *,
        no_capacity_retry_seconds: float = 1.0,
        max_overtake_seconds: float = DEFAULT_MAX_OVERTAKE_SECONDS,
    ) -> None:
        if no_capacity_retry_seconds <= 0:
            raise EngineConfigurationError(
                f"no_capacity_retry_seconds must be positive, got {no_capacity_retry_seconds}"
            )
        if max_overtake_seconds < 0:
            raise EngineConfigurationError(
                f"max_overtake_seconds must be 0 or more, got {max_overtake_seconds}"
            )
        self._registry = PullWorkerRegistry(
            no_capacity_retry_seconds, step_order=StepDispatchOrder(max_overtake_seconds)
        )

    # Dispatcher ----------------------------------------------------------------------------

    async def dispatch(self, task: DispatchTask) -> AsyncGenerator[TaskFrame, None]:
        """Run ``task`` on a pull Worker and yield its frames; the last one is final.

        Raises:
            TaskNotStarted: the stream broke before the task was written to it.
            UnknownTaskName: an RPC that every connected Worker of its Flow type declined as
                unknown (a Step waits for a Worker that knows it instead).
            WorkerLost: the stream broke after the task was written to it, or ended after output
                but before the final frame.
        """
        exclusions = Exclusions()
        # A declined task waits again in the place it had.
        waiting_since = self._registry.waiting_since()
        # Built once: every Worker the task is offered to gets the same frame.
        response = _poll_worker_task_response(task)
        while True:
            assignment = await self._registry.acquire(task, exclusions, waiting_since)
            delivered = asyncio.get_running_loop().create_future()
            try:
                assignment.stream.send(
                    response, delivered, before_write=self._before_writing(assignment)
                )
                while True:
                    event = await assignment.events.get()
                    if isinstance(event, FrameEvent):
                        yield event.frame
                        if event.is_final:
                            return
                    elif isinstance(event, WriteRefusedEvent):
                        self._registry.release_unsent(assignment)
                        raise event.error
                    elif isinstance(event, RejectEvent):
                        self._note_reject(assignment, event, exclusions)
                        if _is_rpc(task) and self._registry.all_workers_lack_name(task, exclusions):
                            raise UnknownTaskName(
                                f"no connected Worker of flow type {task.flow_type!r} "
                                "knows this RPC"
                            )
                        break
                    elif event.is_half_close and not assignment.has_output:
                        # A retiring stream: the Worker rejects or drops tasks once it drains.
                        break
                    else:
                        # The stream's end resolves ``delivered`` (written or not) right after.
                        raise _stream_gone_error(assignment, event, await delivered)
                # Declined, or a retiring stream: the task never ran and waits for a Worker again.
                note_on_worker(task, False)
            finally:
                self._registry.abandon(assignment)

    def _before_writing(self, assignment: Assignment) -> Callable[[], bool]:
        """What the stream's writer does right before it writes the task: tell the task it is on
        a Worker (the scheduler commits the attempt's in-flight row then); False: do not write it.

        Committing there rather than when the task is queued leaves no gap in which a killed
        engine has a row for a task it never wrote (no Worker can have run it, yet the restart
        would count it lost). A task whose dispatch stopped listening meanwhile is not written
        (its stream is free again); when the commit fails, the task is not written and its
        dispatch raises the error.
        """

        def take() -> bool:
            if assignment.is_abandoned:
                self._registry.release_unsent(assignment)
                return False
            try:
                note_on_worker(assignment.task, True)
            except Exception as error:
                assignment.events.put_nowait(WriteRefusedEvent(error))
                return False
            return True

        return take

    # Administration ------------------------------------------------------------------------

    def reconnect_all(self, reason: str) -> int:
        """Ask every Worker to reopen its streams (for example before the engine stops).

        Idle streams close at once; a busy stream closes after its task's final frame. Returns the
        number of streams asked.
        """
        return self._registry.reconnect(None, reason)

    def reconnect_worker(self, app_worker_id: str, reason: str) -> int:
        """Ask one Worker, by app Worker ID, to reopen its streams. Returns the streams asked."""
        return self._registry.reconnect(app_worker_id, reason)

    def streams(self) -> tuple[PullStreamInfo, ...]:
        """Snapshot of the registered pull streams."""
        return self._registry.streams()

    @property
    def stats(self) -> PullDispatchStats:
        """Counters of streams, offers, rejections and dropped frames so far."""
        return self._registry.stats

    async def wait_streams_changed(self) -> None:
        """Wait until a stream registers, ends, or turns busy or idle."""
        await self._registry.wait_changed()

    # WorkerTaskService ---------------------------------------------------------------------

    async def PollWorkerTask(
        self,
        request_iterator: AsyncIterator[pb.PollWorkerTaskRequest],
        context: grpc.aio.ServicerContext[pb.PollWorkerTaskRequest, pb.PollWorkerTaskResponse],
    ) -> None:
        """One Worker stream: register, then carry one task at a time until the Worker leaves."""
        del request_iterator  # frames are read with context.read() so writes can interleave
        first = await context.read()
        if first is _EOF:
            return
        problem = _registration_problem(first)
        if problem is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        stream = self._registry.add_stream(first.register)
        writer = asyncio.create_task(_write_frames(stream, context))
        detail = "the Worker's stream broke"
        is_half_close = False
        problem = None
        try:
            while True:
                request = await context.read()
                if request is _EOF:
                    if await _is_still_connected(stream, writer):
                        detail, is_half_close = "the Worker's stream closed", True
                    break
                problem = self._handle_request(stream, request)
                if problem is not None:
                    detail = problem
                    # No new task for this stream; let the writer finish what it is writing.
                    stream.is_draining = True
                    await _written_so_far(stream, writer)
                    break
        finally:
            self._registry.remove_stream(stream, detail, is_half_close=is_half_close)
            writer.cancel()
            try:
                # grpc cannot finish a call while a write is in flight (TOO_MANY_OPERATIONS).
                await asyncio.gather(writer, return_exceptions=True)
            finally:
                # Even when the server cancels this handler: a dispatch awaits these answers.
                stream.fail_unwritten()
        if problem is not None:
            # Only now that no write is in flight can the call end with a status.
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)

    def _handle_request(
        self, stream: WorkerStream, request: pb.PollWorkerTaskRequest | UndecodableRequest
    ) -> str | None:
        """Route one frame; a sentence naming what is wrong with it ends the stream."""
        if isinstance(request, UndecodableRequest):
            return request.problem
        kind = request.WhichOneof("frame")
        if kind == "task_frame":
            self._registry.on_task_frame(stream, request.task_frame)
        elif kind == "reject":
            reason = request.reject.reason
            if reason not in _REJECT_REASONS:
                # The Worker did decline: the task goes elsewhere, then the stream ends.
                request.reject.reason = pb.POLL_WORKER_TASK_REJECT_REASON_UNSPECIFIED
                self._registry.on_reject(stream, request.reject)
                return f"PollWorkerTask reject has an unknown reason {reason}"
            self._registry.on_reject(stream, request.reject)
        elif kind == "register":
            return "PollWorkerTask register is only valid as the first frame of a stream"
        return None

    def _note_reject(
        self, assignment: Assignment, event: RejectEvent, exclusions: Exclusions
    ) -> None:
        worker = assignment.stream.app_worker_id
        reason = pb.PollWorkerTaskRejectReason.Name(event.reason)
        _LOGGER.debug("Worker %s rejected task %s: %s", worker, assignment.task.task_id, reason)
        exclusions.record(assignment.stream, event.reason)


async def _write_frames(
    stream: WorkerStream,
    context: grpc.aio.ServicerContext[pb.PollWorkerTaskRequest, pb.PollWorkerTaskResponse],
) -> None:
    while True:
        outgoing = await stream.outbox.get()
        if outgoing.before_write is not None and not outgoing.before_write():
            if outgoing.written is not None and not outgoing.written.done():
                outgoing.written.set_result(False)
            continue
        try:
            await context.write(outgoing.response)
        except BaseException:
            # The call is over (grpc.aio raises CancelledError); the reader reports the end.
            _LOGGER.debug("write to pull stream %d failed", stream.stream_id, exc_info=True)
            if outgoing.written is not None and not outgoing.written.done():
                outgoing.written.set_result(False)
            return
        if outgoing.written is not None and not outgoing.written.done():
            outgoing.written.set_result(True)


async def _is_still_connected(stream: WorkerStream, writer: asyncio.Task[None]) -> bool:
    """After the Worker's EOF: a half-close (the Worker still reads) or a broken call?

    Both read as EOF on the server. A live, half-closed Worker still accepts a ``ping``; a
    cancelled or dead call fails the write. Only asked when it matters: the stream carries a task
    without output, which a half-close lets run elsewhere and a break returns as TaskNotStarted.
    """
    if not stream.carries_unstarted_task:
        return True
    return await _written_so_far(stream, writer)


async def _written_so_far(stream: WorkerStream, writer: asyncio.Task[None]) -> bool:
    """Queue a ``ping`` and wait until it was written (so every frame before it was), the writer
    ended, or a few seconds passed; True when the ping was written.

    A call can end with a status only while no write is in flight (else grpc fails the call
    with TOO_MANY_OPERATIONS and the peer gets no status).
    """
    written: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    stream.send(pb.PollWorkerTaskResponse(ping=pb.PollWorkerTaskPing()), written)
    waiting: set[asyncio.Future[Any]] = {written, writer}
    await asyncio.wait(waiting, timeout=_PROBE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    return written.done() and written.result()


def _registration_problem(request: pb.PollWorkerTaskRequest | UndecodableRequest) -> str | None:
    if isinstance(request, UndecodableRequest):
        return request.problem
    kind = request.WhichOneof("frame")
    if kind != "register":
        return f"the first PollWorkerTask frame must be register, got {kind or 'an empty frame'}"
    register = request.register
    if not register.queue:
        return "PollWorkerTask register needs a queue"
    if not register.app_worker_id:
        return "PollWorkerTask register needs an app_worker_id"
    if not register.flow_types:
        return f"PollWorkerTask register for queue {register.queue!r} lists no Flow types"
    return None


def _is_rpc(task: DispatchTask) -> bool:
    return isinstance(task.request, pb.InvokeWorkerRPCRequest)


def _poll_worker_task_response(task: DispatchTask) -> pb.PollWorkerTaskResponse:
    # The request is copied once, into the response's own field: building a PollWorkerTask and
    # passing it to the response's constructor copied it twice (a 465 KiB task: 0.8 ms against
    # 0.5 ms with its serialization, benchmarks/README.md "The engine: a task copied once").
    response = pb.PollWorkerTaskResponse()
    message = response.task
    message.task_id = task.task_id
    # What Timestamp.FromDatetime computes, without its Python-level checks and conversions.
    since_epoch = task.deadline - _EPOCH
    message.deadline.seconds = since_epoch.days * 86_400 + since_epoch.seconds
    message.deadline.nanos = since_epoch.microseconds * 1_000
    request = task.request
    if isinstance(request, pb.InvokeWaitForMethodRequest):
        message.wait_for.CopyFrom(request)
    elif isinstance(request, pb.InvokeExecuteMethodRequest):
        message.execute.CopyFrom(request)
    else:
        message.rpc.CopyFrom(request)
    return response


def _stream_gone_error(
    assignment: Assignment, event: StreamGoneEvent, was_delivered: bool
) -> Exception:
    stream = assignment.stream
    where = (
        f"task {assignment.task.task_id} on Worker {stream.app_worker_id} "
        f"(queue {stream.registration.queue!r})"
    )
    if assignment.has_output:
        return WorkerLost(f"{where}: {event.detail} after the task sent output")
    if was_delivered:
        return WorkerLost(
            f"{where}: {event.detail} after the task was sent to the Worker, before any output "
            "(it may have started)"
        )
    return TaskNotStarted(f"{where}: {event.detail} before the task was sent to the Worker")

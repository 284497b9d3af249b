"""Running one attempt of a Step method or RPC on a Worker, from dispatch to its final frame.

The runner turns what happens on the way into an outcome the scheduler can apply: the Worker's
result, an :class:`AttemptFailure` (handler error, lost Worker, timeout, heartbeat timeout,
dispatcher fault), or ``None`` when the attempt never started and must be dispatched again
(no Worker took it, or the Worker only loaded a page of blobs).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeAlias

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.blob_values import BlobStore
from dex_local_engine.dispatch import (
    Dispatcher,
    DispatchTask,
    TaskFrame,
    TaskNotStarted,
    TaskRequest,
    UnknownTaskName,
    WorkerLost,
)
from dex_local_engine.field_checks import BlobReferences, field_problem
from dex_local_engine.flow_state import FlowRun, StepExecution
from dex_local_engine.heartbeat_window import HeartbeatWindow
from dex_local_engine.result_checks import MALFORMED_RESULT_ERROR_TYPE
from dex_local_engine.wire_values import ensure_value

__all__ = [
    "UNKNOWN_NAME_ERROR_TYPE",
    "AttemptFailure",
    "DispatcherRouter",
    "StreamWriter",
    "TaskOutcome",
    "TaskRunner",
]

_log = logging.getLogger(__name__)

_REDISPATCH_DELAY = 0.05

_TASK_ID_PREFIX = uuid.uuid4().hex
"""Task IDs are this process's random prefix and a counter: unique as a UUID each would be,
without a ``getrandom`` call and a UUID's formatting per attempt."""
_task_numbers = itertools.count(1)

_FRAME_TYPES: dict[type[TaskRequest], type[TaskFrame]] = {
    pb.InvokeWaitForMethodRequest: pb.InvokeWaitForMethodOutput,
    pb.InvokeExecuteMethodRequest: pb.InvokeExecuteMethodOutput,
    pb.InvokeWorkerRPCRequest: pb.InvokeWorkerRPCResponse,
}
"""The frames a Worker may answer each kind of task with (besides a ``WorkerErrorResponse``)."""

UNKNOWN_NAME_ERROR_TYPE = "UnknownName"
"""The ``dex_local_engine.`` error type of an RPC no connected Worker knows."""

DispatcherRouter = Callable[[str | None], Dispatcher]
"""Returns the dispatcher for a listening Worker address, or for pull Workers (None)."""

StreamWriter = Callable[[FlowRun, str, pb.StepStreamWrite], None]
"""Stores one ``stream_write`` frame of a run's Step execution (run, step execution ID, frame)."""


@dataclass(frozen=True)
class AttemptFailure:
    """An attempt that ended without a result."""

    error: pb.WorkerErrorResponse
    reached_worker: bool
    """Whether the attempt may have run on a Worker (so it used up an attempt)."""


TaskOutcome: TypeAlias = (
    pb.InvokeWaitForMethodResponse
    | pb.InvokeExecuteMethodResponse
    | pb.InvokeWorkerRPCResponse
    | AttemptFailure
)
"""What one attempt produced."""


def _failure(detail: str, error_type: str, *, reached_worker: bool) -> AttemptFailure:
    return AttemptFailure(
        pb.WorkerErrorResponse(detail=detail, error_type=f"dex_local_engine.{error_type}"),
        reached_worker=reached_worker,
    )


class TaskRunner:
    """Dispatches attempts and collects their frames.

    Args:
        dispatchers: picks the dispatcher for a Flow's Workers.
        blobs: the engine's blob store (a Worker's blob paging failure is not a failure).
        stream_writer: stores ``stream_write`` frames, if Streams are served.
        persist: commits a run whose Step's last heartbeat value changed.

    Example::

        runner = TaskRunner(router, blobs, None, engine_commit)
        outcome = await runner.run(run, request, 60.0, None, None)
    """

    def __init__(
        self,
        dispatchers: DispatcherRouter,
        blobs: BlobStore,
        stream_writer: StreamWriter | None,
        persist: Callable[[FlowRun], None],
    ) -> None:
        self._dispatchers = dispatchers
        self._blobs = blobs
        self._stream_writer = stream_writer
        self._persist = persist

    async def run(
        self,
        run: FlowRun,
        request: TaskRequest,
        timeout: float,
        heartbeat_timeout: float | None,
        step: StepExecution | None,
        on_worker: Callable[[bool], None] | None = None,
    ) -> TaskOutcome | None:
        """Dispatch one attempt until its final frame; None when it must be dispatched again.

        ``on_worker`` learns ``True`` just before a Worker takes the task and ``False`` when the
        task went back to waiting without having run (a decline, a stream that ended before the
        task reached it).
        """
        listening = _listening_address(run)
        heartbeat = HeartbeatWindow(heartbeat_timeout)

        def note_on_worker(is_on_worker: bool) -> None:
            heartbeat.on_worker(is_on_worker)
            if on_worker is not None:
                on_worker(is_on_worker)

        task = DispatchTask(
            task_id=f"{_TASK_ID_PREFIX}-{next(_task_numbers)}",
            flow_id=run.flow_id,
            flow_type=run.flow_type,
            queue="",
            listening_address=listening,
            request=request,
            deadline=datetime.fromtimestamp(time.time() + timeout, UTC),
            on_worker=note_on_worker,
            work_started_at=None if step is None else step.work_started_at,
        )
        reached = False
        frames = self._dispatchers(listening).dispatch(task).__aiter__()
        try:
            async with asyncio.timeout(timeout), heartbeat.armed():
                while True:
                    try:
                        frame = await anext(frames)
                    except StopAsyncIteration:
                        if reached:
                            raise WorkerLost("the Worker ended the task without a result") from None
                        raise TaskNotStarted("the Worker ended the task before it ran") from None
                    reached = True
                    heartbeat.restart()
                    final = self._on_frame(run, step, request, frame)
                    if final is not None:
                        return final
        except TaskNotStarted:
            note_on_worker(False)
            await asyncio.sleep(_REDISPATCH_DELAY)
            return None
        except UnknownTaskName as unknown:
            return _failure(str(unknown), UNKNOWN_NAME_ERROR_TYPE, reached_worker=False)
        except WorkerLost as lost:
            detail = f"the Worker was lost during the attempt: {lost}"
            return _failure(detail, "WorkerLost", reached_worker=True)
        except TimeoutError:
            what = "heartbeat timeout" if heartbeat.expired else "timeout"
            return _failure(f"the attempt exceeded its {what}", "Timeout", reached_worker=reached)
        except Exception as error:
            # A dispatcher failure is an engine-side fault: fail this attempt, not the Flow.
            _log.exception("dispatch of %s for %s failed", task.task_id, run.flow_id)
            detail = f"the engine could not dispatch the attempt: {error!r}"
            return _failure(detail, "DispatchError", reached_worker=reached)
        finally:
            await frames.aclose()  # type: ignore[attr-defined]

    def _on_frame(
        self, run: FlowRun, step: StepExecution | None, request: TaskRequest, frame: TaskFrame
    ) -> TaskOutcome | None:
        if isinstance(frame, pb.WorkerErrorResponse):
            if self._blobs.is_paging_failure(frame):
                # The handler never ran; the Worker cached one page of blobs.
                raise TaskNotStarted("the Worker loaded a page of blobs; next page")
            return AttemptFailure(frame, reached_worker=True)
        if not isinstance(frame, _FRAME_TYPES[type(request)]):
            given, wanted = type(frame).DESCRIPTOR.name, type(request).DESCRIPTOR.name
            return _malformed(f"the Worker answered a {wanted} task with a {given} frame")
        if isinstance(frame, pb.InvokeWorkerRPCResponse):
            return frame
        kind = frame.WhichOneof("output")
        if kind == "result":
            return frame.result
        if kind is not None:
            # A heartbeat or Stream write is stored as it comes, so it is checked as it comes.
            output = getattr(frame, kind)
            problem = field_problem(output, BlobReferences.KNOWN, self._blobs.holds)
            if problem is not None:
                return _malformed(f"the Worker sent a malformed {kind} frame: {problem}")
        if kind == "heartbeat":
            if step is not None:
                step.reached_worker = True
                if frame.heartbeat.HasField("value"):
                    # Persisted at once: the next attempt gets it even after an engine restart.
                    self._blobs.intern(frame.heartbeat)
                    step.last_heartbeat = ensure_value(frame.heartbeat.value)
                    self._persist(run)
        elif kind == "stream_write" and self._stream_writer is not None and step is not None:
            self._stream_writer(run, step.step_execution_id, frame.stream_write)
        return None


def _malformed(detail: str) -> AttemptFailure:
    """A Worker output the engine refuses: it fails the Step method at once."""
    error = pb.WorkerErrorResponse(detail=detail, error_type=MALFORMED_RESULT_ERROR_TYPE)
    return AttemptFailure(error, reached_worker=True)


def _listening_address(run: FlowRun) -> str | None:
    target = run.config.worker_target
    if target.is_pull_mode or not target.address:
        return None
    return target.address

"""How the engine hands a Step method or RPC to a Worker, whatever the Worker's mode.

The scheduler builds a :class:`DispatchTask` and iterates :meth:`Dispatcher.dispatch`. Pull Workers
(``WorkerTaskService.PollWorkerTask`` streams) and listening Workers (the engine calls
``WorkerService`` at the Flow's worker address) implement the same protocol, so Step semantics
live once, in the scheduler.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeAlias

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.exceptions import DexLocalEngineError

TaskRequest: TypeAlias = (
    pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | pb.InvokeWorkerRPCRequest
)
"""What a Worker is asked to run: a Step's wait_for, a Step's execute, or an RPC."""

TaskFrame: TypeAlias = (
    pb.InvokeWaitForMethodOutput
    | pb.InvokeExecuteMethodOutput
    | pb.InvokeWorkerRPCResponse
    | pb.WorkerErrorResponse
)
"""One frame a Worker sends back.

Step methods stream ``Invoke*MethodOutput`` frames: any number of ``heartbeat`` and
``stream_write`` frames, then one with ``result``. An RPC answers one ``InvokeWorkerRPCResponse``.
A ``WorkerErrorResponse`` is the handler's failure (the attempt failed on the Worker); it is final.
"""


@dataclass(frozen=True)
class DispatchTask:
    """One attempt of one Step method or RPC, addressed to the Workers of a Flow type."""

    task_id: str
    """Unique per dispatch; a redispatch of the same attempt gets a new task ID."""
    flow_id: str
    flow_type: str
    queue: str
    """Pull queue name from the Flow's worker target ("" for the default queue)."""
    listening_address: str | None
    """host:port of a listening Worker, or None to dispatch to pull Workers."""
    request: TaskRequest
    deadline: datetime
    """Absolute time (UTC) when the attempt times out; the Worker is told so."""
    on_worker: Callable[[bool], None] | None = None
    """Told ``True`` right before the task is written to a Worker (a pull stream's writer calls it
    with nothing in between; a task still queued for a stream is not on a Worker yet) and
    ``False`` when it goes back to waiting for one without having run (a rejection, a retiring
    stream), so a heartbeat timeout counts only time spent on a Worker and the attempt's in-flight
    marker exists only while a Worker may run it. A dispatch that ends with
    :class:`TaskNotStarted` leaves the ``False`` to its caller."""
    work_started_at: float | None = None
    """For a Step's method: when the work the Step continues started (wall seconds, see
    :mod:`dex_local_engine.step_dispatch_order`); Steps waiting for a free Worker slot are offered
    one oldest work first. None: in arrival order (an RPC)."""


def note_on_worker(task: DispatchTask, on_worker: bool) -> None:
    """Tell ``task.on_worker`` (if any) whether the task is now on a Worker."""
    if task.on_worker is not None:
        task.on_worker(on_worker)


class TaskNotStarted(DexLocalEngineError):
    """The task never reached a Worker that could have run it.

    Raised when a Worker rejects the task (NO_CAPACITY, unknown Step or RPC), when the Worker
    cannot be reached, when a stream breaks before the task was written to it, or when the Worker
    half-closes cleanly before the first frame (a retiring stream). The task never ran, so the
    scheduler dispatches the same attempt again (same attempt number, no retry used).
    """


class UnknownTaskName(DexLocalEngineError):
    """Every connected Worker of the task's Flow type declined it as unknown (an RPC name).

    The task never ran. A synchronous RPC fails at once with NOT_FOUND rather than waiting out its
    timeout for a Worker that knows the name.
    """


class WorkerLost(DexLocalEngineError):
    """The Worker disconnected after it received the task, so the attempt may have taken effect.

    The scheduler fails the attempt (attempt progress NOT_COMPLETED) and applies the retry policy.
    """


class Dispatcher(Protocol):
    """Runs tasks on Workers.

    ``dispatch`` waits until a Worker can take the task (indefinitely; the scheduler enforces the
    deadline by cancelling the iteration), then yields the Worker's frames in order and ends after
    the final one. Cancelling the iteration (``aclose()`` or cancelling the consuming asyncio task)
    tells the Worker to cancel the task; a late result is dropped.

    Raises:
        TaskNotStarted: the task never reached a running handler; dispatch it again.
        WorkerLost: the Worker went away mid-task.
    """

    def dispatch(self, task: DispatchTask) -> AsyncIterator[TaskFrame]: ...

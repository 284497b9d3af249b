"""The pull Worker streams the engine knows, and which waiting task goes to which idle stream.

A pull Worker opens one ``PollWorkerTask`` stream per queue it polls (its sticky queue, named by its
app Worker ID, and one per Flow type) and keeps opening and retiring them. Each stream carries at
most one task at a time. :class:`PullWorkerRegistry` holds the open streams, queues the tasks
waiting for a stream (first come, first served), and routes the frames a Worker sends back to the
task they belong to. It is single-threaded: every method runs on the event loop of the gRPC server.

The SDK keeps ``idle_streams_per_queue`` (usually one) idle *registered* streams per queue: when a
task starts on a stream it opens a new one, and a stream that finishes a task while another
registered stream of the queue is idle retires (half-closes). Registering every new stream at once
therefore makes the Worker open and retire a stream for every Step, and tasks offered to a stream
it is retiring come back (declined, or dropped and detected by a probe). So the engine answers
``registered`` lazily: a new stream of a Worker's queue that already has an idle registered stream
is held unregistered (the SDK counts it as idle and opens no more) until a task needs it. A
Worker running one Step at a time then keeps reusing one stream.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.dispatch import DispatchTask, TaskFrame

_LOGGER = logging.getLogger(__name__)

_UNKNOWN_NAME_REASONS = frozenset(
    {
        pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_STEP,
        pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_RPC,
    }
)


@dataclass(frozen=True)
class PullStreamInfo:
    """A snapshot of one registered pull Worker stream (for diagnostics and tests)."""

    stream_id: int
    queue: str
    app_worker_id: str
    flow_types: frozenset[str]
    sdk_name: str
    sdk_version: str
    task_id: str | None
    """The task the stream carries, or None while it is idle."""
    is_draining: bool
    """True after the engine asked the Worker to reconnect; the stream takes no new task."""
    is_registered: bool = True
    """False while the engine holds back ``registered`` (a spare stream, see the module doc)."""


@dataclass(frozen=True)
class PullDispatchStats:
    """Counters since the dispatcher started (for diagnostics, tests and benchmarks)."""

    streams_registered: int = 0
    tasks_offered: int = 0
    """Offers of a task to a stream (a task rejected and offered again counts twice)."""
    rejected_no_capacity: int = 0
    rejected_unknown_name: int = 0
    frames_dropped: int = 0
    """Frames of tasks nobody listens to any more, e.g. a late result after cancellation."""


@dataclass(frozen=True)
class FrameEvent:
    """A frame of the task's output; ``is_final`` marks the result or the Worker's error."""

    frame: TaskFrame
    is_final: bool


@dataclass(frozen=True)
class RejectEvent:
    """The Worker declined the task without running it."""

    reason: pb.PollWorkerTaskRejectReason


@dataclass(frozen=True)
class StreamGoneEvent:
    """The stream carrying the task ended before the task's final frame."""

    detail: str
    is_half_close: bool
    """True when the Worker's side of the stream ended cleanly (EOF); False when it broke."""


@dataclass(frozen=True)
class WriteRefusedEvent:
    """The task was not written: what had to happen just before writing it failed."""

    error: Exception


AssignmentEvent = FrameEvent | RejectEvent | StreamGoneEvent | WriteRefusedEvent


@dataclass(eq=False)
class Assignment:
    """One offer of a task to one stream, from the offer until the final frame or the stream's end."""

    task: DispatchTask
    stream: WorkerStream
    events: asyncio.Queue[AssignmentEvent] = field(default_factory=asyncio.Queue)
    has_output: bool = False
    """True once any frame of the task reached the engine (the handler ran)."""
    is_finished: bool = False
    """True once the stream is free of this task (final frame, reject or stream end)."""
    is_abandoned: bool = False
    """True once the dispatcher stopped listening; later frames are dropped."""


@dataclass(frozen=True)
class Outgoing:
    """A frame for the stream's writer; ``written`` (if any) learns whether the write succeeded.

    ``before_write`` (if any) runs right before the frame is written, with nothing in between;
    when it returns False the frame is not written (``written`` learns False).
    """

    response: pb.PollWorkerTaskResponse
    written: asyncio.Future[bool] | None = None
    before_write: Callable[[], bool] | None = None


@dataclass(eq=False)
class WorkerStream:
    """One registered ``PollWorkerTask`` stream."""

    stream_id: int
    registration: pb.PollWorkerTaskRegister
    outbox: asyncio.Queue[Outgoing] = field(default_factory=asyncio.Queue)
    assignment: Assignment | None = None
    is_draining: bool = False
    is_closed: bool = False
    is_registered: bool = False
    """The engine answered ``registered``; until then the stream is a held spare."""
    finished_tasks: int = 0
    """Tasks the stream carried to their end (a change means its Worker had capacity again)."""
    idle_since: float = field(default_factory=time.monotonic)

    @property
    def app_worker_id(self) -> str:
        return self.registration.app_worker_id

    @property
    def is_sticky(self) -> bool:
        """True for the stream of the Worker's own (sticky) queue, named by its app Worker ID."""
        return self.registration.queue == self.registration.app_worker_id

    @property
    def is_idle(self) -> bool:
        return self.assignment is None and not self.is_draining and not self.is_closed

    def register(self) -> None:
        """Answer the Worker's ``register`` (before any other frame on the stream)."""
        if not self.is_registered:
            self.is_registered = True
            self.send(
                pb.PollWorkerTaskResponse(
                    registered=pb.PollWorkerTaskRegistered(supports_unknown_name_rejection=True)
                )
            )

    def send(
        self,
        response: pb.PollWorkerTaskResponse,
        written: asyncio.Future[bool] | None = None,
        before_write: Callable[[], bool] | None = None,
    ) -> None:
        """Queue a frame for the stream's writer; frames leave in the order they were sent.

        ``written`` learns ``False`` at once when the stream is already closed; ``before_write``
        runs only if the frame is about to be written (see :class:`Outgoing`).
        """
        if self.is_closed:
            _resolve(written, False)
        else:
            self.outbox.put_nowait(Outgoing(response, written, before_write))

    def fail_unwritten(self) -> None:
        """After the writer stopped: frames still queued were never written; tell their senders."""
        while not self.outbox.empty():
            _resolve(self.outbox.get_nowait().written, False)

    @property
    def carries_unstarted_task(self) -> bool:
        """True while the stream carries a task that sent no output yet."""
        return self.assignment is not None and not self.assignment.has_output

    def serves(self, task: DispatchTask) -> bool:
        """Whether this stream may carry ``task``, by the task's queue and Flow type."""
        if task.flow_type not in self.registration.flow_types:
            return False
        if task.queue:
            return task.queue in (self.registration.queue, self.registration.app_worker_id)
        return self.registration.queue == task.flow_type or self.is_sticky

    def info(self) -> PullStreamInfo:
        registration = self.registration
        return PullStreamInfo(
            stream_id=self.stream_id,
            queue=registration.queue,
            app_worker_id=registration.app_worker_id,
            flow_types=frozenset(registration.flow_types),
            sdk_name=registration.sdk_name,
            sdk_version=registration.sdk_version,
            task_id=None if self.assignment is None else self.assignment.task.task_id,
            is_draining=self.is_draining,
            is_registered=self.is_registered,
        )


_FIRST_NO_CAPACITY_RETRY_SECONDS = 0.002


@dataclass(frozen=True)
class _NoCapacity:
    """A Worker's last decline of one task for lack of capacity."""

    finished_tasks: dict[int, int]
    """Stream ID -> its finished-task count at the decline, for each of the Worker's streams."""
    retry_at: float
    delay: float


@dataclass
class Exclusions:
    """The Workers that declined one task, so the task is offered elsewhere first.

    A Worker declining for lack of capacity is skipped on all its streams until one of them
    finishes a task (that stream, whose capacity freed, takes the task) or a retry delay passed:
    2 ms, doubling with each further decline by that Worker, at most ``retry_seconds``. A Worker
    without capacity declines on every idle stream, so skipping only the declining stream would
    offer each waiting task to every idle stream of a busy Worker after every retry delay: with
    many tasks waiting at the Workers' bound the engine spent most of its CPU on declined offers
    (issue 33's load benchmark). A decline that was the stream's own state (it is retiring, or the
    task arrived between its final frame and the end of its bookkeeping) costs the first retry
    delay. A Worker that does not know the Step or RPC stays skipped.
    """

    retry_seconds: float
    unknown_name: set[str] = field(default_factory=set)
    no_capacity: dict[str, _NoCapacity] = field(default_factory=dict)
    """App Worker ID -> its last decline for lack of capacity."""

    def record(
        self, stream: WorkerStream, reason: int, worker_streams: Iterable[WorkerStream] = ()
    ) -> None:
        """Note ``stream``'s decline; ``worker_streams`` are its Worker's streams now."""
        worker = stream.app_worker_id
        if reason in _UNKNOWN_NAME_REASONS:
            self.unknown_name.add(worker)
            return
        previous = self.no_capacity.get(worker)
        delay = (
            min(_FIRST_NO_CAPACITY_RETRY_SECONDS, self.retry_seconds)
            if previous is None
            else min(previous.delay * 2, self.retry_seconds)
        )
        finished = {peer.stream_id: peer.finished_tasks for peer in worker_streams}
        finished[stream.stream_id] = stream.finished_tasks
        self.no_capacity[worker] = _NoCapacity(finished, time.monotonic() + delay, delay)

    def excludes(self, stream: WorkerStream, now: float) -> bool:
        if stream.app_worker_id in self.unknown_name:
            return True
        declined = self.no_capacity.get(stream.app_worker_id)
        if declined is None or now >= declined.retry_at:
            return False
        # A stream opened after the decline counts from 0: a task it finished freed capacity.
        return stream.finished_tasks == declined.finished_tasks.get(stream.stream_id, 0)

    def next_retry_at(self, now: float) -> float | None:
        retry_at: float | None = None
        for declined in self.no_capacity.values():
            if declined.retry_at > now and (retry_at is None or declined.retry_at < retry_at):
                retry_at = declined.retry_at
        return retry_at


@dataclass(eq=False)
class _Waiter:
    task: DispatchTask
    exclusions: Exclusions
    future: asyncio.Future[Assignment]


class PullWorkerRegistry:
    """Open pull streams, tasks waiting for one, and the routing of Worker frames to tasks."""

    def __init__(self) -> None:
        self._stream_ids = itertools.count(1)
        self._streams: dict[int, WorkerStream] = {}
        self._waiters: list[_Waiter] = []
        self._retry_timer: asyncio.TimerHandle | None = None
        self._changed = asyncio.Event()
        self._stats = PullDispatchStats()

    @property
    def stats(self) -> PullDispatchStats:
        return self._stats

    def _count(self, **increments: int) -> None:
        self._stats = replace(
            self._stats,
            **{name: getattr(self._stats, name) + value for name, value in increments.items()},
        )

    # Streams -------------------------------------------------------------------------------

    def add_stream(self, registration: pb.PollWorkerTaskRegister) -> WorkerStream:
        """Add a stream; it is registered now, or held as a spare until a task needs it.

        Its first outgoing frame is ``registered`` (or ``reconnect``), then it takes tasks.
        """
        stream = WorkerStream(next(self._stream_ids), registration)
        if not self._has_idle_registered_peer(stream):
            stream.register()
        self._streams[stream.stream_id] = stream
        self._count(streams_registered=1)
        _LOGGER.debug(
            "pull stream %d registered: queue=%s worker=%s",
            stream.stream_id,
            registration.queue,
            registration.app_worker_id,
        )
        self._notify_changed()
        return stream

    def _has_idle_registered_peer(self, stream: WorkerStream) -> bool:
        """Whether another idle registered stream serves the stream's queue."""
        return any(
            other is not stream
            and other.is_idle
            and other.is_registered
            and other.app_worker_id == stream.app_worker_id
            and other.registration.queue == stream.registration.queue
            for other in self._streams.values()
        )

    def remove_stream(self, stream: WorkerStream, detail: str, *, is_half_close: bool) -> None:
        """Forget a stream that ended; a task it carried learns that its stream is gone."""
        stream.is_closed = True
        self._streams.pop(stream.stream_id, None)
        assignment = stream.assignment
        if assignment is not None:
            self._free(assignment, frees_capacity=True)
            if not assignment.is_abandoned:
                assignment.events.put_nowait(StreamGoneEvent(detail, is_half_close))
        self._notify_changed()

    def streams(self) -> tuple[PullStreamInfo, ...]:
        """Snapshot of the registered streams, oldest first."""
        return tuple(stream.info() for stream in self._streams.values())

    async def wait_changed(self) -> None:
        """Wait until a stream registers, ends or changes between idle and busy."""
        self._changed.clear()
        await self._changed.wait()

    def reconnect(self, app_worker_id: str | None, reason: str) -> int:
        """Ask Workers to reopen their streams; a busy stream finishes its task first.

        Returns the number of streams asked.
        """
        asked = 0
        for stream in tuple(self._streams.values()):
            if app_worker_id is not None and stream.app_worker_id != app_worker_id:
                continue
            stream.is_draining = True
            stream.send(
                pb.PollWorkerTaskResponse(reconnect=pb.PollWorkerTaskReconnect(reason=reason))
            )
            asked += 1
        self._notify_changed()
        return asked

    # Frames from Workers -------------------------------------------------------------------

    def on_task_frame(self, stream: WorkerStream, frame: pb.PollWorkerTaskFrame) -> None:
        """Route an output frame to its task; drop frames of a task the stream no longer carries."""
        assignment = stream.assignment
        kind = frame.WhichOneof("output")
        if assignment is None or frame.task_id != assignment.task.task_id or kind is None:
            _LOGGER.debug("dropping frame of task %r on stream %d", frame.task_id, stream.stream_id)
            self._count(frames_dropped=1)
            return
        output: TaskFrame = getattr(frame, kind)
        is_final = kind in ("rpc", "worker_error") or output.WhichOneof("output") == "result"
        if is_final:
            self._free(assignment, frees_capacity=True)
        if assignment.is_abandoned:
            self._count(frames_dropped=1)
            return
        assignment.has_output = True
        assignment.events.put_nowait(FrameEvent(output, is_final))

    def on_reject(self, stream: WorkerStream, reject: pb.PollWorkerTaskReject) -> None:
        """The Worker declined the task it was offered; the stream is idle again."""
        assignment = stream.assignment
        if assignment is None or reject.task_id != assignment.task.task_id:
            return
        self._free(assignment, frees_capacity=False)
        if reject.reason in _UNKNOWN_NAME_REASONS:
            self._count(rejected_unknown_name=1)
        else:
            self._count(rejected_no_capacity=1)
        if not assignment.is_abandoned:
            assignment.events.put_nowait(RejectEvent(reject.reason))

    # Tasks ---------------------------------------------------------------------------------

    async def acquire(self, task: DispatchTask, exclusions: Exclusions) -> Assignment:
        """Wait for an idle stream that serves ``task`` and bind the task to it.

        Waits without limit; cancel the caller to stop waiting.
        """
        waiter = _Waiter(task, exclusions, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        self._match()
        try:
            return await waiter.future
        except asyncio.CancelledError:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.future.done() and not waiter.future.cancelled():
                # Bound to a stream just as the caller was cancelled: give the stream back.
                self.release_unsent(waiter.future.result())
            raise

    def worker_streams(self, app_worker_id: str) -> tuple[WorkerStream, ...]:
        """The open streams of one Worker."""
        return tuple(s for s in self._streams.values() if s.app_worker_id == app_worker_id)

    def all_workers_lack_name(self, task: DispatchTask, exclusions: Exclusions) -> bool:
        """Whether every connected Worker that serves ``task`` said it does not know its name."""
        return all(
            stream.app_worker_id in exclusions.unknown_name
            for stream in self._streams.values()
            if stream.serves(task)
        )

    def abandon(self, assignment: Assignment) -> None:
        """The dispatcher stops listening: ask the Worker to cancel an unfinished task.

        The stream stays busy until the Worker's final frame, which is then dropped.
        """
        if assignment.is_abandoned:
            return
        assignment.is_abandoned = True
        if not assignment.is_finished:
            assignment.stream.send(
                pb.PollWorkerTaskResponse(
                    cancel_task=pb.PollWorkerTaskCancelTask(task_id=assignment.task.task_id)
                )
            )

    def release_unsent(self, assignment: Assignment) -> None:
        """Free the stream of a task that was bound to it but never written to it."""
        assignment.is_abandoned = True
        assignment.is_finished = True
        if assignment.stream.assignment is assignment:
            assignment.stream.assignment = None
        self._match()

    def _free(self, assignment: Assignment, *, frees_capacity: bool) -> None:
        assignment.is_finished = True
        stream = assignment.stream
        if stream.assignment is assignment:
            stream.assignment = None
            stream.idle_since = time.monotonic()
        if frees_capacity:
            stream.finished_tasks += 1
        self._notify_changed()

    def _notify_changed(self) -> None:
        self._changed.set()
        self._match()

    def _match(self) -> None:
        """Offer idle streams to waiting tasks, oldest task first."""
        now = time.monotonic()
        next_retry: float | None = None
        busy = _busy_counts(self._streams.values()) if self._waiters else {}
        for waiter in tuple(self._waiters):
            if waiter.future.done():
                self._waiters.remove(waiter)
                continue
            stream = self._pick(waiter, busy, now)
            if stream is None:
                retry_at = waiter.exclusions.next_retry_at(now)
                if retry_at is not None:
                    next_retry = retry_at if next_retry is None else min(next_retry, retry_at)
                continue
            stream.register()
            assignment = Assignment(waiter.task, stream)
            stream.assignment = assignment
            self._count(tasks_offered=1)
            self._waiters.remove(waiter)
            waiter.future.set_result(assignment)
            # The Worker is busier now.
            busy[stream.app_worker_id] = busy.get(stream.app_worker_id, 0) + 1
        self._schedule_retry(next_retry, now)

    def _pick(self, waiter: _Waiter, busy: dict[str, int], now: float) -> WorkerStream | None:
        """The best idle stream for ``waiter``: the Flow type's own queue over sticky queues, then
        the least busy Worker, then registered streams over held spares (registering one makes
        the Worker open another), then the longest idle (the Worker may be retiring one that just
        finished). One pass, no sort: this runs for every dispatched task.
        """
        best: WorkerStream | None = None
        best_rank: tuple[bool, int, bool, float, int] | None = None
        for stream in self._streams.values():
            if not stream.is_idle or not stream.serves(waiter.task):
                continue
            if waiter.exclusions.excludes(stream, now):
                continue
            rank = (
                stream.is_sticky,
                busy.get(stream.app_worker_id, 0),
                not stream.is_registered,
                stream.idle_since,
                stream.stream_id,
            )
            if best_rank is None or rank < best_rank:
                best, best_rank = stream, rank
        return best

    def _schedule_retry(self, retry_at: float | None, now: float) -> None:
        if self._retry_timer is not None:
            self._retry_timer.cancel()
            self._retry_timer = None
        if retry_at is not None:
            self._retry_timer = asyncio.get_running_loop().call_later(
                max(0.0, retry_at - now), self._match
            )


def _busy_counts(streams: Iterable[WorkerStream]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for stream in streams:
        if stream.assignment is not None:
            counts[stream.app_worker_id] = counts.get(stream.app_worker_id, 0) + 1
    return counts


def _resolve(written: asyncio.Future[bool] | None, value: bool) -> None:
    if written is not None and not written.done():
        written.set_result(value)

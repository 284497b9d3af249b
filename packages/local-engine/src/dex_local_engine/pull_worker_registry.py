"""The pull Worker streams the engine knows, and which waiting task goes to which idle stream.

A pull Worker opens one ``PollWorkerTask`` stream per queue it polls (its sticky queue, named by its
app Worker ID, and one per Flow type) and keeps opening and retiring them. Each stream carries at
most one task at a time. :class:`PullWorkerRegistry` holds the open streams, queues the tasks
waiting for a stream (RPCs first come, first served; Steps by the age of their work, see
:mod:`dex_local_engine.step_dispatch_order`), and routes the frames a Worker sends back to the
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
from dataclasses import dataclass, field, fields

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.dispatch import DispatchTask, TaskFrame
from dex_local_engine.pull_worker_capacity import WorkerCapacity
from dex_local_engine.step_dispatch_order import OrderedWaiters, StepDispatchOrder

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
    is_probe: bool = False
    """Offered beyond its Worker's learned bound for its kind (see :mod:`pull_worker_capacity`)."""


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
    idle_since: float = field(default_factory=time.monotonic)
    # The registration's fields as plain attributes: read for every stream of every match.
    app_worker_id: str = field(init=False)
    queue: str = field(init=False)
    flow_types: frozenset[str] = field(init=False)
    is_sticky: bool = field(init=False)
    """True for the stream of the Worker's own (sticky) queue, named by its app Worker ID."""

    def __post_init__(self) -> None:
        self.app_worker_id = self.registration.app_worker_id
        self.queue = self.registration.queue
        self.flow_types = frozenset(self.registration.flow_types)
        self.is_sticky = self.queue == self.app_worker_id

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
        if task.flow_type not in self.flow_types:
            return False
        if task.queue:
            return task.queue in (self.queue, self.app_worker_id)
        return self.queue == task.flow_type or self.is_sticky

    def info(self) -> PullStreamInfo:
        registration = self.registration
        return PullStreamInfo(
            stream_id=self.stream_id,
            queue=self.queue,
            app_worker_id=self.app_worker_id,
            flow_types=self.flow_types,
            sdk_name=registration.sdk_name,
            sdk_version=registration.sdk_version,
            task_id=None if self.assignment is None else self.assignment.task.task_id,
            is_draining=self.is_draining,
            is_registered=self.is_registered,
        )


@dataclass
class Exclusions:
    """The Workers that declined one task because they do not know its Step or RPC name.

    They stay skipped for that task. A decline for lack of capacity is not noted here: the
    Worker's learned bounds keep every task of that kind away from it while it is at its bound
    (:mod:`dex_local_engine.pull_worker_capacity`).
    """

    unknown_name: set[str] = field(default_factory=set)
    """App Worker IDs."""

    def record(self, stream: WorkerStream, reason: int) -> None:
        """Note ``stream``'s decline of the task (only an unknown name counts here)."""
        if reason in _UNKNOWN_NAME_REASONS:
            self.unknown_name.add(stream.app_worker_id)

    def excludes(self, stream: WorkerStream) -> bool:
        return bool(self.unknown_name) and stream.app_worker_id in self.unknown_name


@dataclass(eq=False)
class _Worker:
    """One connected Worker: its open streams and what the engine knows of its capacity."""

    capacity: WorkerCapacity
    streams: dict[int, WorkerStream] = field(default_factory=dict)

    def idle_streams(self) -> list[WorkerStream]:
        return [stream for stream in self.streams.values() if stream.is_idle]


@dataclass(eq=False)
class _Waiter:
    task: DispatchTask
    exclusions: Exclusions
    future: asyncio.Future[Assignment]
    is_step: bool


_STAT_NAMES = tuple(stat.name for stat in fields(PullDispatchStats))


class PullWorkerRegistry:
    """Open pull streams, tasks waiting for one, and the routing of Worker frames to tasks.

    Args:
        no_capacity_retry_seconds: the longest wait between probes of a Worker at a bound
            learned from its declines (see :mod:`dex_local_engine.pull_worker_capacity`).
        clock: monotonic seconds, for the probes' delays (tests pass their own).
        step_order: the order in which waiting Steps are offered a stream (by the age of their
            work, see :mod:`dex_local_engine.step_dispatch_order`).
        wall_clock: wall seconds, the clock of a task's ``work_started_at`` (tests pass their own).
    """

    def __init__(
        self,
        no_capacity_retry_seconds: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        step_order: StepDispatchOrder | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._retry_seconds = no_capacity_retry_seconds
        self._clock = clock
        self._step_order = step_order or StepDispatchOrder()
        self._wall_clock = wall_clock
        self._stream_ids = itertools.count(1)
        self._streams: dict[int, WorkerStream] = {}
        self._workers: dict[str, _Worker] = {}
        # RPCs waiting for a stream, insertion-ordered (oldest first) with O(1) removal, and
        # Steps, ordered by the age of their work: many tasks wait at the Workers' bound.
        self._rpc_waiters: dict[_Waiter, None] = {}
        self._step_waiters: OrderedWaiters[_Waiter] = OrderedWaiters()
        self._retry_timer: asyncio.TimerHandle | None = None
        self._retry_at: float | None = None
        self._changed = asyncio.Event()
        self._counts = dict.fromkeys(_STAT_NAMES, 0)

    @property
    def stats(self) -> PullDispatchStats:
        return PullDispatchStats(**self._counts)

    def _count(self, name: str) -> None:
        self._counts[name] += 1

    def worker_capacity(self, app_worker_id: str) -> WorkerCapacity | None:
        """What the engine knows of a connected Worker's capacity (for diagnostics and tests)."""
        worker = self._workers.get(app_worker_id)
        return None if worker is None else worker.capacity

    # Streams -------------------------------------------------------------------------------

    def add_stream(self, registration: pb.PollWorkerTaskRegister) -> WorkerStream:
        """Add a stream; it is registered now, or held as a spare until a task needs it.

        Its first outgoing frame is ``registered`` (or ``reconnect``), then it takes tasks.
        """
        stream = WorkerStream(next(self._stream_ids), registration)
        worker = self._workers.get(stream.app_worker_id)
        if worker is None:
            worker = self._workers[stream.app_worker_id] = _Worker(
                WorkerCapacity(self._retry_seconds)
            )
        if not _has_idle_registered_peer(worker, stream):
            stream.register()
        self._streams[stream.stream_id] = stream
        worker.streams[stream.stream_id] = stream
        self._count("streams_registered")
        _LOGGER.debug(
            "pull stream %d registered: queue=%s worker=%s",
            stream.stream_id,
            registration.queue,
            registration.app_worker_id,
        )
        self._notify_changed()
        return stream

    def remove_stream(self, stream: WorkerStream, detail: str, *, is_half_close: bool) -> None:
        """Forget a stream that ended; a task it carried learns that its stream is gone."""
        stream.is_closed = True
        if self._streams.pop(stream.stream_id, None) is None:
            return
        assignment = stream.assignment
        if assignment is not None:
            self._free(assignment)
            if not assignment.is_abandoned:
                assignment.events.put_nowait(StreamGoneEvent(detail, is_half_close))
        worker = self._workers[stream.app_worker_id]
        del worker.streams[stream.stream_id]
        if not worker.streams:
            # The Worker is gone (or reconnects as new streams): what was learned is stale.
            del self._workers[stream.app_worker_id]
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
            self._count("frames_dropped")
            return
        if assignment.is_probe:
            assignment.is_probe = False
            capacity = self.worker_capacity(stream.app_worker_id)
            if capacity is not None:
                capacity.took_probe(self._clock(), is_step=_is_step(assignment.task))
        output: TaskFrame = getattr(frame, kind)
        is_final = kind in ("rpc", "worker_error") or output.WhichOneof("output") == "result"
        if is_final:
            self._free(assignment)
        if assignment.is_abandoned:
            self._count("frames_dropped")
            return
        assignment.has_output = True
        assignment.events.put_nowait(FrameEvent(output, is_final))

    def on_reject(self, stream: WorkerStream, reject: pb.PollWorkerTaskReject) -> None:
        """The Worker declined the task it was offered; the stream is idle again."""
        assignment = stream.assignment
        if assignment is None or reject.task_id != assignment.task.task_id:
            return
        is_unknown_name = reject.reason in _UNKNOWN_NAME_REASONS
        self._count("rejected_unknown_name" if is_unknown_name else "rejected_no_capacity")
        self._free(assignment, declined_for_capacity=not is_unknown_name)
        if not assignment.is_abandoned:
            assignment.events.put_nowait(RejectEvent(reject.reason))

    # Tasks ---------------------------------------------------------------------------------

    def waiting_since(self) -> float:
        """Now on the clock :meth:`acquire`'s ``waiting_since`` is read on (wall seconds)."""
        return self._wall_clock()

    async def acquire(
        self, task: DispatchTask, exclusions: Exclusions, waiting_since: float | None = None
    ) -> Assignment:
        """Wait for an idle stream that serves ``task`` and bind the task to it.

        ``waiting_since``: when the task first waited (:meth:`waiting_since`; now if None), so a
        task declined and waiting again keeps its place among the Steps. Waits without limit;
        cancel the caller to stop waiting.
        """
        future = asyncio.get_running_loop().create_future()
        waiter = _Waiter(task, exclusions, future, _is_step(task))
        if waiter.is_step:
            since = self._wall_clock() if waiting_since is None else waiting_since
            order = self._step_order.key(work_started_at=task.work_started_at, waiting_since=since)
            self._step_waiters.add(waiter, order)
        else:
            self._rpc_waiters[waiter] = None
        # Every waiter already had its chance at the streams idle now.
        self._match(only=waiter)
        try:
            return await waiter.future
        except asyncio.CancelledError:
            if self._is_waiting(waiter):
                self._forget_waiter(waiter)
            elif waiter.future.done() and not waiter.future.cancelled():
                # Bound to a stream just as the caller was cancelled: give the stream back.
                self.release_unsent(waiter.future.result())
            raise

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
        stream = assignment.stream
        if stream.assignment is assignment:
            stream.assignment = None
            self._release(stream)
        self._match()

    def _free(self, assignment: Assignment, *, declined_for_capacity: bool = False) -> None:
        """The stream is done with ``assignment``. A decline for lack of capacity is noted in the
        Worker's bound before the next match, which must not offer it the same kind again."""
        assignment.is_finished = True
        stream = assignment.stream
        if stream.assignment is assignment:
            stream.assignment = None
            stream.idle_since = self._clock()
            capacity = self._release(stream)
            if declined_for_capacity and capacity is not None:
                capacity.declined(stream.idle_since, is_step=_is_step(assignment.task))
        self._notify_changed()

    def _release(self, stream: WorkerStream) -> WorkerCapacity | None:
        capacity = self.worker_capacity(stream.app_worker_id)
        if capacity is not None:
            capacity.released()
        return capacity

    def _notify_changed(self) -> None:
        self._changed.set()
        self._match()

    def _is_waiting(self, waiter: _Waiter) -> bool:
        return waiter in (self._step_waiters if waiter.is_step else self._rpc_waiters)

    def _forget_waiter(self, waiter: _Waiter) -> None:
        if waiter.is_step:
            self._step_waiters.discard(waiter)
        else:
            self._rpc_waiters.pop(waiter, None)

    def _match(self, only: _Waiter | None = None) -> None:
        """Offer idle streams to waiting tasks, RPCs then Steps (a client waits on an RPC), RPCs
        oldest first, Steps in their dispatch order; ``only``: just that new task (every other
        one had its chance at the streams idle now already).

        Cheap when tasks queue at the Workers' bound, as it runs on every task's end: only the
        streams of Workers below their bound for the kind are looked at, and the waiting tasks
        only while a stream is left that they could take.
        """
        now = self._clock()
        retry_at: float | None = None
        for is_step in (False, True):
            if only is None:
                waiters: Iterable[_Waiter] = (
                    iter(self._step_waiters) if is_step else tuple(self._rpc_waiters)
                )
            else:
                waiters = (only,) if only.is_step is is_step else ()
            if waiters and not self._offer(waiters, is_step, now):
                retry_at = _earliest(retry_at, self._next_probe_at(now))
        self._schedule_retry(retry_at, now, replace_timer=only is None)

    def _offer(self, waiters: Iterable[_Waiter], is_step: bool, now: float) -> bool:
        """Bind ``waiters`` (all Steps, or all RPCs) to idle streams that may take them, in the
        given order. Returns False when one is left waiting."""
        candidates = [
            stream
            for worker in self._workers.values()
            if worker.capacity.takes(now, is_step=is_step)
            for stream in worker.idle_streams()
        ]
        all_bound = True
        for waiter in waiters:
            if waiter.future.done():
                self._forget_waiter(waiter)
                continue
            if not candidates:
                return False
            # None when no candidate serves its queue or all are excluded for it: others may.
            stream = self._pick(waiter, candidates)
            if stream is None:
                all_bound = False
                continue
            self._bind(waiter, stream, now)
            candidates.remove(stream)
            if not self._workers[stream.app_worker_id].capacity.takes(now, is_step=is_step):
                candidates = [s for s in candidates if s.app_worker_id != stream.app_worker_id]
        return all_bound

    def _bind(self, waiter: _Waiter, stream: WorkerStream, now: float) -> None:
        stream.register()
        assignment = Assignment(waiter.task, stream)
        stream.assignment = assignment
        capacity = self._workers[stream.app_worker_id].capacity
        assignment.is_probe = capacity.offered(now, is_step=waiter.is_step)
        self._count("tasks_offered")
        self._forget_waiter(waiter)
        waiter.future.set_result(assignment)

    def _next_probe_at(self, now: float) -> float | None:
        """The soonest moment a Worker at a bound may be offered a probe."""
        soonest: float | None = None
        for worker in self._workers.values():
            soonest = _earliest(soonest, worker.capacity.next_probe_at(now))
        return soonest

    def _pick(self, waiter: _Waiter, candidates: list[WorkerStream]) -> WorkerStream | None:
        """The best idle stream for ``waiter``: the Flow type's own queue over sticky queues, then
        the least busy Worker, then registered streams over held spares (registering one makes
        the Worker open another), then the longest idle (the Worker may be retiring one that just
        finished). One pass, no sort: this runs for every dispatched task.
        """
        best: WorkerStream | None = None
        best_rank: tuple[bool, int, bool, float, int] | None = None
        workers = self._workers
        for stream in candidates:
            if not stream.serves(waiter.task):
                continue
            if waiter.exclusions.excludes(stream):
                continue
            rank = (
                stream.is_sticky,
                workers[stream.app_worker_id].capacity.in_flight,
                not stream.is_registered,
                stream.idle_since,
                stream.stream_id,
            )
            if best_rank is None or rank < best_rank:
                best, best_rank = stream, rank
        return best

    def _schedule_retry(self, retry_at: float | None, now: float, *, replace_timer: bool) -> None:
        """Match again at ``retry_at`` (on the registry's clock). A full match replaces the timer; a
        match of one new task only brings it forward (the other tasks' retry still stands)."""
        if not replace_timer and (
            retry_at is None or (self._retry_at is not None and self._retry_at <= retry_at)
        ):
            return
        if retry_at == self._retry_at:
            return
        if self._retry_timer is not None:
            self._retry_timer.cancel()
            self._retry_timer = self._retry_at = None
        if retry_at is not None:
            self._retry_at = retry_at
            self._retry_timer = asyncio.get_running_loop().call_later(
                max(0.0, retry_at - now), self._retry
            )

    def _retry(self) -> None:
        self._retry_timer = self._retry_at = None
        self._match()


def _has_idle_registered_peer(worker: _Worker, stream: WorkerStream) -> bool:
    """Whether another idle registered stream of the Worker serves the stream's queue."""
    return any(
        other is not stream
        and other.is_idle
        and other.is_registered
        and other.queue == stream.queue
        for other in worker.streams.values()
    )


def _earliest(first: float | None, second: float | None) -> float | None:
    if first is None:
        return second
    return first if second is None or first <= second else second


def _is_step(task: DispatchTask) -> bool:
    return not isinstance(task.request, pb.InvokeWorkerRPCRequest)


def _resolve(written: asyncio.Future[bool] | None, value: bool) -> None:
    if written is not None and not written.done():
        written.set_result(value)

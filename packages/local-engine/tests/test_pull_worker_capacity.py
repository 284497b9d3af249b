"""A Worker at its bound is offered no task of that kind; one probe per Worker; declines still work.

A pull Worker declines a task that arrives when its slots are full. Offering every waiting task to
a Worker at its bound and reading the declines cost the engine most of its CPU once tasks queued
at the Workers' bound (issue 33's load benchmark). The engine now learns each Worker's bound from
its declines (:mod:`dex_local_engine.pull_worker_capacity`). The registry cases below drive the
real :class:`PullWorkerRegistry` with a test clock, so what happens at a probe's delay is exact;
the SDK Worker cases in ``test_pull_dispatch.py`` and ``test_pull_load.py`` cover real declines
and kills end to end.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from dex.dexpb import dex_pb2 as pb
from dex_local_engine.dispatch import DispatchTask
from dex_local_engine.pull_worker_capacity import FIRST_PROBE_SECONDS, WorkerCapacity
from dex_local_engine.pull_worker_registry import (
    Assignment,
    Exclusions,
    PullWorkerRegistry,
    RejectEvent,
    StreamGoneEvent,
    WorkerStream,
)
from engine_test_support import execute_task, rpc_task, string_value

FLOW = "Flow"
NO_CAPACITY = pb.POLL_WORKER_TASK_REJECT_REASON_NO_CAPACITY
UNKNOWN_STEP = pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_STEP


# WorkerCapacity alone -----------------------------------------------------------------------


def test_a_decline_sets_the_bound_to_the_tasks_the_worker_holds() -> None:
    capacity = WorkerCapacity(retry_seconds=1.0)
    for _ in range(3):
        capacity.offered(0.0, is_step=True)
    capacity.released()  # the third is declined
    capacity.declined(0.0, is_step=True)

    assert capacity.step_bound.value == 2
    assert not capacity.takes(0.0, is_step=True)
    assert capacity.takes(0.0, is_step=False)  # RPCs have their own bound (their own slot)
    capacity.released()  # a task ended: one Step slot is free again
    assert capacity.takes(0.0, is_step=True)


def test_probes_double_per_decline_at_the_bound_up_to_the_retry_limit() -> None:
    capacity = WorkerCapacity(retry_seconds=0.005)
    capacity.offered(0.0, is_step=True)
    now, delays = 0.0, []
    for _ in range(4):
        capacity.offered(now, is_step=True)
        capacity.released()
        capacity.declined(now, is_step=True)
        delays.append(capacity.step_bound.probe_at - now)
        assert capacity.next_probe_at(now) == capacity.step_bound.probe_at
        now = capacity.step_bound.probe_at
        assert capacity.takes(now, is_step=True)  # the probe is due
    assert delays == pytest.approx([0.002, 0.004, 0.005, 0.005])
    assert capacity.step_bound.value == 1


def test_a_worker_that_declines_below_its_bound_is_probed_soon_and_a_taken_probe_raises_it() -> (
    None
):
    capacity = WorkerCapacity(retry_seconds=1.0)
    for _ in range(4):
        capacity.offered(0.0, is_step=True)
    for _ in range(3):  # declines at the bound push the probe delay up
        capacity.released()
        capacity.declined(0.0, is_step=True)
        capacity.offered(0.0, is_step=True)
    assert capacity.step_bound.probe_delay == 0.008

    capacity.released()
    capacity.released()  # a task ended, and the Worker declines the next one at 2: below 3
    capacity.offered(1.0, is_step=True)
    capacity.released()
    capacity.declined(1.0, is_step=True)
    assert capacity.step_bound.value == 2
    assert capacity.step_bound.probe_at == 1.0 + FIRST_PROBE_SECONDS

    probe = capacity.offered(1.0 + FIRST_PROBE_SECONDS, is_step=True)
    assert probe
    capacity.took_probe(1.01, is_step=True)
    assert capacity.step_bound.value == 3
    assert capacity.step_bound.probe_delay == 0.008  # kept for the next decline at the bound


# The registry ---------------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


class _Fleet:
    """A registry with a test clock, and helpers to act as the Workers and the dispatcher."""

    def __init__(self) -> None:
        self.clock = _Clock()
        self.registry = PullWorkerRegistry(no_capacity_retry_seconds=1.0, clock=self.clock)
        self.waiting: dict[str, asyncio.Task[Assignment]] = {}
        self.exclusions: dict[str, Exclusions] = {}

    def worker(self, name: str, *, spares: int = 0) -> list[WorkerStream]:
        """A Worker's streams: its Flow type's queue, its sticky queue, and ``spares`` more."""
        queues = [FLOW, name] + [FLOW] * spares
        return [
            self.registry.add_stream(
                pb.PollWorkerTaskRegister(queue=queue, app_worker_id=name, flow_types=[FLOW])
            )
            for queue in queues
        ]

    async def want(self, *tasks: DispatchTask) -> None:
        for task in tasks:
            exclusions = self.exclusions.setdefault(task.task_id, Exclusions())
            self.waiting[task.task_id] = asyncio.ensure_future(
                self.registry.acquire(task, exclusions)
            )
        await _settle()

    def offered(self, task: DispatchTask) -> WorkerStream | None:
        acquiring = self.waiting[task.task_id]
        return acquiring.result().stream if acquiring.done() else None

    async def decline(
        self, stream: WorkerStream, reason: pb.PollWorkerTaskRejectReason = NO_CAPACITY
    ) -> None:
        """The Worker declines the task on ``stream``; the task waits for a stream again."""
        assert stream.assignment is not None
        assignment = stream.assignment
        self.registry.on_reject(
            stream, pb.PollWorkerTaskReject(task_id=assignment.task.task_id, reason=reason)
        )
        assert isinstance(assignment.events.get_nowait(), RejectEvent)
        self.exclusions[assignment.task.task_id].record(stream, reason)  # as the dispatcher does
        await self.want(assignment.task)

    def run(self, stream: WorkerStream) -> None:
        """The Worker sends the first output of the task on ``stream`` (it took the task)."""
        assert stream.assignment is not None
        output = pb.InvokeExecuteMethodOutput(heartbeat=pb.StepMethodHeartbeat())
        frame = pb.PollWorkerTaskFrame(task_id=stream.assignment.task.task_id, execute=output)
        self.registry.on_task_frame(stream, frame)

    async def finish(self, stream: WorkerStream) -> None:
        assert stream.assignment is not None
        output = pb.InvokeExecuteMethodOutput(result=pb.InvokeExecuteMethodResponse())
        frame = pb.PollWorkerTaskFrame(task_id=stream.assignment.task.task_id, execute=output)
        self.registry.on_task_frame(stream, frame)
        await _settle()

    async def at_step_bound(self, waiting: int) -> tuple[WorkerStream, list[DispatchTask]]:
        """The Worker runs one Step and declines the next (its Step bound is 1); ``waiting``
        more Steps wait. Returns the running task's stream and the waiting Steps, the declined
        one first."""
        running, declined, *more = _steps(2 + waiting)
        await self.want(running, declined)
        on = self.offered(running)
        other = self.offered(declined)
        assert on is not None and other is not None
        self.run(on)
        await self.decline(other)
        await self.want(*more)
        return on, [declined, *more]

    def cancel_all(self) -> None:
        for acquiring in self.waiting.values():
            acquiring.cancel()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _steps(count: int) -> list[DispatchTask]:
    return [execute_task(FLOW, "Step", string_value(str(n))) for n in range(count)]


async def test_a_worker_at_its_step_bound_gets_no_waiting_step_until_one_of_its_tasks_ends() -> (
    None
):
    fleet = _Fleet()
    streams = fleet.worker("w", spares=2)  # four idle streams
    on, waiting = await fleet.at_step_bound(waiting=2)

    # Three idle streams, three waiting Steps, none offered: no decline per waiting task.
    assert sum(stream.is_idle for stream in streams) == 3
    assert [fleet.offered(task) for task in waiting] == [None, None, None]
    assert fleet.registry.stats.tasks_offered == 2

    # The running task ends: one slot is free, and the oldest waiting Step takes it, at once.
    await fleet.finish(on)
    assert [fleet.offered(task) is not None for task in waiting] == [
        True,
        False,
        False,
    ]
    assert fleet.registry.stats.rejected_no_capacity == 1

    # An RPC still goes to the Worker at its Step bound: the SDK keeps a slot for RPCs.
    await fleet.want(rpc := rpc_task(FLOW, "echo", string_value("x")))
    assert fleet.offered(rpc) is not None
    fleet.cancel_all()


async def test_one_probe_per_worker_at_its_delay_whatever_the_number_of_waiting_steps() -> None:
    fleet = _Fleet()
    fleet.worker("w", spares=3)
    _, queued = await fleet.at_step_bound(waiting=6)
    declined = queued[0]
    assert not any(fleet.offered(task) for task in queued)

    probes = []
    for delay in (0.002, 0.004, 0.008):
        fleet.clock.now += delay
        await asyncio.sleep(0.02)  # the registry's retry timer fires (due after `delay`)
        await _settle()
        offered = [task for task in queued if fleet.offered(task) is not None]
        assert len(offered) == 1, "exactly one probe of the Worker"
        probes.append(offered[0])
        queued.remove(offered[0])
        await fleet.decline(fleet.offered(offered[0]) or pytest.fail("not offered"))
        queued.append(offered[0])
        assert not any(fleet.offered(task) for task in queued)
    assert probes[0] is declined  # oldest first
    assert fleet.registry.stats.rejected_no_capacity == 4
    fleet.cancel_all()


async def test_a_taken_probe_raises_the_bound_so_the_worker_gets_one_more_step() -> None:
    fleet = _Fleet()
    fleet.worker("w", spares=3)
    _, (declined, *waiting) = await fleet.at_step_bound(waiting=3)

    fleet.clock.now += FIRST_PROBE_SECONDS
    await asyncio.sleep(0.02)
    await _settle()
    probe = fleet.offered(declined)
    assert probe is not None
    fleet.run(probe)  # the Worker ran it: its bound was too low

    capacity = fleet.registry.worker_capacity("w")
    assert capacity is not None and capacity.step_bound.value == 2
    assert not any(fleet.offered(task) for task in waiting)
    fleet.cancel_all()


async def test_other_workers_take_the_steps_a_full_worker_is_not_offered() -> None:
    fleet = _Fleet()
    full = fleet.worker("full")
    _, (declined,) = await fleet.at_step_bound(waiting=0)

    free = fleet.worker("free")
    await _settle()

    assert fleet.offered(declined) in free
    assert all(stream.assignment is None for stream in full if stream.is_idle)
    fleet.cancel_all()


async def test_a_killed_worker_gives_back_its_tasks_and_what_was_learned_of_it_goes() -> None:
    fleet = _Fleet()
    streams = fleet.worker("w")
    on, (declined,) = await fleet.at_step_bound(waiting=0)
    assignment = on.assignment
    assert assignment is not None

    for stream in streams:  # SIGKILL: every stream of the Worker breaks
        fleet.registry.remove_stream(stream, "the Worker's stream broke", is_half_close=False)

    events = [assignment.events.get_nowait() for _ in range(assignment.events.qsize())]
    gone = events[-1]
    assert isinstance(gone, StreamGoneEvent) and not gone.is_half_close
    assert fleet.registry.worker_capacity("w") is None
    # Its restart (same app Worker ID) starts with nothing learned: the waiting Step goes to it.
    fleet.worker("w")
    await _settle()
    assert fleet.offered(declined) is not None
    fleet.cancel_all()


async def test_an_unknown_name_decline_skips_that_worker_for_the_task_only() -> None:
    fleet = _Fleet()
    fleet.worker("old")
    (task,) = _steps(1)
    await fleet.want(task)
    await fleet.decline(fleet.offered(task) or pytest.fail("not offered"), UNKNOWN_STEP)
    assert fleet.offered(task) is None
    capacity = fleet.registry.worker_capacity("old")
    assert capacity is not None and capacity.step_bound.value is None  # not a capacity matter

    (other,) = _steps(1)
    await fleet.want(other)
    assert fleet.offered(other) is not None
    fleet.cancel_all()

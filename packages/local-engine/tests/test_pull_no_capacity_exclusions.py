"""A Worker that declines a task for lack of capacity is skipped on all its streams.

A Worker at its bound declines on every idle stream. Skipping only the declining stream offered
each waiting task to every idle stream of a busy Worker after every retry delay; at issue 33's
load (100 sessions, one Worker at its bound) that was 399 declined offers per turn and most of the
engine's CPU. Now the whole Worker is skipped until one of its streams finishes a task (capacity
freed there) or the retry delay passed.
"""

from __future__ import annotations

import time

from dex.dexpb import dex_pb2 as pb
from dex_local_engine.pull_worker_registry import Exclusions, WorkerStream

NO_CAPACITY = pb.POLL_WORKER_TASK_REJECT_REASON_NO_CAPACITY
UNKNOWN = pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_STEP


def _stream(stream_id: int, worker: str = "busy-worker") -> WorkerStream:
    registration = pb.PollWorkerTaskRegister(
        queue="Flow", app_worker_id=worker, flow_types=["Flow"]
    )
    return WorkerStream(stream_id=stream_id, registration=registration)


def test_a_no_capacity_decline_skips_every_stream_of_that_worker_only() -> None:
    declining, idle, other_idle = _stream(1), _stream(2), _stream(3)
    elsewhere = _stream(4, worker="free-worker")
    exclusions = Exclusions(retry_seconds=1.0)

    exclusions.record(declining, NO_CAPACITY, (declining, idle, other_idle))

    now = time.monotonic()
    assert [exclusions.excludes(s, now) for s in (declining, idle, other_idle, elsewhere)] == [
        True,
        True,
        True,
        False,
    ]
    # A stream the Worker opened after the decline finished nothing yet: still at capacity.
    assert exclusions.excludes(_stream(5), now)


def test_the_stream_that_finishes_a_task_takes_the_task_and_the_others_stay_skipped() -> None:
    declining, idle = _stream(1), _stream(2)
    busy = _stream(3)
    exclusions = Exclusions(retry_seconds=1.0)
    exclusions.record(declining, NO_CAPACITY, (declining, idle, busy))

    busy.finished_tasks += 1  # its task ended: the Worker has a free slot there

    now = time.monotonic()
    assert not exclusions.excludes(busy, now)
    assert exclusions.excludes(declining, now) and exclusions.excludes(idle, now)
    # A new stream that already finished a task freed capacity too.
    fresh = _stream(6)
    fresh.finished_tasks = 1
    assert not exclusions.excludes(fresh, now)


def test_the_retry_delay_doubles_per_decline_up_to_the_limit_and_then_offers_again() -> None:
    stream = _stream(1)
    exclusions = Exclusions(retry_seconds=0.005)
    delays = []
    for _ in range(4):
        exclusions.record(stream, NO_CAPACITY, (stream,))
        delays.append(exclusions.no_capacity["busy-worker"].delay)
    assert delays == [0.002, 0.004, 0.005, 0.005]

    retry_at = exclusions.next_retry_at(time.monotonic())
    assert retry_at is not None
    assert exclusions.excludes(stream, retry_at - 0.001)
    assert not exclusions.excludes(stream, retry_at)
    assert exclusions.next_retry_at(retry_at) is None


def test_an_unknown_name_decline_skips_the_worker_for_good() -> None:
    stream = _stream(1)
    exclusions = Exclusions(retry_seconds=1.0)
    exclusions.record(stream, UNKNOWN, (stream,))
    assert exclusions.excludes(_stream(7), time.monotonic() + 3600)
    assert exclusions.next_retry_at(time.monotonic()) is None

"""What a run's next commit writes: its history events and in-flight markers, then the commit.

Every state transition of the scheduler records its history events here and ends in
:meth:`RunJournal.commit`, one SQLite transaction that writes the run's snapshot together with
the events it produced, removes the in-flight markers of attempts that ended and adds those of
attempts launched right after it.
"""

from __future__ import annotations

import time
from typing import Any

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.blob_values import BlobStore
from dex_local_engine.flow_runs import FlowRuns
from dex_local_engine.flow_state import FlowRun, persist_run
from dex_local_engine.run_waiters import RunWaiters
from dex_local_engine.store import HistoryRow, InflightRow, Store

__all__ = ["RunJournal"]


class RunJournal:
    """Pending history and in-flight changes per run, committed with the run's state.

    Example::

        journal = RunJournal(store, blobs, FlowRuns(store, blobs))
        journal.event(run, flow_closed=pb.FlowClosedHistoryEvent(...))
        journal.commit(run)
    """

    def __init__(self, store: Store, blobs: BlobStore, runs: FlowRuns) -> None:
        self.store = store
        self._blobs = blobs
        self._runs = runs
        self.waiters = RunWaiters()
        """Long polls waiting for a run to change; woken by every commit."""
        self._pending_history: dict[str, list[HistoryRow]] = {}
        self._finished_inflight: dict[str, list[str]] = {}
        self._new_runs: set[str] = set()

    def event(self, run: FlowRun, **payload: Any) -> None:
        """Record a history event of ``run`` (``payload``: one ``FlowHistoryEvent`` field).

        Large values in the event are stored as blobs with the run's next commit.
        """
        event = pb.FlowHistoryEvent(
            event_id=run.next_event_id, run_attempt=run.run_attempt, **payload
        )
        self._blobs.intern(event)
        event.event_time.FromNanoseconds(time.time_ns())
        run.next_event_id += 1
        self._pending_history.setdefault(run.run_id, []).append(
            HistoryRow(run.run_id, event.event_id, event.SerializeToString())
        )

    def copy_event(self, run: FlowRun, original: pb.FlowHistoryEvent) -> None:
        """Record ``original`` (another run's event) in ``run``'s history, keeping its time.

        Time travel copies the events before the reset point into the new run, as Dex does.
        """
        event = pb.FlowHistoryEvent()
        event.CopyFrom(original)
        event.event_id = run.next_event_id
        event.run_attempt = run.run_attempt
        run.next_event_id += 1
        self._pending_history.setdefault(run.run_id, []).append(
            HistoryRow(run.run_id, event.event_id, event.SerializeToString())
        )

    def drop_events(self, run: FlowRun) -> None:
        """Forget the events recorded since the last commit (a transition that went wrong)."""
        self._pending_history.pop(run.run_id, None)

    def mark_new(self, run: FlowRun) -> None:
        """``run`` is a new run of its Flow ID: its commit makes it the latest one."""
        self._new_runs.add(run.run_id)

    def finish_inflight(self, run: FlowRun, step_execution_id: str) -> None:
        """The next commit removes the in-flight marker of ``step_execution_id``."""
        self._finished_inflight.setdefault(run.run_id, []).append(step_execution_id)

    def mark_inflight(self, marker: InflightRow) -> None:
        """Write ``marker`` now: a Worker is about to take its attempt."""
        self.store.mark_inflight(marker)

    def unmark_inflight(self, marker: InflightRow) -> None:
        """Remove ``marker`` now: its attempt went back to waiting without running."""
        self.store.unmark_inflight(marker)

    def commit(self, run: FlowRun) -> None:
        """Write ``run``'s state with its pending events, markers and blobs; wake its waiters.

        A closed run is written with its search record and leaves memory.
        """
        history = self._pending_history.pop(run.run_id, [])
        finished = [(run.run_id, s) for s in self._finished_inflight.pop(run.run_id, [])]
        is_new = run.run_id in self._new_runs
        self._new_runs.discard(run.run_id)
        blobs = self._blobs.pending_rows()
        closed = not run.is_running
        record = self._runs.closed_record(run) if closed else None
        flow = persist_run(run, is_new=is_new, search_record=record)
        self.store.commit([flow], history, finished, blobs)
        self._blobs.mark_written(blobs)
        if closed:
            # Committed: the run leaves memory and is read from the database from now on.
            self._runs.retire(run)
        self.waiters.notify(run.run_id)

    def history(self, run: FlowRun, from_event_id: int, limit: int) -> list[pb.FlowHistoryEvent]:
        """Committed history events of ``run`` from ``from_event_id`` on."""
        events = []
        for row in self.store.history(run.run_id, max(1, from_event_id), limit):
            event = pb.FlowHistoryEvent()
            event.ParseFromString(row.event)
            events.append(event)
        return events

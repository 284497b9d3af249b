"""The scheduler: one object over the engine's parts, the operations FlowService calls.

All state lives on one asyncio event loop. Every state transition is a synchronous function that
mutates a :class:`~dex_local_engine.flow_state.FlowRun` and ends in a commit of the
:class:`~dex_local_engine.run_journal.RunJournal`, one SQLite transaction that writes the run's
snapshot together with the history events it produced. The parts, one concern each:

- :mod:`~dex_local_engine.flow_runs`: the runs by Flow ID, lookups, search records;
- :mod:`~dex_local_engine.run_lifecycle`: start, ID reuse, StopFlow, Flow timeouts and retries,
  close;
- :mod:`~dex_local_engine.step_scheduler`: Step executions, attempts and their outcomes,
  conditions and Timers;
- :mod:`~dex_local_engine.sub_flows`: child Flows of waiting Steps;
- :mod:`~dex_local_engine.flow_reset`: time travel (``ResetFlow``), a new run replayed from history;
- :mod:`~dex_local_engine.client_operations`: Channel, Attribute, Timer and config requests of
  Clients, and RPCs.

Running one attempt is :mod:`dex_local_engine.task_runner`; building its request (large values
as blob references) is :mod:`dex_local_engine.task_requests`.
"""

from __future__ import annotations

from collections.abc import Iterator

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.attribute_locks import AttributeLocks
from dex_local_engine.blob_values import BlobStore
from dex_local_engine.client_operations import ClientOperations
from dex_local_engine.flow_reset import FlowResetter
from dex_local_engine.flow_runs import DEFAULT_CLOSED_RUN_CACHE, FlowRuns
from dex_local_engine.flow_state import FlowRun, StepPhase
from dex_local_engine.run_journal import RunJournal
from dex_local_engine.run_lifecycle import DEFAULT_WORKER_ADDRESS, RunLifecycle
from dex_local_engine.run_waiters import RunWaiters
from dex_local_engine.search_query import FlowSearchRecord
from dex_local_engine.step_scheduler import StepScheduler
from dex_local_engine.store import Store
from dex_local_engine.sub_flows import SubFlows
from dex_local_engine.task_runner import DispatcherRouter, StreamWriter, TaskRunner

__all__ = ["DEFAULT_WORKER_ADDRESS", "DispatcherRouter", "Engine", "StreamWriter"]


class Engine:
    """Runs Flows: the FlowService operations and the Step state machine.

    Example::

        engine = Engine(store, lambda address: pull_dispatcher)
        await engine.recover()
        run_id = engine.start_flow(request)

    Raises (from operations): :class:`~dex_local_engine.errors.EngineError`.
    """

    def __init__(
        self,
        store: Store,
        dispatchers: DispatcherRouter,
        stream_writer: StreamWriter | None = None,
        default_worker_address: str = DEFAULT_WORKER_ADDRESS,
        closed_run_cache: int = DEFAULT_CLOSED_RUN_CACHE,
    ) -> None:
        self._store = store
        self.blobs = BlobStore(store)
        """Large values, stored once and sent as blob references (answers LoadBlobs)."""
        self.runs = FlowRuns(store, self.blobs, closed_run_cache)
        """The latest run of each Flow ID (closed ones read from the store)."""
        self._journal = RunJournal(store, self.blobs, self.runs)
        locks = AttributeLocks()
        tasks = TaskRunner(dispatchers, self.blobs, stream_writer, self._journal.commit)
        self._steps = StepScheduler(self._journal, locks, tasks, self.blobs)
        self._lifecycle = RunLifecycle(
            self._journal, self.runs, self._steps, locks, self.blobs, default_worker_address
        )
        sub_flows = SubFlows(self.runs, self._lifecycle, self._journal)
        self._steps.connect(self._lifecycle, sub_flows)
        resetter = FlowResetter(self._journal, self.runs, self._steps, self._lifecycle, sub_flows)
        self._operations = ClientOperations(
            self._journal, self.runs, self._steps, locks, tasks, self.blobs
        )
        self.start_flow = self._lifecycle.start_flow
        self.stop_flow = self._lifecycle.stop_flow
        self.reset_flow = resetter.reset_flow
        self.publish = self._operations.publish
        self.delete_message = self._operations.delete_message
        self.set_attributes = self._operations.set_attributes
        self.skip_timer = self._operations.skip_timer
        self.update_config = self._operations.update_config
        self.invoke_rpc = self._operations.invoke_rpc
        self.get_run = self.runs.get_run
        self.get_running = self.runs.get_running
        self.sync_attribute_indexes = self.runs.sync_attribute_indexes

    @property
    def waiters(self) -> RunWaiters:
        """Long polls waiting for a run to change."""
        return self._journal.waiters

    @property
    def attribute_index_types(self) -> dict[str, int]:
        """The Attribute index keys Workers declared."""
        return self.runs.attribute_index_types

    async def recover(self) -> None:
        """Load every run from the store and resume the running ones.

        A Step method attempt that was in flight when the engine stopped may have run, so it is
        failed as lost (NOT_COMPLETED) and retried per its policy; queued Steps dispatch again.
        """
        self.runs.load()
        inflight = {(row.run_id, row.step_execution_id): row for row in self._store.load_inflight()}
        for run in self.runs.running():
            for step in list(run.steps.values()):
                marker = inflight.get((run.run_id, step.step_execution_id))
                if (
                    marker is not None
                    and marker.method == step.method.value
                    and marker.attempt == step.attempt
                    and step.phase is not StepPhase.WAITING
                ):
                    self._steps.note_lost_attempt(run, step)
            self._lifecycle.resume(run)
            self._steps.resume(run)

    async def shutdown(self, drain_seconds: float = 2.0) -> None:
        """Stop every Step driver and timer (state on disk stays as committed).

        Attempts already on a Worker get ``drain_seconds`` to report their result, so a graceful
        stop does not turn them into lost attempts; no new attempt starts meanwhile.
        """
        self._lifecycle.stop()
        await self._steps.stop(drain_seconds)

    def history(self, run: FlowRun, from_event_id: int, limit: int) -> list[pb.FlowHistoryEvent]:
        """Committed history events of ``run`` from ``from_event_id`` on."""
        return self._journal.history(run, from_event_id, limit)

    def search_records(self) -> Iterator[FlowSearchRecord]:
        """What SearchFlows sees of every Flow ID's latest run."""
        return self.runs.search_records()

"""The scheduler: Flow runs, Step executions, retries, conditions, RPCs and their persistence.

All state lives on one asyncio event loop. Every state transition is a synchronous function that
mutates a :class:`~dex_local_engine.flow_state.FlowRun` and ends in :meth:`Engine._commit`, one
SQLite transaction that writes the run's snapshot together with the history events it produced.
Step methods run as asyncio tasks that hand attempts to a :class:`~dex_local_engine.dispatch.
Dispatcher` and apply the Worker's result when it arrives.

Semantics where the SDK leaves the server's choice open:

- Step execution IDs are ``<StepType>-<n>`` per Step type per run; ``from_step_execution_id`` is
  ``__start__`` for the start Step (and the Flow timeout handler) and ``__rpc/<name>`` for Steps
  an RPC started. A Flow closes only by a close decision, a Flow timeout or StopFlow; a run whose
  Steps all ended (``dead_end``) keeps running until an RPC adds work.
- Attempts: a task no Worker started (:class:`~dex_local_engine.dispatch.TaskNotStarted`) is
  dispatched again with the same attempt number; a lost Worker, a timeout or a handler error
  fails the attempt and the retry policy decides (defaults: 1 s initial interval, coefficient 2,
  100 s maximum, unlimited attempts within 4 hours). Method timeout defaults to 2 hours; a
  heartbeat timeout applies only when the Step sets one, from when a Worker takes the task.
  Running one attempt is :mod:`dex_local_engine.task_runner`; building its request (large values
  as blob references) is :mod:`dex_local_engine.task_requests`.
- Attempt progress: SDK 1.23.0's ``RecoveryErrorInfo`` has no ``attempt_progress`` field, so the
  recovery error's ``detail`` ends with ``(attempt_progress: NOT_STARTED)`` when no attempt of
  the method produced output on a Worker (a heartbeat counts), else
  ``(attempt_progress: NOT_COMPLETED)``.
- Restart: an attempt whose in-flight marker survives an engine crash may have run, so it fails
  as lost (NOT_COMPLETED) and is retried per policy; Timers and waits resume from the snapshot.
- A non-transactional RPC without locks may run on a closed run if it returns no effects; on
  a running Flow it records no history event then (Dex serves it as a query). A transactional
  RPC (``is_transactional`` or locks) deleting a Channel message that is not pending fails with
  ChannelMessageNotFound and applies nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import grpc
from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.attribute_locks import AttributeLocks
from dex_local_engine.blob_values import BlobStore
from dex_local_engine.conditions import (
    evaluate_step,
    start_waiting,
    sub_flow_id,
)
from dex_local_engine.flow_state import (
    RPC_FROM_PREFIX,
    START_FROM,
    FlowRun,
    MethodKind,
    StepExecution,
    StepPhase,
    load_run,
    persist_run,
)
from dex_local_engine.flow_writes import (
    apply_attribute_writes,
    apply_method_writes,
    delete_messages,
    publish,
    require_pending,
)
from dex_local_engine.result_checks import (
    has_effects,
    malformed_result,
    malformed_writes,
    oversized_result,
    refuse_oversized,
)
from dex_local_engine.retry_policy import DEFAULT_TOTAL_RETRY_DURATION, retry_interval
from dex_local_engine.run_waiters import RunWaiters
from dex_local_engine.search_query import FlowSearchRecord, IndexedValue, indexed_value_from_write
from dex_local_engine.store import HistoryRow, InflightRow, Store
from dex_local_engine.task_requests import method_request, rpc_request
from dex_local_engine.task_runner import (
    AttemptFailure,
    DispatcherRouter,
    StreamWriter,
    TaskOutcome,
    TaskRunner,
)
from dex_local_engine.value_limits import (
    TOO_LARGE_ERROR_TYPE,
    oversized_task,
    oversized_values,
)
from dex_local_engine.wire_values import ensure_value, value_text

__all__ = ["DEFAULT_WORKER_ADDRESS", "DispatcherRouter", "Engine", "StreamWriter"]

_log = logging.getLogger(__name__)

DEFAULT_WORKER_ADDRESS = "127.0.0.1:8803"
"""Where Flows started without a worker target are dispatched: the SDK's default Worker listener."""

_DEFAULT_METHOD_TIMEOUT = 2 * 3600.0
_DEFAULT_RPC_TIMEOUT = 60.0
_NO_ERROR = pb.FLOW_ERROR_TYPE_UNSPECIFIED
_RETRYABLE_FLOW_ERRORS = frozenset(
    {
        pb.FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW,
        pb.FLOW_ERROR_TYPE_WORKER_API_FAIL,
        pb.FLOW_ERROR_TYPE_FLOW_TIMEOUT,
    }
)
TIMEOUT_HANDLER_STEP_TYPE = "sys:timeout_handler"
"""The Step type under which Workers run ``Flow.handle_timeout``."""
_INDEX_META_KEY = "attribute_index_types"
ATTEMPT_PROGRESS_NOT_STARTED = "NOT_STARTED"
ATTEMPT_PROGRESS_NOT_COMPLETED = "NOT_COMPLETED"


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


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
    ) -> None:
        self._store = store
        self._default_worker_address = default_worker_address
        self.runs: dict[str, FlowRun] = {}
        """Latest run of each Flow ID."""
        self.blobs = BlobStore()
        """Large values of tasks, sent to Workers as blob references (answers LoadBlobs)."""
        self._tasks = TaskRunner(dispatchers, self.blobs, stream_writer, self._commit)
        self._drivers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._timer_handles: dict[tuple[str, str], list[asyncio.TimerHandle]] = {}
        self._flow_timeouts: dict[str, asyncio.TimerHandle] = {}
        self._locks = AttributeLocks()
        self.waiters = RunWaiters()
        """Long polls waiting for a run to change."""
        self._pending_history: dict[str, list[HistoryRow]] = {}
        self._finished_inflight: dict[str, list[str]] = {}
        self._dispatching: dict[str, list[InflightRow]] = {}
        self._premarked: set[InflightRow] = set()
        self._attempt_deadlines: dict[InflightRow, float] = {}
        """When each in-flight attempt times out, kept across redispatches of an unstarted task."""
        """Attempts whose in-flight marker was written with the commit that made them runnable."""
        self._lost_attempts: set[tuple[str, str]] = set()
        self._closing = False
        self._new_runs: set[str] = set()
        stored_indexes = store.get_meta(_INDEX_META_KEY)
        self.attribute_index_types: dict[str, int] = (
            json.loads(stored_indexes) if stored_indexes else {}
        )

    # ------------------------------------------------------------------ lifecycle

    async def recover(self) -> None:
        """Load every run from the store and resume the running ones.

        A Step method attempt that was in flight when the engine stopped may have run, so it is
        failed as lost (NOT_COMPLETED) and retried per its policy; queued Steps dispatch again.
        """
        for row in self._store.load_flows():
            run = load_run(row)
            current = self.runs.get(run.flow_id)
            if row.is_latest or current is None:
                self.runs[run.flow_id] = run
        inflight = {(row.run_id, row.step_execution_id): row for row in self._store.load_inflight()}
        for run in self.runs.values():
            if not run.is_running:
                continue
            for step in list(run.steps.values()):
                marker = inflight.get((run.run_id, step.step_execution_id))
                if (
                    marker is not None
                    and marker.method == step.method.value
                    and marker.attempt == step.attempt
                    and step.phase is not StepPhase.WAITING
                ):
                    self._lost_attempts.add((run.run_id, step.step_execution_id))
            self._resume(run)

    def _resume(self, run: FlowRun) -> None:
        self._arm_flow_timeout(run)
        for step in list(run.steps.values()):
            if step.phase is StepPhase.WAITING:
                self._arm_timers(run, step)
            else:
                self._launch(run, step)
        self._evaluate_waiting(run)

    async def shutdown(self, drain_seconds: float = 2.0) -> None:
        """Stop every Step driver and timer (state on disk stays as committed).

        Attempts already on a Worker get ``drain_seconds`` to report their result, so a graceful
        stop does not turn them into lost attempts; no new attempt starts meanwhile.
        """
        self._closing = True
        for handles in self._timer_handles.values():
            for handle in handles:
                handle.cancel()
        for handle in self._flow_timeouts.values():
            handle.cancel()
        tasks = [task for task in self._drivers.values() if not task.done()]
        if tasks and drain_seconds > 0:
            await asyncio.wait(tasks, timeout=drain_seconds)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ persistence

    def _event(self, run: FlowRun, **payload: Any) -> None:
        event = pb.FlowHistoryEvent(
            event_id=run.next_event_id, run_attempt=run.run_attempt, **payload
        )
        event.event_time.FromNanoseconds(time.time_ns())
        run.next_event_id += 1
        self._pending_history.setdefault(run.run_id, []).append(
            HistoryRow(run.run_id, event.event_id, event.SerializeToString())
        )

    def _commit(self, run: FlowRun) -> None:
        history = self._pending_history.pop(run.run_id, [])
        finished = [(run.run_id, s) for s in self._finished_inflight.pop(run.run_id, [])]
        dispatching = self._dispatching.pop(run.run_id, [])
        is_new = run.run_id in self._new_runs
        self._new_runs.discard(run.run_id)
        self._store.commit(
            [persist_run(run, is_new=is_new)],
            history,
            finished,
            dispatching,
        )
        self._premarked.update(dispatching)
        self.waiters.notify(run.run_id)

    def history(self, run: FlowRun, from_event_id: int, limit: int) -> list[pb.FlowHistoryEvent]:
        """Committed history events of ``run`` from ``from_event_id`` on."""
        events = []
        for row in self._store.history(run.run_id, max(1, from_event_id), limit):
            event = pb.FlowHistoryEvent()
            event.ParseFromString(row.event)
            events.append(event)
        return events

    # ------------------------------------------------------------------ lookups

    def get_run(self, flow_id: str, run_id: str = "") -> FlowRun:
        """The Flow's latest run (or the named run if it is the latest)."""
        if not flow_id:
            raise errors.invalid_argument("flow_id is required")
        run = self.runs.get(flow_id)
        if run is None or (run_id and run.run_id != run_id):
            raise errors.flow_not_found(flow_id)
        return run

    def get_running(self, flow_id: str, run_id: str = "") -> FlowRun:
        """The Flow's run if it is still running."""
        run = self.get_run(flow_id, run_id)
        if not run.is_running:
            raise errors.flow_not_active(flow_id)
        return run

    def sync_attribute_indexes(self, indexes: dict[str, int]) -> None:
        """Remember the Attribute index keys Workers declared (kept across restarts)."""
        self.attribute_index_types.update(indexes)
        self._store.set_meta(_INDEX_META_KEY, json.dumps(self.attribute_index_types).encode())

    def search_record(self, run: FlowRun) -> FlowSearchRecord:
        """What SearchFlows sees of ``run``: system keys, indexed Attributes, active Steps."""
        indexed: dict[str, IndexedValue] = {}
        for key, value in run.attributes.items():
            config = run.attribute_indexes.get(key)
            if config is None:
                index_type = self.attribute_index_types.get(key)
                if index_type is None:
                    continue
                config = pb.IndexConfig(enable=True, type=index_type)  # type: ignore[arg-type]
            found = indexed_value_from_write(
                pb.AttributeWrite(key=key, value=value, index_config=config)
            )
            if found is not None and found[1] is not None:
                indexed[found[0]] = found[1]
        return FlowSearchRecord(
            flow_id=run.flow_id,
            run_id=run.run_id,
            flow_type=run.flow_type,
            status=run.status,
            start_time=_timestamp(run.started_at),
            close_time=None if run.closed_at is None else _timestamp(run.closed_at),
            active_step_types=self._active_step_types(run),
            indexed_attributes=indexed,
            parent_flow_id=run.parent_flow_id,
        )

    def _active_step_types(self, run: FlowRun) -> tuple[str, ...]:
        mode = run.config.active_step_search_mode
        if mode == pb.ACTIVE_STEP_SEARCH_MODE_DISABLED:
            return ()
        every = mode == pb.ACTIVE_STEP_SEARCH_MODE_ENABLED_FOR_ALL
        return tuple(
            sorted(
                {
                    step.step_type
                    for step in run.steps.values()
                    if every or not step.options.skip_wait_for
                }
            )
        )

    # ------------------------------------------------------------------ start / stop

    def start_flow(self, request: pb.StartFlowRequest) -> str:
        """Start a run (ID reuse policy applied); returns its run ID."""
        for name in ("flow_id", "flow_type"):
            if not getattr(request, name):
                raise errors.invalid_argument(f"StartFlow: {name} is required")
        options = request.flow_start_options
        refuse_oversized(
            oversized_values(
                attributes=options.attributes, others=[("the start Step input", request.step_input)]
            )
        )
        existing = self.runs.get(request.flow_id)
        if existing is not None:
            reused = self._check_reuse(existing, request)
            if reused is not None:
                return reused
        run, _ = self._create_run(request)
        self._begin_run(run)
        return run.run_id

    def _create_run(
        self, request: pb.StartFlowRequest, *, parent_flow_id: str = ""
    ) -> tuple[FlowRun, StepExecution | None]:
        """Build a new run and its start Step and make it the Flow ID's latest run (unsaved)."""
        options = request.flow_start_options
        now = time.time()
        config = pb.FlowConfig()
        config.CopyFrom(options.flow_config_override)
        if not config.HasField("worker_target"):
            # As on a Dex Server, a Flow started without a target goes to the default listening
            # Worker; pull Workers need the client to advertise WorkerTarget(pull=True).
            config.worker_target.address = self._default_worker_address
        run = FlowRun(
            flow_id=request.flow_id,
            run_id=str(uuid.uuid4()),
            flow_type=request.flow_type,
            start_request=request,
            config=config,
            started_at=now,
            request_id=request.request_id,
            parent_flow_id=parent_flow_id,
        )
        apply_attribute_writes(run, options.attributes)
        started = pb.FlowStartedOrContinuedHistoryEvent(
            flow_execution_id=pb.FlowExecutionID(flow_id=run.flow_id, run_id=run.run_id),
            flow_type=run.flow_type,
            flow_config=config,
            flow_timeout_policy=request.flow_timeout_policy,
        )
        started.flow_timeout.FromSeconds(request.flow_timeout_seconds)
        started.initial_start.start_step_type = request.start_step_type
        started.initial_start.step_input.CopyFrom(ensure_value(request.step_input))
        started.initial_start.step_options.CopyFrom(request.step_options)
        started.initial_start.initial_attributes.extend(
            pb.KV(key=k, value=v) for k, v in run.attributes.items()
        )
        self._event(run, flow_started_or_continued=started)
        step: StepExecution | None = None
        if request.start_step_type:
            # A Flow without a start Step waits, like a dead end, until an RPC adds work.
            movement = pb.StepMovement(
                step_type=request.start_step_type,
                step_input=ensure_value(request.step_input),
                step_options=request.step_options,
            )
            step = self._new_step(run, movement, START_FROM, now)
            if options.flow_start_delay_seconds > 0:
                step.retry_at = now + options.flow_start_delay_seconds
        self.runs[run.flow_id] = run
        self._new_runs.add(run.run_id)
        return run, step

    def _begin_run(self, run: FlowRun) -> None:
        """Persist a run made by :meth:`_create_run` and start its Steps and Flow timer."""
        for step in run.steps.values():
            self._mark_dispatching(run, step)
        self._commit(run)
        self._arm_flow_timeout(run)
        for step in list(run.steps.values()):
            self._launch(run, step)

    def _check_reuse(self, existing: FlowRun, request: pb.StartFlowRequest) -> str | None:
        options = request.flow_start_options
        policy = options.id_reuse_policy
        if existing.is_running:
            if policy == pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING:
                self._close(
                    existing, pb.FLOW_STATUS_TERMINATED, _NO_ERROR, "terminated by a new run"
                )
                self._commit(existing)
                return None
            if options.flow_already_started_options.ignore_already_started_error:
                return existing.run_id
            raise errors.flow_already_started(
                request.flow_id, f"flow {request.flow_id!r} is already running"
            )
        allowed = policy in (
            pb.ID_REUSE_POLICY_ALLOW_IF_NO_RUNNING,
            pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING,
        ) or (
            policy == pb.ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY
            and existing.status != pb.FLOW_STATUS_COMPLETED
        )
        if allowed:
            return None
        if options.flow_already_started_options.ignore_already_started_error:
            return existing.run_id
        raise errors.flow_already_started(
            request.flow_id,
            f"flow ID {request.flow_id!r} was already used and its ID reuse policy rejects reuse",
        )

    def stop_flow(self, request: pb.StopFlowRequest) -> None:
        """Cancel, terminate or fail a running Flow."""
        run = self.get_running(request.flow_id, request.run_id)
        reason = request.reason or "stopped by StopFlow"
        if request.stop_type == pb.STOP_TYPE_TERMINATE:
            self._close(run, pb.FLOW_STATUS_TERMINATED, _NO_ERROR, reason)
        elif request.stop_type == pb.STOP_TYPE_FAIL:
            self._close(
                run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW, reason
            )
        else:
            self._close(run, pb.FLOW_STATUS_CANCELED, _NO_ERROR, reason)
        self._commit(run)

    def _arm_flow_timeout(self, run: FlowRun, since: float | None = None) -> None:
        seconds = run.start_request.flow_timeout_seconds
        if seconds <= 0 or not run.is_running:
            return
        if since is not None:
            run.attempt_started_at = since
        start = run.attempt_started_at or run.started_at
        delay = max(0.0, start + seconds - time.time())
        self._flow_timeouts[run.run_id] = asyncio.get_running_loop().call_later(
            delay, self._on_flow_timeout, run
        )

    def _on_flow_timeout(self, run: FlowRun) -> None:
        if not run.is_running or self.runs.get(run.flow_id) is not run:
            return
        policy = run.start_request.flow_timeout_policy
        if policy == pb.FLOW_TIMEOUT_POLICY_HANDLER and not run.timeout_handled:
            self._start_timeout_handler(run)
            return
        if policy == pb.FLOW_TIMEOUT_POLICY_CANCEL:
            self._close(run, pb.FLOW_STATUS_CANCELED, _NO_ERROR, "flow timed out")
        else:
            self._close(
                run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_FLOW_TIMEOUT, "flow timed out"
            )
        self._commit(run)

    def _sub_flow_result(self, flow_id: str) -> pb.FlowResult | None:
        child = self.runs.get(flow_id)
        if child is None or child.is_running:
            return None
        return pb.FlowResult(
            flow_status=child.status,
            results=child.results,
            error_type=child.error_type,
            error_message=child.error_message,
        )

    def _start_sub_flows(
        self, run: FlowRun, step: StepExecution, waiting: pb.WaitingCondition
    ) -> list[FlowRun]:
        """Create (not yet launch) the SubFlows a waiting Step asked for."""
        started = []
        for index, condition in enumerate(waiting.sub_flow_conditions):
            child_id = sub_flow_id(run.flow_id, step.step_execution_id, index)
            existing = self.runs.get(child_id)
            policy = condition.options.reuse_policy
            if existing is not None and (
                existing.is_running
                or policy in (pb.SUB_FLOW_REUSE_POLICY_UNSPECIFIED, pb.SUB_FLOW_REUSE_POLICY_ATTACH)
                or (
                    policy == pb.SUB_FLOW_REUSE_POLICY_RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
                    and existing.status == pb.FLOW_STATUS_COMPLETED
                )
            ):
                continue
            options = condition.options
            config = pb.FlowConfig()
            config.CopyFrom(options.flow_config_override)
            if not config.HasField("worker_target"):
                config.worker_target.CopyFrom(run.config.worker_target)
            request = pb.StartFlowRequest(
                flow_id=child_id,
                flow_type=condition.sub_flow_type,
                flow_timeout_seconds=options.flow_timeout_seconds,
                flow_timeout_policy=options.flow_timeout_policy,
                start_step_type=condition.start_step_type,
                step_input=ensure_value(condition.step_input),
                step_options=condition.step_options,
                flow_start_options=pb.FlowStartOptions(
                    flow_start_delay_seconds=options.flow_start_delay_seconds,
                    attributes=options.attributes,
                    flow_config_override=config,
                    timeout_handler_options=options.timeout_handler_options,
                ),
            )
            child, _ = self._create_run(request, parent_flow_id=run.flow_id)
            started.append(child)
        return started

    def _notify_parent(self, run: FlowRun) -> None:
        parent = self.runs.get(run.parent_flow_id) if run.parent_flow_id else None
        if parent is not None and parent.is_running:
            # After the child's close is committed, so the parent never sees an unsaved result.
            asyncio.get_running_loop().call_soon(self._evaluate_waiting, parent)

    def _start_timeout_handler(self, run: FlowRun) -> None:
        """Cancel the running Steps and run ``Flow.handle_timeout`` as a Step of its own."""
        run.timeout_handled = True
        handler = run.start_request.flow_start_options.timeout_handler_options
        for step in list(run.steps.values()):
            self._end_step(run, step)
        options = pb.StepOptions(
            skip_wait_for=True,
            execute_timeout_seconds=handler.method_timeout_seconds,
            heartbeat_timeout_seconds=handler.heartbeat_timeout_seconds,
            execute_retry_policy=handler.retry_policy,
            execute_failure_policy=handler.failure_policy,
            execute_failure_proceed_step_type=handler.failure_proceed_step_type,
            execute_failure_proceed_step_options=handler.failure_proceed_step_options,
            execute_durability_override=handler.durability_override,
            execute_lock_attribute_keys=handler.lock_attribute_keys,
            execute_load_attribute_map_instances=handler.load_attribute_map_instances,
            execute_load_channel_names=handler.load_channel_names,
            execute_load_channel_map_instances=handler.load_channel_map_instances,
        )
        movement = pb.StepMovement(step_type=TIMEOUT_HANDLER_STEP_TYPE, step_options=options)
        step = self._new_step(run, movement, START_FROM, time.time(), has_input=False)
        self._commit(run)
        self._launch(run, step)

    def _close(
        self,
        run: FlowRun,
        status: pb.FlowStatus,
        error_type: pb.FlowErrorType,
        message: str,
    ) -> None:
        if (
            status == pb.FLOW_STATUS_FAILED
            and error_type in _RETRYABLE_FLOW_ERRORS
            and self._retry_run(run, error_type, message)
        ):
            return
        run.status = status
        run.closed_at = time.time()
        run.error_type = error_type
        run.error_message = message
        for step in list(run.steps.values()):
            self._end_step(run, step)
        handle = self._flow_timeouts.pop(run.run_id, None)
        if handle is not None:
            handle.cancel()
        self._locks.forget_run(run.run_id)
        closed = pb.FlowClosedHistoryEvent(
            flow_status=status, results=run.results, error_type=error_type, error_message=message
        )
        self._event(run, flow_closed=closed)
        self._notify_parent(run)

    def _retry_run(self, run: FlowRun, error_type: pb.FlowErrorType, message: str) -> bool:
        """Start the run's next attempt per its Flow retry policy; False when none is left."""
        options = run.start_request.flow_start_options
        if not options.HasField("retry_policy"):
            return False
        policy = options.retry_policy
        if 0 < policy.maximum_attempts <= run.run_attempt:
            return False
        step_policy = pb.RetryPolicy(
            initial_interval_seconds=policy.initial_interval_seconds,
            backoff_coefficient=policy.backoff_coefficient,
            maximum_interval_seconds=policy.maximum_interval_seconds,
        )
        for step in list(run.steps.values()):
            self._end_step(run, step)
        handle = self._flow_timeouts.pop(run.run_id, None)
        if handle is not None:
            handle.cancel()
        self._locks.forget_run(run.run_id)
        closed = pb.FlowClosedHistoryEvent(
            flow_status=pb.FLOW_STATUS_FAILED, error_type=error_type, error_message=message
        )
        self._event(run, flow_closed=closed)
        now = time.time()
        delay = retry_interval(step_policy, run.run_attempt, 0)
        run.run_attempt += 1
        run.attributes.clear()
        run.attribute_indexes.clear()
        run.channels.clear()
        run.step_counts.clear()
        run.results.clear()
        run.graceful_close_pending = False
        run.timeout_handled = False
        request = run.start_request
        apply_attribute_writes(run, options.attributes)
        started = pb.FlowStartedOrContinuedHistoryEvent(
            flow_execution_id=pb.FlowExecutionID(flow_id=run.flow_id, run_id=run.run_id),
            flow_type=run.flow_type,
            flow_config=run.config,
        )
        started.initial_start.start_step_type = request.start_step_type
        self._event(run, flow_started_or_continued=started)
        if request.start_step_type:
            movement = pb.StepMovement(
                step_type=request.start_step_type,
                step_input=ensure_value(request.step_input),
                step_options=request.step_options,
            )
            step = self._new_step(run, movement, START_FROM, now)
            step.retry_at = now + delay
            self._launch_soon(run, step)
        asyncio.get_running_loop().call_soon(self._arm_flow_timeout, run, now + delay)
        return True

    # ------------------------------------------------------------------ Steps

    def _new_step(
        self,
        run: FlowRun,
        movement: pb.StepMovement,
        from_id: str,
        now: float,
        recovery: pb.RecoveryErrorInfo | None = None,
        *,
        has_input: bool = True,
    ) -> StepExecution:
        if not movement.step_type:
            raise errors.invalid_argument("a Step movement has no step_type")
        number = run.step_counts.get(movement.step_type, 0) + 1
        run.step_counts[movement.step_type] = number
        step = StepExecution(
            step_execution_id=f"{movement.step_type}-{number}",
            step_type=movement.step_type,
            from_step_execution_id=from_id,
            input=ensure_value(movement.step_input),
            options=movement.step_options,
            created_at=now,
            recovery_error=recovery,
            phase=StepPhase.EXECUTE if movement.step_options.skip_wait_for else StepPhase.WAIT_FOR,
            has_input=has_input,
        )
        run.steps[step.step_execution_id] = step
        return step

    def _mark_dispatching(self, run: FlowRun, step: StepExecution) -> None:
        """Write the in-flight marker of a Step launched right after the coming commit.

        Only for a Step whose attempt starts at once (no backoff wait, no lock to wait for).
        """
        if (
            step.step_execution_id in run.steps
            and step.phase is not StepPhase.WAITING
            and step.retry_at <= time.time()
            and not self._lock_keys(step)
            and not self._closing
        ):
            marker = InflightRow(
                run.run_id, step.step_execution_id, step.method.value, step.attempt
            )
            self._dispatching.setdefault(run.run_id, []).append(marker)

    def _launch(self, run: FlowRun, step: StepExecution) -> None:
        key = (run.run_id, step.step_execution_id)
        existing = self._drivers.get(key)
        if self._closing or (existing is not None and not existing.done()):
            return
        task = asyncio.get_running_loop().create_task(self._drive(run, step))
        self._drivers[key] = task
        task.add_done_callback(lambda done: self._forget_driver(key, done))

    def _forget_driver(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._drivers.get(key) is task:
            del self._drivers[key]

    def _end_step(self, run: FlowRun, step: StepExecution) -> None:
        run.steps.pop(step.step_execution_id, None)
        key = (run.run_id, step.step_execution_id)
        for handle in self._timer_handles.pop(key, []):
            handle.cancel()
        self._finished_inflight.setdefault(run.run_id, []).append(step.step_execution_id)
        driver = self._drivers.get(key)
        if driver is not None and driver is not asyncio.current_task():
            driver.cancel()
        self._locks.release_holder(run.run_id, step.step_execution_id)

    def _cancel_steps(self, run: FlowRun, step_types: Sequence[str], from_id: str | None) -> None:
        wanted = set(step_types)
        for step in list(run.steps.values()):
            if step.step_type in wanted and (
                from_id is None or step.from_step_execution_id == from_id
            ):
                self._end_step(run, step)

    async def _drive(self, run: FlowRun, step: StepExecution) -> None:
        try:
            while run.is_running and step.step_execution_id in run.steps:
                if step.phase is StepPhase.WAITING or self._closing:
                    return
                delay = step.retry_at - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                    if self._closing:
                        return
                key = (run.run_id, step.step_execution_id)
                if key in self._lost_attempts:
                    self._lost_attempts.discard(key)
                    failure = AttemptFailure(
                        pb.WorkerErrorResponse(
                            detail="the engine stopped while this attempt was in flight",
                            error_type="dex_local_engine.EngineRestarted",
                        ),
                        reached_worker=True,
                    )
                    self._attempt_failed(run, step, failure)
                    continue
                await self._attempt(run, step)
        except asyncio.CancelledError:
            pass
        except Exception as error:
            # An engine bug: fail the Flow visibly rather than leave the Step hanging.
            _log.exception("Step driver for %s/%s failed", run.flow_id, step.step_execution_id)
            if run.is_running:
                self._pending_history.pop(run.run_id, None)
                self._close(
                    run,
                    pb.FLOW_STATUS_FAILED,
                    pb.FLOW_ERROR_TYPE_INTERNAL,
                    f"internal engine error in Step {step.step_execution_id}: {error!r}",
                )
                self._commit(run)

    def _lock_keys(self, step: StepExecution) -> Sequence[str]:
        if step.method is MethodKind.WAIT_FOR:
            return step.options.wait_for_lock_attribute_keys
        return step.options.execute_lock_attribute_keys

    async def _attempt(self, run: FlowRun, step: StepExecution) -> None:
        keys = self._lock_keys(step)
        await self._locks.acquire(run.run_id, keys, step.step_execution_id)
        try:
            method = step.method
            now = time.time()
            if step.first_attempt_at == 0.0:
                step.first_attempt_at = now
            step.method_started_at = now
            request = method_request(run, step, self._sub_flow_result, self.blobs)
            options = step.options
            timeout = float(
                (
                    options.wait_for_timeout_seconds
                    if method is MethodKind.WAIT_FOR
                    else options.execute_timeout_seconds
                )
                or _DEFAULT_METHOD_TIMEOUT
            )
            heartbeat = float(options.heartbeat_timeout_seconds) or None
            problem = oversized_task(request, f"{method.value} of {step.step_execution_id}")
            outcome: TaskOutcome | None = None
            if problem is None:
                marker = InflightRow(run.run_id, step.step_execution_id, method.value, step.attempt)
                if marker in self._premarked:
                    self._premarked.discard(marker)
                else:
                    self._store.mark_inflight(marker)
                # A task no Worker started goes out again under the same attempt; its timeout
                # still runs from the first dispatch, as it does while a pull task waits.
                deadline = self._attempt_deadlines.setdefault(marker, now + timeout)
                outcome = await self._tasks.run(
                    run, request, max(deadline - time.time(), 0.001), heartbeat, step
                )
                if outcome is not None or not run.is_running:
                    self._attempt_deadlines.pop(marker, None)
        finally:
            self._locks.release(run.run_id, keys, step.step_execution_id)
        if problem is None and isinstance(
            outcome, pb.InvokeWaitForMethodResponse | pb.InvokeExecuteMethodResponse
        ):
            problem = malformed_result(outcome) or oversized_result(outcome)
        if problem is not None:
            if run.is_running and step.step_execution_id in run.steps:
                error = pb.WorkerErrorResponse(detail=problem, error_type=TOO_LARGE_ERROR_TYPE)
                self._method_failed(run, step, error)
            return
        if outcome is None or not run.is_running or step.step_execution_id not in run.steps:
            return
        if isinstance(outcome, AttemptFailure):
            self._attempt_failed(run, step, outcome)
        elif isinstance(outcome, pb.InvokeWaitForMethodResponse):
            self._wait_for_completed(run, step, outcome)
        elif isinstance(outcome, pb.InvokeExecuteMethodResponse):
            self._execute_completed(run, step, outcome)

    # ------------------------------------------------------------------ method outcomes

    def _event_context(self, step: StepExecution) -> pb.StepMethodEventContext:
        context = pb.StepMethodEventContext(
            step_execution_id=step.step_execution_id,
            from_step_execution_id=step.from_step_execution_id,
            step_type=step.step_type,
            final_attempt=step.attempt,
        )
        if step.method_started_at:
            context.started_time.FromNanoseconds(int(step.method_started_at * 1e9))
            context.duration.FromNanoseconds(int((time.time() - step.method_started_at) * 1e9))
        return context

    def _event_input(self, step: StepExecution) -> pb.StepMethodEventInput:
        return pb.StepMethodEventInput(step_input=step.input)

    def _reset_method(self, step: StepExecution, phase: StepPhase) -> None:
        step.phase = phase
        step.attempt = 1
        step.first_attempt_at = 0.0
        step.reached_worker = False
        step.retry_at = 0.0
        step.last_heartbeat = None
        step.last_failure = None

    def _wait_for_completed(
        self, run: FlowRun, step: StepExecution, response: pb.InvokeWaitForMethodResponse
    ) -> None:
        apply_method_writes(
            run,
            response.upsert_attributes,
            response.publish_to_channel,
            response.delete_from_channel,
        )
        for kv in response.upsert_step_exe_locals:
            step.locals[kv.key] = ensure_value(kv.value)
        output = pb.StepWaitForCompletedOutput(
            wait_for_condition=response.waiting_condition,
            upsert_attributes=response.upsert_attributes,
            publish_to_channel=response.publish_to_channel,
            record_events=response.record_events,
            upsert_step_execution_locals=response.upsert_step_exe_locals,
            delete_from_channel=response.delete_from_channel,
        )
        self._event(
            run,
            step_wait_for_completed=pb.StepWaitForCompletedEvent(
                input=self._event_input(step), output=output, context=self._event_context(step)
            ),
        )
        self._finished_inflight.setdefault(run.run_id, []).append(step.step_execution_id)
        now = time.time()
        started: list[FlowRun] = []
        if response.HasField("waiting_condition"):
            self._reset_method(step, StepPhase.WAITING)
            start_waiting(step, response.waiting_condition, now)
            started = self._start_sub_flows(run, step, response.waiting_condition)
        else:
            self._reset_method(step, StepPhase.EXECUTE)
        self._evaluate_waiting(run, commit=False)
        if step.phase is StepPhase.EXECUTE:
            self._mark_dispatching(run, step)
        self._commit(run)
        for child in started:
            self._begin_run(child)
        if step.phase is StepPhase.WAITING:
            self._arm_timers(run, step)

    def _execute_completed(
        self, run: FlowRun, step: StepExecution, response: pb.InvokeExecuteMethodResponse
    ) -> None:
        apply_method_writes(
            run,
            response.upsert_attributes,
            response.publish_to_channel,
            response.delete_from_channel,
        )
        output = pb.StepExecuteCompletedOutput(
            step_decision=response.step_decision,
            upsert_attributes=response.upsert_attributes,
            publish_to_channel=response.publish_to_channel,
            record_events=response.record_events,
            upsert_step_execution_locals=response.upsert_step_exe_locals,
            delete_from_channel=response.delete_from_channel,
        )
        self._event(
            run,
            step_execute_completed=pb.StepExecuteCompletedEvent(
                input=self._event_input(step), output=output, context=self._event_context(step)
            ),
        )
        self._end_step(run, step)
        started = self._apply_decision(run, step, response.step_decision)
        self._after_steps_changed(run, started)

    def _after_steps_changed(self, run: FlowRun, started: list[StepExecution]) -> None:
        if run.is_running and run.graceful_close_pending and not run.steps:
            self._close(run, pb.FLOW_STATUS_COMPLETED, _NO_ERROR, "")
        if run.is_running:
            self._evaluate_waiting(run, commit=False)
            for new_step in started:
                self._mark_dispatching(run, new_step)
        self._commit(run)
        if run.is_running:
            for new_step in started:
                if new_step.step_execution_id in run.steps:
                    self._launch(run, new_step)

    def _apply_decision(
        self, run: FlowRun, step: StepExecution, decision: pb.StepDecision
    ) -> list[StepExecution]:
        now = time.time()
        self._cancel_steps(run, decision.cancel_step_types, None)
        self._cancel_steps(run, decision.cancel_sibling_step_types, step.from_step_execution_id)
        close = decision.close_decision
        kind = close.close_decision_type if decision.HasField("close_decision") else 0
        result = pb.StepCompletionOutput(
            completed_step_type=step.step_type,
            completed_step_execution_id=step.step_execution_id,
        )
        if close.HasField("close_input"):
            result.completed_step_output.CopyFrom(ensure_value(close.close_input))
        if kind == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE_ON_CHANNELS_EMPTY:
            if all(not run.channels.get(name) for name in close.conditional_channel_names):
                kind = pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE
            else:
                kind = 0
        if kind == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE:
            run.results.append(result)
            self._close(run, pb.FLOW_STATUS_COMPLETED, _NO_ERROR, "")
            return []
        if kind == pb.CLOSE_DECISION_TYPE_FORCE_FAIL:
            message = value_text(close.close_input) if close.HasField("close_input") else ""
            self._close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW,
                message or f"Step {step.step_execution_id} failed the Flow",
            )
            return []
        if kind == pb.CLOSE_DECISION_TYPE_GRACEFUL_COMPLETE:
            if close.HasField("close_input"):
                run.results.append(result)
            run.graceful_close_pending = True
            return []
        if kind == pb.CLOSE_DECISION_TYPE_DEAD_END:
            return []
        return [
            self._new_step(run, movement, step.step_execution_id, now)
            for movement in decision.next_steps
        ]

    def _attempt_failed(self, run: FlowRun, step: StepExecution, failure: AttemptFailure) -> None:
        method = step.method
        policy = (
            step.options.wait_for_retry_policy
            if method is MethodKind.WAIT_FOR
            else step.options.execute_retry_policy
        )
        step.reached_worker = step.reached_worker or failure.reached_worker
        step.last_failure = failure.error
        self._finished_inflight.setdefault(run.run_id, []).append(step.step_execution_id)
        now = time.time()
        if step.first_attempt_at == 0.0:
            # Not persisted when an in-flight attempt was lost to an engine restart.
            step.first_attempt_at = now
        interval = retry_interval(policy, step.attempt, failure.error.retry_after_seconds)
        total = float(policy.total_duration_seconds or DEFAULT_TOTAL_RETRY_DURATION)
        within_attempts = policy.maximum_attempts <= 0 or step.attempt < policy.maximum_attempts
        within_time = now + interval - step.first_attempt_at <= total
        if within_attempts and within_time:
            step.attempt += 1
            step.retry_at = now + interval
            self._commit(run)
            return
        self._method_failed(run, step, failure.error)

    def _method_failed(
        self, run: FlowRun, step: StepExecution, error: pb.WorkerErrorResponse
    ) -> None:
        failure = pb.StepMethodFailedOutput(
            failure=pb.StepMethodFailure(
                backend_error=error.detail,
                attempt=step.attempt,
                details=pb.ServiceErrorResponse(
                    detail=error.detail,
                    sub_status=pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                    original_worker_error_detail=error.detail,
                    original_worker_error_type=error.error_type,
                    original_worker_error_status=error.grpc_status,
                    original_worker_error_stack_trace=error.stack_trace,
                ),
            )
        )
        context = self._event_context(step)
        context.last_failure_info.CopyFrom(failure.failure)
        progress = (
            ATTEMPT_PROGRESS_NOT_COMPLETED if step.reached_worker else ATTEMPT_PROGRESS_NOT_STARTED
        )
        detail = f"{error.detail} (attempt_progress: {progress})"
        if step.method is MethodKind.WAIT_FOR:
            self._event(
                run,
                step_wait_for_failed=pb.StepWaitForFailedEvent(
                    input=self._event_input(step), output=failure, context=context
                ),
            )
            if (
                step.options.wait_for_failure_policy
                == pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE
            ):
                step.wait_for_failed = True
                self._reset_method(step, StepPhase.EXECUTE)
                self._commit(run)
                return
            self._close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_WORKER_API_FAIL,
                f"Step {step.step_execution_id} wait_for failed: {detail}",
            )
            self._commit(run)
            return
        self._event(
            run,
            step_execute_failed=pb.StepExecuteFailedEvent(
                input=self._event_input(step), output=failure, context=context
            ),
        )
        options = step.options
        self._end_step(run, step)
        started: list[StepExecution] = []
        if (
            options.execute_failure_policy
            == pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP
        ):
            movement = pb.StepMovement(
                step_type=options.execute_failure_proceed_step_type,
                step_input=step.input,
                step_options=options.execute_failure_proceed_step_options,
            )
            recovery = pb.RecoveryErrorInfo(detail=detail, error_type=error.error_type)
            started.append(
                self._new_step(run, movement, step.step_execution_id, time.time(), recovery)
            )
        else:
            self._close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_WORKER_API_FAIL,
                f"Step {step.step_execution_id} execute failed: {detail}",
            )
        self._after_steps_changed(run, started)

    # ------------------------------------------------------------------ conditions

    def _evaluate_waiting(self, run: FlowRun, *, commit: bool = True) -> None:
        """Move every waiting Step whose conditions now hold to execute."""
        if not run.is_running:
            return
        now = time.time()
        ready = []
        for step in sorted(run.steps.values(), key=lambda s: s.created_at):
            if step.phase is StepPhase.WAITING and evaluate_step(
                run, step, now, self._sub_flow_result
            ):
                step.phase = StepPhase.EXECUTE
                ready.append(step)
        if ready and commit:
            self._commit(run)
        for step in ready:
            for handle in self._timer_handles.pop((run.run_id, step.step_execution_id), []):
                handle.cancel()
            self._launch_soon(run, step)

    def _launch_soon(self, run: FlowRun, step: StepExecution) -> None:
        # The Step becomes runnable only after the caller's commit.
        asyncio.get_running_loop().call_soon(self._launch_if_active, run, step)

    def _launch_if_active(self, run: FlowRun, step: StepExecution) -> None:
        if run.is_running and run.steps.get(step.step_execution_id) is step:
            self._launch(run, step)

    def _arm_timers(self, run: FlowRun, step: StepExecution) -> None:
        key = (run.run_id, step.step_execution_id)
        for handle in self._timer_handles.pop(key, []):
            handle.cancel()
        loop = asyncio.get_running_loop()
        handles = [
            loop.call_later(max(0.0, state.fire_at - time.time()), self._evaluate_waiting, run)
            for state in step.timers
            if not state.completed
        ]
        self._timer_handles[key] = handles

    # ------------------------------------------------------------------ client operations

    def publish(self, request: pb.PublishToChannelRequest) -> None:
        """Publish external Channel messages."""
        run = self.get_running(request.flow_id, request.run_id)
        refuse_oversized(oversized_values(messages=request.messages))
        published = publish(run, request.messages)
        self._event(
            run, channel_external_publish=pb.ChannelExternalPublishEvent(messages=published)
        )
        self._evaluate_waiting(run, commit=False)
        self._commit(run)

    def delete_message(self, request: pb.DeleteChannelMessageRequest) -> None:
        """Delete one pending Channel message."""
        run = self.get_running(request.flow_id, request.run_id)
        deletion = pb.ChannelMessageDeletion(
            channel_name=request.channel_name, message_id=request.message_id
        )
        delete_messages(run, [deletion], strict=True)
        self._event(run, channel_external_delete=pb.ChannelExternalDeleteEvent(messages=[deletion]))
        self._commit(run)

    def set_attributes(self, request: pb.SetAttributesRequest) -> None:
        """Write Attributes from a client."""
        run = self.get_running(request.flow_id, request.run_id)
        refuse_oversized(oversized_values(attributes=request.attributes))
        apply_attribute_writes(run, request.attributes)
        self._event(
            run,
            rpc_execution_completed=pb.RpcExecutionCompletedEvent(
                upsert_attributes=request.attributes, is_set_attribute_api=True
            ),
        )
        self._commit(run)

    def skip_timer(self, request: pb.SkipTimerRequest) -> None:
        """Fire a waiting Step's Timer now."""
        run = self.get_running(request.flow_id, request.run_id)
        step = run.steps.get(request.step_execution_id)
        if step is None or step.waiting is None or step.phase is not StepPhase.WAITING:
            raise errors.failed_precondition(
                f"Step execution {request.step_execution_id!r} is not waiting on Timers"
            )
        timers = step.waiting.timer_conditions
        if request.timer_condition_id:
            indexes = [
                i for i, t in enumerate(timers) if t.condition_id == request.timer_condition_id
            ]
        else:
            indexes = [request.timer_condition_index]
        if not indexes or not 0 <= indexes[0] < len(timers):
            raise errors.invalid_argument(
                f"Step execution {request.step_execution_id!r} has no such Timer"
            )
        step.timers[indexes[0]].skipped = True
        self._evaluate_waiting(run, commit=False)
        self._commit(run)

    def update_config(self, request: pb.UpdateFlowConfigRequest) -> None:
        """Merge the set fields of a FlowConfig into a running Flow."""
        run = self.get_running(request.flow_id, request.run_id)
        new = request.flow_config
        for name in (
            "active_step_search_mode",
            "continue_as_new_threshold",
            "continue_as_new_page_size_in_bytes",
            "step_durability",
            "worker_target",
            "attribute_store_names",
        ):
            if new.HasField(name):
                field = getattr(new, name)
                if isinstance(field, int):
                    setattr(run.config, name, field)
                else:
                    getattr(run.config, name).CopyFrom(field)
        self._commit(run)

    async def invoke_rpc(self, request: pb.InvokeRPCRequest) -> pb.InvokeRPCResponse:
        """Run an RPC on a Worker and apply its writes and decisions atomically."""
        if not request.rpc_name:
            raise errors.invalid_argument("InvokeRPC: rpc_name is required")
        keys = list(request.lock_attribute_keys)
        run = self.get_run(request.flow_id, request.run_id)
        refuse_oversized(oversized_values(others=[("the RPC input", request.input)]))
        # A non-transactional RPC without locks may read a closed run if it changes nothing.
        if not run.is_running and (request.is_transactional or keys):
            raise errors.flow_not_active(request.flow_id)
        holder = f"rpc:{uuid.uuid4()}"
        held = self._locks.try_acquire(run.run_id, keys, holder)
        if held:
            raise errors.rpc_lock_conflict(held)
        try:
            now = time.time()
            worker_request = rpc_request(run, request, self.blobs)
            timeout = float(request.timeout_seconds or _DEFAULT_RPC_TIMEOUT)
            deadline = now + timeout
            while True:
                remaining = deadline - time.time()
                if remaining <= 0:
                    raise errors.EngineError(
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        pb.ERROR_SUB_STATUS_UNCATEGORIZED,
                        f"RPC {request.rpc_name!r} timed out after {timeout:g}s waiting for a Worker",
                    )
                outcome = await self._tasks.run(run, worker_request, remaining, None, None)
                if outcome is not None:
                    break
        finally:
            self._locks.release(run.run_id, keys, holder)
        if isinstance(outcome, AttemptFailure):
            if outcome.error.error_type.startswith("dex_local_engine."):
                raise errors.worker_unavailable(outcome.error.detail)
            raise errors.worker_api_error(outcome.error)
        assert isinstance(outcome, pb.InvokeWorkerRPCResponse)
        problem = oversized_values(
            attributes=outcome.upsert_attributes,
            messages=outcome.publish_to_channel,
            decision=outcome.step_decision,
            others=[("the RPC output", outcome.output)],
        )
        problem = problem or malformed_writes(
            outcome.upsert_attributes, outcome.publish_to_channel, outcome.step_decision
        )
        if problem is not None:
            raise errors.failed_precondition(f"RPC {request.rpc_name!r} result refused: {problem}")
        if not run.is_running:
            if has_effects(outcome):
                raise errors.flow_not_active(run.flow_id)
            return pb.InvokeRPCResponse(output=ensure_value(outcome.output))
        output = ensure_value(outcome.output)
        changed = has_effects(outcome)
        if not changed and not (request.is_transactional or keys):
            # Dex serves such an RPC as a query: nothing is recorded, so reads do not grow history.
            return pb.InvokeRPCResponse(output=output)
        if request.is_transactional or keys:
            # Checked before any write: a missing message fails the whole RPC, applying nothing.
            require_pending(run, outcome.delete_from_channel)
        apply_method_writes(
            run, outcome.upsert_attributes, outcome.publish_to_channel, outcome.delete_from_channel
        )
        decision = outcome.step_decision
        self._cancel_steps(run, decision.cancel_step_types, None)
        from_id = f"{RPC_FROM_PREFIX}{request.rpc_name}"
        started = [self._new_step(run, m, from_id, time.time()) for m in decision.next_steps]
        self._event(
            run,
            rpc_execution_completed=pb.RpcExecutionCompletedEvent(
                rpc_name=request.rpc_name,
                input=ensure_value(request.input),
                # The output of a transactional RPC that changed nothing is the caller's alone.
                output=output if changed else None,
                step_decision=decision,
                upsert_attributes=outcome.upsert_attributes,
                record_events=outcome.record_events,
                publish_to_channel=outcome.publish_to_channel,
                delete_from_channel=outcome.delete_from_channel,
            ),
        )
        self._after_steps_changed(run, started)
        return pb.InvokeRPCResponse(output=output)

"""Flow runs from start to close: ID reuse, StopFlow, Flow timeouts, Flow retry policies.

``from_step_execution_id`` is ``__start__`` for the start Step (and the Flow timeout handler). A
Flow closes only by a close decision, a Flow timeout or StopFlow; a run whose Steps all ended
(``dead_end``) keeps running until an RPC adds work. A run that fails with a retryable error
(a failing decision, a failed Worker call, a Flow timeout) starts its next run attempt when its
Flow retry policy allows one.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.attribute_locks import AttributeLocks
from dex_local_engine.blob_values import BlobStore
from dex_local_engine.closed_results import FAIL_BY_CLIENT_REASON, flow_timeout_message
from dex_local_engine.flow_runs import FlowRuns
from dex_local_engine.flow_state import START_FROM, FlowRun, StepExecution
from dex_local_engine.flow_writes import apply_attribute_writes
from dex_local_engine.result_checks import refuse_oversized
from dex_local_engine.retry_policy import retry_interval
from dex_local_engine.run_journal import RunJournal
from dex_local_engine.step_scheduler import NO_ERROR, StepScheduler
from dex_local_engine.value_limits import oversized_values
from dex_local_engine.wire_values import ensure_value

__all__ = [
    "DEFAULT_WORKER_ADDRESS",
    "TIMEOUT_HANDLER_STEP_TYPE",
    "RunLifecycle",
    "timeout_handler_movement",
]

DEFAULT_WORKER_ADDRESS = "127.0.0.1:8803"
"""Where Flows started without a worker target are dispatched: the SDK's default Worker listener."""

TIMEOUT_HANDLER_STEP_TYPE = "sys:timeout_handler"
"""The Step type under which Workers run ``Flow.handle_timeout``."""

_RETRYABLE_FLOW_ERRORS = frozenset(
    {
        pb.FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW,
        pb.FLOW_ERROR_TYPE_WORKER_API_FAIL,
        pb.FLOW_ERROR_TYPE_FLOW_TIMEOUT,
    }
)


class RunLifecycle:
    """Starts, stops, times out, retries and closes runs.

    Example::

        lifecycle = RunLifecycle(journal, runs, steps, locks, blobs, DEFAULT_WORKER_ADDRESS)
        run_id = lifecycle.start_flow(request)

    Raises (from operations): :class:`~dex_local_engine.errors.EngineError`.
    """

    def __init__(
        self,
        journal: RunJournal,
        runs: FlowRuns,
        steps: StepScheduler,
        locks: AttributeLocks,
        blobs: BlobStore,
        default_worker_address: str = DEFAULT_WORKER_ADDRESS,
    ) -> None:
        self._journal = journal
        self._blobs = blobs
        self._runs = runs
        self._steps = steps
        self._locks = locks
        self._default_worker_address = default_worker_address
        self._flow_timeouts: dict[str, asyncio.TimerHandle] = {}

    def resume(self, run: FlowRun) -> None:
        """Re-arm the Flow timeout of a run loaded from the store."""
        self._arm_flow_timeout(run)

    def stop(self) -> None:
        """Cancel every Flow timeout (the engine is stopping)."""
        for handle in self._flow_timeouts.values():
            handle.cancel()

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
        existing = self._runs.find(request.flow_id)
        if existing is not None:
            reused = self._check_reuse(existing, request)
            if reused is not None:
                return reused
        self._blobs.intern(request)
        run, _ = self.create_run(request)
        self.begin_run(run)
        return run.run_id

    def create_run(
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
        self._journal.event(run, flow_started_or_continued=started)
        step: StepExecution | None = None
        if request.start_step_type:
            # A Flow without a start Step waits, like a dead end, until an RPC adds work.
            step = self._steps.new_step(run, _start_movement(request), START_FROM, now)
            if options.flow_start_delay_seconds > 0:
                step.retry_at = now + options.flow_start_delay_seconds
        self._runs.add(run)
        self._journal.mark_new(run)
        return run, step

    def begin_run(self, run: FlowRun) -> None:
        """Persist a run made by :meth:`create_run` and start its Steps and Flow timer."""
        self._journal.commit(run)
        self._arm_flow_timeout(run)
        for step in list(run.steps.values()):
            self._steps.launch(run, step)

    def _check_reuse(self, existing: FlowRun, request: pb.StartFlowRequest) -> str | None:
        options = request.flow_start_options
        policy = options.id_reuse_policy
        if existing.is_running and request.request_id and request.request_id == existing.request_id:
            # The same start request again (a retried call): Dex answers with the run it started.
            return existing.run_id
        if existing.is_running:
            if policy == pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING:
                self.close(existing, pb.FLOW_STATUS_TERMINATED, NO_ERROR, "terminated by a new run")
                self._journal.commit(existing)
                return None
            if options.flow_already_started_options.ignore_already_started_error:
                return existing.run_id
            raise errors.flow_already_started(
                request.flow_id, f"flow {request.flow_id!r} is already running"
            )
        # An unspecified policy is ALLOW_IF_NO_RUNNING, as on Dex Server.
        allowed = policy in (
            pb.ID_REUSE_POLICY_UNSPECIFIED,
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
        run = self._runs.get_running(request.flow_id, request.run_id)
        if request.stop_type == pb.STOP_TYPE_TERMINATE:
            # Dex's history keeps a termination's reason; its result reports none.
            self.close(run, pb.FLOW_STATUS_TERMINATED, NO_ERROR, request.reason)
        elif request.stop_type == pb.STOP_TYPE_FAIL:
            self.close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW,
                request.reason or FAIL_BY_CLIENT_REASON,
            )
        else:
            # CANCEL, and an unspecified stop type as on Dex: a cancellation carries no reason.
            self.close(run, pb.FLOW_STATUS_CANCELED, NO_ERROR, "")
        self._journal.commit(run)

    # ------------------------------------------------------------------ Flow timeouts

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

    def _cancel_flow_timeout(self, run: FlowRun) -> None:
        handle = self._flow_timeouts.pop(run.run_id, None)
        if handle is not None:
            handle.cancel()

    def _on_flow_timeout(self, run: FlowRun) -> None:
        if not run.is_running or not self._runs.is_latest(run):
            return
        policy = run.start_request.flow_timeout_policy
        if policy == pb.FLOW_TIMEOUT_POLICY_HANDLER and not run.timeout_handled:
            self._start_timeout_handler(run)
            return
        if policy == pb.FLOW_TIMEOUT_POLICY_CANCEL:
            self.close(run, pb.FLOW_STATUS_CANCELED, NO_ERROR, "")
        else:
            message = flow_timeout_message(run.start_request.flow_timeout_seconds)
            self.close(run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_FLOW_TIMEOUT, message)
        self._journal.commit(run)

    def _start_timeout_handler(self, run: FlowRun) -> None:
        """Run ``Flow.handle_timeout`` as a Step of its own, beside the running Steps.

        As on Dex, the handler does not stop the other Steps: its decision does what any Step's
        decision does (``force_fail``, ``force_complete`` or canceling Steps end them).
        """
        run.timeout_handled = True
        step = self._steps.new_step(
            run, timeout_handler_movement(run), START_FROM, time.time(), has_input=False
        )
        self._journal.commit(run)
        self._steps.launch(run, step)

    # ------------------------------------------------------------------ close / retry

    def close(
        self,
        run: FlowRun,
        status: pb.FlowStatus,
        error_type: pb.FlowErrorType,
        message: str,
    ) -> None:
        """Close ``run`` (not yet committed), or start its next attempt per its retry policy."""
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
        self._end_attempt(run)
        closed = pb.FlowClosedHistoryEvent(
            flow_status=status, results=run.results, error_type=error_type, error_message=message
        )
        self._journal.event(run, flow_closed=closed)
        self._notify_parent(run)

    def _end_attempt(self, run: FlowRun) -> None:
        self._steps.end_all_steps(run)
        self._cancel_flow_timeout(run)
        self._locks.forget_run(run.run_id)

    def _notify_parent(self, run: FlowRun) -> None:
        parent = self._runs.find(run.parent_flow_id) if run.parent_flow_id else None
        if parent is not None and parent.is_running:
            # After the child's close is committed, so the parent never sees an unsaved result.
            asyncio.get_running_loop().call_soon(self._steps.evaluate_waiting, parent)

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
        self._end_attempt(run)
        closed = pb.FlowClosedHistoryEvent(
            flow_status=pb.FLOW_STATUS_FAILED, error_type=error_type, error_message=message
        )
        self._journal.event(run, flow_closed=closed)
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
        self._journal.event(run, flow_started_or_continued=started)
        if request.start_step_type:
            step = self._steps.new_step(run, _start_movement(request), START_FROM, now)
            step.retry_at = now + delay
            self._steps.launch_soon(run, step)
        asyncio.get_running_loop().call_soon(self._arm_flow_timeout, run, now + delay)
        return True


def _start_movement(request: pb.StartFlowRequest) -> pb.StepMovement:
    """The movement to the start Step that ``request`` names (a run's first Step)."""
    return pb.StepMovement(
        step_type=request.start_step_type,
        step_input=ensure_value(request.step_input),
        step_options=request.step_options,
    )


def timeout_handler_movement(run: FlowRun) -> pb.StepMovement:
    """The Step movement that runs ``Flow.handle_timeout`` of ``run`` with its handler options.

    Example::

        step = steps.new_step(run, timeout_handler_movement(run), START_FROM, now, has_input=False)
    """
    handler = run.start_request.flow_start_options.timeout_handler_options
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
    return pb.StepMovement(step_type=TIMEOUT_HANDLER_STEP_TYPE, step_options=options)

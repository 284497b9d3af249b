"""Step executions: launching attempts, applying their outcomes, conditions and Timers.

Each Step execution that can run has a driver, an asyncio task that hands attempts to the
:class:`~dex_local_engine.task_runner.TaskRunner` and applies the Worker's result when it arrives.
Every outcome is a synchronous transition that ends in a :class:`~dex_local_engine.run_journal.
RunJournal` commit, and a Step that became runnable is launched only after that commit.

Semantics where the SDK leaves the server's choice open:

- Step execution IDs are ``<StepType>-<n>`` per Step type per run.
- Attempts: a task no Worker started is dispatched again with the same attempt number; a lost
  Worker, a timeout or a handler error fails the attempt and the retry policy decides (defaults:
  1 s initial interval, coefficient 2, 100 s maximum, unlimited attempts within 4 hours). Method
  timeout defaults to 2 hours; a heartbeat timeout applies only when the Step sets one, from when
  a Worker takes the task.
- Attempt progress: SDK 1.23.0's ``RecoveryErrorInfo`` has no ``attempt_progress`` field, so the
  recovery error's ``detail`` ends with ``(attempt_progress: NOT_STARTED)`` when no attempt of
  the method produced output on a Worker (a heartbeat counts), else
  ``(attempt_progress: NOT_COMPLETED)``.
- Restart: an attempt whose in-flight marker survives an engine crash may have run, so it fails
  as lost (NOT_COMPLETED) and is retried per policy; Timers and waits resume from the snapshot.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.attribute_locks import AttributeLocks
from dex_local_engine.blob_values import BlobStore
from dex_local_engine.conditions import evaluate_step, start_waiting
from dex_local_engine.flow_state import FlowRun, MethodKind, StepExecution, StepPhase
from dex_local_engine.flow_writes import apply_method_writes
from dex_local_engine.result_checks import (
    MALFORMED_RESULT_ERROR_TYPE,
    malformed_result,
    oversized_result,
)
from dex_local_engine.retry_policy import DEFAULT_TOTAL_RETRY_DURATION, retry_interval
from dex_local_engine.run_journal import RunJournal
from dex_local_engine.step_dispatch_order import RESUMED_WORK_STARTED_AT
from dex_local_engine.step_failures import flow_failure_message, step_method_failure
from dex_local_engine.store import InflightRow
from dex_local_engine.task_requests import method_request
from dex_local_engine.task_runner import AttemptFailure, TaskOutcome, TaskRunner
from dex_local_engine.value_limits import TOO_LARGE_ERROR_TYPE, oversized_task
from dex_local_engine.wire_values import ensure_value, value_text

__all__ = [
    "ATTEMPT_PROGRESS_NOT_COMPLETED",
    "ATTEMPT_PROGRESS_NOT_STARTED",
    "NO_ERROR",
    "RunCloser",
    "StepScheduler",
    "SubFlowPort",
]

_log = logging.getLogger(__name__)

_DEFAULT_METHOD_TIMEOUT = 2 * 3600.0
NO_ERROR = pb.FLOW_ERROR_TYPE_UNSPECIFIED
"""The error type of a run that did not fail."""
ATTEMPT_PROGRESS_NOT_STARTED = "NOT_STARTED"
ATTEMPT_PROGRESS_NOT_COMPLETED = "NOT_COMPLETED"


class RunCloser(Protocol):
    """Closes a run (or starts its next attempt under its Flow retry policy)."""

    def close(
        self, run: FlowRun, status: pb.FlowStatus, error_type: pb.FlowErrorType, message: str
    ) -> None: ...


class SubFlowPort(Protocol):
    """The SubFlows a waiting Step asked for."""

    def result(self, flow_id: str) -> pb.FlowResult | None:
        """The SubFlow's result once it closed, else None."""
        ...

    def start(
        self, run: FlowRun, step: StepExecution, waiting: pb.WaitingCondition
    ) -> list[FlowRun]:
        """Create (not yet launch) the SubFlows of ``waiting``."""
        ...

    def begin(self, child: FlowRun) -> None:
        """Persist and launch a SubFlow made by :meth:`start`."""
        ...


class StepScheduler:
    """Drives every Step execution of every running run.

    Example::

        steps = StepScheduler(journal, locks, tasks, blobs)
        steps.connect(lifecycle, sub_flows)
        step = steps.new_step(run, movement, START_FROM, time.time())
        journal.commit(run)
        steps.launch(run, step)
    """

    def __init__(
        self, journal: RunJournal, locks: AttributeLocks, tasks: TaskRunner, blobs: BlobStore
    ) -> None:
        self._journal = journal
        self._locks = locks
        self._tasks = tasks
        self._blobs = blobs
        self._closer: RunCloser | None = None
        self._sub_flows: SubFlowPort | None = None
        self._drivers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._timer_handles: dict[tuple[str, str], list[asyncio.TimerHandle]] = {}
        self._attempt_deadlines: dict[InflightRow, float] = {}
        """When each in-flight attempt times out, kept across redispatches of an unstarted task."""
        self._lost_attempts: set[tuple[str, str]] = set()
        self.closing = False
        """Set by :meth:`stop`: no new attempt starts."""

    def connect(self, closer: RunCloser, sub_flows: SubFlowPort) -> None:
        """Wire the run lifecycle and the SubFlows (they need this scheduler to be built first)."""
        self._closer = closer
        self._sub_flows = sub_flows

    @property
    def closer(self) -> RunCloser:
        """The run lifecycle that closes runs."""
        assert self._closer is not None, "StepScheduler.connect was not called"
        return self._closer

    @property
    def sub_flows(self) -> SubFlowPort:
        """The SubFlows of waiting Steps."""
        assert self._sub_flows is not None, "StepScheduler.connect was not called"
        return self._sub_flows

    # ------------------------------------------------------------------ lifecycle

    def note_lost_attempt(self, run: FlowRun, step: StepExecution) -> None:
        """The in-flight attempt of ``step`` was lost to an engine restart: it fails when driven."""
        self._lost_attempts.add((run.run_id, step.step_execution_id))

    def resume(self, run: FlowRun) -> None:
        """Re-arm the Timers of a run loaded from the store and launch its runnable Steps."""
        for step in list(run.steps.values()):
            if step.phase is StepPhase.WAITING:
                self.arm_timers(run, step)
            else:
                self.launch(run, step)
        self.evaluate_waiting(run)

    async def stop(self, drain_seconds: float) -> None:
        """Stop every driver and Timer; attempts on Workers get ``drain_seconds`` to finish."""
        self.closing = True
        for handles in self._timer_handles.values():
            for handle in handles:
                handle.cancel()
        tasks = [task for task in self._drivers.values() if not task.done()]
        if tasks and drain_seconds > 0:
            await asyncio.wait(tasks, timeout=drain_seconds)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ Steps

    def new_step(
        self,
        run: FlowRun,
        movement: pb.StepMovement,
        from_id: str,
        now: float,
        recovery: pb.RecoveryErrorInfo | None = None,
        *,
        has_input: bool = True,
        work_started_at: float | None = None,
    ) -> StepExecution:
        """Add the Step execution ``movement`` asks for to ``run`` (not yet committed).

        ``work_started_at``: the moving Step's, when a Step moves to it; else new work, ``now``.
        """
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
            work_started_at=now if work_started_at is None else work_started_at,
        )
        run.steps[step.step_execution_id] = step
        return step

    def launch(self, run: FlowRun, step: StepExecution) -> None:
        """Start the driver of ``step`` unless it has one."""
        key = (run.run_id, step.step_execution_id)
        existing = self._drivers.get(key)
        if self.closing or (existing is not None and not existing.done()):
            return
        task = asyncio.get_running_loop().create_task(self._drive(run, step))
        self._drivers[key] = task
        task.add_done_callback(lambda done: self._forget_driver(key, done))

    def launch_soon(self, run: FlowRun, step: StepExecution) -> None:
        """Launch ``step`` after the caller's commit, if it is still a Step of a running run."""
        asyncio.get_running_loop().call_soon(self._launch_if_active, run, step)

    def _launch_if_active(self, run: FlowRun, step: StepExecution) -> None:
        if run.is_running and run.steps.get(step.step_execution_id) is step:
            self.launch(run, step)

    def _forget_driver(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._drivers.get(key) is task:
            del self._drivers[key]

    def end_step(self, run: FlowRun, step: StepExecution) -> None:
        """Remove ``step`` from ``run``: its Timers, driver, locks and in-flight marker go."""
        run.steps.pop(step.step_execution_id, None)
        key = (run.run_id, step.step_execution_id)
        for handle in self._timer_handles.pop(key, []):
            handle.cancel()
        self._journal.finish_inflight(run, step.step_execution_id)
        driver = self._drivers.get(key)
        if driver is not None and driver is not asyncio.current_task():
            driver.cancel()
        self._locks.release_holder(run.run_id, step.step_execution_id)

    def end_all_steps(self, run: FlowRun) -> None:
        """End every Step execution of ``run``."""
        for step in list(run.steps.values()):
            self.end_step(run, step)

    def cancel_steps(self, run: FlowRun, step_types: Sequence[str], from_id: str | None) -> None:
        """End the Steps of ``step_types`` (only those moved to from ``from_id``, when given)."""
        wanted = set(step_types)
        for step in list(run.steps.values()):
            if step.step_type in wanted and (
                from_id is None or step.from_step_execution_id == from_id
            ):
                self.end_step(run, step)

    def after_steps_changed(
        self, run: FlowRun, started: list[StepExecution], *, by_step: bool = False
    ) -> None:
        """Close a gracefully ending run, move ready Steps on, commit, launch ``started``.

        ``by_step``: a Step's method caused the change (not a client or an RPC), so waits it ends
        continue the run's work (see :meth:`evaluate_waiting`).
        """
        if run.is_running and run.graceful_close_pending and not run.steps:
            self.closer.close(run, pb.FLOW_STATUS_COMPLETED, NO_ERROR, "")
        if run.is_running:
            self.evaluate_waiting(run, commit=False, by_step=by_step)
        self._journal.commit(run)
        if run.is_running:
            for new_step in started:
                if new_step.step_execution_id in run.steps:
                    self.launch(run, new_step)

    # ------------------------------------------------------------------ attempts

    async def _drive(self, run: FlowRun, step: StepExecution) -> None:
        try:
            while run.is_running and step.step_execution_id in run.steps:
                if step.phase is StepPhase.WAITING or self.closing:
                    return
                delay = step.retry_at - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                    if self.closing:
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
                self._journal.drop_events(run)
                self.closer.close(
                    run,
                    pb.FLOW_STATUS_FAILED,
                    pb.FLOW_ERROR_TYPE_INTERNAL,
                    f"internal engine error in Step {step.step_execution_id}: {error!r}",
                )
                self._journal.commit(run)

    async def _attempt(self, run: FlowRun, step: StepExecution) -> None:
        keys = _lock_keys(step)
        await self._locks.acquire(run.run_id, keys, step.step_execution_id)
        try:
            method = step.method
            now = time.time()
            if step.first_attempt_at == 0.0:
                step.first_attempt_at = now
            step.method_started_at = now
            task = method_request(run, step, self.sub_flows.result, self._blobs)
            request = task.request
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
            problem = oversized_task(task.size_bytes, f"{method.value} of {step.step_execution_id}")
            error_type = TOO_LARGE_ERROR_TYPE
            outcome: TaskOutcome | None = None
            if problem is None:
                marker = InflightRow(run.run_id, step.step_execution_id, method.value, step.attempt)
                # A task no Worker started goes out again under the same attempt; its timeout
                # still runs from the first dispatch, as it does while a pull task waits.
                deadline = self._attempt_deadlines.setdefault(marker, now + timeout)
                outcome = await self._tasks.run(
                    run,
                    request,
                    max(deadline - time.time(), 0.001),
                    heartbeat,
                    step,
                    _InflightMarker(self._journal, marker),
                )
                if outcome is not None or not run.is_running:
                    self._attempt_deadlines.pop(marker, None)
        finally:
            self._locks.release(run.run_id, keys, step.step_execution_id)
        if problem is None and isinstance(
            outcome, pb.InvokeWaitForMethodResponse | pb.InvokeExecuteMethodResponse
        ):
            malformed = malformed_result(outcome, self._blobs.holds)
            problem = malformed or oversized_result(outcome)
            error_type = TOO_LARGE_ERROR_TYPE if malformed is None else MALFORMED_RESULT_ERROR_TYPE
        if problem is not None:
            if run.is_running and step.step_execution_id in run.steps:
                error = pb.WorkerErrorResponse(detail=problem, error_type=error_type)
                self._method_failed(run, step, error)
            return
        if outcome is None or not run.is_running or step.step_execution_id not in run.steps:
            return
        if isinstance(outcome, AttemptFailure):
            if outcome.error.error_type == MALFORMED_RESULT_ERROR_TYPE:
                self._method_failed(run, step, outcome.error)  # a retry would answer the same
            else:
                self._attempt_failed(run, step, outcome)
        elif isinstance(outcome, pb.InvokeWaitForMethodResponse):
            self._wait_for_completed(run, step, outcome)
        elif isinstance(outcome, pb.InvokeExecuteMethodResponse):
            self._execute_completed(run, step, outcome)

    # ------------------------------------------------------------------ method outcomes

    def _wait_for_completed(
        self, run: FlowRun, step: StepExecution, response: pb.InvokeWaitForMethodResponse
    ) -> None:
        self._blobs.intern(response)
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
        self._journal.event(
            run,
            step_wait_for_completed=pb.StepWaitForCompletedEvent(
                input=_event_input(step), output=output, context=_event_context(step)
            ),
        )
        self._journal.finish_inflight(run, step.step_execution_id)
        now = time.time()
        started: list[FlowRun] = []
        if response.HasField("waiting_condition"):
            _reset_method(step, StepPhase.WAITING)
            start_waiting(step, response.waiting_condition, now)
            started = self.sub_flows.start(run, step, response.waiting_condition)
        else:
            _reset_method(step, StepPhase.EXECUTE)
        self.evaluate_waiting(run, commit=False, by_step=True)
        self._journal.commit(run)
        for child in started:
            self.sub_flows.begin(child)
        if step.phase is StepPhase.WAITING:
            self.arm_timers(run, step)

    def _execute_completed(
        self, run: FlowRun, step: StepExecution, response: pb.InvokeExecuteMethodResponse
    ) -> None:
        self._blobs.intern(response)
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
        self._journal.event(
            run,
            step_execute_completed=pb.StepExecuteCompletedEvent(
                input=_event_input(step), output=output, context=_event_context(step)
            ),
        )
        self.end_step(run, step)
        started = self.apply_decision(run, step, response.step_decision)
        self.after_steps_changed(run, started, by_step=True)

    def apply_decision(
        self, run: FlowRun, step: StepExecution, decision: pb.StepDecision
    ) -> list[StepExecution]:
        """Apply ``step``'s decision to ``run``: cancels, close decisions, next Steps (not yet
        committed or launched); returns the Steps it started."""
        now = time.time()
        self.cancel_steps(run, decision.cancel_step_types, None)
        self.cancel_steps(run, decision.cancel_sibling_step_types, step.from_step_execution_id)
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
            self.closer.close(run, pb.FLOW_STATUS_COMPLETED, NO_ERROR, "")
            return []
        if kind == pb.CLOSE_DECISION_TYPE_FORCE_FAIL:
            close_input = self._blobs.resolve(close.close_input)
            message = value_text(close_input) if close.HasField("close_input") else ""
            self.closer.close(
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
            self.new_step(
                run, movement, step.step_execution_id, now, work_started_at=step.work_started_at
            )
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
        self._journal.finish_inflight(run, step.step_execution_id)
        now = time.time()
        if step.first_attempt_at == 0.0:
            # Not persisted when an in-flight attempt was lost to an engine restart.
            step.first_attempt_at = now
        interval = retry_interval(policy, step.attempt, failure.error.retry_after_seconds)
        total = float(policy.total_duration_seconds or DEFAULT_TOTAL_RETRY_DURATION)
        within_attempts = policy.maximum_attempts <= 0 or step.attempt < policy.maximum_attempts
        within_time = now + interval - step.first_attempt_at <= total
        if within_attempts and within_time:
            self._record_retry(run, step, failure.error)
            step.attempt += 1
            step.retry_at = now + interval
            self._journal.commit(run)
            return
        self._method_failed(run, step, failure.error)

    def _record_retry(
        self, run: FlowRun, step: StepExecution, error: pb.WorkerErrorResponse
    ) -> None:
        """Record the failed attempt of a method that will be retried, so history shows why."""
        context = _event_context(step)
        context.last_failure_info.CopyFrom(_method_failure(step, error))
        pending = pb.StepMethodPendingEvent(
            context=context, phase=pb.PENDING_STEP_METHOD_PHASE_SCHEDULED
        )
        if step.method is MethodKind.WAIT_FOR:
            self._journal.event(run, step_wait_for_pending=pending)
        else:
            self._journal.event(run, step_execute_pending=pending)

    def _method_failed(
        self, run: FlowRun, step: StepExecution, error: pb.WorkerErrorResponse
    ) -> None:
        failure = pb.StepMethodFailedOutput(failure=_method_failure(step, error))
        context = _event_context(step)
        context.last_failure_info.CopyFrom(failure.failure)
        progress = (
            ATTEMPT_PROGRESS_NOT_COMPLETED if step.reached_worker else ATTEMPT_PROGRESS_NOT_STARTED
        )
        detail = f"{error.detail} (attempt_progress: {progress})"
        if step.method is MethodKind.WAIT_FOR:
            self._journal.event(
                run,
                step_wait_for_failed=pb.StepWaitForFailedEvent(
                    input=_event_input(step), output=failure, context=context
                ),
            )
            if (
                step.options.wait_for_failure_policy
                == pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE
            ):
                step.wait_for_failed = True
                _reset_method(step, StepPhase.EXECUTE)
                self._journal.commit(run)
                return
            self.closer.close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_WORKER_API_FAIL,
                flow_failure_message(error),
            )
            self._journal.commit(run)
            return
        self._journal.event(
            run,
            step_execute_failed=pb.StepExecuteFailedEvent(
                input=_event_input(step), output=failure, context=context
            ),
        )
        options = step.options
        self.end_step(run, step)
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
                self.new_step(
                    run,
                    movement,
                    step.step_execution_id,
                    time.time(),
                    recovery,
                    work_started_at=step.work_started_at,
                )
            )
        else:
            self.closer.close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_WORKER_API_FAIL,
                flow_failure_message(error),
            )
        self.after_steps_changed(run, started, by_step=True)

    # ------------------------------------------------------------------ conditions

    def evaluate_waiting(self, run: FlowRun, *, commit: bool = True, by_step: bool = False) -> None:
        """Move every waiting Step whose conditions now hold to execute.

        ``by_step``: what ended the waits is a Step's method (its writes), which continues the
        work the waiting Step belongs to. Otherwise a client, an RPC, a Timer or a SubFlow did:
        for a run with no other Step execution that starts new work (``work_started_at`` now),
        for a run with other Steps under way it resumes that work, served first within the
        overtaking bound (see :mod:`dex_local_engine.step_dispatch_order`).
        """
        if not run.is_running:
            return
        now = time.time()
        ready = []
        for step in sorted(run.steps.values(), key=lambda s: s.created_at):
            if step.phase is StepPhase.WAITING and evaluate_step(
                run, step, now, self.sub_flows.result
            ):
                step.phase = StepPhase.EXECUTE
                ready.append(step)
        if ready and not by_step:
            # The outside ended the waits: of a run with nothing else under way, that is new work
            # (a session's next message); else it resumes work under way (an approval), served
            # first within the overtaking bound.
            is_new_work = len(ready) == len(run.steps)
            for step in ready:
                step.work_started_at = now if is_new_work else RESUMED_WORK_STARTED_AT
        if ready and commit:
            self._journal.commit(run)
        for step in ready:
            for handle in self._timer_handles.pop((run.run_id, step.step_execution_id), []):
                handle.cancel()
            self.launch_soon(run, step)

    def arm_timers(self, run: FlowRun, step: StepExecution) -> None:
        """Schedule an evaluation of ``run`` when each pending Timer of ``step`` fires."""
        key = (run.run_id, step.step_execution_id)
        for handle in self._timer_handles.pop(key, []):
            handle.cancel()
        loop = asyncio.get_running_loop()
        now = time.time()
        handles = [
            loop.call_later(max(0.0, state.fire_at - now), self._timer_due, run, step)
            for state in step.timers
            if not state.completed
        ]
        self._timer_handles[key] = handles

    def _timer_due(self, run: FlowRun, step: StepExecution) -> None:
        """A Timer of ``step`` came due: move ready Steps on, and arm again what is not due yet.

        A Timer completes only once ``time.time()`` reaches its firing time, and an event loop may
        run a ``call_later`` callback a little before that: uvloop does, by up to about a
        millisecond (libuv counts whole milliseconds on a coarse monotonic clock). Without arming
        again, such a Step would wait for ever (the stall of the Worker-kill and approval-deadline
        scenarios on uvloop).
        """
        self.evaluate_waiting(run)
        current = run.steps.get(step.step_execution_id)
        if not run.is_running or current is None or current.phase is not StepPhase.WAITING:
            return
        # Still waiting: every Timer left uncompleted was not due when it was evaluated.
        if any(not state.completed for state in current.timers):
            self.arm_timers(run, current)


class _InflightMarker:
    """Keeps an attempt's in-flight marker true: written just before a Worker takes the task,
    removed when the task goes back to waiting without having run.

    So after a restart only an attempt a Worker may have started counts as lost; a Step that was
    queued, or waited for a free Worker, runs again under the same attempt.
    """

    def __init__(self, journal: RunJournal, marker: InflightRow) -> None:
        self._journal = journal
        self._marker = marker
        self._written = False

    def __call__(self, on_worker: bool) -> None:
        if on_worker and not self._written:
            self._journal.mark_inflight(self._marker)  # committed before the task is written
        elif not on_worker and self._written:
            self._journal.unmark_inflight(self._marker)
        self._written = on_worker


def _lock_keys(step: StepExecution) -> Sequence[str]:
    if step.method is MethodKind.WAIT_FOR:
        return step.options.wait_for_lock_attribute_keys
    return step.options.execute_lock_attribute_keys


def _event_context(step: StepExecution) -> pb.StepMethodEventContext:
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


def _method_failure(step: StepExecution, error: pb.WorkerErrorResponse) -> pb.StepMethodFailure:
    """The failure of the current attempt of ``step``, as history events carry it."""
    return step_method_failure(error, step.attempt)


def _event_input(step: StepExecution) -> pb.StepMethodEventInput:
    return pb.StepMethodEventInput(step_input=step.input)


def _reset_method(step: StepExecution, phase: StepPhase) -> None:
    step.phase = phase
    step.attempt = 1
    step.first_attempt_at = 0.0
    step.reached_worker = False
    step.retry_at = 0.0
    step.last_heartbeat = None
    step.last_failure = None

"""Time travel (``ResetFlow``): a new run of a Flow from a point in its latest run's history.

Dex Server resets a Flow by replaying its history up to a reset point into a new run (the old
run, when still running, is terminated). The engine does the same from its own history: the new
run starts from the Flow's start request and applies, in order, every event before the reset
point, so its Attributes, Channel messages, Step executions (with their numbers), Timers (with
their original firing times) and locals are what they were there. Then:

- Events before the reset point are copied into the new run's history, followed by a
  ``time_travel_fork`` event naming the previous run.
- A Step method that had started at the reset point but not finished (in flight) runs again
  from its first attempt, and so does the reset's target method. A waiting Step waits again;
  the Channel messages it had consumed after the reset point are pending again.
- Unless ``skip_writes_reapply``, what Clients and RPCs wrote after the reset point is applied
  again in the new run, in order: Channel publishes and deletes, ``SetAttributes``, and each
  RPC's writes and the Steps it started (the RPC itself does not run again).
- SubFlows follow their reuse policy: a waiting Step whose SubFlows exist attaches to them
  (``ATTACH``, or any running SubFlow), starts a closed one again (``ALWAYS_RESTART``), or starts
  it again only if it did not complete (``RESTART_IF_PREVIOUS_EXITS_ABNORMALLY``).
- The new run gets a new Flow timeout budget and its Flow retry attempts start from 1.

Reset points (``FlowResetType``): ``BEGINNING`` (the start Step runs again with the original input
and initial Attributes), ``HISTORY_EVENT_TIME`` (the events before that time are kept),
``STEP_TYPE`` (before the first Step method of that type started) and ``STEP_EXECUTION_ID`` with a
``step_method`` (before that method of that execution started). Only the Flow's latest run can
be reset, and a reset point after the run closed is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.conditions import evaluate_step, start_waiting
from dex_local_engine.flow_runs import FlowRuns
from dex_local_engine.flow_state import (
    RPC_FROM_PREFIX,
    START_FROM,
    FlowRun,
    StepExecution,
    StepPhase,
)
from dex_local_engine.flow_writes import (
    apply_attribute_writes,
    apply_method_writes,
    delete_messages,
    publish,
)
from dex_local_engine.run_journal import RunJournal
from dex_local_engine.run_lifecycle import (
    TIMEOUT_HANDLER_STEP_TYPE,
    RunLifecycle,
    timeout_handler_movement,
)
from dex_local_engine.step_scheduler import (
    ATTEMPT_PROGRESS_NOT_COMPLETED,
    NO_ERROR,
    StepScheduler,
)
from dex_local_engine.sub_flows import SubFlows

__all__ = ["DEFAULT_RESET_REASON", "FlowResetter"]

_log = logging.getLogger(__name__)

DEFAULT_RESET_REASON = "time travel"
"""The termination reason of a running run that a reset replaces, when the request gives none."""

_HISTORY_PAGE = 1000
_STEP_EVENTS = {
    "step_wait_for_completed": pb.FLOW_RESET_STEP_METHOD_WAIT_FOR,
    "step_wait_for_failed": pb.FLOW_RESET_STEP_METHOD_WAIT_FOR,
    "step_wait_for_pending": pb.FLOW_RESET_STEP_METHOD_WAIT_FOR,
    "step_execute_completed": pb.FLOW_RESET_STEP_METHOD_EXECUTE,
    "step_execute_failed": pb.FLOW_RESET_STEP_METHOD_EXECUTE,
    "step_execute_pending": pb.FLOW_RESET_STEP_METHOD_EXECUTE,
}
_REAPPLIED = frozenset(
    {"rpc_execution_completed", "channel_external_publish", "channel_external_delete"}
)


class FlowResetter:
    """Serves ``ResetFlow``.

    Example::

        resetter = FlowResetter(journal, runs, steps, lifecycle, sub_flows)
        new_run_id = resetter.reset_flow(pb.ResetFlowRequest(flow_id="order-7", reset_type=1))

    Raises (from :meth:`reset_flow`): :class:`~dex_local_engine.errors.EngineError`.
    """

    def __init__(
        self,
        journal: RunJournal,
        runs: FlowRuns,
        steps: StepScheduler,
        lifecycle: RunLifecycle,
        sub_flows: SubFlows,
    ) -> None:
        self._journal = journal
        self._runs = runs
        self._steps = steps
        self._lifecycle = lifecycle
        self._sub_flows = sub_flows

    def reset_flow(self, request: pb.ResetFlowRequest) -> str:
        """Start the new run the request asks for; returns its run ID."""
        _validate(request)
        old = self._runs.get_run(request.flow_id, request.run_id)
        events = self._events(old)
        keep = _reset_point(request, events, old)
        prefix, suffix = events[:keep], events[keep:]
        # A Flow retry restarts the run in place: replay from its last start.
        starts = [
            i for i, event in enumerate(prefix) if event.HasField("flow_started_or_continued")
        ]
        replayed = prefix[starts[-1] + 1 :]
        if any(event.HasField("flow_closed") for event in replayed):
            raise errors.failed_precondition(
                f"ResetFlow: the reset point of flow {request.flow_id!r} is after it closed"
            )
        new = self._replayed_run(request, old, replayed, suffix)
        if old.is_running:
            reason = request.reason or DEFAULT_RESET_REASON
            self._lifecycle.close(old, pb.FLOW_STATUS_TERMINATED, NO_ERROR, reason)
            self._journal.commit(old)
        self._begin(new)
        return new.run_id

    def _replayed_run(
        self,
        request: pb.ResetFlowRequest,
        old: FlowRun,
        replayed: Sequence[pb.FlowHistoryEvent],
        suffix: Sequence[pb.FlowHistoryEvent],
    ) -> FlowRun:
        """The new run (latest, not yet committed) with ``replayed`` and the reapplied writes.

        When building it fails, nothing is left behind: ``old`` is the latest run again.
        """
        new, _ = self._lifecycle.create_run(old.start_request, parent_flow_id=old.parent_flow_id)
        try:
            new.config.CopyFrom(old.config)
            replay = _Replay(new, self._steps, self._sub_flows)
            for event in replayed:
                self._journal.copy_event(new, event)
                replay.apply(event)
            fork = pb.TimeTravelForkHistoryEvent(previous_run_id=old.run_id)
            self._journal.event(new, time_travel_fork=fork)
            if not request.skip_writes_reapply:
                for event in suffix:
                    kind = event.WhichOneof("payload")
                    if kind in _REAPPLIED:
                        self._journal.event(new, **{kind: replay.reapply(event)})
            if not new.is_running:
                raise errors.failed_precondition(
                    f"ResetFlow: the reset point of flow {request.flow_id!r} is after it closed"
                )
        except Exception:
            self._journal.drop_events(new)
            self._runs.discard(new, old)
            raise
        return new

    def _events(self, run: FlowRun) -> list[pb.FlowHistoryEvent]:
        events: list[pb.FlowHistoryEvent] = []
        while True:
            page = self._journal.history(run, len(events) + 1, _HISTORY_PAGE)
            events.extend(page)
            if len(page) < _HISTORY_PAGE:
                return events

    def _begin(self, run: FlowRun) -> None:
        """Persist and start the new run: its Steps, Timers and waits.

        A replayed waiting Step keeps the SubFlows its ``wait_for`` started before the reset
        point, as they are (Dex replays that start); a ``wait_for`` that runs again resolves its
        SubFlows by their reuse policy.
        """
        waiting = [step for step in run.steps.values() if step.phase is StepPhase.WAITING]
        self._lifecycle.begin_run(run)
        for step in waiting:
            self._steps.arm_timers(run, step)
        self._steps.evaluate_waiting(run)


class _Replay:
    """Applies a run's history events to a new run's state, one event at a time."""

    def __init__(self, run: FlowRun, steps: StepScheduler, sub_flows: SubFlows) -> None:
        self._run = run
        self._steps = steps
        self._sub_flows = sub_flows

    def apply(self, event: pb.FlowHistoryEvent) -> None:
        kind = event.WhichOneof("payload")
        time = event.event_time.ToNanoseconds() / 1e9
        if kind == "step_wait_for_completed":
            self._wait_for_completed(event.step_wait_for_completed, time)
        elif kind == "step_execute_completed":
            self._execute_completed(event.step_execute_completed, time)
        elif kind == "step_wait_for_failed":
            self._wait_for_failed(event.step_wait_for_failed)
        elif kind == "step_execute_failed":
            self._execute_failed(event.step_execute_failed, time)
        elif kind == "step_execute_pending":
            self._step(event.step_execute_pending.context, execute_at=time)
        elif kind in _REAPPLIED:
            self.reapply(event, keep_message_ids=True)

    def reapply(
        self, event: pb.FlowHistoryEvent, *, keep_message_ids: bool = False
    ) -> (
        pb.RpcExecutionCompletedEvent
        | pb.ChannelExternalPublishEvent
        | pb.ChannelExternalDeleteEvent
    ):
        """Apply a Client's or RPC's writes again; returns what the new run's history records.

        Messages published again after the reset point get new message IDs (``keep_message_ids``
        is for events before it, whose IDs the replayed Steps may refer to).
        """
        run = self._run
        if event.HasField("channel_external_publish"):
            messages: Sequence[pb.ChannelMessage] = event.channel_external_publish.messages
            if not keep_message_ids:
                messages = [
                    pb.ChannelMessage(channel_name=m.channel_name, value=m.value) for m in messages
                ]
            return pb.ChannelExternalPublishEvent(messages=publish(run, messages))
        if event.HasField("channel_external_delete"):
            delete_messages(run, event.channel_external_delete.messages, strict=False)
            return event.channel_external_delete
        rpc = event.rpc_execution_completed
        if rpc.is_set_attribute_api:
            apply_attribute_writes(run, rpc.upsert_attributes)
            return rpc
        apply_method_writes(
            run, rpc.upsert_attributes, rpc.publish_to_channel, rpc.delete_from_channel
        )
        decision = rpc.step_decision
        self._steps.cancel_steps(run, decision.cancel_step_types, None)
        from_id = f"{RPC_FROM_PREFIX}{rpc.rpc_name}"
        for movement in decision.next_steps:
            self._steps.new_step(run, movement, from_id, _now(event))
        return rpc

    def _step(
        self, context: pb.StepMethodEventContext, *, execute_at: float | None = None
    ) -> StepExecution | None:
        """The replayed Step of an event; a waiting one moves on when its execute began."""
        run = self._run
        step = run.steps.get(context.step_execution_id)
        if step is None and context.step_type == TIMEOUT_HANDLER_STEP_TYPE:
            run.timeout_handled = True
            step = self._steps.new_step(
                run, timeout_handler_movement(run), START_FROM, execute_at or 0.0, has_input=False
            )
        if step is None:
            _log.warning(
                "time travel: no Step %s to replay in %s", context.step_execution_id, run.flow_id
            )
            return None
        if execute_at is not None and step.phase is StepPhase.WAITING:
            # Its conditions held before its execute began: consume what they consumed then.
            evaluate_step(run, step, execute_at, self._sub_flows.result)
            step.phase = StepPhase.EXECUTE
        return step

    def _apply_writes(
        self, output: pb.StepWaitForCompletedOutput | pb.StepExecuteCompletedOutput
    ) -> None:
        apply_method_writes(
            self._run,
            output.upsert_attributes,
            output.publish_to_channel,
            output.delete_from_channel,
        )

    def _wait_for_completed(self, event: pb.StepWaitForCompletedEvent, time: float) -> None:
        step = self._step(event.context)
        if step is None:
            return
        output = event.output
        self._apply_writes(output)
        for kv in output.upsert_step_execution_locals:
            step.locals[kv.key] = kv.value
        if output.HasField("wait_for_condition"):
            step.phase = StepPhase.WAITING
            start_waiting(step, output.wait_for_condition, time)
        else:
            step.phase = StepPhase.EXECUTE

    def _execute_completed(self, event: pb.StepExecuteCompletedEvent, time: float) -> None:
        step = self._step(event.context, execute_at=time)
        if step is None:
            return
        output = event.output
        self._apply_writes(output)
        self._steps.end_step(self._run, step)
        self._steps.apply_decision(self._run, step, output.step_decision)

    def _wait_for_failed(self, event: pb.StepWaitForFailedEvent) -> None:
        step = self._step(event.context)
        if step is not None:
            # Only a proceeding wait_for failure leaves the run running.
            step.wait_for_failed = True
            step.phase = StepPhase.EXECUTE

    def _execute_failed(self, event: pb.StepExecuteFailedEvent, time: float) -> None:
        step = self._step(event.context, execute_at=time)
        if step is None:
            return
        options = step.options
        self._steps.end_step(self._run, step)
        if (
            options.execute_failure_policy
            != pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP
        ):
            return
        details = event.output.failure.details
        text = (
            details.original_worker_error_detail
            or details.detail
            or event.output.failure.backend_error
        )
        recovery = pb.RecoveryErrorInfo(
            detail=f"{text} (attempt_progress: {ATTEMPT_PROGRESS_NOT_COMPLETED})",
            error_type=details.original_worker_error_type,
        )
        movement = pb.StepMovement(
            step_type=options.execute_failure_proceed_step_type,
            step_input=step.input,
            step_options=options.execute_failure_proceed_step_options,
        )
        self._steps.new_step(self._run, movement, step.step_execution_id, time, recovery)


def _now(event: pb.FlowHistoryEvent) -> float:
    return event.event_time.ToNanoseconds() / 1e9


def _validate(request: pb.ResetFlowRequest) -> None:
    """Refuse what Dex Server refuses, with its reasons."""
    if not request.flow_id:
        raise errors.invalid_argument("ResetFlow: flow ID is required")
    kind = request.reset_type
    method_given = request.step_method != pb.FLOW_RESET_STEP_METHOD_UNSPECIFIED
    if kind == pb.FLOW_RESET_TYPE_STEP_EXECUTION_ID:
        if not request.step_execution_id:
            raise errors.invalid_argument("ResetFlow: step execution ID is required")
        if not method_given:
            raise errors.invalid_argument("ResetFlow: step method must be WaitFor or Execute")
        return
    if kind not in (
        pb.FLOW_RESET_TYPE_BEGINNING,
        pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME,
        pb.FLOW_RESET_TYPE_STEP_TYPE,
    ):
        raise errors.invalid_argument("ResetFlow: time travel type is required")
    if kind == pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME and not request.history_event_time:
        raise errors.invalid_argument("ResetFlow: history event time is required")
    if kind == pb.FLOW_RESET_TYPE_STEP_TYPE and not request.step_type:
        raise errors.invalid_argument("ResetFlow: step type is required")
    if method_given:
        raise errors.invalid_argument(
            "ResetFlow: step method is only valid for a Step execution ID"
        )


def _reset_point(
    request: pb.ResetFlowRequest, events: Sequence[pb.FlowHistoryEvent], run: FlowRun
) -> int:
    """How many leading events the new run replays."""
    kind = request.reset_type
    if kind == pb.FLOW_RESET_TYPE_BEGINNING:
        return 1
    if kind == pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME:
        cut = _parse_time(request.history_event_time)
    else:
        cut = _method_start(request, events, run)
    kept = sum(1 for event in events if _now(event) < cut)
    return max(kept, 1)


def _method_start(
    request: pb.ResetFlowRequest, events: Sequence[pb.FlowHistoryEvent], run: FlowRun
) -> float:
    """When the target Step method first started (its first attempt), from history or the run."""
    by_type = request.reset_type == pb.FLOW_RESET_TYPE_STEP_TYPE

    def wanted(step_type: str, step_execution_id: str, method: int) -> bool:
        if by_type:
            return step_type == request.step_type
        return step_execution_id == request.step_execution_id and method == request.step_method

    starts = []
    for event in events:
        kind = event.WhichOneof("payload")
        method = _STEP_EVENTS.get(kind or "")
        if method is None:
            continue
        context: pb.StepMethodEventContext = getattr(event, kind or "").context
        if context.final_attempt == 1 and wanted(
            context.step_type, context.step_execution_id, method
        ):
            started = context.started_time.ToNanoseconds() / 1e9
            starts.append(started or _now(event))
    for step in run.steps.values() if run.is_running else ():
        method = (
            pb.FLOW_RESET_STEP_METHOD_WAIT_FOR
            if step.phase is StepPhase.WAIT_FOR
            else pb.FLOW_RESET_STEP_METHOD_EXECUTE
        )
        if step.phase is not StepPhase.WAITING and wanted(
            step.step_type, step.step_execution_id, method
        ):
            starts.append(step.first_attempt_at or step.method_started_at or float("inf"))
    if not starts:
        target = (
            request.step_type
            if by_type
            else f"{request.step_execution_id} ({pb.FlowResetStepMethod.Name(request.step_method)})"
        )
        raise errors.invalid_argument(
            f"ResetFlow: flow {request.flow_id!r} has no Step method {target} to reset to"
        )
    return min(starts)


def _parse_time(text: str) -> float:
    """Dex's accepted forms: RFC 3339 (``2026-12-01T22:31:07Z``) or UNIX nanoseconds."""
    if text.lstrip("-").isdigit():
        return int(text) / 1e9
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise errors.invalid_argument(
            f"ResetFlow: cannot parse history event time {text!r}: use RFC 3339 or UNIX nanoseconds"
        ) from None
    if moment.tzinfo is None:
        raise errors.invalid_argument(f"ResetFlow: history event time {text!r} has no time zone")
    return moment.timestamp()

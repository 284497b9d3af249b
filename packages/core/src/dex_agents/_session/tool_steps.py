"""The Steps that run one tool call, and their failure routes.

``CallTool`` runs a ``read`` or ``idempotent_write`` call (3 attempts, failure route
``RecordToolFailure``); ``CallSingleAttemptTool`` runs a ``non_idempotent_write`` or
``unclassified`` call once (failure route ``RecordToolOutcomeUnknown``). When that one attempt is
lost and the tool declares an outcome check, ``RecordToolOutcomeUnknown`` hands the call to
``CheckToolOutcome`` (3 attempts, failure route ``RecordToolOutcomeUnknown``) instead of recording
``outcome_unknown``. Each takes the tool call ID as input and loads only that call's
``AgentToolCalls`` instance, so parallel tool calls never share state. A Step whose record is
already final ends without running or publishing, so a repeated movement never runs a tool twice.
"""

from __future__ import annotations

from dex import AsyncContext, StepDecision, dead_end, go_to_many

from dex_agents._event_writer import write_event_payload
from dex_agents._events import ToolTaskStartedPayload
from dex_agents._runner_contract import (
    MISSING_TOOL_TASK_POLLER,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolExecutionResult,
    ToolInputRequested,
)
from dex_agents._session.built_in_transitions import record_tool_question, record_tool_task
from dex_agents._session.control import reject_unstarted_tool_call
from dex_agents._session.heartbeat import Heartbeat
from dex_agents._session.outcome_checks import (
    apply_outcome_check,
    begin_outcome_check,
    is_outcome_checkable,
    outcome_check_request,
    record_failed_check,
)
from dex_agents._session.persistence import AGENT_TOOL_CALLS
from dex_agents._session.records import finish_tool_call, load_tool_call
from dex_agents._session.step_base import SessionStep
from dex_agents._session.tracing import tool_call_span
from dex_agents._session.transitions import (
    ToolFailureRoute,
    finalize_tool_call,
    record_tool_failure,
)
from dex_agents._tool_outcome_check import ToolOutcomeCheckResult, ToolOutcomeCheckStatus
from dex_agents._tool_policy import tool_effect_rules
from dex_agents._values import AgentToolCall, AgentToolCallStatus
from dex_agents.exceptions import ToolExecutionError

__all__ = [
    "CallSingleAttemptTool",
    "CallTool",
    "CheckToolOutcome",
    "RecordToolFailure",
    "RecordToolOutcomeUnknown",
]


class _RunToolStep(SessionStep[str]):
    """Runs one approved call through the runner: ``CallTool`` and ``CallSingleAttemptTool``."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        runtime = self._runtime
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        if record.status is not AgentToolCallStatus.APPROVED:
            # An approval, question, or task of this call is on its way; that Step owns the record.
            return go_to_many(runtime.movements.for_record(record))
        events = runtime.event_writer(context, record.turn_id)
        if reject_unstarted_tool_call(context, events, record):
            return dead_end()
        events.write_tool_call_started(record.tool_call_id, record.tool_name)
        heartbeat = Heartbeat(context)
        # A stream that half-closes before any output hands the attempt out again under the same
        # number; after this output it fails the attempt, so a started tool is never "not run".
        await heartbeat.beat()
        updated = await self._run(context, record, heartbeat)
        if updated.is_final:
            finish_tool_call(context, events, updated)
            return dead_end()
        AGENT_TOOL_CALLS.set(context, updated.tool_call_id, updated)
        if updated.status is AgentToolCallStatus.WAITING_FOR_TASK:
            write_event_payload(
                events,
                ToolTaskStartedPayload(updated.tool_call_id, updated.tool_name, updated.task_id),
            )
        return go_to_many(runtime.movements.for_record(updated))

    async def _run(
        self, context: AsyncContext, record: AgentToolCall, heartbeat: Heartbeat
    ) -> AgentToolCall:
        """The record after one run of the tool: final, asking a question, or waiting for a task."""
        runner = self._runtime.runner
        execution = DeferredToolExecution(
            flow_id=context.flow_id,
            tool_call=record,
            attempt=max(context.attempt, 1),
            events=self._runtime.event_writer(context, record.turn_id),
            input_answers=record.input_answers,
            supports_tool_tasks=runner.polls_tool_tasks,
            heartbeat_checkpoint=heartbeat.checkpoint,
            send_heartbeat=heartbeat.beat,
            send_checkpoint=heartbeat.save_checkpoint,
        )
        span = tool_call_span(context, self._runtime, type(self).__name__, record)
        try:
            outcome = await runner.execute_deferred_tool_call(execution, heartbeat, span)
        except ToolExecutionError as error:
            return finalize_tool_call(record, AgentToolCallStatus.FAILED, error=str(error))
        updated = self._record_outcome(record, outcome)
        span.finished(updated)
        return updated

    def _record_outcome(self, record: AgentToolCall, outcome: DeferredToolOutcome) -> AgentToolCall:
        if isinstance(outcome, ToolExecutionResult):
            return finalize_tool_call(record, AgentToolCallStatus.SUCCEEDED, output=outcome.output)
        if isinstance(outcome, ToolInputRequested):
            return record_tool_question(record, outcome)
        if self._runtime.runner.polls_tool_tasks:
            return record_tool_task(record, outcome.task_id, outcome.poll_interval_seconds)
        status = (
            AgentToolCallStatus.OUTCOME_UNKNOWN
            if tool_effect_rules(record.effect).is_outcome_unknown_after_failure
            else AgentToolCallStatus.FAILED
        )
        return finalize_tool_call(record, status, error=MISSING_TOOL_TASK_POLLER)


class CallTool(_RunToolStep):
    """Runs one ``read`` or ``idempotent_write`` call: 3 attempts, failure route RecordToolFailure."""


class CallSingleAttemptTool(_RunToolStep):
    """Runs one ``non_idempotent_write`` or ``unclassified`` call once; failure route
    RecordToolOutcomeUnknown."""


class _RecordToolFailureStep(SessionStep[str]):
    """Records a tool Step whose attempts ran out, from the recovery error."""

    _route: ToolFailureRoute

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        events = self._runtime.event_writer(context, record.turn_id)
        if record.outcome_check is ToolOutcomeCheckStatus.PENDING:
            # CheckToolOutcome failed on every attempt: the tool ran before it, so never "not run".
            finish_tool_call(context, events, record_failed_check(record, context.recovery_error))
            return dead_end()
        final = record_tool_failure(record, self._route, context.recovery_error)
        if (
            self._route is ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN
            and self._runtime.options.outcome_check(record.tool_name) is not None
            and is_outcome_checkable(record, final)
        ):
            pending = begin_outcome_check(record, final.error)
            AGENT_TOOL_CALLS.set(context, pending.tool_call_id, pending)
            return go_to_many(self._runtime.movements.check_tool_outcome(pending))
        finish_tool_call(context, events, final)
        return dead_end()


class RecordToolFailure(_RecordToolFailureStep):
    """Records ``failed`` for a read and ``outcome_unknown`` for a write after CallTool failed."""

    _route = ToolFailureRoute.RECORD_TOOL_FAILURE


class RecordToolOutcomeUnknown(_RecordToolFailureStep):
    """Records ``outcome_unknown`` after CallSingleAttemptTool failed."""

    _route = ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN


class CheckToolOutcome(SessionStep[str]):
    """Asks a lost single-attempt call's outcome check and records its answer: ``succeeded``
    (applied), ``failed`` or one more run (not applied), or ``outcome_unknown`` (unknown). 3
    attempts, failure route ``RecordToolOutcomeUnknown``."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        runtime = self._runtime
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        if record.outcome_check is not ToolOutcomeCheckStatus.PENDING:
            return go_to_many(runtime.movements.for_record(record))
        check = runtime.options.outcome_check(record.tool_name)
        span = tool_call_span(context, runtime, type(self).__name__, record)
        if check is None:
            # The Flow type no longer declares the check (a Worker of another release).
            result = ToolOutcomeCheckResult.unknown("the tool no longer declares an outcome check")
            run_again = False
        else:
            request = outcome_check_request(record, context.flow_id, context.attempt)
            with span.running():
                result = await check.run(request)
            run_again = check.run_again_if_not_applied
        updated = apply_outcome_check(record, result, run_again_if_not_applied=run_again)
        span.finished(updated)
        if updated.is_final:
            finish_tool_call(context, runtime.event_writer(context, record.turn_id), updated)
            return dead_end()
        AGENT_TOOL_CALLS.set(context, updated.tool_call_id, updated)
        return go_to_many(runtime.movements.for_record(updated))

"""The Steps that run one tool call, and their failure routes.

``CallTool`` runs a ``read`` or ``idempotent_write`` call (3 attempts, failure route
``RecordToolFailure``); ``CallSingleAttemptTool`` runs a ``non_idempotent_write`` or
``unclassified`` call once (failure route ``RecordToolOutcomeUnknown``). When that one attempt is
lost and the tool declares an outcome check, ``RecordToolOutcomeUnknown`` hands the call to
``CheckToolOutcome`` (3 attempts, failure route ``RecordToolOutcomeUnknown``) instead of recording
``outcome_unknown``. A single-attempt tool starts only after its Step execution's start claim was
granted, and ``RecordToolOutcomeUnknown`` fences the lost execution first (``attempt_claims``):
an execution fenced before it claimed never started its tool, so the call runs again. Each takes the tool call ID as input and loads only that call's
``AgentToolCalls`` instance, so parallel tool calls never share state. A Step whose record is
already final ends without running or publishing, so a repeated movement never runs a tool twice.
"""

from __future__ import annotations

import asyncio
import uuid

from dex import AsyncContext, RecoveryErrorInfo, StepDecision, dead_end, go_to_many

from dex_agents._event_writer import AgentEventWriter, write_event_payload
from dex_agents._events import ToolTaskStartedPayload
from dex_agents._runner_contract import (
    MISSING_TOOL_TASK_POLLER,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolExecutionResult,
    ToolInputRequested,
    tool_call_not_run_error,
)
from dex_agents._session.attempt_claims import (
    MAX_UNSTARTED_RERUNS,
    AttemptClaimAction,
    AttemptClaimAnswer,
    AttemptClaimRequest,
    ToolAttemptNotClaimedError,
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
    AttemptProgress,
    ToolFailureRoute,
    attempt_progress,
    finalize_tool_call,
    record_tool_failure,
    recovery_error_text,
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

    _claims_start: bool = False

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
        if self._claims_start and self._runtime.attempt_claims.is_bound:
            await self._claim_start(context, record)
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

    async def _claim_start(self, context: AsyncContext, record: AgentToolCall) -> None:
        """Claim this execution's start of the tool, committed before the tool starts.

        Raises:
            ToolAttemptNotClaimedError: When the claim is refused (this execution was fenced,
                another live execution holds the claim, or the call is no longer approved); the
                tool does not start.
            DexServiceError: When Dex cannot take the claim (the engine is down): the tool does
                not start; the claim is released in the background, in case Dex took it and
                its answer was lost, and the failure route's fence settles the rest.
        """
        claims = self._runtime.attempt_claims
        request = AttemptClaimRequest(
            AttemptClaimAction.CLAIM,
            record.tool_call_id,
            context.step_execution_id,
            uuid.uuid4().hex,
        )
        # No answer (an error, or the Step cancelled as its task stream broke): the tool does
        # not start here, so the claim is withdrawn in case Dex took it; before the Step fails,
        # so the failure route's fence finds it withdrawn (a cancelled Step leaves it running).
        try:
            answer, _ = await claims.ask(context.flow_id, request)
        except asyncio.CancelledError:
            claims.release_after_failed_claim(context.flow_id, request)
            raise
        except Exception:
            await asyncio.shield(claims.release_after_failed_claim(context.flow_id, request))
            raise
        if answer is not AttemptClaimAnswer.GRANTED:
            raise ToolAttemptNotClaimedError(
                f"the start claim of tool call {record.tool_call_id!r} by "
                f"{context.step_execution_id} was refused; the tool did not start"
            )

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
    """Runs one ``non_idempotent_write`` or ``unclassified`` call once, after its start claim was
    granted; failure route RecordToolOutcomeUnknown."""

    _claims_start = True


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
        if self._route is ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN and _may_have_claimed(
            record, context.recovery_error
        ):
            fenced = await self._fence(context, record, events)
            if fenced is not None:
                return fenced
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

    async def _fence(
        self, context: AsyncContext, record: AgentToolCall, events: AgentEventWriter
    ) -> StepDecision | None:
        """Fence the lost execution; a decision when it never started its tool, ``None`` when
        it may have (or no client was given: then the lost attempt is judged as before)."""
        claims = self._runtime.attempt_claims
        if not claims.is_bound:
            return None
        request = AttemptClaimRequest(
            AttemptClaimAction.FENCE,
            record.tool_call_id,
            context.from_step_execution_id,
            "",
        )
        answer, unstarted = await claims.ask(context.flow_id, request)
        if answer is AttemptClaimAnswer.STARTED:
            return None
        if answer is AttemptClaimAnswer.OTHER:
            # Another live execution of the call holds the claim; it owns the record.
            return dead_end()
        if unstarted > MAX_UNSTARTED_RERUNS:
            detail = recovery_error_text(context.recovery_error) or "the attempt was lost"
            final = finalize_tool_call(
                record,
                AgentToolCallStatus.FAILED,
                error=tool_call_not_run_error(
                    f"{unstarted} attempts were lost before the tool started; last: {detail}"
                ),
            )
            finish_tool_call(context, events, final)
            return dead_end()
        # Fenced before it claimed: the tool never started, so the call runs (still once).
        return go_to_many(self._runtime.movements.for_record(record))


def _may_have_claimed(record: AgentToolCall, recovery: RecoveryErrorInfo | None) -> bool:
    """Whether the lost execution was one that claims before its tool starts: an approved call
    run in its tool Step (no remote task, no outcome check under way) that reached a Worker (one
    that never did records ``failed`` "not run" as before)."""
    return (
        attempt_progress(recovery) is not AttemptProgress.NOT_STARTED
        and record.status is AgentToolCallStatus.APPROVED
        and record.task_id is None
        and record.outcome_check is not ToolOutcomeCheckStatus.PENDING
    )


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

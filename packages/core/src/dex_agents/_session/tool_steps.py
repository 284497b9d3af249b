"""The Steps of one tool call: its approval wait, the tool Steps, and their failure routes.

Each takes the tool call ID as input and loads only that call's ``AgentToolCalls`` instance, so
parallel tool calls never share state. A Step whose record is already final ends without running
or publishing, so a repeated movement never runs a tool twice.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dex import (
    AsyncContext,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    dead_end,
    go_to_many,
)

from dex_agents._deferred_tool_context import _deferred_tool_execution_scope
from dex_agents._events import AgentEventType, AgentEventWriter
from dex_agents._runner_contract import (
    MISSING_TOOL_TASK_POLLER,
    DeferredToolExecution,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPoller,
    ToolTaskStarted,
)
from dex_agents._session.built_in_transitions import record_tool_question, record_tool_task
from dex_agents._session.persistence import (
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    TOOL_CALL_CANCELLATIONS,
)
from dex_agents._session.step_options import (
    tool_call_record_step_options,
    tool_call_step_options,
)
from dex_agents._session.step_support import (
    Heartbeat,
    SessionRuntime,
    finish_tool_call,
    load_tool_call,
)
from dex_agents._session.transitions import (
    APPROVAL_DEADLINE_PASSED_MESSAGE,
    ApprovalOutcome,
    ToolFailureRoute,
    apply_approval,
    expire_approval,
    finalize_tool_call,
    find_pending_interrupt,
    record_tool_failure,
    remove_interrupt,
    seconds_until,
)
from dex_agents._tool_policy import ToolStepType, tool_effect_rules
from dex_agents._values import (
    AgentInterruptResolution,
    AgentToolCall,
    AgentToolCallStatus,
    InterruptKind,
)

__all__ = [
    "AwaitToolApproval",
    "CallSingleAttemptTool",
    "CallTool",
    "RecordToolFailure",
    "RecordToolOutcomeUnknown",
    "approval_movement",
    "tool_call_movement",
    "tool_step_movement",
]


class _ToolCallStep(Step[str]):
    """Base of the Steps that own one tool call record; the input is the tool call ID."""

    def __init__(self, runtime: SessionRuntime) -> None:
        self._runtime = runtime

    def _events(self, context: AsyncContext, record: AgentToolCall) -> AgentEventWriter:
        return self._runtime.event_writer(context, record.turn_id)


class AwaitToolApproval(_ToolCallStep):
    """Waits for a person to approve or reject one call, or for its deadline.

    Waits on ``InterruptResolutions.for_one(id)`` plus, while the interrupt is pending with a
    deadline, a Timer for the whole seconds until it. An approval moves to the call's tool Step; a
    rejection or a passed deadline records ``rejected``. A Timer that fires while the answer is on
    its way, or before the deadline, waits again.
    """

    def get_step_options(self) -> StepOptions | None:
        return None  # Every movement carries its own options, for its own record.

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.status is not AgentToolCallStatus.AWAITING_APPROVAL:
            return Wait.skip_immediately()
        cancellation = TOOL_CALL_CANCELLATIONS.for_one(input)
        resolution = INTERRUPT_RESOLUTIONS.for_one(input)
        pending = find_pending_interrupt(PENDING_INTERRUPTS.get(context) or [], input)
        if pending is None or pending.deadline is None:
            return Wait.any_of(cancellation, resolution)
        seconds = seconds_until(pending.deadline, self._runtime.now())
        return Wait.any_of(cancellation, resolution, Timer.by_duration(timedelta(seconds=seconds)))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        if record.status is AgentToolCallStatus.APPROVED:
            return go_to_many(tool_call_movement(self._runtime, record))
        events = self._events(context, record)
        cancellations = TOOL_CALL_CANCELLATIONS.results(context, input)
        if cancellations:
            # Steering removed the interrupt; the call records rejected with the reason.
            return self._apply_resolution(
                context,
                events,
                record,
                AgentInterruptResolution(
                    interrupt_id=input,
                    approved=False,
                    cancellation_reason=cancellations[0].reason,
                ),
            )
        resolutions = INTERRUPT_RESOLUTIONS.results(context, input)
        if resolutions:
            return self._apply_resolution(context, events, record, resolutions[0])
        if context.has_timer_fired():
            interrupts = PENDING_INTERRUPTS.get(context) or []
            outcome = expire_approval(interrupts, input, self._runtime.now())
            if outcome is ApprovalOutcome.EXPIRED:
                PENDING_INTERRUPTS.set(context, remove_interrupt(interrupts, input))
                return self._apply_resolution(
                    context,
                    events,
                    record,
                    AgentInterruptResolution(
                        interrupt_id=input,
                        approved=False,
                        rejection_message=APPROVAL_DEADLINE_PASSED_MESSAGE,
                    ),
                )
        return go_to_many(approval_movement(record.tool_call_id))

    def _apply_resolution(
        self,
        context: AsyncContext,
        events: AgentEventWriter,
        record: AgentToolCall,
        resolution: AgentInterruptResolution,
    ) -> StepDecision:
        events.write_event(
            AgentEventType.INTERRUPT_RESOLVED,
            {
                "interrupt_id": resolution.interrupt_id,
                "approved": resolution.approved,
                "rejection_message": resolution.rejection_message,
                "kind": InterruptKind.APPROVAL,
                "answered": False,
                "cancellation_reason": resolution.cancellation_reason,
            },
        )
        updated = apply_approval(record, resolution)
        if updated.is_final:
            finish_tool_call(context, events, updated)
            return dead_end()
        AGENT_TOOL_CALLS.set(context, updated.tool_call_id, updated)
        return go_to_many(tool_call_movement(self._runtime, updated))


class _RunToolStep(_ToolCallStep):
    """Runs one approved call through the runner: ``CallTool`` and ``CallSingleAttemptTool``."""

    def get_step_options(self) -> StepOptions | None:
        return None

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        if record.status is AgentToolCallStatus.AWAITING_APPROVAL:
            return go_to_many(approval_movement(record.tool_call_id))
        if record.status is not AgentToolCallStatus.APPROVED:
            # A question or task of this call is already on its way; that Step owns the record.
            return go_to_many(_waiting_movement(self._runtime, record))
        events = self._events(context, record)
        # Deferred import: the turn control Steps route approvals back to this module.
        from dex_agents._session.control_steps import reject_unstarted_tool_call

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
            events.write_event(
                AgentEventType.TOOL_TASK_STARTED,
                {
                    "tool_call_id": updated.tool_call_id,
                    "tool_name": updated.tool_name,
                    "task_id": updated.task_id,
                },
            )
        return go_to_many(_waiting_movement(self._runtime, updated))

    async def _run(
        self, context: AsyncContext, record: AgentToolCall, heartbeat: Heartbeat
    ) -> AgentToolCall:
        runner_events = self._events(context, record)
        execution = DeferredToolExecution(
            flow_id=context.flow_id,
            tool_call=record,
            attempt=max(context.attempt, 1),
            events=runner_events,
            input_answers=record.input_answers,
            supports_tool_tasks=isinstance(self._runtime.runner, ToolTaskPoller),
            heartbeat_checkpoint=heartbeat.checkpoint,
            send_heartbeat=heartbeat.beat,
            send_checkpoint=heartbeat.save_checkpoint,
        )
        try:
            async with heartbeat.in_background():
                with _deferred_tool_execution_scope(execution):
                    outcome = await self._runtime.runner.execute_deferred_tool_call(execution)
        except ToolExecutionError as error:
            return finalize_tool_call(record, AgentToolCallStatus.FAILED, error=str(error))
        finally:
            runner_events.close()
        return _record_outcome(record, outcome, isinstance(self._runtime.runner, ToolTaskPoller))


def _record_outcome(record: AgentToolCall, outcome: object, polls_tasks: bool) -> AgentToolCall:
    """The record after one run of the tool: final, asking a question, or waiting for a task."""
    if isinstance(outcome, ToolExecutionResult):
        return finalize_tool_call(record, AgentToolCallStatus.SUCCEEDED, output=outcome.output)
    if isinstance(outcome, ToolInputRequested):
        return record_tool_question(record, outcome)
    if isinstance(outcome, ToolTaskStarted) and polls_tasks:
        return record_tool_task(record, outcome.task_id, outcome.poll_interval_seconds)
    if isinstance(outcome, ToolTaskStarted):
        status = (
            AgentToolCallStatus.OUTCOME_UNKNOWN
            if tool_effect_rules(record.effect).is_outcome_unknown_after_failure
            else AgentToolCallStatus.FAILED
        )
        return finalize_tool_call(record, status, error=MISSING_TOOL_TASK_POLLER)
    raise TypeError(
        "execute_deferred_tool_call must return ToolExecutionResult, ToolInputRequested, or "
        f"ToolTaskStarted, got {type(outcome).__name__}"
    )


class CallTool(_RunToolStep):
    """Runs one ``read`` or ``idempotent_write`` call: 3 attempts, failure route RecordToolFailure."""


class CallSingleAttemptTool(_RunToolStep):
    """Runs one ``non_idempotent_write`` or ``unclassified`` call once; failure route
    RecordToolOutcomeUnknown."""


class _RecordToolFailureStep(_ToolCallStep):
    """Records a tool Step whose attempts ran out, from the recovery error."""

    _route: ToolFailureRoute

    def get_step_options(self) -> StepOptions | None:
        return None

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        final = record_tool_failure(record, self._route, context.recovery_error)
        finish_tool_call(context, self._events(context, record), final)
        return dead_end()


class RecordToolFailure(_RecordToolFailureStep):
    """Records ``failed`` for a read and ``outcome_unknown`` for a write after CallTool failed."""

    _route = ToolFailureRoute.RECORD_TOOL_FAILURE


class RecordToolOutcomeUnknown(_RecordToolFailureStep):
    """Records ``outcome_unknown`` after CallSingleAttemptTool failed."""

    _route = ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN


def approval_movement(tool_call_id: str) -> StepMovement[str]:
    """Return the movement to ``AwaitToolApproval`` of one call, loading only its record."""
    return StepMovement.of(
        AwaitToolApproval,
        tool_call_id,
        options=tool_call_record_step_options(tool_call_id, locks_interrupts=True),
    )


def tool_step_movement(runtime: SessionRuntime, record: AgentToolCall) -> StepMovement[str]:
    """Return the movement to the tool Step that the call's effect selects."""
    rules = tool_effect_rules(record.effect)
    single = rules.step_type is ToolStepType.CALL_SINGLE_ATTEMPT_TOOL
    step: type[Step[str]] = CallSingleAttemptTool if single else CallTool
    failure_route: type[Step[Any]] = RecordToolOutcomeUnknown if single else RecordToolFailure
    return StepMovement.of(
        step,
        record.tool_call_id,
        options=tool_call_step_options(
            record.tool_call_id,
            limit=runtime.options.tool_call_limit,
            maximum_attempts=rules.max_attempts,
            failure_route=failure_route,
        ),
    )


def _waiting_movement(runtime: SessionRuntime, record: AgentToolCall) -> StepMovement[str]:
    # Deferred imports: the question and task Steps route back to the tool Steps.
    from dex_agents._session.task_steps import poll_movement
    from dex_agents._session.wait_steps import question_movement, timer_movement

    if record.status is AgentToolCallStatus.WAITING_FOR_TASK:
        return poll_movement(runtime, record)
    if record.status is AgentToolCallStatus.WAITING_FOR_TIMER:
        return timer_movement(record.tool_call_id)
    return question_movement(record)


def tool_call_movement(runtime: SessionRuntime, record: AgentToolCall) -> StepMovement[str]:
    """Return the first movement of a new call: its approval wait, or its tool Step."""
    if record.status is AgentToolCallStatus.AWAITING_APPROVAL:
        return approval_movement(record.tool_call_id)
    if record.status is not AgentToolCallStatus.APPROVED:
        return _waiting_movement(runtime, record)
    return tool_step_movement(runtime, record)

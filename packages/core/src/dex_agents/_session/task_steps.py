"""The Steps of a tool task: ``PollToolTask`` polls it, ``CancelToolTask`` abandons it.

A tool that started remote work returns ``ToolTaskStarted``; its tool Step records
``waiting_for_task`` and ends, so no Step or connection is held while the work runs.
``PollToolTask`` waits on a Timer for the poll interval and calls ``poll_tool_task`` once per
execution. ``cancel_turn`` hands an abandoned task to ``CancelToolTask`` (see
:func:`cancel_tool_task_movement`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any, Final

from dex import (
    AsyncContext,
    RetryPolicy,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    dead_end,
    go_to_many,
)

from dex_agents._events import AgentEventWriter
from dex_agents._runner_contract import (
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskCancellation,
    ToolTaskCanceller,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPoller,
)
from dex_agents._session.built_in_transitions import (
    record_tool_question,
    task_poll_interval_seconds,
)
from dex_agents._session.persistence import AGENT_TOOL_CALLS
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
from dex_agents._session.tool_steps import RecordToolFailure, RecordToolOutcomeUnknown
from dex_agents._session.transitions import finalize_tool_call
from dex_agents._tool_policy import ToolStepType, tool_effect_rules
from dex_agents._values import (
    AgentToolCall,
    AgentToolCallStatus,
    CancellationReason,
)

__all__ = [
    "CANCEL_TOOL_TASK_ATTEMPTS",
    "CANCEL_TOOL_TASK_RETRY_BUDGET",
    "CANCEL_TOOL_TASK_TIMEOUT",
    "POLL_TOOL_TASK_ATTEMPTS",
    "CancelToolTask",
    "PollToolTask",
    "cancel_tool_task_movement",
    "poll_movement",
]

POLL_TOOL_TASK_ATTEMPTS: Final = 3
"""Attempts of one poll: a task's poll may fail twice before the call is recorded by its effect."""
CANCEL_TOOL_TASK_ATTEMPTS: Final = 3
"""Attempts, retry budget, and attempt timeout of ``CancelToolTask``."""
CANCEL_TOOL_TASK_RETRY_BUDGET: Final = timedelta(minutes=2)
CANCEL_TOOL_TASK_TIMEOUT: Final = timedelta(seconds=30)


class _TaskStep(Step[str]):
    def __init__(self, runtime: SessionRuntime) -> None:
        self._runtime = runtime

    def get_step_options(self) -> StepOptions | None:
        return None  # Every movement carries its own options, for its own record.

    def _events(self, context: AsyncContext, record: AgentToolCall) -> AgentEventWriter:
        return self._runtime.event_writer(context, record.turn_id)


class PollToolTask(_TaskStep):
    """Polls one call's remote task once, after a Timer for its poll interval.

    A zero Timer while ``task_answer_pending``: the answer to the task's question goes out at once
    as ``poll.pending_answer``. 3 attempts; failure route ``RecordToolFailure`` for read and
    idempotent_write calls, ``RecordToolOutcomeUnknown`` otherwise. Takes no lock.
    """

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.status is not AgentToolCallStatus.WAITING_FOR_TASK:
            return Wait.skip_immediately()
        seconds = 0 if record.task_answer_pending else (record.task_poll_interval_seconds or 1)
        return Wait.until(Timer.by_duration(timedelta(seconds=seconds)))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        if record.status is AgentToolCallStatus.AWAITING_ANSWER:
            return go_to_many(_question_movement(record))
        if record.status is not AgentToolCallStatus.WAITING_FOR_TASK:
            return dead_end()
        # Deferred import: FinishTurnCancellation hands abandoned tasks to this module.
        from dex_agents._session.control_steps import abandon_task_of_cancelled_turn

        abandoned = abandon_task_of_cancelled_turn(context, record)
        if abandoned is not None:
            return abandoned
        runner = self._runtime.runner
        assert isinstance(runner, ToolTaskPoller)  # the tool Step checked it before the task
        events = self._events(context, record)
        heartbeat = Heartbeat(context)
        poll = ToolTaskPoll(
            flow_id=context.flow_id,
            tool_call=record,
            attempt=max(context.attempt, 1),
            events=events,
            input_answers=record.input_answers,
            pending_answer=(
                record.input_answers[-1]
                if record.task_answer_pending and record.input_answers
                else None
            ),
            send_heartbeat=heartbeat.beat,
        )
        try:
            async with heartbeat.in_background():
                outcome = await runner.poll_tool_task(poll)
        except ToolExecutionError as error:
            outcome_record = finalize_tool_call(
                record, AgentToolCallStatus.FAILED, error=str(error)
            )
            finish_tool_call(context, events, outcome_record)
            return dead_end()
        return self._apply(context, events, record, outcome)

    def _apply(
        self,
        context: AsyncContext,
        events: AgentEventWriter,
        record: AgentToolCall,
        outcome: object,
    ) -> StepDecision:
        if isinstance(outcome, ToolExecutionResult):
            final = finalize_tool_call(record, AgentToolCallStatus.SUCCEEDED, output=outcome.output)
            finish_tool_call(context, events, final)
            return dead_end()
        if isinstance(outcome, ToolTaskPending):
            pending = replace(
                record,
                task_poll_interval_seconds=task_poll_interval_seconds(
                    outcome.poll_interval_seconds
                ),
                input_continuation=outcome.continuation,
                task_answer_pending=False,
            )
            AGENT_TOOL_CALLS.set(context, pending.tool_call_id, pending)
            return go_to_many(poll_movement(self._runtime, pending))
        if isinstance(outcome, ToolInputRequested):
            asking = record_tool_question(record, outcome)
            AGENT_TOOL_CALLS.set(context, asking.tool_call_id, asking)
            return go_to_many(_question_movement(asking))
        raise TypeError(
            "poll_tool_task must return ToolExecutionResult, ToolTaskPending, or "
            f"ToolInputRequested, got {type(outcome).__name__}"
        )


class CancelToolTask(_TaskStep):
    """Abandons one call's task after ``cancel_turn``: asks a ``ToolTaskCanceller`` runner to
    cancel it, best-effort, then records ``outcome_unknown`` with ``turn_cancelled``.

    3 attempts in 2 min, 30 s timeout, failure route ``RecordToolOutcomeUnknown``, so the call is
    recorded and the turn ends even when the cancellation keeps failing.
    """

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        abandoned = replace(record, cancellation_reason=CancellationReason.TURN_CANCELLED)
        runner = self._runtime.runner
        if isinstance(runner, ToolTaskCanceller) and record.task_id is not None:
            heartbeat = Heartbeat(context)
            async with heartbeat.in_background():
                await runner.cancel_tool_task(
                    ToolTaskCancellation(
                        flow_id=context.flow_id,
                        tool_call=abandoned,
                        attempt=max(context.attempt, 1),
                        send_heartbeat=heartbeat.beat,
                    )
                )
        final = finalize_tool_call(
            abandoned,
            AgentToolCallStatus.OUTCOME_UNKNOWN,
            cancellation_reason=CancellationReason.TURN_CANCELLED,
        )
        finish_tool_call(context, self._events(context, record), final)
        return dead_end()


def poll_movement(runtime: SessionRuntime, record: AgentToolCall) -> StepMovement[str]:
    """Return the movement to ``PollToolTask`` of one call: 3 attempts, failure route by effect."""
    single = tool_effect_rules(record.effect).step_type is ToolStepType.CALL_SINGLE_ATTEMPT_TOOL
    failure_route: type[Step[Any]] = RecordToolOutcomeUnknown if single else RecordToolFailure
    return StepMovement.of(
        PollToolTask,
        record.tool_call_id,
        options=tool_call_step_options(
            record.tool_call_id,
            limit=runtime.options.tool_call_limit,
            maximum_attempts=POLL_TOOL_TASK_ATTEMPTS,
            failure_route=failure_route,
        ),
    )


def cancel_tool_task_movement(tool_call_id: str) -> StepMovement[str]:
    """Return the movement to ``CancelToolTask`` of one abandoned task.

    ``FinishTurnCancellation`` hands each started task of a cancelled turn to it.

    Example:
        >>> go_to_many(*(cancel_tool_task_movement(call_id) for call_id in started_tasks))
    """
    record_options = tool_call_record_step_options(tool_call_id)
    return StepMovement.of(
        CancelToolTask,
        tool_call_id,
        options=replace(
            record_options,
            execute_method_timeout=CANCEL_TOOL_TASK_TIMEOUT,
            execute_retry=RetryPolicy(
                maximum_attempts=CANCEL_TOOL_TASK_ATTEMPTS,
                total_duration=CANCEL_TOOL_TASK_RETRY_BUDGET,
            ),
        ).on_execute_failure_proceed_to(RecordToolOutcomeUnknown, record_options),
    )


def _question_movement(record: AgentToolCall) -> StepMovement[str]:
    from dex_agents._session.wait_steps import question_movement

    return question_movement(record)

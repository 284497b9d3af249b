"""The Steps of a tool task: ``PollToolTask`` polls it, ``CancelToolTask`` abandons it.

A tool that started remote work returns ``ToolTaskStarted``; its tool Step records
``waiting_for_task`` and ends, so no Step or connection is held while the work runs.
``PollToolTask`` waits on a Timer for the poll interval and calls ``poll_tool_task`` once per
execution. ``cancel_turn`` hands an abandoned task to ``CancelToolTask`` (through
``FinishTurnCancellation``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from dex import AsyncContext, StepDecision, Timer, Wait, dead_end, go_to_many

from dex_agents._event_writer import AgentEventWriter
from dex_agents._runner_contract import (
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
)
from dex_agents._session.built_in_transitions import (
    record_tool_question,
    task_poll_interval_seconds,
)
from dex_agents._session.control import abandon_task_of_cancelled_turn
from dex_agents._session.heartbeat import Heartbeat
from dex_agents._session.persistence import AGENT_TOOL_CALLS
from dex_agents._session.records import finish_tool_call, load_tool_call
from dex_agents._session.step_base import SessionStep
from dex_agents._session.tracing import tool_call_span
from dex_agents._session.transitions import finalize_tool_call
from dex_agents._tool_policy import tool_effect_rules
from dex_agents._tracing.session_tracing import ToolCallSpan
from dex_agents._values import AgentToolCall, AgentToolCallStatus, CancellationReason
from dex_agents.exceptions import ToolExecutionError, ToolTaskPollerMissingError

__all__ = ["CancelToolTask", "PollToolTask"]


class PollToolTask(SessionStep[str]):
    """Polls one call's remote task once, after a Timer for its poll interval.

    A zero Timer while ``task_answer_pending``: the answer to the task's question goes out at once
    as ``poll.pending_answer``. 3 attempts; failure route ``RecordToolFailure`` for read and
    idempotent_write calls, ``RecordToolOutcomeUnknown`` otherwise. ``ToolExecutionError`` records
    ``failed`` at once; ``ToolTaskPollerMissingError`` records the call at once by its effect.
    Takes no lock.
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
            return go_to_many(self._runtime.movements.for_record(record))
        if record.status is not AgentToolCallStatus.WAITING_FOR_TASK:
            return dead_end()
        abandoned = abandon_task_of_cancelled_turn(context, self._runtime, record)
        if abandoned is not None:
            return abandoned
        events = self._runtime.event_writer(context, record.turn_id)
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
        span = tool_call_span(context, self._runtime, type(self).__name__, record)
        try:
            outcome = await self._runtime.runner.poll_tool_task(poll, heartbeat, span)
        except ToolExecutionError as error:
            failed = finalize_tool_call(record, AgentToolCallStatus.FAILED, error=str(error))
            finish_tool_call(context, events, failed)
            return dead_end()
        except ToolTaskPollerMissingError as error:
            # No retry finds a poller this Worker lacks: the same outcome as a runner that polls
            # nothing, by effect, since the task may have had its effect.
            finish_tool_call(context, events, _unpolled(record, str(error)))
            return dead_end()
        return self._apply(context, events, record, outcome, span)

    def _apply(
        self,
        context: AsyncContext,
        events: AgentEventWriter,
        record: AgentToolCall,
        outcome: ToolTaskPollOutcome,
        span: ToolCallSpan,
    ) -> StepDecision:
        if isinstance(outcome, ToolExecutionResult):
            final = finalize_tool_call(record, AgentToolCallStatus.SUCCEEDED, output=outcome.output)
            finish_tool_call(context, events, final)
            span.finished(final)
            return dead_end()
        if isinstance(outcome, ToolInputRequested):
            updated = record_tool_question(record, outcome)
        else:
            updated = replace(
                record,
                task_poll_interval_seconds=task_poll_interval_seconds(
                    outcome.poll_interval_seconds
                ),
                input_continuation=outcome.continuation,
                task_answer_pending=False,
            )
        AGENT_TOOL_CALLS.set(context, updated.tool_call_id, updated)
        span.finished(updated)
        return go_to_many(self._runtime.movements.for_record(updated))


def _unpolled(record: AgentToolCall, detail: str) -> AgentToolCall:
    status = (
        AgentToolCallStatus.OUTCOME_UNKNOWN
        if tool_effect_rules(record.effect).is_outcome_unknown_after_failure
        else AgentToolCallStatus.FAILED
    )
    return finalize_tool_call(record, status, error=detail)


class CancelToolTask(SessionStep[str]):
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
        if record.task_id is not None and self._runtime.runner.cancels_tool_tasks:
            heartbeat = Heartbeat(context)
            await self._runtime.runner.cancel_tool_task(
                ToolTaskCancellation(
                    flow_id=context.flow_id,
                    tool_call=abandoned,
                    attempt=max(context.attempt, 1),
                    send_heartbeat=heartbeat.beat,
                ),
                heartbeat,
            )
        final = finalize_tool_call(
            abandoned,
            AgentToolCallStatus.OUTCOME_UNKNOWN,
            cancellation_reason=CancellationReason.TURN_CANCELLED,
        )
        finish_tool_call(context, self._runtime.event_writer(context, record.turn_id), final)
        return dead_end()

"""The Steps that wait for a person or a clock for one tool call: ``AwaitToolApproval``,
``AwaitQuestionAnswer`` and ``AwaitTimer``.

``AwaitToolApproval`` waits for a person to approve or reject a call, or for its deadline.
``AwaitQuestionAnswer`` serves three kinds of question: an ``ask_user`` call (raised by
``RunModel`` under the tool call ID), a tool's ``ToolInputRequested``, and a task's question from
``PollToolTask`` (both raised here as ``<tool_call_id>-input-<n>`` under the ``PendingInterrupts``
lock). ``AwaitTimer`` waits out a ``durable_wait`` call on a Timer; no coroutine holds the wait.
Each takes the tool call ID as input and loads only that call's record.
"""

from __future__ import annotations

from datetime import timedelta

from dex import AsyncContext, StepDecision, Timer, Wait, dead_end, go_to_many
from dex.condition import Condition

from dex_agents._built_in_tools import remaining_wait_seconds
from dex_agents._event_writer import AgentEventWriter, write_event_payload
from dex_agents._events import InterruptRaisedPayload, InterruptResolvedPayload
from dex_agents._session.built_in_transitions import (
    apply_question_resolution,
    finish_durable_wait,
    interrupt_id_of_question,
    is_ask_user_record,
    is_question_raised,
    next_question_interrupt_id,
    question_resolution_of,
    raise_tool_question,
)
from dex_agents._session.control import settle_unraised_question
from dex_agents._session.persistence import (
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    TOOL_CALL_CANCELLATIONS,
)
from dex_agents._session.records import finish_tool_call, load_tool_call
from dex_agents._session.step_base import SessionStep
from dex_agents._session.transitions import (
    APPROVAL_DEADLINE_PASSED_MESSAGE,
    ApprovalOutcome,
    apply_approval,
    expire_approval,
    finalize_tool_call,
    find_pending_interrupt,
    remove_interrupt,
    seconds_until,
)
from dex_agents._values import (
    AgentInterruptResolution,
    AgentToolCall,
    AgentToolCallStatus,
    CancellationReason,
    InterruptKind,
    QuestionResolution,
)

__all__ = ["AwaitQuestionAnswer", "AwaitTimer", "AwaitToolApproval"]


class AwaitToolApproval(SessionStep[str]):
    """Waits for a person to approve or reject one call, or for its deadline.

    Waits on ``ToolCallCancellations.for_one(id)`` and ``InterruptResolutions.for_one(id)`` plus,
    while the interrupt is pending with a deadline, a Timer for the whole seconds until it. An
    approval moves to the call's tool Step; a rejection or a passed deadline records ``rejected``.
    A Timer that fires while the answer is on its way, or before the deadline, waits again.
    """

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
            return go_to_many(self._runtime.movements.for_record(record))
        events = self._runtime.event_writer(context, record.turn_id)
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
        return go_to_many(self._runtime.movements.for_record(record))

    def _apply_resolution(
        self,
        context: AsyncContext,
        events: AgentEventWriter,
        record: AgentToolCall,
        resolution: AgentInterruptResolution,
    ) -> StepDecision:
        write_event_payload(events, InterruptResolvedPayload.of_approval(resolution))
        updated = apply_approval(record, resolution)
        if updated.is_final:
            finish_tool_call(context, events, updated)
            return dead_end()
        AGENT_TOOL_CALLS.set(context, updated.tool_call_id, updated)
        return go_to_many(self._runtime.movements.for_record(updated))


class AwaitQuestionAnswer(SessionStep[str]):
    """Waits for the answer to one call's question, a decline, or the question's deadline.

    Waits on ``ToolCallCancellations.for_one(id)`` and ``InterruptResolutions.for_one(interrupt_id)``
    plus a deadline Timer while the question is pending, or a zero Timer while a tool's question is
    not raised yet; Execute, holding the ``PendingInterrupts`` lock, raises it. An ``ask_user``
    answer is the call's result; a tool's question returns the call to its tool Step, a task's
    question to ``PollToolTask``.
    """

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.status is not AgentToolCallStatus.AWAITING_ANSWER:
            return Wait.skip_immediately()
        if not is_question_raised(record):
            return Wait.until(Timer.by_duration(timedelta(0)))
        interrupt_id = self._interrupt_id(record)
        conditions: list[Condition] = [
            TOOL_CALL_CANCELLATIONS.for_one(input),
            INTERRUPT_RESOLUTIONS.for_one(interrupt_id),
        ]
        pending = find_pending_interrupt(PENDING_INTERRUPTS.get(context) or [], interrupt_id)
        if pending is not None and pending.deadline is not None:
            seconds = seconds_until(pending.deadline, self._runtime.now())
            conditions.append(Timer.by_duration(timedelta(seconds=seconds)))
        return Wait.any_of(*conditions)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        if record.status is not AgentToolCallStatus.AWAITING_ANSWER:
            return go_to_many(self._runtime.movements.for_record(record))
        events = self._runtime.event_writer(context, record.turn_id)
        if not is_question_raised(record):
            settled = settle_unraised_question(context, self._runtime, events, record)
            if settled is not None:
                return settled
            return self._raise(context, events, record)
        interrupt_id = self._interrupt_id(record)
        resolutions = INTERRUPT_RESOLUTIONS.results(context, interrupt_id)
        if resolutions:
            resolution = resolutions[0]
            kind = question_resolution_of(resolution)
            return self._resolve(context, events, record, interrupt_id, kind, resolution.answer)
        cancellations = TOOL_CALL_CANCELLATIONS.results(context, input)
        if cancellations and record.task_id is None:
            return self._cancel(context, events, record, interrupt_id, cancellations[0].reason)
        if context.has_timer_fired():
            interrupts = PENDING_INTERRUPTS.get(context) or []
            pending = find_pending_interrupt(interrupts, interrupt_id)
            if (
                pending is not None
                and pending.deadline is not None
                and self._runtime.now() >= pending.deadline
            ):
                PENDING_INTERRUPTS.set(context, remove_interrupt(interrupts, interrupt_id))
                return self._resolve(
                    context, events, record, interrupt_id, QuestionResolution.DEADLINE_PASSED, None
                )
        return go_to_many(self._runtime.movements.for_record(record))

    def _interrupt_id(self, record: AgentToolCall) -> str:
        return interrupt_id_of_question(
            record, is_ask_user=is_ask_user_record(record, self._runtime.options.built_in_tools)
        )

    def _raise(
        self, context: AsyncContext, events: AgentEventWriter, record: AgentToolCall
    ) -> StepDecision:
        interrupts = PENDING_INTERRUPTS.get(context) or []
        candidate = next_question_interrupt_id(record)
        ids_in_use = [candidate] if load_tool_call(context, candidate) is not None else []
        raised, interrupt = raise_tool_question(
            record,
            interrupts,
            ids_in_use,
            now=self._runtime.now(),
            deadline_after=self._runtime.options.interrupt_deadline,
        )
        if interrupt is None:
            finish_tool_call(context, events, raised)
            return dead_end()
        PENDING_INTERRUPTS.set(context, [*interrupts, interrupt])
        AGENT_TOOL_CALLS.set(context, raised.tool_call_id, raised)
        write_event_payload(events, InterruptRaisedPayload.of(interrupt, raised))
        return go_to_many(self._runtime.movements.for_record(raised))

    def _resolve(
        self,
        context: AsyncContext,
        events: AgentEventWriter,
        record: AgentToolCall,
        interrupt_id: str,
        resolution: QuestionResolution,
        answer: str | None,
    ) -> StepDecision:
        answered = resolution is QuestionResolution.ANSWERED
        write_event_payload(
            events, InterruptResolvedPayload.of_question(interrupt_id, answered=answered)
        )
        updated = apply_question_resolution(
            record,
            interrupt_id,
            resolution,
            answer,
            is_ask_user=is_ask_user_record(record, self._runtime.options.built_in_tools),
        )
        if updated.is_final:
            finish_tool_call(context, events, updated)
            return dead_end()
        AGENT_TOOL_CALLS.set(context, updated.tool_call_id, updated)
        return go_to_many(self._runtime.movements.for_record(updated))

    def _cancel(
        self,
        context: AsyncContext,
        events: AgentEventWriter,
        record: AgentToolCall,
        interrupt_id: str,
        reason: CancellationReason,
    ) -> StepDecision:
        interrupts = PENDING_INTERRUPTS.get(context) or []
        if find_pending_interrupt(interrupts, interrupt_id) is not None:
            PENDING_INTERRUPTS.set(context, remove_interrupt(interrupts, interrupt_id))
        # Steering removed the question's interrupt; the UI learns why from this event.
        write_event_payload(
            events, InterruptResolvedPayload.withdrawn(interrupt_id, InterruptKind.QUESTION, reason)
        )
        final = finalize_tool_call(
            record,
            AgentToolCallStatus.REJECTED,
            cancellation_reason=record.cancellation_reason or reason,
        )
        finish_tool_call(context, events, final)
        return dead_end()


class AwaitTimer(SessionStep[str]):
    """Waits out one ``durable_wait`` call on a Timer until its ``wait_until``.

    Records ``succeeded`` with ``{"status":"completed","waited_seconds":<n>,"reason":...}``, or
    ``rejected`` when a ``ToolCallCancellations`` wake cancels it first.
    """

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.status is not AgentToolCallStatus.WAITING_FOR_TIMER:
            return Wait.skip_immediately()
        assert record.wait_until is not None
        seconds = remaining_wait_seconds(record.wait_until, self._runtime.now())
        return Wait.any_of(
            TOOL_CALL_CANCELLATIONS.for_one(input),
            Timer.by_duration(timedelta(seconds=seconds)),
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        record = load_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        events = self._runtime.event_writer(context, record.turn_id)
        cancellations = TOOL_CALL_CANCELLATIONS.results(context, input)
        if cancellations:
            final = finalize_tool_call(
                record,
                AgentToolCallStatus.REJECTED,
                cancellation_reason=cancellations[0].reason,
            )
            finish_tool_call(context, events, final)
            return dead_end()
        assert record.wait_until is not None
        if remaining_wait_seconds(record.wait_until, self._runtime.now()) > 0:
            return go_to_many(self._runtime.movements.for_record(record))
        output = finish_durable_wait(record, self._runtime.options.max_durable_wait)
        finish_tool_call(
            context,
            events,
            finalize_tool_call(record, AgentToolCallStatus.SUCCEEDED, output=output),
        )
        return dead_end()

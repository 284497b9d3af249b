"""Steering and turn cancellation where the other Steps meet them.

``steer_user_message`` publishes the steered message and a ``TurnControlRequests`` wake; the turn
ends at its next safe Step boundary (``RunModel``'s start, or ``ResumeTurn`` once every started
tool finished). ``cancel_turn`` records ``TurnCancellationRequest``, cancels the model call,
compaction, and the waiting Steps, and starts ``FinishTurnCancellation``. The functions here are
what ``RunModel``, ``ResumeTurn``, the tool Steps, ``AwaitQuestionAnswer``, ``PollToolTask`` and
``ApplyTurnControl`` do at those boundaries; the pure rules are in ``control_transitions``.
"""

from __future__ import annotations

from dex import AsyncContext, StepDecision, dead_end, go_to_many

from dex_agents._event_writer import AgentEventWriter, write_event_payload
from dex_agents._events import TurnCancelledPayload, TurnSteeredPayload
from dex_agents._session.control_transitions import (
    end_controlled_turn,
    interrupts_steering_cancels,
    turn_control_reason,
)
from dex_agents._session.persistence import (
    AGENT_STATE,
    PENDING_INTERRUPTS,
    STEERED_USER_MESSAGES,
    TOOL_CALL_CANCELLATIONS,
    TURN_CANCELLATION_REQUEST,
)
from dex_agents._session.records import finish_tool_call, load_all_tool_calls
from dex_agents._session.runtime import SessionRuntime
from dex_agents._session.transitions import finalize_tool_call, remove_interrupt
from dex_agents._session.turns import store_unfinished_turn
from dex_agents._values import (
    AgentState,
    AgentToolCall,
    AgentToolCallStatus,
    CancellationReason,
    ToolCallCancellation,
)

__all__ = [
    "abandon_task_of_cancelled_turn",
    "end_turn",
    "end_turn_under_control",
    "reject_unstarted_tool_call",
    "settle_unraised_question",
    "turn_control_reason_now",
    "wake_waits_for_steer",
]


def turn_control_reason_now(
    context: AsyncContext, state: AgentState | None
) -> CancellationReason | None:
    """Return why the active turn must end at this Step boundary (steered or cancelled), or
    ``None``, from the committed steered messages and cancellation request."""
    return turn_control_reason(
        state,
        steered_message_count=STEERED_USER_MESSAGES.size(context),
        cancellation=TURN_CANCELLATION_REQUEST.get(context),
    )


def end_turn(
    context: AsyncContext,
    runtime: SessionRuntime,
    state: AgentState,
    reason: CancellationReason,
    steered_message_count: int,
) -> AgentState:
    """End the active turn as steered or cancelled: store its transcript or note, clear its
    records, and write ``turn_steered`` or ``turn_cancelled``."""
    events = runtime.event_writer(context, state.active_turn_id)
    state = end_controlled_turn(
        store_unfinished_turn(
            context,
            runtime,
            state,
            note_with_transcript=False,
            cancelled=reason is CancellationReason.TURN_CANCELLED,
        )
    )
    AGENT_STATE.set(context, state)
    if reason is CancellationReason.TURN_CANCELLED:
        write_event_payload(events, TurnCancelledPayload(message_count=state.last_message_sequence))
    else:
        write_event_payload(
            events,
            TurnSteeredPayload(
                steered_message_count=steered_message_count,
                message_count=state.last_message_sequence,
            ),
        )
    return state


def end_turn_under_control(
    context: AsyncContext, runtime: SessionRuntime, state: AgentState, reason: CancellationReason
) -> StepDecision:
    """``RunModel``'s start: end the steered or cancelled turn without a model call and move to
    ``ApplyTurnControl``, which starts the next turn with the steered messages.

    The turn ends in this commit, so a concurrent ``FinishTurnCancellation`` finds it ended.
    """
    end_turn(context, runtime, state, reason, STEERED_USER_MESSAGES.size(context))
    return go_to_many(runtime.movements.apply_turn_control())


def wake_waits_for_steer(context: AsyncContext, state: AgentState) -> None:
    """``ResumeTurn``'s steer wake: cancel the pending interrupts of the turn's approvals and of
    questions no task asked, and wake each such wait and every durable wait through
    ``ToolCallCancellations``. Needs the ``PendingInterrupts`` lock and every record."""
    turn_id = state.active_turn_id
    if turn_id is None or not state.accepts_turn_control:
        return
    records = load_all_tool_calls(context)
    interrupts = PENDING_INTERRUPTS.get(context) or []
    removed = interrupts_steering_cancels(interrupts, records, turn_id)
    remaining = list(interrupts)
    for interrupt in removed:
        remaining = remove_interrupt(remaining, interrupt.interrupt_id)
    if removed:
        PENDING_INTERRUPTS.set(context, remaining)
    woken = {interrupt.tool_call_id for interrupt in removed}
    woken.update(
        record.tool_call_id
        for record in records.values()
        if record.turn_id == turn_id and record.status is AgentToolCallStatus.WAITING_FOR_TIMER
    )
    for tool_call_id in sorted(woken):
        TOOL_CALL_CANCELLATIONS.publish(
            context,
            tool_call_id,
            ToolCallCancellation(tool_call_id=tool_call_id, reason=CancellationReason.STEERED),
        )


def reject_unstarted_tool_call(
    context: AsyncContext, events: AgentEventWriter, record: AgentToolCall
) -> bool:
    """A tool Step's first attempt, before ``tool_call_started``: when the turn was steered or
    cancelled, record the call ``rejected`` with the reason and return ``True``; the tool never
    runs."""
    if context.attempt > 1:
        # An earlier attempt may have started the tool: a started call runs to its end.
        return False
    reason = turn_control_reason_now(context, AGENT_STATE.get(context))
    if reason is None:
        return False
    finish_tool_call(
        context,
        events,
        finalize_tool_call(record, AgentToolCallStatus.REJECTED, cancellation_reason=reason),
    )
    return True


def settle_unraised_question(
    context: AsyncContext, runtime: SessionRuntime, events: AgentEventWriter, record: AgentToolCall
) -> StepDecision | None:
    """``AwaitQuestionAnswer`` before it raises a question that a started tool or task asked
    after the turn was steered or cancelled, so the question never waits for a wake already
    spent: a tool's question is recorded ``rejected`` with the reason (the tool took no effect
    yet); a cancelled turn's task goes to ``FinishTurnCancellation``, which abandons it; a task's
    question survives a steer. ``None`` when the question is raised as usual."""
    reason = turn_control_reason_now(context, AGENT_STATE.get(context))
    if reason is None:
        return None
    if record.task_id is not None:
        if reason is CancellationReason.TURN_CANCELLED:
            return go_to_many(runtime.movements.finish_turn_cancellation(record.turn_id))
        return None
    finish_tool_call(
        context,
        events,
        finalize_tool_call(record, AgentToolCallStatus.REJECTED, cancellation_reason=reason),
    )
    return dead_end()


def abandon_task_of_cancelled_turn(
    context: AsyncContext, runtime: SessionRuntime, record: AgentToolCall
) -> StepDecision | None:
    """``PollToolTask`` before it polls: a task of a cancelled turn goes to
    ``FinishTurnCancellation``, which hands it to ``CancelToolTask``; ``None`` otherwise, also
    for a steered turn, whose steer waits for the task's result."""
    reason = turn_control_reason_now(context, AGENT_STATE.get(context))
    if reason is not CancellationReason.TURN_CANCELLED:
        return None
    return go_to_many(runtime.movements.finish_turn_cancellation(record.turn_id))

"""The Steps of steering and turn cancellation: ``ApplyTurnControl`` and ``FinishTurnCancellation``.

``steer_user_message`` publishes the steered message and a ``TurnControlRequests`` wake; the turn
ends at its next safe Step boundary (``RunModel``'s start, or ``ResumeTurn`` once every started
tool finished), and ``ApplyTurnControl`` starts the next turn with every steered message.
``cancel_turn`` records ``TurnCancellationRequest``, cancels the model call, compaction, and the
waiting Steps, and starts ``FinishTurnCancellation``, which settles what those Steps left.
"""

from __future__ import annotations

from dataclasses import replace

from dex import (
    AsyncContext,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    Wait,
    dead_end,
    go_to,
    go_to_many,
)

from dex_agents._events import AgentEventType, AgentEventWriter
from dex_agents._plans import turn_interaction_mode
from dex_agents._session.built_in_transitions import (
    interrupt_id_of_question,
    is_ask_user_record,
    is_question_raised,
)
from dex_agents._session.persistence import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    STEERED_USER_MESSAGES,
    TOOL_CALL_CANCELLATIONS,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from dex_agents._session.step_options import SYNC_STEP_OPTIONS, turn_step_options
from dex_agents._session.step_support import (
    SessionRuntime,
    finish_tool_call,
    load_all_tool_calls,
)
from dex_agents._session.task_steps import cancel_tool_task_movement
from dex_agents._session.tool_steps import approval_movement
from dex_agents._session.transitions import finalize_tool_call, remove_interrupt
from dex_agents._session.turn_control_rules import (
    MAX_STEERED_MESSAGES_PER_TURN,
    FinishTurnCancellationAction,
    WaitingCallAction,
    end_controlled_turn,
    finish_turn_cancellation_plan,
    interrupts_steering_cancels,
    steered_turn_user_messages,
    turn_control_reason,
)
from dex_agents._session.turn_steps import (
    AwaitUserMessage,
    RunModel,
    begin_turn,
    store_unfinished_turn,
)
from dex_agents._session.wait_steps import question_movement, timer_movement
from dex_agents._values import (
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    CancellationReason,
    InterruptKind,
    ToolCallCancellation,
)

__all__ = [
    "ApplyTurnControl",
    "FinishTurnCancellation",
    "abandon_task_of_cancelled_turn",
    "end_turn_under_control",
    "finish_turn_cancellation_movement",
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


def _end_turn(
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
        store_unfinished_turn(context, runtime, state, note_with_transcript=False)
    )
    AGENT_STATE.set(context, state)
    if reason is CancellationReason.TURN_CANCELLED:
        events.write_event(
            AgentEventType.TURN_CANCELLED, {"message_count": state.last_message_sequence}
        )
    else:
        events.write_event(
            AgentEventType.TURN_STEERED,
            {
                "steered_message_count": steered_message_count,
                "message_count": state.last_message_sequence,
            },
        )
    return state


def end_turn_under_control(
    context: AsyncContext, runtime: SessionRuntime, state: AgentState
) -> StepDecision:
    """``RunModel``'s start: end the steered or cancelled turn without a model call and move to
    ``ApplyTurnControl``, which starts the next turn with the steered messages.

    The turn ends in this commit, so a concurrent ``FinishTurnCancellation`` finds it ended.
    """
    reason = turn_control_reason_now(context, state)
    if reason is None:
        raise ValueError("the turn is neither steered nor cancelled")
    _end_turn(context, runtime, state, reason, STEERED_USER_MESSAGES.size(context))
    return go_to(ApplyTurnControl, None)


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
    context: AsyncContext, events: AgentEventWriter, record: AgentToolCall
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
            return go_to_many(finish_turn_cancellation_movement(record.turn_id))
        return None
    finish_tool_call(
        context,
        events,
        finalize_tool_call(record, AgentToolCallStatus.REJECTED, cancellation_reason=reason),
    )
    return dead_end()


def abandon_task_of_cancelled_turn(
    context: AsyncContext, record: AgentToolCall
) -> StepDecision | None:
    """``PollToolTask`` before it polls: a task of a cancelled turn goes to
    ``FinishTurnCancellation``, which hands it to ``CancelToolTask``; ``None`` otherwise, also
    for a steered turn, whose steer waits for the task's result."""
    reason = turn_control_reason_now(context, AGENT_STATE.get(context))
    if reason is not CancellationReason.TURN_CANCELLED:
        return None
    return go_to_many(finish_turn_cancellation_movement(record.turn_id))


class ApplyTurnControl(Step[None]):
    """Consumes every steered message and stale wake; ends an active steered or cancelled turn with
    the runner's unfinished-turn messages or a note, and writes ``turn_steered`` or
    ``turn_cancelled``. Then starts a turn with the steered messages, in order, or waits for a
    user message.

    Locks ``TurnCancellationRequest`` and ``PendingInterrupts`` in execute, so no turn starts
    while ``cancel_turn`` decides.
    """

    def __init__(self, runtime: SessionRuntime) -> None:
        self._runtime = runtime

    def get_step_options(self) -> StepOptions | None:
        return replace(
            turn_step_options(),
            execute_lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_INTERRUPTS.lock()),
        )

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # type: ignore[override]
        return Wait.all_of(
            STEERED_USER_MESSAGES.at_most(MAX_STEERED_MESSAGES_PER_TURN),
            TURN_CONTROL_REQUESTS.at_most(MAX_STEERED_MESSAGES_PER_TURN),
        )

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        steered = list(STEERED_USER_MESSAGES.results(context))
        state = AGENT_STATE.get(context) or AgentState()
        if state.active_turn_id is not None:
            reason = turn_control_reason(
                state,
                steered_message_count=len(steered),
                cancellation=TURN_CANCELLATION_REQUEST.get(context),
            )
            if reason is None:
                # Nothing to apply (a wake whose turn moved on): the turn goes on.
                AGENT_STATE.set(context, replace(state, status=AgentStatus.RUNNING_MODEL))
                return go_to(RunModel, None)
            state = _end_turn(context, self._runtime, state, reason, len(steered))
        texts, plan_mode = steered_turn_user_messages(steered)
        if not texts:
            return go_to(AwaitUserMessage, None)
        mode = turn_interaction_mode(
            [plan_mode and self._runtime.options.plan_mode_enabled], AGENT_PLAN.get(context)
        )
        return begin_turn(context, self._runtime, state, texts, interaction_mode=mode)


class FinishTurnCancellation(Step[str]):
    """Settles what ``cancel_turn`` cancelled, for the cancelled turn ID.

    Locks ``TurnCancellationRequest`` and ``PendingInterrupts``. After a cancelled model call or
    compaction it moves to ``ApplyTurnControl``. While tool calls run, it records each call whose
    wait was cancelled as ``rejected`` with ``turn_cancelled``, hands each started task to
    ``CancelToolTask``, returns a call whose answer committed first to its waiting Step, and ends;
    ``ResumeTurn`` then ends the turn.
    """

    def __init__(self, runtime: SessionRuntime) -> None:
        self._runtime = runtime

    def get_step_options(self) -> StepOptions | None:
        return finish_turn_cancellation_options()

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        records = load_all_tool_calls(context)
        plan = finish_turn_cancellation_plan(
            AGENT_STATE.get(context),
            input,
            records,
            answered_call_ids=frozenset(
                record.tool_call_id
                for record in records.values()
                if self._has_waiting_answer(context, record)
            ),
            now=self._runtime.now(),
        )
        if plan.action is FinishTurnCancellationAction.END:
            return dead_end()
        if plan.action is FinishTurnCancellationAction.APPLY_TURN_CONTROL:
            return go_to(ApplyTurnControl, None)
        events = self._runtime.event_writer(context, input)
        movements: list[StepMovement[str]] = []
        for record, action in plan.calls:
            movement = self._settle(context, events, record, action)
            if movement is not None:
                movements.append(movement)
        return go_to_many(*movements) if movements else dead_end()

    def _interrupt_id(self, record: AgentToolCall) -> str | None:
        if record.status is AgentToolCallStatus.AWAITING_APPROVAL:
            return record.tool_call_id
        if record.status is AgentToolCallStatus.AWAITING_ANSWER and is_question_raised(record):
            is_ask_user = is_ask_user_record(record, self._runtime.options.built_in_tools)
            return interrupt_id_of_question(record, is_ask_user=is_ask_user)
        return None

    def _has_waiting_answer(self, context: AsyncContext, record: AgentToolCall) -> bool:
        interrupt_id = self._interrupt_id(record)
        return interrupt_id is not None and INTERRUPT_RESOLUTIONS.size(context, interrupt_id) > 0

    def _settle(
        self,
        context: AsyncContext,
        events: AgentEventWriter,
        record: AgentToolCall,
        action: WaitingCallAction,
    ) -> StepMovement[str] | None:
        if action is WaitingCallAction.CANCEL_TASK:
            return cancel_tool_task_movement(record.tool_call_id)
        if action is WaitingCallAction.RESUME_WAIT:
            if record.status is AgentToolCallStatus.AWAITING_APPROVAL:
                return approval_movement(record.tool_call_id)
            if record.status is AgentToolCallStatus.AWAITING_ANSWER:
                return question_movement(record)
            return timer_movement(record.tool_call_id)
        if action is WaitingCallAction.REJECT:
            self._reject(context, events, record)
        return None

    def _reject(
        self, context: AsyncContext, events: AgentEventWriter, record: AgentToolCall
    ) -> None:
        interrupt_id = self._interrupt_id(record)
        if interrupt_id is not None:
            interrupts = PENDING_INTERRUPTS.get(context) or []
            remaining = remove_interrupt(interrupts, interrupt_id)
            if len(remaining) != len(interrupts):
                PENDING_INTERRUPTS.set(context, remaining)
            events.write_event(
                AgentEventType.INTERRUPT_RESOLVED,
                {
                    "interrupt_id": interrupt_id,
                    "approved": False,
                    "rejection_message": None,
                    "kind": (
                        InterruptKind.APPROVAL
                        if record.status is AgentToolCallStatus.AWAITING_APPROVAL
                        else InterruptKind.QUESTION
                    ),
                    "answered": False,
                    "cancellation_reason": CancellationReason.TURN_CANCELLED,
                },
            )
        finish_tool_call(
            context,
            events,
            finalize_tool_call(
                record,
                AgentToolCallStatus.REJECTED,
                cancellation_reason=CancellationReason.TURN_CANCELLED,
            ),
        )


def finish_turn_cancellation_options() -> StepOptions:
    """Options of ``FinishTurnCancellation``: every record, both locks in execute."""
    return replace(
        SYNC_STEP_OPTIONS,
        execute_load_attribute_maps=(AGENT_TOOL_CALLS,),
        execute_lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_INTERRUPTS.lock()),
    )


def finish_turn_cancellation_movement(turn_id: str) -> StepMovement[str]:
    """Return the movement ``cancel_turn`` starts: ``FinishTurnCancellation`` of ``turn_id``."""
    return StepMovement.of(
        FinishTurnCancellation, turn_id, options=finish_turn_cancellation_options()
    )

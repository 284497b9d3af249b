"""The Steps of steering and turn cancellation: ``ApplyTurnControl`` and ``FinishTurnCancellation``.

``ApplyTurnControl`` ends a steered or cancelled turn and starts the next turn with every steered
message. ``FinishTurnCancellation``, which ``cancel_turn`` starts, settles what the cancelled Steps
left: the calls whose wait it cancelled, the tasks it abandons, and the answers that committed
first.
"""

from __future__ import annotations

from dataclasses import replace

from dex import AsyncContext, StepDecision, StepMovement, StepOptions, Wait, dead_end, go_to_many

from dex_agents._event_writer import AgentEventWriter, write_event_payload
from dex_agents._events import InterruptResolvedPayload
from dex_agents._plans import turn_interaction_mode
from dex_agents._session.built_in_transitions import (
    interrupt_id_of_question,
    is_ask_user_record,
    is_question_raised,
)
from dex_agents._session.control import end_turn
from dex_agents._session.control_transitions import (
    MAX_STEERED_MESSAGES_PER_TURN,
    FinishTurnCancellationAction,
    WaitingCallAction,
    finish_turn_cancellation_plan,
    steered_turn_user_messages,
    turn_control_reason,
)
from dex_agents._session.persistence import (
    AGENT_PLAN,
    AGENT_STATE,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from dex_agents._session.records import finish_tool_call, load_all_tool_calls
from dex_agents._session.step_base import SessionStep
from dex_agents._session.step_options import (
    apply_turn_control_step_options,
    finish_turn_cancellation_step_options,
)
from dex_agents._session.transitions import finalize_tool_call, remove_interrupt
from dex_agents._session.turns import begin_turn
from dex_agents._values import (
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    CancellationReason,
    InterruptKind,
)

__all__ = ["ApplyTurnControl", "FinishTurnCancellation"]


class ApplyTurnControl(SessionStep[None]):
    """Consumes every steered message and stale wake; ends an active steered or cancelled turn with
    the runner's unfinished-turn messages or a note, and writes ``turn_steered`` or
    ``turn_cancelled``. Then starts a turn with the steered messages, in order, or waits for a
    user message.

    Locks ``TurnCancellationRequest`` and ``PendingInterrupts`` in execute, so no turn starts
    while ``cancel_turn`` decides.
    """

    def get_step_options(self) -> StepOptions | None:
        return apply_turn_control_step_options()

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # type: ignore[override]
        return Wait.all_of(
            STEERED_USER_MESSAGES.at_most(MAX_STEERED_MESSAGES_PER_TURN),
            TURN_CONTROL_REQUESTS.at_most(MAX_STEERED_MESSAGES_PER_TURN),
        )

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        runtime = self._runtime
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
                return go_to_many(runtime.movements.run_model(context))
            state = end_turn(context, runtime, state, reason, len(steered))
        texts, plan_mode = steered_turn_user_messages(steered)
        if not texts:
            return go_to_many(runtime.movements.await_user_message())
        mode = turn_interaction_mode(
            [plan_mode and runtime.options.plan_mode_enabled], AGENT_PLAN.get(context)
        )
        return begin_turn(context, runtime, state, texts, interaction_mode=mode)


class FinishTurnCancellation(SessionStep[str]):
    """Settles what ``cancel_turn`` cancelled, for the cancelled turn ID.

    Locks ``TurnCancellationRequest`` and ``PendingInterrupts``. After a cancelled model call or
    compaction it moves to ``ApplyTurnControl``. While tool calls run, it records each call whose
    wait was cancelled as ``rejected`` with ``turn_cancelled``, hands each started task to
    ``CancelToolTask``, returns a call whose answer committed first to its waiting Step, and ends;
    ``ResumeTurn`` then ends the turn.
    """

    def get_step_options(self) -> StepOptions | None:
        return finish_turn_cancellation_step_options()

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
            return go_to_many(self._runtime.movements.apply_turn_control())
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
            return self._runtime.movements.cancel_tool_task(record.tool_call_id)
        if action is WaitingCallAction.RESUME_WAIT:
            # Its answer committed first: the waiting Step runs again and applies it.
            return self._runtime.movements.for_record(record)
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
            kind = (
                InterruptKind.APPROVAL
                if record.status is AgentToolCallStatus.AWAITING_APPROVAL
                else InterruptKind.QUESTION
            )
            write_event_payload(
                events,
                InterruptResolvedPayload.withdrawn(
                    interrupt_id, kind, CancellationReason.TURN_CANCELLED
                ),
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

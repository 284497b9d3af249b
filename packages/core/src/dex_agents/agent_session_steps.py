"""The turn Steps of the agent session: start, user messages, model calls, resuming, and failure.

``StartAgentSession -> AwaitUserMessage -> RunModel``; ``RunModel`` either completes the turn
(back to ``AwaitUserMessage``) or moves to one Step per tool call plus ``ResumeTurn``, which waits
for every call's ``ToolCallResults`` message and runs the next model call. ``RecordTurnFailure``
is ``RunModel``'s failure route.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Final

from dex import (
    AsyncContext,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    Wait,
    force_fail,
    go_to,
    go_to_many,
)

from dex_agents._agent_session_step_support import (
    Heartbeat,
    SessionRuntime,
    load_all_tool_calls,
    record_usage,
    tool_calls_in_order,
)
from dex_agents.agent_event_writer import AgentEventType, AgentEventWriter
from dex_agents.agent_framework_runner import (
    AgentTurnContext,
    ToolCallsRequested,
    TurnCompleted,
    UnfinishedTurnMessageBuilder,
    build_turn_failure_note,
    validate_tool_calls_requested,
)
from dex_agents.agent_message_store import append_messages, load_messages
from dex_agents.agent_session_persistence import (
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    SESSION_SETTINGS,
    TOOL_CALL_RESULTS,
    TURN_REPLY_SEQUENCE,
    TURN_SESSION_SETTINGS,
)
from dex_agents.agent_session_settings import (
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    TurnSessionSettings,
    decode_session_settings,
    encode_session_settings,
    invalid_start_session_settings_reason,
    session_settings_of_turn,
    session_settings_problem,
)
from dex_agents.agent_session_step_options import (
    message_storing_step_options,
    resume_turn_step_options,
    run_model_step_options,
    turn_failure_step_options,
)
from dex_agents.agent_session_tool_steps import tool_call_movement
from dex_agents.agent_session_transitions import (
    RequestedToolCall,
    complete_turn,
    fail_turn,
    interrupt_for_approval,
    new_tool_call_record,
    start_turn,
    unfinished_tool_calls,
)
from dex_agents.agent_session_values import (
    AgentSessionStartInput,
    AgentState,
    AgentStatus,
    AgentToolCall,
    FrameworkMessage,
    InterruptKind,
    MessageRole,
    TurnReplySequence,
    empty_agent_usage,
)

__all__ = [
    "AwaitUserMessage",
    "RecordTurnFailure",
    "ResumeTurn",
    "RunModel",
    "StartAgentSession",
]

_logger: Final = logging.getLogger("dex_agents.session")


class _TurnStep:
    """Shared constructor: every turn Step holds the Flow's runtime."""

    def __init__(self, runtime: SessionRuntime) -> None:
        self._runtime = runtime


class StartAgentSession(_TurnStep, Step[AgentSessionStartInput]):
    """Start Step: initializes state, usage, interrupts, and settings; starts the first turn when
    the initial message is not blank."""

    def get_step_options(self) -> StepOptions | None:
        return message_storing_step_options()

    async def execute(self, context: AsyncContext, input: AgentSessionStartInput) -> StepDecision:  # type: ignore[override]
        problem = session_settings_problem(
            input.session_settings, tolerance_bytes=SESSION_SETTINGS_SIZE_TOLERANCE_BYTES
        )
        if problem is not None:
            # Retrying cannot make the settings valid, so the session fails at once.
            return force_fail(invalid_start_session_settings_reason(problem))
        AGENT_USAGE.set(context, empty_agent_usage())
        PENDING_INTERRUPTS.set(context, [])
        SESSION_SETTINGS.set(context, encode_session_settings(input.session_settings))
        state = AgentState()
        if not input.initial_message.strip():
            AGENT_STATE.set(context, state)
            return go_to(AwaitUserMessage, None)
        return begin_turn(context, self._runtime, state, input.initial_message)


class AwaitUserMessage(_TurnStep, Step[None]):
    """Waits for the next queued user message and starts a turn with it."""

    def get_step_options(self) -> StepOptions | None:
        return message_storing_step_options()

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # type: ignore[override]
        return Wait.until(QUEUED_USER_MESSAGES.for_one())

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        state = AGENT_STATE.get(context) or AgentState()
        messages = [m for m in QUEUED_USER_MESSAGES.results(context) if m.text.strip()]
        if not messages:
            return go_to(AwaitUserMessage, None)
        return begin_turn(context, self._runtime, state, messages[0].text)


def begin_turn(
    context: AsyncContext, runtime: SessionRuntime, state: AgentState, text: str
) -> StepDecision:
    """Store the user message of a new turn, write ``turn_started``, and move to ``RunModel``."""
    user_message = runtime.runner.build_user_message(text)
    _require_role(user_message, MessageRole.USER, "build_user_message")
    turn_state = start_turn(state)
    turn_state, stored = append_messages(
        context, turn_state, [user_message], turn_id=turn_state.active_turn_id, now=runtime.now()
    )
    AGENT_STATE.set(context, turn_state)
    turn_id = turn_state.active_turn_id
    assert turn_id is not None
    TURN_REPLY_SEQUENCE.set(
        context, TurnReplySequence(turn_id=turn_id, sequence=stored[-1].sequence + 1)
    )
    # The turn keeps the settings it started with, even when they change while it runs.
    settings = decode_session_settings(SESSION_SETTINGS.get(context))
    TURN_SESSION_SETTINGS.set(context, TurnSessionSettings.copy_for_turn(turn_id, settings))
    events = runtime.event_writer(context, turn_state.active_turn_id)
    events.write_event(AgentEventType.TURN_STARTED, {"sequence": stored[-1].sequence})
    return go_to(RunModel, None)


def _require_role(message: object, role: MessageRole, source: str) -> FrameworkMessage:
    if not isinstance(message, FrameworkMessage):
        raise TypeError(f"{source} must return a FrameworkMessage, got {type(message).__name__}")
    if message.role is not role:
        raise ValueError(
            f"{source} must return a message with role {role.value}, got {message.role}"
        )
    return message


class RunModel(_TurnStep, Step[None]):
    """Makes the turn's next model call through ``run_model_step``.

    15 min timeout, 2 min heartbeat timeout, 3 attempts in 30 min (``run_model_limit``), failure
    route ``RecordTurnFailure``.
    """

    def get_step_options(self) -> StepOptions | None:
        return run_model_step_options(self._runtime.options.run_model_limit, RecordTurnFailure)

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        state = AGENT_STATE.get(context)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        runner_events = self._runtime.event_writer(context, state.active_turn_id)
        heartbeat = Heartbeat(context)
        turn = build_turn_context(context, self._runtime, state, runner_events, heartbeat)
        try:
            async with heartbeat.in_background():
                outcome = await self._runtime.runner.run_model_step(turn)
        finally:
            runner_events.close()
        events = self._runtime.event_writer(context, state.active_turn_id)
        if isinstance(outcome, TurnCompleted):
            return self._complete(context, state, turn, outcome, events)
        if isinstance(outcome, ToolCallsRequested):
            return self._defer_tool_calls(context, state, turn, outcome, events)
        raise TypeError(
            "run_model_step must return TurnCompleted or ToolCallsRequested, "
            f"got {type(outcome).__name__}"
        )

    def _complete(
        self,
        context: AsyncContext,
        state: AgentState,
        turn: AgentTurnContext,
        outcome: TurnCompleted,
        events: AgentEventWriter,
    ) -> StepDecision:
        record_usage(context, events, outcome.usage)
        state, _ = append_messages(
            context, state, outcome.new_messages, turn_id=turn.turn_id, now=self._runtime.now()
        )
        clear_turn_records(context, turn.tool_calls)
        AGENT_STATE.set(context, complete_turn(state))
        events.write_event(
            AgentEventType.TURN_COMPLETED, {"message_count": state.last_message_sequence}
        )
        return go_to(AwaitUserMessage, None)

    def _defer_tool_calls(
        self,
        context: AsyncContext,
        state: AgentState,
        turn: AgentTurnContext,
        outcome: ToolCallsRequested,
        events: AgentEventWriter,
    ) -> StepDecision:
        record_usage(context, events, outcome.usage)
        problem = _contract_problem(self._runtime, turn, outcome)
        if problem is not None:
            # A runner defect: retrying the same model call cannot fix it.
            return fail_active_turn(context, self._runtime, state, problem, events)
        now = self._runtime.now()
        state, _ = append_messages(
            context, state, outcome.new_messages, turn_id=turn.turn_id, now=now
        )
        first_order = len(turn.tool_calls)
        records = [
            new_tool_call_record(
                RequestedToolCall(
                    call.tool_call_id,
                    call.tool_name,
                    call.arguments,
                    call.policy,
                    call.tool_source_reference,
                ),
                turn_id=turn.turn_id,
                deferral_order=first_order + index,
                now=now,
            )
            for index, call in enumerate(outcome.tool_calls)
        ]
        interrupts = list(PENDING_INTERRUPTS.get(context) or [])
        for record in records:
            AGENT_TOOL_CALLS.set(context, record.tool_call_id, record)
            events.write_event(
                AgentEventType.TOOL_CALL_DEFERRED,
                {
                    "tool_call_id": record.tool_call_id,
                    "tool_name": record.tool_name,
                    "effect": record.effect,
                    "requires_approval": record.requires_approval,
                },
            )
            if record.requires_approval:
                interrupt = interrupt_for_approval(
                    record, now=now, deadline_after=self._runtime.options.interrupt_deadline
                )
                interrupts.append(interrupt)
                _write_interrupt_raised(events, interrupt.interrupt_id, record, interrupt.deadline)
        PENDING_INTERRUPTS.set(context, interrupts)
        FRAMEWORK_RUN_STATE.set(context, outcome.framework_run_state)
        AGENT_STATE.set(context, replace(state, status=AgentStatus.RUNNING_TOOLS))
        return go_to_many(
            *(tool_call_movement(self._runtime, record) for record in records),
            StepMovement.of(ResumeTurn, len(records), options=resume_turn_step_options()),
        )


def _contract_problem(
    runtime: SessionRuntime, turn: AgentTurnContext, outcome: ToolCallsRequested
) -> str | None:
    try:
        validate_tool_calls_requested(outcome, turn)
    except ValueError as error:
        return f"the runner broke the runner contract: {error}"
    if outcome.new_messages and not isinstance(runtime.runner, UnfinishedTurnMessageBuilder):
        return (
            "the runner broke the runner contract: ToolCallsRequested.new_messages needs "
            "build_unfinished_turn_messages"
        )
    return None


def _write_interrupt_raised(
    events: AgentEventWriter, interrupt_id: str, record: AgentToolCall, deadline: datetime | None
) -> None:
    events.write_event(
        AgentEventType.INTERRUPT_RAISED,
        {
            "interrupt_id": interrupt_id,
            "tool_call_id": record.tool_call_id,
            "tool_name": record.tool_name,
            "deadline": deadline,
            "kind": InterruptKind.APPROVAL,
            "question": None,
            "choices": [],
            "allows_free_text": True,
        },
    )


class ResumeTurn(_TurnStep, Step[int]):
    """Waits for ``ToolCallResults.for_n(expected_result_count)``, then runs the next model call.

    Goes back to waiting when a consumed result left a record of the turn unfinished.
    """

    def get_step_options(self) -> StepOptions | None:
        return resume_turn_step_options()

    async def wait_for(self, context: AsyncContext, input: int) -> Wait:  # type: ignore[override]
        if input <= 0:
            return Wait.skip_immediately()
        return Wait.until(TOOL_CALL_RESULTS.for_n(input))

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        state = AGENT_STATE.get(context)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        unfinished = unfinished_tool_calls(load_all_tool_calls(context), state.active_turn_id)
        if unfinished:
            return go_to_many(
                StepMovement.of(ResumeTurn, len(unfinished), options=resume_turn_step_options())
            )
        AGENT_STATE.set(context, replace(state, status=AgentStatus.RUNNING_MODEL))
        return go_to(RunModel, None)


class RecordTurnFailure(_TurnStep, Step[None]):
    """``RunModel``'s failure route: records ``last_turn_error``, stores the runner's
    unfinished-turn messages and a turn-failure note when tools ran, and clears the turn."""

    def get_step_options(self) -> StepOptions | None:
        return turn_failure_step_options()

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        state = AGENT_STATE.get(context)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        recovery = context.recovery_error
        error = recovery.detail if recovery is not None and recovery.detail else "the turn failed"
        events = self._runtime.event_writer(context, state.active_turn_id)
        return fail_active_turn(context, self._runtime, state, error, events)


def build_turn_context(
    context: AsyncContext,
    runtime: SessionRuntime,
    state: AgentState,
    events: AgentEventWriter,
    heartbeat: Heartbeat | None = None,
) -> AgentTurnContext:
    """Return the runner's view of the active turn from committed state."""
    assert state.active_turn_id is not None
    records = {
        key: record
        for key, record in load_all_tool_calls(context).items()
        if record.turn_id == state.active_turn_id
    }
    return AgentTurnContext(
        flow_id=context.flow_id,
        turn_id=state.active_turn_id,
        attempt=max(context.attempt, 1),
        messages=tuple(load_messages(context)),
        framework_run_state=FRAMEWORK_RUN_STATE.get(context),
        tool_calls=records,
        events=events,
        step_execution_id=context.step_execution_id,
        tool_policies=runtime.options.tool_policies,
        default_tool_effect=runtime.options.default_tool_effect,
        interaction_mode=state.interaction_mode,
        session_settings=session_settings_of_turn(
            TURN_SESSION_SETTINGS.get(context), state.active_turn_id
        ),
        send_heartbeat=heartbeat.beat if heartbeat is not None else context.heartbeat,
    )


def fail_active_turn(
    context: AsyncContext,
    runtime: SessionRuntime,
    state: AgentState,
    error: str,
    events: AgentEventWriter,
) -> StepDecision:
    """End the active turn as failed and move to ``AwaitUserMessage``.

    Stores the runner's unfinished-turn messages when it builds them, then, when the turn has final
    tool call records, one turn-failure note, so the next turn's model does not repeat a write.
    """
    turn = build_turn_context(context, runtime, state, AgentEventWriter.discarding())
    final_records = [record for record in tool_calls_in_order(turn.tool_calls) if record.is_final]
    messages = [*_unfinished_turn_messages(runtime, turn)]
    if final_records:
        note = runtime.runner.build_user_message(build_turn_failure_note(final_records))
        messages.append(_require_role(note, MessageRole.USER, "build_user_message"))
    state, _ = append_messages(context, state, messages, turn_id=turn.turn_id, now=runtime.now())
    clear_turn_records(context, turn.tool_calls)
    AGENT_STATE.set(context, fail_turn(state, error))
    events.write_event(AgentEventType.TURN_FAILED, {"error": error})
    return go_to(AwaitUserMessage, None)


def _unfinished_turn_messages(
    runtime: SessionRuntime, turn: AgentTurnContext
) -> Sequence[FrameworkMessage]:
    runner = runtime.runner
    if not isinstance(runner, UnfinishedTurnMessageBuilder):
        return ()
    try:
        messages = tuple(runner.build_unfinished_turn_messages(turn))
    except Exception:
        _logger.warning(
            "build_unfinished_turn_messages failed; storing only the note", exc_info=True
        )
        return ()
    if not all(isinstance(message, FrameworkMessage) for message in messages):
        _logger.warning(
            "build_unfinished_turn_messages returned something other than FrameworkMessage values; "
            "storing only the note"
        )
        return ()
    return messages


def clear_turn_records(context: AsyncContext, records: Mapping[str, AgentToolCall]) -> None:
    """Delete the turn's records, its run state, and its pending interrupts."""
    turn_ids = {record.turn_id for record in records.values()}
    for tool_call_id in records:
        AGENT_TOOL_CALLS.delete(context, tool_call_id)
    FRAMEWORK_RUN_STATE.delete(context)
    interrupts = PENDING_INTERRUPTS.get(context) or []
    remaining = [item for item in interrupts if item.turn_id not in turn_ids]
    if len(remaining) != len(interrupts):
        PENDING_INTERRUPTS.set(context, remaining)

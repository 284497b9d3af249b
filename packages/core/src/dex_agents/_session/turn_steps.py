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
from enum import Enum
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

from dex_agents._events import AgentEventType, AgentEventWriter
from dex_agents._plans import turn_interaction_mode
from dex_agents._runner_contract import (
    AgentTurnContext,
    ToolCallsRequested,
    TurnCompleted,
    UnfinishedTurnMessageBuilder,
    build_turn_failure_note,
    validate_tool_calls_requested,
)
from dex_agents._session.built_in_calls import commit_call_settlements
from dex_agents._session.built_in_transitions import settle_requested_calls
from dex_agents._session.compaction_steps import (
    compact_context_movement,
    decide_turn_compaction,
    summary_of_session,
    warn_when_messages_were_deleted,
)
from dex_agents._session.message_decode_cache import MessageDecodeCache
from dex_agents._session.message_store import append_messages, load_messages, message_chunk_loads
from dex_agents._session.persistence import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    SESSION_SETTINGS,
    TOOL_CALL_RESULTS,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
    TURN_REPLY_SEQUENCE,
    TURN_SESSION_SETTINGS,
)
from dex_agents._session.plans import (
    plan_approval_condition,
    start_executing_turn,
    take_plan_approval,
)
from dex_agents._session.settings import (
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    TurnSessionSettings,
    decode_session_settings,
    encode_session_settings,
    invalid_start_session_settings_reason,
    session_settings_of_turn,
    session_settings_problem,
)
from dex_agents._session.step_options import (
    message_storing_step_options,
    resume_turn_step_options,
    run_model_step_options,
    turn_failure_step_options,
    with_selected_message_chunks,
)
from dex_agents._session.step_support import (
    Heartbeat,
    SessionRuntime,
    load_all_tool_calls,
    record_usage,
    tool_calls_in_order,
)
from dex_agents._session.tool_steps import tool_call_movement
from dex_agents._session.transitions import (
    RequestedToolCall,
    complete_turn,
    fail_turn,
    interrupt_for_approval,
    new_tool_call_record,
    start_turn,
    unfinished_tool_calls,
)
from dex_agents._spend_limit import (
    ModelCallIdentity,
    ModelCallKind,
    ModelSpendReport,
    check_model_spend,
    model_spend_limit_error,
)
from dex_agents._values import (
    AgentSessionStartInput,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentUsage,
    ContextSummary,
    FrameworkMessage,
    InteractionMode,
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
        mode = turn_interaction_mode(
            [input.plan_mode and self._runtime.options.plan_mode_enabled], None
        )
        return begin_turn(
            context, self._runtime, state, input.initial_message, interaction_mode=mode
        )


class AwaitUserMessage(_TurnStep, Step[None]):
    """Waits for a steer or the next queued user message and starts a turn with it.

    Locks ``TurnCancellationRequest`` in execute, so no turn starts while ``cancel_turn`` decides.
    """

    def get_step_options(self) -> StepOptions | None:
        return replace(
            message_storing_step_options(),
            execute_lock_attributes=(TURN_CANCELLATION_REQUEST.lock(),),
        )

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # type: ignore[override]
        # In this order: a steer that arrived as the turn ended comes before a queued message,
        # and a queued message before an approval of the current plan revision.
        conditions = [TURN_CONTROL_REQUESTS.for_one(), QUEUED_USER_MESSAGES.for_one()]
        approval = plan_approval_condition(context)
        return Wait.any_of(*conditions, *([approval] if approval is not None else []))

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        if TURN_CONTROL_REQUESTS.results(context):
            # Imported on use: the turn control Steps start turns through this module.
            from dex_agents._session.control_steps import ApplyTurnControl

            return go_to(ApplyTurnControl, None)
        state = AGENT_STATE.get(context) or AgentState()
        messages = [m for m in QUEUED_USER_MESSAGES.results(context) if m.text.strip()]
        # A message that came with an approval wins; the approval is then dropped.
        approval = take_plan_approval(context)
        if messages:
            mode = turn_interaction_mode(
                [messages[0].plan_mode and self._runtime.options.plan_mode_enabled],
                AGENT_PLAN.get(context),
            )
            return begin_turn(
                context, self._runtime, state, messages[0].text, interaction_mode=mode
            )
        if approval is not None and approval.is_current:
            return start_executing_turn(context, self._runtime, state, approval)
        return go_to(AwaitUserMessage, None)


def begin_turn(
    context: AsyncContext,
    runtime: SessionRuntime,
    state: AgentState,
    text: str | Sequence[str],
    *,
    interaction_mode: InteractionMode = InteractionMode.CHAT,
) -> StepDecision:
    """Store the user message of a new turn, write ``turn_started``, and move to ``RunModel``.

    A turn that steering starts has several user messages, every steered message in order.
    ``interaction_mode`` is ``planning`` for a plan-mode message or a draft plan (see
    ``turn_interaction_mode``) and ``executing`` after a plan approval.
    """
    texts = [text] if isinstance(text, str) else list(text)
    user_messages = [
        _require_role(
            runtime.runner.build_user_message(item), MessageRole.USER, "build_user_message"
        )
        for item in texts
    ]
    turn_state = replace(start_turn(state), interaction_mode=interaction_mode)
    turn_state, stored = append_messages(
        context,
        turn_state,
        user_messages,
        turn_id=turn_state.active_turn_id,
        now=runtime.now(),
        limits=runtime.options.message_storage_limits,
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
    events.write_event(AgentEventType.TURN_STARTED, {"sequence": stored[0].sequence})
    return run_model_movement(context, runtime)


def run_model_movement(context: AsyncContext, runtime: SessionRuntime) -> StepDecision:
    """Move to ``RunModel``; with a summary, its movement loads only the chunks after it."""
    summary = summary_of_session(context, runtime)
    if summary is None:
        # Without compaction the model input is every message: the Step's own options load all.
        return go_to(RunModel, None)
    options = with_selected_message_chunks(
        run_model_step_options(runtime.options.run_model_limit, RecordTurnFailure),
        message_chunk_loads(context, after_sequence=summary.last_sequence),
    )
    return go_to_many(StepMovement.of(RunModel, None, options=options))


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
        # Imported on use: the turn control Steps start turns through this module.
        from dex_agents._session.control_steps import (
            end_turn_under_control,
            turn_control_reason_now,
        )

        if turn_control_reason_now(context, state) is not None:
            # A steered or cancelled turn ends here, before another model call.
            return end_turn_under_control(context, self._runtime, state)
        runner_events = self._runtime.event_writer(context, state.active_turn_id)
        heartbeat = Heartbeat(context)
        # Nothing is written yet, so the decoded-message cache may serve this read.
        turn = build_turn_context(
            context,
            self._runtime,
            state,
            runner_events,
            heartbeat,
            message_cache=self._runtime.message_cache,
        )
        through_sequence = await decide_turn_compaction(self._runtime, turn)
        if through_sequence is not None:
            runner_events.close()
            return compact_context_movement(context, self._runtime, state, through_sequence)
        warn_when_messages_were_deleted(context, self._runtime)
        spend_call = model_call_identity(
            context, self._runtime, turn.turn_id, turn.session_settings, ModelCallKind.TURN
        )
        refusal = await check_model_spend(self._runtime.options.model_spend_limit, spend_call)
        if refusal is not None:
            runner_events.close()
            error = model_spend_limit_error(refusal)
            events = self._runtime.event_writer(context, state.active_turn_id)
            return fail_active_turn(context, self._runtime, state, error, events)
        try:
            async with heartbeat.in_background():
                outcome = await self._runtime.runner.run_model_step(turn)
        finally:
            runner_events.close()
        events = self._runtime.event_writer(context, state.active_turn_id)
        await report_model_spend(self._runtime, spend_call, outcome)
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
            context,
            state,
            outcome.new_messages,
            turn_id=turn.turn_id,
            now=self._runtime.now(),
            limits=self._runtime.options.message_storage_limits,
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
            context,
            state,
            outcome.new_messages,
            turn_id=turn.turn_id,
            now=now,
            limits=self._runtime.options.message_storage_limits,
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
        settlements = settle_requested_calls(
            records,
            enabled_built_in_tools=self._runtime.options.built_in_tools,
            interaction_mode=state.interaction_mode,
            plan=turn.plan,
            max_durable_wait=self._runtime.options.max_durable_wait,
            interrupt_deadline=self._runtime.options.interrupt_deadline,
            now=now,
        )
        records = [settlement.record for settlement in settlements]
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
        interrupts.extend(commit_call_settlements(context, events, settlements))
        PENDING_INTERRUPTS.set(context, interrupts)
        FRAMEWORK_RUN_STATE.set(context, outcome.framework_run_state)
        AGENT_STATE.set(context, replace(state, status=AgentStatus.RUNNING_TOOLS))
        return go_to_many(
            *(
                tool_call_movement(self._runtime, record)
                for record in records
                if not record.is_final
            ),
            StepMovement.of(ResumeTurn, len(records), options=resume_turn_step_options()),
        )


def model_call_identity(
    context: AsyncContext,
    runtime: SessionRuntime,
    turn_id: str,
    session_settings: Mapping[str, object],
    kind: ModelCallKind,
) -> ModelCallIdentity:
    """Return the identity of the model call this Step attempt makes, for the spend limit."""
    return ModelCallIdentity(
        flow_type=runtime.flow_type,
        flow_id=context.flow_id,
        turn_id=turn_id,
        step_execution_id=context.step_execution_id,
        attempt=max(context.attempt, 1),
        kind=kind,
        session_settings=session_settings,
    )


async def report_model_spend(
    runtime: SessionRuntime, call: ModelCallIdentity, outcome: object
) -> None:
    """Tell the spend limit, when there is one, what the model call used."""
    limit = runtime.options.model_spend_limit
    usage = getattr(outcome, "usage", None)
    if limit is not None and isinstance(usage, AgentUsage):
        await limit.record_model_usage(ModelSpendReport(call=call, usage=usage))


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
        return Wait.any_of(TOOL_CALL_RESULTS.for_n(input), TURN_CONTROL_REQUESTS.for_one())

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        state = AGENT_STATE.get(context)
        if state is None or state.active_turn_id is None:
            return go_to(AwaitUserMessage, None)
        # Imported on use: the turn control Steps start turns through this module.
        from dex_agents._session.control_steps import (
            ApplyTurnControl,
            turn_control_reason_now,
            wake_waits_for_steer,
        )

        if TURN_CONTROL_REQUESTS.results(context):
            # A steer wake: cancel the turn's waits for a person or a Timer, then wait again.
            wake_waits_for_steer(context, state)
            return go_to_many(
                StepMovement.of(ResumeTurn, input, options=resume_turn_step_options())
            )
        unfinished = unfinished_tool_calls(load_all_tool_calls(context), state.active_turn_id)
        if unfinished:
            return go_to_many(
                StepMovement.of(ResumeTurn, len(unfinished), options=resume_turn_step_options())
            )
        if turn_control_reason_now(context, state) is not None:
            return go_to(ApplyTurnControl, None)
        AGENT_STATE.set(context, replace(state, status=AgentStatus.RUNNING_MODEL))
        return run_model_movement(context, self._runtime)


class FailedStepInput(Enum):
    """``RecordTurnFailure``'s input: the failing Step's input, which it ignores.

    Dex hands a failure route the failing Step's input: ``None`` from ``RunModel``, a
    ``CompactContextInput`` object from ``CompactContext``. The SDK decodes an Enum input by calling
    the Enum, so :meth:`_missing_` reads any other JSON value as :attr:`IGNORED` too.
    """

    IGNORED = None

    @classmethod
    def _missing_(cls, value: object) -> FailedStepInput:
        return cls.IGNORED


class RecordTurnFailure(_TurnStep, Step[FailedStepInput]):
    """``RunModel``'s failure route: records ``last_turn_error``, stores the runner's
    unfinished-turn messages and a turn-failure note when tools ran, and clears the turn."""

    def get_step_options(self) -> StepOptions | None:
        return turn_failure_step_options()

    async def execute(self, context: AsyncContext, input: FailedStepInput) -> StepDecision:  # type: ignore[override]
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
    *,
    message_cache: MessageDecodeCache | None = None,
) -> AgentTurnContext:
    """Return the runner's view of the active turn from committed state.

    With compaction, ``messages`` start after ``ContextSummary`` and ``context_summary`` holds it.
    Pass ``message_cache`` only before this invocation writes messages.
    """
    assert state.active_turn_id is not None
    summary = summary_of_session(context, runtime)
    records = {
        key: record
        for key, record in load_all_tool_calls(context).items()
        if record.turn_id == state.active_turn_id
    }
    return AgentTurnContext(
        flow_id=context.flow_id,
        turn_id=state.active_turn_id,
        attempt=max(context.attempt, 1),
        messages=tuple(
            load_messages(context, after_sequence=_summary_end(summary), cache=message_cache)
        ),
        context_summary=summary,
        framework_run_state=FRAMEWORK_RUN_STATE.get(context),
        tool_calls=records,
        events=events,
        step_execution_id=context.step_execution_id,
        tool_policies=runtime.options.tool_policies,
        default_tool_effect=runtime.options.default_tool_effect,
        interaction_mode=state.interaction_mode,
        enabled_built_in_tools=frozenset(runtime.options.built_in_tools),
        plan=AGENT_PLAN.get(context),
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
    state = store_unfinished_turn(context, runtime, state, note_with_transcript=True)
    AGENT_STATE.set(context, fail_turn(state, error))
    events.write_event(AgentEventType.TURN_FAILED, {"error": error})
    return go_to(AwaitUserMessage, None)


def store_unfinished_turn(
    context: AsyncContext,
    runtime: SessionRuntime,
    state: AgentState,
    *,
    note_with_transcript: bool,
) -> AgentState:
    """Store what an unfinished turn did and clear its records; return the state with them.

    Stores the runner's unfinished-turn messages when it builds them and, when the turn has final
    tool call records, one note listing them, so the next turn's model does not repeat a write. A
    failed turn stores both (``note_with_transcript``); a steered or cancelled turn stores the note
    only when the runner builds no transcript.
    """
    turn = build_turn_context(context, runtime, state, AgentEventWriter.discarding())
    final_records = [record for record in tool_calls_in_order(turn.tool_calls) if record.is_final]
    messages = [*_unfinished_turn_messages(runtime, turn)]
    if final_records and (note_with_transcript or not messages):
        note = runtime.runner.build_user_message(build_turn_failure_note(final_records))
        messages.append(_require_role(note, MessageRole.USER, "build_user_message"))
    state, _ = append_messages(
        context,
        state,
        messages,
        turn_id=turn.turn_id,
        now=runtime.now(),
        limits=runtime.options.message_storage_limits,
    )
    clear_turn_records(context, turn.tool_calls)
    return state


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


def _summary_end(summary: ContextSummary | None) -> int | None:
    return summary.last_sequence if summary is not None else None

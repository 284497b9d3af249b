"""What several Steps do to a turn the same way: start it, show it to the runner, end it unfinished.

``StartAgentSession``, ``AwaitUserMessage``, ``ApplyTurnControl`` and a plan approval start turns
with :func:`begin_turn`; ``RunModel``, ``CompactContext`` and ``RecordTurnFailure`` fail them with
:func:`fail_active_turn`; steering and cancellation end them with :func:`store_unfinished_turn`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from dex import AsyncContext, StepDecision, go_to_many

from dex_agents._event_writer import AgentEventWriter, write_event_payload
from dex_agents._events import TurnFailedPayload, TurnStartedPayload
from dex_agents._runner_contract import (
    AgentTurnContext,
    build_turn_cancelled_note,
    build_turn_failure_note,
)
from dex_agents._session.compaction import summary_of_session
from dex_agents._session.heartbeat import Heartbeat
from dex_agents._session.message_decode_cache import MessageDecodeCache
from dex_agents._session.message_store import append_messages, load_messages
from dex_agents._session.persistence import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_ATTEMPT_CLAIMS,
    AGENT_TOOL_CALLS,
    FRAMEWORK_RUN_STATE,
    PENDING_INTERRUPTS,
    SESSION_SETTINGS,
    TURN_REPLY_SEQUENCE,
    TURN_SESSION_SETTINGS,
)
from dex_agents._session.records import load_all_tool_calls, tool_calls_in_order
from dex_agents._session.runtime import SessionRuntime
from dex_agents._session.settings import (
    TurnSessionSettings,
    decode_session_settings,
    session_settings_of_turn,
)
from dex_agents._session.tracing import begin_user_message_activation
from dex_agents._session.transitions import fail_turn, start_turn
from dex_agents._tool_outcome_check import ToolOutcomeCheckStatus
from dex_agents._tool_policy import ToolStepType, tool_effect_rules
from dex_agents._values import (
    AgentMessage,
    AgentState,
    AgentToolCall,
    FrameworkMessage,
    InteractionMode,
    TurnReplySequence,
)

__all__ = [
    "begin_turn",
    "build_turn_context",
    "clear_turn_records",
    "fail_active_turn",
    "store_messages",
    "store_unfinished_turn",
]


def begin_turn(
    context: AsyncContext,
    runtime: SessionRuntime,
    state: AgentState,
    text: str | Sequence[str],
    *,
    step_type: str,
    interaction_mode: InteractionMode = InteractionMode.CHAT,
) -> StepDecision:
    """Store the user message of a new turn, write ``turn_started``, begin the turn's activation
    (its ``invoke_agent`` root, emitted by ``step_type``), and move to ``RunModel``.

    A turn that steering starts has several user messages, every steered message in order.
    ``interaction_mode`` is ``planning`` for a plan-mode message or a draft plan (see
    ``turn_interaction_mode``) and ``executing`` after a plan approval.
    """
    texts = [text] if isinstance(text, str) else list(text)
    user_messages = [runtime.runner.build_user_message(item) for item in texts]
    turn_state = replace(start_turn(state), interaction_mode=interaction_mode)
    turn_state, stored = store_messages(
        context, runtime, turn_state, user_messages, turn_id=turn_state.active_turn_id
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
    begin_user_message_activation(context, runtime, step_type, turn_id, stored)
    events = runtime.event_writer(context, turn_id)
    write_event_payload(events, TurnStartedPayload(sequence=stored[0].sequence))
    return go_to_many(runtime.movements.run_model(context))


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
    summary = summary_of_session(context, runtime.options)
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
            load_messages(
                context,
                after_sequence=summary.last_sequence if summary is not None else None,
                cache=message_cache,
            )
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
    write_event_payload(events, TurnFailedPayload(error=error))
    return go_to_many(runtime.movements.await_user_message())


def store_unfinished_turn(
    context: AsyncContext,
    runtime: SessionRuntime,
    state: AgentState,
    *,
    note_with_transcript: bool,
    cancelled: bool = False,
) -> AgentState:
    """Store what an unfinished turn did and clear its records; return the state with them.

    Stores the runner's unfinished-turn messages when it builds them and, when the turn has final
    tool call records, one note listing them, so the next turn's model does not repeat a write. A
    failed turn stores both (``note_with_transcript``); a steered turn stores the note only when
    the runner builds no transcript. A ``cancelled`` turn always ends with
    ``build_turn_cancelled_note``, in every runner: its user message may have no answer, and the
    next turn's model must see that the user stopped it.
    """
    turn = build_turn_context(context, runtime, state, AgentEventWriter.discarding())
    final_records = [record for record in tool_calls_in_order(turn.tool_calls) if record.is_final]
    messages: list[FrameworkMessage] = [*runtime.runner.build_unfinished_turn_messages(turn)]
    if cancelled:
        messages.append(runtime.runner.build_user_message(build_turn_cancelled_note(final_records)))
    elif final_records and (note_with_transcript or not messages):
        messages.append(runtime.runner.build_user_message(build_turn_failure_note(final_records)))
    state, _ = store_messages(
        context, runtime, state, messages, turn_id=turn.turn_id, tool_calls=turn.tool_calls
    )
    clear_turn_records(context, turn.tool_calls)
    return state


def store_messages(
    context: AsyncContext,
    runtime: SessionRuntime,
    state: AgentState,
    messages: Sequence[FrameworkMessage],
    *,
    turn_id: str | None,
    now: datetime | None = None,
    tool_calls: Mapping[str, AgentToolCall] | None = None,
) -> tuple[AgentState, list[AgentMessage]]:
    """Store ``messages`` of ``turn_id`` with the Flow type's storage limits; see
    ``append_messages``, which also applies rollover and retention (with no message too).

    A result of one of ``tool_calls`` (the turn's records) whose outcome check answered carries
    the answer: the record is deleted when the turn ends, the stored message stays."""
    return append_messages(
        context,
        state,
        messages,
        turn_id=turn_id,
        now=now if now is not None else runtime.now(),
        limits=runtime.options.message_storage_limits,
        outcome_checks=_answered_outcome_checks(tool_calls or {}),
    )


def _answered_outcome_checks(
    records: Mapping[str, AgentToolCall],
) -> dict[str, ToolOutcomeCheckStatus]:
    return {
        record.tool_call_id: record.outcome_check
        for record in records.values()
        if record.outcome_check not in (None, ToolOutcomeCheckStatus.PENDING)
    }


def clear_turn_records(context: AsyncContext, records: Mapping[str, AgentToolCall]) -> None:
    """Delete the turn's records, its run state, and its pending interrupts."""
    turn_ids = {record.turn_id for record in records.values()}
    for tool_call_id, record in records.items():
        AGENT_TOOL_CALLS.delete(context, tool_call_id)
        if tool_effect_rules(record.effect).step_type is ToolStepType.CALL_SINGLE_ATTEMPT_TOOL:
            # A late claim then finds no record and is refused, so nothing is written again.
            AGENT_TOOL_ATTEMPT_CLAIMS.delete(context, tool_call_id)
    FRAMEWORK_RUN_STATE.delete(context)
    interrupts = PENDING_INTERRUPTS.get(context) or []
    remaining = [item for item in interrupts if item.turn_id not in turn_ids]
    if len(remaining) != len(interrupts):
        PENDING_INTERRUPTS.set(context, remaining)

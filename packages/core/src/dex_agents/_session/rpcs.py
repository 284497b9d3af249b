"""The bodies of the session RPCs: answers, steering, cancellation, settings, and the snapshot.

``AgentSessionFlow`` declares the RPCs (their locks and loads); these functions read the RPC's
Context, ask the pure decisions (:mod:`dex_agents._session.transitions`,
:mod:`dex_agents._session.built_in_transitions`, :mod:`dex_agents._session.control_transitions`),
and stage the writes, so the Flow class stays a list of declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from dex import Channel, Context

from dex_agents._session.built_in_transitions import decide_question_answer
from dex_agents._session.control_transitions import (
    CancelTurnDecision,
    SteerDecision,
    decide_cancel_turn,
    decide_steer,
    turn_cancellation_request,
)
from dex_agents._session.message_decode_cache import MessageDecodeCache
from dex_agents._session.message_store import load_newest_messages
from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.persistence import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_USAGE,
    CONTEXT_SUMMARY,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    SESSION_SETTINGS,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from dex_agents._session.records import load_all_tool_calls, tool_calls_in_order
from dex_agents._session.runner_facade import RunnerFacade
from dex_agents._session.settings import (
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    decode_session_settings,
    encode_session_settings,
    session_settings_problem,
)
from dex_agents._session.size_budgets import (
    fit_snapshot,
    reply_text_problem,
    user_text_problem,
)
from dex_agents._session.transitions import (
    InterruptResolutionDecision,
    decide_interrupt_resolution,
)
from dex_agents._text_validity import is_blank_text, replace_unencodable_values
from dex_agents._values import (
    SNAPSHOT_MESSAGE_LIMIT,
    AgentSnapshot,
    AgentState,
    AgentUserMessage,
    AnswerQuestionRequest,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    QueuedUserMessage,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    TurnControlKind,
    TurnControlRequest,
    UpdateSessionSettingsRequest,
    empty_agent_usage,
)

__all__ = [
    "agent_snapshot",
    "agent_state",
    "answer_question",
    "delete_queued_message",
    "listed_messages",
    "next_turn_session_settings",
    "record_turn_cancellation",
    "resolve_interrupt",
    "send_user_message",
    "steer_user_message",
    "update_session_settings",
]


def send_user_message(
    context: Context,
    message: AgentUserMessage,
    options: AgentSessionOptions,
    runner: RunnerFacade,
) -> bool:
    """Stage a queued user message; ``False`` for blank text, text the session cannot store (a
    lone surrogate, or over ``MAX_STORED_MESSAGE_BYTES`` as stored), and for ``plan_mode`` while
    plan mode is off."""
    if is_blank_text(message.text):
        return False
    if user_text_problem(runner.build_user_message, message.text) is not None:
        return False
    if message.plan_mode and not options.plan_mode_enabled:
        return False
    QUEUED_USER_MESSAGES.publish(context, message)
    return True


def steer_user_message(
    context: Context,
    request: SteerUserMessageRequest,
    options: AgentSessionOptions,
    runner: RunnerFacade,
) -> bool:
    """Stage a steer; return the RPC's output.

    A queued message moves by ID: it is deleted from ``QueuedUserMessages`` (the transactional
    RPC raises ``ChannelMessageNotFoundError`` and commits nothing when the session consumed it
    meanwhile) and published, with its ``plan_mode``, to ``SteeredUserMessages``. Every steer
    publishes one ``TurnControlRequests`` wake.
    """
    state = AGENT_STATE.get(context)
    decision = decide_steer(request, state, plan_mode_enabled=options.plan_mode_enabled)
    if decision is SteerDecision.REFUSE:
        return False
    if request.text is not None and (
        user_text_problem(runner.build_user_message, str(request.text)) is not None
    ):
        return False
    if decision is SteerDecision.QUEUE_TEXT:
        QUEUED_USER_MESSAGES.publish(
            context, AgentUserMessage(text=str(request.text), plan_mode=request.plan_mode)
        )
        return True
    if decision is SteerDecision.STEER_TEXT:
        message = AgentUserMessage(text=str(request.text), plan_mode=request.plan_mode)
    else:
        message_id = str(request.message_id)
        queued = QUEUED_USER_MESSAGES.find_pending_message(context, message_id)
        if queued is None:
            return False
        QUEUED_USER_MESSAGES.delete(context, message_id)
        message = queued.value
    assert state is not None
    STEERED_USER_MESSAGES.publish(context, message)
    TURN_CONTROL_REQUESTS.publish(
        context, TurnControlRequest(kind=TurnControlKind.STEER, turn_id=state.active_turn_id)
    )
    return True


def delete_queued_message(context: Context, request: DeleteQueuedMessageRequest) -> bool:
    """Stage the deletion of a queued message; ``False`` when it is no longer queued."""
    message_id = request.message_id
    if not isinstance(message_id, str) or not message_id.strip():
        return False
    if QUEUED_USER_MESSAGES.find_pending_message(context, message_id) is None:
        return False
    QUEUED_USER_MESSAGES.delete(context, message_id)
    return True


def record_turn_cancellation(context: Context, request: CancelTurnRequest) -> CancelTurnDecision:
    """Decide ``cancel_turn`` and, to cancel, record ``TurnCancellationRequest`` and remove the
    turn's pending interrupts, so an answer sent after the cancellation returns ``False``.

    Needs the ``TurnCancellationRequest`` and ``PendingInterrupts`` locks.
    """
    state = AGENT_STATE.get(context)
    decision = decide_cancel_turn(request, state, TURN_CANCELLATION_REQUEST.get(context))
    if decision is not CancelTurnDecision.CANCEL:
        return decision
    TURN_CANCELLATION_REQUEST.set(
        context, turn_cancellation_request(request.turn_id, datetime.now(UTC))
    )
    interrupts = PENDING_INTERRUPTS.get(context) or []
    remaining = [item for item in interrupts if item.turn_id != request.turn_id]
    if len(remaining) != len(interrupts):
        PENDING_INTERRUPTS.set(context, remaining)
    return decision


def update_session_settings(context: Context, request: UpdateSessionSettingsRequest) -> bool:
    """Stage the replacement of ``SessionSettings``; ``False`` before the session initialized,
    for ``None``, or for settings beyond the limit plus the cross-core tolerance."""
    if AGENT_STATE.get(context) is None:
        return False
    settings = request.session_settings
    if settings is None:
        return False
    problem = session_settings_problem(
        settings, tolerance_bytes=SESSION_SETTINGS_SIZE_TOLERANCE_BYTES
    )
    if problem is not None:
        return False
    SESSION_SETTINGS.set(context, encode_session_settings(settings))
    return True


def listed_messages(
    context: Context, channel: Channel[AgentUserMessage]
) -> tuple[QueuedUserMessage, ...]:
    """Return the pending messages of the queued or steered Channel, with their message IDs."""
    return tuple(
        QueuedUserMessage(
            message_id=pending.message_id,
            text=pending.value.text,
            plan_mode=pending.value.plan_mode,
        )
        for pending in channel.pending_messages(context)
    )


def next_turn_session_settings(context: Context) -> Mapping[str, object]:
    """Return the settings the next turn starts with (not the running turn's copy)."""
    return decode_session_settings(SESSION_SETTINGS.get(context))


def answer_question(context: Context, request: AnswerQuestionRequest) -> bool:
    """Stage an answer to a pending question; ``False`` when it is not a pending question, is past
    its deadline, or the answer is blank or not an allowed choice. Needs the
    ``PendingInterrupts`` lock."""
    if reply_text_problem(request.answer, "the answer") is not None:
        return False
    interrupts = PENDING_INTERRUPTS.get(context) or []
    decision = decide_question_answer(interrupts, request, datetime.now(UTC))
    return _publish_resolution(context, request.interrupt_id, decision)


def resolve_interrupt(context: Context, request: ResolveInterruptRequest) -> bool:
    """Stage the approval or rejection of a pending approval, or the decline of a question;
    ``False`` when it is not pending or past its deadline. Needs the ``PendingInterrupts``
    lock."""
    if reply_text_problem(request.rejection_message, "the rejection message") is not None:
        return False
    interrupts = PENDING_INTERRUPTS.get(context) or []
    decision = decide_interrupt_resolution(interrupts, request, datetime.now(UTC))
    return _publish_resolution(context, request.interrupt_id, decision)


def _publish_resolution(
    context: Context,
    interrupt_id: str,
    decision: InterruptResolutionDecision,
) -> bool:
    """Remove the interrupt and publish its resolution in one commit, when there is one."""
    if decision.resolution is None:
        return False
    PENDING_INTERRUPTS.set(context, list(decision.remaining_interrupts))
    INTERRUPT_RESOLUTIONS.publish(context, interrupt_id, decision.resolution)
    return True


def agent_state(context: Context) -> AgentState:
    """Return ``get_agent_state``'s output: the ``AgentState`` Attribute alone, the default state
    before the session's start Step stored one. The RPC loads no message, record, or Channel."""
    state = AGENT_STATE.get(context)
    return state if state is not None else AgentState()


def agent_snapshot(context: Context, cache: MessageDecodeCache) -> AgentSnapshot:
    """Return ``get_agent_snapshot``'s output: the state, the newest 200 messages, the pending
    interrupts, the active turn's tool calls, usage, plan, settings, and the queued and steered
    messages. The RPC loads every message, chunk, and record, and both message Channels."""
    state = AGENT_STATE.get(context)
    active_turn = state.active_turn_id if state is not None else None
    stored = load_newest_messages(
        context,
        state.last_message_sequence if state is not None else 0,
        SNAPSHOT_MESSAGE_LIMIT,
        cache=cache,
    )
    queued = listed_messages(context, QUEUED_USER_MESSAGES)
    snapshot = AgentSnapshot(
        state=state,
        messages=stored.messages,
        deleted_before_sequence=stored.deleted_before_sequence,
        context_summary=CONTEXT_SUMMARY.get(context),
        plan=AGENT_PLAN.get(context),
        pending_interrupts=tuple(PENDING_INTERRUPTS.get(context) or ()),
        tool_calls=tuple(
            record
            for record in tool_calls_in_order(load_all_tool_calls(context))
            if record.turn_id == active_turn
        ),
        usage=AGENT_USAGE.get(context) or empty_agent_usage(),
        queued_message_count=len(queued),
        queued_messages=queued,
        steered_messages=listed_messages(context, STEERED_USER_MESSAGES),
        session_settings=next_turn_session_settings(context),
    )
    # Whatever was stored, the output stays under the RPC limit and encodable.
    return fit_snapshot(replace_unencodable_values(snapshot))

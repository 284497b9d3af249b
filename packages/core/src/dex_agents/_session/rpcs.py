"""The bodies of the session RPCs that steer, cancel, and reconfigure a running session.

``AgentSessionFlow`` declares the RPCs (their locks and loads); these functions read the RPC's
Context, ask the pure decisions in :mod:`dex_agents._session.turn_control_rules`, and stage the
writes, so the Flow class stays a list of declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from dex import Context

from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.persistence import (
    AGENT_STATE,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    SESSION_SETTINGS,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from dex_agents._session.settings import (
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    decode_session_settings,
    encode_session_settings,
    session_settings_problem,
)
from dex_agents._session.turn_control_rules import (
    CancelTurnDecision,
    SteerDecision,
    decide_cancel_turn,
    decide_steer,
    turn_cancellation_request,
)
from dex_agents._values import (
    AgentUserMessage,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    QueuedUserMessage,
    SteerUserMessageRequest,
    TurnControlKind,
    TurnControlRequest,
    UpdateSessionSettingsRequest,
)

__all__ = [
    "delete_queued_message",
    "next_turn_session_settings",
    "record_turn_cancellation",
    "steer_user_message",
    "steered_messages",
    "update_session_settings",
]


def steer_user_message(
    context: Context, request: SteerUserMessageRequest, options: AgentSessionOptions
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


def steered_messages(context: Context) -> tuple[QueuedUserMessage, ...]:
    """Return the steered messages not applied yet, with their Channel message IDs."""
    return tuple(
        QueuedUserMessage(
            message_id=pending.message_id,
            text=pending.value.text,
            plan_mode=pending.value.plan_mode,
        )
        for pending in STEERED_USER_MESSAGES.pending_messages(context)
    )


def next_turn_session_settings(context: Context) -> Mapping[str, object]:
    """Return the settings the next turn starts with (not the running turn's copy)."""
    return decode_session_settings(SESSION_SETTINGS.get(context))

"""Pure decisions of steering and turn cancellation.

``steer_user_message``, ``cancel_turn``, and the Steps that apply them (``RunModel``,
``ResumeTurn``, the tool Steps, ``ApplyTurnControl``, ``FinishTurnCancellation``) ask these
functions what a steer or a cancellation means for the committed state, so each rule lives once and
is testable without an engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Final

from dex_agents._text_validity import is_blank_text
from dex_agents._values import (
    AgentInterrupt,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUserMessage,
    CancellationReason,
    CancelTurnRequest,
    InterruptKind,
    SteerUserMessageRequest,
    TurnCancellationRequest,
)

__all__ = [
    "MAX_STEERED_MESSAGES_PER_TURN",
    "CancelTurnDecision",
    "FinishTurnCancellationAction",
    "SteerDecision",
    "TurnCancellationPlan",
    "WaitingCallAction",
    "decide_cancel_turn",
    "decide_steer",
    "end_controlled_turn",
    "finish_turn_cancellation_plan",
    "interrupts_steering_cancels",
    "steered_turn_user_messages",
    "turn_cancellation_request",
    "turn_control_reason",
]

MAX_STEERED_MESSAGES_PER_TURN: Final = 1000
"""How many steered messages and stale wakes ``ApplyTurnControl`` consumes at once; any beyond it
steer the next turn again, so none is lost.
"""


class SteerDecision(StrEnum):
    """What ``steer_user_message`` commits."""

    REFUSE = "refuse"
    """Returns ``False`` and changes nothing."""
    QUEUE_TEXT = "queue_text"
    """No turn is active: the text is queued like ``send_user_message``."""
    STEER_TEXT = "steer_text"
    """The text steers the active turn."""
    STEER_QUEUED_MESSAGE = "steer_queued_message"
    """The queued message moves to ``SteeredUserMessages`` (it returns ``False`` when it is no
    longer queued)."""


def decide_steer(
    request: SteerUserMessageRequest, state: AgentState | None, *, plan_mode_enabled: bool
) -> SteerDecision:
    """Decide a ``steer_user_message`` call from the committed state.

    It refuses both or neither of ``text`` and ``message_id``, blank text, a ``plan_mode`` text
    while plan mode is off, a message ID while no turn is active, and a turn that does not accept
    turn control.

    Example:
        >>> decide_steer(SteerUserMessageRequest(text="x"), AgentState(), plan_mode_enabled=False)
        <SteerDecision.QUEUE_TEXT: 'queue_text'>
    """
    has_text = request.text is not None
    has_id = request.message_id is not None
    if has_text == has_id:
        return SteerDecision.REFUSE
    if has_text and (
        is_blank_text(str(request.text)) or (request.plan_mode and not plan_mode_enabled)
    ):
        return SteerDecision.REFUSE
    if has_id and is_blank_text(str(request.message_id)):
        return SteerDecision.REFUSE
    active = state is not None and state.active_turn_id is not None
    if not active:
        return SteerDecision.QUEUE_TEXT if has_text else SteerDecision.REFUSE
    assert state is not None
    if not state.accepts_turn_control:
        return SteerDecision.REFUSE
    return SteerDecision.STEER_TEXT if has_text else SteerDecision.STEER_QUEUED_MESSAGE


class CancelTurnDecision(StrEnum):
    """What ``cancel_turn`` commits."""

    REFUSE = "refuse"
    """Returns ``False``: no turn is active, another turn is, or it does not accept control."""
    ALREADY_REQUESTED = "already_requested"
    """Returns ``True`` and changes nothing: this turn's cancellation is recorded and still in
    flight (a second press of a stop button before the turn ended)."""
    CANCEL = "cancel"
    """Records the request, cancels the turn's Steps, and starts ``FinishTurnCancellation``."""


def decide_cancel_turn(
    request: CancelTurnRequest,
    state: AgentState | None,
    recorded: TurnCancellationRequest | None,
) -> CancelTurnDecision:
    """Decide a ``cancel_turn`` call from the committed state and the recorded request.

    A second call for a turn whose cancellation is recorded answers ``True`` while that turn is
    still active; once the turn has ended no turn is active for it, so the call answers ``False``
    like any call naming an ended turn (the RPC table).

    Example:
        >>> decide_cancel_turn(CancelTurnRequest("turn-1"), AgentState(), None)
        <CancelTurnDecision.REFUSE: 'refuse'>
    """
    if state is None or state.active_turn_id is None or request.turn_id != state.active_turn_id:
        return CancelTurnDecision.REFUSE
    if recorded is not None and recorded.turn_id == request.turn_id:
        return CancelTurnDecision.ALREADY_REQUESTED
    if not state.accepts_turn_control:
        return CancelTurnDecision.REFUSE
    return CancelTurnDecision.CANCEL


def turn_control_reason(
    state: AgentState | None,
    *,
    steered_message_count: int,
    cancellation: TurnCancellationRequest | None,
) -> CancellationReason | None:
    """Return why the active turn must end at its next safe boundary, or ``None``.

    A cancellation of the active turn wins over steering; a cancellation recorded for an earlier
    turn means nothing.

    Example:
        >>> from dex_agents._session.transitions import start_turn
        >>> turn_control_reason(start_turn(AgentState()), steered_message_count=1, cancellation=None)
        <CancellationReason.STEERED: 'steered'>
    """
    if state is None or state.active_turn_id is None or not state.accepts_turn_control:
        return None
    if cancellation is not None and cancellation.turn_id == state.active_turn_id:
        return CancellationReason.TURN_CANCELLED
    if steered_message_count > 0:
        return CancellationReason.STEERED
    return None


def end_controlled_turn(state: AgentState) -> AgentState:
    """Return the state after a steered or cancelled turn ended: waiting, the last error kept.

    Example:
        >>> from dex_agents._session.transitions import start_turn
        >>> end_controlled_turn(start_turn(AgentState())).active_turn_id is None
        True
    """
    return replace(state, status=AgentStatus.WAITING_FOR_USER_MESSAGE, active_turn_id=None)


def steered_turn_user_messages(
    messages: Sequence[AgentUserMessage],
) -> tuple[list[str], bool]:
    """Return the texts of the turn that steered messages start, in order, and whether any of them
    asked for plan mode.

    Example:
        >>> steered_turn_user_messages([AgentUserMessage("a"), AgentUserMessage("b", plan_mode=True)])
        (['a', 'b'], True)
    """
    texts = [message.text for message in messages if not is_blank_text(message.text)]
    return texts, any(message.plan_mode for message in messages)


def interrupts_steering_cancels(
    interrupts: Sequence[AgentInterrupt],
    records: Mapping[str, AgentToolCall],
    turn_id: str,
) -> list[AgentInterrupt]:
    """Return the pending interrupts a steer removes: the turn's approvals and the questions no
    tool task asked.

    Example:
        >>> approval = AgentInterrupt("call-1", "call-1", "search", InterruptKind.APPROVAL, "turn-1")
        >>> interrupts_steering_cancels([approval], {"call-1": record}, "turn-1") == [approval]
        True
    """
    removed: list[AgentInterrupt] = []
    for interrupt in interrupts:
        if interrupt.turn_id != turn_id:
            continue
        record = records.get(interrupt.tool_call_id)
        asked_by_task = (
            interrupt.kind is InterruptKind.QUESTION
            and record is not None
            and record.task_id is not None
        )
        if not asked_by_task:
            removed.append(interrupt)
    return removed


class WaitingCallAction(StrEnum):
    """What ``FinishTurnCancellation`` does with one unfinished call of the cancelled turn."""

    REJECT = "reject"
    """Its wait was cancelled: record ``rejected`` with ``turn_cancelled``."""
    RESUME_WAIT = "resume_wait"
    """An answer committed before the cancellation: its waiting Step runs again and applies it."""
    CANCEL_TASK = "cancel_task"
    """A started tool task is abandoned: ``CancelToolTask`` records it ``outcome_unknown``."""
    LEAVE = "leave"
    """Its tool Step runs or is about to; it records the call itself."""


class FinishTurnCancellationAction(StrEnum):
    """What ``FinishTurnCancellation`` does as a whole."""

    END = "end"
    """The turn is no longer active (it completed or ended first): nothing to do."""
    APPLY_TURN_CONTROL = "apply_turn_control"
    """``cancel_turn`` cancelled the model call or compaction: the turn ends now."""
    SETTLE_TOOL_CALLS = "settle_tool_calls"
    """Tool calls run: settle each waiting call; ``ResumeTurn`` ends the turn."""


@dataclass(frozen=True)
class TurnCancellationPlan:
    """``FinishTurnCancellation``'s decision: the whole action and one action per waiting call."""

    action: FinishTurnCancellationAction
    calls: tuple[tuple[AgentToolCall, WaitingCallAction], ...] = ()


def finish_turn_cancellation_plan(
    state: AgentState | None,
    turn_id: str,
    records: Mapping[str, AgentToolCall],
    *,
    answered_call_ids: frozenset[str],
    now: datetime,
) -> TurnCancellationPlan:
    """Decide ``FinishTurnCancellation`` for the cancelled ``turn_id``.

    Args:
        state: The committed ``AgentState``.
        turn_id: The turn ``cancel_turn`` cancelled.
        records: Every tool call record.
        answered_call_ids: Calls whose approval or question has an answer waiting on
            ``InterruptResolutions``: it committed before the cancellation, so it settles the call.
        now: The Worker clock; a durable wait whose time has come keeps its own result.

    Example:
        >>> plan = finish_turn_cancellation_plan(
        ...     AgentState(), "turn-1", {}, answered_call_ids=frozenset(), now=now
        ... )
        >>> plan.action.value
        'end'
    """
    if state is None or state.active_turn_id != turn_id:
        return TurnCancellationPlan(FinishTurnCancellationAction.END)
    if state.status is not AgentStatus.RUNNING_TOOLS:
        return TurnCancellationPlan(FinishTurnCancellationAction.APPLY_TURN_CONTROL)
    unfinished = sorted(
        (r for r in records.values() if r.turn_id == turn_id and not r.is_final),
        key=lambda record: record.deferral_order,
    )
    return TurnCancellationPlan(
        FinishTurnCancellationAction.SETTLE_TOOL_CALLS,
        tuple(
            (record, _waiting_call_action(record, answered_call_ids, now)) for record in unfinished
        ),
    )


def _waiting_call_action(
    record: AgentToolCall, answered_call_ids: frozenset[str], now: datetime
) -> WaitingCallAction:
    status = record.status
    if status is AgentToolCallStatus.WAITING_FOR_TASK:
        return WaitingCallAction.CANCEL_TASK
    if status is AgentToolCallStatus.AWAITING_ANSWER and record.task_id is not None:
        # A started task's question: the task is abandoned with its question.
        return WaitingCallAction.CANCEL_TASK
    if status in (AgentToolCallStatus.AWAITING_APPROVAL, AgentToolCallStatus.AWAITING_ANSWER):
        if record.tool_call_id in answered_call_ids:
            return WaitingCallAction.RESUME_WAIT
        return WaitingCallAction.REJECT
    if status is AgentToolCallStatus.WAITING_FOR_TIMER:
        if record.wait_until is not None and record.wait_until <= now:
            return WaitingCallAction.RESUME_WAIT
        return WaitingCallAction.REJECT
    return WaitingCallAction.LEAVE


def turn_cancellation_request(turn_id: str, now: datetime) -> TurnCancellationRequest:
    """Return the ``TurnCancellationRequest`` that ``cancel_turn`` records."""
    return TurnCancellationRequest(turn_id=turn_id, requested_at=now)

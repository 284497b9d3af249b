"""The pure decisions of steering and turn cancellation."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from dex_agents import (
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
    ToolEffect,
    TurnCancellationRequest,
)
from dex_agents._session.control_transitions import (
    CancelTurnDecision,
    FinishTurnCancellationAction,
    SteerDecision,
    TurnCancellationPlan,
    WaitingCallAction,
    decide_cancel_turn,
    decide_steer,
    end_controlled_turn,
    finish_turn_cancellation_plan,
    interrupts_steering_cancels,
    steered_turn_user_messages,
    turn_control_reason,
)
from dex_agents._session.transitions import start_turn

NOW = datetime(2026, 1, 1, tzinfo=UTC)
IDLE = AgentState()
RUNNING = start_turn(IDLE)


def _record(call_id: str, status: AgentToolCallStatus, **changes: object) -> AgentToolCall:
    record = AgentToolCall(
        call_id, "tool", "{}", ToolEffect.READ, False, status, "turn-1", len(call_id)
    )
    return replace(record, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("request_", "state", "expected"),
    [
        (SteerUserMessageRequest(), RUNNING, SteerDecision.REFUSE),
        (SteerUserMessageRequest(text="a", message_id="1"), RUNNING, SteerDecision.REFUSE),
        (SteerUserMessageRequest(text="  "), RUNNING, SteerDecision.REFUSE),
        (SteerUserMessageRequest(message_id=" "), RUNNING, SteerDecision.REFUSE),
        (SteerUserMessageRequest(text="a", plan_mode=True), RUNNING, SteerDecision.REFUSE),
        (SteerUserMessageRequest(text="a"), IDLE, SteerDecision.QUEUE_TEXT),
        (SteerUserMessageRequest(text="a"), None, SteerDecision.QUEUE_TEXT),
        (SteerUserMessageRequest(message_id="1"), IDLE, SteerDecision.REFUSE),
        (SteerUserMessageRequest(text="a"), RUNNING, SteerDecision.STEER_TEXT),
        (SteerUserMessageRequest(message_id="1"), RUNNING, SteerDecision.STEER_QUEUED_MESSAGE),
        (
            SteerUserMessageRequest(text="a"),
            replace(RUNNING, accepts_turn_control=False),
            SteerDecision.REFUSE,
        ),
    ],
)
def test_decide_steer(
    request_: SteerUserMessageRequest, state: AgentState | None, expected: SteerDecision
) -> None:
    assert decide_steer(request_, state, plan_mode_enabled=False) is expected


def test_a_plan_mode_steer_needs_plan_mode() -> None:
    request = SteerUserMessageRequest(text="plan it", plan_mode=True)
    assert decide_steer(request, RUNNING, plan_mode_enabled=True) is SteerDecision.STEER_TEXT


def test_decide_cancel_turn() -> None:
    request = CancelTurnRequest("turn-1")
    assert decide_cancel_turn(request, IDLE, None) is CancelTurnDecision.REFUSE
    assert decide_cancel_turn(CancelTurnRequest("turn-2"), RUNNING, None) is (
        CancelTurnDecision.REFUSE
    )
    locked = replace(RUNNING, accepts_turn_control=False)
    assert decide_cancel_turn(request, locked, None) is CancelTurnDecision.REFUSE
    assert decide_cancel_turn(request, RUNNING, None) is CancelTurnDecision.CANCEL
    earlier = TurnCancellationRequest("turn-0")
    assert decide_cancel_turn(request, RUNNING, earlier) is CancelTurnDecision.CANCEL
    recorded = TurnCancellationRequest("turn-1")
    assert decide_cancel_turn(request, RUNNING, recorded) is CancelTurnDecision.ALREADY_REQUESTED
    # While the cancellation is in flight the turn may have stopped accepting control (it
    # settles its tool calls): a second press still answers True.
    assert decide_cancel_turn(request, locked, recorded) is CancelTurnDecision.ALREADY_REQUESTED
    # Once the cancelled turn ended no turn is active for it: False, also while a later turn runs.
    assert decide_cancel_turn(request, IDLE, recorded) is CancelTurnDecision.REFUSE
    later = replace(RUNNING, active_turn_id="turn-2", turn_count=2)
    assert decide_cancel_turn(request, later, recorded) is CancelTurnDecision.REFUSE
    assert decide_cancel_turn(CancelTurnRequest("turn-2"), later, recorded) is (
        CancelTurnDecision.CANCEL
    )


def test_turn_control_reason_prefers_a_cancellation_of_the_active_turn() -> None:
    cancelled = TurnCancellationRequest("turn-1")
    assert turn_control_reason(RUNNING, steered_message_count=0, cancellation=None) is None
    assert turn_control_reason(IDLE, steered_message_count=2, cancellation=cancelled) is None
    assert (
        turn_control_reason(RUNNING, steered_message_count=1, cancellation=None)
        is CancellationReason.STEERED
    )
    assert (
        turn_control_reason(RUNNING, steered_message_count=1, cancellation=cancelled)
        is CancellationReason.TURN_CANCELLED
    )
    stale = TurnCancellationRequest("turn-0")
    assert turn_control_reason(RUNNING, steered_message_count=0, cancellation=stale) is None


def test_end_controlled_turn_keeps_the_last_error() -> None:
    ended = end_controlled_turn(replace(RUNNING, last_turn_error="earlier"))
    assert (ended.active_turn_id, ended.status, ended.last_turn_error) == (
        None,
        AgentStatus.WAITING_FOR_USER_MESSAGE,
        "earlier",
    )


def test_steered_turn_user_messages_keep_order_and_plan_mode() -> None:
    messages = [AgentUserMessage("a"), AgentUserMessage(" "), AgentUserMessage("b", True)]
    assert steered_turn_user_messages(messages) == (["a", "b"], True)
    assert steered_turn_user_messages([AgentUserMessage("a")]) == (["a"], False)


def test_steering_cancels_approvals_and_questions_no_task_asked() -> None:
    approval = AgentInterrupt("a", "a", "tool", InterruptKind.APPROVAL, turn_id="turn-1")
    ask = AgentInterrupt("q", "q", "ask_user", InterruptKind.QUESTION, turn_id="turn-1")
    task_question = AgentInterrupt(
        "t-input-1", "t", "report", InterruptKind.QUESTION, turn_id="turn-1"
    )
    other_turn = AgentInterrupt("o", "o", "tool", InterruptKind.APPROVAL, turn_id="turn-0")
    records = {
        "q": _record("q", AgentToolCallStatus.AWAITING_ANSWER),
        "t": _record("t", AgentToolCallStatus.AWAITING_ANSWER, task_id="job-1"),
    }
    removed = interrupts_steering_cancels(
        [approval, ask, task_question, other_turn], records, "turn-1"
    )
    assert removed == [approval, ask]


def test_finish_turn_cancellation_plan() -> None:
    def plan(state: AgentState, answered: frozenset[str] = frozenset()) -> TurnCancellationPlan:
        return finish_turn_cancellation_plan(
            state, "turn-1", records, answered_call_ids=answered, now=NOW
        )

    records = {
        "approval": _record("approval", AgentToolCallStatus.AWAITING_APPROVAL),
        "answered": _record("answered", AgentToolCallStatus.AWAITING_APPROVAL),
        "ask": _record("ask", AgentToolCallStatus.AWAITING_ANSWER),
        "timer": _record(
            "timer", AgentToolCallStatus.WAITING_FOR_TIMER, wait_until=NOW + timedelta(hours=1)
        ),
        "fired": _record("fired", AgentToolCallStatus.WAITING_FOR_TIMER, wait_until=NOW),
        "task": _record("task", AgentToolCallStatus.WAITING_FOR_TASK, task_id="job"),
        "task-question": _record(
            "task-question", AgentToolCallStatus.AWAITING_ANSWER, task_id="job-2"
        ),
        "running": _record("running", AgentToolCallStatus.APPROVED),
        "done": _record("done", AgentToolCallStatus.SUCCEEDED),
    }
    assert plan(IDLE).action is FinishTurnCancellationAction.END
    assert plan(replace(RUNNING, active_turn_id="turn-2")).action is (
        FinishTurnCancellationAction.END
    )
    assert plan(RUNNING).action is FinishTurnCancellationAction.APPLY_TURN_CONTROL
    compacting = replace(RUNNING, status=AgentStatus.COMPACTING_CONTEXT)
    assert plan(compacting).action is FinishTurnCancellationAction.APPLY_TURN_CONTROL
    tools = plan(replace(RUNNING, status=AgentStatus.RUNNING_TOOLS), frozenset({"answered"}))
    assert tools.action is FinishTurnCancellationAction.SETTLE_TOOL_CALLS
    assert {record.tool_call_id: action for record, action in tools.calls} == {
        "approval": WaitingCallAction.REJECT,
        "answered": WaitingCallAction.RESUME_WAIT,
        "ask": WaitingCallAction.REJECT,
        "timer": WaitingCallAction.REJECT,
        "fired": WaitingCallAction.RESUME_WAIT,
        "task": WaitingCallAction.CANCEL_TASK,
        "task-question": WaitingCallAction.CANCEL_TASK,
        "running": WaitingCallAction.LEAVE,
    }

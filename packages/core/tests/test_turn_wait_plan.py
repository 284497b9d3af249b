"""The turn wait plan on its own: what it asks for next, given events and snapshots.

The engine tests (``test_agent_session_turn_calls.py``) cover the common paths; these drive the
plan through orders of events a busy engine produces only sometimes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dex import StreamMessage
from dex_agents import (
    AgentEvent,
    AgentInterrupt,
    AgentMessage,
    AgentMessagesPage,
    AgentSnapshot,
    AgentState,
    AgentStatus,
    InterruptKind,
    MessageRole,
    TurnResult,
    TurnStatus,
)
from dex_agents._session.turn_results import TurnTracker
from dex_agents._session.turn_waits import (
    NextEvent,
    ReadMessages,
    ReadSnapshot,
    ReadState,
    TurnWaitPlan,
    turn_wait_plan,
)

_NOW = datetime(2026, 12, 6, tzinfo=UTC)


def _message(index: int, event_type: str, payload: str = "{}") -> StreamMessage[AgentEvent]:
    return StreamMessage(AgentEvent(event_type, "turn-1", "S-1", 1, payload), f"t{index}", _NOW, "")


def _snapshot(*, pending: bool, active: str | None = "turn-1") -> AgentSnapshot:
    interrupts = (
        (AgentInterrupt("c1", "c1", "refund", InterruptKind.APPROVAL, turn_id="turn-1"),)
        if pending
        else ()
    )
    state = AgentState(status=AgentStatus.RUNNING_TOOLS, active_turn_id=active, turn_count=1)
    return AgentSnapshot(state=state, pending_interrupts=interrupts)


_RAISED = (
    '{"allows_free_text":true,"choices":[],"deadline":null,"interrupt_id":"c1",'
    '"kind":"approval","question":null,"tool_call_id":"c1","tool_name":"refund"}'
)


def test_an_interrupt_not_yet_visible_is_looked_at_again_after_a_short_poll() -> None:
    plan = turn_wait_plan(TurnTracker("s1"), "", timeout=60)
    first = next(plan)
    assert isinstance(first, NextEvent) and first.poll == timedelta(seconds=10)
    assert isinstance(plan.send(_message(1, "turn_started", '{"sequence":1}')), NextEvent)
    assert isinstance(plan.send(_message(2, "interrupt_raised", _RAISED)), ReadSnapshot)
    again = plan.send(_snapshot(pending=False))  # the Step's commit is not visible yet
    assert isinstance(again, NextEvent) and again.poll == timedelta(seconds=1)
    assert isinstance(plan.send(None), ReadSnapshot)  # the short poll saw nothing
    try:
        plan.send(_snapshot(pending=True))
    except StopIteration as finished:
        result = finished.value
    assert isinstance(result, TurnResult)
    assert (result.status, result.resume_token) == (TurnStatus.WAITING_FOR_PERSON, "t2")
    assert [i.interrupt_id for i in result.pending_interrupts] == ["c1"]


def test_an_end_the_stream_dropped_is_found_in_the_snapshot() -> None:
    plan = turn_wait_plan(TurnTracker("s1", "turn-1"), "t0", timeout=60)
    next(plan)
    assert isinstance(plan.send(None), ReadSnapshot)
    failed = AgentSnapshot(
        state=AgentState(active_turn_id=None, turn_count=1, last_turn_error="model down")
    )
    try:
        plan.send(failed)
    except StopIteration as finished:
        result = finished.value
    assert (result.status, result.error, result.resume_token) == (
        TurnStatus.FAILED,
        "model down",
        "t0",
    )


def _page(first: int, last: int, turn_id: str = "turn-1") -> AgentMessagesPage:
    return AgentMessagesPage(
        messages=tuple(
            AgentMessage(
                sequence, MessageRole.ASSISTANT, "{}", f"reply {sequence}", turn_id=turn_id
            )
            for sequence in range(first, last + 1)
        )
    )


def _turn_two_ended(event_type: str, message_count: int) -> StreamMessage[AgentEvent]:
    payload = f'{{"message_count":{message_count}}}'
    return StreamMessage(AgentEvent(event_type, "turn-2", "S-1", 1, payload), "t1", _NOW, "")


def _finish(plan: TurnWaitPlan, answer: object) -> TurnResult:
    try:
        plan.send(answer)  # type: ignore[arg-type]
    except StopIteration as finished:
        assert isinstance(finished.value, TurnResult)
        return finished.value
    raise AssertionError("the plan asked for more")


def test_an_ended_turn_reads_its_messages_until_the_end_commit_is_visible() -> None:
    plan = turn_wait_plan(TurnTracker("s1"), "", timeout=60)
    next(plan)
    assert isinstance(plan.send(_message(1, "turn_started", '{"sequence":3}')), NextEvent)
    first = plan.send(_message(2, "turn_completed", '{"message_count":6}'))
    assert first == ReadMessages(after_sequence=2)
    # The Step that wrote turn_completed has not committed its messages yet: read on after 4.
    assert plan.send(_page(3, 4)) == ReadMessages(after_sequence=4)
    result = _finish(plan, _page(5, 6))
    assert (result.status, result.text, result.resume_token) == (
        TurnStatus.COMPLETED,
        "reply 6",
        "t2",
    )


def test_a_turn_followed_on_from_a_result_reads_back_to_its_start() -> None:
    # Without turn_started, the newest 16 messages up to the end are read first; they are all
    # the turn's, so it is read again from the newest 200 (the snapshot's messages).
    plan = turn_wait_plan(TurnTracker("s1", "turn-2"), "t0", timeout=60)
    next(plan)
    assert plan.send(_turn_two_ended("turn_completed", 230)) == ReadMessages(after_sequence=214)
    assert plan.send(_page(215, 230, "turn-2")) == ReadMessages(after_sequence=30)
    full = AgentMessagesPage(_page(31, 200, "turn-2").messages, next_after_sequence=200)
    assert plan.send(full) == ReadMessages(after_sequence=200)
    result = _finish(plan, _page(201, 230, "turn-2"))
    assert (result.turn_id, result.text) == ("turn-2", "reply 230")


def test_a_short_turn_followed_on_from_a_result_is_read_once() -> None:
    plan = turn_wait_plan(TurnTracker("s1", "turn-2"), "t0", timeout=60)
    next(plan)
    assert plan.send(_turn_two_ended("turn_cancelled", 20)) == ReadMessages(after_sequence=4)
    page = AgentMessagesPage(_page(5, 16, "turn-1").messages + _page(17, 20, "turn-2").messages)
    result = _finish(plan, page)
    assert (result.status, result.text) == (TurnStatus.CANCELLED, "reply 20")


def test_a_failed_turn_reads_the_state_until_the_failure_commits_then_its_messages() -> None:
    plan = turn_wait_plan(TurnTracker("s1"), "", timeout=60)
    next(plan)
    assert isinstance(plan.send(_message(1, "turn_started", '{"sequence":5}')), NextEvent)
    failed = _message(2, "turn_failed", '{"error":"model down"}')
    assert isinstance(plan.send(failed), ReadState)
    # The Step that wrote turn_failed has not committed yet: the turn is still active.
    running = AgentState(status=AgentStatus.RUNNING_MODEL, active_turn_id="turn-1", turn_count=1)
    assert isinstance(plan.send(running), ReadState)
    ended = AgentState(turn_count=1, last_message_sequence=7, last_turn_error="model down")
    assert plan.send(ended) == ReadMessages(after_sequence=4)
    result = _finish(plan, _page(5, 7))
    assert (result.status, result.error, result.text) == (
        TurnStatus.FAILED,
        "model down",
        "reply 7",
    )

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
    AgentSnapshot,
    AgentState,
    AgentStatus,
    InterruptKind,
    TurnResult,
    TurnStatus,
)
from dex_agents._session.turn_results import TurnTracker
from dex_agents._session.turn_waits import NextEvent, ReadSnapshot, turn_wait_plan

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

"""The session's pure decisions: turns, records, interrupts, approvals, and tool failures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from dex import RecoveryErrorInfo
from dex_agents import (
    TOOL_CALL_NOT_RUN_ERROR_PREFIX,
    AgentInterruptResolution,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    ConfigurationError,
    ResolvedToolPolicy,
    ResolveInterruptRequest,
    ToolEffect,
)
from dex_agents._session.transitions import (
    ApprovalOutcome,
    AttemptProgress,
    RequestedToolCall,
    ToolFailureRoute,
    apply_approval,
    attempt_progress,
    complete_turn,
    decide_interrupt_resolution,
    expire_approval,
    fail_turn,
    finalize_tool_call,
    interrupt_for_approval,
    new_tool_call_record,
    record_tool_failure,
    recovery_error_text,
    seconds_until,
    start_turn,
    unfinished_tool_calls,
)

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def _record(
    effect: ToolEffect, *, requires_approval: bool = False, order: int = 0
) -> AgentToolCall:
    call = RequestedToolCall(
        f"call-{order}", "tool", "{}", ResolvedToolPolicy(effect, requires_approval)
    )
    return new_tool_call_record(call, turn_id="turn-1", deferral_order=order, now=NOW)


def test_turns_count_up_and_keep_or_clear_the_last_error() -> None:
    first = start_turn(AgentState(last_turn_error="earlier"))
    assert (first.active_turn_id, first.turn_count, first.status) == (
        "turn-1",
        1,
        AgentStatus.RUNNING_MODEL,
    )
    failed = fail_turn(first, "model down")
    assert (failed.active_turn_id, failed.last_turn_error) == (None, "model down")
    second = start_turn(failed)
    assert second.active_turn_id == "turn-2"
    assert second.last_turn_error == "model down"
    assert complete_turn(second).last_turn_error is None


def test_new_records_wait_for_approval_only_when_required() -> None:
    assert _record(ToolEffect.READ).status is AgentToolCallStatus.APPROVED
    waiting = _record(ToolEffect.UNCLASSIFIED, requires_approval=True, order=3)
    assert waiting.status is AgentToolCallStatus.AWAITING_APPROVAL
    assert waiting.deferral_order == 3
    interrupt = interrupt_for_approval(waiting, now=NOW, deadline_after=timedelta(minutes=5))
    assert (interrupt.interrupt_id, interrupt.deadline) == ("call-3", NOW + timedelta(minutes=5))
    assert interrupt_for_approval(waiting, now=NOW, deadline_after=None).deadline is None


def test_resolve_interrupt_refuses_unknown_expired_and_approved_questions() -> None:
    record = _record(ToolEffect.UNCLASSIFIED, requires_approval=True)
    pending = interrupt_for_approval(record, now=NOW, deadline_after=timedelta(seconds=10))
    approve = ResolveInterruptRequest("call-0", approved=True, rejection_message="dropped")

    decision = decide_interrupt_resolution([pending], approve, NOW)
    assert decision.resolution == AgentInterruptResolution("call-0", True, None)
    assert decision.remaining_interrupts == ()

    reject = ResolveInterruptRequest("call-0", approved=False, rejection_message="no")
    assert decide_interrupt_resolution([pending], reject, NOW).resolution == (
        AgentInterruptResolution("call-0", False, "no")
    )
    assert decide_interrupt_resolution([], approve, NOW).resolution is None
    late = NOW + timedelta(seconds=10)
    assert decide_interrupt_resolution([pending], approve, late).resolution is None


def test_approval_outcomes() -> None:
    record = _record(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
    approved = apply_approval(record, AgentInterruptResolution("call-0", True))
    assert approved.status is AgentToolCallStatus.APPROVED
    rejected = apply_approval(record, AgentInterruptResolution("call-0", False, "wrong order"))
    assert (rejected.status, rejected.rejection_message) == (
        AgentToolCallStatus.REJECTED,
        "wrong order",
    )
    pending = interrupt_for_approval(record, now=NOW, deadline_after=timedelta(seconds=5))
    # Resolved just as the Timer fired: wait again and apply the answer.
    assert expire_approval([], "call-0", NOW + timedelta(seconds=6)) is ApprovalOutcome.WAIT_AGAIN
    # A Timer that fired before the deadline on this Worker's clock waits again.
    assert expire_approval([pending], "call-0", NOW) is ApprovalOutcome.WAIT_AGAIN
    assert (
        expire_approval([pending], "call-0", NOW + timedelta(seconds=5)) is ApprovalOutcome.EXPIRED
    )


def test_deadline_timers_round_up_to_whole_seconds() -> None:
    assert seconds_until(NOW + timedelta(seconds=1, milliseconds=200), NOW) == 2
    assert seconds_until(NOW + timedelta(seconds=3), NOW) == 3
    assert seconds_until(NOW - timedelta(seconds=3), NOW) == 0


@pytest.mark.parametrize(
    ("effect", "route", "status"),
    [
        (ToolEffect.READ, ToolFailureRoute.RECORD_TOOL_FAILURE, AgentToolCallStatus.FAILED),
        (
            ToolEffect.IDEMPOTENT_WRITE,
            ToolFailureRoute.RECORD_TOOL_FAILURE,
            AgentToolCallStatus.OUTCOME_UNKNOWN,
        ),
        (
            ToolEffect.NON_IDEMPOTENT_WRITE,
            ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN,
            AgentToolCallStatus.OUTCOME_UNKNOWN,
        ),
        (
            ToolEffect.UNCLASSIFIED,
            ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN,
            AgentToolCallStatus.OUTCOME_UNKNOWN,
        ),
    ],
)
def test_failure_routes_record_by_effect(
    effect: ToolEffect, route: ToolFailureRoute, status: AgentToolCallStatus
) -> None:
    recovery = RecoveryErrorInfo(detail="connection reset", error_type="RuntimeError")
    final = record_tool_failure(_record(effect), route, recovery)
    assert final.status is status
    assert final.error == "connection reset"


def test_a_tool_step_that_never_started_records_failed_not_run() -> None:
    recovery = RecoveryErrorInfo(detail="no Worker took the task", error_type="NOT_STARTED")
    assert attempt_progress(recovery) is AttemptProgress.NOT_STARTED
    final = record_tool_failure(
        _record(ToolEffect.UNCLASSIFIED), ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN, recovery
    )
    assert final.status is AgentToolCallStatus.FAILED
    assert final.error == f"{TOOL_CALL_NOT_RUN_ERROR_PREFIX}: no Worker took the task"
    assert attempt_progress(None) is AttemptProgress.UNKNOWN
    engine_style = RecoveryErrorInfo(detail="x", error_type="dex_local_engine.AttemptNotStarted")
    assert attempt_progress(engine_style) is AttemptProgress.NOT_STARTED
    crashed = RecoveryErrorInfo(detail="x", error_type="dex_local_engine.WorkerLost")
    assert attempt_progress(crashed) is AttemptProgress.UNKNOWN
    timeout = RecoveryErrorInfo(detail="timed out", error_type="NOT_COMPLETED")
    assert attempt_progress(timeout) is AttemptProgress.NOT_COMPLETED


def test_the_engine_trailer_stays_out_of_the_recorded_error() -> None:
    """The ``(attempt_progress: ...)`` trailer is for ``attempt_progress``, not for people: a turn
    error or a tool's error shows the detail without it."""
    recovery = RecoveryErrorInfo(
        detail="OpenAIException - 404: Not Found (attempt_progress: NOT_COMPLETED)",
        error_type="NotFoundError",
    )
    assert attempt_progress(recovery) is AttemptProgress.NOT_COMPLETED
    assert recovery_error_text(recovery) == "OpenAIException - 404: Not Found"
    final = record_tool_failure(
        _record(ToolEffect.READ), ToolFailureRoute.RECORD_TOOL_FAILURE, recovery
    )
    assert final.error == "OpenAIException - 404: Not Found"
    assert recovery_error_text(None) == ""


def test_attempt_progress_reads_the_local_engine_detail_trailer() -> None:
    # dex-local-engine reports attempt progress as a trailer of the recovery detail.
    lost = RecoveryErrorInfo(
        detail="the Worker disconnected (attempt_progress: NOT_COMPLETED)",
        error_type="dex_local_engine.WorkerLost",
    )
    assert attempt_progress(lost) is AttemptProgress.NOT_COMPLETED
    never_ran = RecoveryErrorInfo(
        detail="no Worker took the task (attempt_progress: NOT_STARTED)",
        error_type="dex_local_engine.Timeout",
    )
    assert attempt_progress(never_ran) is AttemptProgress.NOT_STARTED
    mentioned_mid_text = RecoveryErrorInfo(
        detail="(attempt_progress: NOT_STARTED) was logged earlier", error_type="x"
    )
    assert attempt_progress(mentioned_mid_text) is AttemptProgress.UNKNOWN


def test_finalize_requires_a_final_status_and_unfinished_keeps_deferral_order() -> None:
    record = _record(ToolEffect.READ)
    with pytest.raises(ConfigurationError, match="final status"):
        finalize_tool_call(record, AgentToolCallStatus.APPROVED)
    later = _record(ToolEffect.READ, order=2)
    done = finalize_tool_call(_record(ToolEffect.READ, order=1), AgentToolCallStatus.SUCCEEDED)
    records = {r.tool_call_id: r for r in (later, done, record)}
    assert [r.tool_call_id for r in unfinished_tool_calls(records, "turn-1")] == [
        "call-0",
        "call-2",
    ]
    assert unfinished_tool_calls(records, "turn-2") == []

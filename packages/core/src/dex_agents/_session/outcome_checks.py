"""Pure decisions of the outcome check: when a lost call is checked, and what each answer records.

``RecordToolOutcomeUnknown`` asks :func:`is_outcome_checkable` before it records a lost
single-attempt call ``outcome_unknown``; when the tool declares a check, it stores
:func:`begin_outcome_check` and moves to ``CheckToolOutcome``, which records
:func:`apply_outcome_check`. A check that fails on every attempt comes back to
``RecordToolOutcomeUnknown`` as its failure route, which records :func:`record_failed_check`.
"""

from __future__ import annotations

from dataclasses import replace

from dex import RecoveryErrorInfo

from dex_agents._runner_contract import tool_call_idempotency_key
from dex_agents._session.transitions import finalize_tool_call, recovery_error_text
from dex_agents._tool_outcome_check import (
    ToolOutcomeCheckRequest,
    ToolOutcomeCheckResult,
    ToolOutcomeCheckStatus,
    ToolOutcomeVerdict,
    tool_call_not_applied_error,
)
from dex_agents._values import AgentToolCall, AgentToolCallStatus

__all__ = [
    "MAX_RUN_AGAIN_COUNT",
    "apply_outcome_check",
    "begin_outcome_check",
    "is_outcome_checkable",
    "outcome_check_request",
    "record_failed_check",
]

MAX_RUN_AGAIN_COUNT = 1
"""A call whose check answered *not applied* runs again at most this many times."""


def is_outcome_checkable(record: AgentToolCall, recorded: AgentToolCall) -> bool:
    """Whether a lost call goes to its outcome check instead of being recorded as ``recorded``.

    Only a call whose tool ran in its tool Step (``approved``, no remote task: a task may still
    run, so nothing can be confirmed) and that would record ``outcome_unknown`` is checked; a call
    never started records ``failed`` without a check.

    Example:
        >>> is_outcome_checkable(record, replace(record, status=AgentToolCallStatus.FAILED))
        False
    """
    return (
        recorded.status is AgentToolCallStatus.OUTCOME_UNKNOWN
        and record.status is AgentToolCallStatus.APPROVED
        and record.task_id is None
        and record.outcome_check is not ToolOutcomeCheckStatus.PENDING
    )


def begin_outcome_check(record: AgentToolCall, lost_attempt_error: str | None) -> AgentToolCall:
    """The record ``CheckToolOutcome`` takes over: still ``approved``, check ``pending``, and the
    lost attempt's error kept for an ``outcome_unknown`` the check may still end in."""
    return replace(record, outcome_check=ToolOutcomeCheckStatus.PENDING, error=lost_attempt_error)


def outcome_check_request(
    record: AgentToolCall, flow_id: str, attempt: int
) -> ToolOutcomeCheckRequest:
    """The request of ``record``'s check, with the idempotency key the tool itself was given."""
    return ToolOutcomeCheckRequest(
        tool_name=record.tool_name,
        arguments=record.arguments,
        idempotency_key=tool_call_idempotency_key(flow_id, record.turn_id, record.tool_call_id),
        flow_id=flow_id,
        turn_id=record.turn_id,
        tool_call_id=record.tool_call_id,
        attempt=max(attempt, 1),
    )


def apply_outcome_check(
    record: AgentToolCall, result: ToolOutcomeCheckResult, *, run_again_if_not_applied: bool
) -> AgentToolCall:
    """The record after its check answered: final, or ``approved`` to run once more.

    - *applied*: ``succeeded`` with the check's output, ``outcome_check`` ``applied``.
    - *not applied*: ``approved`` again with ``run_again_count`` + 1 when the tool opted in and
      the call has not run again yet; else ``failed`` with
      :data:`~dex_agents.TOOL_CALL_NOT_APPLIED_ERROR_PREFIX`.
    - *unknown*: ``outcome_unknown`` with the lost attempt's error and the check's note.

    Example:
        >>> apply_outcome_check(
        ...     record, ToolOutcomeCheckResult.applied("refunded"), run_again_if_not_applied=False
        ... ).status.value
        'succeeded'
    """
    verdict = result.verdict
    if verdict is ToolOutcomeVerdict.APPLIED:
        final = finalize_tool_call(record, AgentToolCallStatus.SUCCEEDED, output=result.output)
        return replace(final, outcome_check=ToolOutcomeCheckStatus.APPLIED)
    if verdict is ToolOutcomeVerdict.NOT_APPLIED:
        if run_again_if_not_applied and record.run_again_count < MAX_RUN_AGAIN_COUNT:
            return replace(
                record,
                outcome_check=ToolOutcomeCheckStatus.NOT_APPLIED,
                run_again_count=record.run_again_count + 1,
                error=None,
            )
        final = finalize_tool_call(
            record, AgentToolCallStatus.FAILED, error=tool_call_not_applied_error(result.note or "")
        )
        return replace(final, outcome_check=ToolOutcomeCheckStatus.NOT_APPLIED)
    final = finalize_tool_call(
        record,
        AgentToolCallStatus.OUTCOME_UNKNOWN,
        error=_joined(record.error, f"outcome check: {result.note}" if result.note else None),
    )
    return replace(final, outcome_check=ToolOutcomeCheckStatus.UNKNOWN)


def record_failed_check(record: AgentToolCall, recovery: RecoveryErrorInfo | None) -> AgentToolCall:
    """``outcome_unknown`` after the check failed on every attempt (``check_failed``), whatever
    its attempts' progress: the tool itself ran before the check.

    Example:
        >>> record_failed_check(begin_outcome_check(record, "Worker lost"), None).outcome_check.value
        'check_failed'
    """
    detail = recovery_error_text(recovery) or (recovery.error_type if recovery else "")
    final = finalize_tool_call(
        record,
        AgentToolCallStatus.OUTCOME_UNKNOWN,
        error=_joined(record.error, f"the outcome check failed: {detail or 'no detail'}"),
    )
    return replace(final, outcome_check=ToolOutcomeCheckStatus.CHECK_FAILED)


def _joined(first: str | None, second: str | None) -> str | None:
    parts = [part for part in (first, second) if part]
    return "; ".join(parts) if parts else None

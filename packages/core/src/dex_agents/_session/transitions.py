"""Pure decisions of the agent session: how state, records, and interrupts change.

The Steps read committed values, ask these functions what changes, and write the answer, so every
rule here is testable without an engine and shared by every Step that applies it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from dex import RecoveryErrorInfo

from dex_agents._runner_contract import tool_call_not_run_error
from dex_agents._tool_policy import ResolvedToolPolicy, tool_effect_rules
from dex_agents._values import (
    AgentInterrupt,
    AgentInterruptResolution,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    CancellationReason,
    InteractionMode,
    InterruptKind,
    ResolveInterruptRequest,
    agent_turn_id,
)
from dex_agents.exceptions import ConfigurationError

__all__ = [
    "APPROVAL_DEADLINE_PASSED_MESSAGE",
    "ApprovalOutcome",
    "AttemptProgress",
    "InterruptResolutionDecision",
    "RequestedToolCall",
    "ToolFailureRoute",
    "apply_approval",
    "attempt_progress",
    "complete_turn",
    "decide_interrupt_resolution",
    "expire_approval",
    "fail_turn",
    "finalize_tool_call",
    "find_pending_interrupt",
    "interrupt_for_approval",
    "new_tool_call_record",
    "record_tool_failure",
    "recovery_error_text",
    "remove_interrupt",
    "seconds_until",
    "start_turn",
    "unfinished_tool_calls",
]

APPROVAL_DEADLINE_PASSED_MESSAGE: Final = "approval deadline passed"
"""``rejection_message`` of an approval whose deadline passed before anyone answered."""


class AttemptProgress(StrEnum):
    """How far the last attempt of a failed tool Step got, from its recovery error.

    ``NOT_STARTED``: no attempt reached a Worker, so the tool never ran. ``NOT_COMPLETED``: an
    attempt may have run the tool (conservative). ``UNKNOWN``: Dex did not say.
    """

    NOT_STARTED = "NOT_STARTED"
    NOT_COMPLETED = "NOT_COMPLETED"
    UNKNOWN = "UNKNOWN"


class ToolFailureRoute(StrEnum):
    """The failure route that records a tool Step whose attempts ran out."""

    RECORD_TOOL_FAILURE = "RecordToolFailure"
    RECORD_TOOL_OUTCOME_UNKNOWN = "RecordToolOutcomeUnknown"


@dataclass(frozen=True)
class RequestedToolCall:
    """The fields of a runner's ``DeferredToolCall`` that the session records."""

    tool_call_id: str
    tool_name: str
    arguments: str
    policy: ResolvedToolPolicy
    tool_source_reference: str | None = None


def start_turn(state: AgentState) -> AgentState:
    """Return the state of a new chat turn that runs its first model call.

    Example:
        >>> start_turn(AgentState()).active_turn_id
        'turn-1'
    """
    turn_count = state.turn_count + 1
    return replace(
        state,
        status=AgentStatus.RUNNING_MODEL,
        interaction_mode=InteractionMode.CHAT,
        active_turn_id=agent_turn_id(turn_count),
        turn_count=turn_count,
        # Turns this release starts can be steered and cancelled.
        accepts_turn_control=True,
    )


def complete_turn(state: AgentState) -> AgentState:
    """Return the state after the active turn completed: waiting, with no last error.

    Example:
        >>> complete_turn(start_turn(AgentState(last_turn_error="boom"))).last_turn_error is None
        True
    """
    return replace(
        state,
        status=AgentStatus.WAITING_FOR_USER_MESSAGE,
        active_turn_id=None,
        last_turn_error=None,
    )


def fail_turn(state: AgentState, error: str) -> AgentState:
    """Return the state after the active turn failed with ``error``.

    Example:
        >>> fail_turn(start_turn(AgentState()), "model down").status.value
        'waiting_for_user_message'
    """
    return replace(
        state,
        status=AgentStatus.WAITING_FOR_USER_MESSAGE,
        active_turn_id=None,
        last_turn_error=error,
    )


def new_tool_call_record(
    call: RequestedToolCall,
    *,
    turn_id: str,
    deferral_order: int,
    now: datetime,
) -> AgentToolCall:
    """Return the record ``RunModel`` stores for one requested call.

    A call whose policy requires approval starts ``awaiting_approval``; any other starts
    ``approved`` and goes straight to its tool Step.

    Example:
        >>> from dex_agents import ToolEffect
        >>> call = RequestedToolCall("c1", "search", "{}", ResolvedToolPolicy(ToolEffect.READ, False))
        >>> new_tool_call_record(call, turn_id="turn-1", deferral_order=0, now=now).status.value
        'approved'
    """
    return AgentToolCall(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        effect=call.policy.effect,
        requires_approval=call.policy.requires_approval,
        status=(
            AgentToolCallStatus.AWAITING_APPROVAL
            if call.policy.requires_approval
            else AgentToolCallStatus.APPROVED
        ),
        turn_id=turn_id,
        deferral_order=deferral_order,
        tool_source_reference=call.tool_source_reference,
        created_at=now,
    )


def interrupt_for_approval(
    record: AgentToolCall, *, now: datetime, deadline_after: timedelta | None
) -> AgentInterrupt:
    """Return the approval interrupt of a record that requires approval.

    Example:
        >>> interrupt_for_approval(record, now=now, deadline_after=None).interrupt_id == record.tool_call_id
        True
    """
    return AgentInterrupt(
        interrupt_id=record.tool_call_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        kind=InterruptKind.APPROVAL,
        turn_id=record.turn_id,
        arguments=record.arguments,
        deadline=now + deadline_after if deadline_after is not None else None,
        created_at=now,
    )


def find_pending_interrupt(
    interrupts: Sequence[AgentInterrupt], interrupt_id: str
) -> AgentInterrupt | None:
    """Return the pending interrupt with ``interrupt_id``, or ``None``."""
    return next((item for item in interrupts if item.interrupt_id == interrupt_id), None)


def remove_interrupt(
    interrupts: Sequence[AgentInterrupt], interrupt_id: str
) -> list[AgentInterrupt]:
    """Return ``interrupts`` without the one with ``interrupt_id``."""
    return [item for item in interrupts if item.interrupt_id != interrupt_id]


@dataclass(frozen=True)
class InterruptResolutionDecision:
    """What ``resolve_interrupt`` or ``answer_question`` commits: nothing when ``resolution`` is
    ``None``."""

    resolution: AgentInterruptResolution | None
    remaining_interrupts: tuple[AgentInterrupt, ...]


def decide_interrupt_resolution(
    interrupts: Sequence[AgentInterrupt], request: ResolveInterruptRequest, now: datetime
) -> InterruptResolutionDecision:
    """Decide a ``resolve_interrupt`` call.

    It resolves nothing when the interrupt is not pending, is past its deadline, or is a question
    that the request approves (a question is answered with ``answer_question``). An approval drops
    the rejection message.

    Example:
        >>> decide_interrupt_resolution([], ResolveInterruptRequest("c1", True), now).resolution is None
        True
    """
    unchanged = InterruptResolutionDecision(None, tuple(interrupts))
    pending = find_pending_interrupt(interrupts, request.interrupt_id)
    if pending is None:
        return unchanged
    if pending.deadline is not None and now >= pending.deadline:
        return unchanged
    if pending.kind is InterruptKind.QUESTION and request.approved:
        return unchanged
    resolution = AgentInterruptResolution(
        interrupt_id=request.interrupt_id,
        approved=request.approved,
        rejection_message=None if request.approved else request.rejection_message,
    )
    return InterruptResolutionDecision(
        resolution, tuple(remove_interrupt(interrupts, request.interrupt_id))
    )


class ApprovalOutcome(StrEnum):
    """What ``AwaitToolApproval`` does after its wait ends."""

    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    WAIT_AGAIN = "wait_again"


def apply_approval(record: AgentToolCall, resolution: AgentInterruptResolution) -> AgentToolCall:
    """Return the record after a person answered its approval.

    Example:
        >>> apply_approval(record, AgentInterruptResolution("c1", False, "no")).status.value
        'rejected'
    """
    if resolution.approved:
        return replace(record, status=AgentToolCallStatus.APPROVED)
    return finalize_tool_call(
        record,
        AgentToolCallStatus.REJECTED,
        rejection_message=resolution.rejection_message,
        cancellation_reason=resolution.cancellation_reason,
    )


def expire_approval(
    interrupts: Sequence[AgentInterrupt], tool_call_id: str, now: datetime
) -> ApprovalOutcome:
    """Decide what a fired deadline Timer of an approval means.

    The interrupt may have been resolved just as the Timer fired: the answer is then on its way,
    so the Step waits again and applies it. A Timer that fired before the deadline (Worker clock)
    waits again too.

    Example:
        >>> expire_approval([], "c1", now)
        <ApprovalOutcome.WAIT_AGAIN: 'wait_again'>
    """
    pending = find_pending_interrupt(interrupts, tool_call_id)
    if pending is None or pending.deadline is None or now < pending.deadline:
        return ApprovalOutcome.WAIT_AGAIN
    return ApprovalOutcome.EXPIRED


def seconds_until(deadline: datetime, now: datetime) -> int:
    """Return the whole seconds from ``now`` to ``deadline``, rounded up, never below 0.

    Dex Timers take whole seconds; rounding up never fires a deadline Timer early.

    Example:
        >>> seconds_until(now + timedelta(seconds=1.2), now)
        2
    """
    return max(0, math.ceil((deadline - now).total_seconds()))


def finalize_tool_call(
    record: AgentToolCall,
    status: AgentToolCallStatus,
    *,
    output: str | None = None,
    error: str | None = None,
    rejection_message: str | None = None,
    cancellation_reason: CancellationReason | None = None,
) -> AgentToolCall:
    """Return ``record`` with a final ``status`` and its result fields.

    Raises:
        ConfigurationError: When ``status`` is not final.

    Example:
        >>> finalize_tool_call(record, AgentToolCallStatus.SUCCEEDED, output="3 tickets").output
        '3 tickets'
    """
    if not status.is_final:
        raise ConfigurationError(
            f"a tool call can only be finalized with a final status, got {status}"
        )
    return replace(
        record,
        status=status,
        output=output,
        error=error,
        rejection_message=rejection_message,
        cancellation_reason=cancellation_reason,
    )


def attempt_progress(recovery: RecoveryErrorInfo | None) -> AttemptProgress:
    """Return how far the failed Step's last attempt got, from its recovery error.

    Reads the recovery error's ``attempt_progress`` when the SDK carries it. dex-python-sdk 1.23
    has no such field, so an engine reports it as a ``(attempt_progress: NOT_STARTED)`` trailer of
    ``detail`` (as dex-local-engine does) or at the end of ``error_type``, such as
    ``dex_local_engine.NOT_STARTED``; case and separators do not matter.

    Example:
        >>> attempt_progress(RecoveryErrorInfo(detail="no Worker", error_type="NOT_STARTED"))
        <AttemptProgress.NOT_STARTED: 'NOT_STARTED'>
        >>> attempt_progress(
        ...     RecoveryErrorInfo(detail="timed out (attempt_progress: NOT_COMPLETED)", error_type="")
        ... )
        <AttemptProgress.NOT_COMPLETED: 'NOT_COMPLETED'>
    """
    if recovery is None:
        return AttemptProgress.UNKNOWN
    field = getattr(recovery, "attempt_progress", None)
    trailer = _ATTEMPT_PROGRESS_TRAILER.search(recovery.detail or "")
    reported = str(field or (trailer.group(1) if trailer else recovery.error_type))
    letters = "".join(character for character in reported.upper() if character.isalpha())
    for progress in (AttemptProgress.NOT_STARTED, AttemptProgress.NOT_COMPLETED):
        if letters.endswith(progress.value.replace("_", "")):
            return progress
    return AttemptProgress.UNKNOWN


_ATTEMPT_PROGRESS_TRAILER = re.compile(r"\(attempt_progress:\s*([A-Za-z_]+)\)\s*$")


def record_tool_failure(
    record: AgentToolCall, route: ToolFailureRoute, recovery: RecoveryErrorInfo | None
) -> AgentToolCall:
    """Return the final record a failure route stores for a tool Step whose attempts ran out.

    A Step that never reached a Worker never ran the tool: ``failed`` with
    ``TOOL_CALL_NOT_RUN_ERROR_PREFIX``. Otherwise ``RecordToolFailure`` records ``failed`` for a
    read and ``outcome_unknown`` for a write, and ``RecordToolOutcomeUnknown`` always
    ``outcome_unknown``, because the write may have taken effect.

    Example:
        >>> record.effect.value
        'read'
        >>> record_tool_failure(record, ToolFailureRoute.RECORD_TOOL_FAILURE, None).status.value
        'failed'
    """
    detail = _recovery_detail(recovery)
    if (
        attempt_progress(recovery) is AttemptProgress.NOT_STARTED
        and record.question_count == 0
        and record.task_id is None
    ):
        return finalize_tool_call(
            record,
            AgentToolCallStatus.FAILED,
            error=tool_call_not_run_error(detail),
        )
    is_outcome_unknown = (
        route is ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN
        or tool_effect_rules(record.effect).is_outcome_unknown_after_failure
    )
    status = (
        AgentToolCallStatus.OUTCOME_UNKNOWN if is_outcome_unknown else AgentToolCallStatus.FAILED
    )
    return finalize_tool_call(record, status, error=detail)


def _recovery_detail(recovery: RecoveryErrorInfo | None) -> str:
    if recovery is None:
        return "the tool Step failed without a recovery error"
    return recovery_error_text(recovery) or recovery.error_type or "the tool Step failed"


def recovery_error_text(recovery: RecoveryErrorInfo | None) -> str:
    """Return the recovery error's detail for people: without the engine's
    ``(attempt_progress: ...)`` trailer, which only :func:`attempt_progress` reads; ``""`` when
    there is none.

    Example:
        >>> recovery_error_text(
        ...     RecoveryErrorInfo(detail="404: Not Found (attempt_progress: NOT_COMPLETED)", error_type="")
        ... )
        '404: Not Found'
    """
    if recovery is None or not recovery.detail:
        return ""
    return _ATTEMPT_PROGRESS_TRAILER.sub("", recovery.detail).rstrip()


def unfinished_tool_calls(
    records: Mapping[str, AgentToolCall], turn_id: str | None
) -> list[AgentToolCall]:
    """Return the records of ``turn_id`` that are not final yet, in deferral order."""
    return sorted(
        (
            record
            for record in records.values()
            if record.turn_id == turn_id and not record.is_final
        ),
        key=lambda record: record.deferral_order,
    )

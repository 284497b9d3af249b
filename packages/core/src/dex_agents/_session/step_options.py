"""StepOptions of every agent session Step: durability, timeouts, retries, loads, and locks.

Every Step sets wait_for and execute durability to SYNC explicitly, so a Flow configured with
``FlowConfig(step_durability=ASYNC)`` never replays a Step result. The tool Steps, their failure
routes, and ``AwaitToolApproval`` load only their own ``AgentToolCalls`` instance, so parallel tool
Steps never read or conflict on each other's records; their options are therefore built per
movement, for one tool call ID.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any, Final

from dex import AttributeMap, AttributeMapLoad, RetryPolicy, Step, StepDurability, StepOptions

from dex_agents._session.options import RunModelLimit, ToolCallLimit
from dex_agents._session.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGES,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    TURN_CANCELLATION_REQUEST,
)

__all__ = [
    "CANCEL_TOOL_TASK_ATTEMPTS",
    "CANCEL_TOOL_TASK_RETRY_BUDGET",
    "CANCEL_TOOL_TASK_TIMEOUT",
    "POLL_TOOL_TASK_ATTEMPTS",
    "SYNC_STEP_OPTIONS",
    "apply_turn_control_step_options",
    "await_user_message_step_options",
    "cancel_tool_task_step_options",
    "finish_turn_cancellation_step_options",
    "message_storing_step_options",
    "resume_turn_step_options",
    "run_model_step_options",
    "tool_call_record_step_options",
    "tool_call_step_options",
    "turn_failure_step_options",
    "turn_step_options",
    "with_selected_message_chunks",
]

SYNC_STEP_OPTIONS = StepOptions(
    wait_for_durability=StepDurability.SYNC,
    execute_durability=StepDurability.SYNC,
)
"""The options every session Step starts from: SYNC durability for both methods."""

POLL_TOOL_TASK_ATTEMPTS: Final = 3
"""Attempts of one poll: a task's poll may fail twice before the call is recorded by its effect."""
CANCEL_TOOL_TASK_ATTEMPTS: Final = 3
"""Attempts of ``CancelToolTask``."""
CANCEL_TOOL_TASK_RETRY_BUDGET: Final = timedelta(minutes=2)
"""Time from the first ``CancelToolTask`` attempt after which no attempt starts."""
CANCEL_TOOL_TASK_TIMEOUT: Final = timedelta(seconds=30)
"""How long one ``CancelToolTask`` attempt may run."""

# Every kept chunk too: bounded by retention with compaction, every message without it.
_ALL_MESSAGES_AND_RECORDS: tuple[AttributeMap[Any], ...] = (
    AGENT_MESSAGES,
    AGENT_MESSAGE_CHUNKS,
    AGENT_TOOL_CALLS,
)


def with_selected_message_chunks(
    options: StepOptions, chunk_loads: tuple[AttributeMapLoad, ...]
) -> StepOptions:
    """Return per-movement ``options`` that load only ``chunk_loads`` of the message chunks.

    ``RunModel`` with compaction reads only the chunks after the summary; it still loads the whole
    window and every tool call record.

    Example:
        >>> options = with_selected_message_chunks(turn_step_options(), ())
        >>> AGENT_MESSAGE_CHUNKS in options.execute_load_attribute_maps
        False
    """
    return replace(
        options,
        execute_load_attribute_maps=tuple(
            loaded
            for loaded in options.execute_load_attribute_maps
            if loaded is not AGENT_MESSAGE_CHUNKS
        ),
        execute_load_attribute_map_instances=(
            *options.execute_load_attribute_map_instances,
            *chunk_loads,
        ),
    )


def message_storing_step_options() -> StepOptions:
    """Options of a Step that stores messages, such as ``AwaitUserMessage``.

    Every Step that stores messages loads the stored messages, so the message store can reorganize
    them (chunked storage) in the same commit.

    Returns:
        SYNC options that load every ``AgentMessages`` instance in execute.

    Example:
        >>> message_storing_step_options().execute_durability
        <StepDurability.SYNC: 'sync'>
    """
    return replace(SYNC_STEP_OPTIONS, execute_load_attribute_maps=(AGENT_MESSAGES,))


def turn_step_options() -> StepOptions:
    """Options of a Step that builds the runner's view of the turn: every message and record.

    Returns:
        SYNC options that load every ``AgentMessages`` and ``AgentToolCalls`` instance in execute.

    Example:
        >>> AGENT_MESSAGE_CHUNKS in turn_step_options().execute_load_attribute_maps
        True
    """
    return replace(SYNC_STEP_OPTIONS, execute_load_attribute_maps=_ALL_MESSAGES_AND_RECORDS)


def run_model_step_options(limit: RunModelLimit, failure_route: type[Step[Any]]) -> StepOptions:
    """Options of ``RunModel``: the model call limit, every message and record, a failure route.

    Args:
        limit: Timeout, heartbeat timeout, attempts, and retry budget of one model call.
        failure_route: The Step that records the failed turn once the attempts run out.

    Returns:
        SYNC options with the limit's timeouts and retry policy and the failure route.

    Example:
        >>> from dex_agents._session.turn_steps import RecordTurnFailure
        >>> run_model_step_options(RunModelLimit(), RecordTurnFailure).execute_retry.maximum_attempts
        3
    """
    return replace(
        turn_step_options(),
        execute_method_timeout=limit.attempt_timeout,
        heartbeat_timeout=limit.heartbeat_timeout,
        execute_retry=RetryPolicy(
            maximum_attempts=limit.maximum_attempts,
            total_duration=limit.retry_budget,
        ),
    ).on_execute_failure_proceed_to(failure_route, turn_failure_step_options())


def turn_failure_step_options() -> StepOptions:
    """Options of ``RecordTurnFailure``, which stores messages and clears every record of the turn.

    Returns:
        SYNC options that load every message and record.

    Example:
        >>> AGENT_MESSAGE_CHUNKS in turn_failure_step_options().execute_load_attribute_maps
        True
    """
    return turn_step_options()


def resume_turn_step_options() -> StepOptions:
    """Options of ``ResumeTurn``, which reads every record of the turn after the results arrive.

    Returns:
        SYNC options that load every ``AgentToolCalls`` instance and lock ``PendingInterrupts``.

    Example:
        >>> resume_turn_step_options().execute_load_attribute_maps == (AGENT_TOOL_CALLS,)
        True
    """
    return replace(
        SYNC_STEP_OPTIONS,
        execute_load_attribute_maps=(AGENT_TOOL_CALLS,),
        execute_lock_attributes=(PENDING_INTERRUPTS.lock(),),
    )


def tool_call_record_step_options(
    tool_call_id: str, *, locks_interrupts: bool = False
) -> StepOptions:
    """Options of a short Step that owns one tool call record (approval waits, failure routes).

    Args:
        tool_call_id: The call whose ``AgentToolCalls`` instance the Step loads.
        locks_interrupts: Whether execute locks ``PendingInterrupts``, as ``AwaitToolApproval``
            does to expire an interrupt without racing ``resolve_interrupt``.

    Returns:
        SYNC options loading only that record in both methods.

    Example:
        >>> options = tool_call_record_step_options("call-1")
        >>> options.execute_load_attribute_map_instances[0].instance
        'call-1'
    """
    record = (AGENT_TOOL_CALLS.load(tool_call_id),)
    return replace(
        SYNC_STEP_OPTIONS,
        wait_for_load_attribute_map_instances=record,
        execute_load_attribute_map_instances=record,
        execute_lock_attributes=(PENDING_INTERRUPTS.lock(),) if locks_interrupts else (),
    )


def tool_call_step_options(
    tool_call_id: str,
    *,
    limit: ToolCallLimit,
    maximum_attempts: int,
    failure_route: type[Step[Any]],
) -> StepOptions:
    """Options of ``CallTool`` or ``CallSingleAttemptTool`` for one call.

    Args:
        tool_call_id: The call whose record the Step and its failure route load.
        limit: Timeout, heartbeat timeout, and retry budget of a tool call.
        maximum_attempts: From the effect: 3 for ``CallTool``, 1 for single-attempt tools.
        failure_route: ``RecordToolFailure`` or ``RecordToolOutcomeUnknown``.

    Returns:
        SYNC options with the attempts, timeouts, the record load, and the failure route, whose
        own movement loads the same record.

    Example:
        >>> from dex_agents._session.tool_steps import RecordToolOutcomeUnknown
        >>> tool_call_step_options(
        ...     "call-1", limit=ToolCallLimit(), maximum_attempts=1, failure_route=RecordToolOutcomeUnknown
        ... ).execute_retry.maximum_attempts
        1
    """
    return replace(
        tool_call_record_step_options(tool_call_id),
        execute_method_timeout=limit.attempt_timeout,
        heartbeat_timeout=limit.heartbeat_timeout,
        execute_retry=RetryPolicy(
            maximum_attempts=maximum_attempts,
            total_duration=limit.retry_budget,
        ),
    ).on_execute_failure_proceed_to(failure_route, tool_call_record_step_options(tool_call_id))


def cancel_tool_task_step_options(
    tool_call_id: str, *, failure_route: type[Step[Any]]
) -> StepOptions:
    """Options of ``CancelToolTask`` for one call: 3 attempts in 2 minutes, 30 s each, and a
    failure route that records the call, so the turn ends even when the cancellation keeps
    failing.

    Example:
        >>> from dex_agents._session.tool_steps import RecordToolOutcomeUnknown
        >>> options = cancel_tool_task_step_options("c1", failure_route=RecordToolOutcomeUnknown)
        >>> options.execute_retry.maximum_attempts, options.execute_method_timeout.seconds
        (3, 30)
    """
    record_options = tool_call_record_step_options(tool_call_id)
    return replace(
        record_options,
        execute_method_timeout=CANCEL_TOOL_TASK_TIMEOUT,
        execute_retry=RetryPolicy(
            maximum_attempts=CANCEL_TOOL_TASK_ATTEMPTS,
            total_duration=CANCEL_TOOL_TASK_RETRY_BUDGET,
        ),
    ).on_execute_failure_proceed_to(failure_route, record_options)


def finish_turn_cancellation_step_options() -> StepOptions:
    """Options of ``FinishTurnCancellation``: every record, both locks in execute.

    Example:
        >>> len(finish_turn_cancellation_step_options().execute_lock_attributes)
        2
    """
    return replace(
        SYNC_STEP_OPTIONS,
        execute_load_attribute_maps=(AGENT_TOOL_CALLS,),
        execute_lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_INTERRUPTS.lock()),
    )


def await_user_message_step_options() -> StepOptions:
    """Options of ``AwaitUserMessage``: a message-storing Step that locks
    ``TurnCancellationRequest`` in execute, so no turn starts while ``cancel_turn`` decides.

    Example:
        >>> await_user_message_step_options().execute_load_attribute_maps == (AGENT_MESSAGES,)
        True
    """
    return replace(
        message_storing_step_options(),
        execute_lock_attributes=(TURN_CANCELLATION_REQUEST.lock(),),
    )


def apply_turn_control_step_options() -> StepOptions:
    """Options of ``ApplyTurnControl``: every message and record, and the locks of
    ``TurnCancellationRequest`` and ``PendingInterrupts`` in execute.

    Example:
        >>> len(apply_turn_control_step_options().execute_lock_attributes)
        2
    """
    return replace(
        turn_step_options(),
        execute_lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_INTERRUPTS.lock()),
    )

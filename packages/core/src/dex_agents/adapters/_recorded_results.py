"""What the model sees for a tool call of the turn, from the call's record, in every runner.

Apart from the error policy (``_tool_outcomes``), which checks arguments with the Stepwise JSON
Schema validator: the Stepwise runner reads recorded results too, so this module imports nothing
of ``dex_agents.stepwise``.
"""

from __future__ import annotations

from dex_agents._runner_contract import OUTCOME_UNKNOWN_TOOL_RESULT, describe_tool_call_outcome
from dex_agents._values import AgentToolCall, AgentToolCallStatus

__all__ = ["recorded_tool_result", "tool_result_is_error"]


def recorded_tool_result(record: AgentToolCall | None) -> str:
    """The result text the model sees for a tool call of the turn, from its record.

    A final record reads as ``describe_tool_call_outcome(record)``; a call without a record, or
    whose record is not final (its tool Step never recorded an end), reads as
    ``OUTCOME_UNKNOWN_TOOL_RESULT``, so the model does not take it for a call that never ran.
    Raises nothing.

    Example:
        >>> import dataclasses
        >>> from dex_agents import AgentToolCallStatus
        >>> record.status, recorded_tool_result(record) == OUTCOME_UNKNOWN_TOOL_RESULT
        (<AgentToolCallStatus.APPROVED: 'approved'>, True)
        >>> failed = dataclasses.replace(
        ...     record, status=AgentToolCallStatus.FAILED, error="index offline"
        ... )
        >>> recorded_tool_result(failed)
        'Error: index offline'
    """
    if record is None or not record.status.is_final:
        return OUTCOME_UNKNOWN_TOOL_RESULT
    return describe_tool_call_outcome(record)


def tool_result_is_error(record: AgentToolCall | None) -> bool:
    """Whether the model sees a call's result as an error, in a framework whose tool results
    carry an error flag (Anthropic's ``is_error``, a LangChain ``ToolMessage``'s ``status``, a
    Strands ``ToolResult``'s ``status``, Pydantic AI's ``failed`` outcome).

    Only a call that ``failed`` is an error: its tool raised, or it could not run as asked. A call
    that was rejected, steered or cancelled, whose outcome is unknown, or that has no final record
    is an ordinary result whose text (:func:`recorded_tool_result`) says what happened, the line
    Pydantic AI draws too (``denied`` and ``interrupted`` are not error outcomes there).
    Raises nothing.

    Example:
        >>> import dataclasses
        >>> failed = dataclasses.replace(record, status=AgentToolCallStatus.FAILED, error="down")
        >>> tool_result_is_error(failed), tool_result_is_error(None)
        (True, False)
        >>> rejected = dataclasses.replace(record, status=AgentToolCallStatus.REJECTED)
        >>> tool_result_is_error(rejected)
        False
    """
    return record is not None and record.status is AgentToolCallStatus.FAILED

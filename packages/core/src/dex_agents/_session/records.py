"""The writes several Steps make the same way: tool call records and usage.

Each rule lives here once: a record that becomes final is stored, publishes its one
``ToolCallResults`` message and writes ``tool_call_finished`` (:func:`finish_tool_call`), and a
model call's usage is added to the session total (:func:`record_usage`).
"""

from __future__ import annotations

from collections.abc import Mapping

from dex import Context

from dex_agents._event_writer import AgentEventWriter, write_event_payload
from dex_agents._events import UsageRecordedPayload
from dex_agents._session.persistence import AGENT_TOOL_CALLS, AGENT_USAGE, TOOL_CALL_RESULTS
from dex_agents._values import AgentToolCall, AgentUsage, ToolCallCompleted, empty_agent_usage
from dex_agents.exceptions import ConfigurationError

__all__ = [
    "finish_tool_call",
    "load_all_tool_calls",
    "load_tool_call",
    "record_usage",
    "tool_calls_in_order",
]


def load_tool_call(context: Context, tool_call_id: str) -> AgentToolCall | None:
    """Return the record of ``tool_call_id`` (its instance must be loaded), or ``None``."""
    return AGENT_TOOL_CALLS.get(context, tool_call_id)


def load_all_tool_calls(context: Context) -> dict[str, AgentToolCall]:
    """Return every record by tool call ID (every instance must be loaded)."""
    return {
        key: AGENT_TOOL_CALLS.get(context, key)
        for key in AGENT_TOOL_CALLS.get_all_instance_keys(context)
    }


def tool_calls_in_order(records: Mapping[str, AgentToolCall]) -> list[AgentToolCall]:
    """Return records in deferral (model) order."""
    return sorted(records.values(), key=lambda record: record.deferral_order)


def finish_tool_call(context: Context, events: AgentEventWriter, record: AgentToolCall) -> None:
    """Commit a final record: store it, publish its one ``ToolCallResults`` message, and write
    ``tool_call_finished``.

    Every Step that makes a record final calls this, so each call publishes exactly once.

    Raises:
        ConfigurationError: When ``record`` is not final.
    """
    if not record.is_final:
        raise ConfigurationError(
            f"tool call {record.tool_call_id!r} is still {record.status.value}"
        )
    AGENT_TOOL_CALLS.set(context, record.tool_call_id, record)
    TOOL_CALL_RESULTS.publish(context, ToolCallCompleted(tool_call_id=record.tool_call_id))
    events.write_tool_call_finished(
        record.tool_call_id, record.tool_name, record.status, record.outcome_check
    )


def record_usage(context: Context, events: AgentEventWriter, usage: AgentUsage) -> AgentUsage:
    """Add one model call's usage to ``AgentUsage`` and write ``usage_recorded``.

    Returns:
        The new session total.
    """
    total = (AGENT_USAGE.get(context) or empty_agent_usage()) + usage
    AGENT_USAGE.set(context, total)
    write_event_payload(events, UsageRecordedPayload(recorded=usage, session=total))
    return total

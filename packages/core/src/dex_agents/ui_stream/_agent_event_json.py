"""The JSON a browser receives: event frame data and the snapshot without its private fields."""

from __future__ import annotations

import json
from typing import Final

from dex_agents import AgentEvent, AgentSnapshot, JsonObject, JsonValue

__all__ = [
    "PRIVATE_MESSAGE_FIELDS",
    "PRIVATE_TOOL_CALL_FIELDS",
    "agent_event_json_text",
    "browser_snapshot_json",
]

PRIVATE_MESSAGE_FIELDS: Final = frozenset({"framework_item"})
"""Message fields only the session's Steps use: the framework's replay data, which can hold the
agent's instructions."""

PRIVATE_TOOL_CALL_FIELDS: Final = frozenset(
    {
        "tool_source_reference",
        "trace_context",
        "input_continuation",
        "input_answers",
        "task_answer_pending",
    }
)
"""Tool call record fields only the session's Steps use."""


def agent_event_json_text(event: AgentEvent) -> str:
    """The ``AgentEvent`` wire JSON, ``payload`` as JSON text, as the Dex SDK's codec writes it.

    Example:
        >>> agent_event_json_text(AgentEvent("text_delta", "turn-1", "RunModel-1", 1, '{"text":"Hi"}'))
        '{"attempt":1,"payload":"{\\\\"text\\\\":\\\\"Hi\\\\"}","step_execution_id":"RunModel-1","turn_id":"turn-1","type":"text_delta"}'
    """
    # The SDK's JsonCodec settings; ASCII-only output also keeps every SSE data line one line.
    return json.dumps(event.to_json(), sort_keys=True, separators=(",", ":"), allow_nan=False)


def browser_snapshot_json(snapshot: AgentSnapshot) -> JsonObject:
    """``snapshot``'s wire JSON without the fields only the session's Steps use.

    ``framework_item`` leaves every message, and ``tool_source_reference``, ``trace_context``,
    ``input_continuation``, ``input_answers`` and ``task_answer_pending`` leave every tool call.
    ``session_settings`` stays as stored.

    Example:
        >>> data = browser_snapshot_json(AgentSnapshot(messages=messages))
        >>> data["messages"][0]["text"], "framework_item" in data["messages"][0]
        ('Find my open tickets', False)
    """
    data = snapshot.to_json()
    data["messages"] = _without(data.get("messages"), PRIVATE_MESSAGE_FIELDS)
    data["tool_calls"] = _without(data.get("tool_calls"), PRIVATE_TOOL_CALL_FIELDS)
    return data


def _without(records: JsonValue, fields: frozenset[str]) -> list[JsonValue]:
    if not isinstance(records, list):
        return []
    return [
        {key: value for key, value in record.items() if key not in fields}
        if isinstance(record, dict)
        else record
        for record in records
    ]

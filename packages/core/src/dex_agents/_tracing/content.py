"""Message content as JSON text in the GenAI message format, for spans that capture content.

Content comes from the ``AgentMessage`` projections (text and the ``tool_*`` fields), never from
``framework_item``; system instructions and tool definitions are not captured.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Final

from dex_agents._runner_contract import DeferredToolCall, describe_tool_call_outcome
from dex_agents._values import AgentMessage, AgentToolCall, MessageRole

__all__ = [
    "input_messages_json",
    "message_json",
    "output_messages_json",
    "summary_output_json",
    "tool_request_output_json",
]

GenAIPart = dict[str, object]
GenAIMessage = dict[str, object]

_COMPLETED_FINISH_REASON: Final = "stop"
_TOOL_CALLS_FINISH_REASON: Final = "tool_call"


def _arguments(text: str | None) -> object:
    # The format holds arguments as a JSON value; text that is not JSON stays text.
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _parts(message: AgentMessage) -> list[GenAIPart]:
    parts: list[GenAIPart] = []
    if message.text:
        parts.append({"type": "text", "content": message.text})
    if message.tool_call_id is not None and message.tool_output is not None:
        parts.append(
            {
                "type": "tool_call_response",
                "id": message.tool_call_id,
                "response": message.tool_output,
            }
        )
    elif message.tool_call_id is not None and message.tool_name is not None:
        parts.append(
            {
                "type": "tool_call",
                "id": message.tool_call_id,
                "name": message.tool_name,
                "arguments": _arguments(message.tool_arguments),
            }
        )
    return parts


def _message(message: AgentMessage) -> GenAIMessage:
    return {"role": message.role.value, "parts": _parts(message)}


def _record_messages(record: AgentToolCall) -> list[GenAIMessage]:
    call: GenAIPart = {
        "type": "tool_call",
        "id": record.tool_call_id,
        "name": record.tool_name,
        "arguments": _arguments(record.arguments),
    }
    response: GenAIPart = {
        "type": "tool_call_response",
        "id": record.tool_call_id,
        "response": describe_tool_call_outcome(record),
    }
    return [
        {"role": MessageRole.ASSISTANT.value, "parts": [call]},
        {"role": MessageRole.TOOL.value, "parts": [response]},
    ]


def _dump(messages: Iterable[GenAIMessage]) -> str:
    return json.dumps(list(messages), ensure_ascii=False, separators=(",", ":"))


def message_json(messages: Sequence[AgentMessage]) -> str:
    """The GenAI input messages of ``messages``, such as an activation's user messages.

    Example:
        >>> message_json([AgentMessage(sequence=1, role=MessageRole.USER, framework_item="{}", text="hi")])
        '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]'
    """
    return _dump(_message(message) for message in messages)


def input_messages_json(
    messages: Sequence[AgentMessage], tool_calls: Sequence[AgentToolCall]
) -> str:
    """A model call's input: the stored messages plus the turn's final tool calls and results.

    A call whose result is already a stored message is not repeated.
    """
    stored_results = {
        message.tool_call_id
        for message in messages
        if message.tool_call_id is not None and message.tool_output is not None
    }
    records = [
        record
        for record in tool_calls
        if record.is_final and record.tool_call_id not in stored_results
    ]
    return _dump(
        [
            *(_message(message) for message in messages),
            *(item for record in records for item in _record_messages(record)),
        ]
    )


def _with_finish_reason(messages: list[GenAIMessage], finish_reason: str) -> list[GenAIMessage]:
    return [{**message, "finish_reason": finish_reason} for message in messages]


def output_messages_json(messages: Sequence[AgentMessage], finish_reasons: Sequence[str]) -> str:
    """What a completing model call produced: its stored messages after the last tool result."""
    reason = finish_reasons[0] if finish_reasons else _COMPLETED_FINISH_REASON
    return _dump(_with_finish_reason([_message(message) for message in messages], reason))


def tool_request_output_json(
    messages: Sequence[AgentMessage],
    tool_calls: Sequence[DeferredToolCall],
    finish_reasons: Sequence[str],
) -> str:
    """What a model call that requested tools produced: its messages and the tool calls."""
    parts: list[GenAIPart] = [
        {
            "type": "tool_call",
            "id": call.tool_call_id,
            "name": call.tool_name,
            "arguments": _arguments(call.arguments),
        }
        for call in tool_calls
    ]
    reason = finish_reasons[0] if finish_reasons else _TOOL_CALLS_FINISH_REASON
    requested = {call.tool_call_id for call in tool_calls}
    # A runner that stores its transcript as it goes hands back the previous results and this
    # response's requests as messages too; the requests are the parts above.
    produced = [
        _message(message)
        for message in messages
        if message.role is not MessageRole.TOOL and message.tool_call_id not in requested
    ]
    return _dump(
        _with_finish_reason(
            [*produced, {"role": MessageRole.ASSISTANT.value, "parts": parts}], reason
        )
    )


def summary_output_json(text: str, finish_reasons: Sequence[str] = ()) -> str:
    """A ``CompactContext`` call's output: the summary text, with the call's finish reason."""
    message: GenAIMessage = {
        "role": MessageRole.ASSISTANT.value,
        "parts": [{"type": "text", "content": text}],
    }
    reason = finish_reasons[0] if finish_reasons else _COMPLETED_FINISH_REASON
    return _dump(_with_finish_reason([message], reason))

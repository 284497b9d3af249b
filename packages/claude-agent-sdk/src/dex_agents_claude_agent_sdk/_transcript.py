"""How the turn's items are stored, and how stored items become the CLI's conversation again.

Every stored ``framework_item`` is Anthropic Messages API JSON, as the model saw it:

- a user text: ``{"role": "user", "content": "<text>"}``;
- a model response, split after each ``tool_use`` block so each stored message carries at most one
  tool call (the session's per-call projections and the compaction rules need that): the response
  envelope (``id``, ``model``, ``stop_reason``, ``usage``) with that part of its ``content``.
  Consecutive parts with the same ``id`` join into the response again;
- a tool result: ``{"role": "user", "content": [{"type": "tool_result", ...}]}``, one per call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentMessage,
    AgentToolCall,
    FrameworkMessage,
    MessageRole,
    describe_tool_call_outcome,
    dump_json_text,
)
from dex_agents.adapters import KeptDecodes, tool_result_is_error

__all__ = [
    "ApiMessage",
    "JsonDict",
    "ToolResultContent",
    "api_messages",
    "assistant_messages",
    "join_responses",
    "record_result",
    "response_text",
    "stored_item",
    "tool_result_message",
    "tool_uses",
    "transcript_entries",
    "user_text_message",
]

JsonDict = dict[str, Any]
ApiMessage = JsonDict
_TRANSCRIPT_TIMESTAMP: Final = "2026-01-01T00:00:00.000Z"
_UUID_NAMESPACE: Final = uuid.UUID("6f1d3c2a-1b7e-4d8a-9c4e-5a2f0d9b7c31")


@dataclass(frozen=True)
class ToolResultContent:
    """A tool result as the model sees it: ``tool_result`` content blocks and the error flag."""

    content: list[JsonDict]
    is_error: bool

    @property
    def text(self) -> str:
        return "\n".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")


def user_text_message(text: str) -> FrameworkMessage:
    """The stored form of user text."""
    item = {"role": "user", "content": text}
    return FrameworkMessage(role=MessageRole.USER, framework_item=dump_json_text(item), text=text)


def tool_uses(message: Mapping[str, Any]) -> list[JsonDict]:
    """The ``tool_use`` blocks of a response, in order."""
    return [b for b in message.get("content") or [] if b.get("type") == "tool_use"]


def response_text(message: Mapping[str, Any]) -> str:
    """The visible text of a response."""
    return "".join(
        str(b.get("text", "")) for b in message.get("content") or [] if b.get("type") == "text"
    )


def assistant_messages(response: Mapping[str, Any]) -> list[FrameworkMessage]:
    """A model response as stored messages, one part per tool call (see the module docs)."""
    parts: list[list[JsonDict]] = [[]]
    for block in response.get("content") or []:
        parts[-1].append(dict(block))
        if block.get("type") == "tool_use":
            parts.append([])
    if not parts[-1] and len(parts) > 1:
        parts.pop()
    envelope = {key: value for key, value in response.items() if key != "content"}
    stored: list[FrameworkMessage] = []
    for part in parts:
        item = {**envelope, "role": "assistant", "content": part}
        calls = tool_uses(item)
        call = calls[0] if calls else None
        stored.append(
            FrameworkMessage(
                role=MessageRole.ASSISTANT,
                framework_item=dump_json_text(item),
                text=response_text(item) or None,
                tool_call_id=str(call["id"]) if call else None,
                tool_name=_short_tool_name(str(call["name"])) if call else None,
                tool_arguments=dump_json_text(call.get("input") or {}) if call else None,
            )
        )
    return stored


def tool_result_message(block: Mapping[str, Any], tool_name: str | None) -> FrameworkMessage:
    """One ``tool_result`` block as a stored tool message."""
    clean = {key: value for key, value in block.items() if key != "cache_control"}
    content = _result_blocks(clean.get("content"))
    clean["content"] = content
    result = ToolResultContent(content, bool(clean.get("is_error")))
    return FrameworkMessage(
        role=MessageRole.TOOL,
        framework_item=dump_json_text({"role": "user", "content": [clean]}),
        tool_call_id=str(clean.get("tool_use_id")),
        tool_name=tool_name,
        tool_output=result.text,
    )


def record_result(record: AgentToolCall) -> ToolResultContent:
    """What the model sees for a final tool call record."""
    text = describe_tool_call_outcome(record)
    return ToolResultContent([{"type": "text", "text": text}], tool_result_is_error(record))


def stored_item(framework_item: str) -> ApiMessage:
    """The Messages API message a stored ``framework_item`` holds, the caller's own to edit.

    Every turn reads the whole conversation again: each item is parsed once per process and each
    read gets its own copy (joining response parts edits the messages read).

    Raises:
        ValueError: When the item is not JSON.
    """
    return _kept_items(framework_item)


def _parsed(framework_item: str) -> ApiMessage:
    item: ApiMessage = json.loads(framework_item)
    return item


_kept_items: Final = KeptDecodes(_parsed)


def join_responses(messages: Iterable[AgentMessage]) -> list[ApiMessage]:
    """Stored response parts joined into the responses the model sent, in order."""
    responses: list[ApiMessage] = []
    for message in messages:
        item = stored_item(message.framework_item)
        if responses and _same_response(responses[-1], item):
            responses[-1]["content"] = [*responses[-1]["content"], *item.get("content", [])]
        else:
            responses.append(item)
    return responses


def api_messages(messages: Iterable[AgentMessage]) -> list[ApiMessage]:
    """Stored messages as the Messages API conversation: response parts joined, consecutive tool
    results in one user message, and a result for every call (outcome unknown when none is
    stored), so no call is ever orphaned."""
    conversation: list[ApiMessage] = []
    for message in messages:
        item = stored_item(message.framework_item)
        previous = conversation[-1] if conversation else None
        if message.role is MessageRole.ASSISTANT:
            if previous is not None and _same_response(previous, item):
                previous["content"] = [*previous["content"], *item.get("content", [])]
            else:
                conversation.append(item)
        elif message.role is MessageRole.TOOL and previous is not None and _is_results(previous):
            previous["content"] = [*previous["content"], *item["content"]]
        else:
            conversation.append(item)
    return _pair_every_call(conversation)


def _same_response(previous: ApiMessage, item: ApiMessage) -> bool:
    return (
        previous.get("role") == "assistant"
        and item.get("id") is not None
        and previous.get("id") == item.get("id")
    )


def _is_results(message: ApiMessage) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and all(b.get("type") == "tool_result" for b in content)
    )


def _pair_every_call(conversation: list[ApiMessage]) -> list[ApiMessage]:
    paired: list[ApiMessage] = []
    for index, message in enumerate(conversation):
        paired.append(message)
        calls = tool_uses(message) if message.get("role") == "assistant" else []
        if not calls:
            continue
        following = conversation[index + 1] if index + 1 < len(conversation) else None
        results = following is not None and _is_results(following)
        answered = (
            {b.get("tool_use_id") for b in following["content"]} if following and results else set()
        )
        missing = [
            {
                "type": "tool_result",
                "tool_use_id": call["id"],
                "content": [{"type": "text", "text": OUTCOME_UNKNOWN_TOOL_RESULT}],
                "is_error": True,
            }
            for call in calls
            if call["id"] not in answered
        ]
        if missing and results:
            assert following is not None
            following["content"] = [*missing, *following["content"]]
        elif missing:
            paired.append({"role": "user", "content": missing})
    return paired


def transcript_entries(
    conversation: Sequence[ApiMessage], session_id: str, cwd: str
) -> list[JsonDict]:
    """The conversation as Claude Code transcript lines, for ``--resume``."""
    entries: list[JsonDict] = []
    parent: str | None = None
    for index, message in enumerate(conversation):
        entry_uuid = str(uuid.uuid5(_UUID_NAMESPACE, f"{session_id}/{index}"))
        body = dict(message)
        if body.get("role") == "assistant":
            body.setdefault("type", "message")
            body.setdefault("stop_sequence", None)
            body.setdefault("usage", {"input_tokens": 0, "output_tokens": 0})
        entries.append(
            {
                "type": "assistant" if body.get("role") == "assistant" else "user",
                "uuid": entry_uuid,
                "parentUuid": parent,
                "sessionId": session_id,
                "timestamp": _TRANSCRIPT_TIMESTAMP,
                "isSidechain": False,
                "userType": "external",
                "cwd": cwd,
                "message": body,
            }
        )
        parent = entry_uuid
    return entries


def _result_blocks(content: object) -> list[JsonDict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [
            {k: v for k, v in block.items() if k != "cache_control"}
            for block in content
            if isinstance(block, dict)
        ]
    return []


def _short_tool_name(name: str) -> str:
    """``mcp__dex__lookup`` -> ``lookup``: the name the agent defined."""
    return name.split("__", 2)[2] if name.startswith("mcp__") and name.count("__") >= 2 else name

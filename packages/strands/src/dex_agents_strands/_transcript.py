"""Strands messages to and from stored ``FrameworkMessage``s.

A Strands ``Message`` is ``{"role": "user" | "assistant", "content": [ContentBlock, ...]}``. Each
is stored as one item per projection: the text of a message, each ``toolUse`` block and each
``toolResult`` block are stored items of their own (with the tool projections the session's UIs,
notes and compaction read), and reading them back joins consecutive items of one Strands role into
one message, as Strands itself alternates roles.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final, cast

from dex_agents import (
    CONTEXT_SUMMARY_NOTE_HEADER,
    AgentMessage,
    AgentToolCall,
    AgentTurnContext,
    FrameworkMessage,
    MessageRole,
    build_plan_note,
)
from dex_agents.adapters import KeptDecodes, recorded_tool_result, tool_result_is_error
from dex_agents.exceptions import StoredStateError
from strands.types.content import ContentBlock, Message, Messages
from strands.types.tools import ToolResult, ToolUse

__all__ = [
    "decode_messages",
    "encode_message",
    "message_text",
    "model_input",
    "pending_tool_results",
    "tool_result_text",
    "user_message",
]

_STRANDS_ROLES: Final = frozenset({"user", "assistant"})


def user_message(text: str) -> FrameworkMessage:
    """The stored item of a user's text."""
    return _item(MessageRole.USER, {"role": "user", "content": [{"text": text}]}, text=text)


def encode_message(message: Message) -> list[FrameworkMessage]:
    """The stored items of one Strands message: its other blocks in one item, each tool block in
    one of its own."""
    role = message["role"]
    items: list[FrameworkMessage] = []
    plain: list[ContentBlock] = []
    for block in message["content"]:
        if "toolUse" in block or "toolResult" in block:
            items.append(_tool_block_item(role, block))
        else:
            plain.append(block)
    if plain:
        text = message_text({"role": role, "content": plain})
        own = MessageRole.USER if role == "user" else MessageRole.ASSISTANT
        items.insert(0, _item(own, {"role": role, "content": plain}, text=text or None))
    return items


def _tool_block_item(role: str, block: ContentBlock) -> FrameworkMessage:
    """The stored item of one ``toolUse`` or ``toolResult`` block, with its tool projections."""
    stored = {"role": role, "content": [block]}
    if "toolUse" in block:
        use = block["toolUse"]
        arguments = json.dumps(use.get("input", {}), ensure_ascii=False)
        return _item(
            MessageRole.ASSISTANT,
            stored,
            tool_call_id=use["toolUseId"],
            tool_name=use["name"],
            tool_arguments=arguments,
        )
    result = block["toolResult"]
    output = tool_result_text(result)
    return _item(MessageRole.TOOL, stored, tool_call_id=result["toolUseId"], tool_output=output)


def decode_messages(stored: Iterable[AgentMessage | FrameworkMessage]) -> Messages:
    """Strands messages from stored items, consecutive items of one role joined.

    Raises:
        StoredStateError: When an item is not a Strands message.
    """
    messages: Messages = []
    for item in stored:
        message = _kept_messages(item.framework_item)
        if messages and messages[-1]["role"] == message["role"]:
            messages[-1] = {
                "role": message["role"],
                "content": [*messages[-1]["content"], *message["content"]],
            }
        else:
            messages.append(message)
    return messages


def model_input(turn: AgentTurnContext, pending: Sequence[FrameworkMessage]) -> Messages:
    """What the turn's next model call reads: the summary note, the stored messages, the plan note
    before the turn's own messages, and the results of the turn's calls not stored yet."""
    stored = turn.messages
    start = next(
        (index for index, message in enumerate(stored) if message.turn_id == turn.turn_id),
        len(stored),
    )
    items: list[AgentMessage | FrameworkMessage] = []
    if turn.context_summary is not None:
        items.append(user_message(f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{turn.context_summary.text}"))
    items.extend(stored[:start])
    plan_note = build_plan_note(turn.plan, turn.interaction_mode)
    if plan_note is not None:
        items.append(user_message(plan_note))
    items.extend(stored[start:])
    items.extend(pending)
    return decode_messages(items)


def pending_tool_results(turn: AgentTurnContext) -> list[FrameworkMessage]:
    """The results of this turn's stored tool calls that have no stored result yet, built from
    their final records (a failed call as an ``error`` result)."""
    answered: set[str] = set()
    calls: list[ToolUse] = []
    for message in decode_messages(m for m in turn.messages if m.turn_id == turn.turn_id):
        for block in message["content"]:
            if "toolUse" in block:
                calls.append(block["toolUse"])
            elif "toolResult" in block:
                answered.add(block["toolResult"]["toolUseId"])
    results: list[FrameworkMessage] = []
    for call in calls:
        if call["toolUseId"] not in answered:
            result = _recorded_result(call, turn.recorded_tool_call(call["toolUseId"]))
            results.append(
                _item(
                    MessageRole.TOOL,
                    {"role": "user", "content": [{"toolResult": result}]},
                    tool_call_id=call["toolUseId"],
                    tool_name=call["name"],
                    tool_output=tool_result_text(result),
                )
            )
    return results


def message_text(message: Message) -> str:
    """The text blocks of a message, joined."""
    return "".join(block["text"] for block in message["content"] if "text" in block)


def tool_result_text(result: ToolResult) -> str:
    """A tool result's content as the text the model reads (JSON blocks as JSON)."""
    parts: list[str] = []
    for block in result.get("content", []):
        if "text" in block:
            parts.append(block["text"])
        elif "json" in block:
            parts.append(json.dumps(block["json"], ensure_ascii=False))
    return "\n".join(parts)


def _recorded_result(call: ToolUse, record: AgentToolCall | None) -> ToolResult:
    return {
        "toolUseId": call["toolUseId"],
        "status": "error" if tool_result_is_error(record) else "success",
        "content": [{"text": recorded_tool_result(record)}],
    }


def _item(
    role: MessageRole, message: dict[str, Any], **projections: str | None
) -> FrameworkMessage:
    return FrameworkMessage(
        role, json.dumps(message, ensure_ascii=False, separators=(",", ":")), **projections
    )


def _decode(text: str) -> Message:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if (
        not isinstance(value, dict)
        or value.get("role") not in _STRANDS_ROLES
        or not isinstance(value.get("content"), list)
    ):
        raise StoredStateError(f"stored item {text[:80]!r} is not a Strands message")
    return cast(Message, value)


def _shared(message: Message) -> Message:
    """A kept message as every read gets it: the kept object itself (see ``_kept_messages``)."""
    return message


_kept_messages: Final = KeptDecodes(_decode, _shared)
"""Every model call reads the whole history: each stored item is parsed once per process, and
every read shares the parsed message. Nothing here edits a read message: the model call hands the
history to Strands' ``stream_messages``, which deep-copies it before it or the model edits
anything (``test_a_model_editing_its_messages_leaves_the_history_as_stored``), and the runner
runs no conversation manager. A copy per message per model call was about 5 % of a Strands
Worker's samples at turns 80 to 140."""

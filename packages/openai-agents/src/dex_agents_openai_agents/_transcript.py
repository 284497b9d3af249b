"""How the session stores OpenAI Agents SDK items, and how a model call's input is read back.

Each stored message holds one Responses API input item, the SDK's own conversation format, in its
``framework_item``: ``{"agent": <name>, "item": <item>}``. ``agent`` names the agent that was
active when the item was stored (user messages have none), so the last stored name is the agent
the next turn starts with after a handoff. The other ``FrameworkMessage`` fields are projections
for UIs, notes and summaries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, cast

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentMessage,
    FrameworkMessage,
    JsonObject,
    JsonValue,
    MessageRole,
    dump_json_text,
)
from dex_agents.adapters import KeptDecodes
from dex_agents.exceptions import StoredStateError

__all__ = [
    "FUNCTION_CALL",
    "FUNCTION_CALL_OUTPUT",
    "StoredCall",
    "Transcript",
    "function_call_output_item",
    "read_transcript",
    "stored_message",
    "user_message_item",
]

FUNCTION_CALL: Final = "function_call"
FUNCTION_CALL_OUTPUT: Final = "function_call_output"
# Output item types of a model response; a run of them is one response in a transcript.
_MODEL_OUTPUT_TYPES: Final = frozenset(
    {
        "message",
        FUNCTION_CALL,
        "reasoning",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "tool_search_call",
        "tool_search_output",
    }
)


def user_message_item(text: str) -> JsonObject:
    """The Responses input item of a user message."""
    return {"role": "user", "content": text}


def function_call_output_item(call_id: str, output: str) -> JsonObject:
    """The Responses input item that gives a function call its result."""
    return {"type": FUNCTION_CALL_OUTPUT, "call_id": call_id, "output": output}


def stored_message(
    item: JsonObject, agent: str | None, *, tool_name: str | None = None
) -> FrameworkMessage:
    """The message that stores ``item``, stored while ``agent`` was active.

    ``tool_name`` names the tool of a ``function_call_output`` item, which does not carry it.
    """
    envelope: JsonObject = {"item": item} if agent is None else {"agent": agent, "item": item}
    item_type = item.get("type")
    if item_type == FUNCTION_CALL:
        return FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=dump_json_text(envelope),
            tool_call_id=_text(item.get("call_id")),
            tool_name=_text(item.get("name")),
            tool_arguments=_text(item.get("arguments")),
        )
    if item_type == FUNCTION_CALL_OUTPUT:
        return FrameworkMessage(
            role=MessageRole.TOOL,
            framework_item=dump_json_text(envelope),
            tool_call_id=_text(item.get("call_id")),
            tool_name=tool_name,
            tool_output=output_text(item.get("output")),
        )
    return FrameworkMessage(
        role=_role(item), framework_item=dump_json_text(envelope), text=_message_text(item)
    )


def output_text(output: JsonValue) -> str:
    """A function call output as text: a string as it is, structured content as JSON."""
    return output if isinstance(output, str) else dump_json_text(output)


@dataclass(frozen=True)
class StoredCall:
    """A stored function call: its ID, tool name, arguments, and the agent that made it."""

    call_id: str
    tool_name: str
    arguments: str
    agent: str | None


@dataclass(frozen=True)
class Transcript:
    """The stored messages read back as model input.

    Attributes:
        items: Every stored item in order; an earlier turn's call that has no stored result (which
            only a session older than its turn-failure note can have) gets the outcome-unknown
            result right after its response, so the provider always sees a result per call.
        turn_start: Index in ``items`` of this turn's first item (``len(items)`` when none).
        unanswered_calls: This turn's stored calls without a stored result, in order.
        active_agent: The agent named by the last stored item that names one, or ``None``.
        turn_agents_with_tool_calls: Agents that made a function call in this turn.
    """

    items: tuple[JsonObject, ...]
    turn_start: int
    unanswered_calls: tuple[StoredCall, ...]
    active_agent: str | None
    turn_agents_with_tool_calls: frozenset[str] = field(default_factory=frozenset)


@dataclass
class _Reader:
    turn_id: str | None
    items: list[JsonObject] = field(default_factory=list)
    turn_start: int | None = None
    previous_turn_id: str | None = None
    open_calls: dict[str, StoredCall] = field(default_factory=dict)
    # Index after the last model output item: an earlier turn's missing results go there, right
    # after the response that made the calls, before any note the failed turn stored.
    response_end: int = 0
    active_agent: str | None = None
    turn_callers: set[str] = field(default_factory=set)

    def add(self, message: AgentMessage) -> None:
        agent, item = decode_framework_item(message.framework_item)
        if self.items and message.turn_id != self.previous_turn_id:
            self.close_open_calls()
        self.previous_turn_id = message.turn_id
        in_turn = self.turn_id is not None and message.turn_id == self.turn_id
        if in_turn and self.turn_start is None:
            self.turn_start = len(self.items)
        if agent is not None:
            self.active_agent = agent
        item_type = item.get("type")
        if item_type == FUNCTION_CALL:
            call = StoredCall(
                _text(item.get("call_id")) or "",
                _text(item.get("name")) or "",
                _text(item.get("arguments")) or "",
                agent,
            )
            self.open_calls[call.call_id] = call
            if in_turn and agent is not None:
                self.turn_callers.add(agent)
        elif item_type == FUNCTION_CALL_OUTPUT:
            self.open_calls.pop(_text(item.get("call_id")) or "", None)
        self.items.append(item)
        if _is_model_output(item):
            self.response_end = len(self.items)

    def close_open_calls(self) -> None:
        results = [
            function_call_output_item(call_id, OUTCOME_UNKNOWN_TOOL_RESULT)
            for call_id in self.open_calls
        ]
        self.items[self.response_end : self.response_end] = results
        self.response_end += len(results)
        self.open_calls.clear()

    def transcript(self) -> Transcript:
        if self.turn_start is None:
            self.close_open_calls()
        return Transcript(
            items=tuple(self.items),
            turn_start=len(self.items) if self.turn_start is None else self.turn_start,
            unanswered_calls=tuple(self.open_calls.values()),
            active_agent=self.active_agent,
            turn_agents_with_tool_calls=frozenset(self.turn_callers),
        )


def read_transcript(messages: Sequence[AgentMessage], turn_id: str | None) -> Transcript:
    """Read stored messages back as the model input of a call in turn ``turn_id``.

    With ``turn_id`` ``None`` every message counts as earlier, and every call without a result
    gets the outcome-unknown result.

    Raises:
        ValueError: When a message's ``framework_item`` is not this adapter's envelope.
    """
    reader = _Reader(turn_id)
    for message in messages:
        reader.add(message)
    return reader.transcript()


def decode_framework_item(framework_item: str) -> tuple[str | None, JsonObject]:
    """The agent name and the Responses item of one stored ``framework_item`` (the item the
    caller's own: a copy of the one this process decoded first).

    Raises:
        ValueError: When the text is not ``{"agent"?: str, "item": {...}}``.
    """
    envelope = _kept_envelopes(framework_item)
    return cast("str | None", envelope.get("agent")), cast(JsonObject, envelope["item"])


def _envelope(framework_item: str) -> dict[str, object]:
    try:
        envelope = json.loads(framework_item)
    except ValueError as error:
        raise StoredStateError(
            f"stored framework_item {framework_item[:80]!r} is not JSON; this session was not "
            "written by dex-agents-openai-agents"
        ) from error
    item = envelope.get("item") if isinstance(envelope, dict) else None
    agent = envelope.get("agent") if isinstance(envelope, dict) else None
    if not isinstance(item, dict) or (agent is not None and not isinstance(agent, str)):
        raise StoredStateError(
            f"stored framework_item {framework_item[:80]!r} is not an OpenAI Agents SDK item "
            '({"agent": ..., "item": {...}}); this session was not written by '
            "dex-agents-openai-agents"
        )
    return {"agent": agent, "item": item}


_kept_envelopes: Final = KeptDecodes(_envelope)
"""Every model call reads the whole transcript: each stored item is parsed once per process, and
each read gets its own copy of the item (the runner and the SDK may edit the input they get)."""


def _is_model_output(item: JsonObject) -> bool:
    item_type = item.get("type")
    if item_type == "message" or (item_type is None and "role" in item):
        return item.get("role") == "assistant"
    return item_type in _MODEL_OUTPUT_TYPES


def _role(item: JsonObject) -> MessageRole:
    role = item.get("role")
    if role == "user":
        return MessageRole.USER
    if role in ("system", "developer"):
        return MessageRole.SYSTEM
    return MessageRole.ASSISTANT


def _message_text(item: JsonObject) -> str | None:
    content = item.get("content")
    if isinstance(content, str):
        return content or None
    if not isinstance(content, list):
        return None
    parts = [
        part.get("text") if part.get("type") != "refusal" else part.get("refusal")
        for part in content
        if isinstance(part, dict)
    ]
    text = "".join(part for part in parts if isinstance(part, str))
    return text or None


def _text(value: JsonValue) -> str | None:
    return value if isinstance(value, str) else None

"""How Stepwise stores its items as messages, and rebuilds the model input from them.

Every stored message's ``framework_item`` is a JSON object with a ``"stepwise"`` key naming its
type: ``user_text``, ``model_output`` (one provider-exact output item, with the key of the model
response it belongs to), or ``tool_result``. A message from elsewhere is read from its neutral
fields instead, so a transcript never fails to load.

Providers refuse a tool call without a result, so the input pairs every stored call with one: its
stored result, or the text the caller supplies for a call whose result is missing.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from dex_agents._json_values import JsonValue, dump_json_text
from dex_agents._values import AgentMessage, FrameworkMessage, MessageRole
from dex_agents.stepwise._model_client import (
    ModelInputItem,
    ModelOutputItem,
    ModelOutputItemKind,
    ModelToolCall,
    ModelToolResult,
    ModelUserText,
)

__all__ = [
    "StoredModelOutput",
    "Transcript",
    "decode_message",
    "model_output_message",
    "read_transcript",
    "tool_result_message",
    "user_text_message",
]

_FORMAT_KEY = "stepwise"
_DECODED_ITEMS: Final = 8192
"""Stored items whose decoded form one Worker process keeps (least recently read dropped first)."""


class _ItemType(StrEnum):
    USER_TEXT = "user_text"
    MODEL_OUTPUT = "model_output"
    TOOL_RESULT = "tool_result"


@dataclass(frozen=True)
class StoredModelOutput:
    """A stored model output item and the key of the model response that returned it."""

    response_key: str
    item: ModelOutputItem


StoredItem = ModelUserText | ModelToolResult | StoredModelOutput


def user_text_message(text: str) -> FrameworkMessage:
    """The stored form of user text."""
    return FrameworkMessage(
        role=MessageRole.USER,
        framework_item=dump_json_text({_FORMAT_KEY: _ItemType.USER_TEXT.value, "text": text}),
        text=text,
    )


def model_output_message(item: ModelOutputItem, response_key: str) -> FrameworkMessage:
    """The stored form of one model output item; ``response_key`` names its model response."""
    call = item.tool_call
    payload: dict[str, JsonValue] = {
        _FORMAT_KEY: _ItemType.MODEL_OUTPUT.value,
        "response": response_key,
        "provider": item.provider,
        "kind": item.kind.value,
        "item": item.item,
        "text": item.text,
        "tool_call": None
        if call is None
        else {"id": call.tool_call_id, "name": call.tool_name, "arguments": call.arguments},
    }
    return FrameworkMessage(
        role=MessageRole.ASSISTANT,
        framework_item=dump_json_text(payload),
        text=item.text if item.kind is ModelOutputItemKind.MESSAGE else None,
        tool_call_id=None if call is None else call.tool_call_id,
        tool_name=None if call is None else call.tool_name,
        tool_arguments=None if call is None else call.arguments,
    )


def tool_result_message(result: ModelToolResult) -> FrameworkMessage:
    """The stored form of one tool result."""
    payload: dict[str, JsonValue] = {
        _FORMAT_KEY: _ItemType.TOOL_RESULT.value,
        "tool_call_id": result.tool_call_id,
        "tool_name": result.tool_name,
        "output": result.output,
    }
    return FrameworkMessage(
        role=MessageRole.TOOL,
        framework_item=dump_json_text(payload),
        tool_call_id=result.tool_call_id,
        tool_name=result.tool_name,
        tool_output=result.output,
    )


def decode_message(message: AgentMessage) -> StoredItem:
    """Reads one stored message; a message in another format is read from its neutral fields."""
    decoded = _decode_framework_item(message.framework_item)
    return _decode_neutral(message) if decoded is None else decoded


@functools.lru_cache(maxsize=_DECODED_ITEMS)
def _decode_framework_item(framework_item: str) -> StoredItem | None:
    # Every RunModel reads the whole transcript again, and the same text always decodes to the
    # same frozen items, so a Worker decodes each stored item once instead of once per model call.
    payload = _stepwise_payload(framework_item)
    return None if payload is None else _decode_payload(payload)


def _stepwise_payload(framework_item: str) -> dict[str, object] | None:
    try:
        payload = json.loads(framework_item)
    except ValueError:
        return None
    if isinstance(payload, dict) and isinstance(payload.get(_FORMAT_KEY), str):
        return payload
    return None


def _text(payload: dict[str, object], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) else None


def _decode_payload(payload: dict[str, object]) -> StoredItem | None:
    kind = payload[_FORMAT_KEY]
    if kind == _ItemType.USER_TEXT:
        text = _text(payload, "text")
        return None if text is None else ModelUserText(text)
    if kind == _ItemType.TOOL_RESULT:
        call_id, name = _text(payload, "tool_call_id"), _text(payload, "tool_name")
        output = _text(payload, "output")
        if call_id is None or name is None or output is None:
            return None
        return ModelToolResult(call_id, name, output)
    if kind == _ItemType.MODEL_OUTPUT:
        return _decode_model_output(payload)
    return None


def _decode_model_output(payload: dict[str, object]) -> StoredModelOutput | None:
    response, provider = _text(payload, "response"), _text(payload, "provider")
    item, kind_text = _text(payload, "item"), _text(payload, "kind")
    if response is None or provider is None or item is None or kind_text is None:
        return None
    try:
        kind = ModelOutputItemKind(kind_text)
    except ValueError:
        kind = ModelOutputItemKind.OTHER
    call: ModelToolCall | None = None
    raw_call = payload.get("tool_call")
    if isinstance(raw_call, dict):
        call_id, name, arguments = (
            raw_call.get("id"),
            raw_call.get("name"),
            raw_call.get("arguments"),
        )
        if isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str):
            call = ModelToolCall(call_id, name, arguments)
    if (kind is ModelOutputItemKind.TOOL_CALL) != (call is not None):
        return None
    output = ModelOutputItem(provider, kind, item, _text(payload, "text"), call)
    return StoredModelOutput(response, output)


def _decode_neutral(message: AgentMessage) -> StoredItem:
    if message.role is MessageRole.TOOL and message.tool_call_id and message.tool_name:
        return ModelToolResult(message.tool_call_id, message.tool_name, message.tool_output or "")
    if message.role is MessageRole.ASSISTANT:
        call: ModelToolCall | None = None
        if message.tool_call_id and message.tool_name:
            call = ModelToolCall(
                message.tool_call_id, message.tool_name, message.tool_arguments or "{}"
            )
        kind = ModelOutputItemKind.TOOL_CALL if call else ModelOutputItemKind.MESSAGE
        # No provider: every client replays it as its text and tool call.
        item = ModelOutputItem("", kind, message.framework_item, message.text, call)
        return StoredModelOutput(f"message/{message.turn_id}", item)
    return ModelUserText(message.text or "")


@dataclass(frozen=True)
class Transcript:
    """The model input rebuilt from stored messages.

    Attributes:
        input: Every stored item in order; each tool call except the trailing ones is followed by
            its result.
        unanswered_calls: The calls of the last stored model response that have no stored result
            yet, in model order; their results must follow ``input``.
        turn_start: Where the current turn's items start in ``input``, such as for the plan note.
    """

    input: tuple[ModelInputItem, ...]
    unanswered_calls: tuple[ModelToolCall, ...]
    turn_start: int


def read_transcript(
    messages: Sequence[AgentMessage],
    missing_result: Callable[[ModelToolCall], str],
    turn_id: str | None = None,
) -> Transcript:
    """Rebuilds the model input from stored messages, oldest first.

    A call whose response is followed by anything but its results (user text or another model
    response) gets ``missing_result(call)`` as its result, so an orphaned call never reaches a
    provider. A result without a preceding call is dropped for the same reason. The first message
    stored under ``turn_id`` marks ``turn_start``.
    """
    items: list[ModelInputItem] = []
    pending: dict[str, ModelToolCall] = {}
    response_key: str | None = None
    turn_start: int | None = None

    def close_pending() -> None:
        for call in pending.values():
            items.append(ModelToolResult(call.tool_call_id, call.tool_name, missing_result(call)))
        pending.clear()

    for message in messages:
        stored = decode_message(message)
        if isinstance(stored, ModelToolResult):
            if pending.pop(stored.tool_call_id, None) is not None:
                items.append(stored)
            continue
        new_response = isinstance(stored, StoredModelOutput) and stored.response_key != response_key
        if new_response or isinstance(stored, ModelUserText):
            close_pending()
        if turn_start is None and turn_id is not None and message.turn_id == turn_id:
            turn_start = len(items)
        if isinstance(stored, StoredModelOutput):
            response_key = stored.response_key
            items.append(stored.item)
            if stored.item.tool_call is not None:
                pending[stored.item.tool_call.tool_call_id] = stored.item.tool_call
        else:
            response_key = None
            items.append(stored)
    start = len(items) if turn_start is None else turn_start
    return Transcript(tuple(items), tuple(pending.values()), start)

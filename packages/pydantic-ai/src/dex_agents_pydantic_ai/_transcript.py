"""How a session stores Pydantic AI's message history: one ``ModelMessage`` part per message.

Every stored message's ``framework_item`` is Pydantic AI's own JSON for a list of one
``ModelMessage`` (``ModelMessagesTypeAdapter``). A request or response with several parts, such as
a response with text and two tool calls, is stored as one message per part, so each stored message
carries at most one tool call or tool result and its projections (``text``, ``tool_call_id``, ...)
are exact. Such fragments carry ``{"dex_agents_fragment": {"index": i, "count": n}}`` in the
message's ``metadata`` (never sent to a model); :func:`decode_history` joins consecutive fragments
back into the message Pydantic AI produced.

Every ``RunModel`` rebuilds the history from all stored messages, so a process validates each
stored item once (``KeptDecodes``, keyed by the item's text, which never changes once stored) and
every load gets its own copy: Pydantic AI edits the history it is given in place. A copy is what
validating the item again gives: the fields an item leaves out whose defaults are made anew (the
timestamp of a stored user message, a missing tool call ID) are made anew for each copy, so two
equal stored items never become one object or one ID.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from dex_agents import AgentMessage, FrameworkMessage, MessageRole
from dex_agents.adapters import KeptDecodes, fresh_copier
from dex_agents.exceptions import StoredStateError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

__all__ = [
    "FRAGMENT_METADATA_KEY",
    "decode_history",
    "encode_messages",
    "user_message",
    "user_request",
]

FRAGMENT_METADATA_KEY: Final = "dex_agents_fragment"
"""Key in ``ModelRequest.metadata``/``ModelResponse.metadata`` that marks a stored fragment."""


def user_request(text: str) -> ModelRequest:
    """A request that holds one user text, such as a note the runner adds to a model input."""
    return ModelRequest(parts=[UserPromptPart(text)])


def user_message(text: str) -> FrameworkMessage:
    """The stored user message of ``text``: a ``ModelRequest`` with one ``UserPromptPart``.

    The part's timestamp is left out, so the same text always gives the same item (the runner
    contract asks for a deterministic ``build_user_message``); Pydantic AI fills it in on load.
    """
    item = json.loads(ModelMessagesTypeAdapter.dump_json([user_request(text)]))
    item[0]["parts"][0].pop("timestamp", None)
    return FrameworkMessage(
        role=MessageRole.USER,
        framework_item=json.dumps(item, separators=(",", ":"), ensure_ascii=False),
        text=text,
    )


def encode_messages(
    messages: Iterable[ModelMessage], *, output_tool_names: frozenset[str] = frozenset()
) -> list[FrameworkMessage]:
    """Store ``messages`` as one ``FrameworkMessage`` per part, in order.

    ``output_tool_names`` are the run's output tools: a call of one projects its arguments as the
    message's text, because that call is the turn's structured answer.
    """
    stored: list[FrameworkMessage] = []
    for message in messages:
        for fragment in _fragments(message):
            stored.append(_stored_fragment(fragment, output_tool_names))
    return stored


def decode_history(messages: Sequence[AgentMessage]) -> list[ModelMessage]:
    """Rebuild Pydantic AI's message history from stored messages, joining fragments.

    A fragment whose siblings are gone (retention deleted the start of a message) stays a message
    of its own parts.

    Raises:
        ValueError: When a stored item is not Pydantic AI message JSON; the message names the
            stored sequence.
    """
    history: list[ModelMessage] = []
    open_group: tuple[int, int] | None = (
        None  # (next index, count) of the fragment group being joined
    )
    for stored in messages:
        for message in _load(stored):
            marker = _fragment_marker(message)
            plain = _without_marker(message) if marker is not None else message
            joins = bool(
                marker is not None
                and open_group == marker
                and history
                and history[-1].kind == plain.kind
            )
            if joins:
                history[-1] = _joined(history[-1], plain)
            else:
                history.append(plain)
            open_group = None if marker is None else (marker[0] + 1, marker[1])
            if open_group is not None and open_group[0] >= open_group[1]:
                open_group = None
    return history


def _load(stored: AgentMessage) -> list[ModelMessage]:
    try:
        return _kept_items(stored.framework_item).messages
    except ValueError as error:
        raise StoredStateError(
            f"stored message {stored.sequence} is not Pydantic AI message JSON "
            f"(ModelMessagesTypeAdapter); was the session started by another runner? {error}"
        ) from error


@dataclass(frozen=True)
class _Stamp:
    """A field a stored item leaves out whose default is made anew by each validation."""

    message: int
    part: int | None
    name: str
    make: Callable[[], object]


@dataclass(frozen=True)
class _KeptItem:
    messages: list[ModelMessage]
    stamps: tuple[_Stamp, ...]
    copy: Callable[[], list[ModelMessage]]
    """Makes what validating the item again gives, stamps aside."""


def _validated_item(item: str) -> _KeptItem:
    messages = ModelMessagesTypeAdapter.validate_json(item)
    return _KeptItem(messages, _stamps(json.loads(item), messages), fresh_copier(messages))


def _stamps(raw: object, messages: Sequence[ModelMessage]) -> tuple[_Stamp, ...]:
    # The item validated as a list of messages, so ``raw`` is that list.
    raw_messages = raw if isinstance(raw, list) and len(raw) == len(messages) else []
    stamps: list[_Stamp] = []
    for index, (message, fields) in enumerate(zip(messages, raw_messages, strict=False)):
        stamps.extend(_absent_made_fields(message, fields, index, None))
        raw_parts = fields.get("parts") if isinstance(fields, dict) else None
        if isinstance(raw_parts, list) and len(raw_parts) == len(message.parts):
            for part_index, (part, part_fields) in enumerate(
                zip(message.parts, raw_parts, strict=True)
            ):
                stamps.extend(_absent_made_fields(part, part_fields, index, part_index))
    return tuple(stamps)


def _absent_made_fields(
    value: object, fields: object, message: int, part: int | None
) -> list[_Stamp]:
    present = fields if isinstance(fields, dict) else {}
    return [
        _Stamp(message, part, field.name, field.default_factory)
        for field in dataclasses.fields(value)  # type: ignore[arg-type]
        if field.default_factory is not dataclasses.MISSING and field.name not in present
    ]


def _fresh_item(kept: _KeptItem) -> _KeptItem:
    """What validating the item again gives, without validating."""
    messages = kept.copy()
    for stamp in kept.stamps:
        target: object = messages[stamp.message]
        if stamp.part is not None:
            target = messages[stamp.message].parts[stamp.part]
        setattr(target, stamp.name, stamp.make())
    return _KeptItem(messages, kept.stamps, kept.copy)


_kept_items: Final = KeptDecodes(_validated_item, _fresh_item)
"""The messages of a stored ``framework_item``, validated once per process, a copy per load."""


def _fragments(message: ModelMessage) -> list[ModelMessage]:
    count = len(message.parts)
    if count <= 1:
        return [message]
    fragments: list[ModelMessage] = []
    for index in range(count):
        metadata = {
            **(message.metadata or {}),
            FRAGMENT_METADATA_KEY: {"index": index, "count": count},
        }
        if isinstance(message, ModelResponse):
            # Usage belongs to the response once, so only its first fragment carries it.
            usage = message.usage if index == 0 else RequestUsage()
            part = message.parts[index]
            fragments.append(replace(message, parts=[part], metadata=metadata, usage=usage))
        else:
            fragments.append(replace(message, parts=[message.parts[index]], metadata=metadata))
    return fragments


def _joined(previous: ModelMessage, fragment: ModelMessage) -> ModelMessage:
    if isinstance(previous, ModelResponse) and isinstance(fragment, ModelResponse):
        return replace(previous, parts=[*previous.parts, *fragment.parts])
    if isinstance(previous, ModelRequest) and isinstance(fragment, ModelRequest):
        return replace(previous, parts=[*previous.parts, *fragment.parts])
    raise AssertionError("only fragments of one kind are joined")


def _fragment_marker(message: ModelMessage) -> tuple[int, int] | None:
    marker = (message.metadata or {}).get(FRAGMENT_METADATA_KEY)
    if not isinstance(marker, dict):
        return None
    index, count = marker.get("index"), marker.get("count")
    if isinstance(index, int) and isinstance(count, int) and 0 <= index < count:
        return index, count
    return None


def _without_marker(message: ModelMessage) -> ModelMessage:
    metadata = {k: v for k, v in (message.metadata or {}).items() if k != FRAGMENT_METADATA_KEY}
    return replace(message, metadata=metadata or None)


def _stored_fragment(message: ModelMessage, output_tool_names: frozenset[str]) -> FrameworkMessage:
    item = ModelMessagesTypeAdapter.dump_json([message]).decode()
    if isinstance(message, ModelResponse):
        return _response_projection(
            item, message.parts[0] if message.parts else None, output_tool_names
        )
    return _request_projection(item, message.parts[0] if message.parts else None)


def _response_projection(
    item: str, part: ModelResponsePart | None, output_tool_names: frozenset[str]
) -> FrameworkMessage:
    if isinstance(part, TextPart):
        return FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=item, text=part.content)
    if isinstance(part, ToolCallPart):
        arguments = part.args_as_json_str()
        return FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=item,
            text=arguments if part.tool_name in output_tool_names else None,
            tool_call_id=part.tool_call_id,
            tool_name=part.tool_name,
            tool_arguments=arguments,
        )
    # Thinking, native tool parts, files: stored for replay, with no projection.
    return FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=item)


def _request_projection(item: str, part: ModelRequestPart | None) -> FrameworkMessage:
    if isinstance(part, UserPromptPart):
        return FrameworkMessage(role=MessageRole.USER, framework_item=item, text=_user_text(part))
    if isinstance(part, ToolReturnPart):
        return FrameworkMessage(
            role=MessageRole.TOOL,
            framework_item=item,
            tool_call_id=part.tool_call_id,
            tool_name=part.tool_name,
            tool_output=part.model_response_str(),
        )
    if isinstance(part, SystemPromptPart):
        return FrameworkMessage(role=MessageRole.SYSTEM, framework_item=item, text=part.content)
    # Retry feedback and Pydantic AI's bookkeeping parts: the framework's own, shown as system.
    return FrameworkMessage(role=MessageRole.SYSTEM, framework_item=item)


def _user_text(part: UserPromptPart) -> str | None:
    if isinstance(part.content, str):
        return part.content
    texts = [content for content in part.content if isinstance(content, str)]
    return "\n".join(texts) if texts else None

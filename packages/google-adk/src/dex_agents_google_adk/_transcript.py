"""How ADK events are stored as session messages, and read back into ADK events.

Every stored message's ``framework_item`` is the JSON of one ADK ``Event`` (camelCase, as ADK's own
API server writes it, without default fields). An event whose content holds more than one function
call or response is split into one message per call or response, each an ``Event`` with the same
``id`` and a share of the parts, so every message carries one tool call or result in its neutral
fields; reading merges consecutive messages of one ``id`` back into one event. A message in another
format is read from its neutral fields, so a transcript never fails to load.

Every ``RunModel`` reads the whole transcript again, and validating an ADK ``Event`` costs tens
of µs, so a long session spent much of its model Steps there. A stored item never changes, so each
process validates it once (``KeptDecodes``) and every read gets that event itself, except where
the item has no ``id`` and ``timestamp``: such a read gets a copy with a new ``id`` and
``timestamp``, as validating it anew gives. A user message is stored without them, so two turns of
the same text store the same item, and ADK takes an event with a known ``id`` for a re-delivery
(its ``InMemorySessionService`` drops it). Kept with the first read's ``id``, the second turn's
message was dropped from the history of its resumed model calls, and the model answered early.

The events are shared, not copied (a copy of each, every model call, was 12 % of an ADK Worker's
samples at turns 80 to 128): ``StepSessionService`` lends them to ADK's ``Runner`` and trims an
event's temporary state on a copy of it, and ADK copies an event's content before it edits one
for a model request. ``test_google_adk_model_calls.py`` checks that model calls leave every kept
event as it was stored. A caller that hands a read event to a session service that edits
events in place (ADK's own services trim ``actions.state_delta``) must copy it first.

Function responses round-trip exactly: a tool's ``{"result": <text>}`` is stored as the text
(unless the text itself reads as a JSON object), any other response as its JSON text, and
:func:`recorded_function_response` turns the text back into the same response.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentMessage,
    AgentToolCall,
    AgentToolCallStatus,
    BuiltInTool,
    FrameworkMessage,
    MessageRole,
    dump_json_text,
)
from dex_agents.adapters import KeptDecodes, recorded_tool_result
from google.adk.events import Event
from google.genai import types

__all__ = [
    "USER_AUTHOR",
    "Transcript",
    "event_messages",
    "function_call_arguments",
    "function_response_output",
    "function_response_text",
    "read_transcript",
    "recorded_function_response",
    "results_event",
    "user_event",
    "user_message",
]

USER_AUTHOR: Final = "user"
"""The author ADK gives the events of the person in the session."""

_RESULT_KEY: Final = "result"
_BUILT_IN_TOOL_NAMES: Final = frozenset(tool.value for tool in BuiltInTool)


def encode_event(event: Event, *, exclude: frozenset[str] = frozenset()) -> str:
    """ADK's own JSON of ``event`` (camelCase, without default fields and ``exclude``)."""
    return event.model_dump_json(
        by_alias=True, exclude_none=True, exclude_defaults=True, exclude=set(exclude) or None
    )


def user_event(text: str) -> Event:
    """The ADK event of user text."""
    return Event(
        author=USER_AUTHOR,
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def user_message(text: str) -> FrameworkMessage:
    """The stored form of user text: deterministic, so every attempt stores the same item."""
    return FrameworkMessage(
        role=MessageRole.USER,
        # No id or timestamp: every attempt stores the same item, and reading assigns a new id.
        framework_item=encode_event(user_event(text), exclude=frozenset({"id", "timestamp"})),
        text=text,
    )


def function_call_arguments(call: types.FunctionCall) -> str:
    """A function call's arguments as JSON text, for ``DeferredToolCall.arguments``."""
    return dump_json_text(call.args or {})


def function_response_output(response: Mapping[str, Any]) -> str:
    """The tool output text of an ADK function response; :func:`recorded_function_response`
    turns it back into the same response."""
    result = response.get(_RESULT_KEY)
    if len(response) == 1 and isinstance(result, str) and _json_object(result) is None:
        return result
    return _dump_json(response)


def _dump_json(response: Mapping[str, Any]) -> str:
    # Not dump_json_text: the tool's key order is what the model saw, so it stays.
    return json.dumps(dict(response), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def function_response_text(response: Mapping[str, Any]) -> str:
    """The readable text of a function response: a ``{"result": <text>}``'s text, else its JSON
    text. It is the ``tool_output`` of a stored response, and what a scripted model reads."""
    result = response.get(_RESULT_KEY)
    if len(response) == 1 and isinstance(result, str):
        return result
    return _dump_json(response)


def recorded_function_response(record: AgentToolCall | None) -> dict[str, Any]:
    """The function response the model sees for a final record (or a missing one).

    A successful call of an ADK tool gets its own response back; every other outcome (a built-in
    tool's result, a failure, a rejection, an unknown outcome) reads as ``{"result": <text>}``,
    the text :func:`describe_tool_call_outcome` renders.
    """
    text = recorded_tool_result(record)
    if (
        record is not None
        and record.status is AgentToolCallStatus.SUCCEEDED
        and record.tool_name not in _BUILT_IN_TOOL_NAMES
    ):
        parsed = _json_object(text)
        if parsed is not None:
            return parsed
    return {_RESULT_KEY: text}


def results_event(
    key: str, calls: Sequence[types.FunctionCall], responses: Sequence[Mapping[str, Any]]
) -> Event:
    """One user event that answers ``calls`` with ``responses``, as an ADK client sends results.

    Its ``id`` derives from ``key`` (the turn) and the call IDs, so it is the same on every
    attempt and its messages merge back into one event when read.
    """
    parts = [
        types.Part(
            function_response=types.FunctionResponse(id=call.id, name=call.name, response=dict(r))
        )
        for call, r in zip(calls, responses, strict=True)
    ]
    digest = hashlib.sha256("\n".join([key, *(call.id or "" for call in calls)]).encode())
    return Event(
        id=f"dex-results-{digest.hexdigest()[:24]}",
        author=USER_AUTHOR,
        content=types.Content(role="user", parts=parts),
    )


def event_messages(event: Event, *, stable: bool = False) -> list[FrameworkMessage]:
    """The messages that store ``event``: one, or one per function call or response.

    ``stable`` leaves the timestamp out, for an event built from committed values, so every
    attempt stores the same items.
    """
    exclude = frozenset({"timestamp"}) if stable else frozenset()
    parts = list(event.content.parts or ()) if event.content is not None else []
    segments = _segments(parts)
    if len(segments) <= 1:
        return [_message(event, parts, encode_event(event, exclude=exclude))]
    messages = []
    for index, segment in enumerate(segments):
        content = types.Content(role=_content_role(event), parts=segment)
        if index == 0:
            share = event.model_copy(update={"content": content})
        else:
            # Later shares carry only what merging needs; the first one keeps the rest.
            share = Event(
                id=event.id,
                author=event.author,
                invocation_id=event.invocation_id,
                timestamp=event.timestamp,
                content=content,
            )
        messages.append(_message(share, segment, encode_event(share, exclude=exclude)))
    return messages


@dataclass(frozen=True)
class Transcript:
    """The stored messages as ADK events.

    Attributes:
        events: Every message as an event, shares of one event merged, in order.
        turn_start: Index in ``events`` of the running turn's user message (the last user text).
        unanswered_calls: Function calls of the running turn without a stored response, in order.
    """

    events: tuple[Event, ...]
    turn_start: int
    unanswered_calls: tuple[types.FunctionCall, ...]


def read_transcript(messages: Sequence[AgentMessage]) -> Transcript:
    """Read the stored messages; earlier turns' calls without a stored response get the
    outcome-unknown result right after their call, since a model refuses an unanswered call."""
    events = _merge(_decode(message) for message in messages)
    start = max((index for index, event in enumerate(events) if _is_user_text(event)), default=0)
    answered = {response.id for event in events for response in event.get_function_responses()}
    paired: list[Event] = []
    unanswered: list[types.FunctionCall] = []
    turn_start = 0
    for index, event in enumerate(events):
        if index == start:
            turn_start = len(paired)
        paired.append(event)
        open_calls = [call for call in event.get_function_calls() if call.id not in answered]
        if not open_calls:
            continue
        if index >= start:
            unanswered.extend(open_calls)
        else:
            unknown = {_RESULT_KEY: OUTCOME_UNKNOWN_TOOL_RESULT}
            paired.append(results_event("", open_calls, [unknown] * len(open_calls)))
    return Transcript(tuple(paired), turn_start, tuple(unanswered))


def _segments(parts: Sequence[types.Part]) -> list[list[types.Part]]:
    segments: list[list[types.Part]] = []
    for part in parts:
        if part.function_call is not None or part.function_response is not None:
            segments.append([part])
        elif segments and not _is_tool_part(segments[-1][-1]):
            segments[-1].append(part)
        else:
            segments.append([part])
    return segments


def _is_tool_part(part: types.Part) -> bool:
    return part.function_call is not None or part.function_response is not None


def _content_role(event: Event) -> str:
    if event.content is not None and event.content.role:
        return event.content.role
    return "user" if event.author == USER_AUTHOR else "model"


def _message(event: Event, parts: Sequence[types.Part], framework_item: str) -> FrameworkMessage:
    calls = [part.function_call for part in parts if part.function_call is not None]
    responses = [part.function_response for part in parts if part.function_response is not None]
    text = _visible_text(parts)
    if len(calls) == 1:
        call = calls[0]
        return FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=framework_item,
            text=text,
            tool_call_id=call.id,
            tool_name=call.name,
            tool_arguments=function_call_arguments(call),
        )
    if len(responses) == 1:
        response = responses[0]
        return FrameworkMessage(
            role=MessageRole.TOOL,
            framework_item=framework_item,
            tool_call_id=response.id,
            tool_name=response.name,
            tool_output=function_response_text(response.response or {}),
        )
    role = MessageRole.USER if _content_role(event) == "user" else MessageRole.ASSISTANT
    return FrameworkMessage(role=role, framework_item=framework_item, text=text)


def _visible_text(parts: Iterable[types.Part]) -> str | None:
    texts = [part.text for part in parts if part.text and not part.thought]
    return "".join(texts) if texts else None


def _is_user_text(event: Event) -> bool:
    return (
        _content_role(event) == "user"
        and event.content is not None
        and any(part.text for part in event.content.parts or ())
    )


def _timestamp_default() -> Callable[[], Any]:
    """``Event.timestamp``'s default factory, called as validation calls it.

    ``FieldInfo.get_default`` inspects the factory's signature on every call (about 10 µs, for
    every stored user message on every model call); the factory takes no data, so it is called
    directly.
    """
    field = Event.model_fields["timestamp"]
    factory = field.default_factory
    if factory is None or field.default_factory_takes_validated_data:
        return lambda: field.get_default(call_default_factory=True)
    return factory  # type: ignore[return-value]


_READ_STAMPS: Final[Mapping[str, Callable[[], Any]]] = {
    "id": Event.new_id,
    "timestamp": _timestamp_default(),
}
"""Event fields that validation fills in afresh where the stored item leaves them out."""


@dataclass(frozen=True)
class _KeptEvent:
    """An ADK event validated from a stored item, and the fields each read stamps anew."""

    event: Event
    stamped_on_read: tuple[str, ...]


def _adk_event(framework_item: str) -> _KeptEvent | None:
    """The ADK event a stored item holds; ``None`` for an item in another format."""
    item = _json_object(framework_item)
    if item is not None and isinstance(item.get("author"), str) and item["author"]:
        stamped = tuple(name for name in _READ_STAMPS if name not in item)
        return _KeptEvent(Event.model_validate(item), stamped)
    return None


def _fresh_event(kept: _KeptEvent | None) -> _KeptEvent | None:
    """What validating the item again gives, without validating: the kept event, or a copy with
    the fields validation stamps afresh (see the module docstring)."""
    if kept is None or not kept.stamped_on_read:
        return kept
    stamps = {name: _READ_STAMPS[name]() for name in kept.stamped_on_read}
    return _KeptEvent(kept.event.model_copy(update=stamps), kept.stamped_on_read)


_kept_events: Final = KeptDecodes(_adk_event, _fresh_event)


def _decode(message: AgentMessage) -> Event:
    kept = _kept_events(message.framework_item)
    return kept.event if kept is not None else _neutral_event(message)


def _neutral_event(message: AgentMessage) -> Event:
    """A message another runner stored, rebuilt from its provider-neutral fields."""
    if message.role is MessageRole.TOOL:
        response = types.FunctionResponse(
            id=message.tool_call_id,
            name=message.tool_name,
            response={_RESULT_KEY: message.tool_output or ""},
        )
        return Event(
            author=USER_AUTHOR,
            content=types.Content(role="user", parts=[types.Part(function_response=response)]),
        )
    if message.role is MessageRole.ASSISTANT:
        parts = [types.Part(text=message.text)] if message.text else []
        if message.tool_call_id and message.tool_name:
            arguments = _json_object(message.tool_arguments or "") or {}
            call = types.FunctionCall(
                id=message.tool_call_id, name=message.tool_name, args=arguments
            )
            parts.append(types.Part(function_call=call))
        return Event(author="model", content=types.Content(role="model", parts=parts))
    return user_event(message.text or "")


def _merge(events: Iterable[Event]) -> list[Event]:
    merged: list[Event] = []
    for event in events:
        previous = merged[-1] if merged else None
        if previous is not None and event.id == previous.id and event.content is not None:
            parts = (
                [*(previous.content.parts or ()), *(event.content.parts or ())]
                if (previous.content is not None)
                else list(event.content.parts or ())
            )
            content = types.Content(role=_content_role(previous), parts=parts)
            merged[-1] = previous.model_copy(update={"content": content})
        else:
            merged.append(event)
    return merged


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None

"""LangChain messages as stored session messages, and back.

Each stored message's ``framework_item`` is one LangChain message as ``message_to_dict`` writes it
(``{"type": "ai", "data": {...}}``), compact JSON, so the next ``RunModel`` rebuilds the graph's
input with ``messages_from_dict`` from committed state only, byte for byte what the model returned
(provider metadata, content blocks, and tool calls included).

Every ``RunModel`` rebuilds the whole history, and building a LangChain message (pydantic
validation) costs 15 to 60 µs, so a session at turn 100 spent most of its adapter time there. A
stored item never changes, so each process keeps the messages built from recent items and hands
out copies whose lists and dicts are copied too: a graph that edits a message it was given never
changes the kept one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentMessage,
    AgentToolCall,
    FrameworkMessage,
    MessageRole,
    dump_json_text,
)
from dex_agents.adapters import KeptDecodes, recorded_tool_result, tool_result_is_error
from dex_agents.exceptions import StoredStateError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

__all__ = [
    "PendingToolCall",
    "framework_message",
    "langchain_message",
    "note_message",
    "pending_tool_calls",
    "recorded_tool_message",
    "stored_message_id",
    "system_message",
    "tool_calls_of",
    "unanswered_tool_calls",
    "user_message",
]

_ROLES = {
    "human": MessageRole.USER,
    "ai": MessageRole.ASSISTANT,
    "tool": MessageRole.TOOL,
    "system": MessageRole.SYSTEM,
}
_INVALID_ARGUMENTS_RESULT = (
    "The tool call was not run: its arguments are not valid JSON. Call the tool again with a JSON "
    "object of arguments."
)


@dataclass(frozen=True)
class PendingToolCall:
    """One tool call of an AI message, valid or not (``invalid_tool_calls``).

    Attributes:
        tool_call_id: The model's call ID.
        tool_name: The tool the model called.
        arguments: The arguments as JSON text; for an invalid call, the model's raw text.
        valid: Whether LangChain parsed the arguments into a JSON object.
    """

    tool_call_id: str
    tool_name: str
    arguments: str
    valid: bool


def framework_message(message: BaseMessage) -> FrameworkMessage:
    """Return ``message`` as the session stores it, with its plain projections.

    Raises:
        TypeError: When the message holds something JSON cannot represent.

    Example:
        >>> framework_message(HumanMessage("hi")).role
        <MessageRole.USER: 'user'>
    """
    item = dump_json_text(message_to_dict(message))
    role = _ROLES.get(message.type, MessageRole.ASSISTANT)
    text = message.text or None
    if isinstance(message, ToolMessage):
        return FrameworkMessage(
            role=role,
            framework_item=item,
            tool_call_id=message.tool_call_id,
            tool_name=message.name,
            tool_output=message.text,
        )
    calls = tool_calls_of(message)
    if len(calls) == 1:
        (call,) = calls
        return FrameworkMessage(
            role=role,
            framework_item=item,
            text=text,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            tool_arguments=call.arguments,
        )
    if calls:
        # One projection cannot name several calls; the arguments list them all.
        return FrameworkMessage(
            role=role,
            framework_item=item,
            text=text,
            tool_name=", ".join(call.tool_name for call in calls),
            tool_arguments=dump_json_text(
                [
                    {"id": call.tool_call_id, "name": call.tool_name, "arguments": call.arguments}
                    for call in calls
                ]
            ),
        )
    return FrameworkMessage(role=role, framework_item=item, text=text)


def stored_message_id(message: AgentMessage) -> str:
    """The ID a stored message gets in the graph when LangChain gave it none, stable per sequence."""
    return f"dex-message-{message.sequence}"


def _built(item: str) -> BaseMessage:
    (restored,) = messages_from_dict([json.loads(item)])
    return restored


_restored: Final = KeptDecodes(_built)
"""A fresh LangChain message for a stored ``framework_item`` (built once per process), with its own
copies of the lists and dicts (content blocks, tool calls, metadata) one graph could edit in place."""


def langchain_message(message: AgentMessage) -> BaseMessage:
    """Return the LangChain message a stored message holds, with an ID.

    Raises:
        ValueError: When the stored item is not a LangChain message, such as one another runner
            stored; the message names its sequence.
    """
    try:
        restored = _restored(message.framework_item)
    except (ValueError, KeyError, TypeError) as error:
        raise StoredStateError(
            f"stored message {message.sequence} is not a LangChain message "
            f"({type(error).__name__}: {error}); was the session started by another runner?"
        ) from error
    if not restored.id:
        restored.id = stored_message_id(message)
    return restored


def tool_calls_of(message: BaseMessage) -> tuple[PendingToolCall, ...]:
    """Every tool call of an AI message in model order: parsed ones, then invalid ones."""
    if not isinstance(message, AIMessage):
        return ()
    return tuple(_pending_call(call, valid) for call, valid in _calls_in_order(message))


def _calls_in_order(message: AIMessage) -> list[tuple[ToolCall | InvalidToolCall, bool]]:
    """The message's tool calls, parsed ones then invalid ones, each with whether it parsed."""
    calls: list[tuple[ToolCall | InvalidToolCall, bool]] = [
        (call, True) for call in message.tool_calls
    ]
    calls.extend((call, False) for call in message.invalid_tool_calls)
    return calls


def _pending_call(call: ToolCall | InvalidToolCall, valid: bool) -> PendingToolCall:
    # A parsed call's arguments are a JSON object; an invalid one's the model's raw text.
    arguments = dump_json_text(call["args"]) if valid else str(call["args"] or "")
    return PendingToolCall(call["id"] or "", call["name"] or "", arguments, valid)


def _open_calls(messages: Sequence[BaseMessage]) -> list[tuple[int, PendingToolCall]]:
    """Each unanswered tool call with the position of its AI message, in order.

    A ``ToolMessage`` answers the latest open call of its ID: models may reuse call IDs across
    turns, so an ID alone does not say which call a result answers. Only the calls left open
    become ``PendingToolCall``s (their arguments as JSON text): a long session's history holds
    hundreds of answered calls, and this runs for every model call.
    """
    open_calls: list[tuple[int, ToolCall | InvalidToolCall, bool]] = []
    for position, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            for index in range(len(open_calls) - 1, -1, -1):
                if (open_calls[index][1]["id"] or "") == message.tool_call_id:
                    del open_calls[index]
                    break
        elif isinstance(message, AIMessage):
            open_calls.extend((position, call, valid) for call, valid in _calls_in_order(message))
    return [(position, _pending_call(call, valid)) for position, call, valid in open_calls]


def unanswered_tool_calls(messages: Sequence[BaseMessage]) -> list[PendingToolCall]:
    """The tool calls of ``messages`` that no later ``ToolMessage`` answers, in order."""
    return [call for _, call in _open_calls(messages)]


def pending_tool_calls(
    messages: Sequence[BaseMessage], turn_start: int
) -> tuple[list[BaseMessage], list[PendingToolCall]]:
    """Split the unanswered calls: the running turn's, and every earlier one paired in place.

    A call of the running turn (its AI message is at ``turn_start`` or later) has a final record,
    which gives its result after the stored messages. Any earlier unanswered call, such as one a
    graph ended on without running it, gets a result right after its AI message, so an orphaned
    call never reaches a provider.

    Returns:
        The messages with the orphans paired, and the running turn's calls still to answer.
    """
    orphans: dict[int, list[PendingToolCall]] = {}
    pending: list[PendingToolCall] = []
    for position, call in _open_calls(messages):
        if position >= turn_start:
            pending.append(call)
        else:
            orphans.setdefault(position, []).append(call)
    paired = list(messages)
    # From the last orphan back, so each insertion leaves the earlier positions as they were.
    for position in sorted(orphans, reverse=True):
        results = [_orphan_result(call, position) for call in orphans[position]]
        paired[position + 1 : position + 1] = results
    return paired, pending


def _orphan_result(call: PendingToolCall, position: int) -> ToolMessage:
    # IDs are unique in the graph's state: add_messages replaces a message of the same ID.
    content = OUTCOME_UNKNOWN_TOOL_RESULT if call.valid else _INVALID_ARGUMENTS_RESULT
    return ToolMessage(
        content=content,
        tool_call_id=call.tool_call_id,
        name=call.tool_name,
        # As tool_result_is_error: an unknown outcome is no error, arguments that broke are.
        status="success" if call.valid else "error",
        id=f"dex-orphan-{position}-{call.tool_call_id}",
    )


def recorded_tool_message(
    call: PendingToolCall, record: AgentToolCall | None, turn_id: str
) -> ToolMessage:
    """The ``ToolMessage`` the model sees for a deferred call, from its final record.

    Its ID names the turn, because models reuse call IDs across turns and ``add_messages``
    replaces a message of the same ID.
    """
    content = recorded_tool_result(record)
    return ToolMessage(
        content=content,
        tool_call_id=call.tool_call_id,
        name=call.tool_name,
        status="error" if tool_result_is_error(record) else "success",
        id=f"dex-result-{turn_id}-{call.tool_call_id}",
    )


def user_message(text: str) -> HumanMessage:
    """The user's text as a LangChain message, with no ID: deterministic, as the contract needs."""
    return HumanMessage(content=text)


def note_message(text: str, note_id: str) -> HumanMessage:
    """A note the runner puts into one model call's input only (never stored)."""
    return HumanMessage(content=text, id=note_id)


def system_message(text: str) -> SystemMessage:
    """The system message of a summary call."""
    return SystemMessage(content=text)

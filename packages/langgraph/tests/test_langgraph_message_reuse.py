"""Stored messages rebuilt as LangChain messages: each call gets its own copy of a kept one."""

from __future__ import annotations

from dex_agents import AgentMessage, MessageRole
from dex_agents_langgraph._transcript import framework_message, langchain_message
from langchain_core.messages import AIMessage, HumanMessage


def _stored(sequence: int, message: AIMessage | HumanMessage) -> AgentMessage:
    stored = framework_message(message)
    return AgentMessage(sequence, stored.role, stored.framework_item, turn_id="turn-1")


def test_a_graph_editing_a_rebuilt_message_never_changes_the_next_rebuild() -> None:
    original = AIMessage(
        content=[{"type": "text", "text": "Looking it up."}],
        tool_calls=[{"name": "lookup_order", "args": {"order_id": "7"}, "id": "call_1"}],
        response_metadata={"model": "m"},
        id="ai-1",
    )
    stored = _stored(2, original)
    first = langchain_message(stored)
    assert first == original
    # Edit everything a graph could edit in place, and the object itself.
    assert isinstance(first, AIMessage) and isinstance(first.content, list)
    first.tool_calls[0]["args"]["order_id"] = "9"
    first.content.append({"type": "text", "text": "extra"})
    first.response_metadata["model"] = "changed"
    first.id = "changed"
    second = langchain_message(stored)
    assert second == original and second is not first
    assert second.tool_calls[0]["args"] == {"order_id": "7"}


def test_long_and_short_items_rebuild_the_same_message() -> None:
    long_text = "x" * 40_000
    for message in (HumanMessage(long_text, id="h-1"), HumanMessage("hi", id="h-2")):
        stored = _stored(1, message)
        assert stored.role is MessageRole.USER
        assert langchain_message(stored) == message
        assert langchain_message(stored) == message

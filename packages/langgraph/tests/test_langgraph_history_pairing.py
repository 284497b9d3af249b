"""A rebuilt history's tool calls: which are answered, which the running turn still owes, and the
results that pair every earlier call left open (so no orphaned call reaches a provider)."""

from __future__ import annotations

from dex_agents import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents_langgraph._transcript import (
    PendingToolCall,
    pending_tool_calls,
    unanswered_tool_calls,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage


def _history() -> list[BaseMessage]:
    return [
        HumanMessage("Look up 7 and 8", id="u-1"),
        AIMessage(
            "",
            id="ai-1",
            tool_calls=[
                {"name": "lookup", "args": {"order": "7"}, "id": "call_1"},
                {"name": "lookup", "args": {"order": "8"}, "id": "call_2"},
            ],
            invalid_tool_calls=[
                {"name": "lookup", "args": "{order: 9", "id": "call_3", "error": "not JSON"}
            ],
        ),
        ToolMessage("shipped", tool_call_id="call_1", id="t-1"),
        HumanMessage("And 10?", id="u-2"),
        # The model reuses an ID: the result after it answers this call, not the first one.
        AIMessage("", id="ai-2", tool_calls=[{"name": "lookup", "args": {}, "id": "call_1"}]),
        ToolMessage("pending", tool_call_id="call_1", id="t-2"),
        HumanMessage("Now 11", id="u-3"),  # the running turn starts here (position 6)
        AIMessage(
            "",
            id="ai-3",
            tool_calls=[{"name": "lookup", "args": {"order": "11"}, "id": "call_1"}],
        ),
    ]


def test_earlier_open_calls_are_paired_in_place_and_the_turn_s_own_stay_pending() -> None:
    history = _history()
    paired, pending = pending_tool_calls(history, turn_start=6)
    assert pending == [PendingToolCall("call_1", "lookup", '{"order":"11"}', True)]
    # The two calls of ai-1 no result answered, right after it, in the model's order.
    assert [message.id for message in paired] == [
        "u-1",
        "ai-1",
        "dex-orphan-1-call_2",
        "dex-orphan-1-call_3",
        "t-1",
        "u-2",
        "ai-2",
        "t-2",
        "u-3",
        "ai-3",
    ]
    valid, invalid = paired[2], paired[3]
    assert isinstance(valid, ToolMessage) and isinstance(invalid, ToolMessage)
    assert (valid.content, valid.status) == (OUTCOME_UNKNOWN_TOOL_RESULT, "success")
    assert invalid.status == "error" and invalid.tool_call_id == "call_3"
    assert history[2].id == "t-1" and len(history) == 8  # the input is left as it was


def test_a_history_without_open_calls_comes_back_as_it_is() -> None:
    history = [
        *_history()[:3],
        ToolMessage("8 too", tool_call_id="call_2", id="t-3"),
        ToolMessage("bad", tool_call_id="call_3", id="t-4"),
    ]
    paired, pending = pending_tool_calls(history, turn_start=len(history))
    assert paired == history and paired is not history
    assert pending == []


def test_unanswered_calls_name_every_open_call_in_order() -> None:
    calls = unanswered_tool_calls(_history())
    assert [(call.tool_call_id, call.arguments, call.valid) for call in calls] == [
        ("call_2", '{"order":"8"}', True),
        ("call_3", "{order: 9", False),
        ("call_1", '{"order":"11"}', True),
    ]

"""The private checkpointer of a Step's graph run keeps values as objects, and still reports
where a run stopped and resumes it from a given node."""

from __future__ import annotations

from typing import Any

import pytest
from dex_agents.exceptions import StoredStateError
from dex_agents_langgraph._step_checkpointer import step_checkpointer
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph


def _graph() -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage("done", id="answer")]}
        call = {"name": "lookup", "args": {}, "id": "c1"}
        return {"messages": [AIMessage("", tool_calls=[call], id="ask")]}

    def tools(state: MessagesState) -> dict[str, Any]:
        raise AssertionError("the Step stops before the tool node")

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", lambda state: "tools" if state["messages"][-1].tool_calls else END
    )
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=step_checkpointer(), interrupt_before=["tools"])


async def test_a_run_stops_before_the_tool_node_and_resumes_from_it() -> None:
    graph = _graph()
    config: Any = {"configurable": {"thread_id": "s/turn-1"}}
    question = HumanMessage("Where is order 7?", id="q")
    async for _ in graph.astream({"messages": [question]}, config):
        pass
    stopped = await graph.aget_state(config)
    assert stopped.next == ("tools",)
    # Kept as given, not a copy read back from msgpack.
    assert stopped.values["messages"][0] is question

    result = ToolMessage("shipped", tool_call_id="c1", id="r")
    await graph.aupdate_state(config, {"messages": [result]}, as_node="tools")
    async for _ in graph.astream(None, config):
        pass
    ended = await graph.aget_state(config)
    assert ended.next == ()
    assert [m.id for m in ended.values["messages"]] == ["q", "ask", "r", "answer"]


def test_a_value_it_did_not_keep_is_refused() -> None:
    with pytest.raises(StoredStateError, match="not a value this Step's checkpointer kept"):
        step_checkpointer().serde.loads_typed(("msgpack", b"\x80"))

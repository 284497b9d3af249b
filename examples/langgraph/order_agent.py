"""A LangGraph agent as a durable Dex session, with no API key: run it with

    uv run python examples/langgraph/order_agent.py

It starts the embedded local Dex engine and an in-process Worker, runs one turn in which the model
calls a tool, and prints the turn's AgentEvents and the stored messages. The model is LangChain's
own test model (FakeMessagesListChatModel), replaying a tool call and then an answer; put a real
chat model there (and bind the tools with model_tools) and nothing else changes.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from dex_agents import AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.testing import EngineLogs, EngineProcess, in_process_worker, wait_for_agent_snapshot
from dex_agents_langgraph import langgraph_session_flow
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"Order {order_id}: 2 items, shipped yesterday."


model = FakeMessagesListChatModel(
    responses=[
        AIMessage(
            content="",
            tool_calls=[{"name": "lookup_order", "args": {"order_id": "7"}, "id": "call_1"}],
        ),
        AIMessage(content="Order 7 has 2 items and shipped yesterday."),
    ]
)


async def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
    # A real model binds its tools here: model.bind_tools(model_tools([lookup_order])).
    return {"messages": [await model.ainvoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("model", call_model)
builder.add_node("tools", ToolNode([lookup_order]))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition, ["tools", END])
builder.add_edge("tools", "model")

flow = langgraph_session_flow(
    builder.compile(),
    flow_type="OrderAgent",
    options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
)


async def main(directory: Path) -> None:
    engine = await EngineProcess.start_local(
        directory / "engine.db", EngineLogs.in_directory(directory)
    )
    try:
        async with in_process_worker([flow], engine.server_address, directory / "cache") as dex:
            sessions = dex.sessions(flow)
            await sessions.start_session("order-session", "Where is order 7?")
            snapshot = await wait_for_agent_snapshot(
                sessions,
                "order-session",
                lambda s: (
                    s if s.state and s.state.turn_count and not s.state.active_turn_id else None
                ),
                description="the turn to end",
            )
            page = await dex.client.list_stream_messages("order-session", flow.agent_events, 100)
            print("AgentEvents:")
            for message in reversed(page.messages):
                print(f"  {message.value.type} {message.value.payload}")
            print("Stored messages:")
            for stored in snapshot.messages:
                shown = stored.text or stored.tool_output or f"calls {stored.tool_name}"
                print(f"  {stored.sequence} {stored.role}: {shown}")
    finally:
        await engine.stop()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="dex-langgraph-example-") as temporary:
        asyncio.run(main(Path(temporary)))

"""The benchmark agent under LangGraph: a StateGraph with a model node and a ToolNode.

``build_graph`` gives the uncompiled graph too, so ``peers.py`` can compile the same graph with a
SQLite checkpointer.
"""

from __future__ import annotations

import asyncio

from dex_agents_langgraph import ScriptedChatModel, langgraph_session_flow
from dex_agents_langgraph.testing import reference_graph, turn_messages
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import MessagesState, StateGraph

from adapter_agents import (
    BenchmarkAgent,
    TurnShape,
    add_order_note_result,
    benchmark_session_options,
    lookup_order_result,
    next_model_action,
)


@tool
def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return lookup_order_result(order_id)


@tool
def add_order_note(order_id: str, note: str) -> dict[str, str]:
    """Add a note to an order."""
    return add_order_note_result(order_id, note)


def benchmark_model(latency_seconds: float, shape: TurnShape = TurnShape.READ) -> ScriptedChatModel:
    """Sleeps the model latency, then asks for the turn's tools in order and answers."""

    async def respond(messages: list[BaseMessage]) -> AIMessage:
        await asyncio.sleep(latency_seconds)
        outputs = [m.text for m in turn_messages(messages) if isinstance(m, ToolMessage)]
        action = next_model_action(shape, outputs)
        if isinstance(action, str):
            return AIMessage(content=action)
        call = {"name": action.name, "args": action.arguments, "id": action.call_id}
        return AIMessage(content="", tool_calls=[call])

    return ScriptedChatModel(respond=respond, model_name="dex-benchmark")


def _tools(shape: TurnShape) -> list[BaseTool]:
    return [lookup_order] if shape is TurnShape.READ else [lookup_order, add_order_note]


def build_graph(
    model_latency_seconds: float, shape: TurnShape = TurnShape.READ
) -> StateGraph[MessagesState]:
    """The benchmark agent's graph, not compiled: model node, ToolNode, and back."""
    return reference_graph(benchmark_model(model_latency_seconds, shape), _tools(shape))


def build_benchmark_agent(
    model_latency_seconds: float, shape: TurnShape = TurnShape.READ
) -> BenchmarkAgent:
    """The benchmark agent as a compiled LangGraph graph; the same graph runs both sides."""
    graph = build_graph(model_latency_seconds, shape).compile()
    # The durable session keeps the conversation, so the in-process run keeps it too.
    history: list[AnyMessage] = []

    async def run_in_process(text: str) -> str:
        turn_input: MessagesState = {"messages": [*history, HumanMessage(content=text)]}
        state = await graph.ainvoke(turn_input)
        history[:] = state["messages"]
        return str(state["messages"][-1].text)

    flow = langgraph_session_flow(
        graph,
        flow_type="AdapterTurnsLangGraph",
        options=benchmark_session_options(shape),
    )
    return BenchmarkAgent(flow=flow, run_in_process=run_in_process)

"""The benchmark agent under LangGraph: a StateGraph with a model node and a ToolNode."""

from __future__ import annotations

import asyncio

from dex_agents import AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents_langgraph import ScriptedChatModel, langgraph_session_flow, model_tools
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from adapter_agents import BenchmarkAgent, final_answer, lookup_order_result


@tool
def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return lookup_order_result(order_id)


def benchmark_model(latency_seconds: float) -> ScriptedChatModel:
    """Sleeps the model latency, then asks for the order once and answers with its result."""

    async def respond(messages: list[BaseMessage]) -> AIMessage:
        await asyncio.sleep(latency_seconds)
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        results = [m.text for m in messages[last_user + 1 :] if isinstance(m, ToolMessage)]
        if results:
            return AIMessage(content=final_answer(results[-1]))
        call = {"name": "lookup_order", "args": {"order_id": "7"}, "id": "lookup_1"}
        return AIMessage(content="", tool_calls=[call])

    return ScriptedChatModel(respond=respond, model_name="dex-benchmark")


def build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent:
    """The benchmark agent as a compiled LangGraph graph; the same graph runs both sides."""
    model = benchmark_model(model_latency_seconds)

    async def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        bound = model.bind_tools(model_tools([lookup_order]))
        return {"messages": [await bound.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode([lookup_order]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, ["tools", END])
    builder.add_edge("tools", "model")
    graph = builder.compile()

    async def run_in_process(text: str) -> str:
        state = await graph.ainvoke({"messages": [HumanMessage(content=text)]})
        return str(state["messages"][-1].text)

    flow = langgraph_session_flow(
        graph,
        flow_type="AdapterTurnsLangGraph",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
    return BenchmarkAgent(flow=flow, run_in_process=run_in_process)

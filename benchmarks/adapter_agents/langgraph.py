"""The benchmark agent under LangGraph: a StateGraph with a model node and a ToolNode."""

from __future__ import annotations

import asyncio
from typing import Any

from dex_agents import AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents_langgraph import langgraph_session_flow, model_tools
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from adapter_agents import BenchmarkAgent, final_answer, lookup_order_result


@tool
def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return lookup_order_result(order_id)


class BenchmarkChatModel(BaseChatModel):
    """Sleeps the model latency, then asks for the order once and answers with its result."""

    latency_seconds: float

    @property
    def _llm_type(self) -> str:
        return "dex-benchmark"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("the benchmark model answers asynchronously only")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        await asyncio.sleep(self.latency_seconds)
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        results = [m.text for m in messages[last_user + 1 :] if isinstance(m, ToolMessage)]
        if results:
            message = AIMessage(content=final_answer(results[-1]))
        else:
            call = {"name": "lookup_order", "args": {"order_id": "7"}, "id": "lookup_1"}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])


def build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent:
    """The benchmark agent as a compiled LangGraph graph; the same graph runs both sides."""
    model = BenchmarkChatModel(latency_seconds=model_latency_seconds)

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

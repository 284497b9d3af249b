"""The reference LangGraph agent: a model node, a ``ToolNode``, and back, around any chat model.

The shared suite's runner (the scenario and context-window agents) and the benchmark agent
(``benchmarks/adapter_agents``) build their graphs here instead of each wiring the same
``StateGraph``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.runtime import Runtime

from dex_agents_langgraph._tool_context import model_tools

__all__ = ["ModelForContext", "reference_graph", "turn_messages"]

ModelForContext = Callable[[Any], BaseChatModel]
"""Picks the chat model of a model call from the run's context (``None`` without one)."""


def reference_graph(
    model: BaseChatModel | ModelForContext,
    tools: Sequence[BaseTool],
    *,
    context_schema: type | None = None,
) -> StateGraph[MessagesState]:
    """The reference agent's graph, not compiled: the model node calls ``model`` (or the model
    that ``model`` picks from the run's context) with ``tools`` and the session's built-in tools
    (``model_tools``), then routes its tool calls to a ``ToolNode`` and back.

    Example:
        >>> graph = reference_graph(ScriptedChatModel(respond=reply), [lookup_order]).compile()
        >>> flow = langgraph_session_flow(graph, flow_type="Support")
    """

    async def call_model(
        state: MessagesState, runtime: Runtime[Any]
    ) -> dict[str, list[BaseMessage]]:
        chat = model if isinstance(model, BaseChatModel) else model(runtime.context)
        # Bound in the node: the session's built-in tools are the running turn's.
        response = await chat.bind_tools(model_tools(tools)).ainvoke(state["messages"])
        return {"messages": [response]}

    builder = StateGraph(MessagesState, context_schema=context_schema)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode(list(tools)))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, ["tools", END])
    builder.add_edge("tools", "model")
    return builder


def turn_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages after the last ``HumanMessage``: the turn's model output and tool results so
    far, as a scripted chat model of the reference agent reads its input.

    Example:
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> turn = turn_messages(
        ...     [HumanMessage("hi"), AIMessage("calling"), ToolMessage("7", tool_call_id="c1")]
        ... )
        >>> [type(message).__name__ for message in turn]
        ['AIMessage', 'ToolMessage']
    """
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    return list(messages[last + 1 :])

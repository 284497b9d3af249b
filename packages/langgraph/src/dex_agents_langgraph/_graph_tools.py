"""What the runner reads from a compiled graph once: its tool nodes and their tools.

A tool node is a node whose runnable is LangGraph's ``ToolNode`` (``create_react_agent`` and
``langchain.agents.create_agent`` name theirs ``tools``; a hand-built ``StateGraph`` may use any
name). The graph stops before every tool node, so a tool runs only in its own tool Step.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from dex_agents import (
    ConfigurationError,
    ConfigurationTypeError,
    ToolEffect,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.adapters import agent_type_error
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel

__all__ = ["TOOL_EFFECT_METADATA_KEY", "GraphTools", "inspect_graph", "tool_framework_effect"]

TOOL_EFFECT_METADATA_KEY: Final = "dex_agents_effect"
"""Key of a LangChain tool's ``metadata`` that names its effect (a ``ToolEffect`` value)."""

_LOGGER = logging.getLogger("dex_agents_langgraph")


@dataclass(frozen=True)
class GraphTools:
    """The tool nodes of a graph and every tool they run.

    Attributes:
        graph: The compiled graph.
        tool_nodes: The ``ToolNode`` of each tool node by node name, in graph order.
        tools: Every tool by name.
        node_of_tool: The name of the tool node that holds each tool.
    """

    graph: Pregel[Any, Any, Any, Any]
    tool_nodes: Mapping[str, ToolNode]
    tools: Mapping[str, BaseTool]
    node_of_tool: Mapping[str, str]


def inspect_graph(
    graph: object, *, messages_key: str, tool_nodes: Sequence[str] | None
) -> GraphTools:
    """Check that ``graph`` can run as a durable session and find its tool nodes.

    Raises:
        ConfigurationTypeError: When ``graph`` is not a compiled LangGraph graph, or a named tool
            node is not a ``ToolNode``.
        ConfigurationError: When the graph has no ``messages_key`` channel, a named tool node does
            not exist, two tool nodes hold different tools of one name, or the graph was compiled
            with ``interrupt_before``/``interrupt_after`` (Dex approvals replace those).
    """
    if not isinstance(graph, Pregel):
        raise agent_type_error(
            "LangGraphRunner",
            "a compiled graph (StateGraph.compile(), create_react_agent, create_agent)",
            graph,
        )
    if messages_key not in graph.channels:
        raise ConfigurationError(
            f"the graph has no {messages_key!r} state channel; pass messages_key= with the channel "
            "that holds the conversation's messages"
        )
    if graph.interrupt_before_nodes or graph.interrupt_after_nodes:
        raise ConfigurationError(
            "the graph was compiled with interrupt_before/interrupt_after; a Dex session pauses "
            "for people itself: give the tool a ToolPolicy(requires_approval=True) in "
            "AgentSessionOptions.tool_policies and compile the graph without breakpoints"
        )
    if graph.checkpointer not in (None, False):
        _LOGGER.warning(
            "graph %s was compiled with a checkpointer; a Dex session is its durability, so the "
            "runner runs the graph with a private in-memory checkpointer for one Step at a time "
            "and never reads or writes yours",
            graph.get_name(),
        )
    nodes = _tool_nodes(graph, tool_nodes)
    tools: dict[str, BaseTool] = {}
    node_of_tool: dict[str, str] = {}
    for name, node in nodes.items():
        for tool_name, tool in node.tools_by_name.items():
            if tool_name in tools and tools[tool_name] is not tool:
                raise ConfigurationError(
                    f"tool nodes {node_of_tool[tool_name]!r} and {name!r} both hold a tool named "
                    f"{tool_name!r}; tool names must be unique across a graph"
                )
            tools[tool_name] = tool
            node_of_tool.setdefault(tool_name, name)
    return GraphTools(graph, nodes, tools, node_of_tool)


def _tool_nodes(
    graph: Pregel[Any, Any, Any, Any], names: Sequence[str] | None
) -> dict[str, ToolNode]:
    if names is None:
        return {
            name: node.bound
            for name, node in graph.nodes.items()
            if isinstance(node.bound, ToolNode)
        }
    found: dict[str, ToolNode] = {}
    for name in names:
        if name not in graph.nodes:
            raise ConfigurationError(
                f"tool node {name!r} is not a node of the graph; its nodes: {', '.join(graph.nodes)}"
            )
        bound = graph.nodes[name].bound
        if not isinstance(bound, ToolNode):
            raise ConfigurationTypeError(
                f"node {name!r} runs {type(bound).__name__}, not a langgraph.prebuilt.ToolNode; "
                "the runner defers the calls of ToolNode nodes"
            )
        found[name] = bound
    return found


def tool_framework_effect(tool: BaseTool | None) -> ToolEffect | None:
    """The effect a tool's own metadata names: ``metadata["dex_agents_effect"]``, else MCP
    annotations in ``metadata["annotations"]`` (``readOnlyHint``, ``idempotentHint``).

    Raises:
        ConfigurationError: When ``dex_agents_effect`` is not a ``ToolEffect`` value.
    """
    metadata = (tool.metadata if tool is not None else None) or {}
    named = metadata.get(TOOL_EFFECT_METADATA_KEY)
    if named is not None:
        try:
            return ToolEffect(named)
        except ValueError as error:
            raise ConfigurationError(
                f"tool {tool.name if tool else ''!r} has metadata {TOOL_EFFECT_METADATA_KEY}="
                f"{named!r}, which is not one of {', '.join(e.value for e in ToolEffect)}"
            ) from error
    annotations = metadata.get("annotations")
    if annotations is None:
        return None
    return tool_effect_from_mcp_tool_annotations(annotations)

"""Durable LangGraph agents on Dex: each model call and each tool call of a graph is its own Step.

:class:`LangGraphRunner` runs a compiled graph (``create_react_agent``,
``langchain.agents.create_agent``, or your own ``StateGraph`` with a model node and a
``ToolNode``) as the runner of a dex-agents session: the graph stops before its tool node after
each model call, every tool call runs in its own tool Step, and the messages are stored as LangChain
message JSON. Inside a tool, :func:`get_tool_call_idempotency_key` reads the call's idempotency
key; inside a model node, :func:`model_tools` adds the session's built-in tools.
:class:`ScriptedChatModel` answers from a function, for demos and tests without a provider;
:func:`mcp_structured_tools` offers the tools of a ``dex_agents.mcp.McpToolSource`` as
``StructuredTool``s with the shared idempotency key.

Example:
    >>> flow = langgraph_session_flow(create_react_agent(model, [lookup_order]), flow_type="Support")
    >>> registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
"""

from dex_agents_langgraph._flow import langgraph_session_flow
from dex_agents_langgraph._graph_tools import TOOL_EFFECT_METADATA_KEY
from dex_agents_langgraph._mcp_tools import mcp_structured_tool, mcp_structured_tools
from dex_agents_langgraph._model_call_observer import SecondModelCallError
from dex_agents_langgraph._runner import ContextFactory, LangGraphRunner, SummaryModel
from dex_agents_langgraph._scripted_chat_model import ScriptedChatModel, ScriptedResponse
from dex_agents_langgraph._tool_context import (
    IDEMPOTENCY_KEY_CONFIG_KEY,
    ModelTool,
    get_tool_call_idempotency_key,
    model_tools,
)

__all__ = [
    "IDEMPOTENCY_KEY_CONFIG_KEY",
    "TOOL_EFFECT_METADATA_KEY",
    "ContextFactory",
    "LangGraphRunner",
    "ModelTool",
    "ScriptedChatModel",
    "ScriptedResponse",
    "SecondModelCallError",
    "SummaryModel",
    "get_tool_call_idempotency_key",
    "langgraph_session_flow",
    "mcp_structured_tool",
    "mcp_structured_tools",
    "model_tools",
]

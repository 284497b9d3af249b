"""The tools of a ``dex_agents.mcp.McpToolSource`` as schema-only LangChain ``StructuredTool``s.

Each tool is a ``StructuredTool`` whose ``args_schema`` is the MCP tool's input JSON Schema, under
the tool's agent name and with its description; put it in the graph's ``ToolNode`` like any tool.
Its coroutine, which ``LangGraphRunner`` runs only in the call's own tool Step, calls the source
with the key of ``get_tool_call_idempotency_key(config)``; the server's progress notifications
become ``mcp.tool_progress`` events of that call. An MCP error answer
becomes a ``ToolException``, a failed result the model sees; a call whose outcome is unknown
(``McpToolCallInterruptedError``) fails the Step, so the call's effect decides.

The tools' effects, and the mcp extra: see ``dex_agents.adapters.McpToolFactory``.
"""

from __future__ import annotations

from typing import Any

from dex_agents.adapters import McpTool, McpToolFactory
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool, ToolException

from dex_agents_langgraph._tool_context import get_tool_call_idempotency_key

__all__ = ["mcp_structured_tool", "mcp_structured_tools"]


def _structured_tool(mcp: McpTool) -> StructuredTool:
    async def call(config: RunnableConfig, **arguments: Any) -> str:
        key = get_tool_call_idempotency_key(config)
        return await mcp.call(arguments, idempotency_key=key, failure=ToolException)

    return StructuredTool(
        name=mcp.name, description=mcp.description, args_schema=mcp.json_schema(), coroutine=call
    )


_FACTORY = McpToolFactory(_structured_tool, function_name="mcp_structured_tool")
mcp_structured_tool, mcp_structured_tools = _FACTORY.public_functions(
    "a schema-only ``StructuredTool`` that runs in its tool Step",
    example="graph = create_react_agent(model, {tools})",
)

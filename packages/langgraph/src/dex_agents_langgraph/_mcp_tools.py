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

from typing import TYPE_CHECKING, Any

from dex_agents import ListedTool
from dex_agents.adapters import McpTool, McpToolFactory
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool, ToolException

from dex_agents_langgraph._tool_context import get_tool_call_idempotency_key

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

__all__ = ["mcp_structured_tool", "mcp_structured_tools"]


def _structured_tool(mcp: McpTool) -> StructuredTool:
    async def call(config: RunnableConfig, **arguments: Any) -> str:
        key = get_tool_call_idempotency_key(config)
        return await mcp.call(arguments, idempotency_key=key, failure=ToolException)

    return StructuredTool(
        name=mcp.name, description=mcp.description, args_schema=mcp.json_schema(), coroutine=call
    )


_FACTORY = McpToolFactory(_structured_tool, function_name="mcp_structured_tool")


def mcp_structured_tool(source: McpToolSource, tool: ListedTool) -> StructuredTool:
    """One listed tool of ``source`` as a schema-only ``StructuredTool`` that runs in its tool Step.

    Raises:
        ConfigurationTypeError: When ``source`` is not an ``McpToolSource`` or ``tool`` is not a
            tool it listed (a ``ListedTool``).

    Example:
        >>> await tools.list_tools()
        >>> mcp = [mcp_structured_tool(tools, listed) for listed in tools.cached_tools()]
        >>> graph = create_react_agent(model, [*my_tools, *mcp])
    """
    return _FACTORY.tool(source, tool)


async def mcp_structured_tools(
    source: McpToolSource, *, refresh: bool = False
) -> list[StructuredTool]:
    """List ``source`` and return each of its tools as a schema-only ``StructuredTool``.

    Afterwards ``source.tool_policies()`` knows the listed tools: merge it into the session's tool
    policies. ``refresh=True`` lists every server again now.

    Raises:
        ConfigurationTypeError: When ``source`` is not an ``McpToolSource``.

    Example:
        >>> tools = McpToolSource([McpStdioServerConfig(name="files", command="mcp-server-files")])
        >>> graph = create_react_agent(model, [*my_tools, *await mcp_structured_tools(tools)])
        >>> options = AgentSessionOptions(tool_policies={**tools.tool_policies(), **my_policies})
    """
    return await _FACTORY.tools(source, refresh=refresh)

"""The tools of a ``dex_agents.mcp.McpToolSource`` as schema-only Pydantic AI tools.

Each tool is ``Tool.from_schema`` with the MCP tool's agent name, description and input JSON
Schema. Its function, which ``PydanticAIRunner`` runs only in the call's own tool Step, calls the
source with the key of ``deferred_tool_idempotency_key(ctx)``; the server's progress notifications
become ``mcp.tool_progress`` events of that call. An MCP error answer
becomes Pydantic AI's ``ToolFailed``, a failed result the model sees; a call whose outcome is
unknown (``McpToolCallInterruptedError``) fails the Step, so the call's effect decides.

The tools' effects, and the mcp extra: see ``dex_agents.adapters.McpToolFactory``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dex_agents import ListedTool
from dex_agents.adapters import McpTool, McpToolFactory
from pydantic_ai import RunContext, Tool, ToolFailed

from dex_agents_pydantic_ai._idempotency import deferred_tool_idempotency_key

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

__all__ = ["mcp_tool", "mcp_tools"]


def _pydantic_ai_tool(mcp: McpTool) -> Tool[Any]:
    async def call(ctx: RunContext[Any], **arguments: Any) -> str:
        key = deferred_tool_idempotency_key(ctx)
        # Pydantic AI's terminal tool failure: the tool Step records it as failed.
        return await mcp.call(arguments, idempotency_key=key, failure=ToolFailed)

    return Tool.from_schema(
        call,
        name=mcp.name,
        description=mcp.description,
        json_schema=mcp.json_schema(),
        takes_ctx=True,
    )


_FACTORY = McpToolFactory(_pydantic_ai_tool, function_name="mcp_tool")


def mcp_tool(source: McpToolSource, tool: ListedTool) -> Tool[Any]:
    """One listed tool of ``source`` as a ``Tool.from_schema`` tool that runs in its tool Step.

    Raises:
        ConfigurationTypeError: When ``source`` is not an ``McpToolSource`` or ``tool`` is not a
            tool it listed (a ``ListedTool``).

    Example:
        >>> await tools.list_tools()
        >>> agent = Agent(model, tools=[mcp_tool(tools, listed) for listed in tools.cached_tools()])
    """
    return _FACTORY.tool(source, tool)


async def mcp_tools(source: McpToolSource, *, refresh: bool = False) -> list[Tool[Any]]:
    """List ``source`` and return each of its tools as a schema-only Pydantic AI tool.

    Afterwards ``source.tool_policies()`` knows the listed tools: merge it into the session's tool
    policies. ``refresh=True`` lists every server again now.

    Raises:
        ConfigurationTypeError: When ``source`` is not an ``McpToolSource``.

    Example:
        >>> tools = McpToolSource([McpStdioServerConfig(name="files", command="mcp-server-files")])
        >>> agent = Agent(model, tools=[*my_tools, *await mcp_tools(tools)])
        >>> options = AgentSessionOptions(tool_policies={**tools.tool_policies(), **my_policies})
    """
    return await _FACTORY.tools(source, refresh=refresh)

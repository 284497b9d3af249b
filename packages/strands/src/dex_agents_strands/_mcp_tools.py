"""The tools of a ``dex_agents.mcp.McpToolSource`` as Strands tools, made with the kit's
``McpToolFactory``.

Each listed tool becomes a ``PythonAgentTool`` with the MCP tool's agent name
(``<server>__<tool>``), description and input JSON Schema. Its function, which ``StrandsRunner``
runs only in the call's own tool Step, calls the source with the call's idempotency key (sent in
the request's ``_meta``) and writes the server's progress as ``mcp.tool_progress`` events; an MCP
error answer fails the call with a result the model sees, and a call whose outcome is unknown
(``McpToolCallInterruptedError``) fails the Step, so the call's effect decides. The effects come
from the source's listing: pass ``{**source.tool_policies(), **your_policies}`` as
``AgentSessionOptions.tool_policies``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from dex_agents import ListedTool, require_deferred_tool_execution
from dex_agents.adapters import McpTool, McpToolFactory
from strands.tools import PythonAgentTool
from strands.types.tools import ToolResult, ToolSpec, ToolUse

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

__all__ = ["mcp_tool", "mcp_tools"]


def _wrap(mcp: McpTool) -> PythonAgentTool:
    async def call(tool_use: ToolUse, **invocation_state: Any) -> ToolResult:
        step = require_deferred_tool_execution()
        output = await mcp.call(
            dict(tool_use.get("input") or {}),
            idempotency_key=step.idempotency_key,
            events=step.events,
            tool_call_id=step.tool_call.tool_call_id,
        )
        return {
            "toolUseId": tool_use["toolUseId"],
            "status": "success",
            "content": [{"text": output}],
        }

    spec: ToolSpec = {
        "name": mcp.name,
        "description": mcp.description or mcp.name,
        "inputSchema": {"json": mcp.json_schema()},
    }
    return PythonAgentTool(mcp.name, spec, call)  # type: ignore[arg-type]


_FACTORY: Final = McpToolFactory(_wrap, function_name="mcp_tool")


def mcp_tool(source: McpToolSource, tool: ListedTool) -> PythonAgentTool:
    """One listed tool of ``source`` as a Strands tool that runs in its tool Step.

    Raises:
        ConfigurationTypeError: When ``source`` is not an ``McpToolSource`` or ``tool`` is not a
            tool it listed (a ``ListedTool``).

    Example:
        >>> await tools.list_tools()
        >>> agent = Agent(model=model, tools=[mcp_tool(tools, t) for t in tools.cached_tools()])
    """
    return _FACTORY.tool(source, tool)


async def mcp_tools(source: McpToolSource, *, refresh: bool = False) -> list[PythonAgentTool]:
    """List ``source`` and return each of its tools as a Strands tool.

    Afterwards ``source.tool_policies()`` knows the listed tools: merge it into the session's tool
    policies. ``refresh=True`` lists every server again now.

    Raises:
        ConfigurationTypeError: When ``source`` is not an ``McpToolSource``.

    Example:
        >>> tools = McpToolSource([McpStdioServerConfig(name="files", command="mcp-server-files")])
        >>> agent = Agent(model=model, tools=[*my_tools, *await mcp_tools(tools)])
        >>> options = AgentSessionOptions(tool_policies={**tools.tool_policies(), **my_policies})
    """
    return await _FACTORY.tools(source, refresh=refresh)

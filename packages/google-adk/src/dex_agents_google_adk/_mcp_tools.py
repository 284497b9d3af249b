"""The tools of a ``dex_agents.mcp.McpToolSource`` as ADK tools: the adapter's MCP wrapper path.

Each listed tool becomes a schema-only ADK tool, a ``BaseTool`` with its own
``FunctionDeclaration`` from the tool's JSON Schema, whose ``run_async`` calls
``McpToolSource.call_tool`` with the key from :func:`idempotency_key_for_tool_call`. The toolset
lists the source when ADK resolves the agent's tools (each ``RunModel`` and tool Step; the source
caches its listing per Worker), so the agent needs no listing before it is built. The source's
annotation-derived effect classifies each tool, as ``McpToolSource.tool_policies()`` would.
"""

from __future__ import annotations

from typing import Any

from dex_agents import ListedTool, ToolEffect, require_deferred_tool_execution
from dex_agents.adapters import McpTool, McpToolFactory, McpToolSourceLike
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from dex_agents_google_adk._tool_call_key import idempotency_key_for_tool_call

__all__ = ["McpSourceTool", "McpToolSourceLike", "McpToolSourceToolset"]


class McpSourceTool(BaseTool):
    """One tool of an ``McpToolSource`` as a schema-only ADK tool."""

    def __init__(self, source: McpToolSourceLike, listed: ListedTool) -> None:
        super().__init__(name=listed.name, description=listed.description)
        self._mcp = McpTool(source, listed)
        self.framework_effect: ToolEffect | None = listed.framework_effect
        """The effect the tool's MCP annotations give (``None`` on an untrusted server)."""

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self._mcp.json_schema() or {"type": "object", "properties": {}},
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return await self._mcp.call(
            args,
            idempotency_key=idempotency_key_for_tool_call(tool_context),
            events=require_deferred_tool_execution().events,
            tool_call_id=tool_context.function_call_id,
        )


_FACTORY = McpToolFactory(
    lambda mcp: McpSourceTool(mcp.source, mcp.listed), function_name="McpSourceTool"
)


class McpToolSourceToolset(BaseToolset):
    """An ADK toolset offering every tool an ``McpToolSource`` lists; each call runs in its own
    tool Step under the session's idempotency key.

    Example:
        >>> tools = McpToolSource([McpStdioServerConfig(name="files", command="mcp-files")])
        >>> agent = LlmAgent(name="reports", model=model, tools=[McpToolSourceToolset(tools)])
    """

    def __init__(self, source: McpToolSourceLike) -> None:
        super().__init__()
        self._source = source

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        return list(await _FACTORY.listed_tools(self._source))

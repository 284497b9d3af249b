"""The tools of a ``dex_agents.mcp.McpToolSource`` as schema-only ``FunctionTool``s.

Each tool keeps the MCP tool's agent name, description and input JSON Schema. Its
``on_invoke_tool``, which ``OpenAIAgentsRunner`` runs only in the call's own tool Step, calls the
source with the idempotency key of ``get_current_deferred_tool_execution()``; the server's progress
notifications become ``mcp.tool_progress`` events of that call. The SDK's own MCP servers run
inline in ``RunModel``; this is the path to tool Steps.

The tools' effects, and the mcp extra: see ``dex_agents.adapters.McpToolFactory``.
"""

from __future__ import annotations

import json
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext
from dex_agents.adapters import McpTool, McpToolFactory

from dex_agents_openai_agents._deferred_tool_execution import get_current_deferred_tool_execution

__all__ = ["mcp_function_tool", "mcp_function_tools"]


def _function_tool(mcp: McpTool) -> FunctionTool:
    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        # The runner checked that the arguments are a JSON object before the tool runs.
        key = get_current_deferred_tool_execution().idempotency_key
        return await mcp.call(json.loads(arguments or "{}"), idempotency_key=key)

    return FunctionTool(
        name=mcp.name,
        description=mcp.description,
        params_json_schema=mcp.json_schema(),
        on_invoke_tool=invoke,
        # MCP input schemas are plain JSON Schema, rarely valid in strict mode (the SDK's own MCP
        # conversion keeps them non-strict by default too).
        strict_json_schema=False,
    )


_FACTORY = McpToolFactory(_function_tool, function_name="mcp_function_tool")
mcp_function_tool, mcp_function_tools = _FACTORY.public_functions(
    "a schema-only ``FunctionTool`` that runs in its tool Step",
    example='agent = Agent(name="ops", tools={tools})',
)

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

from typing import Any

from dex_agents import require_deferred_tool_execution
from dex_agents.adapters import McpTool, McpToolFactory
from strands.tools import PythonAgentTool
from strands.types.tools import ToolResult, ToolSpec, ToolUse

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


_FACTORY = McpToolFactory(_wrap, function_name="mcp_tool")
mcp_tool, mcp_tools = _FACTORY.public_functions(
    "a Strands tool that runs in its tool Step",
    example="agent = Agent(model=model, tools={tools})",
)

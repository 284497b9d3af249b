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

from typing import Any

from dex_agents.adapters import McpTool, McpToolFactory
from pydantic_ai import RunContext, Tool, ToolFailed

from dex_agents_pydantic_ai._idempotency import deferred_tool_idempotency_key

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
mcp_tool, mcp_tools = _FACTORY.public_functions(
    "a schema-only ``Tool.from_schema`` tool that runs in its tool Step",
    example="agent = Agent(model, tools={tools})",
)

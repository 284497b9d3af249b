"""The tools of a ``dex_agents.mcp.McpToolSource`` as schema-only ``claude_agent_sdk.tool``s.

Each tool is ``claude_agent_sdk.tool(name, description, schema)`` with the MCP tool's agent name,
description and input JSON Schema, and MCP annotations that carry the effect of the listing (so the
runner classifies it even without the source's policies). Its handler calls
``source.call_tool(name, arguments, idempotency_key=...)``:

- a write (``idempotent_write``, ``non_idempotent_write``, ``unclassified``) runs in its own tool
  Step, with the key of ``current_deferred_tool_execution()``;
- a read runs inside the harness (at least once, as every read of this runner), with the key its
  call would have in a tool Step, ``<flow>/<turn>/<tool_use id>``, and its progress notifications
  as ``mcp.tool_progress`` events of that call. A read that the harness defers with a write of the
  same model response runs in its tool Step like the write.

An MCP error answer raises ``ToolExecutionError``: a failed result the model sees. A call whose
outcome is unknown (``McpToolCallInterruptedError``) fails its tool Step, so the call's effect
decides; inside the harness it is a failed result.
"""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import SdkMcpTool, tool
from dex_agents import ToolEffect, require_deferred_tool_execution
from dex_agents.adapters import McpTool, McpToolFactory
from mcp.types import ToolAnnotations

from dex_agents_claude_agent_sdk._inline_reads import current_inline_read

__all__ = ["mcp_sdk_tool", "mcp_sdk_tools"]


def _sdk_tool(mcp: McpTool) -> SdkMcpTool[Any]:
    async def call(arguments: dict[str, Any]) -> dict[str, Any]:
        inline = current_inline_read()
        if inline is None:
            key = require_deferred_tool_execution().idempotency_key
            output = await mcp.call(arguments, idempotency_key=key)
        else:
            output = await mcp.call(
                arguments,
                idempotency_key=inline.idempotency_key,
                events=inline.events,
                tool_call_id=inline.tool_call_id,
            )
        return {"content": [{"type": "text", "text": output}]}

    annotations = _annotations(mcp.listed.framework_effect)
    return tool(mcp.name, mcp.description, _object_schema(mcp), annotations)(call)


_FACTORY = McpToolFactory(_sdk_tool, function_name="mcp_sdk_tool")
mcp_sdk_tool, mcp_sdk_tools = _FACTORY.public_functions(
    "a ``claude_agent_sdk.tool`` for ``ClaudeAgentSdkRunner``",
    note="Its handler runs only under the runner: in the call's tool Step (a write) or inside the "
    "harness\n(a read); anywhere else it raises ``NoDeferredToolExecutionError``.",
    example='runner = ClaudeAgentSdkRunner(instructions="You manage reports.", tools={tools})',
)


def _object_schema(mcp: McpTool) -> dict[str, Any]:
    # claude_agent_sdk.tool reads a dict without "properties" as {name: python type}; an MCP
    # schema of a tool without arguments may leave it out.
    schema = mcp.json_schema()
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def _annotations(effect: ToolEffect | None) -> ToolAnnotations | None:
    if effect is ToolEffect.READ:
        return ToolAnnotations(read_only_hint=True)
    if effect is ToolEffect.IDEMPOTENT_WRITE:
        return ToolAnnotations(read_only_hint=False, idempotent_hint=True)
    return None

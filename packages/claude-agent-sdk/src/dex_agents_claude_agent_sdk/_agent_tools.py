"""The tools a ``RunModel`` offers the CLI, all served by one in-process MCP server named ``dex``.

Three kinds: the agent's ``claude_agent_sdk.tool`` functions, the tools of ``ToolSource`` objects
(listed per model call), and the enabled built-in tools of the session. The model sees each as
``mcp__dex__<name>``; the session stores and routes the plain ``<name>``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped]
from claude_agent_sdk import SdkMcpTool
from dex_agents import (
    BuiltInToolDefinition,
    ConfigurationTypeError,
    ListedTool,
    ToolEffect,
    ToolExecutionError,
    ToolSource,
    tool_effect_from_mcp_tool_annotations,
)
from mcp.server import Server
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, TextContent, Tool

from dex_agents_claude_agent_sdk._transcript import ToolResultContent

__all__ = [
    "MCP_SERVER_NAME",
    "TOOL_USE_ID_META_KEY",
    "AgentTool",
    "ToolCallHandler",
    "build_mcp_server",
    "function_tool_schema",
    "mcp_tool_name",
    "run_function_tool",
]

MCP_SERVER_NAME: Final = "dex"
"""The in-process MCP server that serves every tool of a ``RunModel``."""
TOOL_USE_ID_META_KEY: Final = "claudecode/toolUseId"
"""The ``_meta`` key in which Claude Code names the ``tool_use`` block of each ``tools/call``."""

JsonDict = dict[str, Any]


def mcp_tool_name(name: str) -> str:
    """The name the model sees for the agent's tool ``name``."""
    return f"mcp__{MCP_SERVER_NAME}__{name}"


@dataclass(frozen=True)
class AgentTool:
    """One tool offered in a model call.

    Attributes:
        name: The tool's name in the session (records, policies, events).
        description: What the model reads.
        input_schema: JSON Schema of the arguments.
        framework_effect: The effect its metadata declares (MCP annotations), or ``None``.
        function: The ``claude_agent_sdk.tool`` the agent defined, for a function tool.
        source: The tool source that listed it, with ``listed`` its definition.
        built_in: Whether it is a session built-in tool (the session routes its calls).
    """

    name: str
    description: str
    input_schema: JsonDict
    framework_effect: ToolEffect | None = None
    function: SdkMcpTool[Any] | None = None
    source: ToolSource | None = None
    listed: ListedTool | None = None
    built_in: bool = False

    @classmethod
    def of_function(cls, tool: SdkMcpTool[Any]) -> AgentTool:
        effect = (
            None
            if tool.annotations is None
            else tool_effect_from_mcp_tool_annotations(tool.annotations)
        )
        return cls(tool.name, tool.description, function_tool_schema(tool), effect, function=tool)

    @classmethod
    def of_listed(cls, source: ToolSource, listed: ListedTool) -> AgentTool:
        schema = dict(listed.parameters) or {"type": "object", "properties": {}}
        return cls(
            listed.name,
            listed.description,
            schema,
            listed.framework_effect,
            source=source,
            listed=listed,
        )

    @classmethod
    def of_built_in(cls, definition: BuiltInToolDefinition) -> AgentTool:
        return cls(
            str(definition.name),
            definition.description,
            json.loads(json.dumps(definition.parameters)),
            ToolEffect.READ,
            built_in=True,
        )

    def mcp_definition(self, effect: ToolEffect) -> Tool:
        # The CLI runs read-only tools of one response in parallel, as tool Steps would.
        annotations = {"readOnlyHint": True} if effect is ToolEffect.READ else None
        return Tool.model_validate(
            {
                "name": self.name,
                "description": self.description,
                "inputSchema": self.input_schema,
                "annotations": annotations,
            }
        )


def function_tool_schema(tool: SdkMcpTool[Any]) -> JsonDict:
    """The JSON Schema of a ``claude_agent_sdk.tool``, as the SDK's own server builds it."""
    schema = tool.input_schema
    if isinstance(schema, dict) and isinstance(schema.get("type"), str) and "properties" in schema:
        return dict(schema)
    import claude_agent_sdk

    build = getattr(claude_agent_sdk, "_build_input_schema", None)
    if build is None:  # pragma: no cover - guards an SDK release that renamed it
        raise ConfigurationTypeError(
            f"tool {tool.name}: give its input_schema as a JSON Schema object; this "
            "claude-agent-sdk release cannot convert Python types for dex-agents"
        )
    built: JsonDict = build(tool)
    return built


ToolCallHandler = Callable[[str, JsonDict, str | None], Awaitable[ToolResultContent]]
"""Runs one ``tools/call`` of the MCP server: tool name, arguments, ``tool_use`` ID."""


def build_mcp_server(
    tools: Mapping[str, tuple[AgentTool, ToolEffect]], handle: ToolCallHandler
) -> Server[Any]:
    """The in-process MCP server of one ``RunModel``: lists ``tools``, sends calls to ``handle``."""
    definitions = [tool.mcp_definition(effect) for tool, effect in tools.values()]

    async def on_list_tools(ctx: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=definitions)

    async def on_call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        meta = params.meta or {}
        tool_use_id = meta.get(TOOL_USE_ID_META_KEY)
        result = await handle(
            params.name,
            dict(params.arguments or {}),
            tool_use_id if isinstance(tool_use_id, str) else None,
        )
        return CallToolResult.model_validate(
            {
                "content": [_mcp_content(block) for block in result.content],
                "isError": result.is_error,
            }
        )

    return Server(
        MCP_SERVER_NAME, version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )


def _mcp_content(block: JsonDict) -> JsonDict:
    if block.get("type") == "image":
        source = block.get("source") or {}
        return {
            "type": "image",
            "data": source.get("data", ""),
            "mimeType": source.get("media_type", ""),
        }
    if block.get("type") == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    return TextContent(type="text", text=json.dumps(block)).model_dump()


async def run_function_tool(tool: SdkMcpTool[Any], arguments: JsonDict) -> object:
    """Validate ``arguments`` and run the tool's handler; return what it returned.

    Raises:
        ToolExecutionError: The arguments break the tool's schema.
    """
    try:
        jsonschema.validate(instance=arguments, schema=function_tool_schema(tool))
    except jsonschema.ValidationError as error:
        raise ToolExecutionError(f"invalid arguments for {tool.name}: {error.message}") from error
    result: object = await tool.handler(arguments)
    return result


def handler_result_content(tool_name: str, result: object) -> ToolResultContent:
    """A handler's ``{"content": [...], "is_error": ...}`` as the model's tool result."""
    if not isinstance(result, dict):
        raise ConfigurationTypeError(
            f"tool {tool_name} returned {type(result).__name__}; a claude_agent_sdk.tool handler "
            'returns {"content": [{"type": "text", "text": ...}]}'
        )
    blocks: list[JsonDict] = []
    for item in result.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "text":
            blocks.append({"type": "text", "text": str(item.get("text", ""))})
        elif isinstance(item, dict) and item.get("type") == "image":
            source = {
                "type": "base64",
                "media_type": item.get("mimeType"),
                "data": item.get("data"),
            }
            blocks.append({"type": "image", "source": source})
        elif isinstance(item, dict):
            blocks.append({"type": "text", "text": json.dumps(item)})
    return ToolResultContent(blocks, bool(result.get("is_error")))


def error_content(message: str) -> ToolResultContent:
    """A failed tool result the model sees."""
    return ToolResultContent([{"type": "text", "text": message}], True)

"""Three READ tools over the servers' resources and prompts.

Each takes a configured server's name as ``server`` and goes over the Worker's session with that server.
Outputs are the server's items as it sent them, in JSON with sorted keys.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import mcp_types
from pydantic import BaseModel

from dex_agents import JsonValue, ListedTool, ToolEffect, ToolExecutionError, dump_json_text
from dex_agents.mcp._connection import McpConnection, describe_error, read_on_connection
from dex_agents.mcp._errors import McpServerUnreachableError
from dex_agents.mcp._server_config import McpServerConfig
from dex_agents.mcp._tool_call import parse_tool_arguments

__all__ = [
    "MCP_GET_PROMPT_TOOL_NAME",
    "MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME",
    "MCP_READ_RESOURCE_TOOL_NAME",
    "RESOURCE_AND_PROMPT_TOOL_NAMES",
    "resource_and_prompt_tools",
    "run_resource_or_prompt_tool",
]

MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME: Final = "mcp_list_resources_and_prompts"
"""The tool that lists the resources and prompts of the source's servers (a read)."""
MCP_READ_RESOURCE_TOOL_NAME: Final = "mcp_read_resource"
"""The tool that reads one resource by its server and URI (a read)."""
MCP_GET_PROMPT_TOOL_NAME: Final = "mcp_get_prompt"
"""The tool that renders one prompt by its server, name and arguments (a read)."""
RESOURCE_AND_PROMPT_TOOL_NAMES: Final = (
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
    MCP_GET_PROMPT_TOOL_NAME,
)
_PAGE_LIMIT: Final = 100


def _object_schema(
    properties: Mapping[str, JsonValue], required: Sequence[str]
) -> dict[str, JsonValue]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


def resource_and_prompt_tools(server_names: Sequence[str]) -> tuple[ListedTool, ...]:
    """The three tools, offered when at least one server is configured."""
    if not server_names:
        return ()
    server: dict[str, JsonValue] = {
        "type": "string",
        "enum": list(server_names),
        "description": "The MCP server to ask.",
    }
    return (
        ListedTool(
            MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
            "List the resources, resource templates and prompts of an MCP server.",
            _object_schema({"server": server}, ["server"]),
            framework_effect=ToolEffect.READ,
        ),
        ListedTool(
            MCP_READ_RESOURCE_TOOL_NAME,
            "Read one resource of an MCP server by its URI.",
            _object_schema(
                {"server": server, "uri": {"type": "string", "description": "The resource URI."}},
                ["server", "uri"],
            ),
            framework_effect=ToolEffect.READ,
        ),
        ListedTool(
            MCP_GET_PROMPT_TOOL_NAME,
            "Get one prompt of an MCP server, filled in with its arguments.",
            _object_schema(
                {
                    "server": server,
                    "name": {"type": "string", "description": "The prompt name."},
                    "arguments": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "The prompt's arguments, strings by name.",
                    },
                },
                ["server", "name"],
            ),
            framework_effect=ToolEffect.READ,
        ),
    )


def _items(models: Sequence[BaseModel]) -> list[Any]:
    return [model.model_dump(by_alias=True, mode="json", exclude_none=True) for model in models]


async def _every_page(fetch: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(_PAGE_LIMIT):
        page = await fetch(cursor)
        items.extend(_items(getattr(page, field)))
        cursor = page.next_cursor
        if cursor is None:
            break
    return items


async def _list_everything(connection: McpConnection) -> dict[str, Any]:
    session = connection.session
    capabilities = connection.client.server_capabilities
    output: dict[str, Any] = {"prompts": [], "resource_templates": [], "resources": []}
    if capabilities.prompts is not None:
        output["prompts"] = await _every_page(
            lambda cursor: session.list_prompts(params=_page(cursor)), "prompts"
        )
    if capabilities.resources is not None:
        output["resources"] = await _every_page(
            lambda cursor: session.list_resources(params=_page(cursor)), "resources"
        )
        output["resource_templates"] = await _every_page(
            lambda cursor: session.list_resource_templates(params=_page(cursor)),
            "resource_templates",
        )
    return output


def _page(cursor: str | None) -> mcp_types.PaginatedRequestParams:
    return mcp_types.PaginatedRequestParams(cursor=cursor)


def _text_argument(tool_name: str, arguments: Mapping[str, Any], key: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str) or not value:
        raise ToolExecutionError(f"invalid arguments for {tool_name}: {key} must be non-empty text")
    return value


async def run_resource_or_prompt_tool(
    tool_name: str, arguments_text: str, servers: Mapping[str, McpServerConfig]
) -> str:
    """Runs one of the three tools on the Worker's session with the named server.

    Raises:
        ToolExecutionError: For invalid arguments, an unconfigured server, an MCP error answer,
            or a server that stays unreachable through its connection attempts.
    """
    arguments = parse_tool_arguments(tool_name, arguments_text)
    server_name = _text_argument(tool_name, arguments, "server")
    server = servers.get(server_name)
    if server is None:
        raise ToolExecutionError(
            f"MCP server {server_name} is not configured; configured servers: "
            f"{', '.join(sorted(servers)) or '(none)'}"
        )
    try:
        output = await read_on_connection(
            server, lambda connection: _run(tool_name, arguments, connection)
        )
    except McpServerUnreachableError as error:
        raise ToolExecutionError(str(error)) from error
    except ToolExecutionError:
        raise
    except Exception as error:
        raise ToolExecutionError(
            f"{tool_name} on MCP server {server_name} failed: {describe_error(error)}"
        ) from error
    return dump_json_text(output)


async def _run(tool_name: str, arguments: Mapping[str, Any], connection: McpConnection) -> Any:
    session = connection.session
    if tool_name == MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME:
        return await _list_everything(connection)
    if tool_name == MCP_READ_RESOURCE_TOOL_NAME:
        uri = _text_argument(tool_name, arguments, "uri")
        result = await session.read_resource(uri)
        return {"contents": _items(result.contents)}
    name = _text_argument(tool_name, arguments, "name")
    prompt_arguments = arguments.get("arguments") or {}
    if not isinstance(prompt_arguments, dict) or not all(
        isinstance(value, str) for value in prompt_arguments.values()
    ):
        raise ToolExecutionError(
            f"invalid arguments for {tool_name}: arguments must map names to strings"
        )
    prompt = await session.get_prompt(name, prompt_arguments or None)
    return {"description": prompt.description, "messages": _items(prompt.messages)}

"""The checks every adapter makes before it wraps an ``McpToolSource``'s tools for its framework.

Each adapter's ``mcp_*_tool(s)`` functions take a source and a tool it listed. A wrong value there
is a wiring mistake, so it fails at once with the same message in every framework rather than at
the first tool call.
"""

from __future__ import annotations

from dex_agents import ConfigurationTypeError, ListedTool
from dex_agents.mcp._tool_source import McpToolSource

__all__ = ["require_listed_tool", "require_mcp_tool_source"]


def require_mcp_tool_source(source: object) -> McpToolSource:
    """Return ``source`` unchanged if it is an ``McpToolSource``.

    Raises:
        ConfigurationTypeError: When it is anything else.

    Example:
        >>> require_mcp_tool_source({"name": "files"})
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.ConfigurationTypeError: expected a dex_agents.mcp.McpToolSource, got dict
    """
    if not isinstance(source, McpToolSource):
        raise ConfigurationTypeError(
            f"expected a dex_agents.mcp.McpToolSource, got {type(source).__name__}"
        )
    return source


def require_listed_tool(tool: object, caller: str) -> ListedTool:
    """Return ``tool`` unchanged if it is a ``ListedTool``; ``caller`` names the function asking.

    Raises:
        ConfigurationTypeError: When it is anything else, such as a tool name.

    Example:
        >>> require_listed_tool("lookup", "mcp_tool")
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.ConfigurationTypeError: mcp_tool needs a tool that McpToolSource.list_tools() returned, got str
    """
    if not isinstance(tool, ListedTool):
        raise ConfigurationTypeError(
            f"{caller} needs a tool that McpToolSource.list_tools() returned, got "
            f"{type(tool).__name__}"
        )
    return tool

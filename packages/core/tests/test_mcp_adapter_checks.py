"""The argument checks that every adapter's ``mcp_*_tool(s)`` functions share."""

from __future__ import annotations

import pytest
from dex_agents import ConfigurationTypeError, ListedTool, ToolEffect
from dex_agents.mcp import (
    McpStdioServerConfig,
    McpToolSource,
    require_listed_tool,
    require_mcp_tool_source,
)


def test_a_source_and_a_listed_tool_pass_through_unchanged() -> None:
    source = McpToolSource([McpStdioServerConfig(name="files", command="mcp-server-files")])
    tool = ListedTool("files__read", "Read a file.", {"type": "object"}, ToolEffect.READ)

    assert require_mcp_tool_source(source) is source
    assert require_listed_tool(tool, "mcp_tool") is tool


@pytest.mark.parametrize(
    "value", [{"name": "files"}, [McpStdioServerConfig(name="f", command="x")]]
)
def test_anything_but_a_source_is_refused_by_its_type(value: object) -> None:
    with pytest.raises(ConfigurationTypeError) as raised:
        require_mcp_tool_source(value)
    assert str(raised.value) == (
        f"expected a dex_agents.mcp.McpToolSource, got {type(value).__name__}"
    )


def test_a_tool_name_instead_of_a_listed_tool_names_the_caller() -> None:
    with pytest.raises(ConfigurationTypeError) as raised:
        require_listed_tool("files__read", "mcp_structured_tool")
    assert str(raised.value) == (
        "mcp_structured_tool needs a tool that McpToolSource.list_tools() returned, got str"
    )

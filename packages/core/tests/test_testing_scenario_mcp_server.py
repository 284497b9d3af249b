from __future__ import annotations

from pathlib import Path

import pytest
from dex_agents import ToolEffect, ToolPolicy
from dex_agents.testing.scenarios import (
    MCP_FLOW_TYPE,
    SCENARIO_MCP_READ_TOOL,
    SCENARIO_MCP_WRITE_TOOL,
    ScenarioAgentSpec,
    list_scenario_mcp_tools,
    mcp_extra_installed,
)

pytestmark = pytest.mark.skipif(not mcp_extra_installed(), reason="needs the mcp extra")


def test_the_scenario_mcp_server_is_listed_once_per_process(tmp_path: Path) -> None:
    # Every scenario Worker and test process builds the MCP agent, each with a state directory of
    # its own: only the first build of a process starts the server to list it.
    first = list_scenario_mcp_tools(
        ScenarioAgentSpec(MCP_FLOW_TYPE, tmp_path / "first", mcp_tools=True)
    )
    second = list_scenario_mcp_tools(
        ScenarioAgentSpec(MCP_FLOW_TYPE, tmp_path / "second", mcp_tools=True)
    )

    assert [tool.name for tool in second.tools] == [SCENARIO_MCP_READ_TOOL, SCENARIO_MCP_WRITE_TOOL]
    assert second.tools == first.tools
    assert second.source.cached_tools() == ()  # it did not list: its first call will
    (server,) = second.source.servers
    assert str(tmp_path / "second") in server.args  # its calls log to its own directory
    assert second.tool_policies == {
        SCENARIO_MCP_READ_TOOL: ToolPolicy(ToolEffect.READ),
        SCENARIO_MCP_WRITE_TOOL: ToolPolicy(
            ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False
        ),
    }

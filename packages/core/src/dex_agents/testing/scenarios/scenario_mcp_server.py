"""The scenario agent's MCP server, described once for every runner, and the server itself.

A runner that declares ``ScenarioFeature.MCP_TOOLS`` offers the tools of this small stdio MCP
server through its own MCP path (Stepwise: ``McpToolSource`` in ``AgentDefinition.tool_sources``;
an adapter: its MCP wrapper over ``McpToolSource.call_tool``). The server has a read tool
(``readOnlyHint``) and a non-idempotent write tool (no hints, so the runner gives it
``SCENARIO_MCP_TOOL_POLICIES``). Each records its call, with the idempotency key from ``_meta``,
in the scenario's InvocationLog before anything else, then stops at the FileGate named by its
``gate`` argument. The server exits as soon as the Worker that started it dies, so a killed call
never finishes behind the test's back.

The server runs as ``python -m dex_agents.testing.scenarios._scenario_mcp_server_main --state-dir
DIR``; it needs the mcp extra (``dex-agents[mcp]``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from dex_agents import ToolEffect, ToolPolicy

if TYPE_CHECKING:
    from dex_agents.mcp import McpStdioServerConfig, McpToolSource
    from dex_agents.testing.scenarios.scenario_agent import ScenarioAgentSpec

__all__ = [
    "SCENARIO_MCP_READ_TOOL",
    "SCENARIO_MCP_SERVER_NAME",
    "SCENARIO_MCP_SOURCE_NAME",
    "SCENARIO_MCP_TOOL_POLICIES",
    "SCENARIO_MCP_WRITE_TOOL",
    "ScenarioMcpServer",
    "mcp_extra_installed",
    "scenario_mcp_server",
    "scenario_mcp_server_config",
    "scenario_mcp_tool_source",
]

SCENARIO_MCP_SERVER_NAME: Final = "scenario"
"""The server's name; its tools are offered as ``scenario__<tool>``."""
SCENARIO_MCP_SOURCE_NAME: Final = "scenario-mcp"
"""The ``source_name`` of the scenario agent's McpToolSource."""
SCENARIO_MCP_READ_TOOL: Final = "scenario__lookup_stock"
"""The read tool as the agent offers it (MCP name ``lookup_stock``, ``readOnlyHint``)."""
SCENARIO_MCP_WRITE_TOOL: Final = "scenario__send_note"
"""The non-idempotent write tool as the agent offers it (MCP name ``send_note``, no hints)."""
SCENARIO_MCP_TOOL_POLICIES: Final[Mapping[str, ToolPolicy]] = {
    SCENARIO_MCP_WRITE_TOOL: ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
}
"""What the runner adds to the agent's tool policies: the write runs once, without approval."""
_SERVER_MODULE: Final = "dex_agents.testing.scenarios._scenario_mcp_server_main"


@dataclass(frozen=True)
class ScenarioMcpServer:
    """How a Worker starts the scenario MCP server: a stdio command with the state directory."""

    name: str
    command: str
    args: tuple[str, ...]


def mcp_extra_installed() -> bool:
    """Whether the MCP SDK (the mcp extra) is installed, so the MCP scenarios can run."""
    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):  # a module blocked in sys.modules has no spec
        return False


def scenario_mcp_server(spec: ScenarioAgentSpec) -> ScenarioMcpServer:
    """The scenario MCP server of ``spec``, logging to its state directory."""
    return ScenarioMcpServer(
        SCENARIO_MCP_SERVER_NAME,
        sys.executable,
        ("-m", _SERVER_MODULE, "--state-dir", str(spec.state_dir)),
    )


def scenario_mcp_server_config(spec: ScenarioAgentSpec) -> McpStdioServerConfig:
    """The scenario MCP server as an ``McpStdioServerConfig``.

    Raises:
        ImportError: Without the mcp extra.
    """
    from dex_agents.mcp import McpStdioServerConfig

    server = scenario_mcp_server(spec)
    return McpStdioServerConfig(name=server.name, command=server.command, args=server.args)


def scenario_mcp_tool_source(spec: ScenarioAgentSpec) -> McpToolSource:
    """The McpToolSource of the scenario agent, for a runner's tool sources or MCP wrapper.

    Raises:
        ImportError: Without the mcp extra.
    """
    from dex_agents.mcp import McpToolSource

    return McpToolSource([scenario_mcp_server_config(spec)], source_name=SCENARIO_MCP_SOURCE_NAME)

"""The scenario agent's MCP server, described once for every runner, and the server itself.

A runner that declares ``ScenarioFeature.MCP_TOOLS`` offers the tools of this small stdio MCP
server through its own MCP path (Stepwise: ``McpToolSource`` in ``AgentDefinition.tool_sources``;
an adapter: its MCP wrapper over ``McpToolSource.call_tool``). The server has a read tool
(``readOnlyHint``) and a non-idempotent write tool (no hints, so the runner gives it
``SCENARIO_MCP_TOOL_POLICIES``). Each records its call, with the idempotency key from ``_meta``,
in the scenario's InvocationLog before anything else, then stops at the FileGate named by its
``gate`` argument. The server exits as soon as the Worker that started it dies, so a killed call
never finishes behind the test's back.

A framework whose agent takes its tools when it is built (an adapter's schema-only tools) lists
the server in its ``build_flow`` with :func:`list_scenario_mcp_tools`, which also gives the tool
policies to pass; only the MCP scenarios build that agent.

The server runs as ``python -m dex_agents.testing.scenarios._scenario_mcp_server_main --state-dir
DIR``, or forked from its Worker's warm zygote (``_scenario_mcp_zygote``); it needs the mcp extra
(``dex-agents[mcp]``).
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from dex_agents import DexAgentsError, ListedTool, ToolEffect, ToolPolicy
from dex_agents.testing.scenarios._scenario_mcp_zygote import (
    SERVER_MODULE,
    scenario_mcp_server_command,
)

if TYPE_CHECKING:
    from dex_agents.mcp import McpStdioServerConfig, McpToolSource
    from dex_agents.testing.scenarios._scenario_agent import ScenarioAgentSpec

__all__ = [
    "SCENARIO_MCP_READ_TOOL",
    "SCENARIO_MCP_SERVER_NAME",
    "SCENARIO_MCP_SOURCE_NAME",
    "SCENARIO_MCP_TOOL_POLICIES",
    "SCENARIO_MCP_WRITE_TOOL",
    "ScenarioMcpServer",
    "ScenarioMcpTools",
    "list_scenario_mcp_tools",
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
    """The scenario MCP server of ``spec``, logging to its state directory (with
    ``per_session_state``, to the directory of each call's session, read from its idempotency
    key). Its command forks it from the Worker's warm zygote when there is one
    (``start_scenario_mcp_zygote``), else runs it as ``python -m``."""
    command, args = scenario_mcp_server_command(_server_arguments(spec))
    return ScenarioMcpServer(SCENARIO_MCP_SERVER_NAME, command, args)


def _server_arguments(spec: ScenarioAgentSpec) -> tuple[str, ...]:
    per_session = ("--per-session-state",) if spec.per_session_state else ()
    return ("--state-dir", str(spec.state_root), *per_session)


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


@dataclass(frozen=True)
class ScenarioMcpTools:
    """The scenario MCP server's tools, listed, for a runner that wraps each as a framework tool.

    Attributes:
        source: The agent's McpToolSource; a wrapped tool calls
            ``source.call_tool(name, arguments, idempotency_key=...)`` with the call's key.
        tools: The listing: ``SCENARIO_MCP_READ_TOOL`` and ``SCENARIO_MCP_WRITE_TOOL``.
        tool_policies: ``{**source.tool_policies(), **SCENARIO_MCP_TOOL_POLICIES}``; merge them
            into the agent's tool policies.
    """

    source: McpToolSource
    tools: tuple[ListedTool, ...]
    tool_policies: Mapping[str, ToolPolicy]


def list_scenario_mcp_tools(spec: ScenarioAgentSpec) -> ScenarioMcpTools:
    """The scenario MCP server of ``spec`` and its tools, listed, from synchronous code such as a
    ``build_flow``.

    The server's tools are the same whatever its state directory, so a process lists them once
    (the first call starts the server and lists it now, in a thread of its own when an event
    loop runs here) and later calls reuse that listing: a Worker forked from a warm parent that
    built its Flows, and each test process, start the server only for real calls. A source
    returned with an earlier listing has not listed itself: its first ``call_tool`` lists on the
    connection that call opens.

    Raises:
        ImportError: Without the mcp extra.
        DexAgentsError: When the listing lacks a scenario tool (the server could not start; the
            source logged why).
    """
    source = scenario_mcp_tool_source(spec)
    tools = _LISTINGS.get(_listing_key(spec))
    if tools is None:
        tools = _list_now(spec, source)
        _LISTINGS[_listing_key(spec)] = tools
    # What ``source.tool_policies()`` gives after a listing, from the listing this process made.
    listed_policies = {
        tool.name: ToolPolicy(tool.framework_effect)
        for tool in tools
        if tool.framework_effect is not None
    }
    return ScenarioMcpTools(source, tools, {**listed_policies, **SCENARIO_MCP_TOOL_POLICIES})


# The scenario server's listing in this process, by the server's command (its tools do not
# depend on its state directory).
_LISTINGS: dict[str, tuple[ListedTool, ...]] = {}


def _listing_key(spec: ScenarioAgentSpec) -> str:
    return scenario_mcp_server(spec).command


def _list_now(spec: ScenarioAgentSpec, source: McpToolSource) -> tuple[ListedTool, ...]:
    def list_now() -> list[ListedTool]:
        return asyncio.run(source.list_tools())

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        tools = list_now()
    else:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="scenario-mcp") as pool:
            tools = pool.submit(list_now).result()
    missing = sorted(
        {SCENARIO_MCP_READ_TOOL, SCENARIO_MCP_WRITE_TOOL} - {tool.name for tool in tools}
    )
    if missing:
        raise DexAgentsError(
            f"the scenario MCP server ({SERVER_MODULE} {' '.join(_server_arguments(spec))}) "
            "did not list "
            f"{', '.join(missing)}; the McpToolSource warning in the log says why"
        )
    return tuple(tools)

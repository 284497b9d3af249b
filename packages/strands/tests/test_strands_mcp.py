"""MCP tools in a Strands session, both ways, against the scenario MCP server over stdio: Strands'
own ``MCPClient`` tools run in their tool Steps but send no idempotency key; the tools of
``mcp_tools`` (the kit's wrapper over ``McpToolSource``) send the call's key in ``_meta``."""

from __future__ import annotations

from pathlib import Path

from dex_agents import AgentSessionOptions, AgentToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.testing import InvocationLog
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.testing.scenarios import (
    SCENARIO_MCP_READ_TOOL,
    ScenarioAgentSpec,
    scenario_mcp_server,
    scenario_mcp_tool_source,
)
from dex_agents_strands import mcp_tools, strands_session_flow
from dex_agents_strands.testing import ModelCall, reference_agent, text_reply, tool_use_reply
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from strands.tools.mcp import MCPClient
from strands.types.content import Message

_OWN_CLIENT_TOOL = "lookup_stock"


def _reply(call: ModelCall) -> Message:
    """Call the MCPClient's read, then the kit wrapper's read, then answer with both results."""
    outputs = call.tool_outputs()
    if len(outputs) == 0:
        return tool_use_reply("own-1", _OWN_CLIENT_TOOL, {"gate": ""})
    if len(outputs) == 1:
        return tool_use_reply("kit-1", SCENARIO_MCP_READ_TOOL, {"gate": ""})
    return text_reply(" | ".join(outputs))


async def test_mcp_client_tools_and_mcp_tools_run_in_their_tool_steps(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    spec = ScenarioAgentSpec("StrandsMcp", tmp_path)
    server = scenario_mcp_server(spec)
    client = MCPClient(
        lambda: stdio_client(StdioServerParameters(command=server.command, args=list(server.args)))
    )
    source = scenario_mcp_tool_source(spec)
    agent = reference_agent(_reply, [client, *await mcp_tools(source)])
    options = AgentSessionOptions(
        tool_policies={**source.tool_policies(), _OWN_CLIENT_TOOL: ToolPolicy(ToolEffect.READ)}
    )
    flow = strands_session_flow(agent, "StrandsMcp", options)
    try:
        async with dex_in_process_worker([flow]) as worker:
            result = await worker.sessions(flow).run_turn("s1", "look the stock up twice")
            session_id = worker.scoped("s1")
    finally:
        agent.cleanup()  # stops the MCPClient's server process

    assert result.text == "lookup_stock ungated ok | lookup_stock ungated ok"
    assert [(c.tool_name, c.status) for c in result.tool_calls] == [
        (_OWN_CLIENT_TOOL, AgentToolCallStatus.SUCCEEDED),
        (SCENARIO_MCP_READ_TOOL, AgentToolCallStatus.SUCCEEDED),
    ]
    # Each ran once on the server; only the kit's wrapper sent the call's idempotency key.
    keys = InvocationLog(tmp_path / "invocations.jsonl").keys("lookup_stock")
    assert keys == ["", f"{session_id}/turn-1/kit-1"]

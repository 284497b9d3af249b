"""A Stepwise agent with the test MCP servers as its tool source, for Worker child processes.

The user message is a JSON command, ``{"calls": [{"tool": ..., "arguments": {...}}]}``: the first
model call of the turn calls those tools in one response, the next one answers
``done: <outputs>``.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex import Flow
from dex_agents import ToolEffect, ToolPolicy
from dex_agents.mcp import McpServerConfig, McpToolSource
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    stepwise_agent_session_flow,
)

from mcp_test_support.servers import stdio_config

FLOW_TYPE = "McpTestAgent"
STATE_DIR_ENV = "MCP_TEST_STATE_DIR"
HTTP_URL_ENV = "MCP_TEST_HTTP_URL"
EVERYTHING_URL_ENV = "MCP_TEST_EVERYTHING_URL"
"""server-everything's Streamable HTTP URL: the agent then also has that server, ``everything``."""
RESEARCH_TOOL = "everything__simulate-research-query"
_NO_APPROVAL = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)


def command(*calls: tuple[str, dict[str, Any]]) -> str:
    """The user message that makes the model call these tools."""
    return json.dumps({"calls": [{"tool": tool, "arguments": args} for tool, args in calls]})


def _reply(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text="done: " + "; ".join(result.output for result in results))
    calls = json.loads(ScriptedModelClient.user_texts(request)[-1])["calls"]
    return ScriptedModelReply(
        tool_calls=[ScriptedToolCall(call["tool"], call["arguments"]) for call in calls]
    )


def build_mcp_flow(
    state_dir: Path, http_url: str | None, everything_url: str | None = None
) -> Flow[Any]:
    """The agent over the stdio server ``files`` and, with a URL, the HTTP server ``tickets``
    (and server-everything over HTTP as ``everything``)."""
    from dex_agents.mcp import McpStreamableHttpServerConfig

    servers: list[McpServerConfig] = [stdio_config(state_dir)]
    if http_url:
        servers.append(McpStreamableHttpServerConfig(name="tickets", url=http_url))
    if everything_url:
        servers.append(McpStreamableHttpServerConfig(name="everything", url=everything_url))
    agent = AgentDefinition(
        name="mcp-test",
        instructions="You use MCP tools.",
        model=ScriptedModelClient(_reply),
        tool_sources=[McpToolSource(servers)],
        tool_policies={
            "files__write": _NO_APPROVAL,
            "tickets__ask_account": _NO_APPROVAL,
            RESEARCH_TOOL: _NO_APPROVAL,
        },
        # A stdio server can take seconds to start on a loaded machine.
        tool_source_listing_timeout=timedelta(seconds=60),
    )
    return stepwise_agent_session_flow(agent, flow_type=FLOW_TYPE)


def flow_from_environment() -> Flow[Any]:
    return build_mcp_flow(
        Path(os.environ[STATE_DIR_ENV]),
        os.environ.get(HTTP_URL_ENV),
        os.environ.get(EVERYTHING_URL_ENV),
    )

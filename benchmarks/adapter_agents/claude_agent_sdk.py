"""The benchmark agent under the Claude Agent SDK: the real Claude Code CLI, a local fake API.

Both sides run the same ``claude_agent_sdk.tool`` and the same scripted model behind a
``FakeAnthropicServer`` that sleeps the model latency per call. The durable turn is one
``RunModel`` (the agent loop, the read inside it); the in-process turn is ``claude_agent_sdk.query``
with no Dex. Each side starts the CLI once per turn, so the ratio shows what Dex adds.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, create_sdk_mcp_server, query, tool
from dex_agents import AgentSessionFlow
from dex_agents_claude_agent_sdk import ClaudeAgentSdkRunner
from dex_agents_claude_agent_sdk.testing import (
    FAKE_API_KEY_ENVIRONMENT,
    FakeAnthropicServer,
    FakeModelReply,
    FakeModelRequest,
    FakeToolCall,
)
from mcp.types import ToolAnnotations

from adapter_agents import USER_TEXT, BenchmarkAgent, final_answer, lookup_order_result

INSTRUCTIONS = "You answer questions about orders."


@tool(
    "lookup_order",
    "Look up an order by its ID.",
    {"order_id": str},
    ToolAnnotations(readOnlyHint=True),
)
async def lookup_order(arguments: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(lookup_order_result(arguments["order_id"]))
    return {"content": [{"type": "text", "text": text}]}


def build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent:
    """The benchmark agent as a Claude Agent SDK agent, its model a sleeping fake API."""

    async def respond(request: FakeModelRequest) -> FakeModelReply:
        await asyncio.sleep(model_latency_seconds)
        if not request.tool_outputs:
            return FakeModelReply(tool_calls=[FakeToolCall("lookup_order", {"order_id": "7"})])
        return FakeModelReply(text=final_answer(request.tool_outputs[-1]))

    servers: dict[asyncio.AbstractEventLoop, FakeAnthropicServer] = {}

    async def base_url() -> str:
        loop = asyncio.get_running_loop()
        if loop not in servers:
            servers[loop] = FakeAnthropicServer()
            await servers[loop].start()
        return servers[loop].route("benchmark", respond)

    async def run_in_process(text: str) -> str:
        env = {**FAKE_API_KEY_ENVIRONMENT, "ANTHROPIC_BASE_URL": await base_url()}
        options = ClaudeAgentOptions(
            tools=[],
            mcp_servers={"dex": create_sdk_mcp_server("dex", tools=[lookup_order])},
            allowed_tools=["mcp__dex__lookup_order"],
            system_prompt=INSTRUCTIONS,
            model="claude-benchmark",
            setting_sources=[],
            cwd=tempfile.mkdtemp(prefix="claude-benchmark-"),
            env={**env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1"},
        )
        async for message in query(prompt=text or USER_TEXT, options=options):
            if isinstance(message, ResultMessage):
                return message.result or ""
        raise RuntimeError("the Claude Agent SDK turn ended without a result")

    runner = ClaudeAgentSdkRunner(
        instructions=INSTRUCTIONS,
        tools=[lookup_order],
        model="claude-benchmark",
        upstream_base_url=base_url,
        env=FAKE_API_KEY_ENVIRONMENT,
    )
    return BenchmarkAgent(
        flow=AgentSessionFlow(runner, flow_type="AdapterTurnsClaudeAgentSdk"),
        run_in_process=run_in_process,
    )

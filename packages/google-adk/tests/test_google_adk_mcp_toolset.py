"""ADK's own McpToolset under the runner: its tools are deferred into tool Steps and classified by
their MCP annotations, against a real stdio MCP server the test starts."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from dex_agents import (
    AgentEventWriter,
    AgentToolCall,
    AgentToolCallStatus,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
)
from dex_agents.testing import TurnContextBuilder
from dex_agents_google_adk import GoogleAdkRunner
from google.adk.agents.llm_agent import LlmAgent
from google.adk.tools.mcp_tool.mcp_session_manager import StdioConnectionParams
from google.adk.tools.mcp_tool.mcp_toolset import McpToolset
from google_adk_test_support import ScriptedLlm, call_reply, text_reply
from mcp import StdioServerParameters

SERVER = Path(__file__).with_name("google_adk_mcp_server.py")


@pytest.fixture
async def toolset(tmp_path: Path) -> AsyncIterator[tuple[McpToolset, Path]]:
    log = tmp_path / "mcp-calls.log"
    log.touch()
    parameters = StdioServerParameters(
        command=sys.executable, args=[str(SERVER)], env={**os.environ, "MCP_CALL_LOG": str(log)}
    )
    tools = McpToolset(
        connection_params=StdioConnectionParams(server_params=parameters, timeout=60)
    )
    try:
        yield tools, log
    finally:
        await tools.close()


async def test_mcp_tools_are_deferred_classified_and_run_in_their_tool_steps(
    toolset: tuple[McpToolset, Path],
) -> None:
    tools, log = toolset
    model = ScriptedLlm(
        model="m",
        script=[call_reply(("find_order", {"order_id": "7"}), ("cancel_order", {"order_id": "7"})),
                text_reply("done")],
    )  # fmt: skip
    runner = GoogleAdkRunner(LlmAgent(name="orders", model=model, tools=[tools]))
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("Find order 7, then cancel it."))

    outcome = await runner.run_model_step(turns.context())

    assert isinstance(outcome, ToolCallsRequested)
    assert log.read_text() == ""  # RunModel listed the tools but called none
    policies = {call.tool_name: call.policy for call in outcome.tool_calls}
    assert policies["find_order"].effect is ToolEffect.READ  # readOnlyHint
    assert policies["find_order"].requires_approval is False
    assert policies["cancel_order"].effect is ToolEffect.UNCLASSIFIED  # no annotations
    assert policies["cancel_order"].requires_approval is True

    find = next(call for call in outcome.tool_calls if call.tool_name == "find_order")
    record = AgentToolCall(
        find.tool_call_id, "find_order", find.arguments, ToolEffect.READ, False,
        AgentToolCallStatus.APPROVED, "turn-1", 0,
    )  # fmt: skip
    result = await runner.execute_deferred_tool_call(
        DeferredToolExecution("session-1", record, 1, AgentEventWriter.discarding())
    )

    assert isinstance(result, ToolExecutionResult)
    assert "order 7: delivered" in result.output
    assert log.read_text() == "find_order 7\n"

"""MCP tools under Pydantic AI, against the scenario kit's real stdio MCP server: ``mcp_tools`` (an
``McpToolSource``'s tools as ``Tool.from_schema`` tools, with the session's idempotency key in
``_meta``), Pydantic AI's own ``MCPToolset`` (deferred into tool Steps too, without a key), and the
package without the mcp extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dex_agents import (
    AgentInterrupt,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    ConfigurationTypeError,
    ListedTool,
    MessageRole,
)
from dex_agents.testing import wait_for_agent_snapshot, wait_for_turn_end
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.testing.scenarios import (
    SCENARIO_MCP_READ_TOOL,
    SCENARIO_MCP_WRITE_TOOL,
    ScenarioAgentSpec,
    invocation_log,
    scenario_mcp_server,
    scenario_mcp_tool_source,
)
from dex_agents_pydantic_ai import PydanticAIRunner, mcp_tool, mcp_tools
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_test_support import turn_tool_results


def _calls_then_outputs(*calls: ToolCallPart, offered: list[dict[str, Any]]) -> FunctionModel:
    """A model that makes ``calls`` in one response, then answers with the outputs, in order."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append({tool.name: tool.parameters_json_schema for tool in info.function_tools})
        results = turn_tool_results(messages)
        if not results:
            return ModelResponse(parts=list(calls))
        return ModelResponse(parts=[TextPart(" | ".join(r.model_response_str() for r in results))])

    return FunctionModel(respond)


async def _approve_the_write(
    sessions: AgentSessionClient, session_id: str, write_tool: str, state_dir: Path
) -> None:
    """The write waits for approval without having run; approve it."""
    interrupt: AgentInterrupt = await wait_for_agent_snapshot(
        sessions,
        session_id,
        lambda snapshot: next(iter(snapshot.pending_interrupts), None),
        "the write's approval",
    )
    assert interrupt.tool_name == write_tool
    assert invocation_log(state_dir).count("send_note") == 0
    assert await sessions.resolve_interrupt(session_id, interrupt.interrupt_id, approved=True)


async def test_mcp_tools_run_in_their_own_tool_steps_with_the_sessions_key(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    state_dir = tmp_path / "state"
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", state_dir))
    offered: list[dict[str, Any]] = []
    model = _calls_then_outputs(
        ToolCallPart(SCENARIO_MCP_READ_TOOL, {"gate": ""}, tool_call_id="read"),
        ToolCallPart(SCENARIO_MCP_WRITE_TOOL, {}, tool_call_id="write"),
        # The server's schema wants a string: its error answer is a failed result.
        ToolCallPart(SCENARIO_MCP_READ_TOOL, {"gate": 7}, tool_call_id="bad"),
        offered=offered,
    )
    agent: Agent[None, str] = Agent(model, tools=await mcp_tools(source))
    # The read's readOnlyHint makes it a read; the write has no hints, so it waits for approval.
    options = AgentSessionOptions(tool_policies=source.tool_policies())
    flow = AgentSessionFlow(PydanticAIRunner(agent, stream=False), flow_type="Mcp", options=options)
    async with dex_in_process_worker([flow]) as worker:
        sessions = worker.sessions(flow)
        await sessions.start_session("mcp-1", "check the stock and send a note")
        await _approve_the_write(sessions, "mcp-1", SCENARIO_MCP_WRITE_TOOL, state_dir)
        snapshot = await wait_for_turn_end(sessions, "mcp-1")

    listed = {tool.name: dict(tool.parameters) for tool in source.cached_tools()}
    assert offered[0] == listed  # the model sees the server's own schemas
    log = invocation_log(state_dir)
    assert log.keys("lookup_stock") == [worker.scoped("mcp-1") + "/turn-1/read"]
    assert log.keys("send_note") == [worker.scoped("mcp-1") + "/turn-1/write"]
    answer = snapshot.messages[-1]
    assert answer.role is MessageRole.ASSISTANT
    assert (answer.text or "").startswith("lookup_stock ungated ok | send_note ungated ok | ")
    failed = next(m for m in snapshot.messages if m.tool_call_id == "bad" and m.tool_output)
    assert "gate" in (failed.tool_output or "")


async def test_pydantic_ais_own_mcp_toolset_defers_its_calls_into_tool_steps_without_a_key(
    tmp_path: Path,
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    state_dir = tmp_path / "state"
    server = scenario_mcp_server(ScenarioAgentSpec("Mcp", state_dir))
    toolset: MCPToolset[None] = MCPToolset(StdioTransport(server.command, list(server.args)))
    model = _calls_then_outputs(
        ToolCallPart("lookup_stock", {"gate": ""}, tool_call_id="read"),
        ToolCallPart("send_note", {}, tool_call_id="write"),
        offered=[],
    )
    agent: Agent[None, str] = Agent(model, toolsets=[toolset])
    flow = AgentSessionFlow(PydanticAIRunner(agent, stream=False), flow_type="OwnMcp")
    async with dex_in_process_worker([flow]) as worker:
        sessions = worker.sessions(flow)
        await sessions.start_session("own-1", "check the stock and send a note")
        # Its annotations reach the session: the read runs at once, the write waits.
        await _approve_the_write(sessions, "own-1", "send_note", state_dir)
        snapshot = await wait_for_turn_end(sessions, "own-1")

    assert snapshot.messages[-1].text == "lookup_stock ungated ok | send_note ungated ok"
    log = invocation_log(state_dir)
    # Each ran once, in its tool Step; Pydantic AI's MCP client sends no idempotency key.
    assert log.keys("lookup_stock") == [""] and log.keys("send_note") == [""]


async def test_only_an_mcp_tool_source_and_its_listed_tools_are_wrapped(tmp_path: Path) -> None:
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", tmp_path))
    listed = ListedTool("files__read", "Read a file.", {"type": "object", "properties": {}})

    with pytest.raises(ConfigurationTypeError, match=r"McpToolSource, got dict"):
        mcp_tool({}, listed)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationTypeError, match=r"list_tools\(\) returned, got str"):
        mcp_tool(source, "files__read")  # type: ignore[arg-type]
    tool = mcp_tool(source, listed)
    assert (tool.name, tool.description, tool.tool_def.parameters_json_schema) == (
        "files__read",
        "Read a file.",
        {"type": "object", "properties": {}},
    )


def test_the_package_imports_without_the_mcp_extra_and_the_helper_names_it() -> None:
    code = (
        "import sys\nsys.modules['mcp'] = None\n"
        "import dex_agents_pydantic_ai as adapter\n"
        "from dex_agents import ListedTool\n"
        "adapter.mcp_tool(object(), ListedTool('t', 'T'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode != 0
    assert 'pip install "dex-agents[mcp]"' in result.stderr.splitlines()[-1]

"""MCP tools under Pydantic AI, against the scenario kit's real stdio MCP server: ``mcp_tools`` (an
``McpToolSource``'s tools as ``Tool.from_schema`` tools, with the session's idempotency key in
``_meta``), Pydantic AI's own ``MCPToolset`` (deferred into tool Steps too, without a key), and the
package without the mcp extra."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dex_agents import (
    AgentSessionFlow,
    ListedTool,
    MessageRole,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.testing.scenarios import (
    ScenarioAgentSpec,
    ScenarioMcpTurn,
    check_mcp_tool_refusals,
    invocation_log,
    mcp_wrapper_error_without_mcp,
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


async def test_mcp_tools_run_in_their_own_tool_steps_with_the_sessions_key(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    turn = ScenarioMcpTurn(tmp_path / "state")
    offered: list[dict[str, Any]] = []
    calls = [
        ToolCallPart(c.tool, c.arguments, tool_call_id=call_id) for call_id, c in turn.calls.items()
    ]
    model = _calls_then_outputs(*calls, offered=offered)
    agent: Agent[None, str] = Agent(model, tools=await mcp_tools(turn.source))
    runner = PydanticAIRunner(agent, stream=False)
    flow = AgentSessionFlow(runner, flow_type="Mcp", options=turn.session_options())
    async with dex_in_process_worker([flow]) as worker:
        snapshot = await turn.run(worker.sessions(flow), "mcp-1")

    listed = {tool.name: dict(tool.parameters) for tool in turn.source.cached_tools()}
    assert offered[0] == listed  # the model sees the server's own schemas
    turn.check_keys(worker.scoped("mcp-1"))
    answer = snapshot.messages[-1]
    assert answer.role is MessageRole.ASSISTANT
    assert (answer.text or "").startswith(f"{turn.read_output} | {turn.write_output} | ")
    failed = next(m for m in snapshot.messages if m.tool_call_id == "bad" and m.tool_output)
    assert "gate" in (failed.tool_output or "")


async def test_pydantic_ais_own_mcp_toolset_defers_its_calls_into_tool_steps_without_a_key(
    tmp_path: Path,
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    turn = ScenarioMcpTurn(tmp_path / "state")
    server = scenario_mcp_server(turn.spec)
    toolset: MCPToolset[None] = MCPToolset(StdioTransport(server.command, list(server.args)))
    model = _calls_then_outputs(
        ToolCallPart("lookup_stock", {"gate": ""}, tool_call_id="read"),
        ToolCallPart("send_note", {}, tool_call_id="write"),
        offered=[],
    )
    agent: Agent[None, str] = Agent(model, toolsets=[toolset])
    flow = AgentSessionFlow(PydanticAIRunner(agent, stream=False), flow_type="OwnMcp")
    async with dex_in_process_worker([flow]) as worker:
        # Its annotations reach the session: the read runs at once, the write waits.
        snapshot = await turn.run(worker.sessions(flow), "own-1", write_tool="send_note")

    assert snapshot.messages[-1].text == "lookup_stock ungated ok | send_note ungated ok"
    log = invocation_log(turn.state_dir)
    # Each ran once, in its tool Step; Pydantic AI's MCP client sends no idempotency key.
    assert log.keys("lookup_stock") == [""] and log.keys("send_note") == [""]


async def test_only_an_mcp_tool_source_and_its_listed_tools_are_wrapped(tmp_path: Path) -> None:
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", tmp_path))
    listed = ListedTool("files__read", "Read a file.", {"type": "object", "properties": {}})

    check_mcp_tool_refusals(mcp_tool, source, listed)
    tool = mcp_tool(source, listed)
    assert (tool.name, tool.description, tool.tool_def.parameters_json_schema) == (
        "files__read",
        "Read a file.",
        {"type": "object", "properties": {}},
    )


def test_the_package_imports_without_the_mcp_extra_and_the_helper_names_it() -> None:
    error = mcp_wrapper_error_without_mcp("dex_agents_pydantic_ai", "mcp_tool")
    assert 'pip install "dex-agents[mcp]"' in error

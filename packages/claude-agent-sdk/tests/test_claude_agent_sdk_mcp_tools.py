"""MCP tools under the Claude Agent SDK runner: ``mcp_sdk_tools`` (an ``McpToolSource``'s tools as
``claude_agent_sdk.tool``s) against the scenario kit's real stdio MCP server, with the real Claude
Code CLI and a local Messages API. A read runs inside the harness with its call's key; a write, and
a read that shares its model response, run in their own tool Steps with the session's key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from dex_agents import (
    AgentSessionFlow,
    ConfigurationTypeError,
    ListedTool,
    MessageRole,
    NoDeferredToolExecutionError,
    ToolEffect,
)
from dex_agents.testing import read_step_history
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.testing.scenarios import (
    ScenarioAgentSpec,
    ScenarioMcpTurn,
    check_mcp_tool_refusals,
    invocation_log,
    scenario_mcp_tool_source,
)
from dex_agents_claude_agent_sdk import ClaudeAgentSdkRunner, mcp_sdk_tool, mcp_sdk_tools
from dex_agents_claude_agent_sdk.testing import (
    FAKE_API_KEY_ENVIRONMENT,
    FakeAnthropicServer,
    FakeModelReply,
    FakeModelRequest,
    FakeToolCall,
)


@pytest.fixture
async def model_api() -> AsyncIterator[FakeAnthropicServer]:
    server = FakeAnthropicServer()
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def _tool_use_ids(request: FakeModelRequest) -> list[str]:
    return [
        str(block["id"])
        for message in request.messages
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


async def test_an_mcp_read_runs_in_the_harness_and_a_write_in_its_tool_step_each_with_its_key(
    tmp_path: Path, model_api: FakeAnthropicServer, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    turn = ScenarioMcpTurn(tmp_path / "state")
    read, *write_and_bad = [FakeToolCall(c.tool, c.arguments) for c in turn.calls.values()]

    def respond(request: FakeModelRequest) -> FakeModelReply:
        if request.model_call_index == 1:
            return FakeModelReply(tool_calls=[read])
        if request.model_call_index == 2:
            # The bad read's arguments: a failed result, in the read's own Step.
            return FakeModelReply(tool_calls=write_and_bad)
        return FakeModelReply(text=" | ".join(request.tool_outputs))

    runner = ClaudeAgentSdkRunner(
        instructions="You check stock and send notes.",
        tools=await mcp_sdk_tools(turn.source),
        model="claude-test",
        upstream_base_url=model_api.route("mcp", respond),
        env=FAKE_API_KEY_ENVIRONMENT,
    )
    flow = AgentSessionFlow(runner, flow_type="McpAgent", options=turn.session_options())
    async with dex_in_process_worker([flow]) as dex:
        snapshot = await turn.run(dex.sessions(flow), "s")
    history = await read_step_history(dex.server_address, dex.scoped("s"))
    steps = [e.step_type for e in history]

    last = model_api.requests[-1]
    offered = {str(t["name"]): t["input_schema"] for t in last.body["tools"]}
    for listed in turn.source.cached_tools():  # the model sees the server's own schemas
        assert offered[f"mcp__dex__{listed.name}"] == dict(listed.parameters)
    read_id, write_id, _bad_read_id = _tool_use_ids(last)
    # The inline read sent the key its call would have in a tool Step; the bad read never ran.
    turn.check_keys(dex.scoped("s"), read_id=read_id, write_id=write_id)
    (answer,) = [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT and m.text]
    outputs = (answer or "").split(" | ")
    assert outputs[:2] == [turn.read_output, turn.write_output]
    assert "invalid arguments for scenario__lookup_stock" in outputs[2]
    # Only the calls of the second response ran in tool Steps: the bad read, then the write.
    assert (steps.count("CallTool"), steps.count("CallSingleAttemptTool")) == (1, 1)
    assert steps.count("RunModel") == 2


async def test_only_an_mcp_tool_source_and_its_listed_tools_are_wrapped(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", state_dir))
    listed = ListedTool("scenario__lookup_stock", "Look up stock.", {"type": "object"})

    check_mcp_tool_refusals(mcp_sdk_tool, source, listed)
    with pytest.raises(ConfigurationTypeError, match=r"McpToolSource, got list"):
        await mcp_sdk_tools([])  # type: ignore[arg-type]

    tool = mcp_sdk_tool(source, listed)
    # A schema without "properties" stays a JSON Schema (the SDK would read it as {name: type}).
    assert (tool.name, tool.description, tool.input_schema) == (
        "scenario__lookup_stock",
        "Look up stock.",
        {"type": "object", "properties": {}},
    )
    assert tool.annotations is None  # no effect listed: the session's policies decide
    for effect, hints in [
        (ToolEffect.READ, (True, None)),
        (ToolEffect.IDEMPOTENT_WRITE, (False, True)),
    ]:
        annotations = mcp_sdk_tool(
            source, ListedTool("t", "T", framework_effect=effect)
        ).annotations
        assert annotations is not None
        assert (annotations.read_only_hint, annotations.idempotent_hint) == hints
    # Outside the runner there is no key to send: the handler refuses before reaching a server.
    with pytest.raises(NoDeferredToolExecutionError):
        await tool.handler({"gate": ""})
    assert invocation_log(state_dir).count("lookup_stock") == 0

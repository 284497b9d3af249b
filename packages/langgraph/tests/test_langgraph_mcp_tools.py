"""``mcp_structured_tools``: the tools of a real stdio MCP server (the scenario kit's) as schema-only
``StructuredTool``s (a JSON Schema ``args_schema``) in a prebuilt agent's ``ToolNode``, each call in
its own tool Step with the session's idempotency key in ``_meta``; and the package without the mcp
extra."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from dex_agents import AgentSessionOptions, ConfigurationTypeError, ListedTool, MessageRole
from dex_agents.testing import wait_for_turn_end
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.testing.scenarios import (
    SCENARIO_MCP_READ_TOOL,
    SCENARIO_MCP_WRITE_TOOL,
    ScenarioAgentSpec,
    invocation_log,
    scenario_mcp_tool_source,
)
from dex_agents_langgraph import langgraph_session_flow, mcp_structured_tool, mcp_structured_tools
from langchain_core.messages import ToolCall
from langgraph.prebuilt import create_react_agent
from langgraph_test_support import (
    ScriptedToolChatModel,
    call_tools_then_answer,
    local_sessions,
    texts_of,
    wait_for_interrupt,
)


async def test_mcp_tools_run_in_their_own_tool_steps_with_the_sessions_key(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    state_dir = tmp_path / "state"
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", state_dir))
    model = ScriptedToolChatModel(
        respond=call_tools_then_answer(
            ToolCall(name=SCENARIO_MCP_READ_TOOL, args={"gate": ""}, id="read"),
            ToolCall(name=SCENARIO_MCP_WRITE_TOOL, args={}, id="write"),
            # The server's schema wants a string: its error answer is a failed result.
            ToolCall(name=SCENARIO_MCP_READ_TOOL, args={"gate": 7}, id="bad"),
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's deprecation notice
        graph = create_react_agent(model, await mcp_structured_tools(source))
    # The read's readOnlyHint makes it a read; the write has no hints, so it waits for approval.
    options = AgentSessionOptions(tool_policies=source.tool_policies())
    flow = langgraph_session_flow(graph, flow_type="Mcp", options=options)
    log = invocation_log(state_dir)
    async with local_sessions(dex_in_process_worker, [flow]) as dex:
        sessions = dex["Mcp"]
        await sessions.start_session("mcp-1", "check the stock and send a note")
        interrupt = await wait_for_interrupt(sessions, "mcp-1")
        assert interrupt.tool_name == SCENARIO_MCP_WRITE_TOOL
        assert log.count("send_note") == 0
        assert await sessions.resolve_interrupt("mcp-1", interrupt.interrupt_id, approved=True)
        snapshot = await wait_for_turn_end(sessions, "mcp-1")

    assert set(model.offered[0]) == {SCENARIO_MCP_READ_TOOL, SCENARIO_MCP_WRITE_TOOL}
    assert log.keys("lookup_stock") == [dex.dex.scoped("mcp-1") + "/turn-1/read"]
    assert log.keys("send_note") == [dex.dex.scoped("mcp-1") + "/turn-1/write"]
    read, write, bad = texts_of(snapshot, MessageRole.TOOL)
    assert (read, write) == ("lookup_stock ungated ok", "send_note ungated ok")
    assert "gate" in bad


async def test_only_an_mcp_tool_source_and_its_listed_tools_are_wrapped(tmp_path: Path) -> None:
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", tmp_path))
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    listed = ListedTool("files__read", "Read a file.", schema)

    with pytest.raises(ConfigurationTypeError, match=r"McpToolSource, got dict"):
        mcp_structured_tool({}, listed)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationTypeError, match=r"list_tools\(\) returned, got str"):
        mcp_structured_tool(source, "files__read")  # type: ignore[arg-type]
    tool = mcp_structured_tool(source, listed)
    assert (tool.name, tool.description, tool.args_schema) == (
        "files__read",
        "Read a file.",
        schema,
    )
    # Only the schema's arguments reach the model; the RunnableConfig is LangChain's to inject.
    assert tool.tool_call_schema["properties"] == schema["properties"]


def test_the_package_imports_without_the_mcp_extra_and_the_helper_names_it() -> None:
    code = (
        "import sys\nsys.modules['mcp'] = None\n"
        "import dex_agents_langgraph as adapter\n"
        "from dex_agents import ListedTool\n"
        "adapter.mcp_structured_tool(object(), ListedTool('t', 'T'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode != 0
    assert 'pip install "dex-agents[mcp]"' in result.stderr.splitlines()[-1]

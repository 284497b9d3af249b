"""``mcp_structured_tools``: the tools of a real stdio MCP server (the scenario kit's) as schema-only
``StructuredTool``s (a JSON Schema ``args_schema``) in a prebuilt agent's ``ToolNode``, each call in
its own tool Step with the session's idempotency key in ``_meta``; and the package without the mcp
extra."""

from __future__ import annotations

import warnings
from pathlib import Path

from dex_agents import ListedTool, MessageRole
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.testing.scenarios import (
    SCENARIO_MCP_READ_TOOL,
    SCENARIO_MCP_WRITE_TOOL,
    ScenarioAgentSpec,
    ScenarioMcpTurn,
    check_mcp_tool_refusals,
    mcp_wrapper_error_without_mcp,
    scenario_mcp_tool_source,
)
from dex_agents_langgraph import (
    ScriptedChatModel,
    langgraph_session_flow,
    mcp_structured_tool,
    mcp_structured_tools,
)
from langchain_core.messages import ToolCall
from langgraph.prebuilt import create_react_agent
from langgraph_test_support import call_tools_then_answer, texts_of


async def test_mcp_tools_run_in_their_own_tool_steps_with_the_sessions_key(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    turn = ScenarioMcpTurn(tmp_path / "state")
    calls = [
        ToolCall(name=c.tool, args=c.arguments, id=call_id) for call_id, c in turn.calls.items()
    ]
    model = ScriptedChatModel(respond=call_tools_then_answer(*calls))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's deprecation notice
        graph = create_react_agent(model, await mcp_structured_tools(turn.source))
    flow = langgraph_session_flow(graph, flow_type="Mcp", options=turn.session_options())
    async with dex_in_process_worker([flow]) as dex:
        snapshot = await turn.run(dex.sessions(flow), "mcp-1")

    assert set(model.offered_tools[0]) == {SCENARIO_MCP_READ_TOOL, SCENARIO_MCP_WRITE_TOOL}
    turn.check_keys(dex.scoped("mcp-1"))
    read, write, bad = texts_of(snapshot, MessageRole.TOOL)
    assert (read, write) == (turn.read_output, turn.write_output)
    assert "gate" in bad


async def test_only_an_mcp_tool_source_and_its_listed_tools_are_wrapped(tmp_path: Path) -> None:
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", tmp_path))
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    listed = ListedTool("files__read", "Read a file.", schema)

    check_mcp_tool_refusals(mcp_structured_tool, source, listed)
    tool = mcp_structured_tool(source, listed)
    assert (tool.name, tool.description, tool.args_schema) == (
        "files__read",
        "Read a file.",
        schema,
    )
    # Only the schema's arguments reach the model; the RunnableConfig is LangChain's to inject.
    assert tool.tool_call_schema["properties"] == schema["properties"]


def test_the_package_imports_without_the_mcp_extra_and_the_helper_names_it() -> None:
    error = mcp_wrapper_error_without_mcp("dex_agents_langgraph", "mcp_structured_tool")
    assert 'pip install "dex-agents[mcp]"' in error

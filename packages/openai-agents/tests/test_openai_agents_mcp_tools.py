"""``mcp_function_tools``: the tools of a real stdio MCP server (the scenario kit's) as schema-only
``FunctionTool``s, each call in its own tool Step with the session's idempotency key in ``_meta``;
and that importing the package does not import ``dex_agents.mcp``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from agents.items import TResponseOutputItem
from dex_agents import AgentSessionFlow, AgentSessionOptions, ConfigurationTypeError, ListedTool
from dex_agents.testing import wait_for_turn_end
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.testing.scenarios import (
    SCENARIO_MCP_READ_TOOL,
    SCENARIO_MCP_WRITE_TOOL,
    ScenarioAgentSpec,
    invocation_log,
    scenario_mcp_tool_source,
)
from dex_agents_openai_agents import OpenAIAgentsRunner, mcp_function_tool, mcp_function_tools
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    assistant_message,
    function_call,
    reference_agent,
)
from openai_agents_test_support import (
    assistant_texts,
    tool_messages,
    wait_for_interrupt,
)


async def test_mcp_tools_run_in_their_own_tool_steps_with_the_sessions_key(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    state_dir = tmp_path / "state"
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", state_dir))
    offered: list[tuple[str, ...]] = []

    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        offered.append(call.tool_names)
        if call.responses_since_user() == 0:
            return [
                function_call(SCENARIO_MCP_READ_TOOL, {"gate": ""}, call_id="read"),
                function_call(SCENARIO_MCP_WRITE_TOOL, {}, call_id="write"),
                # The server's schema wants a string: its error answer is a failed result.
                function_call(SCENARIO_MCP_READ_TOOL, {"gate": 7}, call_id="bad"),
            ]
        return [assistant_message(" | ".join(call.tool_outputs_since_user()))]

    agent = reference_agent(reply, await mcp_function_tools(source), name="ops")
    # The read's readOnlyHint makes it a read; the write has no hints, so it waits for approval.
    flow = AgentSessionFlow(
        OpenAIAgentsRunner(agent),
        flow_type="Mcp",
        options=AgentSessionOptions(tool_policies=source.tool_policies()),
    )
    log = invocation_log(state_dir)
    async with dex_in_process_worker([flow]) as dex:
        sessions = dex.sessions(flow)
        await sessions.start_session("mcp-1", "check the stock and send a note")
        interrupt = await wait_for_interrupt(dex, flow, "mcp-1")
        assert interrupt.tool_name == SCENARIO_MCP_WRITE_TOOL
        assert log.count("send_note") == 0
        assert await sessions.resolve_interrupt("mcp-1", interrupt.interrupt_id, approved=True)
        snapshot = await wait_for_turn_end(dex.sessions(flow), "mcp-1", 1)

    assert set(offered[0]) == {SCENARIO_MCP_READ_TOOL, SCENARIO_MCP_WRITE_TOOL}
    assert log.keys("lookup_stock") == [dex.scoped("mcp-1") + "/turn-1/read"]
    assert log.keys("send_note") == [dex.scoped("mcp-1") + "/turn-1/write"]
    (answer,) = assistant_texts(snapshot)
    assert answer.startswith("lookup_stock ungated ok | send_note ungated ok | ")
    failed = next(m for m in tool_messages(snapshot) if m.tool_call_id == "bad")
    assert "gate" in (failed.tool_output or "")


async def test_only_an_mcp_tool_source_and_its_listed_tools_are_wrapped(tmp_path: Path) -> None:
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", tmp_path))
    listed = ListedTool("files__read", "Read a file.", {"type": "object", "properties": {}})

    with pytest.raises(ConfigurationTypeError, match=r"McpToolSource, got dict"):
        mcp_function_tool({}, listed)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationTypeError, match=r"list_tools\(\) returned, got str"):
        mcp_function_tool(source, "files__read")  # type: ignore[arg-type]
    tool = mcp_function_tool(source, listed)
    assert (tool.name, tool.description, tool.params_json_schema) == (
        "files__read",
        "Read a file.",
        {"type": "object", "properties": {}},
    )
    assert tool.strict_json_schema is False


def test_importing_the_package_leaves_dex_agents_mcp_unimported() -> None:
    # The SDK itself requires the MCP SDK, so the mcp extra adds only dex_agents.mcp, which the
    # package imports only when a helper is called.
    code = "import sys, dex_agents_openai_agents\nprint('dex_agents.mcp' in sys.modules)\n"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"

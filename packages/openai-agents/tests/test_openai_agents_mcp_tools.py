"""``mcp_function_tools``: the tools of a real stdio MCP server (the scenario kit's) as schema-only
``FunctionTool``s, each call in its own tool Step with the session's idempotency key in ``_meta``;
and that importing the package does not import ``dex_agents.mcp``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from agents.items import TResponseOutputItem
from dex_agents import AgentSessionFlow, ListedTool
from dex_agents.testing import assistant_texts, tool_messages
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.testing.scenarios import (
    SCENARIO_MCP_READ_TOOL,
    SCENARIO_MCP_WRITE_TOOL,
    ScenarioAgentSpec,
    ScenarioMcpTurn,
    check_mcp_tool_refusals,
    scenario_mcp_tool_source,
)
from dex_agents_openai_agents import OpenAIAgentsRunner, mcp_function_tool, mcp_function_tools
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    assistant_message,
    function_call,
    reference_agent,
)


async def test_mcp_tools_run_in_their_own_tool_steps_with_the_sessions_key(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    turn = ScenarioMcpTurn(tmp_path / "state")
    offered: list[tuple[str, ...]] = []

    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        offered.append(call.tool_names)
        if call.responses_since_user() == 0:
            return [
                function_call(c.tool, c.arguments, call_id=call_id)
                for call_id, c in turn.calls.items()
            ]
        return [assistant_message(" | ".join(call.tool_outputs_since_user()))]

    agent = reference_agent(reply, await mcp_function_tools(turn.source), name="ops")
    flow = AgentSessionFlow(
        OpenAIAgentsRunner(agent), flow_type="Mcp", options=turn.session_options()
    )
    async with dex_in_process_worker([flow]) as dex:
        snapshot = await turn.run(dex.sessions(flow), "mcp-1")

    assert set(offered[0]) == {SCENARIO_MCP_READ_TOOL, SCENARIO_MCP_WRITE_TOOL}
    turn.check_keys(dex.scoped("mcp-1"))
    (answer,) = assistant_texts(snapshot)
    assert answer.startswith(f"{turn.read_output} | {turn.write_output} | ")
    failed = next(m for m in tool_messages(snapshot) if m.tool_call_id == "bad")
    assert "gate" in (failed.tool_output or "")


async def test_only_an_mcp_tool_source_and_its_listed_tools_are_wrapped(tmp_path: Path) -> None:
    source = scenario_mcp_tool_source(ScenarioAgentSpec("Mcp", tmp_path))
    listed = ListedTool("files__read", "Read a file.", {"type": "object", "properties": {}})

    check_mcp_tool_refusals(mcp_function_tool, source, listed)
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

"""An MCP tool of the scenario agent: a read and a write in their own tool Steps, and a Worker
SIGKILLed mid-call, which repeats the read with the same key and never the write.

Runs for every runner that declares ``ScenarioFeature.MCP_TOOLS``, on its ``ScenarioMcpAgent``;
the agent's MCP server is ``dex_agents.testing.scenarios.scenario_mcp_server()`` (a stdio server
the Worker starts).
"""

from __future__ import annotations

import pytest
from dex_agents import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.testing import assistant_texts, tool_messages
from dex_agents.testing.scenarios import (
    MODEL_INVOCATION,
    SCENARIO_MCP_READ_TOOL,
    SCENARIO_MCP_WRITE_TOOL,
    ScenarioCall,
    ScenarioCommand,
    ScenarioFeature,
)
from scenario_support.harness import Scenario
from scenario_support.runners import reads_run_in_model_step, runner_supports

READ, WRITE = "lookup_stock", "send_note"  # the MCP names, as the server logs them

# Only these scenarios build the MCP agent, so no other scenario waits for its server's listing.
pytestmark = pytest.mark.mcp_agent


@pytest.fixture(autouse=True)
def _requires_mcp_tools(runner_name: str) -> None:
    if not runner_supports(runner_name, ScenarioFeature.MCP_TOOLS):
        pytest.skip(
            f"runner {runner_name} does not declare {ScenarioFeature.MCP_TOOLS} in its "
            "ScenarioRunner features"
        )


async def test_an_mcp_read_and_write_each_run_once_in_their_own_tool_steps(
    scenario: Scenario,
) -> None:
    await scenario.start(
        "mcp-rw",
        mcp_agent=True,
        command=ScenarioCommand(
            calls=(ScenarioCall(SCENARIO_MCP_READ_TOOL), ScenarioCall(SCENARIO_MCP_WRITE_TOOL))
        ),
    )
    snapshot = await scenario.wait_for_turn_end("mcp-rw", mcp_agent=True)

    assert assistant_texts(snapshot) == [f"done: {READ} ungated ok; {WRITE} ungated ok"]
    assert scenario.log.count(READ) == scenario.log.count(WRITE) == 1
    (write_key,) = scenario.log.keys(WRITE)
    assert write_key.startswith(f"{scenario.prefix}mcp-rw/turn-1/")
    executed = await scenario.executed_step_types("mcp-rw")
    # A whole-turn harness too: it defers a read with the write of the same model response.
    assert executed.count("CallTool") == 1
    assert executed.count("CallSingleAttemptTool") == 1


@pytest.mark.dex_own_stack  # SIGKILLs its Worker mid-call
async def test_a_kill_during_an_mcp_read_sends_it_again_with_the_same_key(
    scenario: Scenario,
) -> None:
    await scenario.start(
        "mcp-read-crash",
        ScenarioCommand(calls=(ScenarioCall(SCENARIO_MCP_READ_TOOL, "mcp-read"),)),
        mcp_agent=True,
    )
    gate = scenario.gate("mcp-read")
    await gate.wait_until_reached()
    await scenario.replace_worker()

    await gate.wait_until_reached(count=2)
    gate.release()
    snapshot = await scenario.wait_for_turn_end("mcp-read-crash", mcp_agent=True)

    assert assistant_texts(snapshot) == [f"done: {READ} mcp-read ok"]
    first, second = scenario.log.keys(READ)
    assert first == second and first.startswith(f"{scenario.prefix}mcp-read-crash/")
    if reads_run_in_model_step(scenario.runner):
        # The read ran inside RunModel: its retry asked the model again, which answered the same
        # request with the same call (so the same key), then read again.
        assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-1", "call-2"]
        assert "CallTool" not in await scenario.executed_step_types("mcp-read-crash")
        return
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-2"]


@pytest.mark.dex_own_stack  # SIGKILLs its Worker mid-call
async def test_a_kill_during_an_mcp_write_records_outcome_unknown(scenario: Scenario) -> None:
    await scenario.start(
        "mcp-write-crash",
        ScenarioCommand(calls=(ScenarioCall(SCENARIO_MCP_WRITE_TOOL, "mcp-write"),)),
        mcp_agent=True,
    )
    gate = scenario.gate("mcp-write")
    await gate.wait_until_reached()
    await scenario.replace_worker()
    gate.release()  # a wrongly repeated call would pass the gate and count

    snapshot = await scenario.wait_for_turn_end("mcp-write-crash", mcp_agent=True)

    assert scenario.log.count(WRITE) == 1
    (tool_message,) = tool_messages(snapshot)
    assert OUTCOME_UNKNOWN_TOOL_RESULT in (tool_message.tool_output or "")
    executed = await scenario.executed_step_types("mcp-write-crash")
    assert executed.count("RecordToolOutcomeUnknown") == 1
    assert "CallSingleAttemptTool" not in executed

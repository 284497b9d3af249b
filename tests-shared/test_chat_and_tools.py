"""A plain chat turn, parallel tool calls, and a tool that raises ToolExecutionError."""

from __future__ import annotations

from dex_agents.testing import assistant_texts, tool_messages
from dex_agents.testing.scenarios import (
    BROKEN_TOOL_ERROR,
    MODEL_INVOCATION,
    ScenarioCall,
    ScenarioCommand,
    model_input_user_texts,
)
from scenario_support.harness import Scenario
from scenario_support.runners import reads_run_in_model_step


async def test_a_plain_chat_turn_makes_one_model_call(scenario: Scenario) -> None:
    await scenario.start("chat", "hello there")

    snapshot = await scenario.wait_for_turn_end("chat")

    assert assistant_texts(snapshot) == ["Echo: hello there"]
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1"]
    executed = await scenario.executed("chat")
    run_model = [entry for entry in executed if entry.step_type == "RunModel"]
    assert [entry.final_attempt for entry in run_model] == [1]
    assert executed[0].step_type == "StartAgentSession"


async def test_tool_calls_of_one_response_run_in_parallel(scenario: Scenario) -> None:
    first, second = scenario.gate("first"), scenario.gate("second")
    await scenario.start(
        "parallel",
        ScenarioCommand(calls=(ScenarioCall("lookup", "first"), ScenarioCall("lookup", "second"))),
    )

    # Both tools stand at their gates at once: neither waits for the other to finish.
    await first.wait_until_reached()
    await second.wait_until_reached()
    first.release()
    second.release()
    snapshot = await scenario.wait_for_turn_end("parallel")

    assert assistant_texts(snapshot) == ["done: lookup first ok; lookup second ok"]
    assert scenario.log.count("lookup") == 2
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-2"]
    executed = await scenario.executed_step_types("parallel")
    if reads_run_in_model_step(scenario.runner):
        # A whole-turn harness ran both reads in parallel inside its one RunModel.
        assert (executed.count("RunModel"), executed.count("CallTool")) == (1, 0)
        return
    assert executed.count("CallTool") == 2
    assert executed.count("ResumeTurn") == 1


async def test_a_tool_execution_error_is_a_result_the_model_sees(scenario: Scenario) -> None:
    await scenario.start("broken", ScenarioCommand(calls=(ScenarioCall("broken"),)))

    snapshot = await scenario.wait_for_turn_end("broken")

    assert scenario.log.count("broken") == 1  # a ToolExecutionError is not retried
    (tool_message,) = tool_messages(snapshot)
    assert BROKEN_TOOL_ERROR in (tool_message.tool_output or "")
    assert BROKEN_TOOL_ERROR in assistant_texts(snapshot)[-1]
    history = await scenario.executed("broken")
    read_steps = [entry.final_attempt for entry in history if entry.step_type == "CallTool"]
    assert read_steps == ([] if reads_run_in_model_step(scenario.runner) else [1])


async def test_a_message_sent_again_is_a_turn_of_its_own(scenario: Scenario) -> None:
    message = ScenarioCommand(calls=(ScenarioCall("lookup"),)).to_message()
    await scenario.start("again", message)
    await scenario.wait_for_turn_end("again")
    assert await scenario.sessions.send_user_message("again", message)

    snapshot = await scenario.wait_for_turn_end("again", turns=2)

    # Each turn calls the model twice (the call, the answer), and every call sees its own turn's
    # message last: a runner never takes the second turn for a copy of the first (Google ADK's
    # session service drops an event equal to one it holds).
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-2"] * 2
    assert model_input_user_texts(scenario.log) == [[message]] * 2 + [[message] * 2] * 2
    assert assistant_texts(snapshot) == ["done: lookup ungated ok"] * 2
    assert scenario.log.count("lookup") == 2

"""SIGKILL of the Worker at exact points: only the call that was running repeats, writes never twice."""

from __future__ import annotations

import pytest
from dex_agents import OUTCOME_UNKNOWN_TOOL_RESULT, AgentEventType
from dex_agents.testing import assistant_texts, tool_messages
from dex_agents.testing.scenarios import (
    KILL_WORKER_GATE,
    MODEL_INVOCATION,
    ScenarioCall,
    ScenarioCommand,
    model_gate_name,
)
from scenario_support.harness import Scenario
from scenario_support.runners import reads_run_in_model_step

# Every test here SIGKILLs its Worker (or the Worker kills itself), so each has its own.
pytestmark = pytest.mark.dex_own_stack


async def _kill_at_gate_and_replace(
    scenario: Scenario, gate_name: str, *, tool_step_of: str | None = None
) -> None:
    gate = scenario.gate(gate_name)
    await gate.wait_until_reached()
    if tool_step_of is not None:
        # The tool Step's first output (its tool_call_started event) is written before the tool
        # runs, but a SIGKILL can still catch it in the Worker's send buffer; the engine then
        # takes the attempt for never started and hands it out again under the same number. Once
        # the event is readable, the engine holds that output and the kill fails attempt 1.
        await scenario.first_event(tool_step_of, AgentEventType.TOOL_CALL_STARTED)
    await scenario.replace_worker()


async def test_a_kill_during_a_model_call_repeats_only_that_call(scenario: Scenario) -> None:
    await scenario.start(
        "model-crash",
        ScenarioCommand(calls=(ScenarioCall("lookup"),), gate_model_call=2),
    )
    gate = scenario.gate(model_gate_name(2))
    await _kill_at_gate_and_replace(scenario, model_gate_name(2))

    await gate.wait_until_reached(count=2)
    gate.release()
    snapshot = await scenario.wait_for_turn_end("model-crash")

    assert assistant_texts(snapshot) == ["done: lookup ungated ok"]
    run_model = [e for e in await scenario.executed("model-crash") if e.step_type == "RunModel"]
    if reads_run_in_model_step(scenario.runner):
        # The killed RunModel held the whole turn so far: its retry made the first call and the
        # read again (a read inside the harness runs at least once), then the killed call.
        assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-2", "call-1", "call-2"]
        assert scenario.log.count("lookup") == 2
        assert len({entry.step_execution_id for entry in run_model}) == 1
        return
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-2", "call-2"]
    assert scenario.log.count("lookup") == 1
    # Two model call Steps completed: the killed call was retried inside its own Step
    # execution (its attempt number depends on whether Dex saw it start), the first untouched.
    assert len({entry.step_execution_id for entry in run_model}) == 2
    assert run_model[0].final_attempt == 1


async def test_a_kill_during_a_read_runs_the_read_again(scenario: Scenario) -> None:
    await scenario.start("read-crash", ScenarioCommand(calls=(ScenarioCall("lookup", "read"),)))
    in_tool_step = not reads_run_in_model_step(scenario.runner)
    await _kill_at_gate_and_replace(
        scenario, "read", tool_step_of="read-crash" if in_tool_step else None
    )

    await scenario.gate("read").wait_until_reached(count=2)
    scenario.gate("read").release()
    snapshot = await scenario.wait_for_turn_end("read-crash")

    assert scenario.log.count("lookup") == 2
    assert assistant_texts(snapshot) == ["done: lookup read ok"]
    calls = [e for e in await scenario.executed("read-crash") if e.step_type == "CallTool"]
    if reads_run_in_model_step(scenario.runner):
        # The read ran inside RunModel: its retry asked the model again, then read again.
        assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-1", "call-2"]
        assert calls == []
        return
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-2"]
    assert [entry.final_attempt for entry in calls] == [2]


async def test_a_kill_during_an_idempotent_write_repeats_it_with_the_same_key(
    scenario: Scenario,
) -> None:
    await scenario.start("upsert-crash", ScenarioCommand(calls=(ScenarioCall("upsert", "up"),)))
    await _kill_at_gate_and_replace(scenario, "up", tool_step_of="upsert-crash")

    await scenario.gate("up").wait_until_reached(count=2)
    scenario.gate("up").release()
    snapshot = await scenario.wait_for_turn_end("upsert-crash")

    first_key, second_key = scenario.log.keys("upsert")
    assert first_key == second_key
    assert first_key.startswith(f"{scenario.prefix}upsert-crash/")
    assert assistant_texts(snapshot) == ["done: upsert up ok"]
    calls = [e for e in await scenario.executed("upsert-crash") if e.step_type == "CallTool"]
    assert [entry.final_attempt for entry in calls] == [2]


async def test_a_kill_during_a_non_idempotent_write_records_outcome_unknown(
    scenario: Scenario,
) -> None:
    await scenario.start("send-crash", ScenarioCommand(calls=(ScenarioCall("send_once", "send"),)))
    await _kill_at_gate_and_replace(scenario, "send")
    scenario.gate("send").release()  # a wrongly repeated call would pass the gate and count

    snapshot = await scenario.wait_for_turn_end("send-crash")

    assert scenario.log.count("send_once") == 1
    (tool_message,) = tool_messages(snapshot)
    assert OUTCOME_UNKNOWN_TOOL_RESULT in (tool_message.tool_output or "")
    executed = await scenario.executed_step_types("send-crash")
    assert "CallSingleAttemptTool" not in executed
    assert executed.count("RecordToolOutcomeUnknown") == 1
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-2"]


async def test_a_worker_killed_the_instant_a_non_idempotent_write_ran_never_runs_it_twice(
    scenario: Scenario,
) -> None:
    # No gate holds the Worker here: it dies right after the write, possibly before the tool
    # Step's heartbeat or any other frame left the process. Dex must not hand the attempt out
    # again as "never started".
    await scenario.start(
        "send-instant-crash",
        ScenarioCommand(calls=(ScenarioCall("send_once", KILL_WORKER_GATE),)),
    )
    await scenario.replace_dead_worker()

    snapshot = await scenario.wait_for_turn_end("send-instant-crash")

    assert scenario.log.count("send_once") == 1
    (tool_message,) = tool_messages(snapshot)
    assert OUTCOME_UNKNOWN_TOOL_RESULT in (tool_message.tool_output or "")
    executed = await scenario.executed_step_types("send-instant-crash")
    assert executed.count("RecordToolOutcomeUnknown") == 1
    assert "CallSingleAttemptTool" not in executed


async def test_an_approval_still_works_after_the_worker_was_killed(scenario: Scenario) -> None:
    await scenario.start("approval-crash", ScenarioCommand(calls=(ScenarioCall("refund"),)))
    interrupt = await scenario.wait_for_pending_interrupt("approval-crash")

    await scenario.replace_worker()  # SIGKILL while the session waits for a person
    assert await scenario.sessions.resolve_interrupt(
        "approval-crash", interrupt.interrupt_id, approved=True
    )
    snapshot = await scenario.wait_for_turn_end("approval-crash")

    assert scenario.log.count("refund") == 1
    assert assistant_texts(snapshot) == ["done: refund ungated ok"]
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-2"]
    executed = await scenario.executed_step_types("approval-crash")
    assert executed.count("AwaitToolApproval") == 1
    assert executed.count("CallSingleAttemptTool") == 1

"""Approvals: approve, reject, and a deadline that passes."""

from __future__ import annotations

from dex_agents.testing import assistant_texts, tool_messages
from dex_agents.testing.scenarios import ScenarioCall, ScenarioCommand
from scenario_support.harness import Scenario

REFUND = ScenarioCommand(calls=(ScenarioCall("refund"),))


async def test_an_approved_write_runs_once_after_the_approval(scenario: Scenario) -> None:
    await scenario.start("approve", REFUND)
    interrupt = await scenario.wait_for_pending_interrupt("approve")
    assert interrupt.tool_name == "refund"
    assert scenario.log.count("refund") == 0  # nothing runs before the approval

    assert await scenario.sessions.resolve_interrupt(
        "approve", interrupt.interrupt_id, approved=True
    )
    snapshot = await scenario.wait_for_turn_end("approve")

    assert scenario.log.count("refund") == 1
    assert assistant_texts(snapshot) == ["done: refund ungated ok"]
    assert not await scenario.sessions.resolve_interrupt(
        "approve", interrupt.interrupt_id, approved=True
    )
    executed = await scenario.executed_step_types("approve")
    assert executed.count("AwaitToolApproval") == 1
    assert executed.count("CallSingleAttemptTool") == 1


async def test_a_rejected_write_never_runs(scenario: Scenario) -> None:
    await scenario.start("reject", REFUND)
    interrupt = await scenario.wait_for_pending_interrupt("reject")

    assert await scenario.sessions.resolve_interrupt(
        "reject", interrupt.interrupt_id, approved=False, rejection_message="not this one"
    )
    snapshot = await scenario.wait_for_turn_end("reject")

    assert scenario.log.count("refund") == 0
    (tool_message,) = tool_messages(snapshot)
    assert "not this one" in (tool_message.tool_output or "")
    assert "CallSingleAttemptTool" not in await scenario.executed_step_types("reject")


async def test_an_approval_whose_deadline_passes_is_rejected(scenario: Scenario) -> None:
    await scenario.start("deadline", REFUND, deadline_agent=True)
    # From the event, not the snapshot: on a loaded machine the 2 s deadline can pass before a
    # snapshot read sees the approval pending.
    raised = await scenario.raised_interrupt("deadline", deadline_agent=True)
    assert raised["kind"] == "approval"
    assert raised["deadline"] is not None

    snapshot = await scenario.wait_for_turn_end("deadline", deadline_agent=True)

    assert scenario.log.count("refund") == 0
    assert len(tool_messages(snapshot)) == 1
    assert snapshot.pending_interrupts == ()
    assert not await scenario.deadline_sessions.resolve_interrupt(
        "deadline", raised["interrupt_id"], approved=True
    )
    assert scenario.log.count("refund") == 0

"""Steering and turn cancellation under every runner: a steer ends the turn at a safe boundary and
the next turn starts with the steered messages; ``cancel_turn`` stops the turn with no new one."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    STEERED_TOOL_RESULT,
    TURN_CANCELLED_NOTE,
    TURN_CANCELLED_TOOL_RESULT,
    AgentSnapshot,
    AgentToolCallStatus,
    CancellationReason,
    MessageRole,
)
from dex_agents.testing import assistant_texts, wait_for_agent_snapshot
from dex_agents.testing.scenarios import (
    REPORT_TOOL,
    ScenarioCall,
    ScenarioCommand,
    model_gate_name,
    model_input_user_texts,
)
from scenario_support.harness import Scenario
from scenario_support.runners import runner_supports

LOOKUP_AND_REFUND = ScenarioCommand(
    calls=(ScenarioCall("lookup", "lookup"), ScenarioCall("refund"))
)
GATED_MODEL_CALL = ScenarioCommand(gate_model_call=1)


def _user_texts(snapshot: AgentSnapshot) -> list[str]:
    return [m.text or "" for m in snapshot.messages if m.role is MessageRole.USER]


def _all_text(snapshot: AgentSnapshot) -> str:
    return "\n".join((m.text or "") + (m.tool_output or "") for m in snapshot.messages)


def _refund_settled(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    records = {record.tool_name: record for record in snapshot.tool_calls}
    refund = records.get("refund")
    return snapshot if refund is not None and refund.is_final else None


async def test_steer_while_a_tool_runs(scenario: Scenario) -> None:
    await scenario.start("steer", LOOKUP_AND_REFUND)
    await scenario.wait_for_pending_interrupt("steer")
    await scenario.gate("lookup").wait_until_reached()
    sessions = scenario.sessions

    assert await sessions.steer_user_message("steer", "use the staging account")
    assert await sessions.steer_user_message("steer", "and order 8")
    # The waiting approval is rejected at once; the running lookup goes on.
    snapshot = await wait_for_agent_snapshot(sessions, "steer", _refund_settled)
    records = {record.tool_name: record for record in snapshot.tool_calls}
    assert records["refund"].status is AgentToolCallStatus.REJECTED
    assert records["refund"].cancellation_reason is CancellationReason.STEERED
    assert records["lookup"].status is AgentToolCallStatus.APPROVED
    assert snapshot.pending_interrupts == ()
    assert [m.text for m in snapshot.steered_messages] == ["use the staging account", "and order 8"]

    scenario.gate("lookup").release()
    snapshot = await scenario.wait_for_turn_end("steer", turns=2)
    assert scenario.log.count("lookup") == 1
    assert scenario.log.count("refund") == 0
    # The steered turn made no second model call; the next turn answered the steered messages.
    assert scenario.log.count("model") == 2
    assert _user_texts(snapshot)[-2:] == ["use the staging account", "and order 8"]
    assert assistant_texts(snapshot) == ["Echo: and order 8"]
    assert "lookup lookup ok" in _all_text(snapshot)
    assert STEERED_TOOL_RESULT in _all_text(snapshot)
    assert snapshot.steered_messages == ()
    executed = await scenario.executed_step_types("steer")
    assert executed.count("ApplyTurnControl") == 1
    assert "CallSingleAttemptTool" not in executed


async def test_steer_a_queued_message_and_delete_another(scenario: Scenario) -> None:
    await scenario.start("queue", GATED_MODEL_CALL)
    gate = scenario.gate(model_gate_name(1))
    await gate.wait_until_reached()
    sessions = scenario.sessions
    assert await sessions.send_user_message("queue", "kept in the queue")
    assert await sessions.send_user_message("queue", "steered by id")
    assert await sessions.send_user_message("queue", "deleted")
    kept, steered, deleted = (await sessions.get_agent_snapshot("queue")).queued_messages

    assert await sessions.steer_user_message("queue", message_id=steered.message_id)
    assert not await sessions.steer_user_message("queue", message_id=steered.message_id)
    assert await sessions.delete_queued_message("queue", deleted.message_id)
    assert not await sessions.delete_queued_message("queue", deleted.message_id)
    assert not await sessions.steer_user_message("queue", "   ")
    assert not await sessions.steer_user_message("queue", "both", message_id=kept.message_id)
    snapshot = await sessions.get_agent_snapshot("queue")
    assert [m.text for m in snapshot.queued_messages] == ["kept in the queue"]
    assert [m.text for m in snapshot.steered_messages] == ["steered by id"]

    gate.release()
    # Steering never interrupts a running model call: its answer completes the turn first.
    snapshot = await scenario.wait_for_turn_end("queue", turns=3)
    assert assistant_texts(snapshot) == [
        "done: ",
        "Echo: steered by id",
        "Echo: kept in the queue",
    ]
    assert "deleted" not in _user_texts(snapshot)


async def test_cancel_during_a_model_call_drops_its_answer(scenario: Scenario) -> None:
    await scenario.start("cancel-model", GATED_MODEL_CALL)
    gate = scenario.gate(model_gate_name(1))
    await gate.wait_until_reached()
    sessions = scenario.sessions
    snapshot = await sessions.get_agent_snapshot("cancel-model")
    assert snapshot.state is not None and snapshot.state.accepts_turn_control
    assert not await sessions.cancel_turn("cancel-model", "turn-9")
    assert await sessions.cancel_turn("cancel-model", "turn-1")

    snapshot = await scenario.wait_for_turn_end("cancel-model")
    gate.release()
    # A cancel naming the turn after it ended answers False: no turn is active (the RPC table).
    assert not await sessions.cancel_turn("cancel-model", "turn-1")
    assert await sessions.send_user_message("cancel-model", "after the cancel")
    snapshot = await scenario.wait_for_turn_end("cancel-model", turns=2)
    # The cancelled call's answer never reaches the session; the stopped turn's note does.
    assert assistant_texts(snapshot) == ["Echo: after the cancel"]
    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    stopped = [m for m in snapshot.messages if m.turn_id == "turn-1"]
    assert [(m.role, m.text) for m in stopped][-1] == (MessageRole.USER, TURN_CANCELLED_NOTE)
    # The next model call sees the note between the unanswered message and the new one.
    seen = model_input_user_texts(scenario.log)[-1]
    assert seen[-2:] == [TURN_CANCELLED_NOTE, "after the cancel"], seen
    assert len(seen) == 3 and seen[0] != TURN_CANCELLED_NOTE, seen
    assert "FinishTurnCancellation" in await scenario.executed_step_types("cancel-model")


async def test_cancel_during_an_approval_wait(scenario: Scenario) -> None:
    await scenario.start("cancel-approval", ScenarioCommand(calls=(ScenarioCall("refund"),)))
    interrupt = await scenario.wait_for_pending_interrupt("cancel-approval")
    sessions = scenario.sessions

    assert await sessions.cancel_turn("cancel-approval", "turn-1")
    assert not await sessions.resolve_interrupt(
        "cancel-approval", interrupt.interrupt_id, approved=True
    )
    snapshot = await scenario.wait_for_turn_end("cancel-approval")
    assert scenario.log.count("refund") == 0
    assert scenario.log.count("model") == 1
    assert snapshot.pending_interrupts == ()
    assert assistant_texts(snapshot) == []
    assert TURN_CANCELLED_TOOL_RESULT in _all_text(snapshot)


async def test_cancel_while_a_tool_runs(scenario: Scenario) -> None:
    await scenario.start("cancel-tool", LOOKUP_AND_REFUND)
    await scenario.wait_for_pending_interrupt("cancel-tool")
    await scenario.gate("lookup").wait_until_reached()
    sessions = scenario.sessions

    assert await sessions.cancel_turn("cancel-tool", "turn-1")
    snapshot = await wait_for_agent_snapshot(sessions, "cancel-tool", _refund_settled)
    records = {record.tool_name: record for record in snapshot.tool_calls}
    assert records["refund"].cancellation_reason is CancellationReason.TURN_CANCELLED
    # The turn is still active (the lookup runs): a second call answers True, changes nothing.
    assert await sessions.cancel_turn("cancel-tool", "turn-1")

    scenario.gate("lookup").release()
    snapshot = await scenario.wait_for_turn_end("cancel-tool")
    assert scenario.log.count("lookup") == 1
    assert scenario.log.count("model") == 1
    assert assistant_texts(snapshot) == []
    text = _all_text(snapshot)
    assert "lookup lookup ok" in text and TURN_CANCELLED_TOOL_RESULT in text


def _record_of(
    tool: str, status: AgentToolCallStatus
) -> Callable[[AgentSnapshot], AgentSnapshot | None]:
    def probe(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        records = [r for r in snapshot.tool_calls if r.tool_name == tool]
        return snapshot if records and records[0].status is status else None

    return probe


async def test_cancel_during_a_durable_wait(scenario: Scenario) -> None:
    wait = ScenarioCall(
        "durable_wait", arguments={"duration_seconds": 3600, "reason": "the build runs"}
    )
    await scenario.start("cancel-wait", ScenarioCommand(calls=(wait,)))
    sessions = scenario.sessions
    await wait_for_agent_snapshot(
        sessions, "cancel-wait", _record_of("durable_wait", AgentToolCallStatus.WAITING_FOR_TIMER)
    )
    assert await sessions.cancel_turn("cancel-wait", "turn-1")
    snapshot = await scenario.wait_for_turn_end("cancel-wait")
    assert scenario.log.count("model") == 1
    assert TURN_CANCELLED_TOOL_RESULT in _all_text(snapshot)


async def test_cancel_during_a_tool_task_abandons_it(scenario: Scenario) -> None:
    if not runner_supports(scenario.runner, "tool_tasks"):
        pytest.skip(
            f"runner {scenario.runner} does not declare tool_tasks in its ScenarioRunner features"
        )
    await scenario.start("cancel-task", ScenarioCommand(calls=(ScenarioCall(REPORT_TOOL),)))
    sessions = scenario.sessions
    await wait_for_agent_snapshot(
        sessions, "cancel-task", _record_of(REPORT_TOOL, AgentToolCallStatus.WAITING_FOR_TASK)
    )
    assert await sessions.cancel_turn("cancel-task", "turn-1")
    snapshot = await scenario.wait_for_turn_end("cancel-task")
    assert scenario.log.count("model") == 1
    assert scenario.log.count(REPORT_TOOL) == 1
    assert snapshot.pending_interrupts == ()
    assert "CancelToolTask" in await scenario.executed_step_types("cancel-task")
    # The abandoned task's call is outcome_unknown: the model is told it may have run.
    assert OUTCOME_UNKNOWN_TOOL_RESULT in _all_text(snapshot)

"""The outcome check of single-attempt tools, under every runner: one Worker SIGKILL while five
payments wait at their gates, then each call's check answers differently.

``pay`` and ``pay_again`` declare the scenario outcome check (``scenario_tool_policies``; Stepwise
through ``function_tool(outcome_check=...)``): it looks the call's idempotency key up in the
scenario ledger, so *applied* and *not applied* are what really happened (a gate named
``applied...`` writes the ledger before it stops, any other after), while gates named
``unknown...`` and ``raises...`` make the check answer *unknown* or raise. One turn covers every
answer, so the runner needs one Worker kill.
"""

from __future__ import annotations

import json

import pytest
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    TOOL_CALL_NOT_APPLIED_ERROR_PREFIX,
    AgentToolCallStatus,
    ToolOutcomeCheckStatus,
)
from dex_agents.testing import assistant_texts
from dex_agents.testing.scenarios import (
    LEDGER_INVOCATION,
    MODEL_INVOCATION,
    SCENARIO_CHECK_FAILURE,
    SCENARIO_CHECK_UNKNOWN,
    SCENARIO_NOT_APPLIED,
    ScenarioCall,
    ScenarioCommand,
    model_gate_name,
    outcome_check_invocation,
)
from scenario_support.harness import Scenario

# The test SIGKILLs its Worker, so it has its own.
pytestmark = pytest.mark.dex_own_stack

#: gate -> tool: the five calls of the turn, in the model's order.
CALLS = {
    "applied": "pay",
    "lost": "pay",
    "lost-again": "pay_again",
    "unknown": "pay",
    "raises": "pay",
}


async def _tool_call_finished(scenario: Scenario, session: str) -> dict[str, dict[str, object]]:
    """The turn's ``tool_call_finished`` payloads, by tool call ID."""
    finished: dict[str, dict[str, object]] = {}
    async for message in scenario.sessions.stream_events(session):
        event = message.value
        if event.type == "tool_call_finished":
            payload = event.payload_json()
            finished[str(payload["tool_call_id"])] = payload
        if event.type in {"turn_completed", "turn_failed"}:
            return finished
    return finished


async def test_a_lost_write_is_settled_by_its_outcome_check(scenario: Scenario) -> None:
    session = "outcome-check"
    await scenario.start(
        session,
        ScenarioCommand(
            calls=tuple(ScenarioCall(tool, gate) for gate, tool in CALLS.items()),
            gate_model_call=2,  # holds the turn open while the test reads the records
        ),
    )
    gates = [scenario.gate(gate) for gate in CALLS]
    for gate in gates:
        await gate.wait_until_reached()
    await scenario.replace_worker()  # every payment's one attempt is lost mid-write
    for gate in gates:
        gate.release()  # a wrongly repeated call would pass its gate and be counted

    model_gate = scenario.gate(model_gate_name(2))
    await model_gate.wait_until_reached()
    snapshot = await scenario.sessions.get_agent_snapshot(session)
    model_gate.release()
    done = await scenario.wait_for_turn_end(session)
    finished = await _tool_call_finished(scenario, session)

    records = {_gate_of(record.arguments): record for record in snapshot.tool_calls}
    keys = {gate: _key_of(scenario, records[gate].tool_call_id) for gate in CALLS}
    log = scenario.log
    # How many times each write ran: never twice, except the opted-in one its check found not
    # applied, which ran once more with the same key.
    assert sorted(log.keys("pay")) == sorted(
        keys[g] for g in ("applied", "lost", "unknown", "raises")
    )
    assert log.keys("pay_again") == [keys["lost-again"]] * 2
    assert sorted(log.keys(LEDGER_INVOCATION)) == sorted([keys["applied"], keys["lost-again"]])
    # Each check ran once in its own Step, the raising one 3 times (retried like a read).
    assert sorted(log.keys(outcome_check_invocation("pay"))) == sorted(
        [keys["applied"], keys["lost"], keys["unknown"], *[keys["raises"]] * 3]
    )
    assert log.keys(outcome_check_invocation("pay_again")) == [keys["lost-again"]]

    # The recorded status and the check's answer, on the snapshot's records and on the event.
    expected = {
        "applied": (AgentToolCallStatus.SUCCEEDED, ToolOutcomeCheckStatus.APPLIED, 0),
        "lost": (AgentToolCallStatus.FAILED, ToolOutcomeCheckStatus.NOT_APPLIED, 0),
        "lost-again": (AgentToolCallStatus.SUCCEEDED, ToolOutcomeCheckStatus.NOT_APPLIED, 1),
        "unknown": (AgentToolCallStatus.OUTCOME_UNKNOWN, ToolOutcomeCheckStatus.UNKNOWN, 0),
        "raises": (AgentToolCallStatus.OUTCOME_UNKNOWN, ToolOutcomeCheckStatus.CHECK_FAILED, 0),
    }
    assert {
        gate: (record.status, record.outcome_check, record.run_again_count)
        for gate, record in records.items()
    } == expected
    assert {
        gate: (
            finished[records[gate].tool_call_id]["status"],
            finished[records[gate].tool_call_id]["outcome_check"],
        )
        for gate in CALLS
    } == {gate: (status.value, check.value) for gate, (status, check, _) in expected.items()}
    # The turn's records are gone once it ends; each stored result keeps its call's answer.
    stored_checks = {
        message.tool_call_id: message.outcome_check
        for message in done.messages
        if message.tool_output is not None
    }
    assert {gate: stored_checks.get(records[gate].tool_call_id) for gate in CALLS} == {
        gate: check for gate, (_, check, _) in expected.items()
    }
    not_applied_error = records["lost"].error or ""
    assert not_applied_error == f"{TOOL_CALL_NOT_APPLIED_ERROR_PREFIX}: {SCENARIO_NOT_APPLIED}"
    assert SCENARIO_CHECK_UNKNOWN in (records["unknown"].error or "")
    assert SCENARIO_CHECK_FAILURE in (records["raises"].error or "")

    # What the model's next call saw: the confirmed result as if the call had returned.
    (text,) = assistant_texts(done)
    assert text.startswith("done: pay applied ok; ")
    assert TOOL_CALL_NOT_APPLIED_ERROR_PREFIX in text
    assert "pay_again lost-again ok" in text
    assert text.count(OUTCOME_UNKNOWN_TOOL_RESULT) == 2
    assert log.keys(MODEL_INVOCATION) == ["call-1", "call-2"]
    executed = await scenario.executed_step_types(session)
    assert executed.count("CheckToolOutcome") == 4  # the raising check's Step failed
    assert executed.count("CallSingleAttemptTool") == 1  # the run again


def _gate_of(arguments: str) -> str:
    return str(json.loads(arguments)["gate"])


def _key_of(scenario: Scenario, tool_call_id: str) -> str:
    return f"{scenario.prefix}outcome-check/turn-1/{tool_call_id}"

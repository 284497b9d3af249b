"""A turn whose model fails after its tool calls ran leaves the turn-failure note."""

from __future__ import annotations

from dex_agents import TURN_FAILURE_NOTE_FOOTER, TURN_FAILURE_NOTE_HEADER
from dex_agents.testing import assistant_texts, tool_messages
from dex_agents.testing.scenarios import (
    MODEL_FAILURE,
    MODEL_INVOCATION,
    ScenarioCall,
    ScenarioCommand,
)
from scenario_support.harness import Scenario


async def test_a_turn_that_fails_after_tool_calls_leaves_a_note(scenario: Scenario) -> None:
    await scenario.start(
        "failing",
        ScenarioCommand(calls=(ScenarioCall("upsert"),), fail_after_tools=True),
    )

    snapshot = await scenario.wait_for_turn_end("failing")

    assert snapshot.state is not None
    assert MODEL_FAILURE in (snapshot.state.last_turn_error or "")
    assert scenario.log.count("upsert") == 1  # the write is not repeated by the failure
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1", "call-2", "call-2", "call-2"]
    assert len(tool_messages(snapshot)) == 1
    note = snapshot.messages[-1]
    assert note.sequence > tool_messages(snapshot)[0].sequence
    assert (note.text or "").startswith(TURN_FAILURE_NOTE_HEADER)
    assert "upsert" in (note.text or "")
    assert TURN_FAILURE_NOTE_FOOTER in (note.text or "")
    executed = await scenario.executed_step_types("failing")
    assert executed.count("RecordTurnFailure") == 1

    # The session goes on: the next turn sees the note and answers.
    assert await scenario.sessions.send_user_message("failing", "still there?")
    snapshot = await scenario.wait_for_turn_end("failing", turns=2)
    assert assistant_texts(snapshot)[-1] == "Echo: still there?"
    assert snapshot.state is not None and snapshot.state.last_turn_error is None

"""Session settings and spend limits under every runner: settings change at the next turn, never
mid-turn, even across a Worker crash; a refused model call ends the turn with a clear error."""

from __future__ import annotations

import pytest
from dex_agents import (
    MODEL_SPEND_LIMIT_ERROR_PREFIX,
)
from dex_agents.testing import assistant_texts
from dex_agents.testing.scenarios import (
    SPEND_REFUSAL_REASON,
    ScenarioCall,
    ScenarioCommand,
    refuse_model_calls,
)
from scenario_support.harness import Scenario

GATED_LOOKUP = ScenarioCommand(calls=(ScenarioCall("lookup", "lookup"),))


@pytest.mark.dex_own_stack  # SIGKILLs its Worker
async def test_settings_change_at_the_next_turn_even_after_a_worker_crash(
    scenario: Scenario,
) -> None:
    sessions = scenario.sessions
    await sessions.start_session(
        "settings", GATED_LOOKUP.to_message(), session_settings={"model": "m-1"}
    )
    lookup = scenario.gate("lookup")
    await lookup.wait_until_reached()
    assert await sessions.update_session_settings("settings", {"model": "m-2"})
    # The snapshot shows the settings the next turn starts with.
    assert (await sessions.get_agent_snapshot("settings")).session_settings == {"model": "m-2"}

    await scenario.replace_worker()
    await lookup.wait_until_reached(count=2)
    lookup.release()
    snapshot = await scenario.wait_for_turn_end("settings")
    # The running turn kept the settings it started with, across the crash.
    assert assistant_texts(snapshot) == ["done: lookup lookup ok [model=m-1]"]

    assert await sessions.send_user_message("settings", "next turn")
    snapshot = await scenario.wait_for_turn_end("settings", turns=2)
    assert assistant_texts(snapshot)[-1] == "Echo: next turn [model=m-2]"
    assert await sessions.update_session_settings("settings", {})
    assert await sessions.send_user_message("settings", "cleared")
    snapshot = await scenario.wait_for_turn_end("settings", turns=3)
    assert assistant_texts(snapshot)[-1] == "Echo: cleared"


async def test_a_refused_model_call_ends_the_turn(scenario: Scenario) -> None:
    sessions = scenario.sessions
    await scenario.start("spend", "hello")
    snapshot = await scenario.wait_for_turn_end("spend")
    assert assistant_texts(snapshot) == ["Echo: hello"]
    assert scenario.log.count("model") == 1

    refuse_model_calls(scenario.state_dir)
    assert await sessions.send_user_message("spend", "over budget")
    snapshot = await scenario.wait_for_turn_end("spend", turns=2)
    assert snapshot.state is not None
    assert (
        snapshot.state.last_turn_error
        == f"{MODEL_SPEND_LIMIT_ERROR_PREFIX}: {SPEND_REFUSAL_REASON}"
    )
    # The refused call never reached the model and was not retried.
    assert scenario.log.count("model") == 1
    assert assistant_texts(snapshot) == ["Echo: hello"]

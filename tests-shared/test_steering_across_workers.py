"""Steering a queued message by ID, with a new Worker process for every session (only with
``DEX_AGENTS_LONG_TESTS=1``).

Whether dex-python-sdk 1.23.0 hands a Worker the queued messages with the steered messages'
values depends on the Worker process (its protobuf hash seed): about one process in a hundred did,
and ``get_agent_snapshot`` then listed the steered text as queued. ``dex_agents`` repairs that
(``packages/core/tests/test_sdk_task_hydration.py`` shows the fault in every run); this loop
checks the repair the way the fault was seen, across many Worker processes.
"""

from __future__ import annotations

import os

import pytest
from dex_agents.testing.scenarios import ScenarioCommand, model_gate_name
from scenario_support.harness import Scenario

LONG_TESTS = os.environ.get("DEX_AGENTS_LONG_TESTS") == "1"
WORKER_PROCESSES = 30
"""The fault showed in 1.4% of 800 fresh processes checked alone and in 3 sessions of one
300-second loop like this one. So 30 processes catch a regression under one runner in a third to
two thirds of runs, and a run under all six runners in nine runs out of ten or more; the
deterministic test in the core catches it every time."""


@pytest.mark.skipif(not LONG_TESTS, reason="set DEX_AGENTS_LONG_TESTS=1 to start 30 Workers")
@pytest.mark.dex_own_stack  # starts and kills 30 Workers
async def test_the_snapshot_lists_queued_and_steered_messages_in_every_worker(
    scenario: Scenario,
) -> None:
    sessions = scenario.sessions
    gate = scenario.gate(model_gate_name(1))
    crossed = []
    for index in range(WORKER_PROCESSES):
        session_id = f"queue-{index}"
        if index:
            # The gate stays open once released: close it for this session's first model call.
            (scenario.state_dir / "gates" / f"{model_gate_name(1)}.released").unlink()
            await scenario.replace_worker()
        await scenario.start(session_id, ScenarioCommand(gate_model_call=1))
        await gate.wait_until_reached(count=index + 1)
        for text in ("kept in the queue", "steered by id"):
            assert await sessions.send_user_message(session_id, text)
        _kept, steered = (await sessions.get_agent_snapshot(session_id)).queued_messages
        assert await sessions.steer_user_message(session_id, message_id=steered.message_id)
        snapshot = await sessions.get_agent_snapshot(session_id)
        listed = (
            [m.text for m in snapshot.queued_messages],
            [m.text for m in snapshot.steered_messages],
        )
        if listed != (["kept in the queue"], ["steered by id"]):
            crossed.append((index, listed))
        gate.release()
        await scenario.wait_for_turn_end(session_id, turns=3)
    assert crossed == []

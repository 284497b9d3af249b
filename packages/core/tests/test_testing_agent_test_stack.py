from __future__ import annotations

from pathlib import Path

import pytest
from core_testing_support.gated_flow import (
    GATE_NAME,
    STATE_DIR_ENV,
    GatedFlow,
    GatedStep,
    invocation_log,
)
from dex_agents import ConfigurationError
from dex_agents.testing import EXECUTE_COMPLETED_EVENT, AgentTestStack, FileGate

TESTS_DIR = Path(__file__).resolve().parent


async def test_a_step_killed_with_its_worker_runs_again_on_a_replacement(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    flow = GatedFlow()
    async with AgentTestStack(
        tmp_path / "stack",
        [flow],
        "core_testing_support.gated_flow",
        worker_cwd=TESTS_DIR,
        worker_env={STATE_DIR_ENV: str(state_dir)},
    ) as stack:
        worker = await stack.start_worker()
        await stack.client.start_flow(flow, "flow-1", "input-1")
        gate = FileGate(state_dir, GATE_NAME)
        await gate.wait_until_reached()

        worker.kill()
        assert not worker.is_running
        replacement = await stack.start_worker()
        await gate.wait_until_reached(count=2)
        gate.release()
        await stack.client.wait_for_flow("flow-1")

        assert invocation_log(state_dir).keys("gated-step") == [
            "input-1 attempt 1",
            "input-1 attempt 2",
        ]
        # Each Worker child froze its start-up objects out of the collector before serving.
        frozen = [int(count) for count in invocation_log(state_dir).keys("gc-frozen")]
        assert len(frozen) == 2 and min(frozen) > 10_000
        history = await stack.read_step_history("flow-1")
        completed = [entry for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]
        assert [(entry.step_type, entry.final_attempt) for entry in completed] == [
            (GatedStep().get_step_type(), 2)
        ]

        assert await replacement.stop() == 0  # SIGTERM drains and exits cleanly
        assert not replacement.is_running


async def test_sessions_refuses_a_flow_the_stack_does_not_serve(tmp_path: Path) -> None:
    async with AgentTestStack(tmp_path, [GatedFlow()], "core_testing_support.gated_flow") as stack:
        with pytest.raises(ConfigurationError, match="not one of this AgentTestStack's Flows"):
            stack.sessions(GatedFlow())

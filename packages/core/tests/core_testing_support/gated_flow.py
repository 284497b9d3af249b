"""A one-Step Flow whose Step stops at a FileGate: enough to exercise AgentTestStack alone.

Each attempt also records the Worker process's ``gc.get_freeze_count()`` under ``gc-frozen``.
"""

from __future__ import annotations

import gc
import os
from datetime import timedelta
from pathlib import Path

from dex import (
    AsyncContext,
    Flow,
    RetryPolicy,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    StepOptions,
    graceful_complete,
)
from dex_agents.testing import FileGate, InvocationLog, run_agent_worker

STATE_DIR_ENV = "GATED_FLOW_STATE_DIR"
GATE_NAME = "gated-step"


def invocation_log(state_dir: Path) -> InvocationLog:
    return InvocationLog(state_dir / "invocations.jsonl")


class GatedStep(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                backoff_coefficient=1.0,
                maximum_attempts=3,
            ),
            execute_durability=StepDurability.SYNC,
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        state_dir = Path(os.environ[STATE_DIR_ENV])
        # Output before the side effect: Dex then counts a lost Worker as a used attempt
        # (a stream that breaks before any output means the task never ran).
        await context.heartbeat()
        invocation_log(state_dir).record("gated-step", key=f"{input} attempt {context.attempt}")
        invocation_log(state_dir).record("gc-frozen", key=str(gc.get_freeze_count()))
        gate = FileGate(state_dir, GATE_NAME)
        gate.mark_reached()
        await gate.wait_for_release()
        return graceful_complete(f"done {input}")


class GatedFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(GatedStep())


if __name__ == "__main__":
    run_agent_worker([GatedFlow()])

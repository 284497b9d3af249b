"""The session Flow of the settings crash test, served by Worker children gated by FileGates.

Run as a module, it serves the Flow until killed. The state directory comes from
``TURN_CONTROL_TEST_STATE_DIR``, so the test and every Worker child share the gates.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_session_test_support import ScriptedRunner, assistant, request_tools, tool_call
from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import FileGate, run_agent_worker

STATE_DIR_ENV = "TURN_CONTROL_TEST_STATE_DIR"
SETTINGS_CRASH_FLOW_TYPE = "SettingsCrashTestAgent"


def _state_dir() -> Path:
    return Path(os.environ[STATE_DIR_ENV])


def _script(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(turn, tool_call(turn, f"wait-{turn.turn_id}", "wait", {}))
    model = turn.session_settings.get("model")
    return TurnCompleted((assistant(f"model={model}"),), AgentUsage())


async def _wait(call: DeferredToolExecution) -> ToolExecutionResult:
    if call.tool_call.turn_id == "turn-1":
        gate = FileGate(_state_dir(), "wait")
        gate.mark_reached()
        await gate.wait_for_release()
    return ToolExecutionResult("waited")


def build_settings_crash_flow() -> AgentSessionFlow:
    """The Flow both the test's Client and the Worker children register."""
    options = AgentSessionOptions(tool_policies={"wait": ToolPolicy(ToolEffect.READ)})
    return AgentSessionFlow(
        ScriptedRunner(_script, {"wait": _wait}),
        flow_type=SETTINGS_CRASH_FLOW_TYPE,
        options=options,
    )


if __name__ == "__main__":
    run_agent_worker([build_settings_crash_flow()])

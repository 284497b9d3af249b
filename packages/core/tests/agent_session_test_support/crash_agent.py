"""The session Flow that the crash tests run in Worker child processes, gated by FileGates.

The state directory comes from ``AGENT_SESSION_TEST_STATE_DIR``, so the test and every Worker
child share the gates and the invocation log.
"""

from __future__ import annotations

import os
from pathlib import Path

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.testing import FileGate, InvocationLog

from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    request_tools,
    tool_call,
)

STATE_DIR_ENV = "AGENT_SESSION_TEST_STATE_DIR"
CRASH_FLOW_TYPE = "CrashTestAgent"


def _state_dir() -> Path:
    return Path(os.environ[STATE_DIR_ENV])


def _script(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(
            turn,
            tool_call(turn, "refund-1", "refund", {"order": 7}),
            tool_call(turn, "lookup-1", "lookup", {"order": 7}),
        )
    return final_answer_with_results(turn)


async def _gated(call: DeferredToolExecution) -> ToolExecutionResult:
    name = call.tool_call.tool_name
    InvocationLog(_state_dir() / "tools.log").record(name, key=call.idempotency_key)
    gate = FileGate(_state_dir(), name)
    gate.mark_reached()
    await gate.wait_for_release()
    return ToolExecutionResult(f"{name} done")


def build_crash_flow() -> AgentSessionFlow:
    """The Flow both the test's Client and the Worker children register."""
    options = AgentSessionOptions(
        tool_policies={
            "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
            "lookup": ToolPolicy(ToolEffect.READ),
        }
    )
    runner = ScriptedRunner(_script, {"refund": _gated, "lookup": _gated})
    return AgentSessionFlow(runner, flow_type=CRASH_FLOW_TYPE, options=options)

"""Heartbeats of tool Steps: a retried attempt reads the checkpoint the failed attempt saved."""

from __future__ import annotations

import asyncio

import dex_agents._session.heartbeat as heartbeat_module
import pytest
from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex_agents import (
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.testing import turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory


def _script(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(turn, tool_call(turn, "job-call", "report", {}))
    return final_answer_with_results(turn)


async def test_a_retried_tool_attempt_reads_the_saved_checkpoint(
    dex_in_process_worker: InProcessWorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Background heartbeats every 50 ms must carry the checkpoint rather than clear it.
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_INTERVAL_SECONDS", 0.05)
    seen: list[tuple[int, str | None]] = []

    async def report(call: DeferredToolExecution) -> ToolExecutionResult:
        seen.append((call.attempt, call.heartbeat_checkpoint))
        if call.attempt == 1:
            await call.save_heartbeat_checkpoint("job-42")
            await asyncio.sleep(0.2)
            raise RuntimeError("lost the connection while the job ran")
        return ToolExecutionResult(f"resumed {call.heartbeat_checkpoint}")

    options = AgentSessionOptions(tool_policies={"report": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)})
    async with running_session_stack(
        dex_in_process_worker, ScriptedRunner(_script, {"report": report}), options
    ) as stack:
        await stack.sessions.start_session("session-1", "make the report")
        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "session-1", turn_ended(1), timeout=60
        )
        assert seen == [(1, None), (2, "job-42")]
        assert snapshot.messages[-1].text == "report=resumed job-42"

"""The compacting session the CompactContext crash test runs in Worker child processes.

Every model call and summary call is written to an InvocationLog, and the summary call stops at
the ``summary`` FileGate, so the test kills the Worker inside ``CompactContext``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from agent_session_test_support import assistant
from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    CompactionPolicy,
    ContextSummaryRequest,
    RunModelLimit,
    TurnCompleted,
)
from dex_agents.testing import FileGate, InvocationLog

from compaction_test_support import CompactingScriptedRunner

STATE_DIR_ENV = "COMPACTION_TEST_STATE_DIR"
CRASH_FLOW_TYPE = "CompactionCrashAgent"
SUMMARY_GATE = "summary"


def _state_dir() -> Path:
    return Path(os.environ[STATE_DIR_ENV])


def invocation_log(state_dir: Path) -> InvocationLog:
    """The log of every real model and summary call, shared by the test and the Workers."""
    return InvocationLog(state_dir / "calls.log")


def _reply(turn: AgentTurnContext) -> AgentTurnOutcome:
    invocation_log(_state_dir()).record("model", key=f"{turn.turn_id}/{turn.attempt}")
    return TurnCompleted((assistant(f"reply to {turn.messages[-1].text}"),), AgentUsage())


async def _stop_at_gate(request: ContextSummaryRequest) -> None:
    invocation_log(_state_dir()).record("summary", key=f"{request.turn_id}/{request.attempt}")
    gate = FileGate(_state_dir(), SUMMARY_GATE)
    gate.mark_reached()
    await gate.wait_for_release()


def build_compaction_crash_flow() -> AgentSessionFlow:
    """The Flow both the test's Client and the Worker children register."""
    options = AgentSessionOptions(
        compaction=CompactionPolicy(context_window_tokens=200),
        message_window_size=4,
        message_chunk_size=2,
        retained_message_limit=6,
        run_model_limit=RunModelLimit(heartbeat_timeout=timedelta(seconds=5)),
    )
    runner = CompactingScriptedRunner(_reply, before_summary=_stop_at_gate)
    return AgentSessionFlow(runner, flow_type=CRASH_FLOW_TYPE, options=options)

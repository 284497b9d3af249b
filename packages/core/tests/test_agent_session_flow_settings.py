"""Start settings through the real engine: the turn's copy reaches the runner; bad ones fail."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from agent_session_test_support import (
    ScriptedRunner,
    assistant,
    idle_after_turns,
    running_session_stack,
)
from dex import FlowStatus
from dex_agents import (
    AgentSessionStartInput,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    TurnCompleted,
)
from dex_agents.testing import wait_for_agent_snapshot


def _reply_with_model(turn: AgentTurnContext) -> AgentTurnOutcome:
    return TurnCompleted((assistant(f"model={turn.session_settings.get('model')}"),), AgentUsage())


async def test_the_turn_sees_the_start_settings(tmp_path: Path) -> None:
    async with running_session_stack(tmp_path, ScriptedRunner(_reply_with_model)) as stack:
        await stack.sessions.start_session("session-1", "hi", session_settings={"model": "m-1"})
        snapshot = await wait_for_agent_snapshot(stack.sessions, "session-1", idle_after_turns(1))
        assert snapshot.messages[-1].text == "model=m-1"


async def test_oversized_start_settings_fail_the_session_at_once(tmp_path: Path) -> None:
    runner = ScriptedRunner(_reply_with_model)
    async with running_session_stack(tmp_path, runner) as stack:
        huge = {"prompt": "x" * 20_000}
        with pytest.raises(ValueError, match="above the limit"):
            await stack.sessions.start_session("session-1", "hi", session_settings=huge)
        # Past the client's check, the session's own check fails the session without a retry.
        await stack.client.start_flow(
            stack.flow, "session-2", AgentSessionStartInput("hi", session_settings=huge)
        )
        result = await stack.client.wait_for_flow("session-2", timedelta(seconds=30))
        assert result.status is FlowStatus.FAILED
        assert "invalid start session settings" in str(result.error_message)
        assert runner.model_calls == []

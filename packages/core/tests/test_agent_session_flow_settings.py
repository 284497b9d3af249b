"""Start settings through the real engine: the turn's copy reaches the runner; bad ones fail."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from agent_session_test_support import (
    ScriptedRunner,
    assistant,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex import FlowStatus
from dex_agents import (
    MAX_SESSION_SETTINGS_BYTES,
    AgentSessionOptions,
    AgentSessionStartInput,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    ConfigurationError,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    UpdateSessionSettingsRequest,
)
from dex_agents.testing import AgentTestStack, FileGate, turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from turn_control_crash_agent import STATE_DIR_ENV, build_settings_crash_flow
from turn_control_test_support import Gate

TESTS_DIR = Path(__file__).resolve().parent


def _reply_with_model(turn: AgentTurnContext) -> AgentTurnOutcome:
    return TurnCompleted((assistant(f"model={turn.session_settings.get('model')}"),), AgentUsage())


async def test_the_turn_sees_the_start_settings(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_session_stack(
        dex_in_process_worker, ScriptedRunner(_reply_with_model)
    ) as stack:
        await stack.sessions.start_session("session-1", "hi", session_settings={"model": "m-1"})
        snapshot = await wait_for_agent_snapshot(stack.sessions, "session-1", turn_ended(1))
        assert snapshot.messages[-1].text == "model=m-1"


async def test_oversized_start_settings_fail_the_session_at_once(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_reply_with_model)
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        huge = {"prompt": "x" * 20_000}
        with pytest.raises(ConfigurationError, match="above the limit"):
            await stack.sessions.start_session("session-1", "hi", session_settings=huge)
        # Past the client's check, the session's own check fails the session without a retry.
        await stack.client.start_flow(
            stack.flow,
            stack.dex.scoped("session-2"),
            AgentSessionStartInput("hi", session_settings=huge),
        )
        result = await stack.client.wait_for_flow(
            stack.dex.scoped("session-2"), timedelta(seconds=30)
        )
        assert result.status is FlowStatus.FAILED
        assert "invalid start session settings" in str(result.error_message)
        assert runner.model_calls == []


def _reply_after_a_tool(gate: Gate) -> ScriptedRunner:
    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            return request_tools(turn, tool_call(turn, f"wait-{turn.turn_id}", "wait", {}))
        return _reply_with_model(turn)

    async def wait(call: DeferredToolExecution) -> ToolExecutionResult:
        if call.tool_call.turn_id == "turn-1":
            await gate.pass_through()
        return ToolExecutionResult("waited")

    return ScriptedRunner(script, {"wait": wait})


_WAIT_IS_READ = AgentSessionOptions(tool_policies={"wait": ToolPolicy(ToolEffect.READ)})


async def test_an_update_takes_effect_at_the_next_turn_not_mid_turn(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    gate = Gate()
    runner = _reply_after_a_tool(gate)
    async with running_session_stack(dex_in_process_worker, runner, _WAIT_IS_READ) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "hi", session_settings={"model": "m-1", "note": "ü"})
        await gate.wait_reached()
        assert await sessions.update_session_settings("s", {"model": "m-2"})
        snapshot = await sessions.get_agent_snapshot("s")
        # The snapshot shows the next turn's settings, not the running turn's.
        assert snapshot.session_settings == {"model": "m-2"}
        gate.opened.set()
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == "model=m-1"
        assert runner.model_calls[0].session_settings == {"model": "m-1", "note": "ü"}
        assert await sessions.send_user_message("s", "again")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        assert snapshot.messages[-1].text == "model=m-2"
        # Nothing is merged, and {} clears the settings.
        assert await sessions.update_session_settings("s", {})
        assert (await sessions.get_agent_snapshot("s")).session_settings == {}
        assert await sessions.send_user_message("s", "third")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(3))
        assert snapshot.messages[-1].text == "model=None"


async def test_update_refuses_bad_settings(dex_in_process_worker: InProcessWorkerFactory) -> None:
    runner = ScriptedRunner(_reply_with_model)
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "", session_settings={"model": "m-1"})
        await wait_for_agent_snapshot(sessions, "s", turn_ended(0))
        huge = {"prompt": "x" * 20_000}
        with pytest.raises(ConfigurationError, match="above the limit"):
            await sessions.update_session_settings("s", huge)
        # Past the client's check, the session's own check returns False and changes nothing.
        flow = stack.flow
        assert not await stack.client.invoke_rpc(
            flow.update_session_settings, stack.dex.scoped("s"), UpdateSessionSettingsRequest(huge)
        )
        # Within the 1 KiB tolerance the session accepts what the client would refuse.
        near = {"prompt": "x" * (MAX_SESSION_SETTINGS_BYTES + 100)}
        assert await stack.client.invoke_rpc(
            flow.update_session_settings, stack.dex.scoped("s"), UpdateSessionSettingsRequest(near)
        )
        assert (await sessions.get_agent_snapshot("s")).session_settings == near


async def test_settings_of_a_running_turn_survive_a_worker_crash(tmp_path: Path) -> None:
    flow = build_settings_crash_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        "turn_control_crash_agent",
        worker_cwd=TESTS_DIR,
        worker_env={STATE_DIR_ENV: str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        worker = await stack.start_worker()
        await sessions.start_session("s", "hi", session_settings={"model": "m-1"})
        gate = FileGate(tmp_path, "wait")
        await gate.wait_until_reached()
        assert await sessions.update_session_settings("s", {"model": "m-2"})
        worker.kill()
        await stack.start_worker()
        await gate.wait_until_reached(count=2)
        gate.release()
        snapshot = await wait_for_agent_snapshot(
            sessions, "s", turn_ended(1), "the turn to finish", timeout=120
        )
        assert snapshot.messages[-1].text == "model=m-1"
        assert await sessions.send_user_message("s", "again")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        assert snapshot.messages[-1].text == "model=m-2"

"""Failed turns through the real engine: RunModel retries, the failure note, runner defects."""

from __future__ import annotations

from agent_session_test_support import (
    ScriptedRunner,
    assistant,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex_agents import (
    TURN_FAILURE_NOTE_HEADER,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolCall,
    DeferredToolExecution,
    MessageRole,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    read_step_history,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

OPTIONS = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})


async def _lookup(call: DeferredToolExecution) -> ToolExecutionResult:
    return ToolExecutionResult("order 7 is open")


async def test_a_model_call_that_keeps_failing_fails_the_turn_with_a_note(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.turn_id == "turn-1" and not turn.is_resuming:
            return request_tools(turn, tool_call(turn, "c1", "lookup", {"order": 7}))
        if turn.turn_id == "turn-1":
            raise RuntimeError("provider overloaded")
        return TurnCompleted((assistant(f"saw {len(turn.messages)} messages"),), AgentUsage())

    runner = ScriptedRunner(script, {"lookup": _lookup})
    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        await stack.sessions.start_session("session-1", "check order 7")
        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "session-1", turn_ended(1), "the turn to fail", timeout=90
        )
        assert snapshot.state is not None
        assert "provider overloaded" in (snapshot.state.last_turn_error or "")
        resumed_attempts = [t.attempt for t in runner.model_calls if t.is_resuming]
        assert resumed_attempts == [1, 2, 3]
        note = snapshot.messages[-1]
        assert note.role is MessageRole.USER
        assert note.text == (
            f"{TURN_FAILURE_NOTE_HEADER}\n"
            '- lookup {"order": 7} -> succeeded: order 7 is open\n'
            "Do not repeat these tool calls unless the user asks again."
        )
        assert snapshot.tool_calls == ()

        # The next turn starts from clean records and clears the error when it completes.
        assert await stack.sessions.send_user_message("session-1", "and now?")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "session-1", turn_ended(2))
        assert snapshot.state is not None and snapshot.state.last_turn_error is None
        assert runner.model_calls[-1].tool_calls == {}
        assert runner.model_calls[-1].framework_run_state is None

        history = await read_step_history(stack.server_address, stack.dex.scoped("session-1"))
        executed = [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
        assert executed.count("RecordTurnFailure") == 1


async def test_an_invalid_tool_call_id_fails_the_turn_without_retry(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        call = DeferredToolCall("bad/id", "lookup", "{}", turn.resolve_tool_policy("lookup"))
        return ToolCallsRequested("state", (call,), AgentUsage())

    runner = ScriptedRunner(script, {"lookup": _lookup})
    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        await stack.sessions.start_session("session-1", "go")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "session-1", turn_ended(1))
        assert snapshot.state is not None
        assert "must not contain '/'" in (snapshot.state.last_turn_error or "")
        assert len(runner.model_calls) == 1
        assert runner.tool_calls == []
        assert [m.text for m in snapshot.messages] == ["go"]

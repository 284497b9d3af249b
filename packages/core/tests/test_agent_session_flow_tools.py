"""Tool turns through the real engine: parallel calls, failures, and their failure routes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex_agents import (
    AgentSessionOptions,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    read_step_history,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

READ_POLICIES = AgentSessionOptions(
    tool_policies={
        "lookup": ToolPolicy(ToolEffect.READ),
        "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
        "tag": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
    }
)


def _call_each_tool_once(*names: str) -> Callable[[AgentTurnContext], AgentTurnOutcome]:
    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            return request_tools(
                turn,
                *(tool_call(turn, f"call-{i}", name, {"n": i}) for i, name in enumerate(names)),
            )
        return final_answer_with_results(turn)

    return script


async def test_two_tool_calls_run_in_parallel_steps_then_resume(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    both_started = asyncio.Barrier(2)

    async def lookup(call: DeferredToolExecution) -> ToolExecutionResult:
        # Each call waits for the other to start, so they can only finish when run in parallel.
        await asyncio.wait_for(both_started.wait(), timeout=20)
        return ToolExecutionResult(
            f"found {call.tool_call.tool_call_id} key={call.idempotency_key}"
        )

    runner = ScriptedRunner(_call_each_tool_once("lookup", "lookup"), {"lookup": lookup})
    async with running_session_stack(dex_in_process_worker, runner, READ_POLICIES) as stack:
        await stack.sessions.start_session("session-1", "look up two things")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "session-1", turn_ended(1))
        answer = snapshot.messages[-1].text
        assert answer == (
            f"lookup=found call-0 key={stack.dex.scoped('session-1')}/turn-1/call-0; "
            f"lookup=found call-1 key={stack.dex.scoped('session-1')}/turn-1/call-1"
        )
        assert snapshot.tool_calls == ()  # records are deleted when the turn ends
        assert snapshot.usage.model_calls == 2
        assert len(runner.tool_calls) == 2
        resumed = runner.model_calls[1]
        assert resumed.framework_run_state == '["call-0", "call-1"]'
        assert [r.status for r in resumed.tool_calls.values()] == [
            AgentToolCallStatus.SUCCEEDED
        ] * 2

        history = await read_step_history(stack.server_address, stack.dex.scoped("session-1"))
        executed = [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
        assert executed.count("CallTool") == 2
        assert executed.count("RunModel") == 2
        assert executed.count("ResumeTurn") == 1
        assert executed[-1] == "RunModel"


async def test_tool_errors_follow_the_effect(dex_in_process_worker: InProcessWorkerFactory) -> None:
    attempts: dict[str, int] = {}

    async def lookup(call: DeferredToolExecution) -> ToolExecutionResult:
        raise ToolExecutionError("order 7 does not exist")

    async def crashing(call: DeferredToolExecution) -> ToolExecutionResult:
        name = call.tool_call.tool_name
        attempts[name] = attempts.get(name, 0) + 1
        assert call.attempt == attempts[name]
        raise RuntimeError(f"{name} connection reset")

    runner = ScriptedRunner(
        _call_each_tool_once("lookup", "tag", "refund"),
        {"lookup": lookup, "tag": crashing, "refund": crashing},
    )
    async with running_session_stack(dex_in_process_worker, runner, READ_POLICIES) as stack:
        await stack.sessions.start_session("session-1", "try the tools")
        await wait_for_agent_snapshot(
            stack.sessions, "session-1", turn_ended(1), "the turn to finish", timeout=90
        )
        records = {r.tool_name: r for r in runner.model_calls[1].tool_calls.values()}
        assert records["lookup"].status is AgentToolCallStatus.FAILED
        assert records["lookup"].error == "order 7 does not exist"
        # An idempotent write retries 3 times, then records outcome_unknown: it may have run.
        assert attempts["tag"] == 3
        assert records["tag"].status is AgentToolCallStatus.OUTCOME_UNKNOWN
        assert "tag connection reset" in (records["tag"].error or "")
        # A single-attempt write never runs twice.
        assert attempts["refund"] == 1
        assert records["refund"].status is AgentToolCallStatus.OUTCOME_UNKNOWN

        history = await read_step_history(stack.server_address, stack.dex.scoped("session-1"))
        executed = [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
        assert executed.count("RecordToolFailure") == 1
        assert executed.count("RecordToolOutcomeUnknown") == 1

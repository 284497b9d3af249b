"""Spend limits through the real engine: asked before each model call, told what each used; a
refusal ends the turn with a clear ``last_turn_error`` and no retry."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_session_test_support import (
    ScriptedRunner,
    assistant,
    final_answer_with_results,
    read_events_until,
    request_tools,
    running_session_stack,
    tool_call,
    tool_returning,
)
from compaction_test_support import CompactingScriptedRunner
from dex_agents import (
    MODEL_SPEND_LIMIT_ERROR_PREFIX,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    CompactionPolicy,
    ModelCallIdentity,
    ModelCallKind,
    ModelSpendRefusal,
    ModelSpendReport,
    ToolEffect,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory


@dataclass
class _TokenBudget:
    """Allows model calls until the counted tokens reach ``limit``; counts a report once per key."""

    limit: int
    checked: list[ModelCallIdentity] = field(default_factory=list)
    used: dict[str, int] = field(default_factory=dict)

    async def check_model_call(self, call: ModelCallIdentity) -> ModelSpendRefusal | None:
        self.checked.append(call)
        if sum(self.used.values()) >= self.limit:
            return ModelSpendRefusal("the test budget is used up")
        return None

    async def record_model_usage(self, report: ModelSpendReport) -> None:
        self.used[report.call.usage_key] = report.usage.total_tokens


def _lookup_then_answer(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(turn, tool_call(turn, "lookup-1", "lookup", {}))
    return final_answer_with_results(turn)


async def test_a_refused_model_call_ends_the_turn_without_retry(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_lookup_then_answer, {"lookup": tool_returning("found")})
    # The first model call uses 12 tokens (see request_tools), so the second is refused.
    budget = _TokenBudget(limit=10)
    options = AgentSessionOptions(
        tool_policies={"lookup": ToolPolicy(ToolEffect.READ)}, model_spend_limit=budget
    )
    async with running_session_stack(
        dex_in_process_worker, runner, options, flow_type="SpendAgent"
    ) as stack:
        await stack.sessions.start_session("s", "look it up", session_settings={"model": "m"})
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == (
            f"{MODEL_SPEND_LIMIT_ERROR_PREFIX}: the test budget is used up"
        )
        # One model call ran; the refused one never reached the runner and was not retried.
        assert len(runner.model_calls) == 1
        assert len(budget.checked) == 2
        first, second = budget.checked
        assert (first.flow_type, first.flow_id, first.turn_id, first.kind) == (
            "SpendAgent",
            stack.dex.scoped("s"),
            "turn-1",
            ModelCallKind.TURN,
        )
        assert first.session_settings == {"model": "m"}
        assert second.step_execution_id != first.step_execution_id
        assert budget.used == {first.usage_key: 12}
        # The lookup that ran is noted, so the next turn does not repeat it.
        assert "found" in (snapshot.messages[-1].text or "")
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_failed")
        assert events[-1].payload_json() == {"error": snapshot.state.last_turn_error}


async def test_without_a_limit_the_session_makes_no_checks(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_lookup_then_answer, {"lookup": tool_returning("found")})
    options = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await stack.sessions.start_session("s", "look it up")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.state is not None and snapshot.state.last_turn_error is None
        assert len(runner.model_calls) == 2


@dataclass
class _RefuseSummaries:
    """Allows turn model calls and refuses every context summary call."""

    checked: list[ModelCallIdentity] = field(default_factory=list)

    async def check_model_call(self, call: ModelCallIdentity) -> ModelSpendRefusal | None:
        self.checked.append(call)
        if call.kind is ModelCallKind.CONTEXT_SUMMARY:
            return ModelSpendRefusal("no budget for summaries")
        return None

    async def record_model_usage(self, report: ModelSpendReport) -> None:
        return None


async def test_a_refused_summary_call_ends_the_turn(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    def reply(turn: AgentTurnContext) -> AgentTurnOutcome:
        text = f"a long reply to {turn.messages[-1].text} " * 10
        return TurnCompleted((assistant(text),), AgentUsage())

    runner = CompactingScriptedRunner(reply)
    limit = _RefuseSummaries()
    options = AgentSessionOptions(
        compaction=CompactionPolicy(context_window_tokens=200), model_spend_limit=limit
    )
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "message 1")
        turn = 1
        while not any(call.kind is ModelCallKind.CONTEXT_SUMMARY for call in limit.checked):
            snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(turn))
            assert turn < 30, "the session never compacted"
            turn += 1
            assert await sessions.send_user_message("s", f"message {turn}")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(turn))
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == (
            f"{MODEL_SPEND_LIMIT_ERROR_PREFIX}: no budget for summaries"
        )
        assert runner.summary_requests == []

"""Plan mode through the real engine: draft, feedback, execute_plan, and the executing turn."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from agent_session_test_support import (
    ScriptedRunner,
    assistant,
    final_answer_with_results,
    read_events_until,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex_agents import (
    AgentSessionOptions,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    BuiltInTool,
    DeferredToolExecution,
    InteractionMode,
    PlanStatus,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents._plans import (
    plan_execution_message,
)
from dex_agents.testing import turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

OPTIONS = AgentSessionOptions(
    built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}),
    plan_mode_enabled=True,
    tool_policies={"lookup": ToolPolicy(ToolEffect.READ)},
)


@dataclass
class PlanRunner(ScriptedRunner):
    """A scripted runner that honors plan mode."""

    supports_plan_mode = True


def _script(turn: AgentTurnContext) -> AgentTurnOutcome:
    if turn.is_resuming:
        return final_answer_with_results(turn)
    last = turn.messages[-1].text or ""
    if turn.interaction_mode is InteractionMode.EXECUTING:
        tasks = [{"content": todo.content, "status": "completed"} for todo in turn.plan.todos]  # type: ignore[union-attr]
        return request_tools(turn, tool_call(turn, "done", "write_todos", {"todos": tasks}))
    if turn.interaction_mode is InteractionMode.PLANNING:
        previous = [todo.content for todo in turn.plan.todos] if turn.plan else []
        tasks = [{"content": text, "status": "pending"} for text in [*previous, last]]
        return request_tools(
            turn,
            tool_call(turn, "plan", "write_todos", {"todos": tasks}),
            tool_call(turn, "peek", "lookup", {}),
        )
    return TurnCompleted((assistant(f"chat: {last}"),), AgentUsage())


async def _lookup(call: DeferredToolExecution) -> ToolExecutionResult:
    return ToolExecutionResult("looked")


async def test_plan_mode_draft_feedback_execute(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = PlanRunner(_script, {"lookup": _lookup})
    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        sessions = stack.sessions
        await sessions.start_session("s")
        assert not await sessions.execute_plan("s", 1)  # no plan yet
        assert await sessions.send_user_message("s", "Back up", plan_mode=True)
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert snapshot.state is not None
        assert snapshot.state.interaction_mode is InteractionMode.PLANNING
        assert snapshot.plan is not None
        assert (snapshot.plan.revision, snapshot.plan.status) == (1, PlanStatus.DRAFT)
        assert snapshot.messages[-1].text == (
            'write_todos={"status":"updated","revision":1,"task_count":1}; '
            "lookup=The tool call was not run: a planning turn can only call write_todos."
        )
        assert runner.tool_calls == []  # the planning turn never ran lookup
        (_, rejected) = runner.model_calls[1].tool_calls.values()
        assert rejected.status is AgentToolCallStatus.REJECTED

        # Feedback on a draft is an ordinary message that revises it.
        assert await sessions.send_user_message("s", "Migrate")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        assert snapshot.plan is not None
        assert (snapshot.plan.revision, snapshot.plan.status) == (2, PlanStatus.DRAFT)
        assert [todo.content for todo in snapshot.plan.todos] == ["Back up", "Migrate"]

        assert not await sessions.execute_plan("s", 1)  # a replaced revision
        # Two approvals at once: one is recorded, the other finds it pending (or the turn running).
        accepted = await asyncio.gather(
            sessions.execute_plan("s", 2), sessions.execute_plan("s", 2)
        )
        assert sorted(accepted) == [False, True]
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(3))
        assert snapshot.state is not None
        assert snapshot.state.interaction_mode is InteractionMode.EXECUTING
        assert snapshot.plan is not None
        assert (snapshot.plan.revision, snapshot.plan.status) == (3, PlanStatus.COMPLETED)
        executing = runner.model_calls[4]
        assert executing.interaction_mode is InteractionMode.EXECUTING
        assert executing.messages[-1].text == plan_execution_message(2)
        assert executing.plan is not None and executing.plan.status is PlanStatus.ACTIVE
        assert not await sessions.execute_plan("s", 3)  # completed

        events = await read_events_until(
            stack, "s", lambda e: e.type == "turn_completed" and e.turn_id == "turn-3"
        )
        started = [e.payload_json() for e in events if e.type == "plan_execution_started"]
        assert started == [{"revision": 2}]
        updates = [e.payload_json() for e in events if e.type == "plan_updated"]
        assert [(u["revision"], u["status"]) for u in updates] == [
            (1, "draft"),
            (2, "draft"),
            (2, "active"),
            (3, "completed"),
        ]


async def test_plan_mode_messages_need_plan_mode(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_script)
    options = AgentSessionOptions(built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}))
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await stack.sessions.start_session("s")
        assert not await stack.sessions.send_user_message("s", "Plan it", plan_mode=True)
        assert not await stack.sessions.send_user_message("s", "   ")
        assert await stack.sessions.send_user_message("s", "hello")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == "chat: hello"
        assert not await stack.sessions.execute_plan("s", 1)


async def test_a_session_can_start_with_a_planning_turn(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = PlanRunner(_script, {"lookup": _lookup})
    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        await stack.sessions.start_session("s", "Back up", plan_mode=True)
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert runner.model_calls[0].interaction_mode is InteractionMode.PLANNING
        assert snapshot.plan is not None and snapshot.plan.status is PlanStatus.DRAFT

"""Built-in tools through the real engine: ask_user, durable_wait, write_todos, bad arguments."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    read_events_until,
    request_tools,
    running_session_stack,
    tool_call,
    tool_returning,
)
from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    BuiltInTool,
    ConfigurationError,
    ConfigurationTypeError,
    InterruptKind,
    PlanStatus,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.testing import (
    has_pending_interrupts,
    read_step_history,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

ASK = {"question": "Which region?", "choices": ["eu", "us"], "allows_free_text": False}
BUILT_INS = frozenset({BuiltInTool.ASK_USER, BuiltInTool.DURABLE_WAIT, BuiltInTool.WRITE_TODOS})


def _calls_then_answer(
    *calls: tuple[str, str, object],
) -> Callable[[AgentTurnContext], AgentTurnOutcome]:
    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            return request_tools(
                turn, *(tool_call(turn, call_id, name, args) for call_id, name, args in calls)
            )
        return final_answer_with_results(turn)

    return script


def _options(**changes: object) -> AgentSessionOptions:
    return AgentSessionOptions(built_in_tools=BUILT_INS, **changes)  # type: ignore[arg-type]


async def test_ask_user_is_answered_once_with_an_allowed_choice(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_calls_then_answer(("ask-1", "ask_user", ASK)))
    async with running_session_stack(dex_in_process_worker, runner, _options()) as stack:
        await stack.sessions.start_session("s", "where?")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", has_pending_interrupts)
        (interrupt,) = snapshot.pending_interrupts
        assert (interrupt.interrupt_id, interrupt.kind, interrupt.question) == (
            "ask-1",
            InterruptKind.QUESTION,
            "Which region?",
        )
        assert interrupt.choices == ("eu", "us") and not interrupt.allows_free_text
        (record,) = snapshot.tool_calls
        assert (record.status, record.effect, record.requires_approval) == (
            AgentToolCallStatus.AWAITING_ANSWER,
            ToolEffect.READ,
            False,
        )

        assert not await stack.sessions.resolve_interrupt("s", "ask-1", approved=True)
        assert not await stack.sessions.answer_question("s", "ask-1", "asia")
        assert not await stack.sessions.answer_question("s", "ask-1", "  ")
        assert not await stack.sessions.answer_question("s", "unknown", "eu")
        assert await stack.sessions.answer_question("s", "ask-1", "eu")
        assert not await stack.sessions.answer_question("s", "ask-1", "us")

        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == 'ask_user={"status":"answered","answer":"eu"}'
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_completed")
        raised = next(e for e in events if e.type == "interrupt_raised").payload_json()
        assert (raised["kind"], raised["question"], raised["choices"]) == (
            "question",
            "Which region?",
            ["eu", "us"],
        )
        resolved = next(e for e in events if e.type == "interrupt_resolved").payload_json()
        assert (resolved["kind"], resolved["answered"]) == ("question", True)
        assert runner.tool_calls == []  # a built-in never reaches the runner's tools


async def test_ask_user_declined(dex_in_process_worker: InProcessWorkerFactory) -> None:
    runner = ScriptedRunner(_calls_then_answer(("ask-1", "ask_user", {"question": "Why?"})))
    async with running_session_stack(dex_in_process_worker, runner, _options()) as stack:
        await stack.sessions.start_session("s", "go")
        await wait_for_agent_snapshot(stack.sessions, "s", has_pending_interrupts)
        assert await stack.sessions.resolve_interrupt("s", "ask-1", approved=False)
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == "ask_user=The user declined to answer."
        assert not await stack.sessions.answer_question("s", "ask-1", "late")


async def test_ask_user_deadline_passes(dex_in_process_worker: InProcessWorkerFactory) -> None:
    runner = ScriptedRunner(_calls_then_answer(("ask-1", "ask_user", {"question": "Why?"})))
    options = _options(interrupt_deadline=timedelta(seconds=1))
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await stack.sessions.start_session("s", "go")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1), timeout=60)
        assert snapshot.messages[-1].text == "ask_user=question deadline passed"
        assert snapshot.pending_interrupts == ()
        assert not await stack.sessions.answer_question("s", "ask-1", "late")


async def test_durable_wait_waits_on_a_timer(dex_in_process_worker: InProcessWorkerFactory) -> None:
    wait = {"duration_seconds": 1, "reason": "build runs"}
    runner = ScriptedRunner(_calls_then_answer(("wait-1", "durable_wait", wait)))
    async with running_session_stack(dex_in_process_worker, runner, _options()) as stack:
        await stack.sessions.start_session("s", "wait")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1), timeout=60)
        assert snapshot.messages[-1].text == (
            'durable_wait={"status":"completed","waited_seconds":1,"reason":"build runs"}'
        )
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_completed")
        started = next(e for e in events if e.type == "timer_started").payload_json()
        assert (started["tool_call_id"], started["reason"]) == ("wait-1", "build runs")
        assert started["wait_until"] is not None
        history = await read_step_history(stack.server_address, stack.dex.scoped("s"))
        assert "AwaitTimer" in {entry.step_type for entry in history}


async def test_invalid_built_in_arguments_fail_at_once(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(
        _calls_then_answer(
            ("wait-1", "durable_wait", {"duration_seconds": 0, "reason": "now"}),
            ("ask-1", "ask_user", {"question": " "}),
            ("todo-1", "write_todos", {"todos": [{"content": "x", "status": "done"}]}),
        )
    )
    async with running_session_stack(
        dex_in_process_worker, runner, _options(max_durable_wait=timedelta(hours=1))
    ) as stack:
        await stack.sessions.start_session("s", "go")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == "; ".join(
            [
                "durable_wait=Error: invalid durable_wait arguments: "
                "duration_seconds must be from 1 to 3600, got 0",
                "ask_user=Error: invalid ask_user arguments: question must not be blank",
                "write_todos=Error: invalid todos: todos[0].status must be one of pending, "
                "in_progress, completed, got 'done'",
            ]
        )
        assert snapshot.plan is None
        (resumed,) = runner.model_calls[1:]
        assert {record.status for record in resumed.tool_calls.values()} == {
            AgentToolCallStatus.FAILED
        }


async def test_write_todos_settles_in_run_model(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    todos = {
        "todos": [
            {"content": "Back up", "status": "completed"},
            {"content": "Migrate", "status": "in_progress"},
        ]
    }
    runner = ScriptedRunner(_calls_then_answer(("todo-1", "write_todos", todos)))
    async with running_session_stack(dex_in_process_worker, runner, _options()) as stack:
        await stack.sessions.start_session("s", "plan it")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == (
            'write_todos={"status":"updated","revision":1,"task_count":2}'
        )
        assert snapshot.plan is not None
        assert (snapshot.plan.revision, snapshot.plan.status) == (1, PlanStatus.ACTIVE)
        assert runner.model_calls[1].plan == snapshot.plan
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_completed")
        updated = next(e for e in events if e.type == "plan_updated").payload_json()
        assert updated == {"revision": 1, "status": "active", "task_count": 2}
        history = await read_step_history(stack.server_address, stack.dex.scoped("s"))
        step_types = [entry.step_type for entry in history]
        assert "CallTool" not in step_types and "ResumeTurn" in step_types


async def test_two_write_todos_in_one_response_both_fail(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    todos = {"todos": [{"content": "Back up", "status": "pending"}]}
    runner = ScriptedRunner(
        _calls_then_answer(("t1", "write_todos", todos), ("t2", "write_todos", todos))
    )
    async with running_session_stack(dex_in_process_worker, runner, _options()) as stack:
        await stack.sessions.start_session("s", "plan it")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        error = "Error: write_todos was called more than once in one response"
        assert snapshot.messages[-1].text == f"write_todos={error}; write_todos={error}"
        assert snapshot.plan is None


async def test_a_disabled_built_in_name_is_an_ordinary_tool(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(
        _calls_then_answer(("ask-1", "ask_user", ASK)),
        {"ask_user": tool_returning("my own ask_user")},
    )
    options = AgentSessionOptions(tool_policies={"ask_user": ToolPolicy(ToolEffect.READ)})
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await stack.sessions.start_session("s", "go")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == "ask_user=my own ask_user"
        assert len(runner.tool_calls) == 1


def test_an_enabled_built_in_name_is_reserved() -> None:
    with pytest.raises(ConfigurationError, match="reserved"):
        AgentSessionOptions(
            built_in_tools=frozenset({BuiltInTool.ASK_USER}),
            tool_policies={"ask_user": ToolPolicy(ToolEffect.READ)},
        )
    with pytest.raises(ConfigurationError, match="unknown built-in tool"):
        AgentSessionOptions(built_in_tools=frozenset({"ask"}))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="write_todos"):
        AgentSessionOptions(plan_mode_enabled=True)


def test_plan_mode_needs_a_plan_mode_runner() -> None:
    runner = ScriptedRunner(_calls_then_answer())
    options = AgentSessionOptions(
        built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}), plan_mode_enabled=True
    )
    with pytest.raises(ConfigurationTypeError, match="supports_plan_mode"):
        AgentSessionFlow(runner, flow_type="T", options=options)


async def test_steering_settles_a_waiting_question_and_a_durable_wait(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    wait = {"duration_seconds": 3600, "reason": "long build"}
    asking = _calls_then_answer(("ask-1", "ask_user", ASK), ("wait-1", "durable_wait", wait))

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.turn_id == "turn-1":
            return asking(turn)
        return final_answer_with_results(turn)

    runner = ScriptedRunner(script)
    async with running_session_stack(dex_in_process_worker, runner, _options()) as stack:
        await stack.sessions.start_session("s", "go")
        await wait_for_agent_snapshot(stack.sessions, "s", has_pending_interrupts)
        assert await stack.sessions.steer_user_message("s", "never mind")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(2))
        assert not await stack.sessions.answer_question("s", "ask-1", "eu")
        assert snapshot.pending_interrupts == ()
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_steered")
        finished = [e.payload_json() for e in events if e.type == "tool_call_finished"]
        assert sorted((f["tool_call_id"], f["status"]) for f in finished) == [
            ("ask-1", "rejected"),
            ("wait-1", "rejected"),
        ]
        resolved = next(e for e in events if e.type == "interrupt_resolved").payload_json()
        assert (resolved["interrupt_id"], resolved["cancellation_reason"]) == ("ask-1", "steered")

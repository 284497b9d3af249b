"""Questions and tasks: ask_user, a tool's question, and a task polled across a Worker SIGKILL."""

from __future__ import annotations

import pytest
from dex_agents import (
    InterruptKind,
)
from dex_agents.testing import assistant_texts, wait_until
from dex_agents.testing.scenarios import (
    CONFIRM_QUESTION,
    CONFIRM_TOOL,
    REPORT_POLL_INVOCATION,
    REPORT_QUESTION,
    REPORT_TOOL,
    ScenarioCall,
    ScenarioCommand,
    report_deliveries,
    report_job_ids,
)
from scenario_support.harness import Scenario
from scenario_support.runners import runner_supports

ASK = ScenarioCommand(
    calls=(
        ScenarioCall(
            "ask_user",
            arguments={
                "question": "Which region?",
                "choices": ["eu", "us"],
                "allows_free_text": False,
            },
        ),
    )
)


def _require(scenario: Scenario, feature: str) -> None:
    if not runner_supports(scenario.runner, feature):
        pytest.skip(
            f"runner {scenario.runner} does not declare {feature} in its ScenarioRunner features"
        )


async def test_ask_user_answered_once(scenario: Scenario) -> None:
    await scenario.start("ask", ASK)
    interrupt = await scenario.wait_for_pending_interrupt("ask")
    assert (interrupt.kind, interrupt.question, interrupt.choices) == (
        InterruptKind.QUESTION,
        "Which region?",
        ("eu", "us"),
    )
    assert not await scenario.sessions.resolve_interrupt(
        "ask", interrupt.interrupt_id, approved=True
    )
    assert not await scenario.sessions.answer_question("ask", interrupt.interrupt_id, "asia")
    assert not await scenario.sessions.answer_question("ask", interrupt.interrupt_id, " ")
    assert await scenario.sessions.answer_question("ask", interrupt.interrupt_id, "eu")
    assert not await scenario.sessions.answer_question("ask", interrupt.interrupt_id, "eu")

    snapshot = await scenario.wait_for_turn_end("ask")
    assert assistant_texts(snapshot) == ['done: {"status":"answered","answer":"eu"}']
    assert "AwaitQuestionAnswer" in await scenario.executed_step_types("ask")


async def test_ask_user_declined(scenario: Scenario) -> None:
    await scenario.start("decline", ASK)
    interrupt = await scenario.wait_for_pending_interrupt("decline")
    assert await scenario.sessions.resolve_interrupt(
        "decline", interrupt.interrupt_id, approved=False
    )
    snapshot = await scenario.wait_for_turn_end("decline")
    assert assistant_texts(snapshot) == ["done: The user declined to answer."]
    assert not await scenario.sessions.answer_question("decline", interrupt.interrupt_id, "eu")


async def test_ask_user_past_its_deadline(scenario: Scenario) -> None:
    await scenario.start("late", ASK, deadline_agent=True)
    # From the event, not the snapshot: on a loaded machine the 2 s deadline can pass before a
    # snapshot read sees the question pending.
    raised = await scenario.raised_interrupt("late", deadline_agent=True)
    assert (raised["kind"], raised["question"]) == ("question", "Which region?")
    assert raised["deadline"] is not None
    snapshot = await scenario.wait_for_turn_end("late", deadline_agent=True)
    assert assistant_texts(snapshot) == ["done: question deadline passed"]
    assert not await scenario.deadline_sessions.answer_question(
        "late", raised["interrupt_id"], "eu"
    )


async def test_a_tool_question_then_the_tools_result(scenario: Scenario) -> None:
    _require(scenario, "tool_questions")
    await scenario.start("confirm", ScenarioCommand(calls=(ScenarioCall(CONFIRM_TOOL),)))
    interrupt = await scenario.wait_for_pending_interrupt("confirm")
    assert interrupt.interrupt_id == f"{interrupt.tool_call_id}-input-1"
    assert interrupt.question == CONFIRM_QUESTION
    assert scenario.log.count(CONFIRM_TOOL) == 0  # no effect before the answer

    assert not await scenario.sessions.answer_question("confirm", interrupt.interrupt_id, "ok")
    assert await scenario.sessions.answer_question("confirm", interrupt.interrupt_id, "yes")
    snapshot = await scenario.wait_for_turn_end("confirm")
    assert assistant_texts(snapshot) == ["done: confirmed: yes"]
    assert scenario.log.count(CONFIRM_TOOL) == 1
    executed = await scenario.executed_step_types("confirm")
    assert executed.count("CallSingleAttemptTool") == 2  # asked, then ran with the answer


@pytest.mark.dex_own_stack  # SIGKILLs its Worker
async def test_a_task_polled_to_completion_across_a_worker_kill(scenario: Scenario) -> None:
    _require(scenario, "tool_tasks")
    await scenario.start("task", ScenarioCommand(calls=(ScenarioCall(REPORT_TOOL),)))
    await _wait_for_count(scenario, REPORT_POLL_INVOCATION, 1)
    await scenario.replace_worker()  # between polls: no Step holds the task

    interrupt = await scenario.wait_for_pending_interrupt("task")
    assert interrupt.question == REPORT_QUESTION
    assert interrupt.interrupt_id == f"{interrupt.tool_call_id}-input-1"
    assert await scenario.sessions.answer_question("task", interrupt.interrupt_id, "no")
    snapshot = await scenario.wait_for_turn_end("task")

    assert assistant_texts(snapshot) == ["done: report ready (drafts: no)"]
    assert scenario.log.count(REPORT_TOOL) == 1  # the task started once
    (job_id,) = report_job_ids(scenario.state_dir)
    assert report_deliveries(scenario.state_dir, job_id) == 1
    executed = await scenario.executed_step_types("task")
    assert executed.count("PollToolTask") >= 3
    assert "AwaitQuestionAnswer" in executed


async def _wait_for_count(scenario: Scenario, name: str, count: int) -> None:
    async def reached() -> bool | None:
        return True if scenario.log.count(name) >= count else None

    await wait_until(f"{count} {name} invocations", reached)


@pytest.mark.dex_own_stack  # SIGKILLs its Worker
async def test_a_task_handle_saved_before_a_worker_kill_is_resumed(scenario: Scenario) -> None:
    _require(scenario, "tool_tasks")
    command = ScenarioCommand(calls=(ScenarioCall(REPORT_TOOL, gate="report-started"),))
    await scenario.start("resume", command)
    gate = scenario.gate("report-started")
    await gate.wait_until_reached()  # the job started and its handle is the checkpoint
    await scenario.replace_worker()

    interrupt = await scenario.wait_for_pending_interrupt("resume")
    assert await scenario.sessions.answer_question("resume", interrupt.interrupt_id, "yes")
    snapshot = await scenario.wait_for_turn_end("resume")
    gate.release()

    assert assistant_texts(snapshot) == ["done: report ready (drafts: yes)"]
    assert scenario.log.count(REPORT_TOOL) == 1  # the retry resumed the saved job
    assert len(report_job_ids(scenario.state_dir)) == 1
    history = await scenario.executed("resume")
    (call_tool,) = [entry for entry in history if entry.step_type == "CallTool"]
    assert call_tool.final_attempt == 2

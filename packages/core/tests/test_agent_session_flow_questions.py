"""Tool questions through the real engine: a tool asks, the user answers, the tool runs again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from agent_session_test_support import (
    ScriptedRunner,
    SessionStack,
    final_answer_with_results,
    read_events_until,
    request_tools,
    running_session_stack,
    tool_call,
    tool_returning,
)
from dex_agents import (
    AgentSessionOptions,
    AgentSnapshot,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    InterruptKind,
    QuestionResolution,
    ToolEffect,
    ToolExecutionResult,
    ToolInputRequested,
    ToolPolicy,
)
from dex_agents.testing import (
    has_pending_interrupts,
    read_step_history,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

OPTIONS = AgentSessionOptions(
    tool_policies={
        "ship": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
        "lookup": ToolPolicy(ToolEffect.READ),
    }
)


def _calls(*calls: tuple[str, str]) -> Callable[[AgentTurnContext], AgentTurnOutcome]:
    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            return request_tools(
                turn, *(tool_call(turn, call_id, name, {}) for call_id, name in calls)
            )
        return final_answer_with_results(turn)

    return script


async def _ship(call: DeferredToolExecution) -> ToolExecutionResult | ToolInputRequested:
    if not call.input_answers:
        return ToolInputRequested(
            "Ship to the saved address?",
            choices=("yes", "no"),
            allows_free_text=False,
            continuation="request-7",
        )
    answer = call.input_answers[-1]
    return ToolExecutionResult(f"shipped {answer.answer} after {call.tool_call.input_continuation}")


@asynccontextmanager
async def _asked_to_ship(
    workers: InProcessWorkerFactory,
) -> AsyncIterator[tuple[ScriptedRunner, SessionStack, AgentSnapshot]]:
    """A session whose ``ship`` call asked its question: the runner, the stack, the snapshot."""
    runner = ScriptedRunner(_calls(("ship-1", "ship")), {"ship": _ship})  # type: ignore[dict-item]
    async with running_session_stack(workers, runner, OPTIONS) as stack:
        await stack.sessions.start_session("s", "ship it")
        yield (
            runner,
            stack,
            await wait_for_agent_snapshot(stack.sessions, "s", has_pending_interrupts),
        )


async def test_a_tool_question_is_answered_and_the_tool_runs_again(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with _asked_to_ship(dex_in_process_worker) as (runner, stack, snapshot):
        (interrupt,) = snapshot.pending_interrupts
        assert (interrupt.interrupt_id, interrupt.kind, interrupt.choices) == (
            "ship-1-input-1",
            InterruptKind.QUESTION,
            ("yes", "no"),
        )
        (record,) = snapshot.tool_calls
        assert record.status is AgentToolCallStatus.AWAITING_ANSWER
        assert record.question == "Ship to the saved address?"
        assert len(runner.tool_calls) == 1

        assert not await stack.sessions.answer_question("s", "ship-1-input-1", "maybe")
        assert await stack.sessions.answer_question("s", "ship-1-input-1", "yes")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == "ship=shipped yes after request-7"
        assert len(runner.tool_calls) == 2
        second = runner.tool_calls[1]
        (answer,) = second.input_answers
        assert (answer.interrupt_id, answer.resolution, answer.answer) == (
            "ship-1-input-1",
            QuestionResolution.ANSWERED,
            "yes",
        )
        history = await read_step_history(stack.server_address, stack.dex.scoped("s"))
        step_types = [entry.step_type for entry in history]
        assert step_types.count("AwaitQuestionAnswer") >= 2  # raise, then the answer
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_completed")
        raised = next(e for e in events if e.type == "interrupt_raised").payload_json()
        assert (raised["interrupt_id"], raised["kind"]) == ("ship-1-input-1", "question")


async def test_a_declined_tool_question_rejects_the_call(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with _asked_to_ship(dex_in_process_worker) as (runner, stack, _snapshot):
        assert await stack.sessions.resolve_interrupt("s", "ship-1-input-1", approved=False)
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == "ship=The user declined to answer."
        assert len(runner.tool_calls) == 1
        (record,) = runner.model_calls[1].tool_calls.values()
        assert record.status is AgentToolCallStatus.REJECTED


async def test_a_question_id_in_use_by_another_call_fails_the_asking_call(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(
        _calls(("ship-1", "ship"), ("ship-1-input-1", "lookup")),
        {"ship": _ship, "lookup": tool_returning("found")},  # type: ignore[dict-item]
    )
    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        await stack.sessions.start_session("s", "ship it")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == (
            "ship=Error: the tool asked a question whose interrupt ID ship-1-input-1 another "
            "call of this turn already uses; lookup=found"
        )
        assert snapshot.pending_interrupts == ()

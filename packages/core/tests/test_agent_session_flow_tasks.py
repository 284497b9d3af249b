"""Tool tasks through the real engine: started, polled on Timers, a question, failures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    read_events_until,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex_agents import (
    MISSING_TOOL_TASK_POLLER,
    AgentSessionOptions,
    AgentSnapshot,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    CancellationReason,
    DeferredToolExecution,
    QuestionResolution,
    ToolEffect,
    ToolExecutionResult,
    ToolInputRequested,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPoller,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    describe_tool_call_outcome,
)
from dex_agents.adapters import AdapterRunner
from dex_agents.testing import (
    has_pending_interrupts,
    read_step_history,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

OPTIONS = AgentSessionOptions(
    tool_policies={
        "report": ToolPolicy(ToolEffect.READ),
        "export": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
    }
)
PollHandler = Callable[[ToolTaskPoll], Awaitable[ToolTaskPollOutcome]]


@dataclass
class TaskRunner(ScriptedRunner):
    """A scripted runner that polls tasks with ``poll``, recording every poll."""

    poll: PollHandler | None = None
    polls: list[ToolTaskPoll] = field(default_factory=list)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polls.append(poll)
        assert self.poll is not None
        return await self.poll(poll)


def _one_call(call_id: str, name: str) -> Callable[[AgentTurnContext], AgentTurnOutcome]:
    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            return request_tools(turn, tool_call(turn, call_id, name, {}))
        return final_answer_with_results(turn)

    return script


async def _start(call: DeferredToolExecution) -> ToolTaskStarted:
    if call.heartbeat_checkpoint is not None:
        return ToolTaskStarted(call.heartbeat_checkpoint, 0.2)
    await call.save_heartbeat_checkpoint("job-1")
    return ToolTaskStarted("job-1", 0.2)


async def test_a_task_is_polled_to_its_result_with_a_question_between(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async def poll(task: ToolTaskPoll) -> ToolTaskPollOutcome:
        number = len(runner.polls)
        if number == 1:
            return ToolTaskPending(0.5)
        if number == 2:
            return ToolInputRequested("Include drafts?", continuation="q-1")
        if task.pending_answer is not None:
            return ToolTaskPending(1, continuation=task.tool_call.input_continuation)
        return ToolExecutionResult(f"report {task.tool_call.task_id} ready")

    runner = TaskRunner(_one_call("report-1", "report"), {"report": _start}, poll=poll)  # type: ignore[dict-item]
    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        await stack.sessions.start_session("s", "report")
        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "s", has_pending_interrupts, timeout=60
        )
        (interrupt,) = snapshot.pending_interrupts
        assert (interrupt.interrupt_id, interrupt.question) == (
            "report-1-input-1",
            "Include drafts?",
        )
        (record,) = snapshot.tool_calls
        assert (record.status, record.task_id) == (AgentToolCallStatus.AWAITING_ANSWER, "job-1")
        assert await stack.sessions.answer_question("s", "report-1-input-1", "no")

        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1), timeout=60)
        assert snapshot.messages[-1].text == "report=report job-1 ready"
        assert len(runner.tool_calls) == 1 and runner.tool_calls[0].supports_tool_tasks
        assert len(runner.polls) == 4
        assert [poll.pending_answer is not None for poll in runner.polls] == [
            False,
            False,
            True,
            False,
        ]
        delivered = runner.polls[2]
        assert delivered.pending_answer is not None
        assert (delivered.pending_answer.resolution, delivered.pending_answer.answer) == (
            QuestionResolution.ANSWERED,
            "no",
        )
        assert delivered.tool_call.input_continuation == "q-1"
        assert runner.polls[3].tool_call.input_continuation == "q-1"
        assert runner.polls[0].tool_call.task_poll_interval_seconds == 1

        events = await read_events_until(stack, "s", lambda e: e.type == "turn_completed")
        started = next(e for e in events if e.type == "tool_task_started").payload_json()
        assert started == {"tool_call_id": "report-1", "tool_name": "report", "task_id": "job-1"}
        history = await read_step_history(stack.server_address, stack.dex.scoped("s"))
        executed = [e.step_type for e in history if e.event_type == "step_execute_completed"]
        assert executed.count("PollToolTask") == 4
        assert executed.count("CallTool") == 1


async def test_a_task_without_a_poller_fails_with_missing_poller(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_one_call("report-1", "report"), {"report": _start})  # type: ignore[dict-item]
    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        await stack.sessions.start_session("s", "report")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == f"report=Error: {MISSING_TOOL_TASK_POLLER}"
        assert not runner.tool_calls[0].supports_tool_tasks


async def test_a_task_whose_polls_keep_failing_is_recorded_by_its_effect(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async def poll(task: ToolTaskPoll) -> ToolTaskPollOutcome:
        raise RuntimeError("task service unreachable")

    runner = TaskRunner(
        _one_call("export-1", "export"),
        {"export": _start},  # type: ignore[dict-item]
        poll=poll,
    )
    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        await stack.sessions.start_session("s", "export")
        await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1), timeout=120)
        (record,) = runner.model_calls[1].tool_calls.values()
        # The task may still run, so a write's outcome is unknown, never "not run".
        assert record.status is AgentToolCallStatus.OUTCOME_UNKNOWN
        assert len(runner.polls) == 3
        assert len(runner.tool_calls) == 1


@dataclass
class KitRunner(AdapterRunner, ScriptedRunner):
    """A scripted runner on the adapter kit, with pollers by tool name (none here)."""

    pollers: dict[str, ToolTaskPoller] = field(default_factory=dict)

    async def find_tool_task_poller(
        self, flow_id: str, tool_call: AgentToolCall
    ) -> ToolTaskPoller | None:
        return self.pollers.get(tool_call.tool_name)


@pytest.mark.parametrize(
    ("tool", "status"),
    [("report", AgentToolCallStatus.FAILED), ("export", AgentToolCallStatus.OUTCOME_UNKNOWN)],
)
async def test_a_kit_runner_without_the_tool_s_poller_records_the_call_at_once_by_effect(
    dex_in_process_worker: InProcessWorkerFactory, tool: str, status: AgentToolCallStatus
) -> None:
    runner = KitRunner(_one_call("call-1", tool), {tool: _start})  # type: ignore[dict-item]
    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        await stack.sessions.start_session("s", tool)
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        (record,) = runner.model_calls[1].tool_calls.values()
        assert record.status is status
        assert record.error == (
            f"tool {tool} started a task, but no task poller on this Worker polls it (KitRunner)"
        )
        assert runner.tool_calls[0].supports_tool_tasks  # the runner polls other tools' tasks
        history = await read_step_history(stack.server_address, stack.dex.scoped("s"))
        polls = [e for e in history if e.step_type == "PollToolTask"]
        # Recorded by the first poll: no retry, no failure route.
        assert polls and {e.final_attempt for e in polls} == {1}
        assert not any(e.step_type.startswith("RecordTool") for e in history)
        assert snapshot.messages[-1].text == f"{tool}={describe_tool_call_outcome(record)}"


@dataclass
class CancellingTaskRunner(TaskRunner):
    """A task runner that also cancels tasks, recording each cancellation."""

    cancellations: list[ToolTaskCancellation] = field(default_factory=list)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancellations.append(cancellation)


async def test_cancel_turn_abandons_a_started_task(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async def poll(task: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolTaskPending(1)  # never finishes on its own

    runner = CancellingTaskRunner(
        _one_call("report-1", "report"),
        {"report": _start},  # type: ignore[dict-item]
        poll=poll,
    )

    def polled(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        return snapshot if runner.polls else None

    async with running_session_stack(dex_in_process_worker, runner, OPTIONS) as stack:
        await stack.sessions.start_session("s", "report")
        await wait_for_agent_snapshot(stack.sessions, "s", polled, timeout=60)
        assert await stack.sessions.cancel_turn("s", "turn-1")
        await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1), timeout=60)
        (cancellation,) = {c.tool_call.task_id: c for c in runner.cancellations}.values()
        assert cancellation.tool_call.task_id == "job-1"
        assert cancellation.tool_call.cancellation_reason is CancellationReason.TURN_CANCELLED
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_cancelled")
        finished = [e.payload_json() for e in events if e.type == "tool_call_finished"]
        assert finished == [
            {"tool_call_id": "report-1", "tool_name": "report", "status": "outcome_unknown"}
        ]
        history = await read_step_history(stack.server_address, stack.dex.scoped("s"))
        executed = [e.step_type for e in history if e.event_type == "step_execute_completed"]
        assert "CancelToolTask" in executed

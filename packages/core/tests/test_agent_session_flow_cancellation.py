"""Turn cancellation through the real engine: ``cancel_turn`` stops a model call (its answer is
dropped), an approval wait, and the waits beside a running tool, which runs to its end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from agent_session_test_support import (
    ScriptedRunner,
    SessionStack,
    assistant,
    read_events_until,
    request_tools,
    running_session_stack,
    tool_call,
    tool_returning,
)
from dex_agents import (
    STEERED_TOOL_RESULT,
    TURN_CANCELLED_NOTE,
    TURN_CANCELLED_TOOL_RESULT,
    AgentSessionOptions,
    AgentSnapshot,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    BuiltInTool,
    CancellationReason,
    DeferredToolExecution,
    MessageRole,
    ToolEffect,
    ToolExecutionResult,
    ToolInputRequested,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    TurnCompleted,
)
from dex_agents.testing import (
    has_pending_interrupts,
    turn_ended,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from turn_control_test_support import (
    Gate,
    call_is_final,
    echo_user_messages,
    is_active,
    lookup_running_refund_waiting,
    one_tool_call_then_echo,
)

_LOOKUP_IS_READ = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})


async def test_cancel_during_a_model_call_drops_its_answer(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    gate = Gate()

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        return TurnCompleted((assistant(f"answer of {turn.turn_id}"),), AgentUsage())

    runner = ScriptedRunner(script, before_model_call=gate.hold_model_calls("turn-1"))
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "hello")
        await gate.wait_reached()
        assert not await sessions.cancel_turn("s", "turn-2")
        assert await sessions.cancel_turn("s", "turn-1")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        # The cancelled call finishing later commits nothing; the note says the turn stopped.
        gate.opened.set()
        assert [m.text for m in snapshot.messages] == ["hello", TURN_CANCELLED_NOTE]
        assert snapshot.messages[-1].role is MessageRole.USER
        assert snapshot.state is not None and snapshot.state.last_turn_error is None
        # The turn has ended: a cancel naming it now answers False (no turn is active).
        assert not await sessions.cancel_turn("s", "turn-1")
        # The session goes on: the next message starts turn-2.
        assert await sessions.send_user_message("s", "again")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        assert [m.text for m in snapshot.messages] == [
            "hello",
            TURN_CANCELLED_NOTE,
            "again",
            "answer of turn-2",
        ]
        # The next model call sees the note between the unanswered message and the new one.
        assert [m.text for m in runner.model_calls[-1].messages] == [
            "hello",
            TURN_CANCELLED_NOTE,
            "again",
        ]
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_cancelled")
        assert events[-1].turn_id == "turn-1"
        assert events[-1].payload_json() == {"message_count": 2}  # the message and the note
        assert "turn_completed" not in [e.type for e in events]


async def test_a_stop_pressed_twice_succeeds_both_times(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    """Two concurrent cancels of one turn both answer True while its cancellation is in flight
    (a started tool keeps the turn active); once the turn ended a cancel naming it answers False
    (no turn is active for it), also while the next turn runs, which it does not touch."""
    tool_gate = Gate()
    model_gate = Gate()

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.turn_id == "turn-1" and not turn.is_resuming:
            return request_tools(turn, tool_call(turn, "slow", "lookup", {}))
        return TurnCompleted((assistant(f"answer of {turn.turn_id}"),), AgentUsage())

    async def lookup(call: DeferredToolExecution) -> ToolExecutionResult:
        await tool_gate.pass_through()
        return ToolExecutionResult("slow result")

    runner = ScriptedRunner(
        script, {"lookup": lookup}, before_model_call=model_gate.hold_model_calls("turn-2")
    )
    async with running_session_stack(dex_in_process_worker, runner, _LOOKUP_IS_READ) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "hello")
        await tool_gate.wait_reached()
        presses = await asyncio.gather(
            sessions.cancel_turn("s", "turn-1"), sessions.cancel_turn("s", "turn-1")
        )
        assert presses == [True, True]
        assert is_active(await sessions.get_agent_snapshot("s")) is not None
        assert await sessions.cancel_turn("s", "turn-1")
        tool_gate.opened.set()
        await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert not await sessions.cancel_turn("s", "turn-1")
        assert not await sessions.cancel_turn("s", "turn-2")

        assert await sessions.send_user_message("s", "again")
        await model_gate.wait_reached()
        # Pressing stop again for the cancelled turn while turn-2 runs changes nothing.
        assert not await sessions.cancel_turn("s", "turn-1")
        model_gate.opened.set()
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        assert [m.text for m in snapshot.messages][-2:] == ["again", "answer of turn-2"]
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_completed")
        cancelled = [e.turn_id for e in events if e.type == "turn_cancelled"]
        assert cancelled == ["turn-1"]


async def test_cancel_during_an_approval_wait_rejects_the_call(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.turn_id == "turn-1":
            return request_tools(turn, tool_call(turn, "refund-1", "refund", {"order": 7}))
        return echo_user_messages(turn)

    runner = ScriptedRunner(script, {"refund": tool_returning("refunded")})
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "refund order 7")
        await wait_for_agent_snapshot(sessions, "s", has_pending_interrupts)
        assert await sessions.cancel_turn("s", "turn-1")
        # The interrupt is gone in the RPC's own commit, so a late answer changes nothing.
        assert not await sessions.resolve_interrupt("s", "refund-1", approved=True)
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert runner.tool_calls == []
        assert snapshot.pending_interrupts == ()
        note = snapshot.messages[-1]
        assert note.role is MessageRole.USER
        assert TURN_CANCELLED_TOOL_RESULT in (note.text or "")
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_cancelled")
        resolved = [e.payload_json() for e in events if e.type == "interrupt_resolved"]
        assert resolved == [
            {
                "interrupt_id": "refund-1",
                "approved": False,
                "rejection_message": None,
                "kind": "approval",
                "answered": False,
                "cancellation_reason": "turn_cancelled",
            }
        ]
        finished = [e.payload_json() for e in events if e.type == "tool_call_finished"]
        assert finished == [
            {"tool_call_id": "refund-1", "tool_name": "refund", "status": "rejected"}
        ]


async def test_cancel_while_a_tool_runs_lets_it_finish(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    gate = Gate()
    async with lookup_running_refund_waiting(dex_in_process_worker, gate) as (runner, stack):
        sessions = stack.sessions
        assert await sessions.cancel_turn("s", "turn-1")
        snapshot = await wait_for_agent_snapshot(sessions, "s", call_is_final("write"))
        records = {r.tool_call_id: r for r in snapshot.tool_calls}
        assert records["write"].status is AgentToolCallStatus.REJECTED
        assert records["write"].cancellation_reason is CancellationReason.TURN_CANCELLED
        assert records["slow"].status is AgentToolCallStatus.APPROVED
        assert is_active(snapshot) is not None
        # A second call for the same turn returns True and changes nothing.
        assert await sessions.cancel_turn("s", "turn-1")
        gate.opened.set()
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert [call.tool_call.tool_name for call in runner.tool_calls] == ["lookup"]
        # No model call after the cancellation: the turn ended once the tool finished.
        assert len(runner.model_calls) == 1
        note = snapshot.messages[-1].text or ""
        assert note.startswith(TURN_CANCELLED_NOTE)
        assert "slow result" in note and TURN_CANCELLED_TOOL_RESULT in note
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_cancelled")
        assert [e.type for e in events].count("turn_cancelled") == 1
        finished = {
            e.payload_json()["tool_call_id"]: e.payload_json()["status"]
            for e in events
            if e.type == "tool_call_finished"
        }
        assert finished == {"slow": "succeeded", "write": "rejected"}


async def test_cancel_turn_refuses_when_no_turn_is_active(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(echo_user_messages)
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        await stack.sessions.start_session("s", "")
        await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(0))
        assert not await stack.sessions.cancel_turn("s", "turn-1")


_WAITS = AgentSessionOptions(
    built_in_tools=frozenset({BuiltInTool.DURABLE_WAIT, BuiltInTool.ASK_USER})
)


def _waiting_call(call_id: str, name: str, arguments: object) -> ScriptedRunner:
    script = one_tool_call_then_echo(call_id, name, arguments)
    return ScriptedRunner(script)


def _record_waits(status: AgentToolCallStatus) -> Callable[[AgentSnapshot], AgentSnapshot | None]:
    def probe(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        return snapshot if any(r.status is status for r in snapshot.tool_calls) else None

    return probe


@pytest.mark.parametrize("control", ["cancel", "steer"])
async def test_a_durable_wait_is_settled_by_a_cancel_or_a_steer(
    dex_in_process_worker: InProcessWorkerFactory, control: str
) -> None:
    runner = _waiting_call("wait-1", "durable_wait", {"duration_seconds": 3600, "reason": "build"})
    async with running_session_stack(dex_in_process_worker, runner, _WAITS) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "wait for the build")
        await wait_for_agent_snapshot(
            sessions, "s", _record_waits(AgentToolCallStatus.WAITING_FOR_TIMER)
        )
        if control == "cancel":
            assert await sessions.cancel_turn("s", "turn-1")
            turns, result = 1, TURN_CANCELLED_TOOL_RESULT
        else:
            assert await sessions.steer_user_message("s", "no need to wait")
            turns, result = 2, STEERED_TOOL_RESULT
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(turns))
        assert len(runner.model_calls) == turns
        assert any(result in (m.text or "") for m in snapshot.messages)
        events = await read_events_until(
            stack, "s", lambda e: e.type in ("turn_cancelled", "turn_steered")
        )
        finished = [e.payload_json() for e in events if e.type == "tool_call_finished"]
        assert finished == [
            {"tool_call_id": "wait-1", "tool_name": "durable_wait", "status": "rejected"}
        ]


@pytest.mark.parametrize("control", ["cancel", "steer"])
async def test_an_ask_user_question_is_settled_by_a_cancel_or_a_steer(
    dex_in_process_worker: InProcessWorkerFactory, control: str
) -> None:
    runner = _waiting_call("ask-1", "ask_user", {"question": "Which region?"})
    async with running_session_stack(dex_in_process_worker, runner, _WAITS) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "ask me")
        await wait_for_agent_snapshot(sessions, "s", has_pending_interrupts)
        if control == "cancel":
            assert await sessions.cancel_turn("s", "turn-1")
            turns, reason = 1, "turn_cancelled"
        else:
            assert await sessions.steer_user_message("s", "never mind")
            turns, reason = 2, "steered"
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(turns))
        assert snapshot.pending_interrupts == ()
        assert not await sessions.answer_question("s", "ask-1", "eu")
        events = await read_events_until(
            stack, "s", lambda e: e.type in ("turn_cancelled", "turn_steered")
        )
        resolved = [e.payload_json() for e in events if e.type == "interrupt_resolved"]
        assert [(r["interrupt_id"], r["kind"], r["cancellation_reason"]) for r in resolved] == [
            ("ask-1", "question", reason)
        ]


@dataclass
class _TaskRunner(ScriptedRunner):
    """Starts a task per call, polls it as pending until ``finish`` is set, records cancels."""

    finish: asyncio.Event = field(default_factory=asyncio.Event)
    polls: list[ToolTaskPoll] = field(default_factory=list)
    cancelled: list[ToolTaskCancellation] = field(default_factory=list)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polls.append(poll)
        if self.finish.is_set():
            return ToolExecutionResult("report ready")
        return ToolTaskPending(1)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancelled.append(cancellation)


def _task_runner() -> _TaskRunner:
    script = one_tool_call_then_echo("report-1", "report", {})

    async def start(call: DeferredToolExecution) -> ToolTaskStarted:
        return ToolTaskStarted("job-1", 1)

    return _TaskRunner(script, {"report": start})  # type: ignore[dict-item]


_REPORT_IS_READ = AgentSessionOptions(tool_policies={"report": ToolPolicy(ToolEffect.READ)})


@asynccontextmanager
async def _report_session(
    workers: InProcessWorkerFactory, runner: _TaskRunner
) -> AsyncIterator[SessionStack]:
    """Session ``s`` asked to make the report, whose ``report`` call starts a task."""
    async with running_session_stack(workers, runner, _REPORT_IS_READ) as stack:
        await stack.sessions.start_session("s", "make the report")
        yield stack


async def test_cancel_abandons_a_started_tool_task(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = _task_runner()
    async with _report_session(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await wait_for_agent_snapshot(
            sessions, "s", _record_waits(AgentToolCallStatus.WAITING_FOR_TASK)
        )
        await wait_until("a first poll", lambda: runner.polls)
        assert await sessions.cancel_turn("s", "turn-1")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert [c.tool_call.task_id for c in runner.cancelled] == ["job-1"]
        assert (
            runner.cancelled[0].tool_call.cancellation_reason is CancellationReason.TURN_CANCELLED
        )
        assert len(runner.model_calls) == 1
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_cancelled")
        finished = [e.payload_json() for e in events if e.type == "tool_call_finished"]
        assert finished == [
            {"tool_call_id": "report-1", "tool_name": "report", "status": "outcome_unknown"}
        ]
        assert "report-1" not in {r.tool_call_id for r in snapshot.tool_calls}


async def test_a_steer_waits_for_a_started_tool_task(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = _task_runner()
    async with _report_session(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await wait_until("a first poll", lambda: runner.polls)
        assert await sessions.steer_user_message("s", "also add totals")
        polls = len(runner.polls)
        await wait_until("another poll after the steer", lambda: len(runner.polls) > polls)
        snapshot = await sessions.get_agent_snapshot("s")
        assert is_active(snapshot) is not None and snapshot.state is not None
        assert snapshot.state.turn_count == 1
        runner.finish.set()
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        assert runner.cancelled == []
        assert snapshot.messages[-1].text == "heard also add totals"
        assert any("report ready" in (m.text or "") for m in snapshot.messages)


@pytest.mark.parametrize("control", ["cancel", "steer"])
async def test_a_question_asked_after_the_turn_was_stopped_never_waits(
    dex_in_process_worker: InProcessWorkerFactory, control: str
) -> None:
    gate = Gate()

    script = one_tool_call_then_echo("ship-1", "ship", {})

    async def ship(call: DeferredToolExecution) -> ToolInputRequested:
        await gate.pass_through()
        return ToolInputRequested("Ship it?", choices=("yes", "no"))

    runner = ScriptedRunner(script, {"ship": ship})  # type: ignore[dict-item]
    options = AgentSessionOptions(tool_policies={"ship": ToolPolicy(ToolEffect.READ)})
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "ship it")
        await gate.wait_reached()
        if control == "cancel":
            assert await sessions.cancel_turn("s", "turn-1")
            turns, reason = 1, CancellationReason.TURN_CANCELLED
        else:
            assert await sessions.steer_user_message("s", "do not ship")
            turns, reason = 2, CancellationReason.STEERED
        gate.opened.set()
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(turns))
        assert snapshot.pending_interrupts == ()
        assert len(runner.model_calls) == turns
        events = await read_events_until(
            stack, "s", lambda e: e.type in ("turn_cancelled", "turn_steered")
        )
        assert "interrupt_raised" not in [e.type for e in events]
        finished = [e.payload_json() for e in events if e.type == "tool_call_finished"]
        assert finished == [{"tool_call_id": "ship-1", "tool_name": "ship", "status": "rejected"}]
        result = (
            TURN_CANCELLED_TOOL_RESULT
            if reason is CancellationReason.TURN_CANCELLED
            else (STEERED_TOOL_RESULT)
        )
        assert any(result in (m.text or "") for m in snapshot.messages)


async def test_a_task_started_after_the_cancel_is_abandoned(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    gate = Gate()
    runner = _task_runner()

    async def start(call: DeferredToolExecution) -> ToolTaskStarted:
        await gate.pass_through()
        return ToolTaskStarted("job-1", 1)

    runner.tools = {"report": start}  # type: ignore[dict-item]
    async with _report_session(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await gate.wait_reached()
        assert await sessions.cancel_turn("s", "turn-1")
        gate.opened.set()
        await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert runner.polls == []
        assert [c.tool_call.task_id for c in runner.cancelled] == ["job-1"]
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_cancelled")
        finished = [e.payload_json() for e in events if e.type == "tool_call_finished"]
        assert finished == [
            {"tool_call_id": "report-1", "tool_name": "report", "status": "outcome_unknown"}
        ]

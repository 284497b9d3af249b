"""Approvals through the real engine: approve, reject, deadline, and finding waiting sessions."""

from __future__ import annotations

from datetime import timedelta

from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    read_events_until,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex import AsyncClient, SearchFlowEntry
from dex_agents import (
    AgentSessionOptions,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    InterruptKind,
    ToolExecutionResult,
)
from dex_agents.testing import (
    has_pending_interrupts,
    turn_ended,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory


def _refund_then_answer(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(turn, tool_call(turn, "refund-1", "refund", {"order": 7}))
    return final_answer_with_results(turn)


def _refund_runner() -> ScriptedRunner:
    async def refund(call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult(f"refunded with key {call.idempotency_key}")

    return ScriptedRunner(_refund_then_answer, {"refund": refund})


async def test_approved_call_runs_once(dex_in_process_worker: InProcessWorkerFactory) -> None:
    runner = _refund_runner()
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        await stack.sessions.start_session("session-1", "refund order 7")
        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "session-1", has_pending_interrupts
        )
        (interrupt,) = snapshot.pending_interrupts
        assert (interrupt.interrupt_id, interrupt.kind, interrupt.tool_name) == (
            "refund-1",
            InterruptKind.APPROVAL,
            "refund",
        )
        assert interrupt.deadline is None
        (record,) = snapshot.tool_calls
        assert record.status is AgentToolCallStatus.AWAITING_APPROVAL
        assert runner.tool_calls == []

        assert not await stack.sessions.resolve_interrupt("session-1", "unknown", approved=True)
        assert await stack.sessions.resolve_interrupt(
            "session-1", "refund-1", approved=True, rejection_message="ignored on approval"
        )
        assert not await stack.sessions.resolve_interrupt("session-1", "refund-1", approved=True)
        snapshot = await wait_for_agent_snapshot(stack.sessions, "session-1", turn_ended(1))
        assert (
            snapshot.messages[-1].text
            == f"refund=refunded with key {stack.dex.scoped('session-1')}/turn-1/refund-1"
        )
        assert len(runner.tool_calls) == 1
        (final,) = runner.model_calls[1].tool_calls.values()
        assert final.rejection_message is None

        events = await read_events_until(stack, "session-1", lambda e: e.type == "turn_completed")
        by_type = {event.type: event for event in events}
        assert by_type["tool_call_deferred"].payload_json() == {
            "effect": "unclassified",
            "requires_approval": True,
            "tool_call_id": "refund-1",
            "tool_name": "refund",
        }
        raised = by_type["interrupt_raised"].payload_json()
        assert (raised["interrupt_id"], raised["kind"], raised["deadline"]) == (
            "refund-1",
            "approval",
            None,
        )
        resolved = by_type["interrupt_resolved"].payload_json()
        assert (resolved["approved"], resolved["rejection_message"]) == (True, None)
        assert by_type["tool_call_finished"].payload_json()["status"] == "succeeded"
        assert by_type["tool_call_started"].step_execution_id == (
            by_type["tool_call_finished"].step_execution_id
        )
        assert [e.type for e in events].index("interrupt_resolved") < [
            e.type for e in events
        ].index("tool_call_started")


async def _search(client: AsyncClient, prefix: str) -> list[SearchFlowEntry]:
    page = await client.search_flows('ActiveStepTypes = "AwaitToolApproval"', 50)
    # The engine is shared: only this test's sessions count.
    return [entry for entry in page.flows if entry.flow_id.startswith(prefix)]


async def test_a_session_waiting_for_approval_is_searchable(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_session_stack(dex_in_process_worker, _refund_runner()) as stack:
        await stack.sessions.start_session("session-1", "refund order 7")
        await stack.sessions.start_session("session-2", "")
        await wait_for_agent_snapshot(stack.sessions, "session-1", has_pending_interrupts)
        found: list[SearchFlowEntry] = await wait_until(
            "the session to be searchable in AwaitToolApproval",
            lambda: _search(stack.client, stack.dex.session_prefix),
        )
        assert [entry.flow_id for entry in found] == [stack.dex.scoped("session-1")]
        assert await stack.sessions.resolve_interrupt("session-1", "refund-1", approved=False)
        await wait_for_agent_snapshot(stack.sessions, "session-1", turn_ended(1))
        assert await _search(stack.client, stack.dex.session_prefix) == []


async def test_rejected_call_never_runs_and_the_model_sees_the_reason(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = _refund_runner()
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        await stack.sessions.start_session("session-1", "refund order 7")
        await wait_for_agent_snapshot(stack.sessions, "session-1", has_pending_interrupts)
        assert await stack.sessions.resolve_interrupt(
            "session-1", "refund-1", approved=False, rejection_message="not this order"
        )
        snapshot = await wait_for_agent_snapshot(stack.sessions, "session-1", turn_ended(1))
        assert runner.tool_calls == []
        assert snapshot.messages[-1].text == (
            "refund=The user rejected this tool call. Reason: not this order"
        )
        assert snapshot.pending_interrupts == ()


async def test_approval_deadline_rejects_the_call(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = _refund_runner()
    options = AgentSessionOptions(interrupt_deadline=timedelta(seconds=1))
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await stack.sessions.start_session("session-1", "refund order 7")
        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "session-1", turn_ended(1), timeout=60
        )
        assert runner.tool_calls == []
        # The last model call is the one after the deadline (a model Step retried under load
        # adds a call before it).
        (record,) = runner.model_calls[-1].tool_calls.values()
        assert record.status is AgentToolCallStatus.REJECTED
        assert record.rejection_message == "approval deadline passed"
        assert snapshot.pending_interrupts == ()
        assert not await stack.sessions.resolve_interrupt("session-1", "refund-1", approved=True)

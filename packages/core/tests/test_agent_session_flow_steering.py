"""Steering through the real engine: steered turns end at a safe boundary and the next turn starts
with every steered message, in order; queued messages can be steered or deleted."""

from __future__ import annotations

from dataclasses import dataclass

from agent_session_test_support import (
    ScriptedRunner,
    read_events_until,
    request_tools,
    running_session_stack,
    tool_call,
    tool_returning,
)
from dex_agents import (
    STEERED_TOOL_RESULT,
    AgentSessionOptions,
    AgentStatus,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    BuiltInTool,
    CancellationReason,
    InteractionMode,
    MessageRole,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.testing import turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from turn_control_test_support import (
    Gate,
    call_is_final,
    echo_user_messages,
    is_active,
    lookup_running_refund_waiting,
    user_texts,
)


async def test_steer_during_a_model_call_rejects_its_tool_calls(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    gate = Gate()

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.turn_id == "turn-1":
            return request_tools(
                turn, tool_call(turn, "a", "lookup", {"q": 1}), tool_call(turn, "b", "lookup", {})
            )
        return echo_user_messages(turn)

    runner = ScriptedRunner(
        script,
        {"lookup": tool_returning("found")},
        before_model_call=gate.hold_model_calls("turn-1"),
    )
    options = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "look it up")
        await gate.wait_reached()
        assert await sessions.steer_user_message("s", "first steer")
        assert await sessions.steer_user_message("s", "second steer")
        snapshot = await sessions.get_agent_snapshot("s")
        assert [m.text for m in snapshot.steered_messages] == ["first steer", "second steer"]
        gate.opened.set()
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        # Neither call ran: each was rejected before tool_call_started.
        assert runner.tool_calls == []
        assert snapshot.messages[-1].text == "heard first steer | second steer"
        assert snapshot.steered_messages == ()
        second_turn = runner.model_calls[-1]
        assert user_texts(second_turn) == ["first steer", "second steer"]
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_completed")
        steered = [e.payload_json() for e in events if e.type == "turn_steered"]
        assert len(steered) == 1 and steered[0]["steered_message_count"] == 2
        finished = [e.payload_json() for e in events if e.type == "tool_call_finished"]
        assert {(f["tool_call_id"], f["status"]) for f in finished} == {
            ("a", "rejected"),
            ("b", "rejected"),
        }
        # The note of the steered turn shows the model both calls as superseded.
        assert any(STEERED_TOOL_RESULT in (m.text or "") for m in second_turn.messages)


async def test_steer_while_a_tool_runs_lets_it_finish_and_rejects_a_waiting_sibling(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    gate = Gate()
    async with lookup_running_refund_waiting(dex_in_process_worker, gate) as (runner, stack):
        sessions = stack.sessions
        assert await sessions.steer_user_message("s", "stop, use order 8")
        snapshot = await wait_for_agent_snapshot(sessions, "s", call_is_final("write"))
        records = {r.tool_call_id: r for r in snapshot.tool_calls}
        assert records["write"].status is AgentToolCallStatus.REJECTED
        assert records["write"].cancellation_reason is CancellationReason.STEERED
        assert snapshot.pending_interrupts == ()
        # The started tool still runs: the turn waits for it.
        assert records["slow"].status is AgentToolCallStatus.APPROVED
        assert snapshot.state is not None and snapshot.state.active_turn_id == "turn-1"
        assert not await sessions.resolve_interrupt("s", "write", approved=True)
        gate.opened.set()
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        assert [c.tool_call.tool_name for c in runner.tool_calls] == ["lookup"]
        # Only the first model call of turn-1 ran; the next one is turn-2's.
        assert [t.turn_id for t in runner.model_calls] == ["turn-1", "turn-2"]
        assert snapshot.messages[-1].text == "heard stop, use order 8"
        note = "\n".join(m.text or "" for m in runner.model_calls[-1].messages)
        assert "slow result" in note and STEERED_TOOL_RESULT in note
        events = await read_events_until(stack, "s", lambda e: e.type == "turn_completed")
        resolved = [e.payload_json() for e in events if e.type == "interrupt_resolved"]
        assert resolved == [
            {
                "interrupt_id": "write",
                "approved": False,
                "rejection_message": None,
                "kind": "approval",
                "answered": False,
                "cancellation_reason": "steered",
            }
        ]


async def test_steer_a_queued_message_by_id_and_delete_another(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    gate = Gate()

    runner = ScriptedRunner(echo_user_messages, before_model_call=gate.hold_model_calls("turn-1"))
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "hello")
        await gate.wait_reached()
        assert await sessions.send_user_message("s", "queued one")
        assert await sessions.send_user_message("s", "queued two")
        assert await sessions.send_user_message("s", "queued three")
        snapshot = await sessions.get_agent_snapshot("s")
        _one, two, three = snapshot.queued_messages
        assert await sessions.steer_user_message("s", message_id=two.message_id)
        # The same message is no longer queued.
        assert not await sessions.steer_user_message("s", message_id=two.message_id)
        assert await sessions.delete_queued_message("s", three.message_id)
        assert not await sessions.delete_queued_message("s", three.message_id)
        snapshot = await sessions.get_agent_snapshot("s")
        assert [m.text for m in snapshot.queued_messages] == ["queued one"]
        assert [(m.text, m.message_id) for m in snapshot.steered_messages] == [
            ("queued two", snapshot.steered_messages[0].message_id)
        ]
        gate.opened.set()
        # The model call finishes and completes turn-1 as usual; the steer starts turn-2, and the
        # queued message then starts turn-3.
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(3))
        texts = [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT]
        assert texts == ["heard hello", "heard queued two", "heard queued one"]


async def test_steer_rpc_edge_cases(dex_in_process_worker: InProcessWorkerFactory) -> None:
    gate = Gate()

    runner = ScriptedRunner(echo_user_messages, before_model_call=gate.hold_model_calls("turn-2"))
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "")
        await wait_for_agent_snapshot(sessions, "s", turn_ended(0))
        assert not await sessions.steer_user_message("s")
        assert not await sessions.steer_user_message("s", "text", message_id="1")
        assert not await sessions.steer_user_message("s", "   ")
        assert not await sessions.steer_user_message("s", "plan it", plan_mode=True)
        assert not await sessions.steer_user_message("s", message_id="no-such-message")
        # While no turn is active, steering text queues it, so it starts the next turn at once.
        assert await sessions.steer_user_message("s", "idle steer")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert snapshot.messages[-1].text == "heard idle steer"
        assert await sessions.send_user_message("s", "second")
        await gate.wait_reached()
        assert not await sessions.steer_user_message("s", message_id="no-such-message")
        assert not await sessions.delete_queued_message("s", "no-such-message")
        gate.opened.set()
        await wait_for_agent_snapshot(sessions, "s", turn_ended(2))


async def test_a_turn_that_does_not_accept_turn_control_is_not_steered(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    """``accepts_turn_control`` is True for turns this release starts."""
    gate = Gate()

    runner = ScriptedRunner(echo_user_messages, before_model_call=gate.hold_model_calls())
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        await stack.sessions.start_session("s", "hi")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", is_active)
        assert snapshot.state is not None and snapshot.state.accepts_turn_control
        assert snapshot.state.status is AgentStatus.RUNNING_MODEL
        gate.opened.set()
        await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))


@dataclass
class _PlanningRunner(ScriptedRunner):
    supports_plan_mode: bool = True


async def test_a_steered_plan_mode_message_starts_a_planning_turn(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    gate = Gate()

    runner = _PlanningRunner(echo_user_messages, before_model_call=gate.hold_model_calls("turn-1"))
    options = AgentSessionOptions(
        built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}), plan_mode_enabled=True
    )
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "hello")
        await gate.wait_reached()
        assert await sessions.send_user_message("s", "plan the migration", plan_mode=True)
        (queued,) = (await sessions.get_agent_snapshot("s")).queued_messages
        assert queued.plan_mode
        assert await sessions.steer_user_message("s", message_id=queued.message_id)
        assert (await sessions.get_agent_snapshot("s")).steered_messages[0].plan_mode
        gate.opened.set()
        await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        modes = [(turn.turn_id, turn.interaction_mode) for turn in runner.model_calls]
        assert modes == [("turn-1", InteractionMode.CHAT), ("turn-2", InteractionMode.PLANNING)]

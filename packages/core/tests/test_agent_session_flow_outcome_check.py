"""The outcome check of single-attempt tools, through a real engine and a SIGKILLed Worker.

One turn runs five single-attempt payments in parallel; the Worker is killed while every one
waits at its gate, so each call's one attempt is lost. Each tool's check then answers
differently: applied, not applied, not applied with run-again, unknown, and raising.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    request_tools,
    running_session_stack,
    tool_call,
)
from agent_session_test_support.crash_agent import STATE_DIR_ENV
from agent_session_test_support.outcome_check_agent import (
    CALLS,
    CHECK_FAILURE,
    FINAL_MODEL_GATE,
    LEDGER,
    build_outcome_check_flow,
    log,
)
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    TOOL_CALL_NOT_APPLIED_ERROR_PREFIX,
    AgentSessionClient,
    AgentSessionOptions,
    AgentTracingOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionResult,
    ToolOutcomeCheck,
    ToolOutcomeCheckRequest,
    ToolOutcomeCheckResult,
    ToolOutcomeCheckStatus,
    ToolPolicy,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    FileGate,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from tracing_test_support import traced

TESTS_DIR = Path(__file__).resolve().parent
SESSION = "session-1"


def _key(call_id: str) -> str:
    return f"{SESSION}/turn-1/{call_id}"


async def _finished_events(sessions: AgentSessionClient) -> dict[str, dict[str, object]]:
    """The ``tool_call_finished`` payloads of the turn, by tool call ID."""
    finished: dict[str, dict[str, object]] = {}
    async for message in sessions.stream_events(SESSION):
        event = message.value
        if event.type == "tool_call_finished":
            payload = event.payload_json()
            finished[str(payload["tool_call_id"])] = payload
        if event.type == "turn_completed":
            return finished
    return finished


async def test_a_lost_write_is_settled_by_its_outcome_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))  # the test reads the same log
    flow = build_outcome_check_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        "agent_session_test_support.outcome_check_worker",
        worker_cwd=TESTS_DIR,
        worker_env={STATE_DIR_ENV: str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        worker = await stack.start_worker()
        await sessions.start_session(SESSION, "pay order 7, five ways")
        gates = [FileGate(tmp_path, gate) for _, gate, _ in CALLS.values()]
        for gate in gates:
            await gate.wait_until_reached()
        worker.kill()  # every call's one attempt is lost mid-write

        await stack.start_worker()
        for gate in gates:
            gate.release()  # a wrongly repeated call would pass its gate and be counted
        final_model = FileGate(tmp_path, FINAL_MODEL_GATE)
        await final_model.wait_until_reached()
        snapshot = await sessions.get_agent_snapshot(SESSION)
        final_model.release()
        done = await wait_for_agent_snapshot(
            sessions, SESSION, turn_ended(1), "the turn to finish", timeout=120
        )
        finished = await _finished_events(sessions)
        history = await stack.read_step_history(SESSION)

    # How many times each write ran (the same key each time), and what took effect.
    assert sorted(log().keys("pay")) == sorted([_key("c-applied"), _key("c-not-applied")])
    assert log().keys("pay_again") == [_key("c-again")] * 2  # not applied, so it ran again
    assert log().keys("pay_unsure") == [_key("c-unknown")]
    assert log().keys("pay_check_down") == [_key("c-raises")]
    assert sorted(log().keys(LEDGER)) == sorted(
        [_key("c-applied"), _key("c-unknown"), _key("c-raises"), _key("c-again")]
    )
    # How many times each check ran: once, except the failing one, retried like a read.
    assert sorted(log().keys("check:pay")) == sorted([_key("c-applied"), _key("c-not-applied")])
    assert log().keys("check:pay_again") == [_key("c-again")]
    assert log().keys("check:pay_unsure") == [_key("c-unknown")]
    assert log().keys("check:pay_check_down") == [_key("c-raises")] * 3

    # The snapshot's records: status, the check's answer, what the model will see.
    records = {record.tool_call_id: record for record in snapshot.tool_calls}
    summary = {
        call_id: (record.status.value, record.outcome_check, record.run_again_count)
        for call_id, record in records.items()
    }
    assert summary == {
        "c-applied": ("succeeded", ToolOutcomeCheckStatus.APPLIED, 0),
        "c-not-applied": ("failed", ToolOutcomeCheckStatus.NOT_APPLIED, 0),
        "c-again": ("succeeded", ToolOutcomeCheckStatus.NOT_APPLIED, 1),
        "c-unknown": ("outcome_unknown", ToolOutcomeCheckStatus.UNKNOWN, 0),
        "c-raises": ("outcome_unknown", ToolOutcomeCheckStatus.CHECK_FAILED, 0),
    }
    assert records["c-applied"].output == "paid order 7"
    assert records["c-again"].output == "paid order 7"
    not_applied_error = records["c-not-applied"].error or ""
    assert not_applied_error.startswith(TOOL_CALL_NOT_APPLIED_ERROR_PREFIX)
    assert not_applied_error.endswith("no payment with this key")
    assert "the provider has no lookup for this payment" in (records["c-unknown"].error or "")
    assert CHECK_FAILURE in (records["c-raises"].error or "")

    # tool_call_finished says the outcome was checked, and how.
    assert {call_id: (p["status"], p.get("outcome_check")) for call_id, p in finished.items()} == {
        "c-applied": ("succeeded", "applied"),
        "c-not-applied": ("failed", "not_applied"),
        "c-again": ("succeeded", "not_applied"),
        "c-unknown": ("outcome_unknown", "unknown"),
        "c-raises": ("outcome_unknown", "check_failed"),
    }

    # The checks ran in their own Steps; the one that ran again went back to its tool Step.
    executed = [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
    assert executed.count("CheckToolOutcome") == 4  # the raising check's Step failed
    assert executed.count("RecordToolOutcomeUnknown") == 6  # 5 lost calls + the failed check
    assert executed.count("CallSingleAttemptTool") == 1  # the run again

    # What the model's next call saw, in deferral order.
    text = done.messages[-1].text or ""
    assert text == "; ".join(
        [
            "pay=paid order 7",
            f"pay=Error: {not_applied_error}",
            "pay_again=paid order 7",
            f"pay_unsure={OUTCOME_UNKNOWN_TOOL_RESULT}",
            f"pay_check_down={OUTCOME_UNKNOWN_TOOL_RESULT}",
        ]
    )
    assert done.state is not None and done.state.last_turn_error is None


async def test_the_check_and_a_run_again_carry_the_answer_on_their_execute_tool_spans(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    # A single-attempt tool that raises anything but ToolExecutionError loses its attempt just
    # as a killed Worker does (the failure route cannot tell whether it took effect).
    ran: list[str] = []

    async def pay(call: DeferredToolExecution) -> ToolExecutionResult:
        ran.append(call.tool_call.tool_call_id)
        if ran.count(call.tool_call.tool_call_id) == 1:
            raise RuntimeError("the payment provider's connection dropped")
        return ToolExecutionResult("paid again")

    def confirm(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
        if request.tool_call_id == "c-confirmed":
            return ToolOutcomeCheckResult.applied("paid (confirmed)")
        return ToolOutcomeCheckResult.not_applied("no payment")

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            return request_tools(
                turn,
                tool_call(turn, "c-confirmed", "pay", {"order": 7}),
                tool_call(turn, "c-again", "pay", {"order": 8}),
            )
        return final_answer_with_results(turn)

    spans = traced()
    options = AgentSessionOptions(
        tool_policies={
            "pay": ToolPolicy(
                ToolEffect.NON_IDEMPOTENT_WRITE,
                requires_approval=False,
                outcome_check=ToolOutcomeCheck(confirm, run_again_if_not_applied=True),
            )
        },
        tracing=AgentTracingOptions(tracer_provider=spans.provider),
    )
    runner = ScriptedRunner(script, {"pay": pay})
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        result = await stack.sessions.run_turn("s-traced", "pay twice")

    assert result.text == "pay=paid (confirmed); pay=paid again"
    # The turn-level result says which calls a check settled, and how.
    assert {
        (call.tool_call_id, call.status.value, call.outcome_check) for call in result.tool_calls
    } == {
        ("c-confirmed", "succeeded", ToolOutcomeCheckStatus.APPLIED),
        ("c-again", "succeeded", ToolOutcomeCheckStatus.NOT_APPLIED),
    }
    assert sorted(ran) == ["c-again", "c-again", "c-confirmed"]
    tool_spans = [span for span in spans.spans() if span.name == "execute_tool pay"]
    answered = {
        (
            span.attr("gen_ai.tool.call.id"),
            span.attr("dex.agent.tool_call.status"),
            span.attr("dex.agent.tool_call.outcome_check"),
        )
        for span in tool_spans
    }
    assert answered == {
        ("c-confirmed", None, None),  # the lost attempt: an ERROR span
        ("c-again", None, None),
        ("c-confirmed", "succeeded", "applied"),  # CheckToolOutcome's span
        ("c-again", "approved", "not_applied"),  # CheckToolOutcome's: it runs once more
        ("c-again", "succeeded", "not_applied"),  # the run again after the check
    }
    assert len(tool_spans) == 5

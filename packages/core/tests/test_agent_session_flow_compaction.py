"""Compaction and retention through the real engine, with a scripted compacting runner."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import pytest
from agent_session_test_support import ScriptedRunner, assistant
from compaction_test_support import (
    CompactingScriptedRunner,
    calls_separated_by,
    swappable_worker_stack,
)
from dex_agents import (
    AGENT_MESSAGE_INDEX,
    AgentEventType,
    AgentMessage,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    CompactionPolicy,
    ConfigurationTypeError,
    ContextSummaryRequest,
    RunModelLimit,
    TurnCompleted,
    estimate_stored_input_tokens,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    read_agent_message_pages,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

FLOW_TYPE = "CompactingAgent"
POLICY = CompactionPolicy(context_window_tokens=200)
TURNS = 30


def _reply(turn: AgentTurnContext) -> AgentTurnOutcome:
    return TurnCompleted((assistant(f"reply to {turn.messages[-1].text}"),), AgentUsage())


def _options(**overrides: object) -> AgentSessionOptions:
    values: dict[str, object] = {
        "compaction": POLICY,
        "message_window_size": 4,
        "message_chunk_size": 2,
        "retained_message_limit": 6,
    }
    values.update(overrides)
    return AgentSessionOptions(**values)  # type: ignore[arg-type]


async def _run_turns(sessions: AgentSessionClient, session_id: str, turns: int) -> None:
    await sessions.start_session(session_id, "message 1")
    await wait_for_agent_snapshot(sessions, session_id, turn_ended(1))
    for number in range(2, turns + 1):
        assert await sessions.send_user_message(session_id, f"message {number}")
        await wait_for_agent_snapshot(sessions, session_id, turn_ended(number))


async def test_compaction_summarizes_and_retention_deletes_whole_chunks(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = CompactingScriptedRunner(_reply)
    flow = AgentSessionFlow(runner, flow_type=FLOW_TYPE, options=_options())
    async with swappable_worker_stack(dex_in_process_worker) as stack:
        async with stack.serve(flow) as sessions:
            await _run_turns(sessions, "s1", TURNS)
            snapshot = await sessions.get_agent_snapshot("s1")
            first_page = await sessions.list_agent_messages("s1", after_sequence=1, limit=3)
            events = await stack.events_until(
                flow, "s1", lambda e: e.type == "turn_completed" and e.turn_id == f"turn-{TURNS}"
            )
        attributes = await stack.attributes("s1")
        history = await stack.read_step_history("s1")

    summaries = runner.summary_requests
    assert len(summaries) >= 2
    # Each summary folds the previous one and the messages after it, through a turn boundary.
    assert summaries[0].previous_summary is None
    assert summaries[0].messages[0].sequence == 1
    for earlier, later in itertools.pairwise(summaries):
        assert later.previous_summary is not None
        assert later.messages[0].sequence == earlier.messages[-1].sequence + 1
    assert all(request.input_token_budget == 200 for request in summaries)

    # The model input stays under the window, starts after the summary, and carries it.
    for turn in runner.model_calls:
        assert estimate_stored_input_tokens(turn) < POLICY.context_window_tokens
        if turn.context_summary is not None:
            assert turn.messages[0].sequence == turn.context_summary.last_sequence + 1
    assert runner.model_calls[-1].context_summary is not None

    summary = snapshot.context_summary
    assert summary is not None and summary.generation == len(summaries)
    assert (summary.first_sequence, summary.text) == (1, _summary_text(summaries[-1]))

    # Retention deleted whole chunks at or before the summary, keeping the newest 6 messages.
    index = attributes.json_of(AGENT_MESSAGE_INDEX.name)
    assert isinstance(index, dict)
    first = index["first_sequence"]
    assert first > 1
    assert first - 1 <= summary.last_sequence
    assert snapshot.state is not None
    assert snapshot.state.last_message_sequence - first + 1 >= 6
    assert snapshot.deleted_before_sequence == first
    assert snapshot.messages[0].sequence == first
    assert all(int(key) >= first for key in attributes.instance_keys("AGENT_MESSAGE_CHUNKS"))

    # A reader that asks for deleted messages resumes where the kept ones start.
    assert first_page.deleted_before_sequence == first
    assert first_page.messages[0].sequence == max(first, 2)

    executed = [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
    assert executed.count("CompactContext") == len(summaries)
    started = [e for e in events if e.type == AgentEventType.COMPACTION_STARTED]
    finished = [
        json.loads(e.payload) for e in events if e.type == AgentEventType.COMPACTION_FINISHED
    ]
    assert len(started) == len(summaries)
    assert [p["generation"] for p in finished] == list(range(1, len(summaries) + 1))
    assert finished[-1]["through_sequence"] == summary.last_sequence
    assert snapshot.usage.input_tokens >= 100 * len(summaries)


def _summary_text(request: ContextSummaryRequest) -> str:
    messages = request.messages
    return f"summary of {messages[0].sequence}..{messages[-1].sequence}"


async def test_without_compaction_nothing_is_deleted(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_reply)
    flow = AgentSessionFlow(runner, flow_type=FLOW_TYPE, options=_options(compaction=None))
    async with (
        swappable_worker_stack(dex_in_process_worker) as stack,
        stack.serve(flow) as sessions,
    ):
        await _run_turns(sessions, "s1", 12)
        snapshot = await sessions.get_agent_snapshot("s1")
    assert snapshot.deleted_before_sequence is None
    assert snapshot.context_summary is None
    assert [m.sequence for m in snapshot.messages] == list(range(1, 25))
    assert [m.sequence for m in runner.model_calls[-1].messages] == list(range(1, 24))


async def test_retained_message_limit_none_keeps_every_message(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = CompactingScriptedRunner(_reply)
    flow = AgentSessionFlow(
        runner, flow_type=FLOW_TYPE, options=_options(retained_message_limit=None)
    )
    async with (
        swappable_worker_stack(dex_in_process_worker) as stack,
        stack.serve(flow) as sessions,
    ):
        await _run_turns(sessions, "s1", 20)
        pages = await read_agent_message_pages(sessions, "s1", limit=7)
    assert runner.summary_requests
    assert all(page.deleted_before_sequence is None for page in pages)
    assert [m.sequence for page in pages for m in page.messages] == list(range(1, 41))


def test_a_policy_on_a_runner_without_compaction_is_a_type_error() -> None:
    with pytest.raises(
        ConfigurationTypeError, match=r"ContextCompactionRunner.*estimate_input_tokens"
    ):
        AgentSessionFlow(ScriptedRunner(_reply), flow_type=FLOW_TYPE, options=_options())


async def test_a_second_high_estimate_finds_no_new_cutoff_and_calls_the_model(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    # Every message is huge, so even right after a compaction the estimate stays above the trigger.
    def reply(turn: AgentTurnContext) -> AgentTurnOutcome:
        return TurnCompleted((assistant("y" * 900),), AgentUsage())

    runner = CompactingScriptedRunner(reply)
    flow = AgentSessionFlow(runner, flow_type=FLOW_TYPE, options=_options())
    async with (
        swappable_worker_stack(dex_in_process_worker) as stack,
        stack.serve(flow) as sessions,
    ):
        await _run_turns(sessions, "s1", 4)
        snapshot = await sessions.get_agent_snapshot("s1")
    # One compaction per turn after the first at most: never two in a row for one model call.
    assert len(runner.model_calls) == 4
    assert 1 <= len(runner.summary_requests) <= 3
    assert snapshot.state is not None and snapshot.state.last_turn_error is None


def test_separated_calls_helper_sees_a_cut_between_call_and_result() -> None:
    from dex_agents import MessageRole

    call = AgentMessage(3, MessageRole.ASSISTANT, "{}", tool_call_id="c1", tool_name="t")
    result = AgentMessage(4, MessageRole.TOOL, "{}", tool_call_id="c1", tool_name="t")
    assert calls_separated_by([call, result], 3) == ["c1"]
    assert calls_separated_by([call, result], 4) == []


async def test_a_worker_killed_in_compact_context_reruns_only_the_summary_call(
    tmp_path: Path,
) -> None:
    from compaction_test_support.crash_agent import (
        STATE_DIR_ENV,
        SUMMARY_GATE,
        build_compaction_crash_flow,
        invocation_log,
    )
    from dex_agents.testing import AgentTestStack, FileGate

    flow = build_compaction_crash_flow()
    turns = 12
    async with AgentTestStack(
        tmp_path,
        [flow],
        "compaction_test_support.crash_worker",
        worker_cwd=Path(__file__).resolve().parent,
        worker_env={STATE_DIR_ENV: str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        worker = await stack.start_worker()
        await sessions.start_session("s1", "message 1")
        for number in range(2, turns + 1):
            assert await sessions.send_user_message("s1", f"message {number}")
        gate = FileGate(tmp_path, SUMMARY_GATE)
        await gate.wait_until_reached()
        compacting = await sessions.get_agent_snapshot("s1")
        assert compacting.state is not None
        assert compacting.state.status is AgentStatus.COMPACTING_CONTEXT
        worker.kill()

        await stack.start_worker()
        await gate.wait_until_reached(count=2)
        gate.release()
        snapshot = await wait_for_agent_snapshot(
            sessions, "s1", turn_ended(turns), "every turn to finish", timeout=120
        )
        history = await stack.read_step_history("s1")

    log = invocation_log(tmp_path)
    summary_calls = log.keys("summary")
    # The killed attempt's summary call ran again as attempt 2; no model call ran twice.
    assert summary_calls[:2] == [summary_calls[0], summary_calls[0].replace("/1", "/2")]
    model_calls = log.keys("model")
    assert len(model_calls) == turns
    assert len({key.split("/")[0] for key in model_calls}) == turns
    compactions = [
        e
        for e in history
        if e.event_type == EXECUTE_COMPLETED_EVENT and e.step_type == "CompactContext"
    ]
    assert compactions[0].final_attempt == 2
    assert len(compactions) == len(summary_calls) - 1
    assert snapshot.context_summary is not None
    assert snapshot.context_summary.generation == len(compactions)
    assert snapshot.state is not None and snapshot.state.last_turn_error is None


async def test_a_summary_call_that_keeps_failing_fails_the_turn_through_record_turn_failure(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async def broken_summary(request: ContextSummaryRequest) -> None:
        raise RuntimeError("summary model unavailable")

    runner = CompactingScriptedRunner(_reply, before_summary=broken_summary)
    options = _options(run_model_limit=RunModelLimit(maximum_attempts=2))
    flow = AgentSessionFlow(runner, flow_type=FLOW_TYPE, options=options)
    async with swappable_worker_stack(dex_in_process_worker) as stack:
        async with stack.serve(flow) as sessions:
            await sessions.start_session("s1", "message 1")
            number = 1
            snapshot = await wait_for_agent_snapshot(sessions, "s1", turn_ended(number))
            while not runner.summary_requests:
                number += 1
                assert await sessions.send_user_message("s1", f"message {number}")
                snapshot = await wait_for_agent_snapshot(sessions, "s1", turn_ended(number))
        history = await stack.read_step_history("s1")

    assert snapshot.state is not None
    assert "summary model unavailable" in (snapshot.state.last_turn_error or "")
    assert snapshot.context_summary is None
    assert [request.attempt for request in runner.summary_requests] == [1, 2]
    # The failing turn made no model call: it failed while compacting.
    assert all(turn.turn_id != f"turn-{number}" for turn in runner.model_calls)
    executed = [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
    assert executed[-1] == "RecordTurnFailure"


async def test_a_runner_without_compaction_warns_on_a_session_with_deleted_messages(
    dex_in_process_worker: InProcessWorkerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async with swappable_worker_stack(dex_in_process_worker) as stack:
        compacting = AgentSessionFlow(
            CompactingScriptedRunner(_reply), flow_type=FLOW_TYPE, options=_options()
        )
        async with stack.serve(compacting) as sessions:
            await _run_turns(sessions, "s1", TURNS)
            deleted = (await sessions.get_agent_snapshot("s1")).deleted_before_sequence
        assert deleted is not None

        plain = ScriptedRunner(_reply)
        flow = AgentSessionFlow(plain, flow_type=FLOW_TYPE, options=_options(compaction=None))
        with caplog.at_level(logging.WARNING, logger="dex_agents.session"):
            async with stack.serve(flow) as sessions:
                assert await sessions.send_user_message("s1", "after the policy was removed")
                await wait_for_agent_snapshot(sessions, "s1", turn_ended(TURNS + 1))

    warnings = [r.getMessage() for r in caplog.records if "deleted the messages" in r.getMessage()]
    assert len(warnings) == 1
    assert f"before sequence {deleted}" in warnings[0]
    # Its input starts after the deleted messages, with no summary.
    (turn,) = plain.model_calls
    assert turn.messages[0].sequence == deleted
    assert turn.context_summary is None

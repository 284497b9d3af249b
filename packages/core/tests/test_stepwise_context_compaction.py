"""Stepwise compaction: mid-turn cuts keep calls with results; the summary request fits."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Annotated

from compaction_test_support import calls_separated_by, swappable_worker_stack
from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    CONTEXT_SUMMARY_TRANSCRIPT_HEADER,
    AgentEventWriter,
    AgentMessage,
    AgentTurnContext,
    CompactionPolicy,
    ContextSummary,
    ContextSummaryRequest,
    ToolEffect,
    build_context_summary_omission_note,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ModelToolResult,
    ModelUserText,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    StepwiseAgentRunner,
    function_tool,
    stepwise_agent_session_flow,
)
from dex_agents.stepwise._compaction import (
    CONTEXT_SUMMARY_REQUEST_NOTE,
    response_boundaries,
)
from dex_agents.stepwise._input_items import (
    model_output_message,
    tool_result_message,
    user_text_message,
)
from dex_agents.stepwise._model_client import ModelOutputItem, ModelOutputItemKind, ModelToolCall
from dex_agents.testing import turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

CALLS_PER_TURN = 12


@function_tool(effect=ToolEffect.READ)
async def read_page(page: Annotated[int, "The page number"]) -> str:
    """Read one page of the report."""
    return f"page {page}: " + "lorem ipsum " * 80


def _pages_read(request: ModelRequest) -> int:
    """The highest page the input shows as read: from tool results or the summary's text."""
    pages = [
        int(item.output.split(":")[0].split()[1])
        for item in request.input
        if isinstance(item, ModelToolResult) and item.output.startswith("page ")
    ]
    pages += [
        int(item.text.rsplit(" ", 1)[1])
        for item in request.input
        if isinstance(item, ModelUserText) and "read through page" in item.text
    ]
    return max(pages, default=0)


def _agent(requests: list[ModelRequest], summaries: list[ModelRequest]) -> AgentDefinition:
    def respond(request: ModelRequest) -> ScriptedModelReply:
        read = _pages_read(request)
        if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            summaries.append(request)
            return ScriptedModelReply(text=f"summary {len(summaries)}: read through page {read}")
        requests.append(request)
        reading = read > 0 or ScriptedModelClient.user_texts(request)[-1].startswith("read")
        if reading and read < CALLS_PER_TURN:
            return ScriptedModelReply(
                tool_calls=[ScriptedToolCall("read_page", {"page": read + 1})]
            )
        return ScriptedModelReply(text="finished" if reading else "hello to you")

    return AgentDefinition(
        name="reader",
        instructions="Read the report page by page.",
        model=ScriptedModelClient(respond),
        tools=[read_page],
        max_model_calls_per_turn=50,
        compaction=CompactionPolicy(context_window_tokens=3_000),
    )


async def test_a_turn_with_many_tool_calls_compacts_mid_turn_without_splitting_pairs(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    requests: list[ModelRequest] = []
    summaries: list[ModelRequest] = []
    agent = _agent(requests, summaries)
    flow = stepwise_agent_session_flow(agent, flow_type="ReaderAgent")
    assert flow.options.compaction == agent.compaction
    async with (
        swappable_worker_stack(dex_in_process_worker) as stack,
        stack.serve(flow) as sessions,
    ):
        await sessions.start_session("s1", "hello")
        await wait_for_agent_snapshot(sessions, "s1", turn_ended(1))
        assert await sessions.send_user_message("s1", "read the report")
        snapshot = await wait_for_agent_snapshot(sessions, "s1", turn_ended(2))
        messages = list(snapshot.messages)

    summary = snapshot.context_summary
    assert summary is not None and summaries
    turn_two = [m.sequence for m in messages if m.turn_id == "turn-2"]
    # The cut fell inside the running turn, between responses, never between call and result.
    assert turn_two[0] <= summary.last_sequence < turn_two[-1]
    assert calls_separated_by(messages, summary.last_sequence) == []
    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert messages[-1].text == "finished"
    # Every page was read once, in order, and the calls after the summary start with the note.
    results = [
        m.tool_output or "" for m in messages if m.tool_name == "read_page" and m.tool_output
    ]
    assert [r.split(":")[0] for r in results] == [f"page {n}" for n in range(1, 13)]
    first_input = requests[-1].input[0]
    assert isinstance(first_input, ModelUserText)
    assert first_input.text == f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{summary.text}"
    # The summary call offers no tools and starts with the transcript header.
    assert all(request.tools == () for request in summaries)
    header = summaries[0].input[0]
    assert isinstance(header, ModelUserText) and header.text == CONTEXT_SUMMARY_TRANSCRIPT_HEADER
    last = summaries[0].input[-1]
    assert isinstance(last, ModelUserText) and last.text == CONTEXT_SUMMARY_REQUEST_NOTE


def _call(sequence: int, call_id: str, response: str) -> AgentMessage:
    item = ModelOutputItem(
        "scripted", ModelOutputItemKind.TOOL_CALL, "{}", None, ModelToolCall(call_id, "t", "{}")
    )
    return AgentMessage.from_framework_message(
        model_output_message(item, response), sequence=sequence, turn_id="turn-1", created_at=None
    )


def _result(sequence: int, call_id: str) -> AgentMessage:
    return AgentMessage.from_framework_message(
        tool_result_message(ModelToolResult(call_id, "t", "x" * 300)),
        sequence=sequence,
        turn_id="turn-1",
        created_at=None,
    )


def _user(sequence: int, text: str) -> AgentMessage:
    return AgentMessage.from_framework_message(
        user_text_message(text), sequence=sequence, turn_id="turn-1", created_at=None
    )


def test_response_boundaries_never_fall_between_a_call_and_its_result() -> None:
    messages = [
        _user(1, "go"),
        _call(2, "a", "turn-1/1"),
        _call(3, "b", "turn-1/1"),
        _result(4, "a"),
        _result(5, "b"),
        _call(6, "c", "turn-1/2"),
        _result(7, "c"),
        _call(8, "d", "turn-1/3"),
    ]
    # After the user text, after both results of response 1, after response 2's result.
    assert response_boundaries(messages) == [0, 4, 6]


async def test_a_summary_request_over_budget_leaves_out_whole_oldest_responses() -> None:
    seen: list[ModelRequest] = []

    def respond(request: ModelRequest) -> ScriptedModelReply:
        seen.append(request)
        return ScriptedModelReply(text="short summary")

    model = ScriptedModelClient(respond)
    runner = StepwiseAgentRunner(
        AgentDefinition(name="s", instructions="i", model=model, max_output_tokens=200)
    )
    messages = tuple(
        message
        for n in range(5)
        for message in (_call(1 + 2 * n, f"c{n}", f"turn-1/{n}"), _result(2 + 2 * n, f"c{n}"))
    )
    full = ContextSummaryRequest(
        flow_id="f",
        turn_id="turn-1",
        attempt=1,
        previous_summary=ContextSummary(1, 1, 0, "earlier", datetime.now(UTC)),
        messages=messages,
        input_token_budget=100_000,
    )
    result = await runner.summarize_context(full)
    assert result.text == "short summary"
    assert not any("left out" in (getattr(item, "text", None) or "") for item in seen[0].input)
    budget = model.estimate_input_tokens(seen[0]) + 200 - 250
    tight = ContextSummaryRequest(**{**full.__dict__, "input_token_budget": budget})
    await runner.summarize_context(tight)
    texts = [item.text for item in seen[1].input if isinstance(item, ModelUserText)]
    omitted = next(text for text in texts if text.startswith("[Dex] ") and "left out" in text)
    count = int(omitted.split()[1])
    assert omitted == build_context_summary_omission_note(count)
    assert count % 2 == 0 and count >= 2  # whole call/result pairs only
    results = [item for item in seen[1].input if isinstance(item, ModelToolResult)]
    assert len(results) == 5 - count // 2
    assert model.estimate_input_tokens(seen[1]) + 200 <= budget
    assert texts[1] == f"{CONTEXT_SUMMARY_NOTE_HEADER}\nearlier"


def test_the_estimate_counts_the_summary_note_and_the_messages_as_the_model_would() -> None:
    model = ScriptedModelClient(lambda request: ScriptedModelReply(text="unused"))
    runner = StepwiseAgentRunner(
        AgentDefinition(name="s", instructions="Be brief.", model=model, tools=[read_page])
    )
    messages = (_user(7, "go"), _call(8, "a", "turn-1/1"), _result(9, "a"))
    turn = AgentTurnContext(
        flow_id="f",
        turn_id="turn-1",
        attempt=1,
        messages=messages,
        framework_run_state=None,
        tool_calls={},
        events=AgentEventWriter.discarding(),
    )
    summary = ContextSummary(1, 1, 6, "s" * 3_000, None)
    with_summary = dataclasses.replace(turn, context_summary=summary)
    plain = runner.estimate_input_tokens(turn)
    assert runner.estimate_input_tokens(with_summary) >= plain + 1_000
    assert plain > runner.estimate_input_tokens(dataclasses.replace(turn, messages=messages[:1]))
    # The only cut is after the user text: never after a call without its result, nor at the end.
    assert runner.select_compaction_cutoff(turn, 0) == 7
    assert runner.select_compaction_cutoff(dataclasses.replace(turn, messages=messages[:2]), 0) == 7

"""The spans of the less travelled Steps, against the real local engine with the SDK's in-memory
exporter: a ``CompactContext`` summary call's ``chat`` span, a tool task's ``PollToolTask``
``execute_tool`` spans, and the trace context that an MCP ``tools/call`` carries in ``_meta``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from agent_session_test_support import running_flow_stack
from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
    AgentTracingOptions,
    AgentTurnContext,
    CompactionPolicy,
    DeferredToolCall,
    DeferredToolExecution,
    ListedTool,
    ToolEffect,
    ToolExecutionResult,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    message_sequence_key,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolSource,
    stepwise_agent_session_flow,
    stepwise_agent_session_options,
)
from dex_agents.testing import InvocationLog, turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from opentelemetry import trace
from tracing_test_support import (
    COMMON_KEYS,
    MODEL,
    STATE_DIR_ENV,
    SUMMARY_MODEL,
    SpanRecord,
    Traced,
    assert_child,
    build_traced_flow,
    invocations,
    only,
    traced,
)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))


async def _idle(sessions: AgentSessionClient, session_id: str, turns: int) -> AgentSnapshot:
    return await wait_for_agent_snapshot(
        sessions, session_id, turn_ended(turns), f"turn {turns} to finish"
    )


def _assert_common(span: SpanRecord, session_id: str, turn_id: str) -> None:
    assert all(span.attr(key) is not None for key in COMMON_KEYS), span
    assert span.attr("gen_ai.conversation.id") == span.attr("dex.flow.id") == session_id
    assert span.attr("dex.agent.turn.id") == turn_id


async def test_a_summary_call_emits_a_chat_span_under_the_activation_root(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    spans = traced()
    flow = build_traced_flow(
        AgentTracingOptions(tracer_provider=spans.provider, should_capture_message_content=True),
        compaction=CompactionPolicy(context_window_tokens=200),
    )
    long_text = "remember " + "x" * 900  # turn 1 alone is over the window: turn 2 compacts it
    async with running_flow_stack(dex_in_process_worker, flow) as stack:
        await stack.sessions.start_session("c1", long_text)
        await _idle(stack.sessions, "c1", 1)
        await stack.sessions.send_user_message("c1", "hello")
        snapshot = await _idle(stack.sessions, "c1", 2)
    assert snapshot.context_summary is not None
    assert snapshot.context_summary.text == "summary of 1..2"
    assert [r.name for r in invocations(stack.dex.scoped("c1")).records()] == [
        "model",
        "summary",
        "model",
    ]
    records = spans.spans()
    root = only(records, "invoke_agent TracedAgent", **{"dex.agent.turn.id": "turn-2"})
    assert root.attr("dex.step.type") == "AwaitUserMessage"
    summary = only(records, f"chat {SUMMARY_MODEL}")
    assert_child(summary, root)
    assert (summary.kind, summary.status) == ("CLIENT", "UNSET")
    _assert_common(summary, stack.dex.scoped("c1"), "turn-2")
    assert summary.attr("gen_ai.operation.name") == "chat"
    assert (summary.attr("dex.step.type"), summary.attr("dex.step.attempt")) == (
        "CompactContext",
        1,
    )
    assert summary.attr("gen_ai.request.model") == SUMMARY_MODEL
    assert summary.attr("gen_ai.response.model") == f"{SUMMARY_MODEL}-2026"
    assert summary.attr("gen_ai.provider.name") == "scripted"
    assert summary.attr("gen_ai.response.id") == "summary-1"
    assert summary.attr("gen_ai.response.finish_reasons") == ["length"]
    # The usage of the summary call, with its cache and reasoning counts.
    assert summary.attr("gen_ai.usage.input_tokens") == 50
    assert summary.attr("gen_ai.usage.output_tokens") == 5
    assert summary.attr("gen_ai.usage.cache_read.input_tokens") == 3
    assert summary.attr("gen_ai.usage.reasoning.output_tokens") == 2
    # Its input is the last message it summarized; it stores no message and requests no tool.
    assert summary.attr("dex.agent.input_messages.last_key") == message_sequence_key(2)
    assert "dex.agent.output_messages.keys" not in summary.attributes
    assert "dex.agent.requested_tool_call.ids" not in summary.attributes
    summarized = json.loads(str(summary.attr("gen_ai.input.messages")))
    assert summarized == [
        {"role": "user", "parts": [{"type": "text", "content": long_text}]},
        {"role": "assistant", "parts": [{"type": "text", "content": f"answer: {long_text}"}]},
    ]
    assert json.loads(str(summary.attr("gen_ai.output.messages"))) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "summary of 1..2"}],
            "finish_reason": "length",
        }
    ]
    # The model call after the summary is the activation's other chat span, in the same trace.
    answer = only(records, f"chat {MODEL}", **{"dex.agent.turn.id": "turn-2"})
    assert_child(answer, root)
    assert answer.attr("dex.step.type") == "RunModel"
    assert answer.attr("dex.agent.input_messages.last_key") == message_sequence_key(3)


class _ReportTasks:
    """A tool source whose ``report`` starts a task; its first poll fails, its second reports it
    still running, its third returns the report."""

    source_name = "reports"

    def __init__(self) -> None:
        self.polls: list[ToolTaskPoll] = []

    async def list_tools(self) -> list[ListedTool]:
        return [
            ListedTool("report", "Build a report.", {"type": "object"}, ToolEffect.READ),
        ]

    def deferred_tool_call(
        self, turn: AgentTurnContext, tool_call_id: str, arguments: str, listed_tool: ListedTool
    ) -> DeferredToolCall:
        policy = turn.resolve_tool_policy(listed_tool.name, listed_tool.framework_effect)
        return DeferredToolCall(tool_call_id, listed_tool.name, arguments, policy)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolTaskStarted:
        return ToolTaskStarted("job-1", 1)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polls.append(poll)
        if len(self.polls) == 1:
            raise RuntimeError("the report service is unavailable")
        if len(self.polls) == 2:
            return ToolTaskPending(1)
        return ToolExecutionResult(f"report {poll.tool_call.task_id} ready")


def _call_then_answer(*calls: ScriptedToolCall) -> ScriptedModelClient:
    """A model that makes ``calls`` in one response, then answers with their results."""

    def reply(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        if results:
            return ScriptedModelReply(text="done: " + "; ".join(r.output for r in results))
        return ScriptedModelReply(tool_calls=list(calls))

    return ScriptedModelClient(reply)


def _stepwise_flow(
    spans: Traced, flow_type: str, model: ScriptedModelClient, sources: Sequence[ToolSource]
) -> AgentSessionFlow:
    agent = AgentDefinition(
        name=flow_type, instructions="You use tools.", model=model, tool_sources=list(sources)
    )
    options = dataclasses.replace(
        stepwise_agent_session_options(agent),
        tracing=AgentTracingOptions(tracer_provider=spans.provider),
    )
    return stepwise_agent_session_flow(agent, flow_type=flow_type, options=options)


def _tool_spans(records: Sequence[SpanRecord], step_type: str) -> list[SpanRecord]:
    return [
        span
        for span in records
        if span.name.startswith("execute_tool ") and span.attr("dex.step.type") == step_type
    ]


async def test_a_polled_tool_task_emits_an_execute_tool_span_per_poll_attempt(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    spans, source = traced(), _ReportTasks()
    flow = _stepwise_flow(
        spans, "TaskAgent", _call_then_answer(ScriptedToolCall("report", {})), [source]
    )
    async with running_flow_stack(dex_in_process_worker, flow) as stack:
        await stack.sessions.start_session("t1", "build the report")
        snapshot = await _idle(stack.sessions, "t1", 1)
    assert snapshot.messages[-1].text == "done: report job-1 ready"
    assert [poll.attempt for poll in source.polls] == [1, 2, 1]
    records = spans.spans()
    root = only(records, "invoke_agent TaskAgent")
    (started,) = _tool_spans(records, "CallTool")
    polls = _tool_spans(records, "PollToolTask")
    assert [span.name for span in polls] == ["execute_tool report"] * 3
    for span in (started, *polls):
        assert_child(span, root)  # the root of the activation that deferred the call
        _assert_common(span, stack.dex.scoped("t1"), "turn-1")
        assert span.kind == "INTERNAL"
        assert span.attr("gen_ai.operation.name") == "execute_tool"
        assert span.attr("gen_ai.agent.name") == "TaskAgent"
        assert span.attr("gen_ai.tool.name") == "report"
        assert span.attr("gen_ai.tool.call.id") == started.attr("gen_ai.tool.call.id")
        assert span.attr("dex.agent.tool.effect") == "read"
    # The call that started the task ended waiting for it; each poll attempt is a span of its own.
    assert (started.status, started.attr("dex.agent.tool_call.status")) == (
        "UNSET",
        "waiting_for_task",
    )
    failed = only(
        polls, "execute_tool report", **{"dex.step.attempt": 1, "error.type": "RuntimeError"}
    )
    pending = only(
        polls, "execute_tool report", **{"dex.agent.tool_call.status": "waiting_for_task"}
    )
    done = only(polls, "execute_tool report", **{"dex.agent.tool_call.status": "succeeded"})
    # The failed poll and its retry: two attempts of one Step execution; the next poll is another.
    assert (failed.status, failed.events) == ("ERROR", ("exception",))
    assert "dex.agent.tool_call.status" not in failed.attributes
    assert pending.attr("dex.step.attempt") == 2 and pending.status == "UNSET"
    assert failed.attr("dex.step.execution_id") == pending.attr("dex.step.execution_id")
    assert (done.attr("dex.step.attempt"), done.status) == (1, "UNSET")
    assert done.attr("dex.step.execution_id") != pending.attr("dex.step.execution_id")


def _assert_carry(received: Sequence[str], spans: Sequence[SpanRecord]) -> None:
    """The traceparents an MCP server got in ``_meta``, one per request, are those of ``spans``.

    The MCP SDK injects the current context: its own client span, a child of the current
    ``execute_tool`` span. Without a global SDK provider (this process sets none) that span is
    non-recording and carries the ``execute_tool`` span's own context.
    """
    assert spans and len(received) == len(spans), (received, spans)
    parts = [traceparent.split("-") for traceparent in received]
    assert {(part[0], part[1]) for part in parts} == {("00", span.trace_id) for span in spans}
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        assert sorted(part[2] for part in parts) == sorted(span.span_id for span in spans)


async def test_mcp_requests_carry_the_execute_tool_spans_trace_in_meta(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    pytest.importorskip("mcp", reason="the mcp extra (dex-agents[mcp]) is not installed")
    from dex_agents.mcp import McpToolSource
    from mcp_test_support.servers import HttpMcpServer

    spans = traced()
    async with HttpMcpServer(tmp_path / "http") as http:
        model = _call_then_answer(
            ScriptedToolCall("tickets__trace_probe", {}),
            ScriptedToolCall("tickets__slow_report", {"item": "q3"}),
        )
        sources = [McpToolSource([http.config()])]
        flow = _stepwise_flow(spans, "McpTracedAgent", model, sources)
        async with running_flow_stack(dex_in_process_worker, flow) as stack:
            await stack.sessions.start_session("m1", "probe the trace")
            snapshot = await _idle(stack.sessions, "m1", 1)
        log = InvocationLog(http.state_dir / "invocations.jsonl")
    (received,) = log.keys("trace_probe")
    assert snapshot.messages[-1].text == f"done: {received}; report on q3 ready"
    records = spans.spans()
    root = only(records, "invoke_agent McpTracedAgent")
    probe = only(records, "execute_tool tickets__trace_probe")
    assert_child(probe, root)
    assert probe.attr("dex.step.type") == "CallTool"
    assert probe.attr("dex.agent.tool_call.status") == "succeeded"
    _assert_carry([received], [probe])
    # The task's tasks/get polls carry the trace of the PollToolTask attempt that sent them.
    polls = _tool_spans(records, "PollToolTask")
    for span in polls:
        assert_child(span, root)
    _assert_carry(log.keys("tasks/get"), polls)

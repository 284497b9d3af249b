"""OpenTelemetry spans of the session against the real local engine, exported by the SDK.

In-process Workers export to an ``InMemorySpanExporter`` through ``AgentTracingOptions``'
``tracer_provider``; the Worker restart test exports from Worker children to a file, through the
global provider, as an application does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from dex import AsyncClient
from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
    AgentTracingOptions,
    GenAISemanticConventionsVersion,
    message_sequence_key,
)
from dex_agents._tracing import failures
from dex_agents.testing import (
    AgentTestStack,
    FileGate,
    InProcessWorker,
    has_pending_interrupts,
    read_flow_attributes,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import NoOpTracerProvider
from tracing_test_support import (
    COMMON_KEYS,
    MODEL,
    SPAN_FILE_ENV,
    STATE_DIR_ENV,
    assert_child,
    build_traced_flow,
    invocations,
    only,
    read_span_file,
    traced,
)

TESTS_DIR = Path(__file__).resolve().parent
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))


@dataclass
class Stack:
    dex: InProcessWorker
    client: AsyncClient
    sessions: list[AgentSessionClient]


@asynccontextmanager
async def serving(
    workers: InProcessWorkerFactory, flows: Sequence[AgentSessionFlow]
) -> AsyncIterator[Stack]:
    async with workers(flows) as dex:
        yield Stack(dex, dex.client, [dex.sessions(flow) for flow in flows])


async def idle(sessions: AgentSessionClient, session_id: str, turns: int) -> AgentSnapshot:
    return await wait_for_agent_snapshot(
        sessions, session_id, turn_ended(turns), f"turn {turns} to finish"
    )


async def stored_trace_context(server_address: str, session_id: str) -> object | None:
    attributes = await read_flow_attributes(server_address, session_id)
    return attributes.json_of("AGENT_TRACE_CONTEXT")


async def test_a_turn_with_tools_and_an_approval_is_two_linked_traces(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    spans = traced()
    flow = build_traced_flow(AgentTracingOptions(tracer_provider=spans.provider))
    async with serving(dex_in_process_worker, [flow]) as stack:
        sessions = stack.sessions[0]
        await sessions.start_session("s1", "lookup and refund order 7")
        await wait_for_agent_snapshot(sessions, "s1", has_pending_interrupts, "the approval")
        assert await sessions.resolve_interrupt("s1", "refund-1", approved=True)
        await idle(sessions, "s1", 1)
        await sessions.send_user_message("s1", "thanks")
        await idle(sessions, "s1", 2)
        stored = await stored_trace_context(stack.dex.server_address, stack.dex.scoped("s1"))
    s1 = stack.dex.scoped("s1")
    records = spans.spans()
    root1 = only(
        records,
        "invoke_agent TracedAgent",
        **{"dex.agent.turn.id": "turn-1", "dex.agent.activation.trigger": "user_message"},
    )
    root2 = only(
        records,
        "invoke_agent TracedAgent",
        **{"dex.agent.activation.trigger": "interrupt_resolution"},
    )
    root3 = only(records, "invoke_agent TracedAgent", **{"dex.agent.turn.id": "turn-2"})
    for span in records:
        assert span.scope == "dex_agents"
        assert span.schema_url == "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"
        assert all(span.attr(key) is not None for key in COMMON_KEYS), span
        assert span.attr("dex.flow.id") == span.attr("session.id") == s1
        assert not any(key in span.attributes for key in CONTENT_KEYS), span
    # Activation roots: trace roots, linked each to the one before, ended inside their Step.
    assert root1.parent_span_id is None and root1.links == ()
    assert root1.kind == "INTERNAL"
    assert root1.attributes | {"dex.run.id": None, "dex.step.execution_id": None} == {
        "gen_ai.conversation.id": s1,
        "session.id": s1,
        "dex.flow.id": s1,
        "dex.run.id": None,
        "dex.step.type": "StartAgentSession",
        "dex.step.execution_id": None,
        "dex.step.attempt": 1,
        "dex.agent.turn.id": "turn-1",
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "TracedAgent",
        "dex.agent.activation.trigger": "user_message",
        "dex.agent.user_message.key": message_sequence_key(1),
    }
    assert root2.parent_span_id is None and root2.links == ((root1.trace_id, root1.span_id),)
    assert root2.attr("dex.step.type") == "AwaitToolApproval"
    assert root2.attr("dex.agent.interrupt.id") == "refund-1"
    assert root2.attr("dex.agent.interrupt.approved") is True
    assert root3.links == ((root2.trace_id, root2.span_id),)
    assert root3.attr("dex.step.type") == "AwaitUserMessage"
    assert len({root1.trace_id, root2.trace_id, root3.trace_id}) == 3
    # The model call that requested the tools, in the first trace.
    chat1 = only(records, f"chat {MODEL}", **{"gen_ai.response.id": "resp-1"})
    assert_child(chat1, root1)
    assert chat1.kind == "CLIENT" and chat1.status == "UNSET"
    assert chat1.attr("dex.step.type") == "RunModel"
    assert chat1.attr("gen_ai.request.model") == MODEL
    assert chat1.attr("gen_ai.response.model") == f"{MODEL}-2026"
    assert chat1.attr("gen_ai.provider.name") == "scripted"
    assert chat1.attr("gen_ai.response.finish_reasons") == ["tool_calls"]
    assert chat1.attr("dex.agent.requested_tool_call.ids") == ["lookup-1", "refund-1"]
    assert chat1.attr("dex.agent.input_messages.last_key") == message_sequence_key(1)
    assert (chat1.attr("gen_ai.usage.input_tokens"), chat1.attr("gen_ai.usage.output_tokens")) == (
        10,
        2,
    )
    assert chat1.attr("gen_ai.usage.cache_read.input_tokens") == 4
    assert chat1.attr("gen_ai.usage.reasoning.output_tokens") == 1
    # The READ call ran in the first activation; the approved write in the approval's.
    lookup = only(records, "execute_tool lookup")
    assert_child(lookup, root1)
    assert lookup.attr("dex.step.type") == "CallTool"
    assert lookup.attr("gen_ai.tool.call.id") == "lookup-1"
    assert lookup.attr("gen_ai.tool.name") == "lookup"
    assert lookup.attr("gen_ai.agent.name") == "TracedAgent"
    assert (lookup.attr("dex.agent.tool.effect"), lookup.attr("dex.agent.tool_call.status")) == (
        "read",
        "succeeded",
    )
    refund = only(records, "execute_tool refund")
    assert_child(refund, root2)
    assert refund.attr("dex.step.type") == "CallSingleAttemptTool"
    assert (refund.status, refund.attr("error.type")) == ("ERROR", "ToolExecutionError")
    assert refund.attr("dex.agent.tool_call.status") == "failed"
    assert refund.events == ("exception",)
    # The model call after the tools joins the approval's trace and names what it stored.
    chat2 = only(
        records, f"chat {MODEL}", **{"dex.agent.turn.id": "turn-1", "gen_ai.response.id": "resp-2"}
    )
    assert_child(chat2, root2)
    assert chat2.attr("dex.agent.output_messages.keys") == [message_sequence_key(2)]
    chat3 = only(records, f"chat {MODEL}", **{"dex.agent.turn.id": "turn-2"})
    assert_child(chat3, root3)
    assert chat3.attr("dex.agent.input_messages.last_key") == message_sequence_key(3)
    assert len(records) == 8
    # The session stores the current activation's root.
    assert root3.is_named_by(stored)


async def test_failed_model_call_content_harness_and_conventions(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    dev, old = traced(), traced()
    content = build_traced_flow(
        AgentTracingOptions(
            tracer_provider=dev.provider, should_capture_message_content=True, agent_name="Triage"
        )
    )
    legacy = build_traced_flow(
        AgentTracingOptions(
            tracer_provider=old.provider,
            should_capture_message_content=True,
            semantic_conventions_version=GenAISemanticConventionsVersion.V1_36_0,
        ),
        flow_type="LegacyAgent",
    )
    late = traced()
    deadline = build_traced_flow(
        AgentTracingOptions(tracer_provider=late.provider),
        flow_type="DeadlineAgent",
        interrupt_deadline=timedelta(seconds=1),
    )
    flows = [content, legacy, deadline]
    async with serving(dex_in_process_worker, flows) as stack:
        sessions, legacy_sessions, deadline_sessions = stack.sessions
        await sessions.start_session("c1", "fail once, then lookup")
        await legacy_sessions.start_session("l1", "lookup")
        await deadline_sessions.start_session("d1", "lookup and refund")
        await idle(sessions, "c1", 1)
        await sessions.send_user_message("c1", "harness")
        await idle(sessions, "c1", 2)
        await idle(legacy_sessions, "l1", 1)
        await idle(deadline_sessions, "d1", 1)
    # An approval whose deadline passed starts an activation of its own.
    deadline_records = late.spans()
    expired = only(
        deadline_records,
        "invoke_agent DeadlineAgent",
        **{"dex.agent.activation.trigger": "interrupt_deadline"},
    )
    assert expired.attr("dex.agent.interrupt.id") == "refund-1"
    assert expired.attr("dex.agent.interrupt.approved") is False
    started = only(
        deadline_records, "invoke_agent DeadlineAgent", **{"dex.step.type": "StartAgentSession"}
    )
    assert expired.links == ((started.trace_id, started.span_id),)
    answer = only(deadline_records, f"chat {MODEL}", **{"gen_ai.response.id": "resp-2"})
    assert_child(answer, expired)
    assert not [span for span in deadline_records if span.name == "execute_tool refund"]
    records = dev.spans()
    root = only(records, "invoke_agent Triage", **{"dex.agent.turn.id": "turn-1"})
    assert json.loads(str(root.attr("gen_ai.input.messages"))) == [
        {"role": "user", "parts": [{"type": "text", "content": "fail once, then lookup"}]}
    ]
    # The failed attempt and its retry: two spans of one Step execution.
    failed = only(records, "chat", **{"dex.step.attempt": 1, "dex.agent.turn.id": "turn-1"})
    retried = only(records, f"chat {MODEL}", **{"dex.step.attempt": 2})
    assert_child(failed, root)
    assert_child(retried, root)
    assert failed.attr("dex.step.execution_id") == retried.attr("dex.step.execution_id")
    assert (failed.status, failed.attr("error.type"), failed.events) == (
        "ERROR",
        "RuntimeError",
        ("exception",),
    )
    assert failed.kind == "CLIENT"
    assert json.loads(str(retried.attr("gen_ai.output.messages"))) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "lookup-1",
                    "name": "lookup",
                    "arguments": {"order": 7, "gate": False},
                }
            ],
            "finish_reason": "tool_calls",
        }
    ]
    lookup = only(records, "execute_tool lookup")
    assert lookup.attr("gen_ai.agent.name") == "Triage"
    assert json.loads(str(lookup.attr("gen_ai.tool.call.arguments"))) == {"order": 7, "gate": False}
    assert lookup.attr("gen_ai.tool.call.result") == "lookup found order 7"
    final = only(records, f"chat {MODEL}", **{"gen_ai.response.id": "resp-2"})
    final_input = json.loads(str(final.attr("gen_ai.input.messages")))
    assert final_input[0]["parts"] == [{"type": "text", "content": "fail once, then lookup"}]
    assert final_input[-1] == {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": "lookup-1", "response": "lookup found order 7"}
        ],
    }
    assert json.loads(str(final.attr("gen_ai.output.messages")))[0]["parts"] == [
        {"type": "text", "content": "answer: lookup=lookup found order 7"}
    ]
    # A whole-turn harness that made three model calls: INTERNAL, and no usage to count twice.
    harness = only(records, "chat", **{"dex.agent.turn.id": "turn-2"})
    assert harness.kind == "INTERNAL" and harness.status == "UNSET"
    assert not [key for key in harness.attributes if key.startswith("gen_ai.usage.")]
    # 1.36.0: gen_ai.system, no cache or reasoning counts, and no content even when asked.
    legacy_records = old.spans()
    assert legacy_records
    legacy_chat = only(legacy_records, f"chat {MODEL}", **{"gen_ai.response.id": "resp-1"})
    assert legacy_chat.attr("gen_ai.system") == "scripted"
    assert "gen_ai.provider.name" not in legacy_chat.attributes
    assert legacy_chat.attr("gen_ai.usage.input_tokens") == 10
    assert "gen_ai.usage.cache_read.input_tokens" not in legacy_chat.attributes
    assert "gen_ai.usage.reasoning.output_tokens" not in legacy_chat.attributes
    for span in legacy_records:
        assert span.schema_url == "https://opentelemetry.io/schemas/1.36.0"
        assert not any(key in span.attributes for key in CONTENT_KEYS), span


class _BrokenExporter(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("the exporter is broken")


class _BrokenProcessor(SpanProcessor):
    def on_start(self, span: object, parent_context: object = None) -> None:
        raise RuntimeError("the span processor is broken")


class _BrokenProvider(TracerProvider):
    def get_tracer(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def,override]
        raise RuntimeError("the tracer provider is broken")


async def test_broken_tracing_never_fails_or_retries_a_step(
    dex_in_process_worker: InProcessWorkerFactory,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(failures, "_failures", 0)
    broken_export, broken_start = TracerProvider(), TracerProvider()
    broken_export.add_span_processor(_BrokenExporter())
    broken_start.add_span_processor(_BrokenProcessor())
    flows = [
        build_traced_flow(
            AgentTracingOptions(tracer_provider=broken_export), flow_type="BrokenExport"
        ),
        build_traced_flow(
            AgentTracingOptions(tracer_provider=broken_start), flow_type="BrokenStart"
        ),
        build_traced_flow(
            AgentTracingOptions(tracer_provider=_BrokenProvider()), flow_type="BrokenTracer"
        ),
    ]
    caplog.set_level(logging.DEBUG, logger="dex_agents.tracing")
    async with serving(dex_in_process_worker, flows) as stack:
        await asyncio.gather(
            *(broken_turn(sessions, f"b{i}") for i, sessions in enumerate(stack.sessions))
        )
        ids = [stack.dex.scoped(f"b{index}") for index in range(len(flows))]
        stored = [await stored_trace_context(stack.dex.server_address, i) for i in ids]
    # No model call and no tool ran twice: nothing was retried.
    for session_id in ids:
        calls = [record.name for record in invocations(session_id).records()]
        assert sorted(calls) == ["lookup", "model", "model", "refund"], calls
    # A root whose export failed still names the trace; one that never started does not.
    assert [value is not None for value in stored] == [True, False, False]
    records = [r for r in caplog.records if r.name == "dex_agents.tracing"]
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].exc_info is not None
    assert len(records) > 1 and all(
        r.levelno == logging.DEBUG for r in records if r not in warnings
    )


async def broken_turn(sessions: AgentSessionClient, session_id: str) -> None:
    await sessions.start_session(session_id, "lookup and refund")
    await wait_for_agent_snapshot(sessions, session_id, has_pending_interrupts, "approval")
    assert await sessions.resolve_interrupt(session_id, "refund-1", approved=True)
    snapshot = await idle(sessions, session_id, 1)
    assert snapshot.messages[-1].text == (
        "answer: lookup=lookup found order 7; refund=Error: refunds are closed"
    )
    assert snapshot.state is not None and snapshot.state.last_turn_error is None


async def test_untraced_workers_store_nothing_and_delete_the_root(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    spans = traced()
    traced_flow = build_traced_flow(AgentTracingOptions(tracer_provider=spans.provider))
    sampled_out = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    sampled_out.add_span_processor(SimpleSpanProcessor(spans.exporter))
    unsampled = build_traced_flow(
        AgentTracingOptions(tracer_provider=sampled_out), flow_type="SampledOutAgent"
    )
    off = build_traced_flow(AgentTracingOptions(is_enabled=False))
    no_sdk = build_traced_flow(AgentTracingOptions(tracer_provider=NoOpTracerProvider()))
    async with serving(dex_in_process_worker, [traced_flow, unsampled]) as stack:
        await stack.sessions[0].start_session("t1", "hello")
        await idle(stack.sessions[0], "t1", 1)
        await stack.sessions[0].start_session("t2", "hello")
        await idle(stack.sessions[0], "t2", 1)
        await stack.sessions[1].start_session("u1", "lookup")
        await idle(stack.sessions[1], "u1", 1)
    assert await stored_trace_context(stack.dex.server_address, stack.dex.scoped("t1")) is not None
    # A sampled-out root stores its unsampled context, so its activation's spans drop too.
    unsampled_root = await stored_trace_context(stack.dex.server_address, stack.dex.scoped("u1"))
    assert isinstance(unsampled_root, str)
    assert int(unsampled_root.rsplit("-", 1)[1], 16) & 1 == 0
    # The same Flow type served by a Worker with tracing off, then by one without an SDK.
    for session_id, flow in (("t1", off), ("t2", no_sdk)):
        async with serving(dex_in_process_worker, [flow]) as stack:
            await stack.sessions[0].send_user_message(session_id, "lookup")
            await idle(stack.sessions[0], session_id, 2)
            await stack.sessions[0].start_session(f"{session_id}-fresh", "lookup")
            await idle(stack.sessions[0], f"{session_id}-fresh", 1)
        assert (
            await stored_trace_context(stack.dex.server_address, stack.dex.scoped(session_id))
            is None
        )
        assert (
            await stored_trace_context(
                stack.dex.server_address, stack.dex.scoped(f"{session_id}-fresh")
            )
            is None
        )
    # Only the traced Worker's two activations made spans.
    assert sorted(span.name for span in spans.spans()) == [
        "chat scripted-model",
        "chat scripted-model",
        "invoke_agent TracedAgent",
        "invoke_agent TracedAgent",
    ]


_NO_OTEL_SCRIPT = """
import sys

class _NoOpenTelemetry:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"No module named {name!r} (blocked by the test)")
        return None

import dex_agents
from dex_agents import AgentTracingOptions
from dex_agents._tracing.session_tracing import SessionTracing

# With tracing disabled the API is never imported, even where it is installed.
off = SessionTracing(AgentTracingOptions(is_enabled=False), "Agent")
assert not off.is_active
assert not [name for name in sys.modules if name.startswith("opentelemetry")]
# Without the API, enabled tracing is inactive and imports nothing.
blocker = _NoOpenTelemetry()
sys.meta_path.insert(0, blocker)
on = SessionTracing(AgentTracingOptions(), "Agent")
assert not on.is_active
assert not [name for name in sys.modules if name.startswith("opentelemetry")]
# With the API but no SDK configured, the global provider's spans are no-ops: no trace context.
sys.meta_path.remove(blocker)
from dex_agents._tracing.session_tracing import ActivationTrigger, StepIdentity

api_only = SessionTracing(AgentTracingOptions(), "Agent")
assert api_only.is_active
step = StepIdentity("s", "r", "StartAgentSession", "x", 1, "turn-1")
assert api_only.emit_activation(step, ActivationTrigger.USER_MESSAGE, previous_root=None) is None
print("ok")
"""


def test_the_session_never_imports_opentelemetry_when_off_or_missing() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _NO_OTEL_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


async def test_a_worker_restart_continues_the_activation_trace(tmp_path: Path) -> None:
    span_file = tmp_path / "spans.jsonl"
    flow = build_traced_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tracing_test_support.worker",
        worker_cwd=TESTS_DIR,
        worker_env={STATE_DIR_ENV: str(tmp_path), SPAN_FILE_ENV: str(span_file)},
    ) as stack:
        sessions = stack.sessions(flow)
        first = await stack.start_worker()
        await sessions.start_session("k1", "lookup with a gate")
        gate = FileGate(tmp_path, "lookup")
        await gate.wait_until_reached()
        first.kill()
        second = await stack.start_worker()
        await gate.wait_until_reached(count=2)
        gate.release()
        await idle(sessions, "k1", 1)
        stored = await stored_trace_context(stack.server_address, "k1")
    records = read_span_file(span_file)
    root = only(records, "invoke_agent TracedAgent")
    requesting = only(records, f"chat {MODEL}", **{"gen_ai.response.id": "resp-1"})
    # The killed attempt exported no span; the retry in the new Worker joins the same trace.
    lookup = only(records, "execute_tool lookup")
    answering = only(records, f"chat {MODEL}", **{"gen_ai.response.id": "resp-2"})
    for span in (requesting, lookup, answering):
        assert_child(span, root)
    assert lookup.attr("dex.step.attempt") == 2
    assert root.pid == requesting.pid == first.pid
    assert lookup.pid == answering.pid == second.pid
    assert root.is_named_by(stored)
    assert len(records) == 4


def _readme_tracing_example() -> str:
    readme = (TESTS_DIR.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Tracing\n", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0]


def test_the_readme_tracing_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "tracing_example.py"
    script.write_text(_readme_tracing_example(), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "invoke_agent Support StartAgentSession",
        "chat scripted RunModel",
        "execute_tool lookup_order CallTool",
        "chat scripted RunModel",
    ]

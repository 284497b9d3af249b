"""The traced agent of the tracing tests, and spans as plain records a test can compare.

``TracedRunner`` answers from the user message: ``lookup`` requests one READ tool call,
``refund`` adds a write that waits for approval, ``fail once`` fails the first model call of the
turn, ``harness`` completes the turn as a whole-turn harness that made three model calls;
``CompactingTracedRunner`` also compacts, with the core's shared rules and a summary call that
returns ``ModelCallMetadata``. Every real call is recorded in the session's ``invocations`` log. Tools
wait at a ``FileGate`` named after the tool when the message says ``gate``; ``refund``
raises ``ToolExecutionError``. The state directory
(gates and the model failure counter) comes from ``TRACING_TEST_STATE_DIR``, so Worker children
share it with the test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Final

from compaction_test_support import SharedCompactionRules
from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTracingOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    CompactionPolicy,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ModelCallMetadata,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import FileGate, InvocationLog
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = [
    "COMMON_KEYS",
    "MODEL",
    "SPAN_FILE_ENV",
    "STATE_DIR_ENV",
    "SUMMARY_MODEL",
    "SUMMARY_USAGE",
    "CompactingTracedRunner",
    "FileSpanExporter",
    "SpanRecord",
    "Traced",
    "TracedRunner",
    "assert_child",
    "build_traced_flow",
    "invocations",
    "only",
    "read_span_file",
    "span_record",
    "traced",
]

COMMON_KEYS: Final = (
    "gen_ai.conversation.id",
    "session.id",
    "dex.flow.id",
    "dex.run.id",
    "dex.step.type",
    "dex.step.execution_id",
    "dex.step.attempt",
    "dex.agent.turn.id",
    "gen_ai.operation.name",
)
"""The attributes the seed puts on every span."""
STATE_DIR_ENV: Final = "TRACING_TEST_STATE_DIR"
SPAN_FILE_ENV: Final = "TRACING_TEST_SPAN_FILE"
MODEL: Final = "scripted-model"
SUMMARY_MODEL: Final = "scripted-summarizer"
TRACED_FLOW_TYPE: Final = "TracedAgent"


@dataclass(frozen=True)
class SpanRecord:
    """One finished span, as the tests compare it."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    links: tuple[tuple[str, str], ...]
    attributes: dict[str, object]
    status: str
    events: tuple[str, ...]
    scope: str
    schema_url: str | None
    pid: int

    def is_named_by(self, traceparent: object) -> bool:
        """Whether ``traceparent`` (as the session stores it) names this span."""
        if not isinstance(traceparent, str):
            return False
        version, trace_id, span_id, _flags = traceparent.split("-")
        return (version, trace_id, span_id) == ("00", self.trace_id, self.span_id)

    def attr(self, key: str) -> object:
        return self.attributes.get(key)


def _attribute(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def span_record(span: ReadableSpan) -> SpanRecord:
    """The record of an SDK span."""
    context = span.get_span_context()
    assert context is not None
    scope = span.instrumentation_scope
    return SpanRecord(
        name=span.name,
        kind=span.kind.name,
        trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}",
        parent_span_id=f"{span.parent.span_id:016x}" if span.parent is not None else None,
        links=tuple(
            (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") for link in span.links
        ),
        attributes={key: _attribute(value) for key, value in (span.attributes or {}).items()},
        status=span.status.status_code.name,
        events=tuple(event.name for event in span.events),
        scope=scope.name if scope is not None else "",
        schema_url=scope.schema_url if scope is not None else None,
        pid=os.getpid(),
    )


class FileSpanExporter(SpanExporter):
    """Appends each span as one JSON line to ``path`` and flushes, so a test reads the spans of
    a Worker child that was SIGKILLed later."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._path.open("a", encoding="utf-8") as out:
            for span in spans:
                record = span_record(span)
                out.write(json.dumps(record.__dict__) + "\n")
        return SpanExportResult.SUCCESS


@dataclass
class Traced:
    """A provider that keeps every finished span in memory."""

    provider: TracerProvider
    exporter: InMemorySpanExporter

    def spans(self) -> list[SpanRecord]:
        return [span_record(span) for span in self.exporter.get_finished_spans()]


def traced() -> Traced:
    """A fresh in-memory provider, for ``AgentTracingOptions.tracer_provider``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Traced(provider, exporter)


def only(spans: Sequence[SpanRecord], name: str, **attributes: object) -> SpanRecord:
    """The one span named ``name`` with these attribute values (fails on none or several)."""
    matching = [
        span
        for span in spans
        if span.name == name and all(span.attr(key) == value for key, value in attributes.items())
    ]
    assert len(matching) == 1, (name, attributes, [(s.name, s.attributes) for s in spans])
    return matching[0]


def assert_child(span: SpanRecord, root: SpanRecord) -> None:
    """``span`` is a direct child of ``root``, in its trace."""
    assert (span.trace_id, span.parent_span_id) == (root.trace_id, root.span_id), span.name


def read_span_file(path: Path) -> list[SpanRecord]:
    """The spans a ``FileSpanExporter`` wrote, in export order."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        data = json.loads(line)
        data["links"] = tuple(tuple(link) for link in data["links"])
        data["events"] = tuple(data["events"])
        records.append(SpanRecord(**data))
    return records


def _state_dir() -> Path:
    return Path(os.environ[STATE_DIR_ENV])


def invocations(session_id: str) -> InvocationLog:
    """Every real model and tool call of ``session_id``."""
    return InvocationLog(_state_dir() / f"{session_id}.log")


def _user_text(turn: AgentTurnContext) -> str:
    users = [message for message in turn.messages if message.role is MessageRole.USER]
    return users[-1].text or "" if users else ""


def _metadata(reason: str, call: int) -> ModelCallMetadata:
    return ModelCallMetadata(
        request_model=MODEL,
        response_model=f"{MODEL}-2026",
        provider_name="scripted",
        response_id=f"resp-{call}",
        finish_reasons=(reason,),
    )


_USAGE: Final = AgentUsage(
    input_tokens=10, output_tokens=2, cached_input_tokens=4, reasoning_tokens=1
)


class TracedRunner:
    """The runner of the traced agent; see the module docstring."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=json.dumps(text), text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        invocations(turn.flow_id).record("model", key=turn.turn_id)
        text = _user_text(turn)
        if "fail once" in text:
            marker = _state_dir() / f"model-failed-{turn.turn_id}"
            if not marker.exists():
                marker.touch()
                raise RuntimeError("the scripted model is unavailable")
        if "harness" in text:
            answer = FrameworkMessage(
                role=MessageRole.ASSISTANT, framework_item='"harness"', text="harness done"
            )
            return TurnCompleted(
                (answer,), AgentUsage(input_tokens=30, output_tokens=6, model_calls=3)
            )
        if not turn.is_resuming and "lookup" in text:
            arguments = {"order": 7, "gate": "gate" in text}
            calls = [self._call(turn, "lookup-1", "lookup", arguments)]
            if "refund" in text:
                calls.append(self._call(turn, "refund-1", "refund", arguments))
            return ToolCallsRequested(
                json.dumps([call.tool_call_id for call in calls]),
                calls,
                _USAGE,
                model_call_metadata=_metadata("tool_calls", 1),
            )
        results = "; ".join(
            f"{record.tool_name}={describe_tool_call_outcome(record)}"
            for record in turn.tool_calls.values()
        )
        answer = FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=json.dumps(results),
            text=f"answer: {results or text}",
        )
        return TurnCompleted((answer,), _USAGE, model_call_metadata=_metadata("stop", 2))

    def _call(
        self, turn: AgentTurnContext, call_id: str, name: str, arguments: object
    ) -> DeferredToolCall:
        return DeferredToolCall(
            call_id, name, json.dumps(arguments), turn.resolve_tool_policy(name)
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        name = call.tool_call.tool_name
        invocations(call.flow_id).record(name, key=call.idempotency_key)
        if json.loads(call.tool_call.arguments).get("gate"):
            gate = FileGate(_state_dir(), name)
            gate.mark_reached()
            await gate.wait_for_release()
        if name == "refund":
            raise ToolExecutionError("refunds are closed")
        return ToolExecutionResult(f"{name} found order 7")


SUMMARY_USAGE: Final = AgentUsage(
    input_tokens=50, output_tokens=5, cached_input_tokens=3, reasoning_tokens=2
)


class CompactingTracedRunner(SharedCompactionRules, TracedRunner):
    """The traced agent with compaction: the shared estimate and turn-boundary cutoff, and a
    summary call that names its model and reports usage."""

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        invocations(request.flow_id).record("summary", key=request.turn_id)
        first, last = request.messages[0].sequence, request.messages[-1].sequence
        return ContextSummaryResult(
            f"summary of {first}..{last}",
            SUMMARY_USAGE,
            model_call_metadata=ModelCallMetadata(
                request_model=SUMMARY_MODEL,
                response_model=f"{SUMMARY_MODEL}-2026",
                provider_name="scripted",
                response_id=f"summary-{request.attempt}",
                finish_reasons=("length",),
            ),
        )


def build_traced_flow(
    tracing: AgentTracingOptions | None = None,
    *,
    flow_type: str = TRACED_FLOW_TYPE,
    interrupt_deadline: timedelta | None = None,
    compaction: CompactionPolicy | None = None,
) -> AgentSessionFlow:
    """The traced agent's Flow; ``refund`` waits for approval (until ``interrupt_deadline``);
    with ``compaction``, the runner compacts."""
    return AgentSessionFlow(
        CompactingTracedRunner() if compaction is not None else TracedRunner(),
        flow_type=flow_type,
        options=AgentSessionOptions(
            compaction=compaction,
            interrupt_deadline=interrupt_deadline,
            tool_policies={
                "lookup": ToolPolicy(ToolEffect.READ),
                "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True),
            },
            tracing=tracing if tracing is not None else AgentTracingOptions(),
        ),
    )

"""``SessionTracing``: the spans of one agent session Flow type, as the session asks for them.

One trace per activation: the Step that consumes an input from outside the session emits the
``invoke_agent`` root and ends it at once (:meth:`SessionTracing.emit_activation`); each model
call emits a ``chat`` span and each tool attempt an ``execute_tool`` span under that root, through
the runner facade (:class:`ModelCallSpan`, :class:`ToolCallSpan`). The root's traceparent travels
in the ``AgentTraceContext`` Attribute and on each tool call record, so the spans of one
activation join it from any Worker.

This module never imports OpenTelemetry: :mod:`dex_agents._tracing.otel_spans` is imported the
first time a span is asked for, and only when tracing is enabled and the API is installed. Every
call into it is guarded, so tracing never fails or retries a Step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from dex import Context

from dex_agents._runner_contract import ModelCallMetadata
from dex_agents._tool_outcome_check import ToolOutcomeCheckStatus
from dex_agents._tracing import conventions as names
from dex_agents._tracing.conventions import SemanticConventions, conventions_of
from dex_agents._tracing.failures import guarded
from dex_agents._tracing_options import AgentTracingOptions
from dex_agents._values import AgentToolCall, AgentToolCallStatus, AgentUsage
from dex_agents.exceptions import ToolExecutionError

if TYPE_CHECKING:
    from dex_agents._tracing.otel_spans import AttributeValue, ContextToken, OtelSpans, SpanHandle

__all__ = [
    "ActivationTrigger",
    "ContentThunk",
    "ModelCallSpan",
    "SessionTracing",
    "StepIdentity",
    "ToolCallSpan",
]

ContentThunk = Callable[[], str]
"""Builds content JSON text; called only when the span captures content."""

_TOOL_EXECUTION_ERROR: Final = ToolExecutionError.__name__


class ActivationTrigger(StrEnum):
    """What started an activation: ``dex.agent.activation.trigger``."""

    USER_MESSAGE = "user_message"
    INTERRUPT_RESOLUTION = "interrupt_resolution"
    INTERRUPT_DEADLINE = "interrupt_deadline"


@dataclass(frozen=True)
class StepIdentity:
    """The Step attempt that emits a span: the attributes every span carries."""

    flow_id: str
    run_id: str
    step_type: str
    step_execution_id: str
    attempt: int
    turn_id: str | None

    @classmethod
    def of(cls, context: Context, step_type: str, turn_id: str | None) -> StepIdentity:
        """The identity of the running attempt of ``step_type``."""
        return cls(
            flow_id=context.flow_id,
            run_id=context.run_id,
            step_type=step_type,
            step_execution_id=context.step_execution_id,
            attempt=max(context.attempt, 1),
            turn_id=turn_id,
        )

    def attributes(self, operation: str) -> dict[str, AttributeValue]:
        """The attributes of every span, for ``gen_ai.operation.name`` ``operation``."""
        attributes: dict[str, AttributeValue] = {
            names.CONVERSATION_ID: self.flow_id,
            names.SESSION_ID: self.flow_id,
            names.FLOW_ID: self.flow_id,
            names.RUN_ID: self.run_id,
            names.STEP_TYPE: self.step_type,
            names.STEP_EXECUTION_ID: self.step_execution_id,
            names.STEP_ATTEMPT: self.attempt,
            names.OPERATION_NAME: operation,
        }
        if self.turn_id is not None:
            attributes[names.TURN_ID] = self.turn_id
        return attributes


class SessionTracing:
    """The spans of one Flow type, configured by its ``AgentTracingOptions``.

    Args:
        options: ``AgentSessionOptions.tracing``.
        flow_type: The Flow type, the agent name when ``options.agent_name`` is ``None``.

    Example:
        >>> tracing = SessionTracing(AgentTracingOptions(is_enabled=False), "TriageAgent")
        >>> tracing.agent_name, tracing.is_active
        ('TriageAgent', False)
    """

    def __init__(self, options: AgentTracingOptions, flow_type: str) -> None:
        self._options = options
        self.agent_name: Final = options.agent_name or flow_type
        self._conventions: Final = conventions_of(options.semantic_conventions_version)
        self._spans: OtelSpans | None = None
        self._loaded = not options.is_enabled

    @property
    def conventions(self) -> SemanticConventions:
        """The semantic conventions the spans follow."""
        return self._conventions

    @property
    def captures_content(self) -> bool:
        """Whether spans carry message content: asked for, and the conventions carry it."""
        return self._options.should_capture_message_content and self._conventions.carries_content

    @property
    def is_active(self) -> bool:
        """Whether spans are emitted: enabled, and the OpenTelemetry API is installed."""
        return self._otel() is not None

    def _otel(self) -> OtelSpans | None:
        if not self._loaded:
            self._loaded = True
            try:
                # The otel extra is optional: without it the session never traces.
                from dex_agents._tracing.otel_spans import OtelSpans
            except ImportError:
                return None
            self._spans = OtelSpans(self._options.tracer_provider, self._conventions.schema_url)
        return self._spans

    def emit_activation(
        self,
        step: StepIdentity,
        trigger: ActivationTrigger,
        *,
        previous_root: str | None,
        user_message_key: str | None = None,
        user_messages: ContentThunk | None = None,
        interrupt_id: str | None = None,
        approved: bool | None = None,
    ) -> str | None:
        """Emit the ``invoke_agent`` root of an activation, linked to ``previous_root``, and end it.

        Returns:
            The root's traceparent when its context is valid, sampled or not; ``None`` when
            tracing is off, no SDK makes real spans, or tracing failed.
        """
        spans = self._otel()
        if spans is None:
            return None
        attributes = step.attributes(names.INVOKE_AGENT)
        attributes[names.AGENT_NAME] = self.agent_name
        attributes[names.ACTIVATION_TRIGGER] = trigger.value
        if user_message_key is not None:
            attributes[names.USER_MESSAGE_KEY] = user_message_key
        if interrupt_id is not None:
            attributes[names.INTERRUPT_ID] = interrupt_id
        if approved is not None:
            attributes[names.INTERRUPT_APPROVED] = approved
        self.add_content(attributes, names.INPUT_MESSAGES, user_messages)

        root = guarded(
            "starting the invoke_agent span",
            lambda: spans.start(
                f"{names.INVOKE_AGENT} {self.agent_name}",
                kind=spans.internal(),
                parent=None,
                attributes=attributes,
                link=previous_root,
            ),
        )
        if root is None:
            return None
        traceparent = guarded(
            "reading the invoke_agent span's context", lambda: spans.traceparent(root)
        )
        # A root whose export fails still names a valid trace for the activation's other spans.
        guarded("ending the invoke_agent span", lambda: spans.end(root))
        return traceparent

    def model_call(
        self,
        step: StepIdentity,
        *,
        parent: str | None,
        input_last_key: str | None,
        input_messages: ContentThunk | None = None,
    ) -> ModelCallSpan:
        """The ``chat`` span of one model call attempt, under the activation root ``parent``."""
        attributes = step.attributes(names.CHAT)
        if input_last_key is not None:
            attributes[names.INPUT_MESSAGES_LAST_KEY] = input_last_key
        self.add_content(attributes, names.INPUT_MESSAGES, input_messages)
        return ModelCallSpan(self, self._otel(), parent, attributes)

    def tool_call(self, step: StepIdentity, record: AgentToolCall) -> ToolCallSpan:
        """The ``execute_tool`` span of one tool attempt, under the root on ``record``."""
        attributes = step.attributes(names.EXECUTE_TOOL)
        attributes[names.AGENT_NAME] = self.agent_name
        attributes[names.TOOL_NAME] = record.tool_name
        attributes[names.TOOL_CALL_ID] = record.tool_call_id
        attributes[names.TOOL_EFFECT] = record.effect.value
        self.add_content(attributes, names.TOOL_CALL_ARGUMENTS, lambda: record.arguments)
        return ToolCallSpan(self, self._otel(), record, attributes)

    def add_content(
        self, attributes: dict[str, AttributeValue], key: str, content: ContentThunk | None
    ) -> None:
        """Put ``content()`` on ``attributes`` under ``key`` when spans capture content."""
        if content is None or not self.captures_content or self._otel() is None:
            return
        text = guarded(f"serializing {key}", content)
        if text is not None:
            attributes[key] = text


class ModelCallSpan:
    """The ``chat`` span of one ``RunModel`` or ``CompactContext`` attempt.

    The facade runs the model call inside :meth:`running`, with the activation root current; the
    span starts when the attempt ends, because its kind depends on the ``model_calls`` the runner
    reports, and is dated from the call's start. A failed call ends it with status ERROR; a
    successful one ends in :meth:`completed`, once the Step knows what the call stored.
    """

    def __init__(
        self,
        tracing: SessionTracing,
        spans: OtelSpans | None,
        parent: str | None,
        attributes: dict[str, AttributeValue],
    ) -> None:
        self._tracing = tracing
        self._spans = spans
        self._parent = parent
        self._attributes = attributes
        self._started_ns: int | None = None

    @contextmanager
    def running(self) -> Iterator[None]:
        """Run the model call with the activation root current; a failure emits the span."""
        spans = self._spans
        if spans is None:
            yield
            return
        self._started_ns = time.time_ns()
        parent = self._parent
        make = (lambda: spans.make_parent_current(parent)) if parent is not None else None
        with _current(spans, "the activation", make):
            try:
                yield
            except BaseException as error:
                self._emit(None, error)
                raise

    def completed(
        self,
        usage: AgentUsage,
        metadata: ModelCallMetadata | None,
        *,
        output_keys: Sequence[str] = (),
        requested_tool_call_ids: Sequence[str] = (),
        output_messages: ContentThunk | None = None,
    ) -> None:
        """Emit the span of a call that returned: model, usage, what it produced."""
        if self._spans is None:
            return
        attributes = self._attributes
        if output_keys:
            attributes[names.OUTPUT_MESSAGES_KEYS] = tuple(output_keys)
        if requested_tool_call_ids:
            attributes[names.REQUESTED_TOOL_CALL_IDS] = tuple(requested_tool_call_ids)
        if metadata is not None:
            attributes.update(self._metadata_attributes(metadata))
        if usage.model_calls == 1:
            attributes.update(self._usage_attributes(usage))
        self._tracing.add_content(attributes, names.OUTPUT_MESSAGES, output_messages)
        self._emit(metadata, None, single_call=usage.model_calls == 1)

    def _metadata_attributes(self, metadata: ModelCallMetadata) -> dict[str, AttributeValue]:
        provider = self._tracing.conventions.provider_attribute
        values: dict[str, AttributeValue | None] = {
            names.REQUEST_MODEL: metadata.request_model,
            names.RESPONSE_MODEL: metadata.response_model,
            provider: metadata.provider_name,
            names.RESPONSE_ID: metadata.response_id,
            names.FINISH_REASONS: metadata.finish_reasons or None,
        }
        return {key: value for key, value in values.items() if value is not None}

    def _usage_attributes(self, usage: AgentUsage) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {}
        if usage.input_tokens == 0 and usage.output_tokens == 0:
            return attributes
        attributes[names.INPUT_TOKENS] = usage.input_tokens
        attributes[names.OUTPUT_TOKENS] = usage.output_tokens
        if self._tracing.conventions.has_detailed_usage:
            if usage.cached_input_tokens:
                attributes[names.CACHE_READ_INPUT_TOKENS] = usage.cached_input_tokens
            if usage.reasoning_tokens:
                attributes[names.REASONING_OUTPUT_TOKENS] = usage.reasoning_tokens
        return attributes

    def _emit(
        self,
        metadata: ModelCallMetadata | None,
        error: BaseException | None,
        *,
        single_call: bool = True,
    ) -> None:
        spans = self._spans
        if spans is None:
            return
        self._spans = None  # One span per attempt, whichever path ends it.
        model = metadata.request_model if metadata is not None else None
        name = f"{names.CHAT} {model}" if model else names.CHAT
        attributes = self._attributes

        def emit() -> None:
            span = spans.start(
                name,
                kind=spans.client() if single_call else spans.internal(),
                parent=self._parent,
                attributes=attributes,
                start_time_ns=self._started_ns,
            )
            try:
                if error is not None:
                    spans.set_error(span, error, type(error).__name__)
            finally:
                spans.end(span)

        guarded("emitting the chat span", emit)


class ToolCallSpan:
    """The ``execute_tool`` span of one ``CallTool``, ``CallSingleAttemptTool`` or
    ``PollToolTask`` attempt, the current span while the tool runs.

    The facade runs the tool inside :meth:`running`; a failure ends the span with status ERROR,
    and the Step ends a returned call's span with :meth:`finished`, once it knows the record.
    """

    def __init__(
        self,
        tracing: SessionTracing,
        spans: OtelSpans | None,
        record: AgentToolCall,
        attributes: dict[str, AttributeValue],
    ) -> None:
        self._tracing = tracing
        self._spans = spans
        self._record = record
        self._attributes = attributes
        self._span: SpanHandle | None = None

    @contextmanager
    def running(self) -> Iterator[None]:
        """Run the tool with this span current; a failure ends it with status ERROR."""
        spans = self._spans
        if spans is None:
            yield
            return
        attributes = self._attributes
        self._span = guarded(
            "starting the execute_tool span",
            lambda: spans.start(
                f"{names.EXECUTE_TOOL} {self._record.tool_name}",
                kind=spans.internal(),
                parent=self._record.trace_context,
                attributes=attributes,
            ),
        )
        span = self._span
        make = (lambda: spans.make_current(span)) if span is not None else None
        with _current(spans, "the execute_tool span", make):
            try:
                yield
            except ToolExecutionError as error:
                self._end(error, _TOOL_EXECUTION_ERROR, AgentToolCallStatus.FAILED, str(error))
                raise
            except BaseException as error:
                self._end(error, type(error).__name__, None, None)
                raise

    def finished(self, record: AgentToolCall) -> None:
        """End the span of a call that returned, with the record the attempt left."""
        result = record.output if record.output is not None else record.error
        self._end(None, None, record.status, result, record.outcome_check)

    def _end(
        self,
        error: BaseException | None,
        error_type: str | None,
        status: AgentToolCallStatus | None,
        result: str | None,
        outcome_check: ToolOutcomeCheckStatus | None = None,
    ) -> None:
        spans, span = self._spans, self._span
        self._span = None
        if spans is None or span is None:
            return
        attributes: dict[str, AttributeValue] = {}
        if status is not None:
            attributes[names.TOOL_CALL_STATUS] = status.value
        if outcome_check is not None:
            attributes[names.TOOL_CALL_OUTCOME_CHECK] = outcome_check.value
        if result is not None:
            self._tracing.add_content(attributes, names.TOOL_CALL_RESULT, lambda: result)

        def end() -> None:
            try:
                spans.set_attributes(span, attributes)
                if error is not None and error_type is not None:
                    spans.set_error(span, error, error_type)
            finally:
                spans.end(span)

        guarded("ending the execute_tool span", end)


@contextmanager
def _current(
    spans: OtelSpans, what: str, make: Callable[[], ContextToken] | None
) -> Iterator[None]:
    """Make ``what`` current while the block runs (guarded); ``make`` ``None`` changes nothing."""
    token = guarded(f"making {what} current", make) if make is not None else None
    try:
        yield
    finally:
        if token is not None:
            restore = token
            guarded("restoring the current context", lambda: spans.restore(restore))

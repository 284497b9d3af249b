"""``OtelSpans``: the only module that imports OpenTelemetry (the ``otel`` extra's API).

:mod:`dex_agents._tracing.session_tracing` imports it only when tracing is enabled and the API
is installed, and guards every call into it, so nothing here has to catch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import Token
from typing import Final, TypeAlias

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from dex_agents._tracing.conventions import INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION
from dex_agents.exceptions import ConfigurationTypeError

__all__ = ["AttributeValue", "OtelSpans", "SpanHandle"]

AttributeValue: TypeAlias = str | bool | int | Sequence[str]
"""An attribute value the session sets: text, a flag, a count, or a list of keys."""

SpanHandle: TypeAlias = Span
ContextToken: TypeAlias = Token[otel_context.Context]

_PROPAGATOR: Final = TraceContextTextMapPropagator()
_TRACEPARENT: Final = "traceparent"


def _parent_context(traceparent: str | None) -> otel_context.Context:
    # An empty Context makes a root: a span never joins whatever happens to be current.
    if traceparent is None:
        return otel_context.Context()
    return _PROPAGATOR.extract({_TRACEPARENT: traceparent}, context=otel_context.Context())


class OtelSpans:
    """Starts, annotates and ends the session's spans with one tracer.

    Args:
        tracer_provider: The provider to emit with; ``None`` uses the global provider, looked up
            at each span, so a provider configured after the Flow was built still gets spans (the
            tracer is cached while the provider stays the same).
        schema_url: The semantic conventions' schema URL, set on the tracer.
    """

    def __init__(self, tracer_provider: object | None, schema_url: str) -> None:
        self._provider = tracer_provider
        self._schema_url = schema_url
        self._tracers: tuple[trace.TracerProvider, trace.Tracer] | None = None

    def _tracer(self) -> trace.Tracer:
        provider = self._provider if self._provider is not None else trace.get_tracer_provider()
        if not isinstance(provider, trace.TracerProvider):
            raise ConfigurationTypeError(
                f"AgentTracingOptions.tracer_provider must be an OpenTelemetry TracerProvider, "
                f"got {type(provider).__name__}"
            )
        cached = self._tracers
        if cached is not None and cached[0] is provider:
            return cached[1]
        tracer = provider.get_tracer(
            INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION, schema_url=self._schema_url
        )
        self._tracers = (provider, tracer)
        return tracer

    def start(
        self,
        name: str,
        *,
        kind: SpanKind,
        parent: str | None,
        attributes: Mapping[str, AttributeValue],
        link: str | None = None,
        start_time_ns: int | None = None,
    ) -> Span:
        """Start a span under ``parent`` (a traceparent; ``None`` starts a trace), linked to
        ``link`` when that traceparent is valid."""
        links: list[Link] = []
        if link is not None:
            linked = trace.get_current_span(_parent_context(link)).get_span_context()
            if linked.is_valid:
                links.append(Link(linked))
        return self._tracer().start_span(
            name,
            context=_parent_context(parent),
            kind=kind,
            attributes=dict(attributes),
            links=links,
            start_time=start_time_ns,
        )

    @staticmethod
    def internal() -> SpanKind:
        return SpanKind.INTERNAL

    @staticmethod
    def client() -> SpanKind:
        return SpanKind.CLIENT

    @staticmethod
    def traceparent(span: Span) -> str | None:
        """The W3C traceparent of ``span``, sampled or not; ``None`` for an invalid context."""
        span_context = span.get_span_context()
        if not span_context.is_valid:
            return None
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
        return carrier.get(_TRACEPARENT)

    @staticmethod
    def set_attributes(span: Span, attributes: Mapping[str, AttributeValue]) -> None:
        span.set_attributes(dict(attributes))

    @staticmethod
    def set_error(span: Span, error: BaseException, error_type: str) -> None:
        """Mark ``span`` failed: status ERROR, ``error.type``, and the exception as an event."""
        span.set_attribute("error.type", error_type)
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{error_type}: {error}"))

    @staticmethod
    def end(span: Span) -> None:
        span.end()

    @staticmethod
    def make_current(span: Span) -> ContextToken:
        """Make ``span`` the current span; pass the token to :meth:`restore`."""
        return otel_context.attach(trace.set_span_in_context(span))

    @staticmethod
    def make_parent_current(traceparent: str) -> ContextToken:
        """Make the span that ``traceparent`` names current (a remote, non-recording span)."""
        return otel_context.attach(_parent_context(traceparent))

    @staticmethod
    def restore(token: ContextToken) -> None:
        otel_context.detach(token)

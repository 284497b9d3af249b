"""Tracing of the agent session: OpenTelemetry GenAI spans of its Steps (private).

:mod:`dex_agents._tracing.session_tracing` is what the session calls; it never imports
OpenTelemetry itself. :mod:`dex_agents._tracing.otel_spans` does, and is imported only when
tracing is enabled and the ``opentelemetry-api`` package (the ``otel`` extra) is installed.
"""

"""Worker child of the tracing tests: the SDK exports every span to the file named by
``TRACING_TEST_SPAN_FILE`` as it ends, so the spans survive a SIGKILL; the session uses the global
tracer provider, as an application that configures the SDK does."""

import os
from pathlib import Path

from dex_agents.testing import run_agent_worker
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracing_test_support import SPAN_FILE_ENV, FileSpanExporter, build_traced_flow

if __name__ == "__main__":
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(FileSpanExporter(Path(os.environ[SPAN_FILE_ENV])))
    )
    trace.set_tracer_provider(provider)
    run_agent_worker([build_traced_flow()])

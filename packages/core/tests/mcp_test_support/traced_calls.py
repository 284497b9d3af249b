"""Lists and calls a server's ``echo`` tool twice inside one traced span, with OpenTelemetry's
SDK as the global provider (as an application configures it), and prints every ended span as a
JSON line: ``{"name", "status", "parent"}``. Run as a child process, so its provider is its own.

Usage: ``python -m mcp_test_support.traced_calls stdio <command> [args...]`` or
``python -m mcp_test_support.traced_calls http <url>``.
"""

from __future__ import annotations

import asyncio
import json
import sys

from dex_agents.mcp import (
    McpServerConfig,
    McpStdioServerConfig,
    McpStreamableHttpServerConfig,
    McpToolSource,
)
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


async def _calls(server: McpServerConfig) -> None:
    source = McpToolSource([server])
    with trace.get_tracer("traced_calls").start_as_current_span("turn"):
        await source.list_tools()
        for index in range(2):
            output = await source.call_tool(
                "everything__echo", {"message": f"m{index}"}, idempotency_key=f"s/t/{index}"
            )
            assert f"m{index}" in output, output


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    kind, target, *args = sys.argv[1:]
    server: McpServerConfig = (
        McpStdioServerConfig(name="everything", command=target, args=args)
        if kind == "stdio"
        else McpStreamableHttpServerConfig(name="everything", url=target)
    )
    asyncio.run(_calls(server))
    for span in exporter.get_finished_spans():
        parent = span.parent.span_id if span.parent is not None else None
        print(
            json.dumps(
                {"name": span.name, "status": span.status.status_code.name, "parent": parent}
            )
        )


if __name__ == "__main__":
    main()

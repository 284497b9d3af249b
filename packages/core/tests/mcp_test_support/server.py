"""The MCP server of dex_agents.mcp's tests: ``python server.py stdio|http --state-dir DIR``.

Every tool records its call in the InvocationLog of the state directory before anything else, so
a killed call still counts; ``trace_probe`` and ``tasks/get`` record the ``traceparent`` their
``_meta`` carried. A ``gate`` argument stops the tool at that FileGate; the gate ``!exit`` makes
the server process exit mid-call. Over HTTP the task tools run as MCP tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dex_agents.testing import FileGate, InvocationLog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcp_test_support.tasks_extension import ServerTask, TasksServerExtension

EXIT_GATE = "!exit"
EXIT_ONCE_PREFIX = "!exit-once-"
IDEMPOTENCY_KEY = "io.superdurable.dex/idempotencyKey"
TRACEPARENT = "traceparent"
ACCOUNT_QUESTION = "Which account?"
ACCOUNT_CHOICES = ("checking", "savings")


class _State:
    directory = Path(".")
    parent_pid = os.getppid()


def _log() -> InvocationLog:
    return InvocationLog(_State.directory / "invocations.jsonl")


def _key(ctx: Context | None) -> str:
    meta = ctx.request_context.meta if ctx is not None else None
    return str((meta or {}).get(IDEMPOTENCY_KEY, ""))


def _traceparent(meta: Mapping[str, Any] | None) -> str:
    return str((meta or {}).get(TRACEPARENT, ""))


async def _gate(name: str) -> None:
    if not name:
        return
    if name == EXIT_GATE:
        os._exit(3)
    gate = FileGate(_State.directory, name.removeprefix(EXIT_ONCE_PREFIX))
    if name.startswith(EXIT_ONCE_PREFIX):
        # Exits at the first arrival only, so a retried call gets through.
        arrivals = gate.reached_count
        gate.mark_reached()
        if arrivals == 0:
            os._exit(3)
        return
    gate.mark_reached()
    while not gate.is_released:
        if os.getppid() != _State.parent_pid:
            os._exit(4)  # the Worker that started this stdio server died: never outlive it
        await asyncio.sleep(0.01)


async def _record_and_gate(tool: str, gate: str, ctx: Context | None) -> None:
    _log().record(tool, key=_key(ctx))
    await _gate(gate)


def build_server(http: bool) -> MCPServer:
    tasks = TasksServerExtension(
        {"slow_report": _slow_report, "ask_account": _ask_account, "two_questions": _two_questions},
        poll_interval_ms=1000,
        on_cancel=lambda task_id: _log().record("tasks/cancel", key=task_id),
        on_get=lambda task_id, meta: _log().record("tasks/get", key=_traceparent(meta)),
    )
    # Both transports run the task tools as tasks; a stdio task lives in its process.
    del http
    server = MCPServer("test-server", extensions=[tasks])

    @server.tool(annotations={"readOnlyHint": True})
    async def lookup(item: str, ctx: Context, gate: str = "") -> str:
        """Look an item up."""
        await _record_and_gate("lookup", gate, ctx)
        return f"{item} is in stock"

    @server.tool(annotations={"idempotentHint": True, "destructiveHint": True})
    async def upsert(item: str, ctx: Context, gate: str = "") -> str:
        """Write an item with an idempotency key."""
        await _record_and_gate("upsert", gate, ctx)
        return f"upserted {item} with {_key(ctx)}"

    @server.tool()
    async def write(text: str, ctx: Context, gate: str = "") -> str:
        """Write text; never twice."""
        await _record_and_gate("write", gate, ctx)
        return f"wrote {text}"

    @server.tool(annotations={"readOnlyHint": True})
    async def trace_probe(ctx: Context) -> str:
        """Records and returns the traceparent the call's _meta carried."""
        traceparent = _traceparent(ctx.request_context.meta)
        _log().record("trace_probe", key=traceparent)
        return traceparent

    @server.tool(annotations={"readOnlyHint": True})
    async def broken(ctx: Context) -> str:
        """Always fails."""
        _log().record("broken", key=_key(ctx))
        raise ToolError("the broken tool always fails")

    @server.tool(annotations={"readOnlyHint": True})
    async def progress(ctx: Context) -> str:
        """Reports progress twice."""
        await ctx.report_progress(1, 2, "half way")
        await ctx.report_progress(2, 2, "done")
        return "progressed"

    @server.tool(annotations={"readOnlyHint": True})
    async def regional(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    ) -> str:
        """Answers with the region its Mcp-Param-Region header carried."""
        return f"served in {region}"

    @server.tool(annotations={"readOnlyHint": True})
    async def mixed(ctx: Context) -> list[Any]:
        """Returns two text blocks."""
        return ["first", "second"]

    # The task tools: over HTTP the tasks extension runs them as tasks; these bodies run only for
    # a client that does not declare the extension.
    @server.tool(annotations={"readOnlyHint": True})
    async def slow_report(item: str, gate: str = "") -> str:
        """Build a report, slowly."""
        return await _slow_report(ServerTask("inline", 1000), {"item": item, "gate": gate})

    @server.tool()
    async def ask_account() -> str:
        """Charge an account, asking which."""
        raise ToolError("ask_account needs the tasks extension")

    @server.tool(annotations={"readOnlyHint": True})
    async def two_questions() -> str:
        """Ask two questions at once."""
        raise ToolError("two_questions needs the tasks extension")

    @server.resource("notes://today", mime_type="text/plain")
    def today() -> str:
        """Today's notes."""
        return "buy milk"

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Say hello to {name}."

    return server


async def _slow_report(task: ServerTask, arguments: Mapping[str, Any]) -> str:
    _log().record("slow_report", key=str(arguments.get("item", "")))
    await _gate(str(arguments.get("gate", "")))
    return f"report on {arguments.get('item')} ready"


async def _ask_account(task: ServerTask, arguments: Mapping[str, Any]) -> str:
    _log().record("ask_account")
    responses = await task.ask(
        {
            "account": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": ACCOUNT_QUESTION,
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "account": {"type": "string", "enum": list(ACCOUNT_CHOICES)}
                        },
                        "required": ["account"],
                    },
                },
            }
        }
    )
    response = responses["account"]
    _log().record("ask_account_answered", key=str(response))
    if response.get("action") != "accept":
        return f"no account: {response.get('action')}"
    return f"charged {response['content']['account']}"


async def _two_questions(task: ServerTask, arguments: Mapping[str, Any]) -> str:
    def question(message: str) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"value": {"type": "string"}}}
        return {
            "method": "elicitation/create",
            "params": {"message": message, "requestedSchema": schema},
        }

    await task.ask({"name": question("Your name?"), "city": question("Your city?")})
    return "never"


async def _serve_http(server: MCPServer) -> None:
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)  # accept connections from the moment the port is announced
    print(f"ready {listener.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(stateless_http=True), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[listener])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("--state-dir", required=True)
    options = parser.parse_args()
    _State.directory = Path(options.state_dir)
    _State.parent_pid = os.getppid()  # a forked server's parent is not its importer's
    server = build_server(options.transport == "http")
    if options.transport == "http":
        asyncio.run(_serve_http(server))
    else:
        server.run()


def preload_worker() -> None:
    """Import what the HTTP server imports as it starts, once, in the warm parent that
    ``HttpMcpServer`` forks its servers from (``dex_agents.testing``'s fork servers)."""
    import uvicorn  # noqa: F401

    build_server(True)


if __name__ == "__main__":
    main()

"""Benchmark: the per-call overhead of an MCP tool Step against calling the same server directly.

A small MCP server (one ``readOnlyHint`` tool, ``lookup``, that answers at once) runs over
Streamable HTTP on loopback in a child process. The script measures, median of ``--calls``:

1. direct: one ``tools/call`` with the MCP SDK on a new connection, as ``McpToolSource`` opens
   one per request (``server/discover``, then the call; the TLS context is made once, as the
   source does);
2. direct, one connection: the same call over a connection kept open (the SDK's floor);
3. ``McpToolSource.call_tool``: the source's own path, no Dex;
4. the MCP tool Step: a durable Stepwise turn (local engine, in-process Worker, scripted model
   with no latency) that calls the MCP tool once, minus the same turn calling a function tool
   that returns at once; so this is what an MCP call costs inside a tool Step beyond a
   function tool's Step. The ratio to (1) is the overhead of making the call a Step.

It also prints the turn times themselves, so the Step machinery a tool call adds to a turn is
visible too. Run from the repository root::

    uv run python benchmarks/mcp_tool_overhead.py
    uv run python benchmarks/mcp_tool_overhead.py --calls 50 --warmup 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionClient, AgentSnapshot, AgentStatus, ToolEffect
from dex_agents.mcp import McpStreamableHttpServerConfig, McpToolSource
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    function_tool,
    stepwise_agent_session_flow,
)
from dex_agents.testing import EngineLogs, EngineProcess, in_process_worker, wait_for_agent_snapshot


def _serve() -> None:
    import uvicorn
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    server = MCPServer("bench")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def lookup(item: str) -> str:
        """Look an item up."""
        return f"{item} is in stock"

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print(f"ready {listener.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(stateless_http=True), log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


async def _interleaved_medians(
    measured: dict[str, Callable[[int], Awaitable[object]]], calls: int, warmup: int
) -> dict[str, float]:
    """Runs one call of each in turn, round after round, so drifting machine load hits every
    figure alike; returns each median in seconds."""
    times: dict[str, list[float]] = {label: [] for label in measured}
    for index in range(-warmup, calls):
        for label, call in measured.items():
            started = time.perf_counter()
            await call(index)
            if index >= 0:
                times[label].append(time.perf_counter() - started)
    return {label: statistics.median(values) for label, values in times.items()}


@function_tool(effect=ToolEffect.READ)
async def local_lookup(item: str) -> str:
    """Look an item up in memory."""
    return f"{item} is in stock"


def _reply(tool: str) -> Callable[[ModelRequest], ScriptedModelReply]:
    def reply(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        if results:
            return ScriptedModelReply(text=results[-1].output)
        return ScriptedModelReply(tool_calls=[ScriptedToolCall(tool, {"item": "lamp"})])

    return reply


def _flows(url: str) -> tuple[McpToolSource, Any, Any]:
    source = McpToolSource([McpStreamableHttpServerConfig(name="bench", url=url)])
    mcp_flow = stepwise_agent_session_flow(
        AgentDefinition(
            name="mcp",
            instructions="",
            model=ScriptedModelClient(_reply("bench__lookup")),
            tool_sources=[source],
        ),
        flow_type="McpBench",
    )
    local_flow = stepwise_agent_session_flow(
        AgentDefinition(
            name="local",
            instructions="",
            model=ScriptedModelClient(_reply("local_lookup")),
            tools=[local_lookup],
        ),
        flow_type="LocalBench",
    )
    return source, mcp_flow, local_flow


def _turn(sessions: AgentSessionClient, prefix: str) -> Callable[[int], Awaitable[object]]:
    async def run(index: int) -> object:
        session_id = f"{prefix}-{index}"
        await sessions.start_session(session_id, "Is the lamp in stock?")

        def ended(snapshot: AgentSnapshot) -> AgentSnapshot | None:
            state = snapshot.state
            done = (
                state is not None
                and state.turn_count >= 1
                and state.active_turn_id is None
                and state.status == AgentStatus.WAITING_FOR_USER_MESSAGE
            )
            return snapshot if done else None

        return await wait_for_agent_snapshot(
            sessions, session_id, ended, "the turn to end", timeout=120
        )

    return run


async def _benchmark(calls: int, warmup: int) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as scratch:
        directory = Path(scratch)
        engine = await EngineProcess.start_local(
            directory / "engine.db", EngineLogs.in_directory(directory / "engine")
        )
        try:
            assert child.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 60)
            url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
            source, mcp_flow, local_flow = _flows(url)
            tls = httpx2.create_ssl_context()  # made once, as the source does

            async def direct(index: int) -> object:
                async with (
                    httpx2.AsyncClient(verify=tls) as http,
                    Client(
                        streamable_http_client(url, http_client=http), mode="auto", cache=None
                    ) as client,
                ):
                    return await client.call_tool("lookup", {"item": "lamp"})

            async def through_source(index: int) -> object:
                key = f"bench/turn-1/c{index}"
                return await source.call_tool(
                    "bench__lookup", {"item": "lamp"}, idempotency_key=key
                )

            async with (
                Client(url, mode="auto", cache=None) as kept,
                in_process_worker(
                    [mcp_flow, local_flow], engine.server_address, directory / "cache"
                ) as dex,
            ):

                async def direct_kept(index: int) -> object:
                    return await kept.call_tool("lookup", {"item": "lamp"})

                await source.list_tools()  # a warm listing cache, as on a running Worker
                print(f"MCP server on {url}; medians of {calls} rounds after {warmup}:")
                medians = await _interleaved_medians(
                    {
                        "1. direct tools/call, new connection": direct,
                        "2. direct tools/call, one connection kept open": direct_kept,
                        "3. McpToolSource.call_tool": through_source,
                        "turn with a function tool (no MCP)": _turn(dex.sessions(local_flow), "l"),
                        "turn with the MCP tool": _turn(dex.sessions(mcp_flow), "m"),
                    },
                    calls,
                    warmup,
                )
        finally:
            await engine.stop()
            child.kill()
            child.wait()
    for label, seconds in medians.items():
        print(f"  {label:<58} {seconds * 1000:9.2f} ms")
    direct_s = medians["1. direct tools/call, new connection"]
    source_s = medians["3. McpToolSource.call_tool"]
    local_turn = medians["turn with a function tool (no MCP)"]
    mcp_turn = medians["turn with the MCP tool"]
    step_s = mcp_turn - local_turn
    print(
        f"  {'4. MCP call in its tool Step (MCP turn - function-tool turn)':<58} "
        f"{step_s * 1000:9.2f} ms"
    )
    print()
    print(f"source / direct:           {source_s / direct_s:6.2f}x")
    print(f"MCP tool Step / direct:    {step_s / direct_s:6.2f}x")
    print(
        json.dumps(
            {
                "direct_ms": round(direct_s * 1000, 2),
                "source_ms": round(source_s * 1000, 2),
                "function_tool_turn_ms": round(local_turn * 1000, 2),
                "mcp_tool_turn_ms": round(mcp_turn * 1000, 2),
                "mcp_step_ms": round(step_s * 1000, 2),
                "step_to_direct_ratio": round(step_s / direct_s, 3),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=30, help="measured calls per figure")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured calls first")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        _serve()
        return
    asyncio.run(_benchmark(options.calls, options.warmup))


if __name__ == "__main__":
    main()

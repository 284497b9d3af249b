"""Benchmark: an MCP tool call on the Worker's reused MCP session against one connection per call.

``McpToolSource`` keeps one MCP session per server and Worker process. This script calls
``echo`` of ``@modelcontextprotocol/server-everything`` (a server of the 2025-11-25
specification, installed by ``.ci/run`` with npm; set ``DEX_AGENTS_SERVER_EVERYTHING``) through
``McpToolSource.call_tool``, over stdio and over Streamable HTTP, alternating call by call:

- new connection per call (the behaviour before the pool): every pooled connection is closed
  before the call, so it starts a process (stdio) or a session (HTTP) and sends the handshake;
- reused session: the call goes over the connection the previous call left open.

It prints the median and the 90th percentile latency per call and the calls per second each way,
and the load average it ran under: compare only figures of one run. Run from the repository root::

    DEX_AGENTS_SERVER_EVERYTHING=.ci/npm/node_modules/.bin/mcp-server-everything \\
        uv run python benchmarks/mcp_session_reuse.py --calls 40
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import time
from collections.abc import Awaitable, Callable

from dex_agents.mcp import (
    McpServerConfig,
    McpStdioServerConfig,
    McpStreamableHttpServerConfig,
    McpToolSource,
)
from dex_agents.mcp._connection import close_connections


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _measure(
    label: str, calls: int, warmup: int, call: Callable[[bool, int], Awaitable[None]]
) -> None:
    timings: dict[bool, list[float]] = {False: [], True: []}
    for index in range(warmup + calls):
        for reuse in (False, True):
            started = time.perf_counter()
            await call(reuse, index)
            if index >= warmup:
                timings[reuse].append(time.perf_counter() - started)
    for reuse, name in ((False, "new connection per call"), (True, "reused session")):
        values = sorted(timings[reuse])
        median = statistics.median(values)
        p90 = values[int(0.9 * (len(values) - 1))]
        print(
            f"{label:6} {name:24} median {median * 1000:8.1f} ms  p90 {p90 * 1000:8.1f} ms  "
            f"{1 / statistics.mean(values):7.1f} calls/s"
        )


async def _run_server(config: McpServerConfig, label: str, calls: int, warmup: int) -> None:
    source = McpToolSource([config])
    await source.list_tools()

    async def call(reuse: bool, index: int) -> None:
        if not reuse:
            await close_connections()
        output = await source.call_tool(
            "everything__echo", {"message": f"m{index}"}, idempotency_key=f"bench/t/{index}"
        )
        assert f"m{index}" in output, output

    await _measure(label, calls, warmup, call)
    await close_connections()


async def _benchmark(executable: str, calls: int, warmup: int) -> None:
    print(f"load average: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    stdio = McpStdioServerConfig(name="everything", command=executable, args=["stdio"])
    await _run_server(stdio, "stdio", calls, warmup)
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        executable,
        "streamableHttp",
        env={**os.environ, "PORT": str(port)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        while b"listening on port" not in await asyncio.wait_for(process.stderr.readline(), 60):
            pass
        http = McpStreamableHttpServerConfig(name="everything", url=f"http://127.0.0.1:{port}/mcp")
        await _run_server(http, "http", calls, warmup)
    finally:
        process.kill()
        await process.wait()
    print(f"load average: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=30, help="measured calls per figure")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured calls first")
    arguments = parser.parse_args()
    executable = os.environ.get("DEX_AGENTS_SERVER_EVERYTHING")
    if not executable:
        raise SystemExit("set DEX_AGENTS_SERVER_EVERYTHING to the mcp-server-everything executable")
    asyncio.run(_benchmark(executable, arguments.calls, arguments.warmup))


if __name__ == "__main__":
    main()

"""Start the test MCP server: a stdio config (a process per request) or a Streamable HTTP server
on loopback in a child process, which a test can kill mid-call."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from dex_agents.mcp import McpStdioServerConfig, McpStreamableHttpServerConfig

SERVER_SCRIPT = Path(__file__).resolve().parent / "server.py"


def stdio_config(state_dir: Path, name: str = "files", **options: Any) -> McpStdioServerConfig:
    """The test server as a stdio server that logs to ``state_dir``."""
    return McpStdioServerConfig(
        name=name,
        command=sys.executable,
        args=[str(SERVER_SCRIPT), "stdio", "--state-dir", str(state_dir)],
        **options,
    )


class HttpMcpServer:
    """The test server over Streamable HTTP on 127.0.0.1, in a child process."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.port: int | None = None
        self._process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        assert self.port is not None, "the HTTP server is not started"
        return f"http://127.0.0.1:{self.port}/mcp"

    def config(self, name: str = "tickets", **options: Any) -> McpStreamableHttpServerConfig:
        return McpStreamableHttpServerConfig(name=name, url=self.url, **options)

    async def start(self) -> HttpMcpServer:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT), "http", "--state-dir", str(self.state_dir)],
            stdout=subprocess.PIPE,
            stderr=open(self.state_dir / "http-server.stderr", "a"),  # noqa: SIM115
            text=True,
            start_new_session=True,
        )
        stdout = self._process.stdout
        assert stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(stdout.readline), 60)
        if not line.startswith("ready "):
            self.kill()
            raise RuntimeError(f"the test MCP server did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()

    async def __aenter__(self) -> HttpMcpServer:
        return await self.start()

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.kill()

"""Start the test MCP server: a stdio config (a process per request) or a Streamable HTTP server
on loopback in a child process, which a test can kill mid-call."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from dex_agents.mcp import McpStdioServerConfig, McpStreamableHttpServerConfig
from dex_agents.testing._child_process import ChildProcess, kill_process_group, start_child, tail
from dex_agents.testing._fork_server import ForkedProcess, fork_child

SERVER_SCRIPT = Path(__file__).resolve().parent / "server.py"
_TESTS_DIR = SERVER_SCRIPT.parents[1]


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
        self._process: ChildProcess | None = None

    @property
    def url(self) -> str:
        assert self.port is not None, "the HTTP server is not started"
        return f"http://127.0.0.1:{self.port}/mcp"

    def config(self, name: str = "tickets", **options: Any) -> McpStreamableHttpServerConfig:
        return McpStreamableHttpServerConfig(name=name, url=self.url, **options)

    async def start(self) -> HttpMcpServer:
        """Start the server, forked from a warm parent (``python server.py`` without fork
        servers), and wait for the port it announces.

        Raises:
            RuntimeError: It exited or announced no port within a minute.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        stdout_path = self.state_dir / "http-server.stdout"
        stderr_path = self.state_dir / "http-server.stderr"
        arguments = ["http", "--state-dir", str(self.state_dir)]
        self._process = fork_child(
            "mcp_test_support.server",
            preload_env={},
            cwd=_TESTS_DIR,
            env=dict(os.environ),
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            argv=arguments,
        ) or start_child(
            [sys.executable, str(SERVER_SCRIPT), *arguments],
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            own_process_group=True,
        )
        line = await asyncio.wait_for(self._announcement(stdout_path), 60)
        if not line.startswith("ready "):
            self.kill()
            raise RuntimeError(f"the test MCP server did not start: {line!r}; {tail(stderr_path)}")
        self.port = int(line.split()[1])
        return self

    async def _announcement(self, stdout_path: Path) -> str:
        """The server's first line, or "" when it exited without one."""
        assert self._process is not None
        while True:
            exited = self._process.poll() is not None
            text = stdout_path.read_text() if stdout_path.exists() else ""
            if "\n" in text or exited:
                return text.partition("\n")[0]
            await asyncio.sleep(0.01)

    @property
    def forked(self) -> bool:
        """Whether the server was forked from a warm parent."""
        return isinstance(self._process, ForkedProcess)

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        if self._process is not None:
            kill_process_group(self._process)

    async def __aenter__(self) -> HttpMcpServer:
        return await self.start()

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.kill()

"""One connection to an MCP server per request, on the MCP SDK.

Every request opens a new connection: a new process for a stdio server, a new HTTP connection for
a Streamable HTTP server. The SDK's ``mode="auto"`` probes ``server/discover`` (MCP 2026-07-28,
no protocol session) and falls back to the ``initialize`` handshake for older servers, such as
those of the 2025-11-25 specification; a server that answered the handshake is remembered for the
life of the Worker process, so its later connections skip the probe (one round trip fewer, and no
failed ``server/discover`` request in every trace). The
connection declares the tasks extension (``io.modelcontextprotocol/tasks``) on every request,
so a server may answer ``tools/call`` with a task handle; the ``tasks/*`` requests are sent here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, Literal

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)
from pydantic import BaseModel, ConfigDict

from dex_agents.mcp._errors import McpServerUnreachableError
from dex_agents.mcp._server_config import McpServerConfig, McpStdioServerConfig

__all__ = [
    "INTERRUPTION_ERROR_CODES",
    "TASKS_EXTENSION",
    "McpConnection",
    "McpTaskHandle",
    "describe_error",
    "leaf_errors",
    "open_connection",
]

_LOG = logging.getLogger(__name__)

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The MCP tasks extension the source declares on every request."""

INTERRUPTION_ERROR_CODES: Final = frozenset(
    {CONNECTION_CLOSED, REQUEST_TIMEOUT, INTERNAL_ERROR, PARSE_ERROR}
)
"""JSON-RPC codes that leave a sent request's outcome unknown: the SDK reports a broken stream
(-32000) and a timeout (-32001) with them, and a gateway can answer -32603 (also an HTTP error
status) or -32700 (a body that is not JSON-RPC) after the server ran the call."""


class _RawResult(BaseModel):
    """Any result, kept as the server sent it."""

    model_config = ConfigDict(extra="allow")


class McpTaskHandle(mcp_types.Result):
    """A ``tools/call`` answer of ``resultType: "task"`` (the tasks extension's CreateTaskResult)."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"
    task_id: str
    status: str = "working"
    status_message: str | None = None
    poll_interval_ms: int | None = None
    ttl_ms: int | None = None


async def _unused_resolve(handle: McpTaskHandle, context: ClaimContext) -> mcp_types.CallToolResult:
    # The source reads task handles itself (allow_claimed=True); the SDK never resolves them.
    raise RuntimeError(f"task {handle.task_id} of {context.tool_name} is polled by dex_agents.mcp")


class _TasksExtension(ClientExtension):
    """Declares the tasks extension and lets ``tools/call`` parse a task handle."""

    identifier = TASKS_EXTENSION

    def claims(self) -> tuple[ResultClaim[McpTaskHandle], ...]:
        return (ResultClaim(result_type="task", model=McpTaskHandle, resolve=_unused_resolve),)


class _TaskRequest(mcp_types.Request[dict[str, Any], str]):
    """A ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` request; routed by ``taskId``."""

    method: str
    params: dict[str, Any]
    name_param = "taskId"


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups, which the SDK's task groups raise."""
    if isinstance(error, BaseExceptionGroup):
        leaves: list[BaseException] = []
        for inner in error.exceptions:
            leaves.extend(leaf_errors(inner))
        return leaves
    return [error]


def describe_error(error: BaseException) -> str:
    """One line naming what failed, unwrapping exception groups."""
    parts = []
    for leaf in leaf_errors(error):
        if isinstance(leaf, MCPError):
            parts.append(f"{leaf.error.message} (MCP error {leaf.error.code})")
        else:
            parts.append(f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__)
    return "; ".join(parts)


@dataclass
class McpConnection:
    """An open connection: the SDK client and the server it reaches."""

    server: McpServerConfig
    client: Client

    @property
    def session(self) -> Any:
        """The SDK's ClientSession (typed loosely: its overloads depend on flags)."""
        return self.client.session

    async def tasks_request(self, method: str, task_id: str, **params: object) -> dict[str, Any]:
        """Sends one ``tasks/*`` request and returns the raw result.

        Raises:
            MCPError: For an error answer or a broken connection.
        """
        request = _TaskRequest(method=method, params={"taskId": task_id, **params})
        result = await self.client.session.send_request(
            request,
            _RawResult,
            request_read_timeout_seconds=self.server.connection_timeout.total_seconds(),
        )
        return dict(result.model_extra or {})


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # The HTTP client's default context, made once: loading the trust store takes far longer
    # than a loopback request, and every request opens a new connection.
    return httpx2.create_ssl_context()


_HANDSHAKE_SERVERS: set[tuple[str, str]] = set()
"""Servers (by ``_server_key``) that answered the ``initialize`` handshake in this process."""


def _server_key(server: McpServerConfig) -> tuple[str, str]:
    if isinstance(server, McpStdioServerConfig):
        return server.name, " ".join([server.command, *server.args])
    return server.name, server.url


def _connect_mode(server: McpServerConfig) -> Literal["auto", "legacy"]:
    """``legacy`` for a server known to speak only the handshake, else ``auto`` (probe first)."""
    return "legacy" if _server_key(server) in _HANDSHAKE_SERVERS else "auto"


def _remember_protocol(server: McpServerConfig, client: Client) -> None:
    if client.session.initialize_result is not None:
        _HANDSHAKE_SERVERS.add(_server_key(server))


def _sdk_client(server: McpServerConfig, stack: AsyncExitStack) -> Client:
    extensions = [_TasksExtension()]
    mode = _connect_mode(server)
    read_timeout = server.connection_timeout.total_seconds()
    if isinstance(server, McpStdioServerConfig):
        parameters = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=None if server.env is None else dict(server.env),
            cwd=server.cwd,
        )
        return Client(
            parameters,
            mode=mode,
            cache=None,
            extensions=extensions,
            read_timeout_seconds=read_timeout,
        )
    http_client = httpx2.AsyncClient(
        headers=dict(server.headers),
        verify=_tls_context(),
        timeout=httpx2.Timeout(
            server.request_timeout.total_seconds(),
            connect=server.connection_timeout.total_seconds(),
        ),
    )
    stack.push_async_callback(http_client.aclose)
    return Client(
        streamable_http_client(server.url, http_client=http_client),
        mode=mode,
        cache=None,
        extensions=extensions,
        read_timeout_seconds=read_timeout,
    )


@asynccontextmanager
async def open_connection(server: McpServerConfig) -> AsyncIterator[McpConnection]:
    """Connects to ``server``, trying ``connection_attempts`` times, each bounded by
    ``connection_timeout``, and closes the connection on exit.

    Raises:
        McpServerUnreachableError: Every attempt failed, so nothing was sent.
    """
    failures: list[str] = []
    for attempt in range(1, server.connection_attempts + 1):
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            client = _sdk_client(server, stack)
            async with asyncio.timeout(server.connection_timeout.total_seconds()):
                await stack.enter_async_context(client)
            _remember_protocol(server, client)
        except Exception as error:
            await _close_quietly(stack)
            failures.append(f"attempt {attempt}: {describe_error(error)}")
            _LOG.debug(
                "MCP server %s: connection attempt %d failed", server.name, attempt, exc_info=True
            )
            continue
        try:
            yield McpConnection(server, client)
        except asyncio.CancelledError as cancelled:
            # When a transport task fails (the stream broke, the process exited), the SDK's task
            # group cancels the request; handing the cancellation back to it raises the failure
            # that caused it. A cancellation from outside is raised again as it is.
            await stack.__aexit__(type(cancelled), cancelled, cancelled.__traceback__)
            raise
        except BaseException:
            await _close_quietly(stack)
            raise
        await _close_quietly(stack)
        return
    raise McpServerUnreachableError(
        f"MCP server {server.name} could not be reached in {server.connection_attempts} "
        f"connection attempt(s): {'; '.join(failures)}"
    )


async def _close_quietly(stack: AsyncExitStack) -> None:
    # Closing a connection whose process already exited or whose stream broke raises from the
    # SDK's task groups; the request's own outcome has been decided by then.
    try:
        await stack.aclose()
    except Exception:
        _LOG.debug("closing an MCP connection failed", exc_info=True)

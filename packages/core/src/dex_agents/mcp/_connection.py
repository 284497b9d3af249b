"""One MCP session per server and Worker process, on the MCP SDK, reused across requests.

The first request to a server opens its connection (a process for a stdio server, an MCP session
for a Streamable HTTP server); later requests in the same process and event loop reuse it. A
connection whose transport failed (the process exited, the stream broke) is dropped, and the next
request opens a new one. A Streamable HTTP session the server rejects (HTTP 404 for an ended
session, or 400 for one it no longer knows) ran nothing: the connection is dropped, and a read is
sent again on a new session (``read_on_connection``), as is a ``tools/call`` whose own request was
rejected (``McpConnection.call_rejected``).

The SDK's ``mode="auto"`` probes ``server/discover`` (MCP 2026-07-28, no protocol session) and
falls back to the ``initialize`` handshake for older servers, such as those of the 2025-11-25
specification; a server that answered the handshake is remembered for the life of the Worker
process, so its later connections skip the probe. The negotiation runs under an unsampled span, so
a probe the server refuses (``Method not found``) is a protocol fallback, never an ERROR span in
the caller's trace. The connection declares the tasks extension (``io.modelcontextprotocol/tasks``)
on every request, so a server may answer ``tools/call`` with a task handle; the ``tasks/*``
requests are sent here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import secrets
import ssl
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)
from opentelemetry import trace
from pydantic import BaseModel, ConfigDict

from dex_agents.mcp._errors import McpServerUnreachableError
from dex_agents.mcp._input_requests import input_request_error
from dex_agents.mcp._server_config import (
    McpServerConfig,
    McpStdioServerConfig,
    McpStreamableHttpServerConfig,
)

__all__ = [
    "INTERRUPTION_ERROR_CODES",
    "TASKS_EXTENSION",
    "McpConnection",
    "McpTaskHandle",
    "describe_error",
    "http_client",
    "leaf_errors",
    "mark_not_run",
    "open_connection",
    "read_on_connection",
    "session_expired",
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
    """A ``tools/call`` answer of ``resultType: "task"`` (the tasks extension's CreateTaskResult),
    or a 2025-11-25 ``CreateTaskResult`` made into one (``protocol_version`` set).

    Attributes:
        protocol_version: The handshake's version for a task of the 2025-11-25 specification,
            whose ``tasks/*`` requests go to the session that created it; ``None`` for the
            tasks extension's, which any connection can poll.
        session_id: That session's ``Mcp-Session-Id`` (Streamable HTTP), else ``None``.
    """

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"
    task_id: str
    status: str = "working"
    status_message: str | None = None
    poll_interval_ms: int | None = None
    ttl_ms: int | None = None
    protocol_version: str | None = None
    session_id: str | None = None


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
    """An open connection: the SDK client, the server it reaches, and, for Streamable HTTP, the
    MCP session ID the server gave it (``None`` for stdio or a server without sessions)."""

    server: McpServerConfig
    client: Client
    http_session: list[str] = field(default_factory=list, repr=False)
    rejected_sessions: set[str] = field(default_factory=set, repr=False)
    rejected_keys: set[str] = field(default_factory=set, repr=False)

    def call_rejected(self, idempotency_key: str) -> bool:
        """Whether the server answered HTTP 400 or 404 to a ``tools/call`` with this key: it
        rejected the session, so it did not run that call."""
        return idempotency_key in self.rejected_keys

    @property
    def session_rejected(self) -> bool:
        """Whether the server answered HTTP 400 or 404 to a request of this connection's MCP
        session: it ended or never knew the session, and ran none of its requests since."""
        return self.session_id is not None and self.session_id in self.rejected_sessions

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` of a Streamable HTTP connection, once the server sent one."""
        return self.http_session[-1] if self.http_session else None

    @property
    def speaks_handshake(self) -> bool:
        """Whether the server answered the ``initialize`` handshake (2025-11-25 and older)."""
        return self.client.session.initialize_result is not None

    @property
    def session(self) -> Any:
        """The SDK's ClientSession (typed loosely: its overloads depend on flags)."""
        return self.client.session

    async def tasks_request(
        self, method: str, task_id: str, *, timeout: float | None = None, **params: object
    ) -> dict[str, Any]:
        """Sends one ``tasks/*`` request and returns the raw result; bounded by ``timeout``, or
        by the server's ``connection_timeout``.

        Raises:
            MCPError: For an error answer or a broken connection.
        """
        request = _TaskRequest(method=method, params={"taskId": task_id, **params})
        result = await self.client.session.send_request(
            request,
            _RawResult,
            request_read_timeout_seconds=(
                timeout if timeout is not None else self.server.connection_timeout.total_seconds()
            ),
        )
        return dict(result.model_extra or {})

    async def handshake_request(
        self, method: str, params: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        """Sends a request to a server of the handshake (2025-11-25) and returns the raw result,
        unvalidated: the SDK validates a ``tools/call`` result as a ``CallToolResult``, and a
        task-augmented call's ``CreateTaskResult`` is not one. The headers are the SDK's for a
        handshake session (``MCP-Protocol-Version``).

        Raises:
            MCPError: For an error answer or a broken connection.
        """
        session = self.client.session
        options: Any = {
            "timeout": timeout,
            "headers": {"mcp-protocol-version": session.protocol_version},
        }
        raw: dict[str, Any] = await session._dispatcher.send_raw_request(method, params, options)
        return raw

    def handshake_task_tools(self) -> bool:
        """Whether the server answered the handshake and declared task-augmented ``tools/call``
        (``capabilities.tasks.requests.tools.call``, 2025-11-25)."""
        if not self.speaks_handshake:
            return False
        capabilities = self.client.session.server_capabilities
        tasks = None if capabilities is None else capabilities.tasks
        requests = None if tasks is None else tasks.requests
        tools = None if requests is None else requests.tools
        return tools is not None and tools.call is not None


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # The HTTP client's default context, made once: loading the trust store takes far longer
    # than a loopback request.
    return httpx2.create_ssl_context()


_IDEMPOTENCY_KEY: Final = "io.superdurable.dex/idempotencyKey"
"""``IDEMPOTENCY_KEY_META_KEY`` (defined with the tool call, which imports this module)."""
_SESSION_REJECTED_STATUSES: Final = frozenset({400, 404})
"""HTTP statuses of a request on a session that the server ended (404, as the specification
says) or no longer knows (400, as server-everything answers): the request was not run."""
_SESSION_REJECTED_NOTE: Final = (
    "the MCP server rejected the connection's session (HTTP 400 or 404), so it did not run the "
    "request"
)

_HANDSHAKE_SERVERS: set[tuple[str, str]] = set()
"""Servers (by ``_server_key``) that answered the ``initialize`` handshake in this process."""


def _server_key(server: McpServerConfig) -> tuple[str, str]:
    if isinstance(server, McpStdioServerConfig):
        return server.name, " ".join([server.command, *server.args])
    return server.name, server.url


def _pool_key(server: McpServerConfig) -> tuple[object, ...]:
    # Everything that changes what a connection is: two sources configuring the same server share
    # its connection, a different environment or header never does.
    if isinstance(server, McpStdioServerConfig):
        env = None if server.env is None else tuple(sorted(server.env.items()))
        return ("stdio", server.name, server.command, tuple(server.args), env, server.cwd)
    return ("http", server.name, server.url, tuple(sorted(server.headers.items())))


def _connect_mode(server: McpServerConfig) -> Literal["auto", "legacy"]:
    """``legacy`` for a server known to speak only the handshake, else ``auto`` (probe first)."""
    return "legacy" if _server_key(server) in _HANDSHAKE_SERVERS else "auto"


def _remember_protocol(server: McpServerConfig, client: Client) -> None:
    if client.session.initialize_result is not None:
        _HANDSHAKE_SERVERS.add(_server_key(server))


@contextmanager
def _unsampled() -> Iterator[None]:
    """Makes the spans the SDK starts here children of an unsampled span, so a parent-based
    sampler (OpenTelemetry's default) drops them: the era negotiation's refused probe is a
    protocol fallback, not an error of the caller's trace."""
    context = trace.SpanContext(
        trace_id=secrets.randbits(128) or 1,
        span_id=secrets.randbits(64) or 1,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT),
    )
    with trace.use_span(trace.NonRecordingSpan(context), end_on_exit=False):
        yield


def http_client(server: McpStreamableHttpServerConfig, **options: Any) -> httpx2.AsyncClient:
    """An HTTP client for ``server``: its headers, the shared TLS context, its timeouts."""
    return httpx2.AsyncClient(
        headers=dict(server.headers),
        verify=_tls_context(),
        timeout=httpx2.Timeout(
            server.request_timeout.total_seconds(),
            connect=server.connection_timeout.total_seconds(),
        ),
        **options,
    )


def _refusal(method: str, params: BaseModel) -> mcp_types.ErrorData:
    request = {"method": method, "params": params.model_dump(by_alias=True, exclude_none=True)}
    return mcp_types.ErrorData(code=INVALID_REQUEST, message=input_request_error({"1": request}))


async def _refuse_elicitation(
    context: Any, params: mcp_types.ElicitRequestParams
) -> mcp_types.ErrorData:
    # A request of the server's that only a live connection could answer: the session cannot
    # ask its user and hold the request open (a task's elicitation is asked durably instead).
    return _refusal("elicitation/create", params)


async def _refuse_sampling(
    context: Any, params: mcp_types.CreateMessageRequestParams
) -> mcp_types.ErrorData:
    return _refusal("sampling/createMessage", params)


def _rejected_call_key(request: httpx2.Request) -> str | None:
    """The idempotency key of a rejected ``tools/call`` request body, else ``None``."""
    try:
        body = json.loads(request.content or b"null")
        key = body["params"]["_meta"][_IDEMPOTENCY_KEY]
    except (ValueError, KeyError, TypeError, httpx2.RequestNotRead):
        return None
    return key if isinstance(key, str) and body.get("method") == "tools/call" else None


def _sdk_client(
    server: McpServerConfig,
    stack: AsyncExitStack,
    session_ids: list[str],
    rejected: set[str],
    rejected_keys: set[str],
) -> Client:
    extensions = [_TasksExtension()]
    callbacks: dict[str, Any] = {
        "elicitation_callback": _refuse_elicitation,
        "sampling_callback": _refuse_sampling,
    }
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
            **callbacks,
        )

    async def note_session(response: httpx2.Response) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id and session_id not in session_ids:
            session_ids.append(session_id)
        sent_with = response.request.headers.get("mcp-session-id")
        if sent_with and response.status_code in _SESSION_REJECTED_STATUSES:
            rejected.add(sent_with)
            key = _rejected_call_key(response.request)
            if key is not None:
                rejected_keys.add(key)

    client = http_client(server, event_hooks={"response": [note_session]})
    stack.push_async_callback(client.aclose)
    return Client(
        # The session is not ended when the Worker stops: a 2025-11-25 server keeps its tasks in
        # the session, and the next Worker polls them there.
        streamable_http_client(server.url, http_client=client, terminate_on_close=False),
        mode=mode,
        cache=None,
        extensions=extensions,
        read_timeout_seconds=read_timeout,
        **callbacks,
    )


@dataclass
class _Pooled:
    """A connection held open by its owner task until ``close`` is set or its transport fails."""

    connection: McpConnection
    owner: asyncio.Task[None]
    close: asyncio.Event

    @property
    def usable(self) -> bool:
        return not self.owner.done() and not self.close.is_set()


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[object, ...], _Pooled]] = (
    weakref.WeakKeyDictionary()
)
_OPENING: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[object, ...], asyncio.Lock]
] = weakref.WeakKeyDictionary()


async def _own(
    server: McpServerConfig,
    opened: asyncio.Future[McpConnection],
    close: asyncio.Event,
) -> None:
    # The SDK's task groups must be entered and left by one task, so this task owns the
    # connection while any number of requests share it.
    try:
        async with AsyncExitStack() as stack:
            session_ids: list[str] = []
            rejected: set[str] = set()
            rejected_keys: set[str] = set()
            client = _sdk_client(server, stack, session_ids, rejected, rejected_keys)
            async with asyncio.timeout(server.connection_timeout.total_seconds()):
                with _unsampled():
                    await stack.enter_async_context(client)
            _remember_protocol(server, client)
            opened.set_result(McpConnection(server, client, session_ids, rejected, rejected_keys))
            await close.wait()
    except BaseException as error:
        if not opened.done():
            opened.set_exception(
                error if isinstance(error, Exception) else ConnectionError(describe_error(error))
            )
        else:
            # Closing a connection whose process already exited or whose stream broke raises from
            # the SDK's task groups; each request's own outcome has been decided by then.
            _LOG.debug("MCP server %s: connection ended", server.name, exc_info=True)
        if isinstance(error, asyncio.CancelledError):
            raise


async def _open(server: McpServerConfig) -> _Pooled:
    failures: list[str] = []
    for attempt in range(1, server.connection_attempts + 1):
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[McpConnection] = loop.create_future()
        close = asyncio.Event()
        owner = loop.create_task(_own(server, opened, close), name=f"mcp-{server.name}")
        try:
            connection = await asyncio.shield(opened)
        except asyncio.CancelledError:
            close.set()
            raise
        except Exception as error:
            failures.append(f"attempt {attempt}: {describe_error(error)}")
            _LOG.debug(
                "MCP server %s: connection attempt %d failed", server.name, attempt, exc_info=True
            )
            continue
        return _Pooled(connection, owner, close)
    raise McpServerUnreachableError(
        f"MCP server {server.name} could not be reached in {server.connection_attempts} "
        f"connection attempt(s): {'; '.join(failures)}"
    )


async def _lease(server: McpServerConfig, *, fresh: bool) -> tuple[_Pooled, bool]:
    """The server's open connection in this loop, or a new one; and whether it was reused."""
    loop = asyncio.get_running_loop()
    pool = _POOLS.setdefault(loop, {})
    key = _pool_key(server)
    lock = _OPENING.setdefault(loop, {}).setdefault(key, asyncio.Lock())
    async with lock:
        pooled = pool.get(key)
        if pooled is not None and pooled.usable and not fresh:
            return pooled, True
        if pooled is not None:
            _discard(pool, key, pooled)
        pooled = await _open(server)
        pool[key] = pooled
        return pooled, False


def _discard(
    pool: dict[tuple[object, ...], _Pooled], key: tuple[object, ...], pooled: _Pooled
) -> None:
    if pool.get(key) is pooled:
        del pool[key]
    pooled.close.set()


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for leaf in leaf_errors(current):
            yield leaf
            if leaf.__cause__ is not None:
                pending.append(leaf.__cause__)


def mark_not_run(error: BaseException) -> None:
    """Notes on ``error`` that the server rejected the request's session, so it did not run it
    (``session_expired`` then says so)."""
    if _SESSION_REJECTED_NOTE not in getattr(error, "__notes__", ()):
        error.add_note(_SESSION_REJECTED_NOTE)


def session_expired(error: BaseException) -> bool:
    """Whether ``error`` shows the server rejected the connection's session (HTTP 400 or 404, or
    the SDK's ``Session terminated``), so it did not run the request."""
    if _SESSION_REJECTED_NOTE in getattr(error, "__notes__", ()):
        return True
    return any(
        isinstance(leaf, MCPError)
        and leaf.error.code == INVALID_REQUEST
        and leaf.error.message == "Session terminated"
        for leaf in _causes(error)
    )


def _connection_lost(error: BaseException) -> bool:
    for leaf in _causes(error):
        if isinstance(leaf, MCPError):
            if leaf.error.code == CONNECTION_CLOSED:
                return True
        elif isinstance(leaf, (OSError, httpx2.TransportError)):
            return True
    return session_expired(error)


@asynccontextmanager
async def open_connection(
    server: McpServerConfig, *, fresh: bool = False
) -> AsyncIterator[McpConnection]:
    """The server's connection, opened on first use (``connection_attempts`` tries, each bounded
    by ``connection_timeout``) and reused by later requests of this process and event loop.

    ``fresh=True`` replaces the open connection first. A failure that shows the connection is
    gone (closed, a transport error, an ended session) drops it, so the next request reconnects.

    Raises:
        McpServerUnreachableError: Every attempt failed, so nothing was sent.
    """
    pooled, _ = await _lease(server, fresh=fresh)
    try:
        yield pooled.connection
    except BaseException as error:
        if not pooled.usable or pooled.connection.session_rejected or _connection_lost(error):
            loop_pool = _POOLS.get(asyncio.get_running_loop(), {})
            _discard(loop_pool, _pool_key(server), pooled)
        raise
    if not pooled.usable:
        _discard(_POOLS.get(asyncio.get_running_loop(), {}), _pool_key(server), pooled)


_T = TypeVar("_T")


async def read_on_connection(
    server: McpServerConfig, read: Callable[[McpConnection], Awaitable[_T]]
) -> _T:
    """Runs a request that changes nothing on the server (a listing, a resource read) on the
    server's connection, and once more on a new connection when the first showed the connection
    gone: a server restarted since the Worker connected costs no failed listing.

    Raises:
        McpServerUnreachableError: Every connection attempt failed.
        Exception: What ``read`` raised on the new connection, or any other failure.
    """
    try:
        async with open_connection(server) as connection:
            try:
                return await read(connection)
            except Exception as error:
                if connection.session_rejected:
                    mark_not_run(error)
                raise
    except McpServerUnreachableError:
        raise
    except Exception as error:
        if not _connection_lost(error):
            raise
        _LOG.info("MCP server %s: the connection is gone; reconnecting", server.name)
    async with open_connection(server, fresh=True) as connection:
        return await read(connection)


async def close_connections() -> None:
    """Closes every pooled connection of the running event loop (a Worker's shutdown, a test)."""
    pool = _POOLS.pop(asyncio.get_running_loop(), {})
    for pooled in pool.values():
        pooled.close.set()
    owners = [pooled.owner for pooled in pool.values()]
    if owners:
        await asyncio.gather(*owners, return_exceptions=True)

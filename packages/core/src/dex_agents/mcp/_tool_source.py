"""McpToolSource: the tools of MCP servers as tools of an agent session.

Every MCP tool call runs in its own tool Step with an effect class from the tool's annotations, so
a crash never repeats a write silently. The source is a ``ToolSource`` for Stepwise
(``AgentDefinition.tool_sources``); any other runner offers ``list_tools()`` and defers every call
with ``deferred_tool_call``, or wraps each tool around ``call_tool`` in its framework.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

import mcp_types

from dex_agents import (
    AgentEventWriter,
    AgentTurnContext,
    ConfigurationError,
    ConfigurationTypeError,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ListedTool,
    McpToolAnnotations,
    ResolvedToolPolicy,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    current_deferred_tool_execution,
    dump_json_text,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.mcp._connection import (
    McpConnection,
    McpTaskHandle,
    describe_error,
    mark_not_run,
    open_connection,
    read_on_connection,
    session_expired,
)
from dex_agents.mcp._errors import (
    McpServerUnreachableError,
    McpTaskError,
    McpToolCallInterruptedError,
)
from dex_agents.mcp._handshake_tasks import (
    HandshakeTask,
    cancel_handshake_task,
    poll_handshake_task,
    session_reader,
)
from dex_agents.mcp._resource_tools import (
    RESOURCE_AND_PROMPT_TOOL_NAMES,
    resource_and_prompt_tools,
    run_resource_or_prompt_tool,
)
from dex_agents.mcp._server_config import (
    McpServerConfig,
    McpStreamableHttpServerConfig,
    check_server_configs,
)
from dex_agents.mcp._tasks import (
    cancel_task,
    first_poll_interval,
    poll_task,
    read_task_checkpoint,
    task_checkpoint,
    wait_for_task,
)
from dex_agents.mcp._tool_call import (
    McpCallTarget,
    interrupted,
    parse_tool_arguments,
    render_tool_result,
    send_tool_call,
)
from dex_agents.mcp._tool_names import agent_tool_name

__all__ = [
    "DEFAULT_LISTING_FAILURE_BACKOFF",
    "DEFAULT_LISTING_TTL",
    "DEFAULT_SOURCE_NAME",
    "McpTool",
    "McpToolSource",
]

_LOG = logging.getLogger(__name__)

DEFAULT_SOURCE_NAME: Final = "mcp"
"""McpToolSource's default ``source_name``; adding or removing a server keeps it."""
DEFAULT_LISTING_TTL: Final = timedelta(minutes=5)
"""How long a server's listing is served before it is listed again in the background."""
DEFAULT_LISTING_FAILURE_BACKOFF: Final = timedelta(seconds=30)
"""How long a server that could not be listed is left out before it is tried again."""
_MAX_LISTING_PAGES: Final = 100
_SERVER_KEY: Final = "server"
_TOOL_KEY: Final = "tool"
_RESOURCE_TOOL_KEY: Final = "resource_tool"
_TASK_SUPPORT_KEY: Final = "task_support"


@dataclass(frozen=True)
class McpTool(ListedTool):
    """One tool of an MCP server as the agent offers it.

    Attributes:
        name: ``<server>__<tool>``, sanitised and at most 64 characters; key ``ToolPolicy``
            entries by it.
        description: The tool's description.
        parameters: Its input JSON Schema (also ``input_schema``).
        framework_effect: The effect its annotations give on a server that is trusted, else None.
        server_name: The configured server's name.
        mcp_tool_name: The tool's name on its server.
        annotations: The tool's annotations as the server sent them.
        task_support: The tool's ``execution.taskSupport`` (2025-11-25): ``required`` or
            ``optional`` calls are sent as tasks to a server that declares task-augmented
            ``tools/call``; ``None`` when absent or ``forbidden``.
    """

    server_name: str = ""
    mcp_tool_name: str = ""
    annotations: McpToolAnnotations | None = None
    task_support: str | None = None

    @property
    def input_schema(self) -> Mapping[str, Any]:
        """The tool's input JSON Schema."""
        return self.parameters


@dataclass
class _ServerListing:
    """A server's cached tools, per Worker."""

    tools: tuple[McpTool, ...] | None = None
    listed_at: float = 0.0
    failed_at: float | None = None
    running: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class _Reference:
    server: str | None = None
    tool: str | None = None
    resource_tool: str | None = None
    task_support: str | None = None


def _read_reference(text: str | None) -> _Reference | None:
    if not text:
        return None
    try:
        decoded = json.loads(text)
    except ValueError:
        return None
    if not isinstance(decoded, dict):
        return None
    if isinstance(decoded.get(_RESOURCE_TOOL_KEY), str):
        return _Reference(resource_tool=decoded[_RESOURCE_TOOL_KEY])
    server, tool = decoded.get(_SERVER_KEY), decoded.get(_TOOL_KEY)
    if isinstance(server, str) and isinstance(tool, str):
        support = decoded.get(_TASK_SUPPORT_KEY)
        return _Reference(
            server=server, tool=tool, task_support=support if isinstance(support, str) else None
        )
    return None


def _positive(name: str, value: object) -> timedelta:
    if not isinstance(value, timedelta):
        raise ConfigurationTypeError(f"McpToolSource {name} must be a timedelta, got {value!r}")
    if value <= timedelta(0):
        raise ConfigurationError(f"McpToolSource {name} must be positive, got {value}")
    return value


@dataclass(frozen=True)
class _Call:
    """A resolved call of a server's tool."""

    server: McpServerConfig
    target: McpCallTarget
    arguments: dict[str, Any] = field(default_factory=dict)


def _stored_task_id(handle: McpTaskHandle) -> str | None:
    """The record's ``task_id`` for a task any later poll can reach, else ``None``: a 2025-11-25
    task of a connection without an MCP session ID can only be polled on that connection."""
    if handle.protocol_version is None:
        return handle.task_id
    handshake_task = HandshakeTask.of(handle)
    return None if handshake_task is None else handshake_task.to_text()


async def _wait_inline(
    connection: McpConnection,
    call: _Call,
    handle: McpTaskHandle,
    heartbeat: Callable[[], Awaitable[None]],
) -> ToolExecutionResult:
    """Polls the task on the call's connection, inside the tool Step."""
    read = (
        None
        if handle.protocol_version is None
        else session_reader(connection, call.target, handle.task_id)
    )
    output = await wait_for_task(
        connection,
        call.target,
        handle,
        heartbeat=heartbeat,
        timeout_seconds=call.server.task_wait_timeout.total_seconds(),
        read=read,
    )
    return ToolExecutionResult(output)


class McpToolSource:
    """The tools of MCP servers, listed per Worker and called over one MCP session per server
    and Worker.

    Args:
        servers: The servers, configured on the Worker; their names must be unique.
        source_name: The source's stable name, unique within an agent (``"mcp"``).
        resource_and_prompt_tools_enabled: Also offer ``mcp_list_resources_and_prompts``,
            ``mcp_read_resource`` and ``mcp_get_prompt`` (READ) after the servers' tools; enable
            them on one source of an agent only.
        listing_ttl: After this, a server is listed again in the background while its earlier
            tools are returned (5 minutes).
        listing_failure_backoff: A server that could not be listed is left out, and not tried
            again, for this long, then in the background (30 seconds).

    Raises:
        ConfigurationError: For duplicate server names, a blank source name, or a bad duration.
        ConfigurationTypeError: For a value of the wrong type.

    Example:
        Nothing connects until a model call lists the tools, on the Worker:

        >>> from dex_agents.mcp import McpStdioServerConfig, McpStreamableHttpServerConfig
        >>> from dex_agents.stepwise import AgentDefinition, ScriptedModelClient, ScriptedModelReply
        >>> tools = McpToolSource([
        ...     McpStdioServerConfig(name="files", command="mcp-server-files", args=["/srv/reports"]),
        ...     McpStreamableHttpServerConfig(name="tickets", url="https://tickets.example.com/mcp"),
        ... ])
        >>> model = ScriptedModelClient(lambda request: ScriptedModelReply(text="Done."))
        >>> agent = AgentDefinition(name="reports", instructions="...", model=model,
        ...                         tool_sources=[tools])
        >>> tools.source_name
        'mcp'
    """

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        *,
        source_name: str = DEFAULT_SOURCE_NAME,
        resource_and_prompt_tools_enabled: bool = False,
        listing_ttl: timedelta = DEFAULT_LISTING_TTL,
        listing_failure_backoff: timedelta = DEFAULT_LISTING_FAILURE_BACKOFF,
    ) -> None:
        if not isinstance(source_name, str) or not source_name.strip():
            raise ConfigurationError(
                f"McpToolSource source_name must be non-blank, got {source_name!r}"
            )
        self._servers = check_server_configs(servers)
        self._servers_by_name = {server.name: server for server in self._servers}
        self._source_name = source_name
        self._resource_tools_enabled = bool(resource_and_prompt_tools_enabled)
        self._listing_ttl = _positive("listing_ttl", listing_ttl).total_seconds()
        self._failure_backoff = _positive(
            "listing_failure_backoff", listing_failure_backoff
        ).total_seconds()
        self._listings = {server.name: _ServerListing() for server in self._servers}
        self._resource_tools = (
            resource_and_prompt_tools([server.name for server in self._servers])
            if self._resource_tools_enabled
            else ()
        )
        self._offered: tuple[ListedTool, ...] = ()
        self._offered_by_name: dict[str, ListedTool] = {}

    @property
    def source_name(self) -> str:
        """The source's stable name."""
        return self._source_name

    @property
    def servers(self) -> tuple[McpServerConfig, ...]:
        """The configured servers, in order."""
        return self._servers

    def declared_tool_names(self) -> tuple[str, ...]:
        """The names this source always lists: the resource and prompt tools, when enabled."""
        return tuple(tool.name for tool in self._resource_tools)

    def cached_tools(self) -> tuple[ListedTool, ...]:
        """The last listing, without I/O."""
        return self._offered

    async def list_tools(self, refresh: bool = False) -> list[ListedTool]:
        """The tools to offer: every server's tools in server order, then the resource and prompt
        tools when enabled.

        Each server is listed on its own and cached per Worker. The first listing is awaited;
        after ``listing_ttl`` a server is listed again in the background while its earlier tools
        are returned. A server that cannot be listed is left out with a warning log and not tried
        again for ``listing_failure_backoff``. ``refresh=True`` lists every server again now.
        When two tools get the same name, the first in server order is offered.
        """
        listings = await asyncio.gather(
            *(self._server_tools(server, refresh) for server in self._servers)
        )
        offered: dict[str, ListedTool] = {}
        reserved = {tool.name for tool in self._resource_tools}
        for tools in listings:
            for tool in tools:
                if tool.name in offered or tool.name in reserved:
                    _LOG.warning(
                        "MCP tool %s of server %s is left out: another tool is offered as %s",
                        tool.mcp_tool_name,
                        tool.server_name,
                        tool.name,
                    )
                    continue
                offered[tool.name] = tool
        for resource_tool in self._resource_tools:
            offered[resource_tool.name] = resource_tool
        self._offered = tuple(offered.values())
        self._offered_by_name = offered
        return list(self._offered)

    def tool_policies(self) -> dict[str, ToolPolicy]:
        """Policies for the tools of the last listing whose annotations give an effect, and READ
        for the resource and prompt tools; merge them with your own, which win:
        ``{**tools.tool_policies(), **your_policies}``. Call after ``await list_tools()``.
        """
        return {
            tool.name: ToolPolicy(tool.framework_effect)
            for tool in self._offered
            if tool.framework_effect is not None
        }

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        tool_call_id: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
        *,
        tool_name: str | None = None,
    ) -> DeferredToolCall:
        """The DeferredToolCall of one call: the policy from the tool's annotations (unless a
        ``ToolPolicy`` names it), and the server and MCP tool name as its reference, so the tool
        Step calls that server directly without a listing.

        Pass ``listed_tool`` (the definition offered) or ``tool_name`` (looked up in the last
        listing). A name no listing offered is an unclassified call without approval that fails
        as ``unknown tool <name>`` in its tool Step, without reaching a server.

        Raises:
            ConfigurationError: (a ``ValueError``) When neither ``listed_tool`` nor ``tool_name``
                is given.
        """
        name = tool_name if tool_name is not None else getattr(listed_tool, "name", None)
        if not isinstance(name, str) or not name:
            raise ConfigurationError(
                "McpToolSource.deferred_tool_call needs listed_tool (the ListedTool offered) or "
                "tool_name (a non-empty tool name); neither was given"
            )
        tool = listed_tool
        if not isinstance(tool, McpTool) and name not in RESOURCE_AND_PROMPT_TOOL_NAMES:
            tool = self._offered_by_name.get(name)
        if isinstance(tool, McpTool):
            fields = {_SERVER_KEY: tool.server_name, _TOOL_KEY: tool.mcp_tool_name}
            if tool.task_support is not None:
                fields[_TASK_SUPPORT_KEY] = tool.task_support
            reference: str | None = dump_json_text(fields)
        elif tool is not None and name in self.declared_tool_names():
            reference = dump_json_text({_RESOURCE_TOOL_KEY: name})
        else:
            return DeferredToolCall(
                tool_call_id, name, arguments, ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, False)
            )
        policy = turn.resolve_tool_policy(name, tool.framework_effect)
        return DeferredToolCall(
            tool_call_id, name, arguments, policy, tool_source_reference=reference
        )

    async def deferred_tool_handlers(
        self,
    ) -> dict[str, Callable[[DeferredToolExecution], Awaitable[DeferredToolOutcome]]]:
        """A handler per offered tool name, each ``execute_deferred_tool_call``, for a runner that
        dispatches tool Steps by name. Lists the tools when nothing was listed yet."""
        offered = self._offered or tuple(await self.list_tools())
        return {tool.name: self.execute_deferred_tool_call for tool in offered}

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Runs one call in its tool Step: one ``tools/call`` on the Worker's session.

        A Streamable HTTP server's task becomes a tool task (``ToolTaskStarted``) when the runner
        polls tasks; a stdio task, and any task of a runner without a poller, is polled inside
        the Step for at most ``task_wait_timeout``.

        Raises:
            ToolExecutionError: For an unknown tool, an unconfigured or unreachable server (the
                call was never sent), an error answer, or input the session cannot give.
            McpToolCallInterruptedError: When the call was sent and its outcome is unknown.
        """
        record = call.tool_call
        reference = _read_reference(record.tool_source_reference)
        if reference is not None and reference.resource_tool is not None:
            output = await run_resource_or_prompt_tool(
                reference.resource_tool, record.arguments, self._servers_by_name
            )
            return ToolExecutionResult(output)
        if reference is None or reference.server is None or reference.tool is None:
            raise ToolExecutionError(f"unknown tool {record.tool_name}")
        resolved = self._resolve(
            reference.server,
            McpCallTarget(
                record.tool_name,
                reference.tool,
                call.idempotency_key,
                record.tool_call_id,
                call.events,
                reference.task_support,
            ),
            record.arguments,
        )
        tasks_polled_later = call.supports_tool_tasks and isinstance(
            resolved.server, McpStreamableHttpServerConfig
        )
        saved = read_task_checkpoint(call.heartbeat_checkpoint)
        if saved is not None and tasks_polled_later:
            # tools/call already returned this task to an earlier attempt: never call again.
            return ToolTaskStarted(*saved)

        async def on_task(connection: McpConnection, handle: McpTaskHandle) -> DeferredToolOutcome:
            stored = _stored_task_id(handle)
            if tasks_polled_later and stored is not None:
                interval = first_poll_interval(handle.poll_interval_ms)
                await call.save_heartbeat_checkpoint(task_checkpoint(stored, interval))
                return ToolTaskStarted(stored, interval)
            return await _wait_inline(connection, resolved, handle, call.heartbeat)

        return await self._call(resolved, on_task)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str,
        events: AgentEventWriter | None = None,
        tool_call_id: str | None = None,
    ) -> str:
        """Calls one offered tool now and returns its output, for a framework adapter's tool.

        The server is found through the listing. Every task is polled on the call's connection,
        for at most the server's ``task_wait_timeout``. Pass the idempotency key from the
        adapter's tool context; ``events`` receives ``mcp.tool_progress`` events for the call
        ``tool_call_id``. Inside a tool Step both default to the running call's
        (``current_deferred_tool_execution()``), so a framework tool need pass only the key.

        Raises:
            ToolExecutionError: As for ``execute_deferred_tool_call``.
            McpToolCallInterruptedError: When the call was sent and its outcome is unknown.
        """
        arguments_text = dump_json_text(dict(arguments or {}))
        running = current_deferred_tool_execution()
        if running is not None:
            events = running.events if events is None else events
            tool_call_id = running.tool_call.tool_call_id if tool_call_id is None else tool_call_id
        if name in self.declared_tool_names():
            return await run_resource_or_prompt_tool(name, arguments_text, self._servers_by_name)
        if name not in self._offered_by_name:
            await self.list_tools()
        tool = self._offered_by_name.get(name)
        if not isinstance(tool, McpTool):
            raise ToolExecutionError(f"unknown tool {name}")
        resolved = self._resolve(
            tool.server_name,
            McpCallTarget(
                name, tool.mcp_tool_name, idempotency_key, tool_call_id, events, tool.task_support
            ),
            arguments_text,
        )

        async def no_heartbeat() -> None:
            return None

        async def on_task(connection: McpConnection, handle: McpTaskHandle) -> ToolExecutionResult:
            return await _wait_inline(connection, resolved, handle, no_heartbeat)

        outcome = await self._call(resolved, on_task)
        assert isinstance(outcome, ToolExecutionResult)
        return outcome.output

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Polls a Streamable HTTP server's task once with ``tasks/get`` on the Worker's session,
        delivering the answer of a question the task asked with ``tasks/update``.

        Raises:
            ToolExecutionError: The task failed, was cancelled, or asked what no question can ask.
            McpTaskError: The server no longer knows the task, or it could not take a decline.
            Exception: The server could not be reached; after three poll attempts the call is
                recorded ``failed`` for a read tool and ``outcome_unknown`` otherwise.
        """
        record = poll.tool_call
        server, target = self._task_target(record.tool_source_reference, record, poll.events, poll)
        handshake_task = HandshakeTask.from_text(record.task_id)
        if handshake_task is not None and isinstance(server, McpStreamableHttpServerConfig):
            return await poll_handshake_task(server, handshake_task, target, poll)
        async with open_connection(server) as connection:
            return await poll_task(connection, target, poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Sends ``tasks/cancel`` for a task ``cancel_turn`` abandoned; any answer ends it.

        Raises:
            Exception: When the server could not be reached, so a retry sends it again.
        """
        record = cancellation.tool_call
        if record.task_id is None:
            return
        server, target = self._task_target(record.tool_source_reference, record, None, cancellation)
        handshake_task = HandshakeTask.from_text(record.task_id)
        if handshake_task is not None and isinstance(server, McpStreamableHttpServerConfig):
            await cancel_handshake_task(server, handshake_task, target)
            return
        async with open_connection(server) as connection:
            await cancel_task(connection, record.task_id)

    def _task_target(
        self,
        reference_text: str | None,
        record: Any,
        events: AgentEventWriter | None,
        owner: ToolTaskPoll | ToolTaskCancellation,
    ) -> tuple[McpServerConfig, McpCallTarget]:
        reference = _read_reference(reference_text)
        if reference is None or reference.server is None or reference.tool is None:
            raise McpTaskError(
                f"tool call {record.tool_call_id} of {record.tool_name} has no MCP server reference"
            )
        server = self._servers_by_name.get(reference.server)
        if server is None:
            raise McpTaskError(
                f"MCP server {reference.server} of task {record.task_id} is not configured on this "
                "Worker"
            )
        return server, McpCallTarget(
            record.tool_name, reference.tool, owner.idempotency_key, record.tool_call_id, events
        )

    def _resolve(self, server_name: str, target: McpCallTarget, arguments_text: str) -> _Call:
        server = self._servers_by_name.get(server_name)
        if server is None:
            raise ToolExecutionError(
                f"MCP server {server_name} of tool {target.tool_name} is not configured on this "
                "Worker, so the call was not sent"
            )
        arguments = parse_tool_arguments(target.tool_name, arguments_text)
        return _Call(server, target, arguments)

    async def _call(
        self,
        call: _Call,
        on_task: Callable[[McpConnection, McpTaskHandle], Awaitable[DeferredToolOutcome]],
    ) -> DeferredToolOutcome:
        try:
            try:
                return await self._call_on(call, on_task, fresh=False)
            except Exception as error:
                if not session_expired(error):
                    raise
                # HTTP 404 for the reused session: the server ended it without running the call.
                _LOG.info("MCP server %s ended its session; reconnecting", call.server.name)
                return await self._call_on(call, on_task, fresh=True)
        except McpServerUnreachableError as error:
            raise ToolExecutionError(
                f"{error}; the call of {call.target.tool_name} was not sent"
            ) from error
        except (ToolExecutionError, McpToolCallInterruptedError, McpTaskError):
            raise
        except Exception as error:
            # A transport failure the SDK raised while the call was out: its outcome is unknown.
            raise interrupted(call.server.name, call.target, describe_error(error)) from error

    @staticmethod
    async def _call_on(
        call: _Call,
        on_task: Callable[[McpConnection, McpTaskHandle], Awaitable[DeferredToolOutcome]],
        *,
        fresh: bool,
    ) -> DeferredToolOutcome:
        async with open_connection(call.server, fresh=fresh) as connection:
            try:
                result = await send_tool_call(connection, call.target, call.arguments)
            except Exception as error:
                if connection.call_rejected(call.target.idempotency_key):
                    mark_not_run(error)
                raise
            if isinstance(result, McpTaskHandle):
                return await on_task(connection, result)
            return ToolExecutionResult(render_tool_result(result))

    async def _server_tools(self, server: McpServerConfig, refresh: bool) -> tuple[McpTool, ...]:
        listing = self._listings[server.name]
        now = time.monotonic()
        if refresh or (listing.tools is None and listing.failed_at is None):
            await self._listed(server, listing)
            return listing.tools or ()
        backing_off = (
            listing.failed_at is not None and now - listing.failed_at < self._failure_backoff
        )
        stale = listing.tools is None or now - listing.listed_at >= self._listing_ttl
        if stale and not backing_off:
            self._start_listing(server, listing)
        return listing.tools or ()

    def _start_listing(
        self, server: McpServerConfig, listing: _ServerListing
    ) -> asyncio.Task[None]:
        running = listing.running
        if (
            running is not None
            and not running.done()
            and running.get_loop() is asyncio.get_running_loop()
        ):
            return running
        # One listing per server runs at a time; callers that need it wait on this task.
        listing.running = asyncio.get_running_loop().create_task(self._list_server(server, listing))
        return listing.running

    async def _listed(self, server: McpServerConfig, listing: _ServerListing) -> None:
        await asyncio.shield(self._start_listing(server, listing))

    async def _list_server(self, server: McpServerConfig, listing: _ServerListing) -> None:
        try:
            tools = await read_on_connection(server, self._listing_pages)
        except Exception as error:
            listing.failed_at = time.monotonic()
            _LOG.warning(
                "MCP server %s could not be listed, so its tools are left out%s: %s",
                server.name,
                " (its earlier tools are still offered)" if listing.tools else "",
                describe_error(error),
            )
            return
        listing.tools = tuple(self._mcp_tool(server, tool) for tool in tools)
        listing.listed_at = time.monotonic()
        listing.failed_at = None

    @staticmethod
    async def _listing_pages(connection: McpConnection) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_LISTING_PAGES):
            page = await connection.session.list_tools(
                params=mcp_types.PaginatedRequestParams(cursor=cursor)
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    @staticmethod
    def _mcp_tool(server: McpServerConfig, tool: mcp_types.Tool) -> McpTool:
        raw = (
            tool.annotations.model_dump(by_alias=True, exclude_none=True)
            if tool.annotations
            else {}
        )
        annotations = McpToolAnnotations.from_mapping(raw) if raw else None
        effect = (
            tool_effect_from_mcp_tool_annotations(annotations)
            if annotations is not None and server.trusts_tool_annotations
            else None
        )
        support = None if tool.execution is None else tool.execution.task_support
        return McpTool(
            name=agent_tool_name(server.name, tool.name),
            description=tool.description or tool.title or "",
            parameters=dict(tool.input_schema),
            framework_effect=effect,
            server_name=server.name,
            mcp_tool_name=tool.name,
            annotations=annotations,
            task_support=None if support == "forbidden" else support,
        )

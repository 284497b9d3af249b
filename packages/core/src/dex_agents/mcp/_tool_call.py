"""One ``tools/call`` and what its answer means for the call's record.

| What happens | Raised |
|---|---|
| a result | (the rendered text) |
| an ``isError`` result, a JSON-RPC error other than -32603 | ``ToolExecutionError`` |
| input requests outside a task | ``ToolExecutionError`` naming them |
| a broken stream, an exit, a timeout, -32603, -32700, endless state-only rounds | ``McpToolCallInterruptedError`` |
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import mcp_types
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH
from pydantic import ValidationError

from dex_agents import AgentEventWriter, ToolExecutionError, dump_json_text
from dex_agents.mcp._connection import (
    INTERRUPTION_ERROR_CODES,
    McpConnection,
    McpTaskHandle,
    describe_error,
    leaf_errors,
)
from dex_agents.mcp._errors import McpToolCallInterruptedError
from dex_agents.mcp._input_requests import input_request_error

__all__ = [
    "IDEMPOTENCY_KEY_META_KEY",
    "MCP_TOOL_PROGRESS_EVENT",
    "TASK_AUGMENTED_SUPPORT",
    "McpCallTarget",
    "interrupted",
    "parse_tool_arguments",
    "raw_input_requests",
    "render_tool_result",
    "send_tool_call",
]

IDEMPOTENCY_KEY_META_KEY: Final = "io.superdurable.dex/idempotencyKey"
"""The ``_meta`` key of every ``tools/call`` that carries the session's idempotency key."""
MCP_TOOL_PROGRESS_EVENT: Final = "mcp.tool_progress"
"""The AgentEvents type of a server's ``notifications/progress`` during a call."""
_MAX_STATE_ONLY_ROUNDS: Final = 8
TASK_AUGMENTED_SUPPORT: Final = frozenset({"required", "optional"})
"""``execution.taskSupport`` values whose calls are sent with ``task`` to a 2025-11-25 server."""


@dataclass(frozen=True)
class McpCallTarget:
    """Which tool a call reaches, and who hears about it.

    Attributes:
        tool_name: The agent's name of the tool (``<server>__<tool>``), for messages and events.
        mcp_tool_name: The tool's name on its server.
        idempotency_key: ``<flow_id>/<turn_id>/<tool_call_id>``.
        tool_call_id: The call's ID, for events; ``None`` outside a session.
        events: Where progress goes; ``None`` drops it.
        task_support: The tool's 2025-11-25 ``execution.taskSupport`` (``required``,
            ``optional``), or ``None``.
    """

    tool_name: str
    mcp_tool_name: str
    idempotency_key: str
    tool_call_id: str | None = None
    events: AgentEventWriter | None = None
    task_support: str | None = None

    def write_event(self, event_type: str, payload: Mapping[str, object]) -> None:
        """Writes an event about this call, best effort."""
        if self.events is not None:
            self.events.write_event(
                event_type,
                {"tool_call_id": self.tool_call_id, "tool_name": self.tool_name, **payload},
            )


def interrupted(
    server_name: str, target: McpCallTarget, detail: str
) -> McpToolCallInterruptedError:
    """The error of a sent call whose outcome is unknown."""
    return McpToolCallInterruptedError(
        f"MCP tool {target.mcp_tool_name} on server {server_name} ({target.tool_name}) "
        f"was sent but no result came back: {detail}; the tool may have run"
    )


def _classified(connection: McpConnection, target: McpCallTarget, error: Exception) -> Exception:
    leaves = leaf_errors(error)
    answers = [leaf for leaf in leaves if isinstance(leaf, MCPError)]
    if answers and len(answers) == len(leaves):
        answer = answers[0].error
        if answer.code not in INTERRUPTION_ERROR_CODES:
            return ToolExecutionError(f"{answer.message} (MCP error {answer.code})")
    return interrupted(connection.server.name, target, describe_error(error))


def parse_tool_arguments(tool_name: str, arguments: str) -> dict[str, Any]:
    """A call's JSON arguments as an object.

    Raises:
        ToolExecutionError: ``invalid arguments for <tool>: ...``, which the model sees.
    """
    try:
        decoded = json.loads(arguments or "{}")
    except ValueError:
        raise ToolExecutionError(
            f"invalid arguments for {tool_name}: arguments are not valid JSON"
        ) from None
    if not isinstance(decoded, dict):
        raise ToolExecutionError(f"invalid arguments for {tool_name}: arguments must be an object")
    return decoded


def raw_input_requests(requests: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Input requests as the server sent them, whether parsed by the SDK or raw."""
    raw: dict[str, dict[str, Any]] = {}
    for key, request in (requests or {}).items():
        if isinstance(request, Mapping):
            raw[key] = dict(request)
        else:
            raw[key] = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    return raw


async def send_tool_call(
    connection: McpConnection, target: McpCallTarget, arguments: Mapping[str, Any]
) -> mcp_types.CallToolResult | McpTaskHandle:
    """Sends ``tools/call`` with the idempotency key in ``_meta`` and progress as events.

    A state-only ``input_required`` answer, which only asks for the same request again, is sent
    again at once.

    Raises:
        ToolExecutionError: For an error answer the model should see, or input requests.
        McpToolCallInterruptedError: When the call was sent and its outcome is unknown.
    """

    async def progress(value: float, total: float | None, message: str | None) -> None:
        target.write_event(
            MCP_TOOL_PROGRESS_EVENT, {"progress": value, "total": total, "message": message}
        )

    if target.task_support in TASK_AUGMENTED_SUPPORT and connection.handshake_task_tools():
        return await _send_task_augmented(connection, target, arguments)
    request_state: str | None = None
    relisted = False
    for _ in range(_MAX_STATE_ONLY_ROUNDS):
        try:
            result = await connection.session.call_tool(
                target.mcp_tool_name,
                dict(arguments),
                read_timeout_seconds=connection.server.request_timeout.total_seconds(),
                progress_callback=progress,
                request_state=request_state,
                meta={IDEMPOTENCY_KEY_META_KEY: target.idempotency_key},
                allow_input_required=True,
                allow_claimed=True,
            )
        except MCPError as error:
            if error.error.code == HEADER_MISMATCH and not relisted:
                # A 2026-07-28 server refuses, before the tool runs, a call whose Mcp-Param
                # headers a new connection cannot know: list the tools on it and send it again.
                relisted = True
                await _list_on(connection, target)
                continue
            raise _classified(connection, target, error) from error
        except (ValidationError, OSError, ExceptionGroup, TimeoutError, RuntimeError) as error:
            raise _classified(connection, target, error) from error
        except Exception as error:  # the transports raise their own types (httpx2, anyio)
            raise interrupted(connection.server.name, target, describe_error(error)) from error
        if isinstance(result, mcp_types.InputRequiredResult):
            if result.input_requests:
                raise ToolExecutionError(
                    input_request_error(raw_input_requests(result.input_requests))
                )
            request_state = result.request_state
            continue
        if isinstance(result, (mcp_types.CallToolResult, McpTaskHandle)):
            return result
        raise interrupted(
            connection.server.name, target, f"an answer of type {type(result).__name__}"
        )
    raise interrupted(
        connection.server.name,
        target,
        f"the server asked to repeat the call {_MAX_STATE_ONLY_ROUNDS} times",
    )


async def _send_task_augmented(
    connection: McpConnection, target: McpCallTarget, arguments: Mapping[str, Any]
) -> mcp_types.CallToolResult | McpTaskHandle:
    """A 2025-11-25 ``tools/call`` with ``task`` augmentation: the server answers with a task
    (``CreateTaskResult``) that lives in this session, or, for an optional one, a result."""
    params = {
        "name": target.mcp_tool_name,
        "arguments": dict(arguments),
        "task": {},
        "_meta": {IDEMPOTENCY_KEY_META_KEY: target.idempotency_key},
    }
    try:
        answer = await connection.handshake_request(
            "tools/call", params, connection.server.request_timeout.total_seconds()
        )
    except MCPError as error:
        raise _classified(connection, target, error) from error
    except Exception as error:  # the transports raise their own types (httpx2, anyio)
        raise interrupted(connection.server.name, target, describe_error(error)) from error
    task = answer.get("task")
    if isinstance(task, Mapping) and isinstance(task.get("taskId"), str):
        interval = task.get("pollInterval")
        ttl = task.get("ttl")
        return McpTaskHandle(
            task_id=task["taskId"],
            status=str(task.get("status") or "working"),
            status_message=task.get("statusMessage"),
            poll_interval_ms=interval if isinstance(interval, int) else None,
            ttl_ms=ttl if isinstance(ttl, int) else None,
            protocol_version=connection.client.session.protocol_version,
            session_id=connection.session_id,
        )
    try:
        return mcp_types.CallToolResult.model_validate(answer, by_name=False)
    except ValidationError as error:
        raise interrupted(
            connection.server.name,
            target,
            f"an answer that is neither a task nor a result: {error}",
        ) from error


async def _list_on(connection: McpConnection, target: McpCallTarget) -> None:
    try:
        await connection.session.list_tools()
    except Exception as error:
        raise interrupted(connection.server.name, target, describe_error(error)) from error


def _content_text(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    return dump_json_text(block.model_dump(by_alias=True, mode="json", exclude_none=True))


def render_tool_result(result: mcp_types.CallToolResult) -> str:
    """The model-visible output: text blocks joined with newlines, other content as JSON.

    Raises:
        ToolExecutionError: For an ``isError`` result, with its text.
    """
    parts = [_content_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(dump_json_text(result.structured_content))
    text = "\n".join(parts)
    if result.is_error:
        raise ToolExecutionError(text or "the MCP tool reported an error without text")
    return text

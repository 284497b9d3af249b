"""Tasks of the 2025-11-25 specification, which live in the MCP session that created them.

A tool whose ``execution.taskSupport`` is ``required`` or ``optional`` is called with ``task``
augmentation; the server answers with a task. Its ``tasks/get``, ``tasks/result`` and
``tasks/cancel`` go to the session that created it: on the call's connection while the tool Step
polls it inside the call (stdio, ``call_tool``), or, for a tool task of a Streamable HTTP server,
in a plain JSON-RPC POST carrying the stored ``Mcp-Session-Id``, so a Worker started after a
SIGKILL polls the task the killed Worker started (the pooled connections never end a session).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp.shared.exceptions import MCPError

from dex_agents import (
    ToolExecutionResult,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    dump_json_text,
)
from dex_agents.mcp._connection import (
    INTERRUPTION_ERROR_CODES,
    McpConnection,
    McpTaskHandle,
    describe_error,
    http_client,
)
from dex_agents.mcp._errors import McpTaskError
from dex_agents.mcp._server_config import McpStreamableHttpServerConfig
from dex_agents.mcp._tasks import (
    TaskContinuation,
    next_poll_interval,
    task_request,
    terminal_output,
    write_status,
)
from dex_agents.mcp._tool_call import McpCallTarget, interrupted

__all__ = [
    "HandshakeTask",
    "cancel_handshake_task",
    "poll_handshake_task",
    "session_reader",
]

_KEY: Final = "mcp_2025_11_25_task"
_RESULT_STATUSES: Final = frozenset({"completed"})
_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})

TaskSender = Callable[[str], Awaitable[dict[str, Any]]]
"""Sends one ``tasks/<method>`` for the task and returns the raw result."""


@dataclass(frozen=True)
class HandshakeTask:
    """A 2025-11-25 task as the call's record stores it (its ``task_id``).

    Attributes:
        task_id: The server's task ID.
        protocol_version: The session's protocol version, sent as ``MCP-Protocol-Version``.
        session_id: The ``Mcp-Session-Id`` of the session that created it.
    """

    task_id: str
    protocol_version: str
    session_id: str

    @classmethod
    def of(cls, handle: McpTaskHandle) -> HandshakeTask | None:
        """The stored form of a 2025-11-25 task of a Streamable HTTP session, else ``None``."""
        if handle.protocol_version is None or handle.session_id is None:
            return None
        return cls(handle.task_id, handle.protocol_version, handle.session_id)

    def to_text(self) -> str:
        """The record's ``task_id``: JSON naming the task and its session."""
        return dump_json_text(
            {
                _KEY: {
                    "task_id": self.task_id,
                    "protocol_version": self.protocol_version,
                    "session_id": self.session_id,
                }
            }
        )

    @classmethod
    def from_text(cls, text: str | None) -> HandshakeTask | None:
        """The task a record's ``task_id`` names, or ``None`` for a task of the tasks extension."""
        if not text or not text.startswith("{"):
            return None
        try:
            saved = json.loads(text)[_KEY]
            task = cls(saved["task_id"], saved["protocol_version"], saved["session_id"])
        except (ValueError, KeyError, TypeError):
            return None
        if not all(isinstance(value, str) for value in (task.task_id, task.session_id)):
            return None
        return task


def _shape(task: Mapping[str, Any]) -> dict[str, Any]:
    """A 2025-11-25 ``Task`` in the tasks extension's shape, which the polling code reads."""
    shaped: dict[str, Any] = {
        "status": task.get("status"),
        "statusMessage": task.get("statusMessage"),
    }
    interval = task.get("pollInterval")
    if isinstance(interval, int):
        shaped["pollIntervalMs"] = interval
    return shaped


async def _read(send: TaskSender) -> dict[str, Any]:
    """``tasks/get``, and for a completed task ``tasks/result``, in the extension's shape."""
    task = _shape(await send("tasks/get"))
    if task["status"] in _RESULT_STATUSES:
        task["result"] = await send("tasks/result")
    return task


def session_reader(
    connection: McpConnection, target: McpCallTarget, task_id: str
) -> Callable[[], Awaitable[dict[str, Any]]]:
    """Reads the task on the connection that created it (``wait_for_task``'s ``read``)."""

    async def send(method: str) -> dict[str, Any]:
        return await task_request(connection, target, method, task_id)

    return lambda: _read(send)


def _http_sender(
    server: McpStreamableHttpServerConfig, task: HandshakeTask, target: McpCallTarget
) -> TaskSender:
    async def send(method: str) -> dict[str, Any]:
        try:
            return await _post(server, task, method)
        except MCPError as error:
            if error.error.code in INTERRUPTION_ERROR_CODES:
                raise interrupted(server.name, target, describe_error(error)) from error
            raise McpTaskError(
                f"MCP server {server.name} answered {method} for task {task.task_id} of "
                f"{target.tool_name} with an error: {describe_error(error)}"
            ) from error
        except McpTaskError:
            raise
        except Exception as error:
            raise interrupted(server.name, target, f"{method}: {describe_error(error)}") from error

    return send


async def _post(
    server: McpStreamableHttpServerConfig, task: HandshakeTask, method: str
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"taskId": task.task_id}}
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": task.protocol_version,
        "mcp-session-id": task.session_id,
    }
    async with http_client(server) as client:
        response = await client.post(server.url, json=body, headers=headers)
    if response.status_code == 404:
        raise McpTaskError(
            f"MCP server {server.name} no longer knows session {task.session_id}, which held "
            f"task {task.task_id} (HTTP 404)"
        )
    answer = _json_rpc_answer(response.headers.get("content-type", ""), response.text)
    if answer is None:
        raise MCPError(
            code=-32603, message=f"HTTP {response.status_code} without a JSON-RPC answer"
        )
    error = answer.get("error")
    if isinstance(error, Mapping):
        raise MCPError(code=int(error.get("code", -32603)), message=str(error.get("message")))
    result = answer.get("result")
    return dict(result) if isinstance(result, Mapping) else {}


def _json_rpc_answer(content_type: str, text: str) -> dict[str, Any] | None:
    """The JSON-RPC answer in a JSON body or among a Server-Sent Events stream's messages."""
    if content_type.lower().startswith("text/event-stream"):
        candidates = [
            line[len("data:") :].strip() for line in text.splitlines() if line.startswith("data:")
        ]
    else:
        candidates = [text]
    for candidate in candidates:
        try:
            message = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(message, dict) and ("result" in message or "error" in message):
            return message
    return None


async def poll_handshake_task(
    server: McpStreamableHttpServerConfig,
    task: HandshakeTask,
    target: McpCallTarget,
    poll: ToolTaskPoll,
) -> ToolTaskPollOutcome:
    """One ``PollToolTask`` of a 2025-11-25 task: ``tasks/get`` (and ``tasks/result`` once it
    completed) in the session that created it.

    Raises:
        ToolExecutionError: The task failed or was cancelled.
        McpTaskError: The server no longer knows the session or the task.
        McpToolCallInterruptedError: The server could not be reached or answered nothing.
    """
    record = poll.tool_call
    state = await _read(_http_sender(server, task, target))
    continuation = TaskContinuation.from_text(record.input_continuation)
    status = str(state.get("status"))
    if status != continuation.status:
        write_status(target, task.task_id, state)
    if status in _TERMINAL:
        return ToolExecutionResult(terminal_output(state, task.task_id, target))
    interval = state.get("pollIntervalMs")
    return ToolTaskPending(
        next_poll_interval(
            interval if isinstance(interval, int) else None, record.task_poll_interval_seconds
        ),
        TaskContinuation(status=status).to_text(),
    )


async def cancel_handshake_task(
    server: McpStreamableHttpServerConfig, task: HandshakeTask, target: McpCallTarget
) -> None:
    """Sends ``tasks/cancel`` to the task's session; any answer from the server ends it.

    Raises:
        McpToolCallInterruptedError: No answer came, so a retry may still reach the server.
    """
    try:
        await _http_sender(server, task, target)("tasks/cancel")
    except McpTaskError:
        return

"""Tasks of the 2025-11-25 specification, which live in the MCP session that created them.

A tool whose ``execution.taskSupport`` is ``required`` or ``optional`` is called with ``task``
augmentation; the server answers with a task. Its ``tasks/get``, ``tasks/result`` and
``tasks/cancel`` go to the session that created it: on the call's connection while the tool Step
polls it inside the call (stdio, ``call_tool``), or, for a tool task of a Streamable HTTP server,
in a plain JSON-RPC POST carrying the stored ``Mcp-Session-Id``, so a Worker started after a
SIGKILL polls the task the killed Worker started (the pooled connections never end a session).

A task in ``input_required`` delivers its queued request (``elicitation/create``,
``sampling/createMessage``) on the stream of ``tasks/result``. A poll reads that stream for a few
seconds: an elicitation that can be a question (one string, choice or boolean field) becomes the
session's question, its JSON-RPC request ID kept in the continuation, and the poll after the
answer POSTs the elicitation result to the session under that ID (a stale answer can only reach
the request it answered: the server never reuses an ID). Any other request is refused with
``INPUT_REQUEST_ERROR_PREFIX (...)`` as its error, and the server decides what its task does.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from mcp.shared.exceptions import MCPError

from dex_agents import (
    ToolExecutionResult,
    ToolInputRequested,
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
from dex_agents.mcp._input_requests import (
    ElicitationQuestion,
    FieldKind,
    elicitation_question,
    input_request_error,
    input_response,
)
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
_REQUEST_WINDOW_SECONDS: Final = 5.0
"""How long a poll of an ``input_required`` task reads ``tasks/result`` for its queued request."""
_SETTLE_POLL_SECONDS: Final = 1
_REFUSED: Final = -32600

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

    async def read() -> dict[str, Any]:
        task = await _read(send)
        if task["status"] != "input_required":
            return task
        # The task's queued request comes only on the stream of tasks/result, where the
        # connection's callbacks refuse it; the answer comes once the task ended.
        await task_request(
            connection,
            target,
            "tasks/result",
            task_id,
            timeout=connection.server.request_timeout.total_seconds(),
        )
        return await _read(send)

    return read


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
    async with http_client(server) as client:
        response = await client.post(server.url, json=body, headers=_headers(task))
    _check_session(server, task, response.status_code)
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


def _headers(task: HandshakeTask) -> dict[str, str]:
    return {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": task.protocol_version,
        "mcp-session-id": task.session_id,
    }


def _check_session(server: McpStreamableHttpServerConfig, task: HandshakeTask, status: int) -> None:
    if status == 404:
        raise McpTaskError(
            f"MCP server {server.name} no longer knows session {task.session_id}, which held "
            f"task {task.task_id} (HTTP 404)"
        )


async def _queued_request(
    server: McpStreamableHttpServerConfig, task: HandshakeTask
) -> dict[str, Any] | None:
    """The first request the server sends on the ``tasks/result`` stream within the window, or
    ``None`` (nothing queued, or the task ended: the next ``tasks/get`` reads it)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/result", "params": {"taskId": task.task_id}}
    try:
        async with (
            asyncio.timeout(_REQUEST_WINDOW_SECONDS),
            http_client(server) as client,
            client.stream("POST", server.url, json=body, headers=_headers(task)) as response,
        ):
            _check_session(server, task, response.status_code)
            async for line in response.aiter_lines():
                text = line[len("data:") :] if line.startswith("data:") else line
                try:
                    message = json.loads(text)
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                if "method" in message and "id" in message:
                    return message
                if "result" in message or "error" in message:
                    return None
    except TimeoutError:
        return None
    return None


async def _respond(
    server: McpStreamableHttpServerConfig,
    task: HandshakeTask,
    request_id: object,
    answer: dict[str, Any],
) -> None:
    """POSTs the JSON-RPC response to a request of the server's, in the task's session."""
    body = {"jsonrpc": "2.0", "id": request_id, **answer}
    async with http_client(server) as client:
        response = await client.post(server.url, json=body, headers=_headers(task))
    _check_session(server, task, response.status_code)
    if response.status_code >= 400:
        raise MCPError(
            code=-32603,
            message=f"HTTP {response.status_code} for the answer to request {request_id}",
        )


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
    continuation = TaskContinuation.from_text(record.input_continuation)
    asked = _AskedRequest.from_continuation(continuation)
    if poll.pending_answer is not None and asked is not None and continuation.sent_at is None:
        response = input_response(asked.question(continuation), poll.pending_answer)
        await poll.heartbeat()
        await _answer(server, task, target, asked.request_id, {"result": response})
        sent = replace(continuation, sent_at=time.time(), declined=response["action"] != "accept")
        return ToolTaskPending(_SETTLE_POLL_SECONDS, sent.to_text())
    state = await _read(_http_sender(server, task, target))
    status = str(state.get("status"))
    if status != continuation.status:
        write_status(target, task.task_id, state)
    if status in _TERMINAL:
        return ToolExecutionResult(terminal_output(state, task.task_id, target))
    if status == "input_required":
        return await _input_required(server, task, target)
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


@dataclass(frozen=True)
class _AskedRequest:
    """The server's elicitation a question stands for, kept in the continuation's request key."""

    request_id: object
    field_name: str
    kind: FieldKind

    def to_key(self) -> str:
        return dump_json_text({"id": self.request_id, "field": self.field_name, "kind": self.kind})

    @classmethod
    def from_continuation(cls, continuation: TaskContinuation) -> _AskedRequest | None:
        if not continuation.request_key:
            return None
        try:
            saved = json.loads(continuation.request_key)
            return cls(saved["id"], str(saved["field"]), FieldKind(saved["kind"]))
        except (ValueError, KeyError, TypeError):
            return None

    def question(self, continuation: TaskContinuation) -> ElicitationQuestion:
        return ElicitationQuestion(
            continuation.request_key or "",
            continuation.fingerprint or "",
            "",
            self.field_name,
            self.kind,
            (),
        )


async def _answer(
    server: McpStreamableHttpServerConfig,
    task: HandshakeTask,
    target: McpCallTarget,
    request_id: object,
    answer: dict[str, Any],
) -> None:
    try:
        await _respond(server, task, request_id, answer)
    except McpTaskError:
        raise
    except Exception as error:
        raise interrupted(server.name, target, f"answer: {describe_error(error)}") from error


async def _input_required(
    server: McpStreamableHttpServerConfig, task: HandshakeTask, target: McpCallTarget
) -> ToolTaskPollOutcome:
    try:
        request = await _queued_request(server, task)
    except McpTaskError:
        raise
    except Exception as error:
        raise interrupted(server.name, target, f"tasks/result: {describe_error(error)}") from error
    waiting = TaskContinuation(status="input_required").to_text()
    if request is None:
        return ToolTaskPending(_SETTLE_POLL_SECONDS, waiting)
    raw = {"1": {"method": request.get("method"), "params": request.get("params") or {}}}
    question = elicitation_question(raw)
    if question is None:
        refusal = {"code": _REFUSED, "message": input_request_error(raw)}
        await _answer(server, task, target, request["id"], {"error": refusal})
        return ToolTaskPending(_SETTLE_POLL_SECONDS, waiting)
    asked = _AskedRequest(request["id"], question.field_name, question.kind)
    return ToolInputRequested(
        question.message,
        choices=question.choices,
        allows_free_text=question.allows_free_text,
        continuation=TaskContinuation(
            status="input_required", request_key=asked.to_key(), fingerprint=question.fingerprint
        ).to_text(),
    )

"""Long-running MCP tasks: polled by PollToolTask on a Timer (HTTP), or inside the tool Step.

A Streamable HTTP server's task becomes a tool task: each ``poll_tool_task`` sends one
``tasks/get`` on the Worker's session, and a question the task asks becomes a session question whose
answer goes back with ``tasks/update``. A stdio task lives in its server process, which ends with
the Worker, so it is polled on the call's connection inside the tool Step.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

import mcp_types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from dex_agents import (
    ToolExecutionError,
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
)
from dex_agents.mcp._errors import McpTaskError
from dex_agents.mcp._input_requests import (
    ElicitationQuestion,
    elicitation_question,
    input_request_error,
    input_response,
)
from dex_agents.mcp._tool_call import (
    McpCallTarget,
    interrupted,
    raw_input_requests,
    render_tool_result,
)

__all__ = [
    "ANSWER_SETTLE_SECONDS",
    "MAX_POLL_INTERVAL_SECONDS",
    "MCP_TASK_STATUS_EVENT",
    "TaskContinuation",
    "cancel_task",
    "first_poll_interval",
    "next_poll_interval",
    "poll_task",
    "read_task_checkpoint",
    "task_checkpoint",
    "task_request",
    "terminal_output",
    "wait_for_task",
    "write_status",
]

_LOG = logging.getLogger(__name__)

MCP_TASK_STATUS_EVENT: Final = "mcp.task_status"
"""The AgentEvents type written when a poll sees a task's status change."""
ANSWER_SETTLE_SECONDS: Final = 10.0
"""After ``tasks/update``, how long the task may still list the answered request."""
MAX_POLL_INTERVAL_SECONDS: Final = 60
"""The doubling of the poll interval stops here (the server may ask for longer)."""
_SETTLE_POLL_SECONDS: Final = 1
_INLINE_MIN_POLL_SECONDS: Final = 0.05
_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
_CHECKPOINT_KEY: Final = "mcp_task"


def first_poll_interval(poll_interval_ms: int | None) -> int:
    """The server's ``pollIntervalMs`` rounded up to whole seconds, at least 1."""
    if poll_interval_ms is None or poll_interval_ms <= 0:
        return 1
    return max(1, math.ceil(poll_interval_ms / 1000))


def next_poll_interval(poll_interval_ms: int | None, previous: int | None) -> int:
    """The server's interval, or, when that is shorter, double the previous one, up to a minute.

    Example:
        >>> [next_poll_interval(5000, previous) for previous in (5, 10, 40, 60)]
        [10, 20, 60, 60]
    """
    server = first_poll_interval(poll_interval_ms)
    if previous is None:
        return server
    return max(server, min(2 * previous, MAX_POLL_INTERVAL_SECONDS))


def task_checkpoint(task_id: str, poll_interval_seconds: int) -> str:
    """The heartbeat checkpoint of a started task, so a retried CallTool returns the same task."""
    return dump_json_text(
        {_CHECKPOINT_KEY: {"task_id": task_id, "poll_interval_seconds": poll_interval_seconds}}
    )


def read_task_checkpoint(text: str | None) -> tuple[str, int] | None:
    """The task a checkpoint names, or ``None`` for no checkpoint of this source."""
    if not text:
        return None
    try:
        saved = json.loads(text).get(_CHECKPOINT_KEY)
        task_id, interval = saved["task_id"], saved["poll_interval_seconds"]
    except (ValueError, AttributeError, KeyError, TypeError):
        return None
    if not isinstance(task_id, str) or not isinstance(interval, int):
        return None
    return task_id, interval


@dataclass(frozen=True)
class TaskContinuation:
    """What a poll leaves for the next one in the record's ``input_continuation``.

    Attributes:
        status: The task status the last poll saw.
        request_key: The input request the session asked, or answered last.
        fingerprint: Its fingerprint, so an answer reaches only the identical request.
        sent_at: Wall-clock time the answer was sent; ``None`` while unanswered.
        declined: Whether the answer sent was a decline or a cancel.
    """

    status: str = "working"
    request_key: str | None = None
    fingerprint: str | None = None
    sent_at: float | None = None
    declined: bool = False

    def to_text(self) -> str:
        return dump_json_text(asdict(self))

    @classmethod
    def from_text(cls, text: str | None) -> TaskContinuation:
        if not text:
            return cls()
        try:
            saved = json.loads(text)
            return cls(
                status=str(saved.get("status", "working")),
                request_key=saved.get("request_key"),
                fingerprint=saved.get("fingerprint"),
                sent_at=saved.get("sent_at"),
                declined=bool(saved.get("declined", False)),
            )
        except (ValueError, AttributeError, TypeError):
            return cls()


async def task_request(
    connection: McpConnection,
    target: McpCallTarget,
    method: str,
    task_id: str,
    *,
    timeout: float | None = None,
    **params: object,
) -> dict[str, Any]:
    """One ``tasks/*`` request on ``connection``, bounded by ``timeout`` or the server's
    ``connection_timeout``.

    Raises:
        McpToolCallInterruptedError: No answer came (a broken stream, a timeout, -32603).
        McpTaskError: The server answered with an error, such as an unknown task.
    """
    try:
        return await connection.tasks_request(method, task_id, timeout=timeout, **params)
    except MCPError as error:
        if error.error.code in INTERRUPTION_ERROR_CODES:
            raise interrupted(connection.server.name, target, describe_error(error)) from error
        raise McpTaskError(
            f"MCP server {connection.server.name} answered {method} for task {task_id} of "
            f"{target.tool_name} with an error: {describe_error(error)}"
        ) from error
    except Exception as error:
        raise interrupted(
            connection.server.name, target, f"{method}: {describe_error(error)}"
        ) from error


async def cancel_task(connection: McpConnection, task_id: str) -> None:
    """Sends ``tasks/cancel``; any answer from the server ends the cancellation.

    Raises:
        Exception: When no answer came, so a retry may still reach the server.
    """
    try:
        await connection.tasks_request("tasks/cancel", task_id)
    except MCPError as error:
        if error.error.code in INTERRUPTION_ERROR_CODES:
            raise
        _LOG.info(
            "MCP server %s refused to cancel task %s: %s",
            connection.server.name,
            task_id,
            describe_error(error),
        )


async def _cancel_quietly(connection: McpConnection, task_id: str) -> None:
    try:
        await cancel_task(connection, task_id)
    except Exception:
        _LOG.warning(
            "could not cancel MCP task %s on %s", task_id, connection.server.name, exc_info=True
        )


def terminal_output(task: Mapping[str, Any], task_id: str, target: McpCallTarget) -> str:
    """The output of a completed task, or the error of a failed or cancelled one.

    Raises:
        ToolExecutionError: The task failed or was cancelled, or its result is an error.
        McpTaskError: The completed task's result is not a tool result.
    """
    status = task.get("status")
    if status == "completed":
        try:
            result = mcp_types.CallToolResult.model_validate(
                task.get("result") or {}, by_name=False
            )
        except ValidationError as error:
            raise McpTaskError(
                f"MCP task {task_id} of {target.tool_name} completed with a result that is not a "
                f"tool result: {error.error_count()} validation error(s)"
            ) from error
        return render_tool_result(result)
    if status == "failed":
        failure = task.get("error")
        detail = failure.get("message") if isinstance(failure, Mapping) else None
        raise ToolExecutionError(
            f"the MCP task of {target.tool_name} failed: "
            f"{detail or task.get('statusMessage') or 'no reason given'}"
        )
    message = task.get("statusMessage")
    raise ToolExecutionError(
        f"the MCP task of {target.tool_name} was cancelled" + (f": {message}" if message else "")
    )


def write_status(target: McpCallTarget, task_id: str, task: Mapping[str, Any]) -> None:
    """Writes an ``mcp.task_status`` event for the task's status."""
    target.write_event(
        MCP_TASK_STATUS_EVENT,
        {
            "task_id": task_id,
            "status": task.get("status"),
            "status_message": task.get("statusMessage"),
        },
    )


async def wait_for_task(
    connection: McpConnection,
    target: McpCallTarget,
    handle: McpTaskHandle,
    *,
    heartbeat: Callable[[], Awaitable[None]],
    timeout_seconds: float,
    read: Callable[[], Awaitable[dict[str, Any]]] | None = None,
) -> str:
    """Polls a task on the call's own connection until it ends, a heartbeat per poll.

    ``read`` reads the task in the tasks extension's shape (``status``, ``statusMessage``,
    ``pollIntervalMs``, ``result``, ``inputRequests``); by default one ``tasks/get``.

    Raises:
        ToolExecutionError: The task failed, was cancelled, or asked for input (then cancelled).
        McpToolCallInterruptedError: The task did not end within ``timeout_seconds``, or the
            connection broke; a read or idempotent write then calls the tool again.
        McpTaskError: The server no longer knows the task.
    """
    task_id = handle.task_id
    task: dict[str, Any] = handle.model_dump(by_alias=True, mode="json", exclude_none=True)
    deadline = time.monotonic() + timeout_seconds
    while True:
        status = task.get("status")
        if status in _TERMINAL:
            return terminal_output(task, task_id, target)
        if status == "input_required" and task.get("inputRequests"):
            await _cancel_quietly(connection, task_id)
            # A stdio task's process ends with the request, so no session question can reach it.
            raise ToolExecutionError(input_request_error(raw_input_requests(task["inputRequests"])))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise interrupted(
                connection.server.name,
                target,
                f"task {task_id} did not finish within task_wait_timeout "
                f"({timeout_seconds:g} s) of polling inside the tool Step",
            )
        interval = task.get("pollIntervalMs")
        seconds = interval / 1000 if isinstance(interval, (int, float)) and interval > 0 else 1.0
        await heartbeat()
        await asyncio.sleep(
            max(_INLINE_MIN_POLL_SECONDS, min(seconds, MAX_POLL_INTERVAL_SECONDS, remaining))
        )
        latest = await (
            read() if read is not None else task_request(connection, target, "tasks/get", task_id)
        )
        if latest.get("status") != status:
            write_status(target, task_id, latest)
        task = latest


def _listed_question(
    task: Mapping[str, Any], continuation: TaskContinuation
) -> ElicitationQuestion | None:
    """The question of the task's input request when it is still the one the session asked."""
    if task.get("status") != "input_required":
        return None
    question = elicitation_question(raw_input_requests(task.get("inputRequests")))
    if (
        question is None
        or question.request_key != continuation.request_key
        or question.fingerprint != continuation.fingerprint
    ):
        return None
    return question


def _asked(question: ElicitationQuestion) -> ToolInputRequested:
    return ToolInputRequested(
        question.message,
        choices=question.choices,
        allows_free_text=question.allows_free_text,
        continuation=TaskContinuation(
            status="input_required",
            request_key=question.request_key,
            fingerprint=question.fingerprint,
        ).to_text(),
    )


async def poll_task(
    connection: McpConnection, target: McpCallTarget, poll: ToolTaskPoll
) -> ToolTaskPollOutcome:
    """One ``PollToolTask`` execution: delivers a pending answer, or reads the task once.

    Raises:
        ToolExecutionError: The task failed, was cancelled, or asked what no question can ask.
        McpTaskError: The server lost the task, or a decline could not be delivered.
        McpToolCallInterruptedError: The server could not be reached or answered nothing.
    """
    record = poll.tool_call
    task_id = record.task_id
    if task_id is None:
        raise McpTaskError(f"tool call {record.tool_call_id} of {target.tool_name} has no task")
    continuation = TaskContinuation.from_text(record.input_continuation)
    task = await task_request(connection, target, "tasks/get", task_id)
    answer = poll.pending_answer
    if answer is not None:
        question = _listed_question(task, continuation)
        if question is not None:
            if poll.attempt > 1:
                # An earlier attempt may have sent the answer; asking again never lets a stale
                # answer reach a later identical request.
                return _asked(question)
            return await _deliver(connection, target, task_id, question, answer, poll)
        continuation = replace(continuation, request_key=None, fingerprint=None, sent_at=None)
    return await _read_task(
        connection, target, task_id, task, continuation, record.task_poll_interval_seconds
    )


async def _deliver(
    connection: McpConnection,
    target: McpCallTarget,
    task_id: str,
    question: ElicitationQuestion,
    answer: Any,
    poll: ToolTaskPoll,
) -> ToolTaskPending:
    response = input_response(question, answer)
    declined = response["action"] != "accept"
    # Output before the send: a half-close after it fails this attempt instead of handing the
    # same attempt number out again as never started.
    await poll.heartbeat()
    try:
        await task_request(
            connection,
            target,
            "tasks/update",
            task_id,
            inputResponses={question.request_key: response},
        )
    except Exception:
        if declined:
            await _cancel_quietly(connection, task_id)
        raise
    sent = TaskContinuation(
        status="input_required",
        request_key=question.request_key,
        fingerprint=question.fingerprint,
        sent_at=time.time(),
        declined=declined,
    )
    return ToolTaskPending(_SETTLE_POLL_SECONDS, continuation=sent.to_text())


async def _read_task(
    connection: McpConnection,
    target: McpCallTarget,
    task_id: str,
    task: Mapping[str, Any],
    continuation: TaskContinuation,
    previous_interval: int | None,
) -> ToolTaskPollOutcome:
    status = str(task.get("status"))
    if status != continuation.status:
        write_status(target, task_id, task)
    if status == "cancelled" and continuation.declined:
        raise McpTaskError(
            f"MCP task {task_id} of {target.tool_name} was cancelled after the user declined "
            "its question"
        )
    if status in _TERMINAL:
        return ToolExecutionResult(terminal_output(task, task_id, target))
    interval_ms = task.get("pollIntervalMs")
    interval_ms = interval_ms if isinstance(interval_ms, int) else None
    if status == "input_required" and task.get("inputRequests"):
        return await _input_required(connection, target, task_id, task, continuation)
    kept = TaskContinuation(status=status, declined=continuation.declined)
    return ToolTaskPending(next_poll_interval(interval_ms, previous_interval), kept.to_text())


async def _input_required(
    connection: McpConnection,
    target: McpCallTarget,
    task_id: str,
    task: Mapping[str, Any],
    continuation: TaskContinuation,
) -> ToolTaskPollOutcome:
    requests = raw_input_requests(task["inputRequests"])
    question = elicitation_question(requests)
    if question is None:
        await _cancel_quietly(connection, task_id)
        raise ToolExecutionError(input_request_error(requests))
    answered_lately = (
        continuation.sent_at is not None
        and time.time() - continuation.sent_at < ANSWER_SETTLE_SECONDS
        and question.request_key == continuation.request_key
        and question.fingerprint == continuation.fingerprint
    )
    if answered_lately:
        # The task may still list the request it was just given the answer to.
        return ToolTaskPending(_SETTLE_POLL_SECONDS, continuation.to_text())
    return _asked(question)

"""The server side of the MCP tasks extension (io.modelcontextprotocol/tasks), for test servers.

A tool registered as a task tool answers ``tools/call`` with a task handle when the client declares
the extension, and runs in the background of the server process; ``tasks/get`` reads it,
``tasks/update`` delivers input responses, ``tasks/cancel`` asks it to stop.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams, RequestParams

IDENTIFIER = "io.modelcontextprotocol/tasks"


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class ServerTask:
    """One task's state, as ``tasks/get`` reports it."""

    task_id: str
    poll_interval_ms: int
    status: str = "working"
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)
    cancel_requested: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def snapshot(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": 3_600_000,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message is not None:
            payload["statusMessage"] = self.status_message
        if self.status == "input_required":
            payload["inputRequests"] = dict(self.input_requests)
        if self.status == "completed":
            payload["result"] = self.result
        if self.status == "failed":
            payload["error"] = self.error
        return payload

    def move(self, status: str, message: str | None = None) -> None:
        self.status, self.status_message, self.updated_at = status, message, _now()

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Moves to input_required with these requests and waits for every response."""
        self.input_requests = dict(requests)
        self.move("input_required")
        while not all(key in self.responses for key in requests):
            self.changed.clear()
            await self.changed.wait()
        self.input_requests = {}
        self.move("working")
        return {key: self.responses[key] for key in requests}


TaskTool = Callable[[ServerTask, Mapping[str, Any]], Awaitable[str]]


class _TaskIdParams(RequestParams):
    task_id: str
    input_responses: dict[str, dict[str, Any]] | None = None


class TasksServerExtension(Extension):
    """Runs the named tools as tasks for clients that declare the extension."""

    identifier = IDENTIFIER

    def __init__(
        self,
        task_tools: Mapping[str, TaskTool],
        poll_interval_ms: int = 1000,
        on_cancel: Callable[[str], None] | None = None,
        on_get: Callable[[str, Mapping[str, Any]], None] | None = None,
    ) -> None:
        self._task_tools = dict(task_tools)
        self._on_cancel = on_cancel
        self._on_get = on_get
        self._poll_interval_ms = poll_interval_ms
        self.tasks: dict[str, ServerTask] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: Any, call_next: Any
    ) -> Any:
        tool = self._task_tools.get(params.name)
        if tool is None:
            return await call_next(ctx)
        require_client_extension(ctx, IDENTIFIER)
        task = ServerTask(secrets.token_hex(12), self._poll_interval_ms)
        self.tasks[task.task_id] = task
        running = asyncio.get_running_loop().create_task(
            self._run(task, tool, params.arguments or {}), name=task.task_id
        )
        self._running.add(running)
        running.add_done_callback(self._running.discard)
        return {"resultType": "task", **task.snapshot()}

    async def _run(self, task: ServerTask, tool: TaskTool, arguments: Mapping[str, Any]) -> None:
        try:
            text = await tool(task, arguments)
        except asyncio.CancelledError:
            task.move("cancelled", "cancelled by the client")
            return
        except Exception as error:
            task.error = {"code": -32603, "message": str(error)}
            task.move("failed", str(error))
            return
        if task.status != "cancelled":
            task.result = {"content": [{"type": "text", "text": text}], "isError": False}
            task.move("completed")

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", _TaskIdParams, self._get),
            MethodBinding("tasks/update", _TaskIdParams, self._update),
            MethodBinding("tasks/cancel", _TaskIdParams, self._cancel),
        ]

    def _task(self, ctx: Any, params: _TaskIdParams) -> ServerTask:
        require_client_extension(ctx, IDENTIFIER)
        task = self.tasks.get(params.task_id)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")
        return task

    async def _get(self, ctx: Any, params: _TaskIdParams) -> dict[str, Any]:
        task = self._task(ctx, params)
        if self._on_get is not None:
            self._on_get(task.task_id, dict(params.meta or {}))
        return {"resultType": "complete", **task.snapshot()}

    async def _update(self, ctx: Any, params: _TaskIdParams) -> dict[str, Any]:
        task = self._task(ctx, params)
        for key, response in (params.input_responses or {}).items():
            if key in task.input_requests:
                task.responses[key] = response
        task.changed.set()
        return {"resultType": "complete"}

    async def _cancel(self, ctx: Any, params: _TaskIdParams) -> dict[str, Any]:
        task = self._task(ctx, params)
        task.cancel_requested = True
        if self._on_cancel is not None:
            self._on_cancel(task.task_id)
        if task.status not in ("completed", "failed", "cancelled"):
            task.move("cancelled", "cancelled by the client")
        for running in list(self._running):
            if running.get_name() == task.task_id:
                running.cancel()
        task.changed.set()
        return {"resultType": "complete"}

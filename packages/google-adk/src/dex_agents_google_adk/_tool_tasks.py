"""ADK tools that start remote work, which the session then polls as a tool task.

ADK's long-running tools start an operation and leave its result to come later. Under Dex, such a
tool's ``run_async`` returns :class:`dex_agents.ToolTaskStarted` with the operation's handle, and
the tool polls it: the session's ``PollToolTask`` Steps call the tool's ``poll_tool_task``, and
``cancel_turn`` calls its ``cancel_tool_task`` when it has one.
"""

from __future__ import annotations

from dex_agents import ToolTaskCancellation, ToolTaskPoll, ToolTaskPollOutcome
from typing_extensions import Protocol, runtime_checkable

__all__ = ["AdkTaskTool", "AdkTaskToolCanceller"]


@runtime_checkable
class AdkTaskTool(Protocol):
    """An ADK tool whose ``run_async`` may return ``ToolTaskStarted``, and that polls the task.

    Example:
        >>> class ReportTool(BaseTool):
        ...     async def run_async(self, *, args, tool_context):
        ...         job = await reports.start(idempotency_key_for_tool_call(tool_context))
        ...         return ToolTaskStarted(job.id, poll_interval_seconds=5)
        ...     async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        ...         job = await reports.get(poll.tool_call.task_id)
        ...         return ToolExecutionResult(job.text) if job.done else ToolTaskPending(5)
    """

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll the task once (``poll.tool_call.task_id``); only read it."""
        ...


@runtime_checkable
class AdkTaskToolCanceller(Protocol):
    """An :class:`AdkTaskTool` that can also stop a task that ``cancel_turn`` abandoned."""

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Cancel the task best-effort; idempotent by ``task_id``."""
        ...

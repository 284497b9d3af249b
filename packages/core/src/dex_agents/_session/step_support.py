"""Mechanics every agent session Step shares: the runtime, event writers, heartbeats, and the
writes that several Steps make the same way (finishing a tool call, recording usage).

Each rule lives here once, so a later Step (questions, durable waits, tool tasks, cancellation)
reuses it instead of repeating it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from dex import AsyncContext, Context, Stream

from dex_agents._events import AgentEvent, AgentEventType, AgentEventWriter
from dex_agents._runner_contract import AgentFrameworkRunner
from dex_agents._session.message_decode_cache import MessageDecodeCache
from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.persistence import (
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    TOOL_CALL_RESULTS,
)
from dex_agents._values import (
    AgentToolCall,
    AgentUsage,
    ToolCallCompleted,
    empty_agent_usage,
)

__all__ = [
    "HEARTBEAT_INTERVAL_SECONDS",
    "Heartbeat",
    "SessionRuntime",
    "finish_tool_call",
    "load_all_tool_calls",
    "load_tool_call",
    "record_usage",
]

_logger: Final = logging.getLogger("dex_agents.session")

HEARTBEAT_INTERVAL_SECONDS: Final = 20.0
"""Seconds between the background heartbeats the session records while a runner call runs."""


@dataclass(frozen=True)
class SessionRuntime:
    """What every Step of one ``AgentSessionFlow`` shares: the runner, options, and Stream.

    ``message_cache`` keeps the decoded window messages of this Worker's recent sessions.
    """

    runner: AgentFrameworkRunner[Any]
    options: AgentSessionOptions
    events: Stream[AgentEvent]
    flow_type: str = ""
    message_cache: MessageDecodeCache = field(default_factory=MessageDecodeCache, compare=False)

    def event_writer(self, context: Context, turn_id: str | None) -> AgentEventWriter:
        """Return a writer stamping this Step execution and attempt on every event."""
        events = self.events
        return AgentEventWriter(
            lambda event: _write_event(events, context, event),
            turn_id=turn_id,
            step_execution_id=context.step_execution_id,
            attempt=max(context.attempt, 1),
        )

    @staticmethod
    def now() -> datetime:
        """The Worker clock, timezone-aware UTC."""
        return datetime.now(UTC)


class Heartbeat:
    """Records heartbeats of one async Step attempt, carrying the attempt's saved checkpoint.

    Dex clears a saved checkpoint on a heartbeat without a value, so every heartbeat after a save,
    the background ones included, carries the checkpoint again. An attempt starts from the
    checkpoint of the attempt before it, so a retry that dies early keeps it for the next one.
    """

    def __init__(self, context: AsyncContext) -> None:
        self._context = context
        self.checkpoint: str | None = (
            context.get_last_heartbeat_value(str) if context.has_last_heartbeat_value() else None
        )

    async def beat(self) -> None:
        """Record one heartbeat."""
        if self.checkpoint is None:
            await self._context.heartbeat()
        else:
            await self._context.heartbeat(self.checkpoint)

    async def save_checkpoint(self, checkpoint: str) -> None:
        """Record a heartbeat carrying ``checkpoint``; later heartbeats carry it too."""
        self.checkpoint = checkpoint
        await self.beat()

    @asynccontextmanager
    async def in_background(self) -> AsyncIterator[None]:
        """Heartbeat every 20 seconds while the block runs (a runner call)."""
        task = asyncio.create_task(self._beat_forever())
        try:
            yield
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_SECONDS)
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A lost heartbeat only risks a heartbeat timeout; it must not fail the call.
                _logger.warning("a background heartbeat failed", exc_info=True)


def load_tool_call(context: Context, tool_call_id: str) -> AgentToolCall | None:
    """Return the record of ``tool_call_id`` (its instance must be loaded), or ``None``."""
    return AGENT_TOOL_CALLS.get(context, tool_call_id)


def load_all_tool_calls(context: Context) -> dict[str, AgentToolCall]:
    """Return every record by tool call ID (every instance must be loaded)."""
    return {
        key: AGENT_TOOL_CALLS.get(context, key)
        for key in AGENT_TOOL_CALLS.get_all_instance_keys(context)
    }


def finish_tool_call(context: Context, events: AgentEventWriter, record: AgentToolCall) -> None:
    """Commit a final record: store it, publish its one ``ToolCallResults`` message, and write
    ``tool_call_finished``.

    Every Step that makes a record final calls this, so each call publishes exactly once.

    Raises:
        ValueError: When ``record`` is not final.
    """
    if not record.is_final:
        raise ValueError(f"tool call {record.tool_call_id!r} is still {record.status.value}")
    AGENT_TOOL_CALLS.set(context, record.tool_call_id, record)
    TOOL_CALL_RESULTS.publish(context, ToolCallCompleted(tool_call_id=record.tool_call_id))
    events.write_tool_call_finished(record.tool_call_id, record.tool_name, record.status)


def record_usage(context: Context, events: AgentEventWriter, usage: AgentUsage) -> AgentUsage:
    """Add one model call's usage to ``AgentUsage`` and write ``usage_recorded``.

    Returns:
        The new session total.
    """
    total = (AGENT_USAGE.get(context) or empty_agent_usage()) + usage
    AGENT_USAGE.set(context, total)
    events.write_event(AgentEventType.USAGE_RECORDED, {"recorded": usage, "session": total})
    return total


def tool_calls_in_order(records: Mapping[str, AgentToolCall]) -> list[AgentToolCall]:
    """Return records in deferral (model) order."""
    return sorted(records.values(), key=lambda record: record.deferral_order)


def _write_event(events: Stream[AgentEvent], context: Context, event: AgentEvent) -> None:
    # In an async Step the write is queued on the attempt's output; the return value is unused.
    events.write(context, event)

"""Best-effort live events on the session's ``AgentEvents`` Stream: ``AgentEventWriter``.

Each Step attempt that writes events gets one :class:`AgentEventWriter`, bound to the turn, the
Step execution, and the attempt. The writer turns each call into one :class:`AgentEvent` and hands
it to a sink, which the session Flow supplies: in an async Step,
``lambda event: AGENT_EVENTS.write(context, event)``. The Step calls :meth:`AgentEventWriter.close`
when the runner call returns; every later write is dropped, so a runner's stray thread can never
write into another Step's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Final

from dex_agents._enum_values import enum_member
from dex_agents._events import (
    AgentEvent,
    AgentEventPayload,
    ReasoningDeltaPayload,
    TextDeltaPayload,
    ToolCallFinishedPayload,
    ToolCallStartedPayload,
    encode_event_payload,
    event_payload_fields,
)
from dex_agents._tool_outcome_check import ToolOutcomeCheckStatus
from dex_agents._values import AgentToolCallStatus
from dex_agents.exceptions import ConfigurationError

__all__ = ["AgentEventSink", "AgentEventWriter", "write_event_payload"]

_logger: Final = logging.getLogger("dex_agents.events")

AgentEventSink = Callable[[AgentEvent], None]
"""Where a writer delivers events; the Flow passes one that writes the ``AgentEvents`` Stream."""


def write_event_payload(events: AgentEventWriter, payload: AgentEventPayload) -> None:
    """Write one standard event: the payload's ``EVENT_TYPE`` with its fields as the payload.

    Example:
        >>> from dex_agents._events import TurnStartedPayload
        >>> written = []
        >>> writer = AgentEventWriter(written.append, turn_id="turn-1", step_execution_id="s", attempt=1)
        >>> write_event_payload(writer, TurnStartedPayload(sequence=1))
        >>> written[0].type, written[0].payload
        ('turn_started', '{"sequence":1}')
    """
    events.write_event(payload.EVENT_TYPE, event_payload_fields(payload))


class AgentEventWriter:
    """Writes best-effort live events for one Step attempt; safe to call from any thread.

    Every event carries :attr:`turn_id`, :attr:`step_execution_id` and :attr:`attempt`; the payload
    is JSON with sorted keys. One call writes one Stream message (no coalescing), so batch very small
    text chunks. After :meth:`close` every write is silently dropped.

    A writer built inside a running event loop remembers that loop; a write from another thread is
    handed to the loop with ``call_soon_threadsafe``, because a Dex async Step context is not
    thread-safe. A sink error is logged and swallowed: the Stream is best effort and must never
    fail the Step.

    Args:
        sink: Receives each event, such as ``lambda event: AGENT_EVENTS.write(context, event)``.
        turn_id: Turn stamped on every event, or ``None`` outside a turn.
        step_execution_id: The owning Step execution ID.
        attempt: The owning Step attempt, from 1.
        loop: The loop the sink must run on; defaults to the running loop, if any.

    Example:
        >>> events = []
        >>> writer = AgentEventWriter(events.append, turn_id="turn-1", step_execution_id="RunModel-1", attempt=1)
        >>> writer.write_text_delta("Hello")
        >>> writer.close()
        >>> writer.write_text_delta("dropped")
        >>> [event.payload for event in events]
        ['{"text":"Hello"}']
    """

    def __init__(
        self,
        sink: AgentEventSink,
        *,
        turn_id: str | None,
        step_execution_id: str | None,
        attempt: int,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if attempt < 1:
            raise ConfigurationError(f"attempt must be at least 1, got {attempt}")
        self._sink = sink
        self._turn_id = turn_id
        self._step_execution_id = step_execution_id
        self._attempt = attempt
        self._lock = threading.RLock()
        self._is_closed = False
        self._has_logged_sink_error = False
        self._loop = loop if loop is not None else _running_loop()

    @classmethod
    def discarding(
        cls,
        *,
        turn_id: str | None = None,
        step_execution_id: str | None = None,
        attempt: int = 1,
    ) -> AgentEventWriter:
        """Return a writer that drops every event, for contexts built by hand (tests).

        Example:
            >>> AgentEventWriter.discarding(turn_id="turn-1").write_text_delta("ignored")
        """
        return cls(
            _discard,
            turn_id=turn_id,
            step_execution_id=step_execution_id,
            attempt=attempt,
            loop=None,
        )

    @property
    def turn_id(self) -> str | None:
        """Turn stamped on every event, or ``None`` outside a turn."""
        return self._turn_id

    @property
    def step_execution_id(self) -> str | None:
        """Step execution stamped on every event."""
        return self._step_execution_id

    @property
    def attempt(self) -> int:
        """One-based attempt of the Step that owns this writer."""
        return self._attempt

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called; later writes are dropped."""
        return self._is_closed

    def close(self) -> None:
        """Drop every later write. The owning Step calls it when the runner call returns.

        Waits for a write that is being delivered on another thread, so nothing reaches the sink
        after ``close`` returns.
        """
        with self._lock:
            self._is_closed = True

    def write_event(self, type: str, payload: Mapping[str, object]) -> None:
        """Write one event with a JSON object payload.

        Prefer the typed methods for standard types; an adapter-specific type uses an adapter
        prefix, such as ``"vercel_ai.step_finished"``.

        Raises:
            ConfigurationTypeError: When ``payload`` cannot be written as a JSON object.
            ConfigurationError: When ``type`` is blank.
        """
        if not isinstance(type, str) or not type.strip():
            raise ConfigurationError(f"event type must be a non-blank string, got {type!r}")
        event = AgentEvent(
            type=str(type),
            turn_id=self._turn_id,
            step_execution_id=self._step_execution_id,
            attempt=self._attempt,
            payload=encode_event_payload(payload),
        )
        self._deliver_from_caller(event)

    def write_text_delta(self, text: str) -> None:
        """Write visible assistant text as a ``text_delta`` event; empty chunks are ignored."""
        if text:
            write_event_payload(self, TextDeltaPayload(text))

    def write_reasoning_delta(self, text: str) -> None:
        """Write a provider-authored reasoning summary chunk as ``reasoning_delta``.

        Never label ordinary text or hidden chain of thought as reasoning. Empty chunks are ignored.
        """
        if text:
            write_event_payload(self, ReasoningDeltaPayload(text))

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        """Write ``tool_call_started``. A runner writes it only for a tool it runs itself."""
        write_event_payload(self, ToolCallStartedPayload(tool_call_id, tool_name))

    def write_tool_call_finished(
        self,
        tool_call_id: str,
        tool_name: str,
        status: AgentToolCallStatus | str,
        outcome_check: ToolOutcomeCheckStatus | str | None = None,
    ) -> None:
        """Write ``tool_call_finished`` with the call's final status, and the answer of its
        outcome check when one ran.

        Raises:
            ConfigurationError: When ``status`` is not a tool call status, or ``outcome_check``
                not an outcome check status.
        """
        resolved = enum_member(AgentToolCallStatus, status, "tool_call_finished status")
        check = (
            None
            if outcome_check is None
            else enum_member(
                ToolOutcomeCheckStatus, outcome_check, "tool_call_finished outcome_check"
            )
        )
        write_event_payload(self, ToolCallFinishedPayload(tool_call_id, tool_name, resolved, check))

    def _deliver_from_caller(self, event: AgentEvent) -> None:
        if self._is_closed:
            return
        loop = self._loop
        if loop is not None and _running_loop() is not loop:
            # A closed loop means the Step is over, so the write is late anyway.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._deliver, event)
            return
        self._deliver(event)

    def _deliver(self, event: AgentEvent) -> None:
        with self._lock:
            if self._is_closed:
                return
            try:
                self._sink(event)
            except Exception:
                self._log_sink_error()

    def _log_sink_error(self) -> None:
        if self._has_logged_sink_error:
            _logger.debug("dropped an agent event: the sink failed", exc_info=True)
            return
        self._has_logged_sink_error = True
        _logger.warning("dropped an agent event: the sink failed", exc_info=True)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _discard(event: AgentEvent) -> None:
    del event

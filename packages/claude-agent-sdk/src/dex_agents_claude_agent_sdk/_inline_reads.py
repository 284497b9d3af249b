"""The read call that the harness runs inside ``RunModel``, for the tools that need its key.

A read runs inside the CLI's agent loop, where no tool Step exists, so
``current_deferred_tool_execution()`` is ``None`` there. The harness still knows which model call
asked for the read: it sets the call here while the tool's handler runs, so an MCP wrapper can
send the key the call would have in a tool Step (``<flow>/<turn>/<tool_use id>``) and report the
server's progress as events of that call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

from dex_agents import AgentEventWriter

__all__ = ["InlineReadCall", "current_inline_read", "running_inline_read"]


@dataclass(frozen=True)
class InlineReadCall:
    """One read the harness runs now.

    Attributes:
        idempotency_key: ``<flow>/<turn>/<tool_use id>``; a ``RunModel`` retry runs the read again
            with the same key only when the model answers with the same ``tool_use`` ID.
        tool_call_id: The ``tool_use`` ID (the call's ID in the turn's events).
        events: The turn's event writer of this ``RunModel`` attempt.
    """

    idempotency_key: str
    tool_call_id: str
    events: AgentEventWriter


_CURRENT: Final[ContextVar[InlineReadCall | None]] = ContextVar(
    "dex_agents_claude_agent_sdk_inline_read", default=None
)


def current_inline_read() -> InlineReadCall | None:
    """The read the harness runs in this task, or ``None`` (a tool Step, or no harness)."""
    return _CURRENT.get()


@contextmanager
def running_inline_read(call: InlineReadCall) -> Iterator[None]:
    """Set ``call`` as the running read for the ``with`` block (this task and its children)."""
    token = _CURRENT.set(call)
    try:
        yield
    finally:
        _CURRENT.reset(token)

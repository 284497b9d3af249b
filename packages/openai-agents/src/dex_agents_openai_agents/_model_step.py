"""One model call through the SDK's real ``Runner``, stopped before any function tool runs.

The runner prepares the agent so that every ``FunctionTool`` needs approval: the SDK then ends
the run with an interruption per call, after the model call and before any tool body, which is the
SDK's own human-in-the-loop stop. ``max_turns=1`` stops it before a second model call when the SDK
went on by itself, after a handoff or a tool of the agent's MCP servers, which it runs inline: the
SDK raises ``MaxTurnsExceeded`` with the run's items, which carry everything this call produced.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from agents import (
    Agent,
    HandoffOutputItem,
    MaxTurnsExceeded,
    ModelResponse,
    RawResponsesStreamEvent,
    RunConfig,
    RunHooks,
    RunItem,
    Runner,
    ToolApprovalItem,
    ToolCallItem,
    ToolCallOutputItem,
    TResponseInputItem,
)
from dex_agents import AgentEventWriter, JsonObject
from dex_agents.exceptions import AgentFrameworkError
from openai.types.responses import Response

from dex_agents_openai_agents._transcript import output_text

__all__ = ["ModelCallResult", "run_one_model_call"]

_TEXT_DELTA = "response.output_text.delta"
_REASONING_DELTAS = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)
_COMPLETED = "response.completed"
_BATCH_CHARS = 64
_BATCH_SECONDS = 0.05


@dataclass(frozen=True)
class ModelCallResult:
    """What one model call produced, as the SDK's run reports it.

    Attributes:
        response: The model response.
        completed: The provider's final ``Response`` from the stream, for its model and status.
        interrupted_call_ids: Function calls the SDK stopped before, one interruption each.
        inline_outputs: Results the SDK produced itself, by call ID (MCP tools, handoffs, unknown
            tools).
        calls_without_origin: Calls the SDK matched to no tool (their ``ToolCallItem`` has no
            origin), such as a tool the model made up.
        handoff_call_id: The handoff call that took effect inside the SDK run, if any.
        handoff_target: The agent that handoff handed off to.
    """

    response: ModelResponse
    completed: Response | None
    interrupted_call_ids: frozenset[str]
    inline_outputs: Mapping[str, str]
    calls_without_origin: frozenset[str]
    handoff_call_id: str | None
    handoff_target: str | None


async def run_one_model_call(
    agent: Agent[Any],
    items: Sequence[JsonObject],
    *,
    run_config: RunConfig,
    context: object,
    hooks: RunHooks[Any] | None,
    events: AgentEventWriter,
) -> ModelCallResult:
    """Run ``agent`` on ``items`` for exactly one model call, streaming its text to ``events``.

    Raises:
        Exception: Whatever the SDK raises, such as a guardrail tripwire or a model error.
    """
    streamed = Runner.run_streamed(
        agent,
        cast(list[TResponseInputItem], list(items)),
        context=context,
        max_turns=1,
        hooks=hooks,
        run_config=run_config,
    )
    completed: Response | None = None
    deltas = _DeltaBatcher(events)
    try:
        async for event in streamed.stream_events():
            if isinstance(event, RawResponsesStreamEvent):
                completed = deltas.forward(event) or completed
        deltas.flush()
    except MaxTurnsExceeded as stopped:
        deltas.flush()
        # The SDK went on after this call (a handoff, an inline MCP tool) and stopped at the turn
        # limit, before a second model call; its run data holds what this call produced.
        data = stopped.run_data
        if data is None:
            raise
        return _result(data.raw_responses, data.new_items, (), completed)
    return _result(streamed.raw_responses, streamed.new_items, streamed.interruptions, completed)


class _DeltaBatcher:
    """Forwards the stream's text and reasoning deltas to the session's events in batches.

    A provider streams a delta per token; each event is one Stream message, so deltas are joined
    until ``_BATCH_CHARS`` characters or ``_BATCH_SECONDS`` since the last write, and written at
    once when the kind changes or the stream ends.
    """

    def __init__(self, events: AgentEventWriter) -> None:
        self._events = events
        self._kind: str | None = None
        self._parts: list[str] = []
        self._size = 0
        self._last_write = time.monotonic()

    def forward(self, event: RawResponsesStreamEvent) -> Response | None:
        """Take one raw stream event; returns the final ``Response`` when this is it."""
        data = event.data
        kind = getattr(data, "type", None)
        if kind == _TEXT_DELTA or kind in _REASONING_DELTAS:
            self._add(
                _TEXT_DELTA if kind == _TEXT_DELTA else "reasoning", getattr(data, "delta", "")
            )
            return None
        if kind == _COMPLETED:
            response = getattr(data, "response", None)
            return response if isinstance(response, Response) else None
        return None

    def flush(self) -> None:
        """Write what is buffered."""
        if self._parts:
            text = "".join(self._parts)
            if self._kind == _TEXT_DELTA:
                self._events.write_text_delta(text)
            else:
                self._events.write_reasoning_delta(text)
        self._parts, self._size, self._last_write = [], 0, time.monotonic()

    def _add(self, kind: str, delta: object) -> None:
        if kind != self._kind:
            self.flush()
            self._kind = kind
        text = str(delta)
        self._parts.append(text)
        self._size += len(text)
        if self._size >= _BATCH_CHARS or time.monotonic() - self._last_write >= _BATCH_SECONDS:
            self.flush()


def _result(
    raw_responses: Sequence[ModelResponse],
    new_items: Sequence[RunItem],
    interruptions: Sequence[ToolApprovalItem],
    completed: Response | None,
) -> ModelCallResult:
    if len(raw_responses) != 1:
        raise AgentFrameworkError(
            f"the SDK run made {len(raw_responses)} model calls where exactly one was expected"
        )
    inline: dict[str, str] = {}
    without_origin: set[str] = set()
    handoff_call_id: str | None = None
    handoff_target: str | None = None
    for item in new_items:
        if isinstance(item, HandoffOutputItem):
            handoff_call_id = _record_output(inline, item.raw_item)
            handoff_target = item.target_agent.name
        elif isinstance(item, ToolCallOutputItem):
            _record_output(inline, item.raw_item)
        elif isinstance(item, ToolCallItem) and item.tool_origin is None:
            call_id = getattr(item.raw_item, "call_id", None)
            if isinstance(call_id, str):
                without_origin.add(call_id)
    return ModelCallResult(
        response=raw_responses[0],
        completed=completed,
        interrupted_call_ids=frozenset(_interrupted_call_id(item) for item in interruptions),
        inline_outputs=inline,
        calls_without_origin=frozenset(without_origin),
        handoff_call_id=handoff_call_id,
        handoff_target=handoff_target,
    )


def _record_output(inline: dict[str, str], raw_item: object) -> str | None:
    """Keep a ``function_call_output`` item's text by call ID; returns the call ID."""
    output = cast(Mapping[str, Any], raw_item) if isinstance(raw_item, Mapping) else None
    call_id = output.get("call_id") if output is not None else None
    if output is None or not isinstance(call_id, str):
        return None
    inline[call_id] = output_text(output.get("output"))
    return call_id


def _interrupted_call_id(item: ToolApprovalItem) -> str:
    call_id = getattr(item.raw_item, "call_id", None)
    if not isinstance(call_id, str) or getattr(item.raw_item, "type", None) != "function_call":
        raise AgentFrameworkError(
            f"the SDK asked to approve a {getattr(item.raw_item, 'type', '?')} item of tool "
            f"{item.tool_name!r}; only function calls can be deferred (set require_approval to "
            "'never' on hosted MCP tools)"
        )
    return call_id

"""One ``RunModel`` Step: one call of the agent's Strands model, streamed, and its outcome.

The Step sends what Strands' own event loop sends (``strands.event_loop.streaming``'s
``stream_messages``: the agent's system prompt, its tool specs and the messages), writes the
response's text and reasoning deltas to the AgentEvents Stream as they arrive, and looks at the
finished message: every ``toolUse`` block becomes a ``DeferredToolCall`` run in its own tool Step,
and a message without one completes the turn. The Strands loop itself never runs here, so a crash
repeats at most this one model call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    BuiltInTool,
    DeferredToolCall,
    InteractionMode,
    ModelCallMetadata,
    ResolvedToolPolicy,
    ToolCallsRequested,
    TurnCompleted,
)
from dex_agents.adapters import UNKNOWN_TOOL_POLICY
from dex_agents.exceptions import AgentFrameworkError
from strands.event_loop.streaming import stream_messages
from strands.models import Model
from strands.types.content import Message, Messages
from strands.types.event_loop import Usage
from strands.types.tools import ToolSpec

from dex_agents_strands._runner_config import RunnerConfig
from dex_agents_strands._transcript import encode_message, model_input, pending_tool_results

__all__ = ["ModelResponse", "call_model", "run_model_step", "tool_specs"]

_RUN_STATE_KEY: Final = "strands_run_state"


@dataclass(frozen=True)
class ModelResponse:
    """The finished message of one model call, its stop reason and usage."""

    message: Message
    stop_reason: str
    usage: Usage


async def run_model_step(config: RunnerConfig, turn: AgentTurnContext) -> AgentTurnOutcome:
    """Make the turn's next model call.

    Raises:
        StoredStateError: When a stored message is not a Strands message.
        AgentFrameworkError: When the stream ends without a message.
        Exception: Whatever the model raises (the attempt fails and ``RunModel`` retries).
    """
    pending = pending_tool_results(turn)
    specs = tool_specs(config, turn)
    model = config.model_for(turn.session_settings)
    response = await call_model(
        model, config.agent.system_prompt, model_input(turn, pending), specs, turn
    )
    new_messages = [*pending, *encode_message(response.message)]
    usage = _agent_usage(response.usage)
    metadata = _metadata(model, response.stop_reason)
    uses = [block["toolUse"] for block in response.message["content"] if "toolUse" in block]
    if not uses:
        return TurnCompleted(new_messages, usage, metadata)
    offered = {spec["name"] for spec in specs}
    calls = [
        DeferredToolCall(
            tool_call_id=use["toolUseId"],
            tool_name=use["name"],
            arguments=json.dumps(use.get("input", {}), ensure_ascii=False),
            policy=_policy(turn, use["name"], offered),
        )
        for use in uses
    ]
    run_state = json.dumps({_RUN_STATE_KEY: [use["toolUseId"] for use in uses]})
    return ToolCallsRequested(run_state, calls, usage, new_messages, metadata)


async def call_model(
    model: Model,
    system_prompt: str | None,
    messages: Messages,
    specs: list[ToolSpec],
    turn: AgentTurnContext | None = None,
) -> ModelResponse:
    """One streamed model call; text and reasoning deltas go to ``turn``'s events.

    Raises:
        AgentFrameworkError: When the stream ends without a message.
        Exception: Whatever the model raises.
    """
    async for event in stream_messages(model, system_prompt, messages, specs):
        if "stop" in event:
            stop_reason, message, usage, _metrics = event["stop"]
            return ModelResponse(message, str(stop_reason), usage)
        if turn is not None and "event" in event:
            _write_delta(turn, event["event"])
    raise AgentFrameworkError("the Strands model stream ended without a message")


def tool_specs(config: RunnerConfig, turn: AgentTurnContext) -> list[ToolSpec]:
    """The tools a call offers: the agent's and the session's built-in tools; a planning turn
    offers only ``write_todos``."""
    built_in: list[ToolSpec] = [
        {
            "name": definition.name.value,
            "description": definition.description,
            "inputSchema": {"json": json.loads(json.dumps(definition.parameters))},
        }
        for definition in BUILT_IN_TOOL_DEFINITIONS
        if definition.name.value in turn.enabled_built_in_tools
    ]
    if turn.interaction_mode is InteractionMode.PLANNING:
        return [spec for spec in built_in if spec["name"] == BuiltInTool.WRITE_TODOS.value]
    return [*config.agent.tool_registry.get_all_tool_specs(), *built_in]


def _policy(turn: AgentTurnContext, name: str, offered: set[str]) -> ResolvedToolPolicy:
    if name not in offered:
        # Not offered: it fails in its tool Step as an unknown tool, with nothing to approve.
        return UNKNOWN_TOOL_POLICY
    return turn.resolve_tool_policy(name)


def _write_delta(turn: AgentTurnContext, chunk: Mapping[str, Any]) -> None:
    delta = chunk.get("contentBlockDelta", {}).get("delta", {})
    if delta.get("text"):
        turn.events.write_text_delta(delta["text"])
    reasoning = delta.get("reasoningContent", {})
    if isinstance(reasoning, Mapping) and reasoning.get("text"):
        turn.events.write_reasoning_delta(reasoning["text"])


def _agent_usage(usage: Usage) -> AgentUsage:
    return AgentUsage(
        input_tokens=int(usage.get("inputTokens", 0)),
        output_tokens=int(usage.get("outputTokens", 0)),
        cached_input_tokens=int(usage.get("cacheReadInputTokens", 0)),
    )


def _metadata(model: Model, stop_reason: str) -> ModelCallMetadata:
    config = model.get_config()
    model_id = config.get("model_id") if isinstance(config, Mapping) else None
    return ModelCallMetadata(
        request_model=str(model_id) if model_id else None,
        provider_name=type(model).__name__,
        finish_reasons=(stop_reason,),
    )

"""Persistence of the agent session Flow: the Attributes, Channels, and Stream every session uses.

The Attribute and Channel definitions are module constants shared by every agent Flow type, so a
Client reads any session's ``AgentState`` with the same definition. The AgentEvents Stream is one
per Flow type (Dex refuses a Stream object registered by two Flows), so
:func:`agent_session_persistence_schema` builds it with the Flow type's capacity.

The schema registers the names of every feature of the session, including those whose Steps come
in later releases (steering, cancellation, plans, compaction, chunked storage, settings), so the
persisted names of a Flow type never change when a feature arrives.

Example:
    >>> schema = agent_session_persistence_schema(agent_event_stream(10 * 1024 * 1024))
    >>> AGENT_STATE in schema.attributes
    True
"""

from __future__ import annotations

from typing import Final

from dex import Attribute, AttributeMap, Channel, ChannelMap, PersistenceSchema, Stream

from dex_agents._events import AgentEvent
from dex_agents._session.message_layout import AgentMessageChunk, AgentMessageIndex
from dex_agents._session.settings import TurnSessionSettings
from dex_agents._values import (
    AgentInterrupt,
    AgentInterruptResolution,
    AgentMessage,
    AgentPlan,
    AgentState,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    ContextSummary,
    PlanExecutionRequest,
    ToolCallCancellation,
    ToolCallCompleted,
    TurnCancellationRequest,
    TurnControlRequest,
    TurnReplySequence,
)

__all__ = [
    "AGENT_EVENTS_STREAM_NAME",
    "AGENT_MESSAGES",
    "AGENT_MESSAGE_CHUNKS",
    "AGENT_MESSAGE_INDEX",
    "AGENT_PLAN",
    "AGENT_STATE",
    "AGENT_TOOL_ATTEMPT_CLAIMS",
    "AGENT_TOOL_CALLS",
    "AGENT_TRACE_CONTEXT",
    "AGENT_USAGE",
    "CONTEXT_SUMMARY",
    "FRAMEWORK_RUN_STATE",
    "INTERRUPT_RESOLUTIONS",
    "PENDING_INTERRUPTS",
    "PENDING_PLAN_EXECUTION",
    "PLAN_EXECUTIONS",
    "QUEUED_USER_MESSAGES",
    "SESSION_SETTINGS",
    "STEERED_USER_MESSAGES",
    "TOOL_CALL_CANCELLATIONS",
    "TOOL_CALL_RESULTS",
    "TURN_CANCELLATION_REQUEST",
    "TURN_CONTROL_REQUESTS",
    "TURN_REPLY_SEQUENCE",
    "TURN_SESSION_SETTINGS",
    "agent_event_stream",
    "agent_session_persistence_schema",
]

AGENT_EVENTS_STREAM_NAME: Final = "flow.agent_events"
"""Name of the AgentEvents Stream of every agent Flow type."""

AGENT_STATE: Final = Attribute("AGENT_STATE", AgentState)
"""``AgentState``: what the session is doing, its turn count, and the newest message sequence."""
AGENT_MESSAGES: Final = AttributeMap("AGENT_MESSAGES", AgentMessage)
"""``AgentMessages``: the stored messages, keyed by ``message_sequence_key(n)``."""
AGENT_MESSAGE_CHUNKS: Final = AttributeMap("AGENT_MESSAGE_CHUNKS", AgentMessageChunk)
"""``AgentMessageChunks``: immutable chunks of older messages (see agent_message_store)."""
AGENT_MESSAGE_INDEX: Final = Attribute("AGENT_MESSAGE_INDEX", AgentMessageIndex)
"""``AgentMessageIndex``: the kept chunks and the window start (see agent_message_store)."""
TURN_REPLY_SEQUENCE: Final = Attribute("TURN_REPLY_SEQUENCE", TurnReplySequence)
"""``TurnReplySequence``: where the latest turn's replies start."""
FRAMEWORK_RUN_STATE: Final = Attribute("FRAMEWORK_RUN_STATE", str)
"""``FrameworkRunState``: the runner's opaque state, set only while a turn waits for tool calls."""
AGENT_TOOL_CALLS: Final = AttributeMap("AGENT_TOOL_CALLS", AgentToolCall)
"""``AgentToolCalls``: one record per tool call of the active turn, keyed by tool call ID."""
AGENT_TOOL_ATTEMPT_CLAIMS: Final = AttributeMap("AGENT_TOOL_ATTEMPT_CLAIMS", str)
"""``AgentToolAttemptClaims`` (internal): the start claim and fences of a single-attempt call's
Step executions, keyed by tool call ID; written only by the ``claim_tool_attempt`` RPC."""
PENDING_INTERRUPTS: Final = Attribute("PENDING_INTERRUPTS", list[AgentInterrupt])
"""``PendingInterrupts``: approvals and questions waiting for a person."""
AGENT_USAGE: Final = Attribute("AGENT_USAGE", AgentUsage)
"""``AgentUsage``: the session's cumulative usage."""
QUEUED_USER_MESSAGES: Final = Channel("QUEUED_USER_MESSAGES", AgentUserMessage)
"""``QueuedUserMessages``: user messages waiting for the next turn."""
INTERRUPT_RESOLUTIONS: Final = ChannelMap("INTERRUPT_RESOLUTIONS", AgentInterruptResolution)
"""``InterruptResolutions``: the answer to each interrupt, keyed by interrupt ID."""
TOOL_CALL_RESULTS: Final = Channel("TOOL_CALL_RESULTS", ToolCallCompleted)
"""``ToolCallResults`` (internal): one message per tool call when its record becomes final."""
STEERED_USER_MESSAGES: Final = Channel("STEERED_USER_MESSAGES", AgentUserMessage)
"""``SteeredUserMessages``: messages that steer the running turn (steering)."""
TURN_CONTROL_REQUESTS: Final = Channel("TURN_CONTROL_REQUESTS", TurnControlRequest)
"""``TurnControlRequests`` (internal): steer and cancel wakes (steering and cancellation)."""
TURN_CANCELLATION_REQUEST: Final = Attribute("TURN_CANCELLATION_REQUEST", TurnCancellationRequest)
"""``TurnCancellationRequest``: written only by ``cancel_turn``."""
TOOL_CALL_CANCELLATIONS: Final = ChannelMap("TOOL_CALL_CANCELLATIONS", ToolCallCancellation)
"""``ToolCallCancellations`` (internal): wakes a waiting tool call, keyed by tool call ID."""
AGENT_TRACE_CONTEXT: Final = Attribute("AGENT_TRACE_CONTEXT", str)
"""``AgentTraceContext``: W3C traceparent of the current activation's root span (tracing)."""
AGENT_PLAN: Final = Attribute("AGENT_PLAN", AgentPlan)
"""``AgentPlan``: the session's plan (plans)."""
PLAN_EXECUTIONS: Final = ChannelMap("PLAN_EXECUTIONS", PlanExecutionRequest)
"""``PlanExecutions``: approvals of a plan revision, keyed by ``plan_execution_key(revision)``."""
PENDING_PLAN_EXECUTION: Final = Attribute("PENDING_PLAN_EXECUTION", PlanExecutionRequest)
"""``PendingPlanExecution``: an accepted plan approval the session has not consumed."""
CONTEXT_SUMMARY: Final = Attribute("CONTEXT_SUMMARY", ContextSummary)
"""``ContextSummary``: the summary of the earlier conversation (compaction)."""
SESSION_SETTINGS: Final = Attribute("SESSION_SETTINGS", str)
"""``SessionSettings``: the settings the next turn starts with, as compact JSON text."""
TURN_SESSION_SETTINGS: Final = Attribute("TURN_SESSION_SETTINGS", TurnSessionSettings)
"""``TurnSessionSettings``: the running turn's copy of the settings, tagged with the turn."""


def agent_event_stream(capacity_bytes: int) -> Stream[AgentEvent]:
    """Return a new AgentEvents Stream definition for one Flow type.

    Args:
        capacity_bytes: Approximate byte budget of the Stream, shared by the Flow type's sessions.

    Returns:
        A ``flow.agent_events`` Stream of ``AgentEvent`` values.

    Raises:
        ValueError: When ``capacity_bytes`` is not positive.

    Example:
        >>> agent_event_stream(1024).name
        'flow.agent_events'
    """
    return Stream(AGENT_EVENTS_STREAM_NAME, AgentEvent, capacity_bytes)


def agent_session_persistence_schema(events: Stream[AgentEvent]) -> PersistenceSchema:
    """Return the persistence schema of an agent Flow type whose AgentEvents Stream is ``events``.

    Args:
        events: The Flow type's own Stream from :func:`agent_event_stream`.

    Returns:
        Every Attribute and Channel of the session plus ``events``.

    Example:
        >>> len(agent_session_persistence_schema(agent_event_stream(1024)).streams)
        1
    """
    return PersistenceSchema.of(
        AGENT_STATE,
        AGENT_MESSAGES,
        AGENT_MESSAGE_CHUNKS,
        AGENT_MESSAGE_INDEX,
        TURN_REPLY_SEQUENCE,
        FRAMEWORK_RUN_STATE,
        AGENT_TOOL_CALLS,
        AGENT_TOOL_ATTEMPT_CLAIMS,
        PENDING_INTERRUPTS,
        AGENT_USAGE,
        TURN_CANCELLATION_REQUEST,
        AGENT_TRACE_CONTEXT,
        AGENT_PLAN,
        PENDING_PLAN_EXECUTION,
        CONTEXT_SUMMARY,
        SESSION_SETTINGS,
        TURN_SESSION_SETTINGS,
        QUEUED_USER_MESSAGES,
        INTERRUPT_RESOLUTIONS,
        TOOL_CALL_RESULTS,
        STEERED_USER_MESSAGES,
        TURN_CONTROL_REQUESTS,
        TOOL_CALL_CANCELLATIONS,
        PLAN_EXECUTIONS,
        events,
    )

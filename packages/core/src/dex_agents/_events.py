"""The events of the session's ``AgentEvents`` Stream: their types, payloads, and wire form.

Every standard event type has one frozen payload dataclass here, whose fields are the event's
payload keys; :func:`event_payload_fields` and :func:`encode_event_payload` write every payload
the same way, as compact JSON text with sorted keys. Adapter-specific events use a prefixed type
and a plain mapping (``AgentEventWriter.write_event``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum, StrEnum
from typing import ClassVar, TypeAlias

from dex_agents._json_values import (
    JsonObject,
    WireValue,
    WireValueError,
    dump_json_text,
    resolve_wire_value_annotations,
)
from dex_agents._text_validity import replace_unencodable_text
from dex_agents._tool_outcome_check import ToolOutcomeCheckStatus
from dex_agents._tool_policy import ToolEffect
from dex_agents._values import (
    AgentInterrupt,
    AgentInterruptResolution,
    AgentPlan,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    CancellationReason,
    InterruptKind,
)
from dex_agents.exceptions import ConfigurationTypeError

__all__ = [
    "AgentEvent",
    "AgentEventPayload",
    "AgentEventType",
    "CompactionFinishedPayload",
    "CompactionStartedPayload",
    "InterruptRaisedPayload",
    "InterruptResolvedPayload",
    "PlanExecutionStartedPayload",
    "PlanUpdatedPayload",
    "ReasoningDeltaPayload",
    "TextDeltaPayload",
    "TimerStartedPayload",
    "ToolCallDeferredPayload",
    "ToolCallFinishedPayload",
    "ToolCallStartedPayload",
    "ToolTaskStartedPayload",
    "TurnCancelledPayload",
    "TurnCompletedPayload",
    "TurnFailedPayload",
    "TurnStartedPayload",
    "TurnSteeredPayload",
    "UsageRecordedPayload",
    "encode_event_payload",
    "event_payload_fields",
]


class AgentEventType(StrEnum):
    """Type of every standard event on ``AgentEvents``.

    Adapter-specific events use a prefixed type instead, such as ``"vercel_ai.step_finished"``.
    """

    TURN_STARTED = "turn_started"
    TURN_COMPLETED = "turn_completed"
    TURN_FAILED = "turn_failed"
    TURN_STEERED = "turn_steered"
    TURN_CANCELLED = "turn_cancelled"
    TEXT_DELTA = "text_delta"
    REASONING_DELTA = "reasoning_delta"
    TOOL_CALL_STARTED = "tool_call_started"
    TOOL_CALL_FINISHED = "tool_call_finished"
    TOOL_CALL_DEFERRED = "tool_call_deferred"
    INTERRUPT_RAISED = "interrupt_raised"
    INTERRUPT_RESOLVED = "interrupt_resolved"
    TIMER_STARTED = "timer_started"
    PLAN_UPDATED = "plan_updated"
    PLAN_EXECUTION_STARTED = "plan_execution_started"
    TOOL_TASK_STARTED = "tool_task_started"
    USAGE_RECORDED = "usage_recorded"
    COMPACTION_STARTED = "compaction_started"
    COMPACTION_FINISHED = "compaction_finished"


_OMIT_WHEN_NONE = "omit_when_none"
"""Metadata key of a payload field that :func:`event_payload_fields` leaves out while ``None``."""


@dataclass(frozen=True)
class AgentEvent(WireValue):
    """One message of the ``AgentEvents`` Stream.

    Attributes:
        type: An :class:`AgentEventType` value or an adapter-prefixed type.
        turn_id: The turn, ``turn-<n>``, or ``None`` outside a turn.
        step_execution_id: The Step execution that wrote it, shared by all of its attempts.
        attempt: The one-based Step attempt; a UI keeps only the highest attempt's live text.
        payload: JSON object text with sorted keys.

    Example:
        >>> event = AgentEvent("text_delta", "turn-1", "RunModel-1", 1, '{"text":"Hi"}')
        >>> event.payload_json()
        {'text': 'Hi'}
    """

    type: str
    turn_id: str | None
    step_execution_id: str | None
    attempt: int
    payload: str = "{}"

    def payload_json(self) -> JsonObject:
        """Return the payload as a JSON object.

        Raises:
            WireValueError: When the payload text is not a JSON object.
        """
        data = json.loads(self.payload)
        if not isinstance(data, dict):
            raise WireValueError(f"AgentEvent payload must be a JSON object, got {self.payload!r}")
        return data


@dataclass(frozen=True)
class TurnStartedPayload:
    """``turn_started``: the sequence of the turn's first user message."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TURN_STARTED
    sequence: int


@dataclass(frozen=True)
class TurnCompletedPayload:
    """``turn_completed``: how many messages the session stores once the turn completed."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TURN_COMPLETED
    message_count: int


@dataclass(frozen=True)
class TurnFailedPayload:
    """``turn_failed``: the turn's ``last_turn_error``."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TURN_FAILED
    error: str


@dataclass(frozen=True)
class TurnSteeredPayload:
    """``turn_steered``: the steered messages that end the turn, and the stored message count."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TURN_STEERED
    steered_message_count: int
    message_count: int


@dataclass(frozen=True)
class TurnCancelledPayload:
    """``turn_cancelled``: the stored message count once ``cancel_turn`` ended the turn."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TURN_CANCELLED
    message_count: int


@dataclass(frozen=True)
class TextDeltaPayload:
    """``text_delta``: visible assistant text as it streams."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TEXT_DELTA
    text: str


@dataclass(frozen=True)
class ReasoningDeltaPayload:
    """``reasoning_delta``: a provider-authored reasoning summary as it streams."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.REASONING_DELTA
    text: str


@dataclass(frozen=True)
class ToolCallStartedPayload:
    """``tool_call_started``: a tool Step, or a runner's own tool, starts one call."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TOOL_CALL_STARTED
    tool_call_id: str
    tool_name: str


@dataclass(frozen=True)
class ToolCallFinishedPayload:
    """``tool_call_finished``: one call's final status, once per call (rejections included).

    ``outcome_check`` is present only when the call's attempt was lost and its outcome check
    answered (``applied``, ``not_applied``, ``unknown``, or ``check_failed``).
    """

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TOOL_CALL_FINISHED
    tool_call_id: str
    tool_name: str
    status: AgentToolCallStatus
    outcome_check: ToolOutcomeCheckStatus | None = dataclasses.field(
        default=None, metadata={_OMIT_WHEN_NONE: True}
    )


@dataclass(frozen=True)
class ToolCallDeferredPayload:
    """``tool_call_deferred``: ``RunModel`` recorded a call, with its effect and approval."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TOOL_CALL_DEFERRED
    tool_call_id: str
    tool_name: str
    effect: ToolEffect
    requires_approval: bool

    @classmethod
    def of(cls, record: AgentToolCall) -> ToolCallDeferredPayload:
        """The payload of a newly recorded call."""
        return cls(record.tool_call_id, record.tool_name, record.effect, record.requires_approval)


@dataclass(frozen=True)
class InterruptRaisedPayload:
    """``interrupt_raised``: an approval or a question waits for a person."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.INTERRUPT_RAISED
    interrupt_id: str
    tool_call_id: str
    tool_name: str
    deadline: datetime | None
    kind: InterruptKind
    question: str | None
    choices: tuple[str, ...]
    allows_free_text: bool

    @classmethod
    def of(cls, interrupt: AgentInterrupt, record: AgentToolCall) -> InterruptRaisedPayload:
        """The payload of ``interrupt``, raised for ``record``."""
        return cls(
            interrupt_id=interrupt.interrupt_id,
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
            deadline=interrupt.deadline,
            kind=interrupt.kind,
            question=interrupt.question,
            choices=interrupt.choices,
            allows_free_text=interrupt.allows_free_text,
        )


@dataclass(frozen=True)
class InterruptResolvedPayload:
    """``interrupt_resolved``: an approval or question was answered, declined, expired, or
    removed by steering or cancellation (``cancellation_reason``)."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.INTERRUPT_RESOLVED
    interrupt_id: str
    approved: bool
    rejection_message: str | None
    kind: InterruptKind
    answered: bool
    cancellation_reason: CancellationReason | None

    @classmethod
    def of_approval(cls, resolution: AgentInterruptResolution) -> InterruptResolvedPayload:
        """An approval a person answered, or that steering or cancellation removed."""
        return cls(
            interrupt_id=resolution.interrupt_id,
            approved=resolution.approved,
            rejection_message=resolution.rejection_message,
            kind=InterruptKind.APPROVAL,
            answered=False,
            cancellation_reason=resolution.cancellation_reason,
        )

    @classmethod
    def of_question(cls, interrupt_id: str, *, answered: bool) -> InterruptResolvedPayload:
        """A question that was answered, or declined or past its deadline (not answered)."""
        return cls(interrupt_id, answered, None, InterruptKind.QUESTION, answered, None)

    @classmethod
    def withdrawn(
        cls, interrupt_id: str, kind: InterruptKind, reason: CancellationReason
    ) -> InterruptResolvedPayload:
        """An interrupt that steering or ``cancel_turn`` removed before anyone answered."""
        return cls(interrupt_id, False, None, kind, False, reason)


@dataclass(frozen=True)
class TimerStartedPayload:
    """``timer_started``: a ``durable_wait`` call waits on a Timer until ``wait_until``."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TIMER_STARTED
    tool_call_id: str
    wait_until: datetime | None
    reason: str | None

    @classmethod
    def of(cls, record: AgentToolCall) -> TimerStartedPayload:
        """The payload of a ``waiting_for_timer`` record."""
        return cls(record.tool_call_id, record.wait_until, record.wait_reason)


@dataclass(frozen=True)
class PlanUpdatedPayload:
    """``plan_updated``: ``write_todos`` wrote a plan, or an approval made a draft active."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.PLAN_UPDATED
    revision: int
    status: str
    task_count: int

    @classmethod
    def of(cls, plan: AgentPlan) -> PlanUpdatedPayload:
        """The payload of ``plan``: its revision, status, and task count."""
        return cls(plan.revision, plan.status.value, len(plan.todos))


@dataclass(frozen=True)
class PlanExecutionStartedPayload:
    """``plan_execution_started``: an approval of this revision starts an executing turn."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.PLAN_EXECUTION_STARTED
    revision: int


@dataclass(frozen=True)
class ToolTaskStartedPayload:
    """``tool_task_started``: a tool started remote work that ``PollToolTask`` polls."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.TOOL_TASK_STARTED
    tool_call_id: str
    tool_name: str
    task_id: str | None


@dataclass(frozen=True)
class UsageRecordedPayload:
    """``usage_recorded``: one model call's usage and the new session total."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.USAGE_RECORDED
    recorded: AgentUsage
    session: AgentUsage


@dataclass(frozen=True)
class CompactionStartedPayload:
    """``compaction_started``: ``CompactContext`` summarizes every message through a sequence."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.COMPACTION_STARTED
    through_sequence: int


@dataclass(frozen=True)
class CompactionFinishedPayload:
    """``compaction_finished``: the stored summary's generation and last sequence."""

    EVENT_TYPE: ClassVar[AgentEventType] = AgentEventType.COMPACTION_FINISHED
    generation: int
    through_sequence: int


AgentEventPayload: TypeAlias = (
    TurnStartedPayload
    | TurnCompletedPayload
    | TurnFailedPayload
    | TurnSteeredPayload
    | TurnCancelledPayload
    | TextDeltaPayload
    | ReasoningDeltaPayload
    | ToolCallStartedPayload
    | ToolCallFinishedPayload
    | ToolCallDeferredPayload
    | InterruptRaisedPayload
    | InterruptResolvedPayload
    | TimerStartedPayload
    | PlanUpdatedPayload
    | PlanExecutionStartedPayload
    | ToolTaskStartedPayload
    | UsageRecordedPayload
    | CompactionStartedPayload
    | CompactionFinishedPayload
)
"""The payload of any standard event; its ``EVENT_TYPE`` names the event type."""


def event_payload_fields(payload: AgentEventPayload) -> dict[str, object]:
    """Return the payload's keys and values, as :func:`encode_event_payload` writes them.

    Example:
        >>> event_payload_fields(TurnStartedPayload(sequence=3))
        {'sequence': 3}
    """
    fields = {field.name: getattr(payload, field.name) for field in dataclasses.fields(payload)}
    # A field added after the seeds' payloads is left out while it says nothing, so those
    # payloads keep their exact keys.
    return {
        field.name: fields[field.name]
        for field in dataclasses.fields(payload)
        if not (field.metadata.get(_OMIT_WHEN_NONE) and fields[field.name] is None)
    }


def encode_event_payload(payload: Mapping[str, object]) -> str:
    """Return ``payload`` as compact JSON text with sorted keys.

    StrEnums become their strings, datetimes ISO 8601 text, wire values their JSON objects; a lone
    surrogate becomes U+FFFD.

    Raises:
        ConfigurationTypeError: When ``payload`` is not a mapping or holds a value JSON cannot represent
            (NaN and infinities included).

    Example:
        >>> encode_event_payload({"tool_name": "search", "status": AgentToolCallStatus.SUCCEEDED})
        '{"status":"succeeded","tool_name":"search"}'
    """
    if not isinstance(payload, Mapping):
        raise ConfigurationTypeError(
            f"event payload must be a JSON object, got {type(payload).__name__}"
        )
    try:
        # A lone surrogate from a model or a tool would make the Stream message unwritable.
        return replace_unencodable_text(dump_json_text(_plain(payload)))
    except ValueError as error:
        raise ConfigurationTypeError(f"event payload is not valid JSON: {error}") from None


def _plain(value: object) -> object:
    if isinstance(value, WireValue):
        return value.to_json()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {_require_key(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ConfigurationTypeError(f"event payload value of type {type(value).__name__} is not JSON")


def _require_key(key: object) -> str:
    if not isinstance(key, str):
        raise ConfigurationTypeError(f"event payload keys must be strings, got {key!r}")
    return key


resolve_wire_value_annotations(__name__)

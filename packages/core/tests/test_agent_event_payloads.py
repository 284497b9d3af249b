"""The typed payloads of the standard events: one per type, the documented keys, the wire JSON.

The session writes every standard event through a frozen payload dataclass; its fields are the
event's payload keys, and the payload text on the Stream is compact JSON with sorted keys, byte
for byte what UIs and the TypeScript core read.
"""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime

import pytest
from dex_agents import (
    AgentEventType,
    AgentEventWriter,
    AgentInterrupt,
    AgentPlan,
    AgentTodo,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    CancellationReason,
    InterruptKind,
    PlanStatus,
    ToolEffect,
    ToolOutcomeCheckStatus,
)
from dex_agents import _events as events_module
from dex_agents._event_writer import write_event_payload
from dex_agents._events import (
    AgentEventPayload,
    CompactionFinishedPayload,
    CompactionStartedPayload,
    InterruptRaisedPayload,
    InterruptResolvedPayload,
    PlanExecutionStartedPayload,
    PlanUpdatedPayload,
    ReasoningDeltaPayload,
    TextDeltaPayload,
    TimerStartedPayload,
    ToolCallDeferredPayload,
    ToolCallFinishedPayload,
    ToolCallStartedPayload,
    ToolTaskStartedPayload,
    TurnCancelledPayload,
    TurnCompletedPayload,
    TurnFailedPayload,
    TurnStartedPayload,
    TurnSteeredPayload,
    UsageRecordedPayload,
)
from seed_documentation import SEED_EVENT_PAYLOAD_KEYS

#: The payload keys of every standard event, as the documentation lists them; outcome_check is
#: added after the seeds, and written only when a check ran.
SEED_EVENT_KEYS: dict[AgentEventType, frozenset[str]] = {
    AgentEventType(event_type): keys for event_type, keys in SEED_EVENT_PAYLOAD_KEYS.items()
} | {
    AgentEventType.TOOL_CALL_FINISHED: SEED_EVENT_PAYLOAD_KEYS["tool_call_finished"]
    | {"outcome_check"}
}


_NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
_RECORD = AgentToolCall(
    "c1",
    "refund",
    '{"order":7}',
    ToolEffect.NON_IDEMPOTENT_WRITE,
    True,
    AgentToolCallStatus.WAITING_FOR_TIMER,
    "turn-1",
    0,
    wait_until=_NOW,
    wait_reason="build runs",
)
_QUESTION = AgentInterrupt(
    "c1-input-1",
    "c1",
    "refund",
    InterruptKind.QUESTION,
    deadline=_NOW,
    question="Ship it?",
    choices=("yes", "no"),
    allows_free_text=False,
)
_APPROVAL = AgentInterrupt("c1", "c1", "refund", InterruptKind.APPROVAL)

#: Each payload and the exact payload text the session wrote before payloads were typed.
WIRE_TEXT: list[tuple[AgentEventPayload, str]] = [
    (TurnStartedPayload(sequence=1), '{"sequence":1}'),
    (TurnCompletedPayload(message_count=4), '{"message_count":4}'),
    (TurnFailedPayload(error="model down"), '{"error":"model down"}'),
    (TurnSteeredPayload(2, 9), '{"message_count":9,"steered_message_count":2}'),
    (TurnCancelledPayload(message_count=3), '{"message_count":3}'),
    (TextDeltaPayload("Hé"), '{"text":"Hé"}'),
    (ReasoningDeltaPayload("think"), '{"text":"think"}'),
    (ToolCallStartedPayload("c1", "refund"), '{"tool_call_id":"c1","tool_name":"refund"}'),
    (
        ToolCallFinishedPayload("c1", "refund", AgentToolCallStatus.OUTCOME_UNKNOWN),
        '{"status":"outcome_unknown","tool_call_id":"c1","tool_name":"refund"}',
    ),
    (
        ToolCallFinishedPayload(
            "c1", "refund", AgentToolCallStatus.SUCCEEDED, ToolOutcomeCheckStatus.APPLIED
        ),
        '{"outcome_check":"applied","status":"succeeded","tool_call_id":"c1","tool_name":"refund"}',
    ),
    (
        ToolCallDeferredPayload.of(_RECORD),
        '{"effect":"non_idempotent_write","requires_approval":true,"tool_call_id":"c1",'
        '"tool_name":"refund"}',
    ),
    (
        InterruptRaisedPayload.of(_QUESTION, _RECORD),
        '{"allows_free_text":false,"choices":["yes","no"],"deadline":"2026-11-30T12:00:00+00:00",'
        '"interrupt_id":"c1-input-1","kind":"question","question":"Ship it?","tool_call_id":"c1",'
        '"tool_name":"refund"}',
    ),
    (
        InterruptRaisedPayload.of(_APPROVAL, _RECORD),
        '{"allows_free_text":true,"choices":[],"deadline":null,"interrupt_id":"c1",'
        '"kind":"approval","question":null,"tool_call_id":"c1","tool_name":"refund"}',
    ),
    (
        InterruptResolvedPayload("c1", False, None, InterruptKind.APPROVAL, False, None),
        '{"answered":false,"approved":false,"cancellation_reason":null,"interrupt_id":"c1",'
        '"kind":"approval","rejection_message":null}',
    ),
    (
        InterruptResolvedPayload(
            "c1", False, None, InterruptKind.QUESTION, False, CancellationReason.STEERED
        ),
        '{"answered":false,"approved":false,"cancellation_reason":"steered","interrupt_id":"c1",'
        '"kind":"question","rejection_message":null}',
    ),
    (
        TimerStartedPayload.of(_RECORD),
        '{"reason":"build runs","tool_call_id":"c1","wait_until":"2026-11-30T12:00:00+00:00"}',
    ),
    (
        PlanUpdatedPayload.of(AgentPlan(2, PlanStatus.DRAFT, (AgentTodo("Back up"),))),
        '{"revision":2,"status":"draft","task_count":1}',
    ),
    (PlanExecutionStartedPayload(revision=2), '{"revision":2}'),
    (
        ToolTaskStartedPayload("c1", "report", "job-7"),
        '{"task_id":"job-7","tool_call_id":"c1","tool_name":"report"}',
    ),
    (
        UsageRecordedPayload(
            AgentUsage(input_tokens=10, output_tokens=2),
            AgentUsage(input_tokens=30, output_tokens=5, model_calls=3),
        ),
        '{"recorded":{"cached_input_tokens":0,"input_tokens":10,"model_calls":1,'
        '"output_tokens":2,"reasoning_tokens":0},"session":{"cached_input_tokens":0,'
        '"input_tokens":30,"model_calls":3,"output_tokens":5,"reasoning_tokens":0}}',
    ),
    (CompactionStartedPayload(through_sequence=12), '{"through_sequence":12}'),
    (CompactionFinishedPayload(1, 12), '{"generation":1,"through_sequence":12}'),
]


def _payload_classes() -> list[type]:
    return [
        value
        for _, value in inspect.getmembers(events_module, inspect.isclass)
        if value.__module__ == events_module.__name__ and value.__name__.endswith("Payload")
    ]


def test_every_event_type_has_exactly_one_payload_class() -> None:
    by_type: dict[AgentEventType, list[str]] = {}
    for payload_class in _payload_classes():
        by_type.setdefault(payload_class.EVENT_TYPE, []).append(payload_class.__name__)
    assert set(by_type) == set(AgentEventType)
    assert all(len(names) == 1 for names in by_type.values()), by_type


@pytest.mark.parametrize("payload_class", _payload_classes(), ids=lambda cls: cls.__name__)
def test_payload_fields_are_the_documented_keys(payload_class: type) -> None:
    assert dataclasses.is_dataclass(payload_class)
    assert payload_class.__dataclass_params__.frozen  # type: ignore[attr-defined]
    fields = {field.name for field in dataclasses.fields(payload_class)}
    assert fields == SEED_EVENT_KEYS[payload_class.EVENT_TYPE]


def test_every_event_type_has_a_wire_sample() -> None:
    assert {payload.EVENT_TYPE for payload, _ in WIRE_TEXT} == set(AgentEventType)


@pytest.mark.parametrize(("payload", "text"), WIRE_TEXT, ids=lambda value: type(value).__name__)
def test_payload_writes_the_exact_wire_json(payload: AgentEventPayload, text: str) -> None:
    written = []
    writer = AgentEventWriter(
        written.append, turn_id="turn-1", step_execution_id="RunModel-1", attempt=2
    )
    write_event_payload(writer, payload)
    (event,) = written
    assert (event.type, event.turn_id, event.step_execution_id, event.attempt) == (
        payload.EVENT_TYPE.value,
        "turn-1",
        "RunModel-1",
        2,
    )
    assert event.payload == text

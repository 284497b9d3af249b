"""Wire values: JSON round trips, forward compatibility, clear errors, and the Dex SDK codec."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime

import pytest
from dex import CodecRegistry
from dex_agents import (
    AgentEvent,
    AgentInterrupt,
    AgentInterruptResolution,
    AgentMessage,
    AgentMessageChunk,
    AgentMessageIndex,
    AgentMessagesPage,
    AgentPlan,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentState,
    AgentStatus,
    AgentTodo,
    AgentToolCall,
    AgentToolCallStatus,
    AgentUsage,
    AgentUserMessage,
    AnswerQuestionRequest,
    CancellationReason,
    CancelTurnRequest,
    CompactContextInput,
    ConfigurationError,
    ContextSummary,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    FrameworkMessage,
    InteractionMode,
    InterruptKind,
    ListAgentMessagesRequest,
    MessageRole,
    PlanExecutionRequest,
    PlanStatus,
    QuestionAnswer,
    QuestionResolution,
    QueuedUserMessage,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    TodoStatus,
    ToolCallCancellation,
    ToolCallCompleted,
    ToolEffect,
    TurnCancellationRequest,
    TurnControlRequest,
    TurnReplySequence,
    TurnSessionSettings,
    UpdateSessionSettingsRequest,
    message_sequence_key,
)
from dex_agents._codec_registry import agent_wire_value_types
from dex_agents._json_values import (
    WireValue,
    WireValueError,
)
from dex_agents._session.message_layout import (
    AgentMessageChunkRange,
)
from dex_agents._session.recent_messages import RecentAgentMessages
from dex_agents._values import (
    TurnControlKind,
    agent_turn_id,
    empty_agent_usage,
    tool_input_interrupt_id,
)

_NOW = datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC)

_MESSAGE = AgentMessage(
    sequence=7,
    role=MessageRole.TOOL,
    framework_item='{"type":"function_call_output"}',
    text=None,
    tool_call_id="call_1",
    tool_name="search",
    tool_arguments='{"q":"x"}',
    tool_output="found é",
    turn_id="turn-2",
    created_at=_NOW,
)
_ANSWER = QuestionAnswer("call_1-input-1", "Ship?", QuestionResolution.ANSWERED, "yes")
_TOOL_CALL = AgentToolCall(
    tool_call_id="call_1",
    tool_name="ship",
    arguments='{"order":7}',
    effect=ToolEffect.NON_IDEMPOTENT_WRITE,
    requires_approval=True,
    status=AgentToolCallStatus.WAITING_FOR_TASK,
    turn_id="turn-2",
    deferral_order=1,
    output=None,
    error="boom",
    rejection_message="no",
    cancellation_reason=CancellationReason.TURN_CANCELLED,
    tool_source_reference='{"stepwise_tool_source":"mcp"}',
    trace_context="00-abc-def-01",
    question="Ship?",
    choices=("yes", "no"),
    allows_free_text=False,
    question_count=1,
    input_continuation="q-1",
    input_answers=(_ANSWER,),
    task_id="job-9",
    task_poll_interval_seconds=5,
    task_answer_pending=True,
    wait_until=_NOW,
    wait_reason="cool down",
    created_at=_NOW,
)
_INTERRUPT = AgentInterrupt(
    interrupt_id="call_1",
    tool_call_id="call_1",
    tool_name="ship",
    kind=InterruptKind.QUESTION,
    turn_id="turn-2",
    arguments="{}",
    deadline=_NOW,
    question="Ship?",
    choices=("yes", "no"),
    allows_free_text=False,
    created_at=_NOW,
)
_USAGE = AgentUsage(
    input_tokens=10, output_tokens=5, cached_input_tokens=2, reasoning_tokens=1, model_calls=3
)
_PLAN = AgentPlan(
    revision=2,
    status=PlanStatus.DRAFT,
    todos=(AgentTodo("a", TodoStatus.COMPLETED), AgentTodo("b")),
    updated_at=_NOW,
)
_SUMMARY = ContextSummary(1, 1, 40, "summary", _NOW)
_QUEUED = QueuedUserMessage("m-1", "later", plan_mode=True)

SAMPLES: dict[type[WireValue], WireValue] = {
    AgentEvent: AgentEvent("text_delta", "turn-1", "RunModel-1", 2, '{"text":"Hi"}'),
    AgentInterrupt: _INTERRUPT,
    AgentInterruptResolution: AgentInterruptResolution(
        "call_1", False, "too big", "answer", CancellationReason.STEERED
    ),
    AgentMessage: _MESSAGE,
    AgentMessageChunk: AgentMessageChunk((_MESSAGE,)),
    AgentMessageChunkRange: AgentMessageChunkRange(7, 7),
    AgentMessageIndex: AgentMessageIndex(
        (AgentMessageChunkRange(1, 6), AgentMessageChunkRange(7, 7)), 8, 1
    ),
    AgentMessagesPage: AgentMessagesPage((_MESSAGE,), 7, 3),
    AgentPlan: _PLAN,
    AgentSessionStartInput: AgentSessionStartInput(
        "Hello", {"model": "gpt-5", "nested": {"list": [1, 2.5, None, True]}}, plan_mode=True
    ),
    AgentSnapshot: AgentSnapshot(
        state=AgentState(
            AgentStatus.RUNNING_TOOLS, InteractionMode.PLANNING, "turn-2", 2, 9, "err", False
        ),
        messages=(_MESSAGE,),
        pending_interrupts=(_INTERRUPT,),
        tool_calls=(_TOOL_CALL,),
        usage=_USAGE,
        queued_message_count=1,
        plan=_PLAN,
        queued_messages=(_QUEUED,),
        steered_messages=(_QUEUED,),
        session_settings={"model": "m"},
        context_summary=_SUMMARY,
        deleted_before_sequence=4,
    ),
    AgentState: AgentState(
        AgentStatus.COMPACTING_CONTEXT, InteractionMode.EXECUTING, "turn-3", 3, 12, None, True
    ),
    AgentTodo: AgentTodo("write tests", TodoStatus.IN_PROGRESS),
    AgentToolCall: _TOOL_CALL,
    AgentUsage: _USAGE,
    AgentUserMessage: AgentUserMessage("Hi there", plan_mode=True),
    AnswerQuestionRequest: AnswerQuestionRequest("call_1", "yes"),
    CancelTurnRequest: CancelTurnRequest("turn-2"),
    ContextSummary: _SUMMARY,
    CompactContextInput: CompactContextInput(through_sequence=40),
    DeleteQueuedMessageRequest: DeleteQueuedMessageRequest("m-1"),
    ExecutePlanRequest: ExecutePlanRequest(2),
    FrameworkMessage: FrameworkMessage(
        MessageRole.ASSISTANT, '{"role":"assistant"}', "hi", "c", "t", "{}", "out"
    ),
    ListAgentMessagesRequest: ListAgentMessagesRequest(after_sequence=3, limit=20),
    PlanExecutionRequest: PlanExecutionRequest(4),
    QuestionAnswer: _ANSWER,
    QueuedUserMessage: _QUEUED,
    RecentAgentMessages: RecentAgentMessages(AgentMessagesPage((_MESSAGE,), 7, 3)),
    ResolveInterruptRequest: ResolveInterruptRequest("call_1", False, "not now"),
    SteerUserMessageRequest: SteerUserMessageRequest(text="instead", message_id=None),
    ToolCallCancellation: ToolCallCancellation("call_1", CancellationReason.STEERED),
    ToolCallCompleted: ToolCallCompleted("call_1"),
    TurnCancellationRequest: TurnCancellationRequest("turn-2", _NOW),
    TurnControlRequest: TurnControlRequest(TurnControlKind.CANCEL, "turn-2"),
    TurnReplySequence: TurnReplySequence("turn-2", 8),
    TurnSessionSettings: TurnSessionSettings("turn-2", {"model": "m", "limits": {"depth": 2}}),
    UpdateSessionSettingsRequest: UpdateSessionSettingsRequest({"model": "m"}),
}


def test_every_wire_value_has_a_sample() -> None:
    # Every wire value the core defines, public or private: each one is stored or sent.
    assert set(agent_wire_value_types()) == set(SAMPLES)


@pytest.mark.parametrize("value", list(SAMPLES.values()), ids=lambda value: type(value).__name__)
def test_json_round_trip(value: WireValue) -> None:
    data = value.to_json()
    # The wire form is plain JSON: it survives a trip through JSON text unchanged.
    assert json.loads(json.dumps(data)) == data
    assert type(value).from_json(data) == value
    assert type(value).from_json_text(value.to_json_text()) == value


@pytest.mark.parametrize("value", list(SAMPLES.values()), ids=lambda value: type(value).__name__)
def test_dex_sdk_default_codec_round_trip(value: WireValue) -> None:
    codec = CodecRegistry().resolve(type(value))
    assert codec.decode(codec.encode(value)) == value


@pytest.mark.parametrize("value", list(SAMPLES.values()), ids=lambda value: type(value).__name__)
def test_unknown_fields_are_ignored(value: WireValue) -> None:
    data = {**value.to_json(), "field_from_a_later_release": {"x": 1}}
    assert type(value).from_json(data) == value


@pytest.mark.parametrize("value", list(SAMPLES.values()), ids=lambda value: type(value).__name__)
def test_missing_required_field_names_value_and_field(value: WireValue) -> None:
    required = [
        definition.name
        for definition in fields(type(value))  # type: ignore[arg-type]
        if definition.default is definition.default_factory  # both MISSING
    ]
    for name in required:
        data = value.to_json()
        del data[name]
        with pytest.raises(
            WireValueError, match=f"{type(value).__name__} is missing required field '{name}'"
        ):
            type(value).from_json(data)


def test_enums_travel_as_plain_strings() -> None:
    data = _TOOL_CALL.to_json()
    assert data["effect"] == "non_idempotent_write"
    assert data["status"] == "waiting_for_task"
    assert data["cancellation_reason"] == "turn_cancelled"
    assert type(data["status"]) is str
    assert data["choices"] == ["yes", "no"]
    assert data["wait_until"] == "2026-11-30T01:02:03.456789+00:00"
    assert data["input_answers"] == [
        {
            "interrupt_id": "call_1-input-1",
            "question": "Ship?",
            "resolution": "answered",
            "answer": "yes",
        }
    ]


def test_older_value_without_optional_fields_reads_with_defaults() -> None:
    stored = {
        "tool_call_id": "c",
        "tool_name": "t",
        "arguments": "{}",
        "effect": "read",
        "requires_approval": False,
        "status": "succeeded",
        "turn_id": "turn-1",
        "deferral_order": 0,
        "output": "ok",
    }
    record = AgentToolCall.from_json(stored)
    assert record.output == "ok"
    assert record.input_answers == ()
    assert record.allows_free_text is True
    assert record.is_final


def test_snapshot_before_start_has_no_state() -> None:
    snapshot = AgentSnapshot.from_json({})
    assert snapshot.state is None
    assert snapshot.messages == ()
    assert snapshot.usage == empty_agent_usage()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"status": "sleeping"}, r"AgentState.status must be one of 'waiting_for_user_message'"),
        ({"turn_count": "3"}, r"AgentState.turn_count must be an integer, got str"),
        ({"turn_count": True}, r"AgentState.turn_count must be an integer, got bool"),
        ({"accepts_turn_control": 1}, r"AgentState.accepts_turn_control must be a boolean"),
        ({"active_turn_id": 5}, r"AgentState.active_turn_id must be a string"),
    ],
)
def test_wrong_field_type_is_a_clear_error(data: dict[str, object], message: str) -> None:
    with pytest.raises(WireValueError, match=message):
        AgentState.from_json(data)


def test_nested_errors_name_the_path() -> None:
    data = SAMPLES[AgentSnapshot].to_json()
    data["tool_calls"][0]["status"] = "lost"  # type: ignore[index,call-overload]
    with pytest.raises(
        WireValueError, match=r"AgentSnapshot.tool_calls\[0\]: AgentToolCall.status"
    ):
        AgentSnapshot.from_json(data)


def test_not_an_object_and_malformed_text_are_clear_errors() -> None:
    with pytest.raises(WireValueError, match="AgentState requires a JSON object, got list"):
        AgentState.from_json([])  # type: ignore[arg-type]
    with pytest.raises(WireValueError, match="AgentState JSON text is malformed"):
        AgentState.from_json_text("{not json")
    with pytest.raises(WireValueError, match="ISO 8601"):
        ContextSummary.from_json(
            {
                "generation": 1,
                "first_sequence": 1,
                "last_sequence": 2,
                "text": "t",
                "created_at": "yesterday",
            }
        )


def test_construction_converts_plain_json_fields() -> None:
    # The Dex SDK's automatic codec hands plain JSON to the constructor for `X | None` fields.
    snapshot = AgentSnapshot(
        state={"status": "running_model", "turn_count": 1},  # type: ignore[arg-type]
        messages=[_MESSAGE.to_json()],  # type: ignore[arg-type]
    )
    assert snapshot.state == AgentState(status=AgentStatus.RUNNING_MODEL, turn_count=1)
    assert snapshot.messages == (_MESSAGE,)
    record = AgentToolCall.from_json({**_TOOL_CALL.to_json(), "wait_until": None})
    assert record.wait_until is None
    rebuilt = AgentToolCall(**{**_TOOL_CALL.__dict__, "wait_until": "2026-11-30T01:02:03+00:00"})
    assert rebuilt.wait_until == datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)


def test_construction_rejects_wrong_types() -> None:
    with pytest.raises(WireValueError, match=r"ToolCallCompleted\.tool_call_id must be a string"):
        ToolCallCompleted(7)  # type: ignore[arg-type]
    with pytest.raises(
        WireValueError, match=r"AgentUserMessage\.text must be a string, got NoneType"
    ):
        AgentUserMessage(None)  # type: ignore[arg-type]


def test_usage_adds_every_count() -> None:
    total = empty_agent_usage() + _USAGE + AgentUsage(input_tokens=1, output_tokens=1)
    assert total == AgentUsage(
        input_tokens=11, output_tokens=6, cached_input_tokens=2, reasoning_tokens=1, model_calls=4
    )
    assert total.total_tokens == 17
    assert AgentUsage().model_calls == 1
    with pytest.raises(ConfigurationError, match=r"AgentUsage\.output_tokens must not be negative"):
        AgentUsage(output_tokens=-1)


def test_tool_call_status_finality() -> None:
    final = {status.value for status in AgentToolCallStatus if status.is_final}
    assert final == {"rejected", "succeeded", "failed", "outcome_unknown"}
    waiting = {status.value for status in AgentToolCallStatus if not status.is_final}
    assert waiting == {
        "awaiting_approval",
        "approved",
        "awaiting_answer",
        "waiting_for_timer",
        "waiting_for_task",
    }


def test_state_and_mode_wire_values() -> None:
    assert [status.value for status in AgentStatus] == [
        "waiting_for_user_message",
        "running_model",
        "running_tools",
        "compacting_context",
    ]
    assert [mode.value for mode in InteractionMode] == ["chat", "planning", "executing"]
    assert AgentState() == AgentState.from_json({})
    assert AgentState().status is AgentStatus.WAITING_FOR_USER_MESSAGE


def test_message_sequence_key() -> None:
    assert message_sequence_key(1) == "000000000001"
    assert message_sequence_key(999_999_999_999) == "999999999999"
    keys = [message_sequence_key(n) for n in (2, 10, 100, 9)]
    assert sorted(keys) == [message_sequence_key(n) for n in (2, 9, 10, 100)]
    for bad in (-1, 10**12, True, 1.0):
        with pytest.raises(ConfigurationError):
            message_sequence_key(bad)  # type: ignore[arg-type]


def test_id_helpers() -> None:
    assert agent_turn_id(1) == "turn-1"
    assert tool_input_interrupt_id("call_1", 2) == "call_1-input-2"
    with pytest.raises(ConfigurationError):
        agent_turn_id(0)
    with pytest.raises(ConfigurationError):
        tool_input_interrupt_id("call_1", 0)


def test_framework_message_round_trips_through_agent_message() -> None:
    message = SAMPLES[FrameworkMessage]
    assert isinstance(message, FrameworkMessage)
    stored = AgentMessage.from_framework_message(
        message, sequence=3, turn_id="turn-1", created_at=_NOW
    )
    assert stored.sequence == 3
    assert stored.to_framework_message() == message

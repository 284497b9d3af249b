"""The session's persistence schema, Step options, and the SDK codec of every stored value."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from agent_session_test_support import NeverRunRunner
from dex import CodecRegistry, Registry, StepDurability
from dex_agents import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGES,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    AgentInterrupt,
    AgentMessage,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSessionStepType,
    AgentSnapshot,
    AgentState,
    AgentToolCall,
    AgentToolCallStatus,
    ConfigurationError,
    ConfigurationTypeError,
    InterruptKind,
    MessageRole,
    RunModelLimit,
    ToolEffect,
)
from dex_agents._session.persistence import (
    agent_event_stream,
    agent_session_persistence_schema,
)
from dex_agents._session.step_options import (
    run_model_step_options,
    tool_call_record_step_options,
    tool_call_step_options,
)
from dex_agents._session.tool_steps import RecordToolFailure
from dex_agents._session.turn_steps import RecordTurnFailure

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_schema_registers_every_persistence_name() -> None:
    schema = agent_session_persistence_schema(agent_event_stream(1024))
    names = {d.name for d in (*schema.attributes, *schema.channels, *schema.streams)}
    assert names == {
        "AGENT_STATE", "AGENT_MESSAGES", "AGENT_MESSAGE_CHUNKS", "AGENT_MESSAGE_INDEX",
        "TURN_REPLY_SEQUENCE", "FRAMEWORK_RUN_STATE", "AGENT_TOOL_CALLS", "PENDING_INTERRUPTS",
        "AGENT_TOOL_ATTEMPT_CLAIMS",
        "AGENT_USAGE", "QUEUED_USER_MESSAGES", "INTERRUPT_RESOLUTIONS", "TOOL_CALL_RESULTS",
        "STEERED_USER_MESSAGES", "TURN_CONTROL_REQUESTS", "TURN_CANCELLATION_REQUEST",
        "TOOL_CALL_CANCELLATIONS", "AGENT_TRACE_CONTEXT", "AGENT_PLAN", "PLAN_EXECUTIONS",
        "PENDING_PLAN_EXECUTION", "CONTEXT_SUMMARY", "SESSION_SETTINGS", "TURN_SESSION_SETTINGS",
        "flow.agent_events",
    }  # fmt: skip


def test_two_flow_types_register_side_by_side_with_their_own_streams() -> None:
    first = AgentSessionFlow(NeverRunRunner(), flow_type="A")
    second = AgentSessionFlow(NeverRunRunner(), flow_type="B")
    registry = Registry([first, second], allow_async_handlers=True)
    assert first.agent_events is not second.agent_events
    steps = set(registry._registered_flows["A"].steps)
    assert {str(s) for s in AgentSessionStepType} >= steps
    assert "RunModel" in steps and "CallSingleAttemptTool" in steps


def test_flow_refuses_bad_arguments() -> None:
    with pytest.raises(ConfigurationTypeError, match="has no build_user_message method"):
        AgentSessionFlow(object(), flow_type="A")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="flow_type"):
        AgentSessionFlow(NeverRunRunner(), flow_type=" ")
    with pytest.raises(ConfigurationError, match="interrupt_deadline"):
        AgentSessionOptions(interrupt_deadline=timedelta(0))


@pytest.mark.parametrize(
    "value",
    [
        AgentState(active_turn_id="turn-2", turn_count=2, last_turn_error="boom"),
        AgentMessage(1, MessageRole.USER, "{}", text="hi", turn_id="turn-1", created_at=NOW),
        AgentToolCall(
            "c1", "refund", "{}", ToolEffect.UNCLASSIFIED, True,
            AgentToolCallStatus.AWAITING_APPROVAL, "turn-1", 0, created_at=NOW,
        ),
        AgentSnapshot(
            state=AgentState(),
            pending_interrupts=(
                AgentInterrupt("c1", "c1", "refund", InterruptKind.APPROVAL, deadline=NOW),
            ),
        ),
    ],
)  # fmt: skip
def test_values_round_trip_through_the_sdk_default_codec(value: object) -> None:
    codec = CodecRegistry().resolve(type(value))
    assert codec.decode(codec.encode(value)) == value


def test_interrupt_lists_round_trip_through_the_sdk_default_codec() -> None:
    codec = CodecRegistry().resolve(PENDING_INTERRUPTS.value_type)
    interrupts = [AgentInterrupt("c1", "c1", "refund", InterruptKind.APPROVAL, deadline=NOW)]
    assert codec.decode(codec.encode(interrupts)) == interrupts


def test_step_options_are_sync_and_load_only_what_the_step_needs() -> None:
    run_model = run_model_step_options(RunModelLimit(), RecordTurnFailure)
    assert run_model.execute_durability is StepDurability.SYNC
    assert run_model.wait_for_durability is StepDurability.SYNC
    assert run_model.execute_method_timeout == timedelta(minutes=15)
    assert run_model.heartbeat_timeout == timedelta(minutes=2)
    assert run_model.execute_retry is not None
    assert run_model.execute_retry.maximum_attempts == 3
    assert run_model.execute_retry.total_duration == timedelta(minutes=30)
    assert run_model._execute_failure_target is RecordTurnFailure
    assert run_model.execute_load_attribute_maps == (
        AGENT_MESSAGES,
        AGENT_MESSAGE_CHUNKS,
        AGENT_TOOL_CALLS,
    )

    tool = tool_call_step_options(
        "c1",
        limit=AgentSessionOptions().tool_call_limit,
        maximum_attempts=3,
        failure_route=RecordToolFailure,
    )
    assert tool.execute_durability is StepDurability.SYNC
    assert tool.execute_load_attribute_maps == ()
    assert [load.instance for load in tool.execute_load_attribute_map_instances] == ["c1"]
    assert tool._execute_failure_target is RecordToolFailure
    route = tool._execute_failure_options
    assert route is not None
    assert [load.instance for load in route.execute_load_attribute_map_instances] == ["c1"]
    approval = tool_call_record_step_options("c1", locks_interrupts=True)
    assert approval.execute_lock_attributes == (PENDING_INTERRUPTS.lock(),)
    assert [load.instance for load in approval.wait_for_load_attribute_map_instances] == ["c1"]

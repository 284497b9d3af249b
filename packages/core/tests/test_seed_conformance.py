"""The public surface the dex-agents 0.3.0 documentation gives, checked name by name.

A client written from the documentation alone imports these names from these modules, calls
these signatures with these keyword arguments, and relies on these constant values, texts, enum
values, Step types, persistence names, and RPC names. Each test fails when one of them drifts.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import typing
from collections.abc import Callable
from datetime import timedelta
from types import ModuleType
from typing import Any

import dex
import dex_agents
import dex_agents.stepwise
import dex_agents.testing
import pytest
from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentToolCall,
    AgentToolCallStatus,
    BuiltInTool,
    CompactionPolicy,
    ConfigurationError,
    ConfigurationTypeError,
    ToolEffect,
    ToolPolicy,
)
from dex_agents._built_in_tools import ask_user_result, durable_wait_result
from dex_agents._plans import plan_execution_message, write_todos_result
from dex_agents._runner_contract import tool_call_not_run_error
from dex_agents._session.persistence import AGENT_EVENTS_STREAM_NAME
from dex_agents._session.settings import invalid_start_session_settings_reason
from dex_agents._values import agent_turn_id, tool_input_interrupt_id
from dex_agents.stepwise import (
    AgentDefinition,
    ScriptedModelClient,
    ScriptedModelReply,
    function_tool,
)
from dex_agents.testing import (
    AgentTestStack,
    FileGate,
    InvocationLog,
    read_step_history,
    wait_for_agent_snapshot,
    wait_until,
)
from seed_documentation import SEED_ENUM_VALUES

#: Every name the documentation's text and snippets import, by the module they import it from.
SEED_NAMES: dict[str, tuple[str, ...]] = {
    "dex_agents": (
        # Running an agent, the runner contract, tool tasks.
        "AgentSessionClient",
        "AgentSessionFlow",
        "AgentSessionOptions",
        "ToolEffect",
        "ToolPolicy",
        "ResolvedToolPolicy",
        "is_approval_required",
        "tool_effect_from_mcp_tool_annotations",
        "McpToolAnnotations",
        "AgentFrameworkRunner",
        "UnfinishedTurnMessageBuilder",
        "PlanModeRunner",
        "ContextCompactionRunner",
        "ToolTaskPoller",
        "ToolTaskCanceller",
        "AgentTurnContext",
        "AgentTurnOutcome",
        "TurnCompleted",
        "ToolCallsRequested",
        "DeferredToolCall",
        "DeferredToolExecution",
        "DeferredToolOutcome",
        "ToolExecutionResult",
        "ToolInputRequested",
        "ToolTaskStarted",
        "ToolTaskPending",
        "ToolTaskPoll",
        "ToolTaskPollOutcome",
        "ToolTaskCancellation",
        "ToolExecutionError",
        "ModelCallMetadata",
        "FrameworkMessage",
        "MessageRole",
        "AgentMessage",
        "AgentToolCall",
        "AgentToolCallStatus",
        "QuestionAnswer",
        "QuestionResolution",
        "describe_tool_call_outcome",
        "build_turn_failure_note",
        "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
        "MISSING_TOOL_TASK_POLLER",
        "AgentEventWriter",
        "AgentEventType",
        "AgentEvent",
        # Built-in tools and plans.
        "BuiltInTool",
        "BUILT_IN_TOOL_DEFINITIONS",
        "PlanStatus",
        "AgentPlan",
        "ExecutePlanRequest",
        "PlanExecutionRequest",
        "build_plan_note",
        "plan_execution_key",
        # Session values and RPC requests.
        "AgentState",
        "AgentStatus",
        "InteractionMode",
        "AgentSnapshot",
        "AgentMessagesPage",
        "AgentUsage",
        "AgentInterrupt",
        "AgentInterruptResolution",
        "AgentUserMessage",
        "AgentSessionStartInput",
        "SteerUserMessageRequest",
        "DeleteQueuedMessageRequest",
        "CancelTurnRequest",
        "ResolveInterruptRequest",
        "AnswerQuestionRequest",
        "ListAgentMessagesRequest",
        "message_sequence_key",
        # Storage, compaction, settings, search, spend limits, tracing options.
        "AgentMessageIndex",
        "AgentMessageChunk",
        "CompactionPolicy",
        "ContextSummary",
        "ContextSummaryRequest",
        "ContextSummaryResult",
        "CONTEXT_SUMMARY_NOTE_HEADER",
        "CONTEXT_SUMMARY_INSTRUCTIONS",
        "CONTEXT_SUMMARY_TRANSCRIPT_HEADER",
        "build_context_summary_omission_note",
        "build_context_summary_prompt",
        "estimate_stored_input_tokens",
        "estimate_text_tokens",
        "select_turn_boundary_cutoff",
        "MAX_SESSION_SETTINGS_BYTES",
        "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
        "INVALID_START_SESSION_SETTINGS_REASON",
        "validate_session_settings",
        "session_settings_size",
        "AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE",
        "ModelSpendLimit",
        "AgentTracingOptions",
        "GenAISemanticConventionsVersion",
    ),
    "dex_agents.stepwise": (
        "AgentDefinition",
        "ToolCallContext",
        "function_tool",
        "stepwise_agent_session_flow",
        "stepwise_agent_session_options",
        "InstructionContext",
        "ModelClient",
        "ModelRequest",
        "ModelResponse",
        "ModelOutputItem",
        "ModelOutputWriter",
        "ScriptedModelClient",
        "ScriptedModelReply",
        "ScriptedToolCall",
        "StepwiseAgentRunner",
        "ToolSource",
    ),
    "dex_agents.testing": (
        "AgentTestStack",
        "EXECUTE_COMPLETED_EVENT",
        "FileGate",
        "InvocationLog",
        "StepHistoryEntry",
        "ScriptedModelClient",
        "ContextWindowSessionScenario",
        "read_step_history",
        "run_agent_worker",
        "wait_for_agent_snapshot",
        "wait_until",
    ),
}


@pytest.mark.parametrize(
    ("module_name", "name"),
    [(module, name) for module, names in SEED_NAMES.items() for name in names],
)
def test_documented_name_is_exported(module_name: str, name: str) -> None:
    module: ModuleType = importlib.import_module(module_name)
    assert name in module.__all__, f"{module_name}.__all__ lacks {name}"
    assert getattr(module, name) is not None


def test_testing_exports_the_stepwise_scripted_model_client() -> None:
    assert dex_agents.testing.ScriptedModelClient is dex_agents.stepwise.ScriptedModelClient


# --- Signatures -----------------------------------------------------------------------------------

_REQUIRED = inspect.Parameter.empty
#: A documented optional parameter whose default the documentation does not give.
_OPTIONAL = object()


def _parameters(target: Callable[..., Any]) -> dict[str, Any]:
    """Parameter name -> default (``_REQUIRED`` when it has none), without ``self``."""
    signature = inspect.signature(target)
    return {
        name: parameter.default
        for name, parameter in signature.parameters.items()
        if name != "self"
    }


def _keyword_names(target: Callable[..., Any]) -> list[str]:
    """Names a caller may pass by keyword, in order."""
    return [
        name
        for name, parameter in inspect.signature(target).parameters.items()
        if name != "self" and parameter.kind is not inspect.Parameter.POSITIONAL_ONLY
    ]


#: (callable, leading positional parameters in order, {keyword: documented default}).
SEED_SIGNATURES: list[tuple[str, Callable[..., Any], tuple[str, ...], dict[str, Any]]] = [
    ("AgentSessionFlow", AgentSessionFlow, ("runner",), {"flow_type": _REQUIRED, "options": None}),
    (
        "AgentSessionOptions",
        AgentSessionOptions,
        (),
        {
            "tool_policies": dataclasses.MISSING,
            "default_tool_effect": ToolEffect.UNCLASSIFIED,
            "event_stream_capacity_bytes": 10 * 1024 * 1024,
            "interrupt_deadline": None,
            "run_model_limit": dataclasses.MISSING,
            "built_in_tools": frozenset(),
            "max_durable_wait": timedelta(days=365),
            "plan_mode_enabled": False,
            "message_window_size": 64,
            "message_chunk_size": 32,
            "message_chunk_max_bytes": 1024 * 1024,
            "retained_message_limit": 1_000,
            "compaction": None,
            "model_spend_limit": None,
            "tracing": dataclasses.MISSING,
        },
    ),
    ("AgentSessionClient", AgentSessionClient, ("client", "flow"), {}),
    (
        "AgentSessionClient.start_session",
        AgentSessionClient.start_session,
        ("session_id", "initial_message"),
        {
            "session_settings": None,
            "active_step_search_mode": dex.ActiveStepSearchMode.WITH_WAIT_FOR,
        },
    ),
    (
        "AgentSessionClient.send_user_message",
        AgentSessionClient.send_user_message,
        ("session_id", "text"),
        {"plan_mode": False},
    ),
    (
        "AgentSessionClient.steer_user_message",
        AgentSessionClient.steer_user_message,
        ("session_id",),
        {"text": None, "message_id": None},
    ),
    (
        "AgentSessionClient.delete_queued_message",
        AgentSessionClient.delete_queued_message,
        ("session_id", "message_id"),
        {},
    ),
    (
        "AgentSessionClient.cancel_turn",
        AgentSessionClient.cancel_turn,
        ("session_id", "turn_id"),
        {},
    ),
    (
        "AgentSessionClient.execute_plan",
        AgentSessionClient.execute_plan,
        ("session_id", "revision"),
        {},
    ),
    (
        "AgentSessionClient.resolve_interrupt",
        AgentSessionClient.resolve_interrupt,
        ("session_id", "interrupt_id"),
        {"approved": _REQUIRED, "rejection_message": None},
    ),
    (
        "AgentSessionClient.answer_question",
        AgentSessionClient.answer_question,
        ("session_id", "interrupt_id", "answer"),
        {},
    ),
    (
        "AgentSessionClient.update_session_settings",
        AgentSessionClient.update_session_settings,
        ("session_id", "session_settings"),
        {},
    ),
    (
        "AgentSessionClient.get_agent_snapshot",
        AgentSessionClient.get_agent_snapshot,
        ("session_id",),
        {},
    ),
    (
        "AgentSessionClient.list_agent_messages",
        AgentSessionClient.list_agent_messages,
        ("session_id",),
        {"after_sequence": None, "limit": 50},
    ),
    (
        "AgentDefinition",
        AgentDefinition,
        ("name", "instructions", "model"),
        {
            "model_settings": dataclasses.MISSING,
            "tools": (),
            "tool_sources": (),
            "tool_policies": dataclasses.MISSING,
            "default_tool_effect": ToolEffect.UNCLASSIFIED,
            "built_in_tools": frozenset(),
            "max_model_calls_per_turn": 100,
            "interrupt_deadline": None,
            "event_stream_capacity_bytes": 10 * 1024 * 1024,
            "plan_mode_enabled": False,
            "planning_tool_choice": "auto",
            "resolve_model": None,
            "compaction": None,
            "max_output_tokens": None,
            "tool_source_listing_timeout": timedelta(seconds=10),
        },
    ),
    (
        "function_tool",
        function_tool,
        (),
        {
            "effect": _REQUIRED,
            "requires_approval": None,
            "name": None,
            "description": None,
            "parameters_schema": None,
        },
    ),
    (
        "ScriptedModelClient",
        ScriptedModelClient,
        ("respond",),
        {"max_recorded_requests": 100},
    ),
    (
        "ScriptedModelReply",
        ScriptedModelReply,
        (),
        {"text": None, "tool_calls": (), "reasoning": None},
    ),
    ("ToolPolicy", ToolPolicy, ("effect",), {"requires_approval": None}),
    (
        "CompactionPolicy",
        CompactionPolicy,
        ("context_window_tokens",),
        {"trigger_ratio": 0.85, "keep_ratio": 0.3, "reserved_input_tokens": 0},
    ),
    (
        "AgentTestStack",
        AgentTestStack,
        ("tmp_path", "flows", "worker_module"),
        {"worker_cwd": None, "worker_env": None, "server_zd_config": None},
    ),
    (
        "estimate_stored_input_tokens",
        dex_agents.estimate_stored_input_tokens,
        ("turn",),
        {"fixed_input_tokens": _OPTIONAL},
    ),
    (
        "select_turn_boundary_cutoff",
        dex_agents.select_turn_boundary_cutoff,
        ("turn", "retained_token_budget"),
        {},
    ),
    ("build_plan_note", dex_agents.build_plan_note, ("plan", "interaction_mode"), {}),
    ("FileGate", FileGate, ("state_dir", "name"), {}),
    ("InvocationLog", InvocationLog, ("path",), {}),
    ("read_step_history", read_step_history, ("server_address", "flow_id"), {}),
    ("wait_until", wait_until, ("description", "probe"), {}),
    (
        "wait_for_agent_snapshot",
        wait_for_agent_snapshot,
        ("sessions", "session_id", "probe"),
        {"description": _OPTIONAL},
    ),
]


def _default_matches(actual: Any, documented: Any) -> bool:
    if documented is dataclasses.MISSING:
        return True  # documented as present, with a factory default
    if documented is _OPTIONAL:
        return actual is not _REQUIRED
    if documented is _REQUIRED:
        return actual is _REQUIRED
    return bool(actual == documented) and type(actual) is type(documented)


@pytest.mark.parametrize(
    ("label", "target", "positional", "keywords"),
    SEED_SIGNATURES,
    ids=[entry[0] for entry in SEED_SIGNATURES],
)
def test_documented_signature(
    label: str,
    target: Callable[..., Any],
    positional: tuple[str, ...],
    keywords: dict[str, Any],
) -> None:
    parameters = _parameters(target)
    assert tuple(_keyword_names(target)[: len(positional)]) == positional, label
    for name in positional:
        kind = inspect.signature(target).parameters[name].kind
        assert kind is not inspect.Parameter.KEYWORD_ONLY, f"{label}: {name} is keyword-only"
    for name, documented in keywords.items():
        assert name in parameters, f"{label} has no parameter {name}"
        assert _default_matches(parameters[name], documented), (
            f"{label}({name}=...) defaults to {parameters[name]!r}, documented {documented!r}"
        )


def test_documented_async_entry_points_are_coroutines() -> None:
    for method in (
        "start_session",
        "send_user_message",
        "steer_user_message",
        "delete_queued_message",
        "cancel_turn",
        "execute_plan",
        "resolve_interrupt",
        "answer_question",
        "update_session_settings",
        "get_agent_snapshot",
        "list_agent_messages",
    ):
        assert inspect.iscoroutinefunction(getattr(AgentSessionClient, method)), method
    for target in (
        AgentTestStack.start_worker,
        AgentTestStack.read_step_history,
        FileGate.wait_for_release,
        FileGate.wait_until_reached,
        read_step_history,
        wait_until,
        wait_for_agent_snapshot,
    ):
        assert inspect.iscoroutinefunction(target), target.__qualname__


# --- Values and records ----------------------------------------------------------------------------

#: Field names of the documented records, as the documentation names them.
SEED_FIELDS: dict[str, tuple[str, ...]] = {
    "AgentState": (
        "status",
        "interaction_mode",
        "active_turn_id",
        "turn_count",
        "last_turn_error",
        "accepts_turn_control",
    ),
    "AgentSnapshot": (
        "state",
        "messages",
        "pending_interrupts",
        "tool_calls",
        "usage",
        "queued_message_count",
        "plan",
        "queued_messages",
        "steered_messages",
        "session_settings",
    ),
    "AgentMessagesPage": ("messages", "deleted_before_sequence"),
    "AgentMessageIndex": ("chunks", "window_first_sequence", "first_sequence"),
    "ContextSummary": ("generation", "first_sequence", "last_sequence", "text", "created_at"),
    "AgentToolCall": (
        "tool_call_id",
        "tool_name",
        "arguments",
        "status",
        "deferral_order",
        "output",
        "error",
        "rejection_message",
        "cancellation_reason",
        "tool_source_reference",
        "trace_context",
        "input_continuation",
        "input_answers",
        "task_id",
        "task_poll_interval_seconds",
        "task_answer_pending",
        "wait_until",
    ),
    "AgentUsage": (
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "reasoning_tokens",
        "model_calls",
    ),
    "AgentSessionStartInput": ("initial_message", "session_settings"),
    "ExecutePlanRequest": ("revision",),
    "QuestionAnswer": ("resolution", "answer"),
    "TurnCompleted": ("new_messages", "usage", "model_call_metadata"),
    "ToolCallsRequested": (
        "framework_run_state",
        "tool_calls",
        "usage",
        "new_messages",
        "model_call_metadata",
    ),
    "DeferredToolCall": (
        "tool_call_id",
        "tool_name",
        "arguments",
        "policy",
        "tool_source_reference",
    ),
    "ModelCallMetadata": (
        "request_model",
        "response_model",
        "provider_name",
        "response_id",
        "finish_reasons",
    ),
    "FrameworkMessage": ("role", "framework_item", "text"),
    "ToolInputRequested": ("question", "choices", "allows_free_text", "continuation"),
    "ToolTaskStarted": ("task_id", "poll_interval_seconds"),
    "ToolTaskPending": ("poll_interval_seconds", "continuation"),
    "ToolTaskPoll": ("tool_call", "pending_answer", "input_answers", "attempt", "flow_id"),
    "ToolTaskCancellation": ("tool_call", "flow_id", "attempt"),
    "DeferredToolExecution": (
        "flow_id",
        "tool_call",
        "attempt",
        "events",
        "input_answers",
        "supports_tool_tasks",
        "heartbeat_checkpoint",
    ),
    "AgentTracingOptions": (
        "is_enabled",
        "tracer_provider",
        "agent_name",
        "should_capture_message_content",
        "semantic_conventions_version",
    ),
}


@pytest.mark.parametrize("record", sorted(SEED_FIELDS))
def test_documented_record_fields(record: str) -> None:
    fields = {field.name for field in dataclasses.fields(getattr(dex_agents, record))}
    missing = [name for name in SEED_FIELDS[record] if name not in fields]
    assert missing == [], f"{record} lacks {missing}"


def test_documented_record_members() -> None:
    # Members the documentation calls on the runner contract's records.
    expected = {
        dex_agents.AgentTurnContext: (
            "is_resuming",
            "resolve_tool_policy",
            "recorded_tool_call",
            "heartbeat",
            "enabled_built_in_tools",
            "interaction_mode",
            "session_settings",
            "context_summary",
            "tool_calls",
            "framework_run_state",
        ),
        dex_agents.DeferredToolExecution: (
            "idempotency_key",
            "heartbeat",
            "save_heartbeat_checkpoint",
        ),
        dex_agents.ToolTaskPoll: ("idempotency_key", "heartbeat"),
        dex_agents.ToolTaskCancellation: ("idempotency_key", "heartbeat"),
        dex_agents.AgentEventWriter: (
            "turn_id",
            "attempt",
            "write_event",
            "write_text_delta",
            "write_reasoning_delta",
            "write_tool_call_started",
            "write_tool_call_finished",
        ),
        dex_agents.stepwise.ToolCallContext: (
            "idempotency_key",
            "attempt",
            "flow_id",
            "turn_id",
            "tool_call_id",
            "events",
            "heartbeat",
            "input_answers",
        ),
        dex_agents.stepwise.ScriptedModelClient: ("user_texts", "tool_results", "requests"),
        dex_agents.testing.AgentTestStack: (
            "sessions",
            "start_worker",
            "read_step_history",
            "server_address",
            "__aenter__",
            "__aexit__",
        ),
        dex_agents.testing.WorkerProcess: ("kill",),
        dex_agents.stepwise.ToolSource: (
            "source_name",
            "list_tools",
            "deferred_tool_call",
            "execute_deferred_tool_call",
            "poll_tool_task",
        ),
        dex_agents.testing.StepHistoryEntry: (
            "event_type",
            "step_type",
            "step_execution_id",
            "final_attempt",
        ),
    }
    fields_of = {
        owner: {f.name for f in dataclasses.fields(owner)}
        if dataclasses.is_dataclass(owner)
        else set()
        for owner in expected
    }
    missing = [
        f"{owner.__name__}.{name}"
        for owner, names in expected.items()
        for name in names
        if not hasattr(owner, name) and name not in fields_of[owner]
    ]
    assert missing == []


# --- Enums -----------------------------------------------------------------------------------------

#: Enums whose documented value list is the whole list.
_CLOSED_ENUMS = {
    "AgentStatus",
    "InteractionMode",
    "AgentToolCallStatus",
    "ToolEffect",
    "CancellationReason",
    "QuestionResolution",
    "BuiltInTool",
    "AgentEventType",
}


@pytest.mark.parametrize("enum_name", sorted(SEED_ENUM_VALUES))
def test_documented_enum_values(enum_name: str) -> None:
    enum_type = getattr(dex_agents, enum_name)
    values = [member.value for member in enum_type]
    documented = list(SEED_ENUM_VALUES[enum_name])
    if enum_name in _CLOSED_ENUMS:
        assert sorted(values) == sorted(documented)
    else:
        assert set(documented) <= set(values)
    # Members are named for their values, as the snippets use them (PlanStatus.DRAFT).
    for value in documented:
        assert enum_type[value.upper()].value == value


def test_final_and_waiting_record_statuses() -> None:
    final = {status for status in AgentToolCallStatus if status.is_final}
    assert {status.value for status in final} == {
        "rejected",
        "succeeded",
        "failed",
        "outcome_unknown",
    }


# --- Step types, persistence, RPCs -----------------------------------------------------------------

SEED_STEP_TYPES = (
    "StartAgentSession",
    "AwaitUserMessage",
    "RunModel",
    "CompactContext",
    "AwaitToolApproval",
    "AwaitQuestionAnswer",
    "AwaitTimer",
    "CallTool",
    "CallSingleAttemptTool",
    "PollToolTask",
    "RecordToolFailure",
    "RecordToolOutcomeUnknown",
    "ResumeTurn",
    "ApplyTurnControl",
    "RecordTurnFailure",
    "FinishTurnCancellation",
    "CancelToolTask",
)


#: Step types added after the seeds, each documented in docs/ like the seeds' own.
ADDED_STEP_TYPES = ("CheckToolOutcome",)  # the outcome check of a lost single-attempt call


def test_documented_step_types() -> None:
    assert sorted(step.value for step in dex_agents.AgentSessionStepType) == sorted(
        (*SEED_STEP_TYPES, *ADDED_STEP_TYPES)
    )


#: constant -> (kind, persistence name): the "Kind" column of the persistence table.
SEED_PERSISTENCE: dict[str, tuple[type[Any], str]] = {
    "AGENT_STATE": (dex.Attribute, "AGENT_STATE"),
    "AGENT_MESSAGES": (dex.AttributeMap, "AGENT_MESSAGES"),
    "AGENT_MESSAGE_CHUNKS": (dex.AttributeMap, "AGENT_MESSAGE_CHUNKS"),
    "AGENT_MESSAGE_INDEX": (dex.Attribute, "AGENT_MESSAGE_INDEX"),
    "TURN_REPLY_SEQUENCE": (dex.Attribute, "TURN_REPLY_SEQUENCE"),
    "FRAMEWORK_RUN_STATE": (dex.Attribute, "FRAMEWORK_RUN_STATE"),
    "AGENT_TOOL_CALLS": (dex.AttributeMap, "AGENT_TOOL_CALLS"),
    "PENDING_INTERRUPTS": (dex.Attribute, "PENDING_INTERRUPTS"),
    "AGENT_USAGE": (dex.Attribute, "AGENT_USAGE"),
    "QUEUED_USER_MESSAGES": (dex.Channel, "QUEUED_USER_MESSAGES"),
    "INTERRUPT_RESOLUTIONS": (dex.ChannelMap, "INTERRUPT_RESOLUTIONS"),
    "TOOL_CALL_RESULTS": (dex.Channel, "TOOL_CALL_RESULTS"),
    "STEERED_USER_MESSAGES": (dex.Channel, "STEERED_USER_MESSAGES"),
    "TURN_CONTROL_REQUESTS": (dex.Channel, "TURN_CONTROL_REQUESTS"),
    "TURN_CANCELLATION_REQUEST": (dex.Attribute, "TURN_CANCELLATION_REQUEST"),
    "TOOL_CALL_CANCELLATIONS": (dex.ChannelMap, "TOOL_CALL_CANCELLATIONS"),
    "AGENT_TRACE_CONTEXT": (dex.Attribute, "AGENT_TRACE_CONTEXT"),
    "AGENT_PLAN": (dex.Attribute, "AGENT_PLAN"),
    "PLAN_EXECUTIONS": (dex.ChannelMap, "PLAN_EXECUTIONS"),
    "PENDING_PLAN_EXECUTION": (dex.Attribute, "PENDING_PLAN_EXECUTION"),
    "CONTEXT_SUMMARY": (dex.Attribute, "CONTEXT_SUMMARY"),
    "SESSION_SETTINGS": (dex.Attribute, "SESSION_SETTINGS"),
    "TURN_SESSION_SETTINGS": (dex.Attribute, "TURN_SESSION_SETTINGS"),
}


@pytest.mark.parametrize("constant", sorted(SEED_PERSISTENCE))
def test_documented_persistence_name(constant: str) -> None:
    kind, name = SEED_PERSISTENCE[constant]
    definition = getattr(dex_agents, constant)
    assert constant in dex_agents.__all__
    assert type(definition) is kind
    assert definition.name == name


def test_agent_events_stream_is_named_per_flow_type() -> None:
    assert AGENT_EVENTS_STREAM_NAME == "flow.agent_events"


SEED_RPCS = (
    "send_user_message",
    "execute_plan",
    "steer_user_message",
    "delete_queued_message",
    "cancel_turn",
    "resolve_interrupt",
    "answer_question",
    "get_agent_snapshot",
    "list_agent_messages",
    "update_session_settings",
)


@pytest.mark.parametrize("rpc_name", SEED_RPCS)
def test_documented_rpc_is_a_flow_rpc(rpc_name: str) -> None:
    method = getattr(AgentSessionFlow, rpc_name)
    assert hasattr(method, "__dex_rpc_options__"), f"{rpc_name} is not a Dex RPC"


# --- Constants and texts ---------------------------------------------------------------------------

SEED_CONSTANTS: dict[str, object] = {
    "CONTEXT_SUMMARY_NOTE_HEADER": "[Dex] Summary of the earlier conversation:",
    "TURN_FAILURE_NOTE_HEADER": "[Dex] The previous turn failed after these tool calls ran:",
    "TURN_FAILURE_NOTE_FOOTER": "Do not repeat these tool calls unless the user asks again.",
    "TOOL_CALL_NOT_RUN_ERROR_PREFIX": "the tool did not run, so it is safe to call again",
    "QUESTION_DECLINED_RESULT": "The user declined to answer.",
    "QUESTION_DEADLINE_PASSED_RESULT": "question deadline passed",
    "WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR": (
        "write_todos was called more than once in one response"
    ),
    "PLANNING_TURN_TOOL_REJECTION": (
        "The tool call was not run: a planning turn can only call write_todos."
    ),
    "STEERED_TOOL_RESULT": '{"status":"cancelled","reason":"superseded_by_steered_user_message"}',
    "TURN_CANCELLED_TOOL_RESULT": '{"status":"cancelled","reason":"turn_cancelled_by_user"}',
    "MAX_SESSION_SETTINGS_BYTES": 16 * 1024,
    "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES": 1024,
    "DEFAULT_MESSAGE_WINDOW_SIZE": 64,
    "DEFAULT_MESSAGE_CHUNK_SIZE": 32,
    "DEFAULT_MESSAGE_CHUNK_MAX_BYTES": 1024 * 1024,
    "MAX_MESSAGE_CHUNK_MAX_BYTES": 8 * 1024 * 1024,
    "MAX_CHUNK_COUNT_PER_COMMIT": 4,
    "MAX_CHUNK_BYTES_PER_COMMIT": 8 * 1024 * 1024,
    "DEFAULT_RETAINED_MESSAGE_LIMIT": 1_000,
    "DEFAULT_COMPACTION_TRIGGER_RATIO": 0.85,
    "DEFAULT_COMPACTION_KEEP_RATIO": 0.3,
    "DEFAULT_MAX_DURABLE_WAIT": timedelta(days=365),
    "DEFAULT_EVENT_STREAM_CAPACITY_BYTES": 10 * 1024 * 1024,
    "SNAPSHOT_MESSAGE_LIMIT": 200,
    "LIST_AGENT_MESSAGES_MAX_LIMIT": 200,
    "MESSAGE_SEQUENCE_KEY_DIGITS": 12,
    "DEFAULT_TOOL_EFFECT": ToolEffect.UNCLASSIFIED,
    "AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE": dex.ActiveStepSearchMode.WITH_WAIT_FOR,
}


#: Where the values the documentation gives but the root does not export live (private modules).
_PRIVATE_CONSTANT_MODULES: tuple[str, ...] = (
    "dex_agents._built_in_tools",
    "dex_agents._compaction",
    "dex_agents._plans",
    "dex_agents._session.message_layout",
    "dex_agents._tool_policy",
    "dex_agents._values",
)


def _constant(name: str) -> object:
    if name in dex_agents.__all__:
        return getattr(dex_agents, name)
    for module_name in _PRIVATE_CONSTANT_MODULES:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            return getattr(module, name)
    raise AssertionError(f"no module defines {name}")


@pytest.mark.parametrize("constant", sorted(SEED_CONSTANTS))
def test_documented_constant_value(constant: str) -> None:
    assert _constant(constant) == SEED_CONSTANTS[constant]


def test_documented_stepwise_and_testing_constants() -> None:
    assert dex_agents.stepwise.DEFAULT_MAX_MODEL_CALLS_PER_TURN == 100
    assert timedelta(seconds=10) == dex_agents.stepwise.DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT
    assert dex_agents.testing.EXECUTE_COMPLETED_EVENT == "step_execute_completed"
    assert dex_agents.testing.EXECUTE_FAILED_EVENT == "step_execute_failed"
    assert dex_agents.testing.WAIT_FOR_COMPLETED_EVENT == "step_wait_for_completed"
    assert dex_agents.testing.WAIT_FOR_FAILED_EVENT == "step_wait_for_failed"


def test_documented_generated_texts() -> None:
    assert dex_agents.stepwise.model_call_limit_tool_result(7) == (
        "The tool call was not run: this turn reached its limit of 7 model calls."
    )
    assert dex_agents.stepwise.unknown_tool_message("refund") == "unknown tool refund"
    assert dex_agents.build_context_summary_omission_note(4) == (
        "[Dex] 4 earlier messages did not fit in this request and are left out."
    )
    assert plan_execution_message(3) == (
        "[Dex] The user approved plan revision 3. Execute it and keep the task statuses current "
        "with write_todos."
    )
    assert dex_agents.tool_call_idempotency_key("s-1", "turn-2", "c") == "s-1/turn-2/c"
    assert tool_input_interrupt_id("call-1", 2) == "call-1-input-2"
    assert dex_agents.message_sequence_key(42) == "000000000042"
    assert dex_agents.plan_execution_key(12) == "12"
    assert agent_turn_id(3) == "turn-3"
    assert tool_call_not_run_error("worker lost").startswith(
        dex_agents.TOOL_CALL_NOT_RUN_ERROR_PREFIX + ": worker lost"
    )
    assert dex_agents.INVALID_START_SESSION_SETTINGS_REASON in (
        invalid_start_session_settings_reason("too large")
    )
    # Three UTF-8 bytes per token, rounded up.
    assert dex_agents.estimate_text_tokens("abcdefg") == 3


def test_documented_tool_results_are_compact_json() -> None:
    answered = ask_user_result(dex_agents.QuestionResolution.ANSWERED, "blue")
    assert json.loads(answered) == {"status": "answered", "answer": "blue"}
    assert answered == '{"status":"answered","answer":"blue"}'
    assert ask_user_result(dex_agents.QuestionResolution.DECLINED) == (
        "The user declined to answer."
    )
    assert durable_wait_result(30, "cool down") == (
        '{"status":"completed","waited_seconds":30,"reason":"cool down"}'
    )
    draft = dex_agents.AgentPlan(
        revision=2,
        status=dex_agents.PlanStatus.DRAFT,
        todos=(dex_agents.AgentTodo("a"), dex_agents.AgentTodo("b")),
    )
    assert write_todos_result(draft) == ('{"status":"updated","revision":2,"task_count":2}')
    cleared = dex_agents.AgentPlan(revision=3, status=dex_agents.PlanStatus.CLEARED)
    assert write_todos_result(cleared) == '{"status":"cleared","revision":3}'


def test_turn_failure_note_lists_each_record_in_deferral_order() -> None:
    def record(call_id: str, order: int, status: AgentToolCallStatus, output: str) -> AgentToolCall:
        return AgentToolCall(
            tool_call_id=call_id,
            tool_name="refund",
            arguments='{"order":7}',
            effect=ToolEffect.NON_IDEMPOTENT_WRITE,
            requires_approval=True,
            status=status,
            turn_id="turn-1",
            deferral_order=order,
            output=output,
        )

    later = record("b", 1, AgentToolCallStatus.SUCCEEDED, "second")
    first = record("a", 0, AgentToolCallStatus.SUCCEEDED, "first")
    note = dex_agents.build_turn_failure_note([later, first])
    assert note.splitlines() == [
        "[Dex] The previous turn failed after these tool calls ran:",
        f'- refund {{"order":7}} -> succeeded: {dex_agents.describe_tool_call_outcome(first)}',
        f'- refund {{"order":7}} -> succeeded: {dex_agents.describe_tool_call_outcome(later)}',
        "Do not repeat these tool calls unless the user asks again.",
    ]


# --- Documented behaviour of the pure entry points -------------------------------------------------


@pytest.mark.parametrize(
    ("effect", "requires_approval"),
    [
        (ToolEffect.READ, False),
        (ToolEffect.IDEMPOTENT_WRITE, False),
        (ToolEffect.NON_IDEMPOTENT_WRITE, True),
        (ToolEffect.UNCLASSIFIED, True),
    ],
)
def test_effect_default_approval(effect: ToolEffect, requires_approval: bool) -> None:
    assert dex_agents.is_approval_required(effect) is requires_approval
    assert dex_agents.is_approval_required(effect, not requires_approval) is not requires_approval


def test_mcp_annotations_map_to_effects() -> None:
    convert = dex_agents.tool_effect_from_mcp_tool_annotations
    assert convert({"readOnlyHint": True}) is ToolEffect.READ
    assert convert({"idempotentHint": True, "destructiveHint": True}) is (
        ToolEffect.IDEMPOTENT_WRITE
    )
    assert convert({}) is None


def test_function_tool_refuses_arguments_that_are_not_json() -> None:
    @function_tool(effect=ToolEffect.READ)
    def lookup(order_id: str) -> str:
        """Look up an order."""
        return order_id

    assert (lookup.name, lookup.description) == ("lookup", "Look up an order.")
    with pytest.raises(dex_agents.ToolExecutionError) as raised:
        lookup.parse_arguments("{not json")
    assert str(raised.value) == "invalid arguments for lookup: arguments are not valid JSON"


def _scripted_model() -> ScriptedModelClient:
    return ScriptedModelClient(lambda request: ScriptedModelReply(text="hi"))


def test_agent_definition_refuses_a_tool_named_like_an_enabled_built_in() -> None:
    @function_tool(effect=ToolEffect.READ, name="ask_user")
    def ask_user(question: str) -> str:
        """Shadows the built-in."""
        return question

    with pytest.raises(
        ConfigurationError, match="tool ask_user uses the name of an enabled built-in tool"
    ):
        AgentDefinition(
            name="a",
            instructions="i",
            model=_scripted_model(),
            tools=[ask_user],
            built_in_tools=frozenset({BuiltInTool.ASK_USER}),
        )
    # A disabled built-in's name is an ordinary tool name.
    AgentDefinition(name="a", instructions="i", model=_scripted_model(), tools=[ask_user])


def test_stepwise_definition_derives_its_session_options() -> None:
    definition = AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=_scripted_model(),
        built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}),
        plan_mode_enabled=True,
        compaction=CompactionPolicy(context_window_tokens=400_000),
        interrupt_deadline=timedelta(hours=1),
    )
    options = dex_agents.stepwise.stepwise_agent_session_options(definition)
    assert options.plan_mode_enabled is True
    assert options.built_in_tools == frozenset({BuiltInTool.WRITE_TODOS})
    assert options.compaction == CompactionPolicy(context_window_tokens=400_000)
    assert options.interrupt_deadline == timedelta(hours=1)


def test_plan_mode_needs_write_todos() -> None:
    with pytest.raises(ConfigurationError, match="WRITE_TODOS"):
        AgentSessionOptions(plan_mode_enabled=True)


def test_session_settings_limit() -> None:
    fits = {"model": "m" * (16 * 1024 - len('{"model":""}'))}
    assert dex_agents.session_settings_size(fits) == 16 * 1024
    dex_agents.validate_session_settings(fits)
    with pytest.raises(ConfigurationError):
        dex_agents.validate_session_settings({"model": "m" * 16 * 1024})


def test_tracing_options_are_accepted_with_documented_defaults() -> None:
    options = dex_agents.AgentTracingOptions()
    assert (options.is_enabled, options.tracer_provider, options.agent_name) == (True, None, None)
    assert options.should_capture_message_content is False
    assert options.semantic_conventions_version is (
        dex_agents.GenAISemanticConventionsVersion.V1_42_0_DEV
    )
    assert {version.name for version in dex_agents.GenAISemanticConventionsVersion} == {
        "V1_42_0_DEV",
        "V1_36_0",
    }
    session = AgentSessionOptions(
        tracing=dex_agents.AgentTracingOptions(tracer_provider=object(), agent_name="Triage")
    )
    assert session.tracing.agent_name == "Triage"
    assert AgentSessionOptions().tracing == dex_agents.AgentTracingOptions()
    with pytest.raises(ConfigurationTypeError):
        AgentSessionOptions(tracing="on")  # type: ignore[arg-type]


def test_outcome_unions_and_the_runner_generic() -> None:
    assert set(typing.get_args(dex_agents.AgentTurnOutcome)) == {
        dex_agents.TurnCompleted,
        dex_agents.ToolCallsRequested,
    }
    assert set(typing.get_args(dex_agents.DeferredToolOutcome)) == {
        dex_agents.ToolExecutionResult,
        dex_agents.ToolInputRequested,
        dex_agents.ToolTaskStarted,
    }
    assert set(typing.get_args(dex_agents.ToolTaskPollOutcome)) == {
        dex_agents.ToolExecutionResult,
        dex_agents.ToolInputRequested,
        dex_agents.ToolTaskPending,
    }
    # A bare AgentFrameworkRunner means AgentFrameworkRunner[ToolExecutionResult].
    (outcome,) = getattr(dex_agents.AgentFrameworkRunner, "__parameters__")  # noqa: B009
    assert outcome.__default__ is dex_agents.ToolExecutionResult

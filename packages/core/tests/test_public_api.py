"""The public names of the core, pinned: the frozen adapter API, and a docstring on every one.

Adapters pin ``dex-agents==0.3.0`` and import only these names, so a rename or a removal breaks
every adapter distribution at once. The root list is the frozen public API, by area; the other
packages' lists (``stepwise``, ``ui_stream``, ``testing``, ``testing.scenarios``, and the extras'
``litellm`` and ``mcp``) are frozen the same way. Every public name has a docstring at its
definition (a class or function docstring, or the string literal after a constant or type alias).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from functools import cache
from pathlib import Path
from types import ModuleType

import dex_agents

# Before the module walk imports dex_agents.litellm: LiteLLM must not reach the network.
import litellm_test_support  # noqa: F401
import pytest

#: The root's public API, by area, as frozen for the adapters.
ROOT_API: dict[str, tuple[str, ...]] = {
    "session": (
        "AgentSessionFlow",
        "AgentSessionClient",
        "AgentSessionOptions",
        "RunModelLimit",
        "ToolCallLimit",
        "AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE",
        "DEFAULT_EVENT_STREAM_CAPACITY_BYTES",
        "AgentSessionStepType",
        "CompactContextInput",
        "agent_codec_registry",
        "MAX_SESSION_ID_BYTES",
        "validate_session_id",
        "is_blank_text",
        "MAX_STORED_MESSAGE_BYTES",
        "MAX_TOOL_RESULT_BYTES",
        "MAX_RPC_OUTPUT_BYTES",
        "TOOL_RESULT_TOO_LARGE_ERROR_PREFIX",
        "CUT_TEXT_MARKER",
    ),
    "turn calls": (
        "SyncAgentSessionClient",
        "TurnResult",
        "TurnStatus",
        "TurnToolCall",
        "TurnTimeoutError",
        "StreamStoreDisabledError",
        "DEFAULT_TURN_TIMEOUT_SECONDS",
    ),
    "runner": (
        "AgentFrameworkRunner",
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
        "ToolTaskPoller",
        "ToolTaskCanceller",
        "ToolTaskCancellation",
        "UnfinishedTurnMessageBuilder",
        "ContextCompactionRunner",
        "ContextSummaryRequest",
        "ContextSummaryResult",
        "PlanModeRunner",
        "ModelCallMetadata",
        "HeartbeatFunction",
        "describe_tool_call_outcome",
        "build_turn_failure_note",
        "build_turn_cancelled_note",
        "tool_call_idempotency_key",
        "MISSING_TOOL_TASK_POLLER",
        "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
        "OUTCOME_UNKNOWN_TOOL_RESULT",
        "STEERED_TOOL_RESULT",
        "TURN_CANCELLED_TOOL_RESULT",
        "TURN_FAILURE_NOTE_HEADER",
        "TURN_CANCELLED_NOTE",
        "TURN_FAILURE_NOTE_FOOTER",
    ),
    "adapter kit": (
        "current_deferred_tool_execution",
        "require_deferred_tool_execution",
        "NoDeferredToolExecutionError",
        "ToolSource",
        "ListedTool",
        "dump_json_text",
        "JsonValue",
        "JsonObject",
    ),
    "errors": (
        "DexAgentsError",
        "ConfigurationError",
        "ConfigurationTypeError",
        "RunnerContractError",
        "SessionFlowTypeError",
        "ToolExecutionError",
    ),
    "values": (
        "FrameworkMessage",
        "MessageRole",
        "AgentMessage",
        "AgentToolCall",
        "AgentToolCallStatus",
        "AgentUsage",
        "AgentState",
        "AgentStatus",
        "InteractionMode",
        "AgentInterrupt",
        "InterruptKind",
        "AgentInterruptResolution",
        "QuestionAnswer",
        "QuestionResolution",
        "CancellationReason",
        "AgentSnapshot",
        "AgentMessagesPage",
        "QueuedUserMessage",
        "AgentUserMessage",
        "AgentSessionStartInput",
        "AnswerQuestionRequest",
        "CancelTurnRequest",
        "DeleteQueuedMessageRequest",
        "ExecutePlanRequest",
        "ListAgentMessagesRequest",
        "ResolveInterruptRequest",
        "SteerUserMessageRequest",
        "UpdateSessionSettingsRequest",
        "AgentPlan",
        "AgentTodo",
        "TodoStatus",
        "PlanStatus",
        "PlanExecutionRequest",
        "ContextSummary",
        "AgentMessageChunk",
        "AgentMessageIndex",
        "TurnReplySequence",
        "ToolCallCompleted",
        "ToolCallCancellation",
        "TurnControlRequest",
        "TurnCancellationRequest",
        "TurnSessionSettings",
        "SessionSettings",
        "message_sequence_key",
        "plan_execution_key",
    ),
    "persistence": (
        "AGENT_STATE",
        "AGENT_MESSAGES",
        "AGENT_MESSAGE_CHUNKS",
        "AGENT_MESSAGE_INDEX",
        "TURN_REPLY_SEQUENCE",
        "FRAMEWORK_RUN_STATE",
        "AGENT_TOOL_CALLS",
        "PENDING_INTERRUPTS",
        "AGENT_USAGE",
        "QUEUED_USER_MESSAGES",
        "INTERRUPT_RESOLUTIONS",
        "TOOL_CALL_RESULTS",
        "STEERED_USER_MESSAGES",
        "TURN_CONTROL_REQUESTS",
        "TURN_CANCELLATION_REQUEST",
        "TOOL_CALL_CANCELLATIONS",
        "AGENT_TRACE_CONTEXT",
        "AGENT_PLAN",
        "PLAN_EXECUTIONS",
        "PENDING_PLAN_EXECUTION",
        "CONTEXT_SUMMARY",
        "SESSION_SETTINGS",
        "TURN_SESSION_SETTINGS",
    ),
    "events": ("AgentEvent", "AgentEventType", "AgentEventWriter"),
    "built-ins": ("BuiltInTool", "BuiltInToolDefinition", "BUILT_IN_TOOL_DEFINITIONS"),
    "policies": (
        "ToolEffect",
        "ToolPolicy",
        "ResolvedToolPolicy",
        "is_approval_required",
        "McpToolAnnotations",
        "tool_effect_from_mcp_tool_annotations",
        "ToolOutcomeCheck",
        "ToolOutcomeCheckFunction",
        "ToolOutcomeCheckRequest",
        "ToolOutcomeCheckResult",
        "ToolOutcomeCheckStatus",
        "ToolOutcomeVerdict",
        "TOOL_CALL_NOT_APPLIED_ERROR_PREFIX",
    ),
    "compaction": (
        "CompactionPolicy",
        "CONTEXT_SUMMARY_INSTRUCTIONS",
        "CONTEXT_SUMMARY_NOTE_HEADER",
        "CONTEXT_SUMMARY_TRANSCRIPT_HEADER",
        "build_context_summary_prompt",
        "build_context_summary_omission_note",
        "estimate_stored_input_tokens",
        "estimate_text_tokens",
        "select_turn_boundary_cutoff",
    ),
    "plans": ("build_plan_note",),
    "settings": (
        "MAX_SESSION_SETTINGS_BYTES",
        "MAX_SESSION_SETTINGS_DEPTH",
        "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
        "INVALID_START_SESSION_SETTINGS_REASON",
        "validate_session_settings",
        "session_settings_size",
    ),
    "spend": (
        "ModelSpendLimit",
        "ModelSpendRefusal",
        "ModelSpendReport",
        "ModelCallIdentity",
        "ModelCallKind",
        "MODEL_SPEND_LIMIT_ERROR_PREFIX",
    ),
    "tracing": ("AgentTracingOptions", "GenAISemanticConventionsVersion"),
}

#: The frozen ``__all__`` of the public subpackages.
SUBPACKAGE_API: dict[str, frozenset[str]] = {
    "dex_agents.adapters": frozenset(
        {
            "UNKNOWN_TOOL_POLICY",
            "AdapterRunner",
            "KeptDecodes",
            "McpTool",
            "McpToolFactory",
            "McpToolFunction",
            "McpToolSourceLike",
            "McpToolsFunction",
            "ModelCallCountState",
            "SourceTaskPoller",
            "ToolSourceMissingError",
            "ToolSourceRoutes",
            "ToolTaskPollerMissingError",
            "agent_type_error",
            "check_tool_arguments",
            "check_tool_task_pollers",
            "checked_tool_call",
            "fresh_copier",
            "invalid_arguments_error",
            "owned_temp_directory",
            "recorded_tool_result",
            "scenario_runner_getattr",
            "tool_arguments_object",
            "tool_question_answers",
            "tool_result_is_error",
            "unknown_tool_error",
        }
    ),
    "dex_agents.stepwise": frozenset(
        {
            "DEFAULT_MAX_MODEL_CALLS_PER_TURN",
            "DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT",
            "SCRIPTED_PROVIDER",
            "AgentDefinition",
            "DiscardingModelOutputWriter",
            "FunctionTool",
            "InstructionContext",
            "Instructions",
            "ListedTool",
            "ModelClient",
            "ModelInputItem",
            "ModelOutputItem",
            "ModelOutputItemKind",
            "ModelOutputWriter",
            "ModelRequest",
            "ModelResponse",
            "ModelToolCall",
            "ModelToolChoice",
            "ModelToolDefinition",
            "ModelToolResult",
            "ModelUserText",
            "PlanningToolChoice",
            "ScriptedModelClient",
            "ScriptedModelReply",
            "ScriptedRespond",
            "ScriptedToolCall",
            "StepwiseAgentRunner",
            "ToolCallContext",
            "ToolSource",
            "function_tool",
            "model_call_limit_tool_result",
            "replayable_input",
            "stepwise_agent_session_flow",
            "stepwise_agent_session_options",
            "unknown_tool_message",
        }
    ),
    "dex_agents.testing": frozenset(
        {
            "DEFAULT_MAX_CONCURRENT_TASKS",
            "DEFAULT_WAIT_TIMEOUT_SECONDS",
            "DEXCLI_ENV",
            "DEX_SERVER_ZD_BINARY_ENV",
            "EXECUTE_COMPLETED_EVENT",
            "EXECUTE_FAILED_EVENT",
            "SERVER_ADDRESS_ENV",
            "WAIT_FOR_COMPLETED_EVENT",
            "WAIT_FOR_FAILED_EVENT",
            "AgentTestStack",
            "CONTEXT_WINDOW_TOOL_NAME",
            "ChatCompletionReply",
            "ChatCompletionsServer",
            "ContextWindowModel",
            "ContextWindowProgress",
            "ContextWindowReport",
            "ContextWindowRunnerFactory",
            "ContextWindowSessionScenario",
            "EngineDurability",
            "EngineLogs",
            "EngineProcess",
            "EngineStartError",
            "ExampleRun",
            "ExampleScriptError",
            "FileGate",
            "FlowAttributes",
            "InProcessWorker",
            "InvocationLog",
            "InvocationRecord",
            "PrefixedSessionClient",
            "ScriptedModelClient",
            "StepHistoryEntry",
            "StepHistoryError",
            "TurnContextBuilder",
            "WaitTimeoutError",
            "WorkerProcess",
            "WorkerStartError",
            "assistant_texts",
            "build_stepwise_context_window_flow",
            "has_pending_interrupts",
            "in_process_worker",
            "pending_interrupt",
            "read_agent_message_pages",
            "read_agent_messages",
            "read_flow_attributes",
            "read_step_history",
            "check_readme_example_output",
            "printed_section",
            "readme_shown_output",
            "readme_example_lines",
            "readme_python_blocks",
            "run_agent_worker",
            "run_example_script",
            "run_readme_example",
            "tool_messages",
            "turn_ended",
            "turns_have_ended",
            "wait_for_agent_snapshot",
            "wait_for_turn_end",
            "wait_until",
        }
    ),
    "dex_agents.runtime": frozenset(
        {"DEFAULT_RUNTIME_DIRECTORY", "ENGINE_ADDRESS_FILE", "LocalRuntime", "LocalRuntimeError"}
    ),
    "dex_agents.ui_stream": frozenset(
        {
            "AGENT_EVENT_STREAM_HEADERS",
            "DEFAULT_POLL_TIMEOUT",
            "KEEP_ALIVE_FRAME",
            "PRIVATE_MESSAGE_FIELDS",
            "PRIVATE_TOOL_CALL_FIELDS",
            "TOKEN_CHECK_TIMEOUT",
            "AgentEventStreamSnapshot",
            "InvalidAgentEventResumeTokenError",
            "agent_event_frame",
            "agent_event_json_text",
            "browser_snapshot_json",
            "read_agent_event_stream_snapshot",
            "read_agent_event_stream_snapshot_sync",
            "stream_agent_event_frames",
            "stream_agent_event_frames_sync",
        }
    ),
    "dex_agents.testing.scenarios": frozenset(
        {
            "APPLIED_GATE_PREFIX",
            "LEDGER_INVOCATION",
            "scenario_tool_output",
            "CHECK_RAISES_GATE_PREFIX",
            "CHECK_UNKNOWN_GATE_PREFIX",
            "SCENARIO_CHECK_FAILURE",
            "SCENARIO_CHECK_UNKNOWN",
            "SCENARIO_NOT_APPLIED",
            "outcome_check_invocation",
            "scenario_outcome_check",
            "scenario_tool_policies",
            "scenario_tool_policy",
            "APPROVAL_DEADLINE",
            "BROKEN_TOOL_ERROR",
            "CONFIRM_CHOICES",
            "CONFIRM_QUESTION",
            "CONFIRM_TOOL",
            "DEADLINE_FLOW_TYPE",
            "INSTRUCTIONS",
            "KILL_WORKER_GATE",
            "MAIN_FLOW_TYPE",
            "MCP_FLOW_TYPE",
            "MODEL_FAILURE",
            "MODEL_INPUT_INVOCATION",
            "MODEL_INVOCATION",
            "NO_STREAMING_SETTINGS",
            "PLAN_FLOW_TYPE",
            "QUESTION_BUILT_IN_TOOLS",
            "REPORT_POLL_INTERVAL_SECONDS",
            "REPORT_POLL_INVOCATION",
            "REPORT_QUESTION",
            "REPORT_QUESTION_ID",
            "REPORT_TOOL",
            "ReportTaskPoller",
            "SCENARIO_MCP_READ_TOOL",
            "SCENARIO_MCP_SERVER_NAME",
            "SCENARIO_MCP_SOURCE_NAME",
            "SCENARIO_MCP_TOOL_POLICIES",
            "SCENARIO_MCP_WRITE_TOOL",
            "SCENARIO_RUNNERS_ENTRY_POINT_GROUP",
            "SCENARIO_RUNNERS_ENV",
            "SCENARIO_RUNNERS_EXTRA_ENV",
            "SCENARIO_TOOLS",
            "SPEND_REFUSAL_REASON",
            "ScenarioAgentSpec",
            "ScenarioCall",
            "ScenarioCommand",
            "ScenarioFeature",
            "ScenarioMcpServer",
            "ScenarioMcpTools",
            "ScenarioMcpTurn",
            "ScenarioModelCall",
            "ScenarioModelInput",
            "ScenarioQuestion",
            "ScenarioReply",
            "ScenarioReportSource",
            "ScenarioRunner",
            "ScenarioRunnerBase",
            "ScenarioSessionUnknownError",
            "ScenarioSpendLimit",
            "ScenarioTaskRunning",
            "ScenarioTool",
            "ScenarioToolCall",
            "ScenarioToolError",
            "UnknownScenarioRunnerError",
            "build_scenario_flows",
            "check_mcp_tool_refusals",
            "confirm_by_asking",
            "confirm_tool_outcome",
            "current_scenario_session",
            "every_scenario_feature",
            "list_scenario_mcp_tools",
            "invocation_log",
            "model_input_user_texts",
            "model_streams",
            "load_scenario_runner",
            "mcp_extra_installed",
            "mcp_wrapper_error_without_mcp",
            "model_gate_name",
            "poll_report",
            "poll_report_task",
            "refuse_model_calls",
            "report_deliveries",
            "report_job_ids",
            "run_confirm_tool",
            "run_scenario_tool",
            "scenario_agent_specs",
            "scenario_input_requested",
            "scenario_mcp_server",
            "scenario_mcp_server_config",
            "scenario_mcp_tool_source",
            "scenario_mcp_zygote",
            "scenario_runner_names",
            "scenario_session_options",
            "run_scenario_tool_call",
            "scenario_session",
            "session_state_dir",
            "scripted_reply",
            "start_report",
            "start_report_task",
            "start_scenario_mcp_zygote",
            "stop_at_report_gate",
        }
    ),
    "dex_agents.litellm": frozenset(
        {
            "ApiKeyProvider",
            "CHAT_COMPLETIONS_API",
            "LiteLLMApi",
            "LiteLLMModelClient",
            "RESPONSES_API",
        }
    ),
    "dex_agents.mcp": frozenset(
        {
            "ANSWER_SETTLE_SECONDS",
            "DEFAULT_CONNECTION_ATTEMPTS",
            "DEFAULT_CONNECTION_TIMEOUT",
            "DEFAULT_LISTING_FAILURE_BACKOFF",
            "DEFAULT_LISTING_TTL",
            "DEFAULT_REQUEST_TIMEOUT",
            "DEFAULT_SOURCE_NAME",
            "DEFAULT_TASK_WAIT_TIMEOUT",
            "IDEMPOTENCY_KEY_META_KEY",
            "INPUT_REQUEST_ERROR_PREFIX",
            "MAX_TOOL_NAME_LENGTH",
            "MCP_GET_PROMPT_TOOL_NAME",
            "MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME",
            "MCP_READ_RESOURCE_TOOL_NAME",
            "MCP_TASK_STATUS_EVENT",
            "MCP_TOOL_PROGRESS_EVENT",
            "McpServerConfig",
            "McpStdioServerConfig",
            "McpStreamableHttpServerConfig",
            "McpTaskError",
            "McpTool",
            "McpToolCallInterruptedError",
            "McpToolSource",
            "TASKS_EXTENSION",
            "agent_tool_name",
            "require_listed_tool",
            "require_mcp_tool_source",
        }
    ),
}

_PACKAGE_DIR = Path(dex_agents.__file__).resolve().parent


def _root_names() -> list[str]:
    return [name for names in ROOT_API.values() for name in names]


def test_root_exports_exactly_the_frozen_api() -> None:
    names = _root_names()
    assert len(names) == len(set(names)), "a name is listed under two areas"
    assert sorted(dex_agents.__all__) == sorted([*names, "__version__"])
    assert len(dex_agents.__all__) == 187


@pytest.mark.parametrize("module_name", sorted(SUBPACKAGE_API))
def test_subpackages_export_exactly_the_frozen_api(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert set(module.__all__) == SUBPACKAGE_API[module_name]
    assert len(module.__all__) == len(SUBPACKAGE_API[module_name])


def _public_modules() -> list[ModuleType]:
    return [importlib.import_module(name) for name in ("dex_agents", *sorted(SUBPACKAGE_API))]


def test_every_public_name_resolves() -> None:
    for module in _public_modules():
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name} is in __all__ but missing"


def test_no_other_module_of_the_package_is_public() -> None:
    # Everything but the public packages, the documented exceptions module, and the console
    # script is behind a `_` name, so adapters cannot come to depend on a deep path. The pytest
    # plugin is a module pytest loads by name (entry point pytest11).
    public = {
        "dex_agents",
        *SUBPACKAGE_API,
        "dex_agents.exceptions",
        "dex_agents.cli",
        "dex_agents.testing.pytest_plugin",
    }
    found = {
        module.name
        for module in pkgutil.walk_packages([str(_PACKAGE_DIR)], prefix="dex_agents.")
        if not any(part.startswith("_") for part in module.name.split(".")[1:])
    }
    assert found | {"dex_agents"} == public


@cache
def _module_tree(module_name: str) -> ast.Module:
    module = importlib.import_module(module_name)
    return ast.parse(Path(inspect.getfile(module)).read_text())


def _definition_docstring(module_name: str, name: str) -> str | None:
    """The docstring at the top-level definition of ``name`` in ``module_name``, or ``None``.

    A class or function has its own docstring; a constant or type alias has the string literal
    right after its assignment.
    """
    body = _module_tree(module_name).body
    definitions = [
        node
        for node in body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name == name
    ]
    if definitions:
        # The last one: an implementation follows its ``@overload`` stubs.
        return ast.get_docstring(definitions[-1])
    for position, node in enumerate(body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            following = body[position + 1] if position + 1 < len(body) else None
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                return following.value.value
            return None
    raise LookupError(f"{module_name} does not define {name}")


def _defining_module(module: ModuleType, name: str) -> str:
    value = getattr(module, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        return str(value.__module__)
    # A constant or type alias: the private module it is imported from.
    for node in _module_tree(module.__name__).body:
        if isinstance(node, ast.ImportFrom) and any(alias.name == name for alias in node.names):
            assert node.module is not None
            if node.module in SUBPACKAGE_API or node.module == "dex_agents":
                return _defining_module(importlib.import_module(node.module), name)
            return node.module
    return module.__name__


def _public_names() -> list[tuple[str, str]]:
    return [
        (module.__name__, name)
        for module in _public_modules()
        for name in module.__all__
        if name != "__version__"
    ]


@pytest.mark.parametrize(("module_name", "name"), _public_names())
def test_every_public_name_has_a_docstring(module_name: str, name: str) -> None:
    module = importlib.import_module(module_name)
    docstring = _definition_docstring(_defining_module(module, name), name)
    assert docstring is not None and docstring.strip(), f"{module_name}.{name} has no docstring"

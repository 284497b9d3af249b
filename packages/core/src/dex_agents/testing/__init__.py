"""Integration testing of agents: private engines, Worker processes, gates, Step history.

An adapter's tests start a private engine and Worker child processes with
``AgentTestStack``, stop a tool at an exact point with ``FileGate``, count real
calls with ``InvocationLog``, and read which Steps ran with
``read_step_history``. ``run_readme_example`` runs a README's example as written
(``readme_example_lines``: its one tested block, run twice, each run's printed lines;
``check_readme_example_output``: each run printed the output the README shows), and
``printed_section`` reads what a script printed under a heading.
``in_process_worker`` serves Flows in the test process itself; ``TurnContextBuilder`` calls a
runner's methods directly, with the contexts a session would pass; ``ChatCompletionsServer``
serves OpenAI Chat Completions on loopback for a framework's own OpenAI model class.
``dex_agents.testing.scenarios`` holds the shared scenario agent and the ``ScenarioRunner`` through
which a runner package joins the shared suite. ``ScriptedModelClient`` is the same class as
``dex_agents.stepwise``'s.
"""

from dex_agents.stepwise import ScriptedModelClient
from dex_agents.testing._agent_test_stack import AgentTestStack
from dex_agents.testing._chat_completions_server import ChatCompletionReply, ChatCompletionsServer
from dex_agents.testing._context_window_scenario import (
    CONTEXT_WINDOW_TOOL_NAME,
    ContextWindowModel,
    ContextWindowProgress,
    ContextWindowReport,
    ContextWindowRunnerFactory,
    ContextWindowSessionScenario,
    build_stepwise_context_window_flow,
)
from dex_agents.testing._engine_process import (
    DEX_SERVER_ZD_BINARY_ENV,
    DEXCLI_ENV,
    EngineDurability,
    EngineLogs,
    EngineProcess,
    EngineStartError,
)
from dex_agents.testing._file_gate import FileGate
from dex_agents.testing._flow_attributes import FlowAttributes, read_flow_attributes
from dex_agents.testing._in_process_worker import InProcessWorker, in_process_worker
from dex_agents.testing._invocation_log import InvocationLog, InvocationRecord
from dex_agents.testing._message_pages import read_agent_message_pages, read_agent_messages
from dex_agents.testing._readme_examples import (
    ExampleRun,
    ExampleScriptError,
    check_readme_example_output,
    printed_section,
    readme_example_lines,
    readme_python_blocks,
    readme_shown_output,
    run_example_script,
    run_readme_example,
)
from dex_agents.testing._session_prefix import PrefixedSessionClient
from dex_agents.testing._snapshot_messages import assistant_texts, tool_messages
from dex_agents.testing._step_history import (
    EXECUTE_COMPLETED_EVENT,
    EXECUTE_FAILED_EVENT,
    WAIT_FOR_COMPLETED_EVENT,
    WAIT_FOR_FAILED_EVENT,
    StepHistoryEntry,
    StepHistoryError,
    read_step_history,
)
from dex_agents.testing._turn_context_builder import TurnContextBuilder
from dex_agents.testing._waiting import (
    DEFAULT_WAIT_TIMEOUT_SECONDS,
    WaitTimeoutError,
    has_pending_interrupts,
    pending_interrupt,
    turn_ended,
    turns_have_ended,
    wait_for_agent_snapshot,
    wait_for_turn_end,
    wait_until,
)
from dex_agents.testing._worker_process import (
    DEFAULT_MAX_CONCURRENT_TASKS,
    SERVER_ADDRESS_ENV,
    WorkerProcess,
    WorkerStartError,
    run_agent_worker,
)

__all__ = [
    "CONTEXT_WINDOW_TOOL_NAME",
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
    "check_readme_example_output",
    "has_pending_interrupts",
    "in_process_worker",
    "pending_interrupt",
    "printed_section",
    "read_agent_message_pages",
    "read_agent_messages",
    "read_flow_attributes",
    "read_step_history",
    "readme_example_lines",
    "readme_python_blocks",
    "readme_shown_output",
    "run_agent_worker",
    "run_example_script",
    "run_readme_example",
    "tool_messages",
    "turn_ended",
    "turns_have_ended",
    "wait_for_agent_snapshot",
    "wait_for_turn_end",
    "wait_until",
]

"""Every error the core raises on purpose is a ``DexAgentsError`` that keeps its built-in base.

A caller's ``except ValueError`` keeps working (``ConfigurationError`` and the older value errors
are still ``ValueError``), and ``except DexAgentsError`` catches anything dex-agents raised on
purpose. The source raises no bare ``ValueError`` or ``TypeError``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import dex_agents

# Before the module walk imports dex_agents.litellm: LiteLLM must not reach the network.
import litellm_test_support  # noqa: F401
import pytest
from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    ConfigurationError,
    ConfigurationTypeError,
    DexAgentsError,
    RunnerContractError,
)
from dex_agents.stepwise import AgentDefinition, ScriptedModelClient, ScriptedModelReply

PACKAGE_DIR = Path(dex_agents.__file__).resolve().parent

#: Each error class of the core and the built-in base a caller may already catch.
ERROR_BASES: dict[str, type[BaseException]] = {
    "dex_agents.exceptions.DexAgentsError": Exception,
    "dex_agents._session.attempt_claims.ToolAttemptNotClaimedError": Exception,
    "dex_agents.exceptions.ConfigurationError": ValueError,
    "dex_agents.exceptions.ConfigurationTypeError": TypeError,
    "dex_agents.exceptions.RunnerContractError": TypeError,
    "dex_agents.exceptions.ToolExecutionError": Exception,
    "dex_agents.exceptions.SessionFlowTypeError": RuntimeError,
    "dex_agents.exceptions.ToolTaskPollerMissingError": LookupError,
    "dex_agents.runtime._local_runtime.LocalRuntimeError": RuntimeError,
    "dex_agents._session.turn_waits.StreamStoreDisabledError": Exception,
    "dex_agents._worker_command.WorkerImportError": Exception,
    "dex_agents._session.turn_results.TurnTimeoutError": TimeoutError,
    "dex_agents.exceptions.StoredStateError": ValueError,
    "dex_agents.exceptions.AgentFrameworkError": RuntimeError,
    "dex_agents._deferred_tool_context.NoDeferredToolExecutionError": LookupError,
    "dex_agents._json_values.WireValueError": ValueError,
    "dex_agents._tool_source_routes.ToolSourceMissingError": LookupError,
    "dex_agents._session.message_layout.MessageLayoutError": ValueError,
    "dex_agents._built_in_tools.BuiltInToolArgumentsError": ValueError,
    "dex_agents.stepwise._json_schema.ArgumentValidationError": ValueError,
    "dex_agents.testing._engine_process.EngineStartError": RuntimeError,
    "dex_agents.testing._fork_server.ForkServerError": RuntimeError,
    "dex_agents.testing._worker_process.WorkerStartError": RuntimeError,
    "dex_agents.testing._step_history.StepHistoryError": RuntimeError,
    "dex_agents.testing._waiting.WaitTimeoutError": TimeoutError,
    "dex_agents.testing._readme_examples.ExampleScriptError": AssertionError,
    "dex_agents.testing.scenarios._scenario_runner.UnknownScenarioRunnerError": LookupError,
    "dex_agents.testing.scenarios._scenario_agent.ScenarioToolError": Exception,
    "dex_agents.testing.scenarios._scenario_agent.ScenarioSessionUnknownError": LookupError,
    "dex_agents._demo.DemoError": Exception,
    "dex_agents.mcp._errors.McpToolCallInterruptedError": ConnectionError,
    "dex_agents.mcp._errors.McpServerUnreachableError": ConnectionError,
    "dex_agents.mcp._errors.McpTaskError": RuntimeError,
    "dex_agents.ui_stream._invalid_resume_token_error.InvalidAgentEventResumeTokenError": (
        ValueError
    ),
}


def _modules() -> dict[str, ast.Module]:
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = ast.parse(path.read_text(), str(path))
    return modules


def _defined_exception_classes() -> set[str]:
    found = set()
    for module_name, tree in _modules().items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                value = getattr(importlib.import_module(module_name), node.name)
                if inspect.isclass(value) and issubclass(value, BaseException):
                    found.add(f"{module_name}.{node.name}")
    return found


def test_every_error_class_is_listed() -> None:
    assert _defined_exception_classes() == set(ERROR_BASES)


@pytest.mark.parametrize("qualified_name", sorted(ERROR_BASES))
def test_every_error_is_a_dex_agents_error_with_its_builtin_base(qualified_name: str) -> None:
    module_name, _, class_name = qualified_name.rpartition(".")
    error = getattr(importlib.import_module(module_name), class_name)
    assert issubclass(error, DexAgentsError)
    assert issubclass(error, ERROR_BASES[qualified_name])


def test_no_bare_value_or_type_error_is_raised() -> None:
    offenders = [
        f"{module_name}:{node.lineno}"
        for module_name, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and isinstance(node.exc.func, ast.Name)
        and node.exc.func.id in {"ValueError", "TypeError"}
    ]
    assert offenders == []


class _NoCompactionRunner:
    def build_user_message(self, text: str) -> object:
        return text

    async def run_model_step(self, turn: object) -> object:
        return None

    async def execute_deferred_tool_call(self, call: object) -> object:
        return None


def test_misconfiguration_names_the_option_and_what_is_allowed() -> None:
    with pytest.raises(ConfigurationError, match="message_window_size must be a positive int"):
        AgentSessionOptions(message_window_size=0)
    with pytest.raises(
        ConfigurationError, match="default_tool_effect must be one of read, idempotent_write"
    ):
        AgentSessionOptions(default_tool_effect="sometimes")  # type: ignore[arg-type]
    model = ScriptedModelClient(lambda request: ScriptedModelReply(text="hi"))
    with pytest.raises(ConfigurationError, match=r"AgentDefinition\.name must be non-blank"):
        AgentDefinition(name=" ", instructions="Help.", model=model)
    with pytest.raises(ConfigurationTypeError, match="compaction policy needs a Context"):
        AgentSessionFlow(
            _NoCompactionRunner(),  # type: ignore[arg-type]
            flow_type="A",
            options=AgentSessionOptions(
                compaction=dex_agents.CompactionPolicy(context_window_tokens=1_000)
            ),
        )


def test_runner_contract_errors_are_type_errors() -> None:
    # The SDK fails a Step attempt that raises TypeError or ValueError the same way; a runner
    # that returns the wrong type therefore fails the attempt as before the hierarchy existed.
    assert issubclass(RunnerContractError, TypeError)

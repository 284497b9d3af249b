"""The adapter kit: the current deferred tool call, in-process Workers, scenario runner discovery."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    request_tools,
    tool_call,
)
from dex_agents import (
    AgentEventWriter,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    ConfigurationError,
    ConfigurationTypeError,
    DeferredToolExecution,
    DexAgentsError,
    JsonValue,
    ListedTool,
    NoDeferredToolExecutionError,
    QuestionAnswer,
    QuestionResolution,
    RunnerContractError,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    current_deferred_tool_execution,
    require_deferred_tool_execution,
)
from dex_agents.adapters import (
    AdapterRunner,
    McpTool,
    McpToolFactory,
    agent_type_error,
    check_tool_task_pollers,
    scenario_runner_getattr,
    tool_question_answers,
)
from dex_agents.testing import (
    EngineLogs,
    EngineProcess,
    in_process_worker,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.scenarios import (
    SCENARIO_RUNNERS_ENV,
    ScenarioFeature,
    ScenarioRunner,
    UnknownScenarioRunnerError,
    load_scenario_runner,
    scenario_runner_names,
)
from dex_agents.testing.scenarios import _scenario_runner as scenario_runner_module


def _two_parallel_tools(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(
            turn,
            tool_call(turn, "call-a", "whoami", {}),
            tool_call(turn, "call-b", "whoami_in_thread", {}),
        )
    return final_answer_with_results(turn)


async def _framework_tool() -> str:
    """A tool several frames below the runner, as a framework calls it: no call argument."""
    await asyncio.sleep(0)
    return require_deferred_tool_execution().idempotency_key


def _framework_tool_in_thread() -> str:
    call = current_deferred_tool_execution()
    return call.tool_call.tool_call_id if call is not None else "none"


async def _whoami(call: DeferredToolExecution) -> ToolExecutionResult:
    # The framework starts its own task for the tool; the context variable is copied into it.
    key = await asyncio.create_task(_framework_tool())
    assert current_deferred_tool_execution() is call
    return ToolExecutionResult(key)


async def _whoami_in_thread(call: DeferredToolExecution) -> ToolExecutionResult:
    return ToolExecutionResult(await asyncio.to_thread(_framework_tool_in_thread))


async def test_a_tool_reads_its_own_deferred_call_in_parallel_tool_steps(tmp_path: Path) -> None:
    runner = ScriptedRunner(
        _two_parallel_tools, tools={"whoami": _whoami, "whoami_in_thread": _whoami_in_thread}
    )
    flow = AgentSessionFlow(
        runner,
        flow_type="KitAgent",
        options=AgentSessionOptions(
            tool_policies={
                "whoami": ToolPolicy(ToolEffect.READ),
                "whoami_in_thread": ToolPolicy(ToolEffect.READ),
            }
        ),
    )
    engine = await EngineProcess.start_local(
        tmp_path / "engine.db", EngineLogs.in_directory(tmp_path)
    )
    try:
        async with in_process_worker([flow], engine.server_address, tmp_path / "cache") as dex:
            sessions = dex.sessions(flow)
            await sessions.start_session("kit-1", "who runs?")
            snapshot = await wait_for_agent_snapshot(
                sessions, "kit-1", turn_ended(1), description="the turn to end"
            )
    finally:
        await engine.stop()
    final = snapshot.messages[-1].text or ""
    assert "whoami=kit-1/turn-1/call-a" in final
    assert "whoami_in_thread=call-b" in final
    # Outside a tool Step there is no current call.
    assert current_deferred_tool_execution() is None


def test_require_deferred_tool_execution_outside_a_tool_step_names_the_problem() -> None:
    with pytest.raises(NoDeferredToolExecutionError, match="no deferred tool call is running"):
        require_deferred_tool_execution()
    assert issubclass(NoDeferredToolExecutionError, DexAgentsError)
    assert issubclass(NoDeferredToolExecutionError, LookupError)


async def test_in_process_worker_refuses_no_flows(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="at least one Flow"):
        async with in_process_worker([], "127.0.0.1:1", tmp_path):
            pass


def test_stepwise_registers_through_the_entry_point_with_every_feature() -> None:
    runner = load_scenario_runner("stepwise")
    assert runner.name == "stepwise"
    assert runner.features == frozenset(ScenarioFeature)
    assert runner.build_context_window_flow is not None
    assert "stepwise" in scenario_runner_names()


def test_the_environment_narrows_the_runners(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SCENARIO_RUNNERS_ENV, " stepwise ,")
    assert scenario_runner_names() == ["stepwise"]
    monkeypatch.setenv(SCENARIO_RUNNERS_ENV, "stepwise,no-such-framework")
    with pytest.raises(UnknownScenarioRunnerError, match="no-such-framework"):
        scenario_runner_names()


def test_an_unknown_runner_name_lists_the_installed_ones() -> None:
    with pytest.raises(UnknownScenarioRunnerError, match=r"installed runners: .*stepwise"):
        load_scenario_runner("no-such-framework")


def test_an_entry_point_that_is_not_a_scenario_runner_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wrong = EntryPoint("wrong", "dex_agents:AgentSessionFlow", "dex_agents.scenario_runners")
    monkeypatch.setattr(scenario_runner_module, "_entry_points", lambda: {"wrong": wrong})
    load_scenario_runner.cache_clear()
    try:
        with pytest.raises(ConfigurationTypeError, match="must be a ScenarioRunner named 'wrong'"):
            load_scenario_runner("wrong")
    finally:
        load_scenario_runner.cache_clear()


def test_a_scenario_runner_checks_its_fields() -> None:
    with pytest.raises(ConfigurationError, match="non-blank name"):
        ScenarioRunner(" ", build_flow=lambda spec: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigurationError, match="not_a_feature"):
        ScenarioRunner(
            "x",
            build_flow=lambda spec: None,  # type: ignore[arg-type,return-value]
            features=frozenset({"not_a_feature"}),  # type: ignore[arg-type]
        )
    with pytest.raises(ConfigurationError, match="context_window_guard_turns must be positive"):
        ScenarioRunner(
            "x",
            build_flow=lambda spec: None,  # type: ignore[arg-type,return-value]
            context_window_guard_turns=0,
        )
    with pytest.raises(TypeError, match="context_window_guard_turns must be an int"):
        ScenarioRunner(
            "x",
            build_flow=lambda spec: None,  # type: ignore[arg-type,return-value]
            context_window_guard_turns=1.5,  # type: ignore[arg-type]
        )
    default = ScenarioRunner("x", build_flow=lambda spec: None)  # type: ignore[arg-type,return-value]
    assert default.context_window_guard_turns == 60


class _RecordingToolSource:
    """Lists two tools and answers calls as an ``McpToolSource`` does; one tool's server errs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, object], str]] = []

    async def list_tools(self, refresh: bool = False) -> list[ListedTool]:
        schema: dict[str, JsonValue] = {
            "type": "object",
            "properties": {"path": {"type": "string"}},
        }
        return [
            ListedTool("files__read", "Read a file.", schema, ToolEffect.READ),
            ListedTool("files__broken", "Always fails.", {}),
        ]

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str,
        events: object = None,
        tool_call_id: str | None = None,
    ) -> str:
        self.calls.append((name, dict(arguments or {}), idempotency_key))
        if name == "files__broken":
            raise ToolExecutionError("the server answered with an error")
        return f"read {dict(arguments or {}).get('path')}"


class _FrameworkToolFailure(Exception):
    """A framework's own failed tool result, such as LangChain's ``ToolException``."""


async def test_the_mcp_tool_factory_wraps_each_listed_tool_and_maps_a_server_error() -> None:
    source = _RecordingToolSource()
    factory = McpToolFactory(lambda mcp: mcp, function_name="wrap_tool")

    read, broken = await factory.listed_tools(source)

    schema = read.json_schema()
    schema["changed"] = True  # a framework may change its copy; the listing keeps its own
    assert "changed" not in read.listed.parameters
    assert (read.name, read.description) == ("files__read", "Read a file.")
    assert await read.call({"path": "a.txt"}, idempotency_key="flow/turn/call-1") == "read a.txt"
    assert source.calls == [("files__read", {"path": "a.txt"}, "flow/turn/call-1")]
    with pytest.raises(ToolExecutionError, match="answered with an error"):
        await broken.call({}, idempotency_key="k")
    with pytest.raises(_FrameworkToolFailure, match="answered with an error") as raised:
        await broken.call({}, idempotency_key="k", failure=_FrameworkToolFailure)
    assert isinstance(raised.value.__cause__, ToolExecutionError)


def test_the_mcp_tool_factory_refuses_what_is_not_a_source_or_a_listed_tool() -> None:
    factory = McpToolFactory(lambda mcp: mcp, function_name="wrap_tool")
    with pytest.raises(ConfigurationTypeError, match="McpToolSource"):
        factory.tool(_RecordingToolSource(), ListedTool("x", "y"))  # type: ignore[arg-type]


def _agent_name(mcp: McpTool) -> str:
    return mcp.name


async def test_the_mcp_tool_factory_makes_the_adapters_two_public_functions() -> None:
    factory = McpToolFactory(_agent_name, function_name="mcp_name")
    mcp_name, mcp_names = factory.public_functions(
        "its agent name", example="names = {tools}", note="Only the name."
    )

    # Named for the module that wraps (the adapter's), the listing one by the plural.
    assert (mcp_name.__module__, mcp_name.__qualname__) == (__name__, "mcp_name")
    assert (mcp_names.__module__, mcp_names.__name__) == (__name__, "mcp_names")
    assert mcp_name.__doc__ is not None and mcp_names.__doc__ is not None
    assert mcp_name.__doc__.startswith("One listed tool of ``source`` as its agent name.\n\n")
    assert "Only the name." in mcp_name.__doc__ and "Only the name." not in mcp_names.__doc__
    assert ">>> names = [mcp_name(tools, t) for t in tools.cached_tools()]" in mcp_name.__doc__
    assert ">>> names = [*my_tools, *await mcp_names(tools)]" in mcp_names.__doc__
    for doc in (mcp_name.__doc__, mcp_names.__doc__):
        assert "Raises:\n    ConfigurationTypeError:" in doc
    # Both check their source as the factory does.
    with pytest.raises(ConfigurationTypeError, match="McpToolSource"):
        mcp_name(_RecordingToolSource(), ListedTool("x", "y"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationTypeError, match="McpToolSource"):
        await mcp_names(_RecordingToolSource())  # type: ignore[arg-type]
    other, others = factory.public_functions("a name", example="{tools}", tools_function="names")
    assert (other.__name__, others.__name__) == ("mcp_name", "names")
    with pytest.raises(ConfigurationError, match="may hold only"):
        factory.public_functions("a name", example="names = {tool}")


def _asked_call(*answers: QuestionAnswer) -> DeferredToolExecution:
    record = AgentToolCall(
        "call-1",
        "ship",
        "{}",
        ToolEffect.NON_IDEMPOTENT_WRITE,
        False,
        AgentToolCallStatus.APPROVED,
        "turn-1",
        0,
    )
    return DeferredToolExecution(
        "session-1", record, 1, AgentEventWriter.discarding(), input_answers=answers
    )


def test_tool_question_answers_are_the_answered_texts_oldest_first() -> None:
    first = QuestionAnswer("call-1-input-1", "Ship it?", QuestionResolution.ANSWERED, "yes")
    second = QuestionAnswer("call-1-input-2", "Gift wrap?", QuestionResolution.ANSWERED, "no")

    assert tool_question_answers(_asked_call()) == ()
    assert tool_question_answers(_asked_call(first, second)) == ("yes", "no")


@pytest.mark.parametrize(
    "resolution", [QuestionResolution.DECLINED, QuestionResolution.DEADLINE_PASSED]
)
def test_a_question_without_an_answer_never_reaches_a_tool(resolution: QuestionResolution) -> None:
    # The session records such a call rejected; only a hand-built call carries one.
    unanswered = QuestionAnswer("call-1-input-1", "Ship it?", resolution)

    with pytest.raises(RunnerContractError, match=f"call-1-input-1 was {resolution.value}"):
        tool_question_answers(_asked_call(unanswered))


def test_agent_type_error_is_a_configuration_type_error_naming_both_types() -> None:
    error = agent_type_error("MyRunner", "a my_framework.Agent", 42)

    assert isinstance(error, ConfigurationTypeError) and isinstance(error, TypeError)
    assert str(error) == "MyRunner needs a my_framework.Agent, got int"


def test_scenario_runner_getattr_imports_only_the_scenario_runner_s_names() -> None:
    # A package whose _scenario_runner module exists, standing for an adapter's testing package.
    module_getattr = scenario_runner_getattr("dex_agents.testing.scenarios", "ScenarioRunner")

    assert module_getattr("ScenarioRunner") is ScenarioRunner
    with pytest.raises(AttributeError, match="has no attribute 'ScenarioFeature'"):
        module_getattr("ScenarioFeature")


class _ByNamePoller:
    async def poll_tool_task(self, poll: object) -> object:
        raise AssertionError("not polled here")


class _ByNameRunner(AdapterRunner):
    def __init__(self, pollers: Mapping[str, object]) -> None:
        self.tool_task_pollers = check_tool_task_pollers(pollers)


async def test_adapter_runner_finds_a_call_s_poller_by_its_tool_name() -> None:
    poller = _ByNamePoller()
    runner = _ByNameRunner({"ship": poller})
    shipped = _asked_call().tool_call
    other = dataclasses.replace(shipped, tool_name="lookup")

    assert await runner.find_tool_task_poller("session-1", shipped) is poller
    assert await runner.find_tool_task_poller("session-1", other) is None
    assert await AdapterRunner().find_tool_task_poller("session-1", shipped) is None

"""The base of an adapter's scenario runner: what every runner builds alike, written once.

Every runner builds the same scenario agent (``ScenarioAgentSpec``): the spec's tools with their
effects and approvals, ``confirm`` (a question, then one write), ``report`` (a tool task), the MCP
tools of the scenario server for the MCP agent, the scripted model, and the session options of the
spec. :class:`ScenarioRunnerBase` assembles those; a subclass writes only the framework's pieces:
each tool in the framework's tool type and the runner around them. The tool bodies it calls are
here too (:func:`run_scenario_tool_call`, :func:`confirm_tool_outcome`, :class:`ReportTaskPoller`),
so each framework's tool is a thin wrapper.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Final, Generic, TypeVar

from dex import Flow

from dex_agents import (
    AgentFrameworkRunner,
    AgentSessionFlow,
    AgentSessionOptions,
    BuiltInTool,
    DeferredToolExecution,
    RunnerContractError,
    ToolEffect,
    ToolExecutionError,
    ToolInputRequested,
    ToolPolicy,
    ToolTaskPoll,
    ToolTaskPoller,
    ToolTaskPollOutcome,
)
from dex_agents.testing._context_window_scenario import ContextWindowModel
from dex_agents.testing.scenarios._scenario_agent import (
    ScenarioAgentSpec,
    ScenarioTool,
    ScenarioToolError,
    run_scenario_tool,
)
from dex_agents.testing.scenarios._scenario_mcp_server import (
    ScenarioMcpTools,
    list_scenario_mcp_tools,
    mcp_extra_installed,
)
from dex_agents.testing.scenarios._scenario_outcome_checks import scenario_tool_policies
from dex_agents.testing.scenarios._scenario_questions import (
    CONFIRM_TOOL,
    REPORT_TOOL,
    ScenarioQuestion,
    poll_report_task,
    run_confirm_tool,
    scenario_input_requested,
)
from dex_agents.testing.scenarios._scenario_runner import ScenarioFeature, ScenarioRunner

__all__ = [
    "NO_STREAMING_SETTINGS",
    "ReportTaskPoller",
    "ScenarioRunnerBase",
    "confirm_tool_outcome",
    "every_scenario_feature",
    "model_streams",
    "run_scenario_tool_call",
    "scenario_session_options",
]

ToolT = TypeVar("ToolT")

_STREAMING_SETTING: Final = "scenario_streaming"

NO_STREAMING_SETTINGS: Final[Mapping[str, object]] = MappingProxyType({_STREAMING_SETTING: "off"})
"""Session settings under which a runner's scripted model is one that cannot stream (a runner
whose framework has such models builds one for a turn with these settings: ``model_streams``)."""


def model_streams(settings: Mapping[str, object]) -> bool:
    """Whether the scripted model of a turn with these session settings may stream."""
    return settings.get(_STREAMING_SETTING) != "off"


def every_scenario_feature() -> frozenset[ScenarioFeature]:
    """Every optional feature; the MCP tools only where the mcp extra is installed."""
    features = set(ScenarioFeature)
    if not mcp_extra_installed():
        features.discard(ScenarioFeature.MCP_TOOLS)
    return frozenset(features)


def scenario_session_options(
    spec: ScenarioAgentSpec, tool_policies: Mapping[str, ToolPolicy]
) -> AgentSessionOptions:
    """The session options of the scenario agent: ``tool_policies`` and the spec's approval
    deadline, built-in tools, plan mode and spend limit."""
    return AgentSessionOptions(
        tool_policies=dict(tool_policies),
        interrupt_deadline=spec.interrupt_deadline,
        built_in_tools=frozenset(BuiltInTool(name) for name in spec.built_in_tools),
        plan_mode_enabled=spec.plan_mode_enabled,
        model_spend_limit=spec.model_spend_limit,
    )


async def run_scenario_tool_call(
    spec: ScenarioAgentSpec,
    tool: ScenarioTool,
    gate: str,
    idempotency_key: str,
    *,
    failure: Callable[[str], Exception] = ToolExecutionError,
) -> str:
    """The body of a scenario tool: ``run_scenario_tool``, its ``ScenarioToolError`` raised as
    ``failure(text)`` (``ToolExecutionError`` unless the framework has its own failed result).

    Raises:
        Exception: ``failure``'s, for the ``broken`` tool.
    """
    try:
        return await run_scenario_tool(spec, tool.name, gate, idempotency_key)
    except ScenarioToolError as error:
        raise failure(str(error)) from error


def confirm_tool_outcome(
    spec: ScenarioAgentSpec, call: DeferredToolExecution
) -> str | ToolInputRequested:
    """The body of ``confirm`` in its tool Step: the question, or the one write once answered."""
    answers = [answer.answer for answer in call.input_answers]
    result = run_confirm_tool(spec, answers, call.idempotency_key)
    return scenario_input_requested(result) if isinstance(result, ScenarioQuestion) else result


class ReportTaskPoller:
    """Polls the ``report`` tool's job: a ``ToolTaskPoller`` over ``poll_report_task``."""

    def __init__(self, spec: ScenarioAgentSpec) -> None:
        self._spec = spec

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """The job's state: its result, a question, or still running.

        Raises:
            RunnerContractError: When the call has no task to poll.
        """
        if poll.tool_call.task_id is None:
            raise RunnerContractError(
                f"tool call {poll.tool_call.tool_call_id} has no task to poll"
            )
        return poll_report_task(self._spec, poll)


class ScenarioRunnerBase(ABC, Generic[ToolT]):
    """The base of an adapter's scenario runner; ``scenario_runner()`` is its ``ScenarioRunner``.

    A subclass sets ``name`` and writes the framework's pieces: ``scenario_tool``,
    ``confirm_tool``, ``report_tool`` and ``mcp_tool`` in the framework's tool type, and
    ``build_runner`` around them (with the scripted model answering through ``scripted_reply``).
    The base builds the tool list, the tool policies and the session options of the spec.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class MyTool:  # the framework's tool type
        ...     name: str
        >>> class MyScenarioRunner(ScenarioRunnerBase[MyTool]):
        ...     name = "my-framework"
        ...     def scenario_tool(self, spec, tool): return MyTool(tool.name)
        ...     def confirm_tool(self, spec): return MyTool("confirm")
        ...     def report_tool(self, spec): return MyTool("report")
        ...     def mcp_tool(self, mcp, listed): return MyTool(listed.name)
        ...     def build_runner(self, spec, tools): ...  # the framework's agent, as a runner
        >>> SCENARIO_RUNNER = MyScenarioRunner().scenario_runner()
        >>> SCENARIO_RUNNER.name
        'my-framework'
    """

    name: ClassVar[str]
    features: ClassVar[frozenset[ScenarioFeature] | None] = None
    """The features the runner supports; ``None``: every one (see ``every_scenario_feature``)."""
    reads_run_in_model_step: ClassVar[bool] = False
    context_window_guard_turns: ClassVar[int | None] = None
    report_classifies_itself: ClassVar[bool] = False
    """``report``'s effect comes from the framework's own tool metadata (or a tool source), so no
    session policy names it."""

    @abstractmethod
    def scenario_tool(self, spec: ScenarioAgentSpec, tool: ScenarioTool) -> ToolT:
        """One of ``spec.tools``: takes ``gate`` (a string), runs ``run_scenario_tool_call``."""

    @abstractmethod
    def confirm_tool(self, spec: ScenarioAgentSpec) -> ToolT:
        """``confirm``: takes ``gate``, runs ``confirm_tool_outcome`` in its tool Step."""

    @abstractmethod
    def report_tool(self, spec: ScenarioAgentSpec) -> ToolT | None:
        """``report``: takes ``gate``, runs ``start_report_task``; its task is polled by a
        ``ReportTaskPoller`` that ``build_runner`` gives the runner. ``None`` when the runner
        offers ``report`` another way (a tool source)."""

    @abstractmethod
    def build_runner(
        self, spec: ScenarioAgentSpec, tools: Sequence[ToolT]
    ) -> AgentFrameworkRunner[Any]:
        """The framework's agent with ``tools`` and the scripted model, as a runner."""

    def mcp_tool(self, mcp: ScenarioMcpTools, listed: Any) -> ToolT:
        """One tool of the scenario MCP server in the framework's tool type (the adapter's own
        MCP wrapper). Needed where ``features`` has ``MCP_TOOLS`` and ``mcp_tools`` is not
        overridden."""
        raise NotImplementedError(f"scenario runner {self.name} offers no MCP tools")

    def mcp_tools(self, spec: ScenarioAgentSpec) -> tuple[list[ToolT], Mapping[str, ToolPolicy]]:
        """The MCP agent's extra tools and their policies: the scenario server, listed now."""
        if not spec.mcp_tools:
            return [], {}
        mcp = list_scenario_mcp_tools(spec)
        return [self.mcp_tool(mcp, listed) for listed in mcp.tools], mcp.tool_policies

    def tool_policies(self, spec: ScenarioAgentSpec) -> dict[str, ToolPolicy]:
        """The policies of the spec's tools (``scenario_tool_policies``: their effects, approvals
        and outcome checks), ``confirm`` (a write, no approval) and ``report`` (a read, unless
        ``report_classifies_itself``). Override to leave out a tool the framework's own metadata
        classifies."""
        policies = scenario_tool_policies(spec)
        policies[CONFIRM_TOOL] = ToolPolicy(
            ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False
        )
        if not self.report_classifies_itself:
            policies[REPORT_TOOL] = ToolPolicy(ToolEffect.READ)
        return policies

    def tool_task_pollers(self, spec: ScenarioAgentSpec) -> dict[str, ToolTaskPoller]:
        """The runner's pollers by tool name: ``report``'s ``ReportTaskPoller``."""
        return {REPORT_TOOL: ReportTaskPoller(spec)}

    def build_flow(self, spec: ScenarioAgentSpec) -> Flow[Any]:
        """The Flow of the scenario agent of ``spec`` under this framework."""
        mcp_tools, mcp_policies = self.mcp_tools(spec)
        report = self.report_tool(spec)
        tools = [
            *(self.scenario_tool(spec, tool) for tool in spec.tools),
            self.confirm_tool(spec),
            *([report] if report is not None else []),
            *mcp_tools,
        ]
        options = scenario_session_options(spec, {**self.tool_policies(spec), **mcp_policies})
        return AgentSessionFlow(
            self.build_runner(spec, tools), flow_type=spec.flow_type, options=options
        )

    def build_context_window_flow(
        self, model: ContextWindowModel, options: AgentSessionOptions
    ) -> AgentSessionFlow:
        """The context window scenario's agent, for a runner that implements
        ``ContextCompactionRunner``; a subclass that does not override it skips that scenario."""
        raise NotImplementedError(f"scenario runner {self.name} has no context window agent")

    def scenario_runner(self) -> ScenarioRunner:
        """This runner as the ``ScenarioRunner`` the package's entry point names."""
        overridden = (
            type(self).build_context_window_flow is not ScenarioRunnerBase.build_context_window_flow
        )
        extra: dict[str, Any] = {}
        if self.context_window_guard_turns is not None:
            extra["context_window_guard_turns"] = self.context_window_guard_turns
        return ScenarioRunner(
            self.name,
            build_flow=self.build_flow,
            features=self.features if self.features is not None else every_scenario_feature(),
            build_context_window_flow=self.build_context_window_flow if overridden else None,
            reads_run_in_model_step=self.reads_run_in_model_step,
            **extra,
        )

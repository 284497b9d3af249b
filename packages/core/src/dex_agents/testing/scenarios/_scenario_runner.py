"""How a runner joins the shared scenario suite: a ``ScenarioRunner`` behind an entry point.

Each package that provides a runner (the core for Stepwise, each adapter for its framework)
declares one entry point in the group ``dex_agents.scenario_runners``, named after the runner, that
points to a :class:`ScenarioRunner`::

    [project.entry-points."dex_agents.scenario_runners"]
    langgraph = "dex_agents_langgraph.testing:SCENARIO_RUNNER"

The shared suite lists the entry points' names without importing anything, so it runs over
whichever runner packages are installed, and imports a runner's framework only when a test of that
runner builds its Flows. ``DEX_AGENTS_SCENARIO_RUNNERS`` (names separated by commas) narrows the
suite to some runners, such as one adapter's ``ci.sh``; ``DEX_AGENTS_EXTRA_SCENARIO_RUNNERS``
adds runners that no installed package declares (``name=module:attribute``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Final

from dex import Flow

from dex_agents._enum_values import enum_member
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError
from dex_agents.testing._context_window_scenario import ContextWindowRunnerFactory
from dex_agents.testing.scenarios._scenario_agent import ScenarioAgentSpec, scenario_agent_specs

__all__ = [
    "SCENARIO_RUNNERS_ENTRY_POINT_GROUP",
    "SCENARIO_RUNNERS_ENV",
    "SCENARIO_RUNNERS_EXTRA_ENV",
    "ScenarioFeature",
    "ScenarioRunner",
    "UnknownScenarioRunnerError",
    "build_scenario_flows",
    "load_scenario_runner",
    "scenario_runner_names",
]

SCENARIO_RUNNERS_ENTRY_POINT_GROUP: Final = "dex_agents.scenario_runners"
"""The entry point group through which a package adds its runner to the shared suite."""

SCENARIO_RUNNERS_ENV: Final = "DEX_AGENTS_SCENARIO_RUNNERS"
"""Comma-separated runner names that narrow the shared suite; unset or empty runs every one."""

SCENARIO_RUNNERS_EXTRA_ENV: Final = "DEX_AGENTS_EXTRA_SCENARIO_RUNNERS"
"""Runners that no installed package declares, as ``name=module:attribute`` entries separated by
commas (a runner written in a test, such as the smallest adapter of "Writing an adapter"); the
module must be importable in every process of the run (``PYTHONPATH``)."""

_DEFAULT_CONTEXT_WINDOW_GUARD_TURNS: Final = 60
"""Turns of the default suite's context-window guard unless a runner sets fewer."""


class ScenarioFeature(StrEnum):
    """Optional runner features; a scenario that needs one a runner lacks is skipped.

    - ``tool_questions``: the ``confirm`` tool returns ``ToolInputRequested`` before any effect,
      then answers with the user's answer.
    - ``tool_tasks``: the ``report`` tool returns ``ToolTaskStarted`` and the runner's
      ``poll_tool_task`` polls it.
    - ``plan_mode``: the runner is a ``PlanModeRunner``; only then is ``ScenarioPlanAgent`` built.
    - ``mcp_tools``: the runner builds ``ScenarioMcpAgent`` (``spec.mcp_tools``), which also
      offers the tools of the scenario MCP server (``scenario_mcp_server``) through the runner's
      MCP path, with ``SCENARIO_MCP_TOOL_POLICIES``; it needs the mcp extra. Only the MCP
      scenarios build that agent, so its ``build_flow`` may list the server
      (``list_scenario_mcp_tools``).
    """

    TOOL_QUESTIONS = "tool_questions"
    TOOL_TASKS = "tool_tasks"
    PLAN_MODE = "plan_mode"
    MCP_TOOLS = "mcp_tools"


class UnknownScenarioRunnerError(ConfigurationError, LookupError):
    """No installed package provides a scenario runner of that name."""


@dataclass(frozen=True)
class ScenarioRunner:
    """One runner of the shared scenario suite.

    Attributes:
        name: The runner's name, the entry point's name (``stepwise``, ``langgraph``, ...).
        build_flow: Builds the Flow of one ``ScenarioAgentSpec``: the scenario tools with their
            effects and approvals, each run through ``run_scenario_tool`` with the call's
            idempotency key (``ScenarioToolError`` becoming ``ToolExecutionError``); every model
            call answered by ``scripted_reply`` through the framework's own model interface; the
            spec's flow type, approval deadline, built-in tools and spend limit.
        features: The optional scenario features the runner supports.
        build_context_window_flow: For a runner that implements ``ContextCompactionRunner``,
            builds the Flow of ``ContextWindowSessionScenario``; ``None`` skips that scenario.
        reads_run_in_model_step: ``True`` for a whole-turn harness that runs read tools inside
            ``RunModel`` instead of deferring them (the seed's exception for a framework that
            cannot defer them, such as the Claude Agent SDK): those reads run at least once, and
            the scenarios check that contract where they would check a ``CallTool`` per read.
        context_window_guard_turns: Turns of the default suite's ``ContextWindowSessionScenario``
            guard (a 1,400-token window, a tool turn every fourth turn, retention limit 60). 60
            unless a runner's turns are slow (a CLI start per ``RunModel``): then the smallest
            count at which the guard's report still checks what it checks (several summaries,
            retention deleting at several points, bounded state), about 18 turns (a guard of 50
            turns or fewer keeps 20 messages in chunks of 4, so its retention starts early and
            deletes often, with the 2,000-token window and a tool turn every tenth turn). The
            2,000-turn session behind ``DEX_AGENTS_LONG_TESTS=1`` runs for every runner.

    Example:
        >>> def build_my_framework_flow(spec: ScenarioAgentSpec) -> Flow[Any]:
        ...     raise NotImplementedError("the spec's agent, built in my framework")
        >>> SCENARIO_RUNNER = ScenarioRunner(
        ...     "my-framework",
        ...     build_flow=build_my_framework_flow,
        ...     features=frozenset({ScenarioFeature.TOOL_QUESTIONS}),
        ...     context_window_guard_turns=60,
        ... )
    """

    name: str
    build_flow: Callable[[ScenarioAgentSpec], Flow[Any]]
    features: frozenset[ScenarioFeature] = field(default_factory=frozenset)
    build_context_window_flow: ContextWindowRunnerFactory | None = None
    reads_run_in_model_step: bool = False
    context_window_guard_turns: int = _DEFAULT_CONTEXT_WINDOW_GUARD_TURNS

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ConfigurationError("a ScenarioRunner needs a non-blank name")
        if not callable(self.build_flow):
            raise ConfigurationTypeError(f"ScenarioRunner {self.name}: build_flow is not callable")
        turns = self.context_window_guard_turns
        if isinstance(turns, bool) or not isinstance(turns, int):
            raise ConfigurationTypeError(
                f"ScenarioRunner {self.name}: context_window_guard_turns must be an int, "
                f"got {turns!r}"
            )
        if turns < 1:
            raise ConfigurationError(
                f"ScenarioRunner {self.name}: context_window_guard_turns must be positive, "
                f"got {turns}"
            )
        features = frozenset(
            enum_member(ScenarioFeature, feature, f"ScenarioRunner {self.name}: a feature")
            for feature in self.features
        )
        object.__setattr__(self, "features", features)

    def supports(self, feature: ScenarioFeature | str) -> bool:
        """Whether the runner declares ``feature``."""
        return ScenarioFeature(feature) in self.features

    def build_flows(
        self, state_dir: Path, *, mcp_agent: bool = False, per_session_state: bool = False
    ) -> list[Flow[Any]]:
        """Every scenario agent's Flow under this runner, in the order every process uses.

        ``per_session_state``: one Worker serves many tests, each with a directory of its own
        under ``state_dir`` (see ``ScenarioAgentSpec``).

        The MCP agent is built only with ``mcp_agent=True`` (the MCP scenarios), and only for a
        runner that declares ``ScenarioFeature.MCP_TOOLS``: a framework that fixes its tools when
        the agent is built lists the MCP server in ``build_flow``, which no other scenario should
        wait for.
        """
        return [
            self.build_flow(spec)
            for spec in scenario_agent_specs(state_dir, per_session_state=per_session_state)
            if (not spec.plan_mode_enabled or self.supports(ScenarioFeature.PLAN_MODE))
            and (not spec.mcp_tools or (mcp_agent and self.supports(ScenarioFeature.MCP_TOOLS)))
        ]


def _entry_points() -> dict[str, EntryPoint]:
    installed = {ep.name: ep for ep in entry_points(group=SCENARIO_RUNNERS_ENTRY_POINT_GROUP)}
    return {**installed, **_extra_entry_points()}


def _extra_entry_points() -> dict[str, EntryPoint]:
    extra: dict[str, EntryPoint] = {}
    for entry in os.environ.get(SCENARIO_RUNNERS_EXTRA_ENV, "").split(","):
        if not entry.strip():
            continue
        name, separator, value = (part.strip() for part in entry.partition("="))
        if not separator or not name or ":" not in value:
            raise ConfigurationError(
                f"{SCENARIO_RUNNERS_EXTRA_ENV} takes name=module:attribute entries separated by "
                f"commas, got {entry!r}"
            )
        extra[name] = EntryPoint(name, value, SCENARIO_RUNNERS_ENTRY_POINT_GROUP)
    return extra


def scenario_runner_names() -> list[str]:
    """The names of the installed scenario runners, sorted, narrowed by
    ``DEX_AGENTS_SCENARIO_RUNNERS`` when it is set. Imports no runner.

    Raises:
        UnknownScenarioRunnerError: ``DEX_AGENTS_SCENARIO_RUNNERS`` names a runner that no
            installed package provides.
    """
    installed = _entry_points()
    wanted = [name.strip() for name in os.environ.get(SCENARIO_RUNNERS_ENV, "").split(",")]
    wanted = [name for name in wanted if name]
    if not wanted:
        return sorted(installed)
    unknown = sorted(set(wanted) - set(installed))
    if unknown:
        raise UnknownScenarioRunnerError(
            f"{SCENARIO_RUNNERS_ENV} names {', '.join(unknown)}, which no installed package "
            f"provides; installed runners: {', '.join(sorted(installed)) or '(none)'}"
        )
    return sorted(set(wanted))


@cache
def load_scenario_runner(name: str) -> ScenarioRunner:
    """Import the scenario runner ``name`` from its package's entry point.

    Raises:
        UnknownScenarioRunnerError: No installed package provides ``name``.
        ConfigurationTypeError: The entry point does not point to a ScenarioRunner of that name.
    """
    installed = _entry_points()
    if name not in installed:
        raise UnknownScenarioRunnerError(
            f"no installed package provides the scenario runner {name!r}; installed runners: "
            f"{', '.join(sorted(installed)) or '(none)'}"
        )
    runner = installed[name].load()
    if not isinstance(runner, ScenarioRunner) or runner.name != name:
        raise ConfigurationTypeError(
            f"entry point {name} = {installed[name].value} of group "
            f"{SCENARIO_RUNNERS_ENTRY_POINT_GROUP} must be a ScenarioRunner named {name!r}, "
            f"got {runner!r}"
        )
    return runner


def build_scenario_flows(
    name: str, state_dir: Path, *, mcp_agent: bool = False, per_session_state: bool = False
) -> list[Flow[Any]]:
    """Every scenario agent's Flow under the runner ``name``, in a fixed order; the MCP agent
    too with ``mcp_agent=True`` when the runner supports it (see ``ScenarioRunner.build_flows``).

    Raises:
        UnknownScenarioRunnerError: No installed package provides ``name``.
    """
    return load_scenario_runner(name).build_flows(
        state_dir, mcp_agent=mcp_agent, per_session_state=per_session_state
    )

"""The runners the shared scenarios run under: every installed ``ScenarioRunner``.

Runner packages register through the entry point group ``dex_agents.scenario_runners`` (see
``dex_agents.testing.scenarios._scenario_runner``); ``DEX_AGENTS_SCENARIO_RUNNERS`` narrows the
list. Names are read without importing any runner, so a framework is imported only when a test of
its runner builds the Flows.
"""

from __future__ import annotations

from dex_agents.testing.scenarios import (
    ScenarioFeature,
    build_scenario_flows,
    load_scenario_runner,
    scenario_runner_names,
)

__all__ = ["RUNNER_NAMES", "build_scenario_flows", "reads_run_in_model_step", "runner_supports"]

RUNNER_NAMES: list[str] = scenario_runner_names()
"""The runner names of this test session, sorted."""


def runner_supports(runner: str, feature: ScenarioFeature | str) -> bool:
    """Whether ``runner`` declares ``feature``."""
    return load_scenario_runner(runner).supports(feature)


def reads_run_in_model_step(runner: str) -> bool:
    """Whether ``runner`` is a whole-turn harness that runs reads inside ``RunModel`` (at least
    once, repeated by a ``RunModel`` retry) instead of in a ``CallTool`` Step each."""
    return load_scenario_runner(runner).reads_run_in_model_step

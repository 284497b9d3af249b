"""``dex_agents_google_adk.testing``: the reference ADK agent and the shared suite's runner.

:func:`reference_agent` is the one ``LlmAgent`` of tools and a scripted model (a ``BaseLlm``) that
the suite's runner and the benchmark agent build. :data:`SCENARIO_RUNNER` (a
:class:`GoogleAdkScenarioRunner`) builds the scenario agent as such an ``LlmAgent``; the package's
entry point ``google-adk`` in the group ``dex_agents.scenario_runners`` points to it. Only the
scenario runner needs ``dex_agents.testing`` (the ``testing`` extra of ``dex-agents``), and it is
imported when first asked for.

Example:
    >>> from dex_agents.testing.scenarios import ScenarioAgentSpec
    >>> flow = SCENARIO_RUNNER.build_flow(ScenarioAgentSpec("ScenarioAgent", state_dir))
"""

from dex_agents.adapters import scenario_runner_getattr

from dex_agents_google_adk.testing._reference_agent import reference_agent

__all__ = ["SCENARIO_RUNNER", "GoogleAdkScenarioRunner", "reference_agent"]

# SCENARIO_RUNNER and the runner class on first use: the scenario runner imports dex_agents.testing.
__getattr__ = scenario_runner_getattr(__name__, "GoogleAdkScenarioRunner")

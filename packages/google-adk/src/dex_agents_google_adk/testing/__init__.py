"""``dex_agents_google_adk.testing``: the Google ADK runner of the shared scenario suite.

:data:`SCENARIO_RUNNER` (a :class:`GoogleAdkScenarioRunner`) builds the scenario agent as an ADK
``LlmAgent`` whose model is a scripted ``BaseLlm`` (:class:`ScenarioLlm`); the package's entry
point ``google-adk`` in the group ``dex_agents.scenario_runners`` points to it.
:func:`reference_agent` is the one ``LlmAgent`` of tools and a scripted model that the suite's
runner and the benchmark agent build. Needs ``dex_agents.testing`` (the ``testing`` extra of ``dex-agents``).

Example:
    >>> from dex_agents.testing.scenarios import ScenarioAgentSpec
    >>> flow = SCENARIO_RUNNER.build_flow(ScenarioAgentSpec("ScenarioAgent", state_dir))
"""

from dex_agents_google_adk.testing._reference_agent import reference_agent
from dex_agents_google_adk.testing._scenario_runner import (
    SCENARIO_RUNNER,
    ContextWindowLlm,
    GoogleAdkScenarioRunner,
    ScenarioLlm,
    ScenarioReportTool,
)

__all__ = [
    "SCENARIO_RUNNER",
    "ContextWindowLlm",
    "GoogleAdkScenarioRunner",
    "ScenarioLlm",
    "ScenarioReportTool",
    "reference_agent",
]

"""``dex_agents_strands.testing``: a scripted Strands model and the shared suite's runner.

``ScriptedModel`` is a Strands ``Model`` whose replies come from a function, for tests and
examples (no provider, no key); ``reference_agent`` builds a ``strands.Agent`` from plain tools and
that model; ``SCENARIO_RUNNER`` runs the shared scenario suite on Strands. Only the scenario runner
imports ``dex_agents.testing``, when it is first asked for; the runtime modules of the adapter
never import this package.

Example:
    >>> agent = reference_agent(lambda call: text_reply(f"Echo: {call.last_user_text()}"))
"""

from dex_agents.adapters import scenario_runner_getattr

from dex_agents_strands.testing._reference_agent import reference_agent
from dex_agents_strands.testing._scripted_model import (
    ModelCall,
    ReplyFunction,
    ScriptedModel,
    text_reply,
    tool_use_reply,
)

__all__ = [
    "SCENARIO_RUNNER",
    "ModelCall",
    "ReplyFunction",
    "ScriptedModel",
    "StrandsScenarioRunner",
    "reference_agent",
    "text_reply",
    "tool_use_reply",
]

# SCENARIO_RUNNER and the runner class on first use: the scenario runner imports dex_agents.testing.
__getattr__ = scenario_runner_getattr(__name__, "StrandsScenarioRunner")

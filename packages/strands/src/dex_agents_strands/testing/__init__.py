"""``dex_agents_strands.testing``: a scripted Strands model and the shared suite's runner.

``ScriptedModel`` is a Strands ``Model`` whose replies come from a function, for tests and
examples (no provider, no key); ``reference_agent`` builds a ``strands.Agent`` from plain tools and
that model; ``SCENARIO_RUNNER`` runs the shared scenario suite on Strands.
This module imports ``dex_agents.testing``; the runtime modules of the adapter never import it.

Example:
    >>> agent = reference_agent(lambda call: text_reply(f"Echo: {call.last_user_text()}"))
"""

from dex_agents_strands.testing._reference_agent import reference_agent
from dex_agents_strands.testing._scenario_runner import (
    SCENARIO_RUNNER,
    StrandsScenarioRunner,
    build_strands_context_window_flow,
    build_strands_flow,
)
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
    "build_strands_context_window_flow",
    "build_strands_flow",
    "reference_agent",
    "text_reply",
    "tool_use_reply",
]

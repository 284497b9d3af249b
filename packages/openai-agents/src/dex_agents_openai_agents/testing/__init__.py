"""``dex_agents_openai_agents.testing``: an SDK ``Model`` whose replies come from a function, and the
shared suite's runner.

``ReplyFunctionModel`` implements the SDK's ``agents.Model`` interface, so the SDK's real run loop
drives it exactly as it drives ``OpenAIResponsesModel``: each call asks the reply function for the
response's output items (``assistant_message``, ``function_call``); :func:`reference_agent` is
the one agent of tools and that model, which the suite's runner and the benchmark agent build.
:data:`SCENARIO_RUNNER` builds
the shared scenario agent (the package's entry point ``openai-agents`` in the group
``dex_agents.scenario_runners``); it and ``OpenAIAgentsScenarioRunner`` are imported on first use,
so the scripted model alone needs no ``dex_agents.testing``.

Example:
    >>> async def reply(call: ModelCallInput) -> list[TResponseOutputItem]:
    ...     return [assistant_message(f"Echo: {call.last_user_text()}")]
    >>> agent = Agent(name="echo", model=ReplyFunctionModel(reply))
"""

from dex_agents.adapters import scenario_runner_getattr

from dex_agents_openai_agents.testing._reference_agent import reference_agent
from dex_agents_openai_agents.testing._scripted_model import (
    ModelCallInput,
    ReplyFunction,
    ReplyFunctionModel,
    assistant_message,
    function_call,
)

__all__ = [
    "SCENARIO_RUNNER",
    "ModelCallInput",
    "OpenAIAgentsScenarioRunner",
    "ReplyFunction",
    "ReplyFunctionModel",
    "assistant_message",
    "function_call",
    "reference_agent",
]


# SCENARIO_RUNNER and the runner class on first use: the scenario runner imports dex_agents.testing.
__getattr__ = scenario_runner_getattr(__name__, "OpenAIAgentsScenarioRunner")

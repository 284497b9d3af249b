"""``dex_agents_pydantic_ai.testing``: a scripted Pydantic AI model and the shared suite's runner.

:func:`scripted_function_model` is a ``FunctionModel`` whose whole responses come from a function
and stream back through Pydantic AI's own ``stream_function``, so an agent runs its streamed graph
with no provider; :func:`turn_view` reads the turn from a request's messages;
:func:`reference_agent` is the one agent of tools and that model, which the suite's runner and
the benchmark agent build. :data:`SCENARIO_RUNNER` builds the shared scenario agent (the
package's entry point ``pydantic-ai`` in the group ``dex_agents.scenario_runners``); it and
``PydanticAIScenarioRunner`` are imported on first use, so the scripted model alone needs no
``dex_agents.testing``.

Example:
    >>> async def respond(messages, info):
    ...     return ModelResponse(parts=[TextPart(f"Echo: {turn_view(messages).user_text}")])
    >>> agent = Agent(scripted_function_model(respond, model_name="echo"))
"""

from dex_agents.adapters import scenario_runner_getattr

from dex_agents_pydantic_ai.testing._reference_agent import reference_agent
from dex_agents_pydantic_ai.testing._scripted_model import (
    TurnView,
    measured_input_tokens,
    scripted_function_model,
    turn_view,
)

__all__ = [
    "SCENARIO_RUNNER",
    "PydanticAIScenarioRunner",
    "TurnView",
    "measured_input_tokens",
    "reference_agent",
    "scripted_function_model",
    "turn_view",
]


# SCENARIO_RUNNER and the runner class on first use: the scenario runner imports dex_agents.testing.
__getattr__ = scenario_runner_getattr(__name__, "PydanticAIScenarioRunner")

"""``dex_agents_pydantic_ai.testing``: a scripted Pydantic AI model and the shared suite's runner.

:func:`scripted_function_model` is a ``FunctionModel`` whose whole responses come from a function
and stream back through Pydantic AI's own ``stream_function``, so an agent runs its streamed graph
with no provider; :func:`turn_view` reads the turn from a request's messages. :data:`SCENARIO_RUNNER`
builds the shared scenario agent (the package's entry point ``pydantic-ai`` in the group
``dex_agents.scenario_runners``). Needs ``dex_agents.testing``.

Example:
    >>> async def respond(messages, info):
    ...     return ModelResponse(parts=[TextPart(f"Echo: {turn_view(messages).user_text}")])
    >>> agent = Agent(scripted_function_model(respond, model_name="echo"))
"""

from dex_agents_pydantic_ai.testing._scenario_runner import (
    SCENARIO_RUNNER,
    PydanticAIScenarioRunner,
)
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
    "scripted_function_model",
    "turn_view",
]

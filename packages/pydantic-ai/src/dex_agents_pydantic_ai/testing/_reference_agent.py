"""The reference Pydantic AI agent: tools and the scripted model, as one ``pydantic_ai.Agent``.

The shared suite's runner and the benchmark agent (``benchmarks/adapter_agents``) build their
agents here instead of each writing the same ``Agent(...)`` call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent, Tool
from pydantic_ai.capabilities import AbstractCapability

from dex_agents_pydantic_ai.testing._scripted_model import Script, scripted_function_model

__all__ = ["reference_agent"]


def reference_agent(
    script: Script,
    tools: Sequence[Tool[Any]] = (),
    *,
    name: str = "reference",
    instructions: str | None = None,
    model_name: str = "scripted",
    stream: bool = True,
    capabilities: Sequence[AbstractCapability[None]] = (),
) -> Agent[None, str]:
    """A ``pydantic_ai.Agent`` whose model is ``scripted_function_model(script)``.

    ``stream=False`` makes its model one that cannot stream (no ``stream_function``).

    Example:
        >>> async def script(messages, info):
        ...     return ModelResponse(parts=[TextPart(f"Echo: {turn_view(messages).user_text}")])
        >>> agent = reference_agent(script, [Tool(lookup_order)], instructions="Help with orders.")
    """
    return Agent(
        scripted_function_model(script, model_name=model_name, stream=stream),
        name=name,
        instructions=instructions,
        tools=list(tools),
        capabilities=list(capabilities),
    )

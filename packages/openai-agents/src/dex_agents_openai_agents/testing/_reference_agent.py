"""The reference OpenAI Agents SDK agent: tools and the scripted model, as one ``agents.Agent``.

The shared suite's runner and the benchmark agent (``benchmarks/adapter_agents``) build their
agents here instead of each writing the same ``Agent(...)`` call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

from agents import Agent, Tool, function_tool

from dex_agents_openai_agents.testing._scripted_model import ReplyFunction, ReplyFunctionModel

__all__ = ["reference_agent"]


def reference_agent(
    reply: ReplyFunction | None,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    *,
    name: str = "reference",
    instructions: str | None = None,
    model_name: str = "reply-function",
) -> Agent[Any]:
    """An ``agents.Agent`` whose model is ``ReplyFunctionModel(reply)``.

    ``reply=None`` leaves the model to the run config (a runner's ``run_config`` that picks the
    model per turn). A plain function in ``tools`` becomes a ``function_tool`` (its name, and its
    docstring as the description); an SDK ``Tool`` is passed as it is.

    Example:
        >>> async def reply(call: ModelCallInput) -> list[TResponseOutputItem]:
        ...     return [assistant_message(f"Echo: {call.last_user_text()}")]
        >>> agent = reference_agent(reply, [lookup_order], instructions="Help with orders.")
    """
    return Agent(
        name=name,
        instructions=instructions,
        model=ReplyFunctionModel(reply, model=model_name) if reply is not None else None,
        tools=[_tool(item) for item in tools],
    )


def _tool(item: Tool | Callable[..., Any]) -> Tool:
    if inspect.isfunction(item):
        return function_tool(item)
    return cast(Tool, item)

"""The reference Strands agent: plain tools and the scripted model, as one ``strands.Agent``.

The shared suite's runner, the adapter's tests and the benchmark agent build their agents here
instead of each writing the same ``Agent(...)`` call.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from strands import Agent, tool
from strands.hooks import HookProvider

from dex_agents_strands.testing._scripted_model import ReplyFunction, ScriptedModel

__all__ = ["reference_agent"]


def reference_agent(
    reply: ReplyFunction,
    tools: Sequence[Any] = (),
    *,
    system_prompt: str | None = None,
    model_id: str = "scripted",
    hooks: Sequence[HookProvider] = (),
    name: str | None = None,
) -> Agent:
    """A ``strands.Agent`` whose model is ``ScriptedModel(reply)``.

    A plain function in ``tools`` becomes a ``@tool`` (its name, and its docstring as the
    description and argument help); anything else Strands takes as a tool (a ``@tool``, an
    ``AgentTool``, a ``ToolProvider`` such as ``MCPClient``) is passed as it is. The agent prints
    nothing (``callback_handler=None``).

    Raises:
        ValueError: From Strands, for a function it cannot make a tool of.

    Example:
        >>> def lookup_order(order_id: str) -> str:
        ...     \"\"\"Look up an order.\"\"\"
        ...     return "shipped"
        >>> agent = reference_agent(lambda call: text_reply("Shipped."), [lookup_order])
    """
    return Agent(
        model=ScriptedModel(reply, model_id=model_id),
        tools=[tool(item) if inspect.isfunction(item) else item for item in tools],
        system_prompt=system_prompt,
        hooks=list(hooks),
        name=name,
        callback_handler=None,
    )
